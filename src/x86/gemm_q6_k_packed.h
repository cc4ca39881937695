/* gemm_q6_k_packed.h: the packed layout of a Q6_K weight (mf_weight.packed, cpu_gemm.h), read by the
 * AVX2 GEMM (gemm_q6_k_avx2.c: a 64-byte vector is two 32-byte vectors of eight rows). Plain C.
 *
 * Per panel of 16 rows and super-block, the 16 super-blocks' 3360 bytes in the file as 52 vectors of
 * 64 bytes and one run of 32: vector k, lane r = the file block's 4-byte word k of row r (vectors
 * 0..31 the ql words: ql bytes 64j + 4p..+3 in vector 16j + p, bytes 64j + 32 + 4p..+3 in vector
 * 16j + 8 + p; vectors 32..47 the qh words: qh bytes 32j + 4p..+3 in vector 32 + 8j + p; vectors
 * 48..51 the scales, four a word), then the rows' half scales d, row r's at 2r of the run. Panel k
 * starts at k * 16 * row_bytes, where its rows start in the file, its super-blocks in order; rows
 * past the matrix are zero. */
#ifndef MF_X86_GEMM_Q6_K_PACKED_H
#define MF_X86_GEMM_Q6_K_PACKED_H

#include "cpu/cpu_gemm.h"
#include "quant/quant.h"

#include <stddef.h>
#include <string.h>

enum {
    MF_Q6K_PWORDS = 52, /* 64-byte vectors of a packed super-block, then its run of d */
    MF_Q6K_PQH = 32,    /* the qh words */
    MF_Q6K_PSC = 48,    /* the scale words */
    MF_Q6K_PBLK = MF_Q6K_PWORDS * 64 + 32,
};
MF_STATIC_ASSERT(sizeof(mf_block_q6_K) == MF_Q6K_PWORDS * 4 + 2, "a packed Q6_K super-block is the file block's words and d");

static inline size_t mf_q6_k_packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 256); }

static inline void mf_q6_k_pack(const mf_weight *w, void *dst) {
    const int64_t nsb = w->ne[0] / 256, N = w->ne[1];
    uint8_t *out = dst;
    for (int64_t ob = 0; ob < N; ob += 16)
        for (int64_t sb = 0; sb < nsb; sb++, out += MF_Q6K_PBLK) {
            memset(out, 0, MF_Q6K_PBLK);
            for (int r = 0; r < 16 && ob + r < N; r++) {
                const uint8_t *b = (const uint8_t *)w->data + (size_t)(ob + r) * w->row_bytes + (size_t)sb * sizeof(mf_block_q6_K);
                for (int k = 0; k < MF_Q6K_PWORDS; k++) memcpy(out + 64 * k + 4 * r, b + 4 * k, 4);
                memcpy(out + 64 * MF_Q6K_PWORDS + 2 * r, b + offsetof(mf_block_q6_K, d), 2);
            }
        }
}

/* Row r of the packed weight in the file's super-blocks (mf_cpu_gemm.packed_row). */
static inline void mf_q6_k_packed_row(const mf_weight *w, int64_t r, void *dst) {
    const int64_t nsb = w->ne[0] / 256;
    const int lane = (int)(r % 16);
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(r - lane) * w->row_bytes;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b = p + (size_t)sb * MF_Q6K_PBLK;
        uint8_t *o = (uint8_t *)dst + (size_t)sb * sizeof(mf_block_q6_K);
        mf_panel16_words(o, b, MF_Q6K_PWORDS, lane);
        mf_panel16_half(o + offsetof(mf_block_q6_K, d), b + 64 * MF_Q6K_PWORDS, lane);
    }
}

#endif /* MF_X86_GEMM_Q6_K_PACKED_H */
