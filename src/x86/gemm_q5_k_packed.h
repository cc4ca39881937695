/* gemm_q5_k_packed.h: the packed layout of a Q5_K weight (mf_weight.packed, cpu_gemm.h), read by the
 * AVX2 GEMM (gemm_q5_k_avx2.c: a 64-byte vector is two 32-byte vectors of eight rows). Plain C.
 *
 * Per panel of 16 rows and super-block, 44 vectors of 64 bytes (the 16 super-blocks' 2816 bytes in
 * the file): vector k, lane r = the file block's 4-byte word k of row r, so vector 0 holds d | dmin
 * << 16, vectors 1..3 the scale words u0, u1, u2, vectors 4..11 the qh words (qh bytes 4p..4p+3 in
 * vector 4 + p: the fifth bits of values 4p..4p+3 of every sub-block) and vectors 12..43 the qs words
 * (word 8c + p: bytes 32c + 4p..+3 of the nibbles, sub-block 2c low and 2c + 1 high). Panel k starts
 * at k * 16 * row_bytes, where its rows start in the file, its super-blocks in order; rows past the
 * matrix are zero. */
#ifndef MF_X86_GEMM_Q5_K_PACKED_H
#define MF_X86_GEMM_Q5_K_PACKED_H

#include "cpu/cpu_gemm.h"
#include "quant/quant.h"

#include <stddef.h>
#include <string.h>

enum {
    MF_Q5K_PVEC = 44, /* vectors of a packed super-block */
    MF_Q5K_PDM = 0,   /* d | dmin, then the three scale words */
    MF_Q5K_PQH = 4,   /* the qh words */
    MF_Q5K_PQS = 12,  /* the qs words */
};
MF_STATIC_ASSERT(sizeof(mf_block_q5_K) == MF_Q5K_PVEC * 4, "a packed Q5_K super-block is the file block's words");

static inline size_t mf_q5_k_packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 256); }

static inline int mf_q5_k_word(int k) { return k; }

static inline void mf_q5_k_pack(const mf_weight *w, void *dst) {
    mf_panel16_pack_words(w, dst, 256, sizeof(mf_block_q5_K), MF_Q5K_PVEC, mf_q5_k_word);
}

/* Row r of the packed weight in the file's super-blocks (mf_cpu_gemm.packed_row). */
static inline void mf_q5_k_packed_row(const mf_weight *w, int64_t r, void *dst) {
    const int64_t nsb = w->ne[0] / 256;
    const int lane = (int)(r % 16);
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(r - lane) * w->row_bytes;
    for (int64_t sb = 0; sb < nsb; sb++)
        mf_panel16_words((uint8_t *)dst + (size_t)sb * sizeof(mf_block_q5_K), p + (size_t)sb * MF_Q5K_PVEC * 64,
                         MF_Q5K_PVEC, lane);
}

#endif /* MF_X86_GEMM_Q5_K_PACKED_H */
