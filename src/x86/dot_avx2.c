/* dot_avx2.c: AVX2 dot products of the 32-value block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against
 * Q8_0/Q8_1 activations), with their multi-row tile kernels (the float formats: dot_float_avx2.c).
 * Compiled with -mavx2 -mfma -mf16c -mbmi2; the dispatcher calls
 * these only on CPUs that have them. Integer sums inside a block are exact; blocks are combined in
 * float, so results differ from the reference only by summation order. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

/* ---- 32-value blocks ------------------------------------------------------------------------
 * Per block b of 32 values: sum_j w_j * a_j = d_w * d_a * S_b, S_b an exact int32 computed with
 * maddubs (u8 x s8 -> pairs summed in i16) and madd (i16 pairs -> i32). The offset formats
 * (Q4_0: q - 8, Q5_0: q - 16) use the unsigned q and subtract off * sum(a), both in i16:
 * |q * a + q' * a'| <= 2 * 31 * 128 < 2^15, so nothing saturates. */

/* i32x8 partial sums of (q - off) * a for 32 unsigned q and 32 signed a. */
static inline __m256i sum_offset_u8_i8(__m256i q, __m256i a, __m256i off) {
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(off, a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline __m256i sum_u8_i8(__m256i q, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1));
}

/* Signed x signed via the sign trick: |x| * (a with x's sign). |x| <= 128 and the pair sums stay
 * within i16 because activations are in [-127, 127]. */
static inline __m256i sum_i8_i8(__m256i x, __m256i a) {
    return sum_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(a, x));
}

/* Q5_0/Q5_1 5-bit values in activation order */
static inline __m256i q5_values(const uint8_t qs[16], const uint8_t qh[4]) {
    return _mm256_or_si256(mf_x86_nibbles32(qs), _mm256_and_si256(mf_x86_bits32(qh), _mm256_set1_epi8(0x10)));
}

enum { B32_Q4_0, B32_Q4_1, B32_Q5_0, B32_Q5_1, B32_Q8_0 };

/* The 32 weights of block b as bytes; for the signed kinds (Q4_0, Q5_0, Q8_0) as signed values
 * q - 8, q - 16, q, for Q4_1/Q5_1 unsigned q. */
static inline __m256i b32_values(int kind, const uint8_t *b) {
    switch (kind) {
    case B32_Q4_0: return _mm256_sub_epi8(mf_x86_nibbles32(((const mf_block_q4_0 *)b)->qs), _mm256_set1_epi8(8));
    case B32_Q4_1: return mf_x86_nibbles32(((const mf_block_q4_1 *)b)->qs);
    case B32_Q5_0: {
        const mf_block_q5_0 *x = (const mf_block_q5_0 *)b;
        return mf_x86_q5_0_signed32(x->qs, x->qh);
    }
    case B32_Q5_1: {
        const mf_block_q5_1 *x = (const mf_block_q5_1 *)b;
        return q5_values(x->qs, x->qh);
    }
    default: return mf_x86_load(((const mf_block_q8_0 *)b)->qs);
    }
}

static inline bool b32_signed(int kind) { return kind == B32_Q4_0 || kind == B32_Q5_0 || kind == B32_Q8_0; }

/* i32x8 partial sums of block b's weights times the 32 activations y. The offset kinds use the
 * unsigned q and subtract off * sum(y) (both in i16, cheaper than the sign trick). */
static inline __m256i b32_block_sum(int kind, const uint8_t *b, __m256i y) {
    switch (kind) {
    case B32_Q4_0: return sum_offset_u8_i8(mf_x86_nibbles32(((const mf_block_q4_0 *)b)->qs), y, _mm256_set1_epi8(8));
    case B32_Q5_0: {
        const mf_block_q5_0 *x = (const mf_block_q5_0 *)b;
        return sum_offset_u8_i8(q5_values(x->qs, x->qh), y, _mm256_set1_epi8(16));
    }
    case B32_Q8_0: return sum_i8_i8(mf_x86_load(((const mf_block_q8_0 *)b)->qs), y);
    default: return sum_u8_i8(b32_values(kind, b), y);
    }
}

/* The fp16 fields at p, p + s, p + 2s, p + 3s (four consecutive blocks of s bytes) as floats.
 * Each 16-byte load stays inside its block: every block is at least 18 bytes and the fields sit
 * at offset 0 or 2. */
