/* simd_kernels.h: what the per-instruction-set kernel files give the dispatcher (simd.c): one table
 * per level, indexed by mf_type, filled once by that level's register functions. Internal to
 * src/simd. */
#ifndef MF_SIMD_KERNELS_H
#define MF_SIMD_KERNELS_H

#include "simd/simd.h"

typedef struct mf_simd_table {
    /* by weight type: the dot and its activation type (checked against the traits at dispatch, so a
     * kernel written for another activation format is never used by mistake) */
    mf_vec_dot_fn vec_dot[MF_TYPE_COUNT];
    mf_type vec_dot_act[MF_TYPE_COUNT];
    mf_gemm_fn gemm[MF_TYPE_COUNT];
    /* by activation type */
    mf_quantize_fn quantize[MF_TYPE_COUNT];
} mf_simd_table;

/* Each fills the entries it has kernels for and leaves the rest NULL. Only called when the CPU
 * supports the level. */
void mf_simd_register_avx2(mf_simd_table *t);
void mf_simd_register_avx2_k(mf_simd_table *t);
void mf_simd_register_avx2_iq4(mf_simd_table *t);
void mf_simd_register_avx2_act(mf_simd_table *t);
void mf_simd_register_avx2_float(mf_simd_table *t);
void mf_simd_register_avx512(mf_simd_table *t);
void mf_simd_register_avx512_k(mf_simd_table *t);
void mf_simd_register_avx512_float(mf_simd_table *t);
void mf_simd_register_avx512_act(mf_simd_table *t);
void mf_simd_register_neon(mf_simd_table *t);
/* The AVX2 float tile built for 32 registers (dot_float_wide_avx512.c); NULL for other types. */
mf_gemm_fn mf_x86_gemm_float_wide(mf_type t);

/* Defines `static void name(...)`, an mf_gemm_fn that calls the dot `dot` once per (row, column)
 * pair, row by row so each weight row is still in cache for its columns: the tile entry for types
 * without a dedicated multi-row kernel. */
#define MF_SIMD_GEMM_FROM_DOT(name, dot)                                                           \
    static void name(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,     \
                     size_t a_stride, float *out, size_t out_stride) {                             \
        for (int r = 0; r < nr; r++)                                                               \
            for (int c = 0; c < nc; c++)                                                           \
                out[(size_t)c * out_stride + (size_t)r] =                                          \
                    dot(n, (const char *)w + (size_t)r * w_stride, (const char *)a + (size_t)c * a_stride); \
    }

/* Register weight type W's dot (against activation type A) and its tile function. */
#define MF_SIMD_SET_DOT(tab, W, A, dot, gemm_fn)                                                     \
    do {                                                                                           \
        (tab)->vec_dot[MF_TYPE_##W] = (dot);                                                       \
        (tab)->vec_dot_act[MF_TYPE_##W] = MF_TYPE_##A;                                             \
        (tab)->gemm[MF_TYPE_##W] = (gemm_fn);                                                      \
    } while (0)

#endif /* MF_SIMD_KERNELS_H */
