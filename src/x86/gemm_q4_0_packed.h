/* gemm_q4_0_packed.h: the packed layout of a Q4_0 weight (mf_weight.packed, cpu_gemm.h), shared by
 * the AVX-512 GEMM (gemm_q4_0_avx512.c: sixteen rows a 64-byte vector) and the AVX2 one
 * (gemm_q4_0_avx2.c: the same bytes as two 32-byte vectors of eight rows). Plain C.
 *
 * Per panel of 16 rows, per block i, MF_Q40_PBLK = 288 bytes (16 blocks' worth): four 64-byte
 * vectors, vector j lane r = row r's nibble bytes 4j..4j+3 (its values 4j..4j+3 in the low nibbles,
 * 16 + 4j.. in the high ones), then the 16 rows' half-float scales. Panel k starts at k * 16 *
 * row_bytes, where its rows start in the file, and its blocks follow each other; rows past the
 * matrix are zero. So a panel slice is a GEMM's panel but for splitting the nibbles and widening the
 * scales, and a decode streams each matrix front to back. Block starts are 32 bytes apart from a
 * cache line every other block: the loads are unaligned. */
#ifndef MF_X86_GEMM_Q4_0_PACKED_H
#define MF_X86_GEMM_Q4_0_PACKED_H

#include "cpu/cpu_gemm.h"

#include <stddef.h>
#include <string.h>

#define MF_Q40_PBLK (4 * 64 + 16 * 2)

static inline size_t mf_q4_0_packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 32); }

static inline void mf_q4_0_pack(const mf_weight *w, void *dst) {
    const int64_t nb = w->ne[0] / 32, N = w->ne[1];
    uint8_t *out = dst;
    for (int64_t ob = 0; ob < N; ob += 16)
        for (int64_t i = 0; i < nb; i++, out += MF_Q40_PBLK) {
            memset(out, 0, MF_Q40_PBLK);
            for (int r = 0; r < 16 && ob + r < N; r++) {
                const mf_block_q4_0 *b = (const mf_block_q4_0 *)((const uint8_t *)w->data + (size_t)(ob + r) * w->row_bytes) + i;
                for (int j = 0; j < 4; j++) memcpy(out + 64 * j + 4 * r, b->qs + 4 * j, 4);
                memcpy(out + 256 + 2 * r, &b->d, 2);
            }
        }
}

/* Row r of the packed weight in the file's blocks (mf_cpu_gemm.packed_row). */
static inline void mf_q4_0_packed_row(const mf_weight *w, int64_t r, void *dst) {
    const int64_t nb = w->ne[0] / 32;
    const int lane = (int)(r % 16);
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(r - lane) * w->row_bytes;
    for (int64_t i = 0; i < nb; i++) {
        uint8_t *o = (uint8_t *)dst + (size_t)i * sizeof(mf_block_q4_0);
        mf_panel16_half(o, p + (size_t)i * MF_Q40_PBLK + 256, lane);
        mf_panel16_words(o + offsetof(mf_block_q4_0, qs), p + (size_t)i * MF_Q40_PBLK, 4, lane);
    }
}

#endif /* MF_X86_GEMM_Q4_0_PACKED_H */
