/* gemm_q5_0_avxvnni.c: the AVX-VNNI build of gemm_q5_0_avx2.c (see gemm_avx2_util.h). */
#include "x86/gemm_q5_0_avx2.c"
