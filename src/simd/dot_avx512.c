/* dot_avx512.c: AVX-512 (F/BW/VL + VNNI) kernels. None yet: the AVX-512 level runs the AVX2 kernels. */
#include "simd/simd_kernels.h"
void mf_simd_register_avx512(mf_simd_table *t) { (void)t; }
void mf_simd_register_avx512_k(mf_simd_table *t) { (void)t; }
void mf_simd_register_avx512_act(mf_simd_table *t) { (void)t; }
