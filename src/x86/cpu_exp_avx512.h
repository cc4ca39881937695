/* cpu_exp_avx512.h: the vector exp of the ordered kernels, 16 lanes (AVX-512), shared by attention
 * and SwiGLU. Included by *_avx512.c files only. */
#ifndef MF_CPU_EXP_AVX512_H
#define MF_CPU_EXP_AVX512_H

#include <immintrin.h>
#include <math.h>

/* llama.cpp's vector exp, as exp_ord in cpu_dot_order_avx2.c: n = round(x / ln2) by the 1.5 * 2^23
 * trick, b = x - n ln2 (ln2 split in two), a degree-5 polynomial j(b), then j * 2^n rounded once
 * (vscalefps); |n| > 192 gives 0 or infinity, NaN gives NaN. Max error about 1.5 ulp;
 * exp(0) is exactly 1, exp(-inf) exactly 0. */
static inline __m512 mf_exp_ord16(__m512 x) {
    const __m512 r = _mm512_set1_ps(0x1.8p23f);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(0x1.715476p+0f), r);
    const __m512 n = _mm512_sub_ps(z, r);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.7f7d1cp-20f),
                                      _mm512_fnmadd_ps(n, _mm512_set1_ps(0x1.62e4p-1f), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(0x1.0e4020p-7f), b, _mm512_set1_ps(0x1.573e2ep-5f)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(0x1.555e66p-3f), b, _mm512_set1_ps(0x1.fffdb6p-2f))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(0x1.ffffecp-1f), b, _mm512_set1_ps(1.0f)));
    __m512 y = _mm512_scalef_ps(j, n);
    const __mmask16 big = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(192.0f), _CMP_GT_OQ);
    if (big) {
        const __mmask16 pos = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_GT_OQ);
        y = _mm512_mask_mov_ps(y, big, _mm512_maskz_mov_ps(pos, _mm512_set1_ps(INFINITY)));
    }
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(n, n, _CMP_UNORD_Q), n);
}

#endif /* MF_CPU_EXP_AVX512_H */
