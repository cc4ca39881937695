/* simd.c: CPU feature detection and kernel dispatch. Until a SIMD kernel exists for a type, the
 * reference twin from the type-traits table is used. */
#include "simd/simd.h"

static mf_cpu_features features;
static bool features_ready;

static void detect(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    features.avx2 = __builtin_cpu_supports("avx2");
    features.fma = __builtin_cpu_supports("fma");
    features.avx512f = __builtin_cpu_supports("avx512f");
    features.avx512bw = __builtin_cpu_supports("avx512bw");
    features.avx512vl = __builtin_cpu_supports("avx512vl");
    features.avx512vnni = __builtin_cpu_supports("avx512vnni");
#elif defined(__aarch64__)
    features.neon = true;
#if defined(__ARM_FEATURE_DOTPROD)
    features.dotprod = true;
#endif
#endif
    features_ready = true;
}

const mf_cpu_features *mf_simd_cpu_features(void) {
    if (!features_ready) detect();
    return &features;
}

const char *mf_simd_isa_name(void) { return "scalar"; }

mf_vec_dot_fn mf_simd_vec_dot(mf_type t) { return mf_type_get_traits(t)->vec_dot; }

mf_quantize_fn mf_simd_quantize_row(mf_type act_type) { return mf_type_get_traits(act_type)->quantize; }
