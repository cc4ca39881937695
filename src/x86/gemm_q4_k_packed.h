/* gemm_q4_k_packed.h: the packed layout of a Q4_K weight (mf_weight.packed, cpu_gemm.h), shared by the
 * AVX-512 GEMM (gemm_q4_k_avx512.c: sixteen rows a 64-byte vector) and the AVX2 one
 * (gemm_q4_k_avx2.c: the same bytes as two 32-byte vectors of eight rows). Plain C.
 *
 * Per panel of 16 rows and super-block, 36 vectors of 64 bytes (the 16 super-blocks' 2304 bytes in
 * the file): vectors 0..31, lane r = qs dword j of row r; vector 32, lane r = row r's d | dmin << 16;
 * vectors 33..35, lane r = its scale words u0, u1, u2. Panel k starts at k * 16 * row_bytes, where
 * its rows start in the file, its super-blocks in order; rows past the matrix are zero. The AVX-512
 * GEMM's unpack16 then loads what it otherwise gathers and transposes (MF_Q4K_PVEC vectors a
 * super-block). */
#ifndef MF_X86_GEMM_Q4_K_PACKED_H
#define MF_X86_GEMM_Q4_K_PACKED_H

#include "cpu/cpu_gemm.h"
#include "quant/quant.h"

#include <stddef.h>
#include <string.h>

#define MF_Q4K_PVEC 36

static inline size_t mf_q4_k_packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 256); }

/* The file word of packed vector k: the qs words (after the 16-byte header), then the header's. */
static inline int mf_q4_k_word(int k) { return k < 32 ? 4 + k : k - 32; }

static inline void mf_q4_k_pack(const mf_weight *w, void *dst) {
    mf_panel16_pack_words(w, dst, 256, sizeof(mf_block_q4_K), MF_Q4K_PVEC, mf_q4_k_word);
}

/* Row r of the packed weight in the file's super-blocks (mf_cpu_gemm.packed_row). */
static inline void mf_q4_k_packed_row(const mf_weight *w, int64_t r, void *dst) {
    const int64_t nsb = w->ne[0] / 256;
    const int lane = (int)(r % 16);
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(r - lane) * w->row_bytes;
    for (int64_t sb = 0; sb < nsb; sb++) {
        const uint8_t *b = p + (size_t)sb * MF_Q4K_PVEC * 64;
        uint8_t *o = (uint8_t *)dst + (size_t)sb * sizeof(mf_block_q4_K);
        mf_panel16_words(o + offsetof(mf_block_q4_K, qs), b, 32, lane);
        mf_panel16_words(o, b + 64 * 32, 4, lane); /* d|dmin, the scale words */
    }
}

#endif /* MF_X86_GEMM_Q4_K_PACKED_H */
