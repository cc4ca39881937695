/* simd.h: run-time dispatch of the hot CPU kernels. Each entry point returns the fastest
 * implementation this CPU supports (chosen once, by CPU feature detection), falling back to the
 * scalar reference twin in the type-traits table. Callers fetch a function pointer once per op,
 * never inside an inner loop.
 *
 * Levels: scalar (the reference functions), avx2 (AVX2+FMA+F16C+BMI2), avx512 (AVX-512 F/BW/DQ/VL
 * with VNNI), neon (arm64 with the dot-product extension). Nothing is chosen process-wide: the CPU
 * backend asks for the functions of its context's level (mf_cpu_cfg, the *_at entry points); the
 * entry points without a level give the best level's, for tools and tests. */
#ifndef MF_SIMD_H
#define MF_SIMD_H

#include "quant/quant.h"

/* CPU features detected at startup. */
typedef struct mf_cpu_features {
    bool avx2, fma, f16c, bmi2, avx512f, avx512bw, avx512dq, avx512vl, avx512vnni, avxvnni, avx512bf16; /* x86 */
    bool neon, dotprod;                                                                    /* arm64 */
} mf_cpu_features;

typedef enum mf_simd_level {
    MF_SIMD_SCALAR = 0,
    MF_SIMD_AVX2,
    MF_SIMD_AVX512,
    MF_SIMD_NEON,
    MF_SIMD_LEVEL_COUNT
} mf_simd_level;

const mf_cpu_features *mf_simd_cpu_features(void);
/* "scalar", "avx2", "avx512", "neon" (mf_isa_name's spellings). */
const char *mf_simd_level_name(mf_simd_level level);
/* True if this build has kernels for the level and this CPU can run them (scalar always). */
bool mf_simd_level_supported(mf_simd_level level);
/* The best level this CPU and build support (what MF_ISA_AUTO resolves to). */
mf_simd_level mf_simd_best_level(void);
/* Whether the AVX2 level runs its AVX-VNNI builds (vpdpbusd on ymm: Alder Lake and later, Zen 5):
 * the CPU has AVX-VNNI and the environment does not say MINFER_AVXVNNI=0 (read once). They give
 * the same bits as the plain AVX2 kernels, faster. */
bool mf_simd_avxvnni(void);
/* Whether this CPU runs 512-bit operations as two 256-bit halves (AMD Zen 4): then the AVX-512 level
 * multiplies float weights (F32, F16, BF16) with the AVX2 kernels, whose GEMM reaches more of the
 * same multiply-add peak (MINFER_AVX512_FLOAT=avx512 or avx2 overrides, read once). */
bool mf_simd_avx512_narrow(void);

/* Dot of a weight row of type t with an activation row of mf_type_get_traits(t)->vec_dot_type, as
 * the activation quantizers write it (int8 values in [-127, 127]; the kernels rely on it). Equals
 * the reference dot up to float summation order (the integer sums of each block are exact).
 * NULL when the type has no reference dot either. */
mf_vec_dot_fn mf_simd_vec_dot(mf_type t);
/* Quantize an f32 activation row into act_type (Q8_0, Q8_1, Q8_K, F16, BF16); bit-identical to the
 * reference activation quantizer of that type. NULL when there is none. */
mf_quantize_fn mf_simd_quantize_row(mf_type act_type);

/* Multi-row dot ("GEMM tile"), for prefill: reuses each loaded weight block across several
 * activation rows.
 *   w:   nr weight rows of type t, row r at (const char *)w + r * w_stride (bytes), n values each;
 *   a:   nc activation rows of type vec_dot_type, row c at (const char *)a + c * a_stride (bytes);
 *   out: out[c * out_stride + r] = dot(weight row r, activation row c)   (floats; token-major, as a
 *        matmul output [tokens][features] is laid out).
 * Any nr >= 1, nc >= 1 is valid; the kernel is fastest when nc is a multiple of MF_SIMD_GEMM_NC.
 * Each result equals what mf_simd_vec_dot(t) gives for the same pair, bit for bit, whatever nr,
 * nc, the strides, the rows' addresses and the pair's place in the call: a token's matmul output
 * does not depend on the batch it is computed in (tests/test_simd_invariance.c). The same holds
 * per level for mf_simd_gemm_at and mf_simd_vec_dot_at. Buffers must not overlap out. Never NULL
 * for a type whose mf_simd_vec_dot is not NULL; may allocate a per-thread scratch buffer on a
 * thread's first call (freed when the thread exits). */
#define MF_SIMD_GEMM_NC 4
typedef void (*mf_gemm_fn)(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,
                           size_t a_stride, float *out, size_t out_stride);
mf_gemm_fn mf_simd_gemm(mf_type t);

/* The same entry points for a given level, for tests and benchmarks: NULL if the level is not
 * supported here; otherwise that level's kernel, or the reference where the level has none. */
mf_vec_dot_fn mf_simd_vec_dot_at(mf_simd_level level, mf_type t);
mf_quantize_fn mf_simd_quantize_row_at(mf_simd_level level, mf_type act_type);
mf_gemm_fn mf_simd_gemm_at(mf_simd_level level, mf_type t);
/* The AVX2 level's float tile (F32, F16, BF16) built with AVX-512's 32 vector registers: the same
 * bits as mf_simd_gemm_at(MF_SIMD_AVX2, t), with four rows beside four tokens' accumulators where
 * the AVX2 build has room for two. What the AVX-512 level multiplies float weights with where
 * mf_simd_avx512_narrow() says it runs them on the AVX2 kernels. NULL unless this CPU runs the
 * AVX-512 level and t is a float type. */
mf_gemm_fn mf_simd_gemm_avx2_wide(mf_type t);
/* True if the level has its own kernel (not the reference) for the weight type's dot. */
bool mf_simd_has_vec_dot(mf_simd_level level, mf_type t);

#endif /* MF_SIMD_H */
