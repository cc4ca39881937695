/* dot_iq4_avx2.c: AVX2 dots and tiles of the non-linear 4-bit formats, in llama.cpp's x86 orders
 * (scalar twins in cpu_dot_order_ref.c, held to them bit for bit by test_simd):
 *   IQ4_NL (Q8_0 activations): one float chain per output, per block s = fma(isum, d_w * d_a, s)
 *     with isum the exact sum of the 32 products: llama.cpp's repacked ggml_gemv/gemm_iq4_nl_8x8_q8_0,
 *     what it runs for weights of 8k rows on AVX2 (the common case; its other paths differ in the
 *     last bits).
 *   IQ4_XS (Q8_K activations): its ggml_vec_dot_iq4_xs_q8_K, eight int32 lanes per super-block
 *     (lane k the values 4k .. 4k + 3 of each sub-block of 32 times its scale s_b - 32), then
 *     acc = fma(d_w * d_a, lanes, acc), and llama.cpp's horizontal sum.
 * Values come from the 16-entry table by vpshufb of the nibbles (low nibbles the block's first 16
 * values, high nibbles the next 16); the products by vpmaddubsw of |v| against the activations
 * signed by v (a pair is at most 2 * 127 * 128 < 2^15). Activation rows: up to MF_SIMD_GEMM_NC a
 * weight row, each decoded once for all of them. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"
#include "cpu/cpu_dot_order.h"

#include <math.h>

#define NC MF_SIMD_GEMM_NC

/* pairs of products v * y as int16 (exact: see the top) */
static inline __m256i iq4_pairs(__m256i v, __m256i y) {
    return _mm256_maddubs_epi16(_mm256_sign_epi8(v, v), _mm256_sign_epi8(y, v));
}

