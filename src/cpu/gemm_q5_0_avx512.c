/* gemm_q5_0_avx512.c: the Q5_0 prefill GEMM for AVX-512 VNNI (see cpu_gemm.h). */
#include "cpu/cpu_gemm.h"

const mf_cpu_gemm *mf_cpu_gemm_q5_0_avx512(void) { return NULL; }
