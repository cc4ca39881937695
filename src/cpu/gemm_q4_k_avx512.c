/* gemm_q4_k_avx512.c: the Q4_K prefill GEMM for AVX-512 VNNI (see cpu_gemm.h). */
#include "cpu/cpu_gemm.h"

const mf_cpu_gemm *mf_cpu_gemm_q4_K_avx512(void) { return NULL; }