static inline __m128 cvt4_h(const uint8_t *p, size_t s) {
    const __m128i l0 = _mm_loadu_si128((const __m128i *)p), l1 = _mm_loadu_si128((const __m128i *)(p + s));
    const __m128i l2 = _mm_loadu_si128((const __m128i *)(p + 2 * s)), l3 = _mm_loadu_si128((const __m128i *)(p + 3 * s));
    return _mm_cvtph_ps(_mm_unpacklo_epi32(_mm_unpacklo_epi16(l0, l1), _mm_unpacklo_epi16(l2, l3)));
}

static inline __m256 bcast(__m128 v, int k) {
    return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_set1_epi32(k));
}

/* The float steps of one row, shared by the dot and the tile so that both give the same result bit
 * for bit: per four blocks k = 0..3 with exact integer sums s_k and scale products d_k = d_w * d_a,
 *   acc[k / 2] = fma(d_k, s_k, acc[k / 2])      (eight lanes each; two chains, which keep the dot
 *                                                 as fast as four did, and fit the tile's registers)
 * and for Q4_1/Q5_1 accm = fma(m_w, s_a, accm) over the four blocks' lanes; at the end
 * hsum8(acc[0] + acc[1]) + hsum4(accm), then the last 0..3 blocks added one at a time (b32_tail). */
static inline void b32_step(__m128 d, int k, __m256i s, __m256 acc[2]) {
    acc[k / 2] = _mm256_fmadd_ps(bcast(d, k), _mm256_cvtepi32_ps(s), acc[k / 2]);
}

static inline float b32_tail(int kind, float sum, int64_t i, int64_t nb, const uint8_t *w, size_t bs, const uint8_t *a) {
    const bool mins = kind == B32_Q4_1 || kind == B32_Q5_1;
    const size_t as = mins ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0), qoff = as - 32;
    for (; i < nb; i++) {
        const uint8_t *wb = w + (size_t)i * bs, *ab = a + (size_t)i * as;
        uint16_t dw, da;
        memcpy(&dw, wb, 2);
        memcpy(&da, ab, 2);
        sum += mf_x86_h2f(dw) * mf_x86_h2f(da) * (float)mf_x86_hsum8_i32(b32_block_sum(kind, wb, mf_x86_load(ab + qoff)));
        if (mins) {
            uint16_t m, sa;
            memcpy(&m, wb + 2, 2);
            memcpy(&sa, ab + 2, 2);
            sum += mf_x86_h2f(m) * mf_x86_h2f(sa);
        }
    }
    return sum;
}

/* One row: four blocks per step, their scale products converted together (b32_step). */
static inline float dot_b32(int kind, int64_t n, const uint8_t *w, size_t bs, const uint8_t *a) {
    const bool mins = kind == B32_Q4_1 || kind == B32_Q5_1;
    const size_t as = mins ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0), qoff = as - 32;
    const int64_t nb = n / 32;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    __m128 accm = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        const uint8_t *wb = w + (size_t)i * bs, *ab = a + (size_t)i * as;
        const __m128 d = _mm_mul_ps(cvt4_h(wb, bs), cvt4_h(ab, as));
        for (int k = 0; k < 4; k++) b32_step(d, k, b32_block_sum(kind, wb + k * bs, mf_x86_load(ab + k * as + qoff)), acc);
        if (mins) accm = _mm_fmadd_ps(cvt4_h(wb + 2, bs), cvt4_h(ab + 2, as), accm);
    }
    return b32_tail(kind, mf_x86_hsum8(_mm256_add_ps(acc[0], acc[1])) + mf_x86_hsum4(accm), i, nb, w, bs, a);
}

static float dot_q4_0_q8_0(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q4_0, n, w, sizeof(mf_block_q4_0), a); }
static float dot_q4_1_q8_1(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q4_1, n, w, sizeof(mf_block_q4_1), a); }
static float dot_q5_0_q8_0(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q5_0, n, w, sizeof(mf_block_q5_0), a); }
static float dot_q5_1_q8_1(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q5_1, n, w, sizeof(mf_block_q5_1), a); }
static float dot_q8_0_q8_0(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q8_0, n, w, sizeof(mf_block_q8_0), a); }

