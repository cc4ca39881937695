/* gemm_avx512_util.h: small AVX-512 helpers shared by the prefill GEMMs' panel unpacking.
 * Included by *_avx512.c files only (they are compiled with AVX-512 flags). */
#ifndef MF_CPU_GEMM_AVX512_UTIL_H
#define MF_CPU_GEMM_AVX512_UTIL_H

#include <immintrin.h>

/* In-register transpose of a 16 x 16 matrix of 32-bit words: x[i] lane j <- x[j] lane i. */
static inline void mf_transpose16_i32(__m512i x[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
    }
    /* u[4g + m], 128-bit lane L: rows 4g..4g+3 of column m + 4L */
    for (int g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int m = 0; m < 4; m++) {
        const __m512i a = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88), b = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xDD);
        const __m512i c = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88);
        const __m512i e = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xDD);
        x[m] = _mm512_shuffle_i32x4(a, c, 0x88);
        x[m + 8] = _mm512_shuffle_i32x4(a, c, 0xDD);
        x[m + 4] = _mm512_shuffle_i32x4(b, e, 0x88);
        x[m + 12] = _mm512_shuffle_i32x4(b, e, 0xDD);
    }
}

#endif /* MF_CPU_GEMM_AVX512_UTIL_H */
