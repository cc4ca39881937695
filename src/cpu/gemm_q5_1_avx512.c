/* gemm_q5_1_avx512.c: the Q5_1 prefill GEMM (AVX-512 VNNI); none yet, so the ordered dots serve. */
#include "cpu/cpu_gemm.h"

const mf_cpu_gemm *mf_cpu_gemm_q5_1_avx512(void) { return NULL; }
