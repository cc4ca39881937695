/* gemm_q_1_packed.h: the packed layout of a Q4_1 or Q5_1 weight (mf_weight.packed, cpu_gemm.h),
 * shared by the AVX-512 GEMMs (gemm_q_1_avx512.h: sixteen rows a 64-byte vector) and the AVX2 Q4_1 one
 * (gemm_q8_avx2.h: the same bytes as two 32-byte vectors of eight rows). Plain C.
 *
 * The file's bytes regrouped per panel of 16 rows and block: four 64-byte vectors, vector k lane r =
 * row r's qs dword k; for Q5_1 one more, lane r = row r's qh; then the 16 rows' half-float d_w, then
 * their m_w (32 bytes each): Q1G_PBLK = 16 blocks of the file (320 bytes for Q4_1, 384 for Q5_1).
 * Panel k starts at k * 16 * row_bytes, where its rows start in the file, its blocks one after
 * another, rows past the matrix zero: a decode streams each matrix front to back, and a panel slice
 * costs splitting the nibbles and widening the scales, not a transpose. Blocks stay 64-byte aligned. */
#ifndef MF_X86_GEMM_Q_1_PACKED_H
#define MF_X86_GEMM_Q_1_PACKED_H

#include "cpu/cpu_gemm.h"

#include <stddef.h>
#include <string.h>

#define Q1G_PBLK(has_qh) ((size_t)((has_qh) ? 6 : 5) * 64)

static inline void q1g_pack(const mf_weight *w, void *dst, size_t block_bytes, size_t qs_off, bool has_qh) {
    const int64_t nb = w->ne[0] / 32, N = w->ne[1];
    const size_t pblk = Q1G_PBLK(has_qh), dm = pblk - 64;
    uint8_t *out = dst;
    for (int64_t ob = 0; ob < N; ob += 16)
        for (int64_t i = 0; i < nb; i++, out += pblk) {
            memset(out, 0, pblk);
            for (int r = 0; r < 16 && ob + r < N; r++) {
                const uint8_t *b = (const uint8_t *)w->data + (size_t)(ob + r) * w->row_bytes + (size_t)i * block_bytes;
                for (int k = 0; k < 4; k++) memcpy(out + 64 * k + 4 * r, b + qs_off + 4 * k, 4);
                if (has_qh) memcpy(out + 256 + 4 * r, b + 4, 4);
                memcpy(out + dm + 2 * r, b, 2);          /* d */
                memcpy(out + dm + 32 + 2 * r, b + 2, 2); /* m */
            }
        }
}

/* Row r of the packed weight in the file's blocks (mf_cpu_gemm.packed_row). */
static inline void q1g_packed_row(const mf_weight *w, int64_t r, void *dst, size_t block_bytes, size_t qs_off,
                                  bool has_qh) {
    const int64_t nb = w->ne[0] / 32;
    const int lane = (int)(r % 16);
    const size_t pblk = Q1G_PBLK(has_qh), dm = pblk - 64;
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(r - lane) * w->row_bytes;
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * pblk;
        uint8_t *o = (uint8_t *)dst + (size_t)i * block_bytes;
        mf_panel16_half(o, b + dm, lane);          /* d */
        mf_panel16_half(o + 2, b + dm + 32, lane); /* m */
        mf_panel16_words(o + qs_off, b, 4, lane);
        if (has_qh) mf_panel16_words(o + 4, b + 256, 1, lane);
    }
}


#endif /* MF_X86_GEMM_Q_1_PACKED_H */
