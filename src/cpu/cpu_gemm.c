/* cpu_gemm.c: which prefill GEMM serves a weight (see cpu_gemm.h). */
#include "cpu/cpu_gemm.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"

const mf_cpu_gemm *mf_cpu_gemm_for(const mf_cpu_cfg *cfg, const mf_weight *w) {
#if defined(__x86_64__)
    if (!cfg->ordered) return NULL;
    /* Q4_0 and Q4_K follow llama.cpp's repacked order, which it uses for rows in multiples of 8. */
    const bool repacked = w->ne[1] % 8 == 0;
    if (cfg->level == MF_SIMD_AVX2) {
        switch (w->type) {
        case MF_TYPE_Q4_0: return repacked ? mf_cpu_gemm_q4_0_avx2() : NULL;
        case MF_TYPE_Q4_K: return repacked ? mf_cpu_gemm_q4_K_avx2() : NULL;
        case MF_TYPE_Q5_0: return mf_cpu_gemm_q5_0_avx2();
        case MF_TYPE_Q8_0: return mf_cpu_gemm_q8_0_avx2();
        case MF_TYPE_Q6_K: return mf_cpu_gemm_q6_K_avx2();
        case MF_TYPE_Q4_1: return mf_cpu_gemm_q4_1_avx2();
        case MF_TYPE_Q5_1: return mf_cpu_gemm_q5_1_avx2();
        case MF_TYPE_Q5_K: return mf_cpu_gemm_q5_K_avx2();
        default: return NULL;
        }
    }
    if (cfg->level != MF_SIMD_AVX512) return NULL;
    switch (w->type) {
    case MF_TYPE_Q4_0: return repacked ? mf_cpu_gemm_q4_0_avx512() : NULL;
    case MF_TYPE_Q4_K: return repacked ? mf_cpu_gemm_q4_K_avx512() : NULL;
    case MF_TYPE_Q5_0: return mf_cpu_gemm_q5_0_avx512();
    case MF_TYPE_Q8_0: return mf_cpu_gemm_q8_0_avx512();
    case MF_TYPE_Q6_K: return mf_cpu_gemm_q6_K_avx512();
    case MF_TYPE_Q4_1: return mf_cpu_gemm_q4_1_avx512();
    case MF_TYPE_Q5_1: return mf_cpu_gemm_q5_1_avx512();
    case MF_TYPE_Q5_K: return mf_cpu_gemm_q5_K_avx512();
    default: return NULL;
    }
#else
    (void)w, (void)cfg;
    return NULL;
#endif
}
