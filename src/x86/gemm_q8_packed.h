/* gemm_q8_packed.h: the packed layout of a Q8_0 or Q5_0 weight (mf_weight.packed, cpu_gemm.h), shared
 * by the AVX-512 GEMMs (gemm_q8_avx512.h: sixteen rows a 64-byte vector) and the AVX2 Q8_0 one
 * (gemm_q8_avx2.h: the same bytes as two 32-byte vectors of eight rows). Plain C.
 *
 * The file's bytes regrouped per panel of 16 rows and block: Q8_0 eight 64-byte vectors, vector p
 * lane r = row r's qs dword p (its signed weights 4p..4p+3); Q5_0 four, vector k lane r = row r's qs
 * dword k (the low nibbles values 4k.., the high ones 16 + 4k..), then one with row r's qh in lane r;
 * then the 16 rows' half-float scales. Q8G_PBLK = 16 blocks of the file (544 bytes for Q8_0, 352 for
 * Q5_0). Panel k starts at k * 16 * row_bytes, where its rows start in the file, its blocks one after
 * another, rows past the matrix zero: a decode streams each matrix front to back, and a panel slice
 * costs the start values (and Q5_0's unpacking), not a transpose. */
#ifndef MF_X86_GEMM_Q8_PACKED_H
#define MF_X86_GEMM_Q8_PACKED_H

#include "cpu/cpu_gemm.h"
#include "quant/quant.h"

#include <stddef.h>
#include <string.h>

#define Q8G_PBLK(q5) ((size_t)((q5) ? 352 : 544))
#define Q8G_POFF_D(q5) ((size_t)((q5) ? 320 : 512))

static inline void q8g_pack(const mf_weight *w, void *dst, bool q5) {
    const int64_t nb = w->ne[0] / 32, N = w->ne[1];
    const size_t pblk = Q8G_PBLK(q5), bb = q5 ? sizeof(mf_block_q5_0) : sizeof(mf_block_q8_0);
    uint8_t *out = dst;
    for (int64_t ob = 0; ob < N; ob += 16)
        for (int64_t i = 0; i < nb; i++, out += pblk) {
            memset(out, 0, pblk);
            for (int r = 0; r < 16 && ob + r < N; r++) {
                const uint8_t *b = (const uint8_t *)w->data + (size_t)(ob + r) * w->row_bytes + (size_t)i * bb;
                if (q5) {
                    for (int k = 0; k < 4; k++) memcpy(out + 64 * k + 4 * r, b + offsetof(mf_block_q5_0, qs) + 4 * k, 4);
                    memcpy(out + 256 + 4 * r, b + offsetof(mf_block_q5_0, qh), 4);
                } else {
                    for (int p = 0; p < 8; p++) memcpy(out + 64 * p + 4 * r, b + offsetof(mf_block_q8_0, qs) + 4 * p, 4);
                }
                memcpy(out + Q8G_POFF_D(q5) + 2 * r, b, 2); /* d, each type's first field */
            }
        }
}

/* Row r of the packed weight in the file's blocks (mf_cpu_gemm.packed_row). */
static inline void q8g_packed_row(const mf_weight *w, int64_t r, void *dst, bool q5) {
    const int64_t nb = w->ne[0] / 32;
    const int lane = (int)(r % 16);
    const size_t pblk = Q8G_PBLK(q5), bb = q5 ? sizeof(mf_block_q5_0) : sizeof(mf_block_q8_0);
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(r - lane) * w->row_bytes;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * pblk;
        uint8_t *o = (uint8_t *)dst + (size_t)i * bb;
        mf_panel16_half(o, b + Q8G_POFF_D(q5), lane);
        if (q5) {
            mf_panel16_words(o + offsetof(mf_block_q5_0, qs), b, 4, lane);
            mf_panel16_words(o + offsetof(mf_block_q5_0, qh), b + 256, 1, lane);
        } else {
            mf_panel16_words(o + offsetof(mf_block_q8_0, qs), b, 8, lane);
        }
    }
}

#endif /* MF_X86_GEMM_Q8_PACKED_H */
