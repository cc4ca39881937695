/* gemm_q6_k_avx512.c: the Q6_K prefill GEMM for AVX-512 VNNI (see cpu_gemm.h). */
#include "cpu/cpu_gemm.h"

const mf_cpu_gemm *mf_cpu_gemm_q6_K_avx512(void) { return NULL; }
