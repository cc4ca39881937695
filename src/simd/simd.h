/* simd.h: run-time dispatch of the hot CPU kernels. Each entry point returns the fastest
 * implementation this CPU supports (chosen once, by CPU feature detection), falling back to the
 * scalar reference twin in the type-traits table. Callers fetch a function pointer once per op,
 * never inside an inner loop. */
#ifndef MF_SIMD_H
#define MF_SIMD_H

#include "quant/quant.h"

/* CPU features detected at startup. */
typedef struct mf_cpu_features {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512vnni, avxvnni; /* x86 */
    bool neon, dotprod;                                                   /* arm64 */
} mf_cpu_features;

const mf_cpu_features *mf_simd_cpu_features(void);
/* A short name of the instruction set in use: "avx512-vnni", "avx2", "neon-dotprod", "scalar". */
const char *mf_simd_isa_name(void);

/* Dot of a weight row of type t with an activation row of mf_type_get_traits(t)->vec_dot_type. */
mf_vec_dot_fn mf_simd_vec_dot(mf_type t);
/* Quantize an f32 activation row into act_type (Q8_0, Q8_1, Q8_K, F16, BF16). */
mf_quantize_fn mf_simd_quantize_row(mf_type act_type);

#endif /* MF_SIMD_H */
