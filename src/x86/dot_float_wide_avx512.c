/* dot_float_wide_avx512.c: the AVX2 float tile (dot_float_avx2.h) built with AVX-512's 32 vector
 * registers, for CPUs whose AVX-512 level multiplies float weights with the AVX2 kernels
 * (mf_simd_avx512_narrow: Zen 4). Its few-token rows take four to six tokens beside four rows where
 * the AVX2 build, out of registers, takes four tokens beside two rows; every output is the same
 * chain of the same operations, so the bits are those of the AVX2 dot (tests/test_simd_invariance.c
 * checks). */
#define FL_WIDE 1
#include "x86/dot_float_avx2.h"

FL_DEFINE_GEMMS

mf_gemm_fn mf_x86_gemm_float_wide(mf_type t) {
    return t == MF_TYPE_F32 ? gemm_f32 : t == MF_TYPE_F16 ? gemm_f16 : t == MF_TYPE_BF16 ? gemm_bf16 : NULL;
}