/* ---- multi-row tiles: one weight row against up to MF_SIMD_GEMM_NC activation rows ----------
 * Four blocks per step: the weights are unpacked once (signed kinds as |v| plus v kept for its
 * signs, applied to each activation row with sign_epi8) and their scales converted once. The
 * float steps are the dot's (b32_step, b32_tail), so each result equals dot_b32's bit for bit. */
#define NC MF_SIMD_GEMM_NC

static inline void tile_b32(int kind, int64_t n, const uint8_t *w, size_t bs, const char *a, size_t a_stride, int nc,
                            float *out, size_t out_stride) {
    const bool mins = kind == B32_Q4_1 || kind == B32_Q5_1, sign = b32_signed(kind);
    const size_t as = mins ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0), qoff = as - 32;
    const int64_t nb = n / 32, n4 = nb / 4 * 4;
    __m256 acc[NC][2];
    __m128 accm[NC];
    for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm256_setzero_ps(), accm[c] = _mm_setzero_ps();
    for (int64_t i = 0; i < n4; i += 4) {
        const uint8_t *wb = w + (size_t)i * bs;
        __m256i v[4], u[4];
        for (int k = 0; k < 4; k++) {
            v[k] = b32_values(kind, wb + k * bs);
            u[k] = sign ? _mm256_sign_epi8(v[k], v[k]) : v[k];
        }
        const __m128 dw = cvt4_h(wb, bs), mw = mins ? cvt4_h(wb + 2, bs) : _mm_setzero_ps();
        for (int c = 0; c < nc; c++) {
            const uint8_t *ab = (const uint8_t *)(a + (size_t)c * a_stride) + (size_t)i * as;
            const __m128 d = _mm_mul_ps(dw, cvt4_h(ab, as));
            for (int k = 0; k < 4; k++) {
                __m256i y = mf_x86_load(ab + k * as + qoff);
                if (sign) y = _mm256_sign_epi8(y, v[k]);
                b32_step(d, k, sum_u8_i8(u[k], y), acc[c]);
            }
            if (mins) accm[c] = _mm_fmadd_ps(mw, cvt4_h(ab + 2, as), accm[c]);
        }
    }
    for (int c = 0; c < nc; c++) {
        const float r = mf_x86_hsum8(_mm256_add_ps(acc[c][0], acc[c][1])) + mf_x86_hsum4(accm[c]);
        out[(size_t)c * out_stride] = b32_tail(kind, r, n4, nb, w, bs, (const uint8_t *)a + (size_t)c * a_stride);
    }
}

/* rows outer, groups of NC activation rows inner, so each weight row is read from memory once */
#define TILE_GEMM(name, kind, wtype)                                                                  \
    static void name(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,        \
                     size_t a_stride, float *out, size_t out_stride) {                                \
        for (int r = 0; r < nr; r++)                                                                  \
            for (int c0 = 0; c0 < nc; c0 += NC)                                                       \
                tile_b32(kind, n, (const uint8_t *)w + (size_t)r * w_stride, sizeof(wtype),           \
                         (const char *)a + (size_t)c0 * a_stride, a_stride, MF_MIN(NC, nc - c0),      \
                         out + (size_t)c0 * out_stride + (size_t)r, out_stride);                      \
    }
TILE_GEMM(gemm_q4_0, B32_Q4_0, mf_block_q4_0)
TILE_GEMM(gemm_q4_1, B32_Q4_1, mf_block_q4_1)
TILE_GEMM(gemm_q5_0, B32_Q5_0, mf_block_q5_0)
TILE_GEMM(gemm_q5_1, B32_Q5_1, mf_block_q5_1)
TILE_GEMM(gemm_q8_0, B32_Q8_0, mf_block_q8_0)


void mf_simd_register_avx2(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_0, Q8_0, dot_q4_0_q8_0, gemm_q4_0);
    MF_SIMD_SET_DOT(t, Q4_1, Q8_1, dot_q4_1_q8_1, gemm_q4_1);
    MF_SIMD_SET_DOT(t, Q5_0, Q8_0, dot_q5_0_q8_0, gemm_q5_0);
    MF_SIMD_SET_DOT(t, Q5_1, Q8_1, dot_q5_1_q8_1, gemm_q5_1);
    MF_SIMD_SET_DOT(t, Q8_0, Q8_0, dot_q8_0_q8_0, gemm_q8_0);
}