/* The sums of the eight int32 lanes of each of m[0..8), as one vector (exact). */
static inline __m256i hsum8x8_i32(const __m256i m[8]) {
    const __m256i a = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    const __m256i b = _mm256_hadd_epi32(_mm256_hadd_epi32(m[4], m[5]), _mm256_hadd_epi32(m[6], m[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(a, b, 0x20), _mm256_permute2x128_si256(a, b, 0x31));
}

/* IQ4_NL: the blocks' integer sums eight at a time (one vector), then each output's chain of fmas in
 * block order */
static inline __attribute__((always_inline)) void tile_iq4_nl_n(int64_t n, const uint8_t *w, const char *a,
                                                                size_t a_stride, int nc, float *out, size_t out_stride) {
    const __m256i ones = _mm256_set1_epi16(1);
    const mf_block_iq4_nl *x = (const mf_block_iq4_nl *)w;
    const int64_t nb = n / 32;
    float s[NC] = {0};
    int64_t i = 0;
    for (; i + 8 <= nb; i += 8) {
        __m256i v[8];
        float dw[8];
        for (int j = 0; j < 8; j++) v[j] = mf_x86_iq4nl32(x[i + j].qs), dw[j] = mf_x86_h2f(x[i + j].d);
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_0 *y = (const mf_block_q8_0 *)(a + (size_t)c * a_stride) + i;
            __m256i m[8];
            for (int j = 0; j < 8; j++) m[j] = _mm256_madd_epi16(iq4_pairs(v[j], mf_x86_load(y[j].qs)), ones);
            float fi[8];
            _mm256_storeu_ps(fi, _mm256_cvtepi32_ps(hsum8x8_i32(m)));
            for (int j = 0; j < 8; j++) s[c] = fmaf(fi[j], dw[j] * mf_x86_h2f(y[j].d), s[c]);
        }
    }
    for (; i < nb; i++) {
        const __m256i v = mf_x86_iq4nl32(x[i].qs);
        const float dw = mf_x86_h2f(x[i].d);
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_0 *y = (const mf_block_q8_0 *)(a + (size_t)c * a_stride) + i;
            const int isum = mf_x86_hsum8_i32(_mm256_madd_epi16(iq4_pairs(v, mf_x86_load(y->qs)), ones));
            s[c] = fmaf((float)isum, dw * mf_x86_h2f(y->d), s[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = s[c];
}

static inline __attribute__((always_inline)) void tile_iq4_xs_n(int64_t n, const uint8_t *w, const char *a,
                                                                size_t a_stride, int nc, float *out, size_t out_stride) {
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const mf_block_iq4_xs *x = (const mf_block_iq4_xs *)w + i;
        __m256i sumi[NC];
        for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        for (int b = 0; b < MF_QK_K / 32; b++) {
            const __m256i v = mf_x86_iq4nl32(x->qs + 16 * b);
            const int ls = mf_iq4_xs_scale(x, b);
            const __m256i sc = _mm256_set1_epi16((short)ls);
            for (int c = 0; c < nc; c++) {
                const int8_t *y = ((const mf_block_q8_K *)(a + (size_t)c * a_stride) + i)->qs + 32 * b;
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(iq4_pairs(v, mf_x86_load(y)), sc));
            }
        }
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *y = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(x->d) * y->d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

/* IQ4_NL, one activation row against eight weight rows (the ordered dots' dot8): each block's eight
 * integer sums as one vector, so the eight outputs' chains are the lanes of one vector of fmas (the
 * same steps as eight dots: a dot's chain waits on each fma in turn) */
static void rows8_iq4_nl(int64_t n, const void *vw, size_t w_stride, const void *va, float *out) {
    const uint8_t *w = vw;
    const mf_block_q8_0 *y = va;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i ya = mf_x86_load(y[i].qs);
        __m256i m[8];
        uint16_t dh[8];
        for (int r = 0; r < 8; r++) {
            const mf_block_iq4_nl *x = (const mf_block_iq4_nl *)(w + (size_t)r * w_stride) + i;
            m[r] = _mm256_madd_epi16(iq4_pairs(mf_x86_iq4nl32(x->qs), ya), ones);
            dh[r] = x->d;
        }
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh)), _mm256_set1_ps(mf_x86_h2f(y[i].d)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(hsum8x8_i32(m)), d, acc);
    }
    _mm256_storeu_ps(out, acc);
}

/* Each count of activation rows its own build (the accumulators in registers); a dot is the count 1,
 * so a dot and a tile agree bit for bit. */
#define IQ4_ENTRIES(T, tile_n)                                                                              \
    static void tile_##T(int64_t n, const uint8_t *w, const char *a, size_t a_stride, int nc, float *out,   \
                         size_t out_stride) {                                                               \
        switch (nc) {                                                                                       \
        case 1: tile_n(n, w, a, a_stride, 1, out, out_stride); break;                                       \
        case 2: tile_n(n, w, a, a_stride, 2, out, out_stride); break;                                       \
        case 3: tile_n(n, w, a, a_stride, 3, out, out_stride); break;                                       \
        default: tile_n(n, w, a, a_stride, 4, out, out_stride); break;                                      \
        }                                                                                                   \
    }                                                                                                       \
    static float dot_##T(int64_t n, const void *w, const void *a) {                                        \
        float r;                                                                                            \
        tile_n(n, w, a, 0, 1, &r, 0);                                                                       \
        return r;                                                                                           \
    }                                                                                                       \
    /* rows outer, groups of NC activation rows inner: each weight row is read from memory once */         \
    static void gemm_##T(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,         \
                         size_t a_stride, float *out, size_t out_stride) {                                  \
        for (int r = 0; r < nr; r++)                                                                        \
            for (int c0 = 0; c0 < nc; c0 += NC)                                                             \
                tile_##T(n, (const uint8_t *)w + (size_t)r * w_stride, (const char *)a + (size_t)c0 * a_stride, \
                         a_stride, MF_MIN(NC, nc - c0), out + (size_t)c0 * out_stride + (size_t)r, out_stride); \
    }
MF_STATIC_ASSERT(NC == 4, "IQ4_ENTRIES takes 1..4 activation rows");
IQ4_ENTRIES(IQ4_NL, tile_iq4_nl_n)
IQ4_ENTRIES(IQ4_XS, tile_iq4_xs_n)

/* four rows: four dots (rows8_iq4_nl takes the rows in eights) */
static void rows4_iq4_nl(int64_t n, const void *w, size_t w_stride, const void *a, float *out) {
    for (int r = 0; r < 4; r++) out[r] = dot_IQ4_NL(n, (const uint8_t *)w + (size_t)r * w_stride, a);
}

/* IQ4_NL's ordered dots (cpu_dot_order.h): the dispatch's eight-row decode and its prefill GEMM
 * (gemm_iq4_nl_avx2.c) run this order at every token count */
mf_cpu_ordered_dots mf_cpu_ordered_dots_iq4_nl_avx2(void) {
    return (mf_cpu_ordered_dots){dot_IQ4_NL, rows4_iq4_nl, rows8_iq4_nl, NULL, 0, false, NULL, false};
}

void mf_simd_register_avx2_iq4(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, IQ4_NL, Q8_0, dot_IQ4_NL, gemm_IQ4_NL);
    MF_SIMD_SET_DOT(t, IQ4_XS, Q8_K, dot_IQ4_XS, gemm_IQ4_XS);
}
