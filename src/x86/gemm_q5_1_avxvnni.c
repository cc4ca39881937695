/* gemm_q5_1_avxvnni.c: the AVX-VNNI build of gemm_q5_1_avx2.c (see gemm_avx2_util.h). */
#include "x86/gemm_q5_1_avx2.c"
