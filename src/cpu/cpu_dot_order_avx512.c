/* cpu_dot_order_avx512.c: the one-row ordered dots of the 32-value block formats (see
 * cpu_dot_order_avx2.c for the order) with AVX-512 VNNI: two blocks share a 512-bit register for the
 * integer work (block i in i32 lanes 0..7, block i+1 in lanes 8..15, one vpdpbusd), and their four
 * half-float scales are converted together; the float steps stay one fma per block, in order, on
 * eight lanes, so the results are bit-identical to the AVX2 versions. */
#include "cpu/cpu_dot_order.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

static inline __m256i nib32(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

/* Bit j of the little-endian u32 at qh -> 0x10 in byte j. */
static inline __m256i bit5_32(const uint8_t *qh) {
    uint32_t x;
    memcpy(&x, qh, 4);
    return _mm256_maskz_mov_epi8((__mmask32)x, _mm256_set1_epi8(0x10));
}

static inline __m512i pair(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

static inline __m512i load_pair(const int8_t *p0, const int8_t *p1) {
    return pair(_mm256_loadu_si256((const __m256i *)p0), _mm256_loadu_si256((const __m256i *)p1));
}

/* i32 lanes of two blocks: unsigned weights u, or signed weights v (|v| against y with v's sign). */
static inline __m512 lanes_u(__m512i u, __m512i y) {
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_setzero_si512(), u, y));
}
static inline __m512 lanes_s(__m512i v, __m512i y) {
    const __m512i ys = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(v), _mm512_setzero_si512(), y);
    return lanes_u(_mm512_abs_epi8(v), ys);
}

static inline float hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* The two fma steps of a block pair: acc = fma(d0, lanes of block i, acc), then block i+1. */
static inline __m256 two_steps(__m256 acc, __m128 d, __m512 f, bool lanes_first) {
    const __m256 d0 = _mm256_broadcastss_ps(d), d1 = _mm256_broadcastss_ps(_mm_movehdup_ps(d));
    const __m256 f0 = _mm512_castps512_ps256(f), f1 = _mm512_extractf32x8_ps(f, 1);
    acc = lanes_first ? _mm256_fmadd_ps(f0, d0, acc) : _mm256_fmadd_ps(d0, f0, acc);
    return lanes_first ? _mm256_fmadd_ps(f1, d1, acc) : _mm256_fmadd_ps(d1, f1, acc);
}

/* The leading half-floats of blocks b and b + bs (bytes) as one u32 (first in the low word). */
static inline uint32_t halves2(const uint8_t *b, size_t bs) {
    uint16_t x, y;
    memcpy(&x, b, 2), memcpy(&y, b + bs, 2);
    return (uint32_t)x | (uint32_t)y << 16;
}

enum { K_Q4_0, K_Q5_0, K_Q8_0, K_Q4_1, K_Q5_1 };

/* Weights of blocks i and i+1 (bytes wb and wb + bs): signed for Q4_0/Q5_0/Q8_0, unsigned otherwise. */
static inline __m512i values(int kind, const uint8_t *wb, size_t bs) {
    switch (kind) {
    case K_Q4_0: {
        const mf_block_q4_0 *x = (const mf_block_q4_0 *)wb, *y = (const mf_block_q4_0 *)(wb + bs);
        return _mm512_sub_epi8(pair(nib32(x->qs), nib32(y->qs)), _mm512_set1_epi8(8));
    }
    case K_Q5_0: {
        const mf_block_q5_0 *x = (const mf_block_q5_0 *)wb, *y = (const mf_block_q5_0 *)(wb + bs);
        return _mm512_sub_epi8(
            pair(_mm256_or_si256(nib32(x->qs), bit5_32(x->qh)), _mm256_or_si256(nib32(y->qs), bit5_32(y->qh))),
            _mm512_set1_epi8(16));
    }
    case K_Q8_0: {
        const mf_block_q8_0 *x = (const mf_block_q8_0 *)wb, *y = (const mf_block_q8_0 *)(wb + bs);
        return load_pair(x->qs, y->qs);
    }
    case K_Q4_1: {
        const mf_block_q4_1 *x = (const mf_block_q4_1 *)wb, *y = (const mf_block_q4_1 *)(wb + bs);
        return pair(nib32(x->qs), nib32(y->qs));
    }
    default: {
        const mf_block_q5_1 *x = (const mf_block_q5_1 *)wb, *y = (const mf_block_q5_1 *)(wb + bs);
        return pair(_mm256_or_si256(nib32(x->qs), bit5_32(x->qh)), _mm256_or_si256(nib32(y->qs), bit5_32(y->qh)));
    }
    }
}

static inline float dot32(int kind, int64_t n, const uint8_t *w, size_t bs, const uint8_t *a) {
    const bool mins = kind == K_Q4_1 || kind == K_Q5_1, sign = kind <= K_Q8_0;
    const size_t as = mins ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0), qoff = as - 32;
    const int64_t nb = n / 32, np = nb & ~(int64_t)1;
    __m256 acc = _mm256_setzero_ps();
    float s = 0.0f;
    for (int64_t i = 0; i < np; i += 2) {
        const uint8_t *wb = w + (size_t)i * bs, *ab = a + (size_t)i * as;
        const __m512i v = values(kind, wb, bs);
        const __m512i y = load_pair((const int8_t *)(ab + qoff), (const int8_t *)(ab + as + qoff));
        const __m512 f = sign ? lanes_s(v, y) : lanes_u(v, y);
        if (mins) {
            /* d_w m_w of both blocks, then d_a s_a of both: d_w0 m_w0 d_w1 m_w1 d_a0 s_a0 d_a1 s_a1 */
            uint32_t w0, w1, a0, a1;
            memcpy(&w0, wb, 4), memcpy(&w1, wb + bs, 4), memcpy(&a0, ab, 4), memcpy(&a1, ab + as, 4);
            const __m256 h = _mm256_cvtph_ps(_mm_setr_epi32((int)w0, (int)w1, (int)a0, (int)a1));
            const __m128 hw = _mm256_castps256_ps128(h), ha = _mm256_extractf128_ps(h, 1);
            const __m128 prod = _mm_mul_ps(hw, ha); /* d0 m0s0 d1 m1s1 (products unused) */
            const __m128 d = _mm_shuffle_ps(prod, prod, _MM_SHUFFLE(2, 2, 2, 0)); /* d_w0 d_a0, d_w1 d_a1 */
            s = fmaf(_mm_cvtss_f32(_mm_shuffle_ps(hw, hw, 1)), _mm_cvtss_f32(_mm_shuffle_ps(ha, ha, 1)), s);
            s = fmaf(_mm_cvtss_f32(_mm_shuffle_ps(hw, hw, 3)), _mm_cvtss_f32(_mm_shuffle_ps(ha, ha, 3)), s);
            acc = two_steps(acc, d, f, kind == K_Q5_1);
        } else {
            const __m128 h = _mm_cvtph_ps(_mm_setr_epi32((int)halves2(wb, bs), (int)halves2(ab, as), 0, 0));
            const __m128 d = _mm_mul_ps(h, _mm_movehl_ps(h, h)); /* d_w0 * d_a0, d_w1 * d_a1 */
            acc = two_steps(acc, d, f, false);
        }
    }
    if (np < nb) {
        /* an odd last block: continue the same chains with the one-block steps */
        const uint8_t *wb = w + (size_t)np * bs, *ab = a + (size_t)np * as;
        const __m512i v = values(kind, wb, 0);
        const __m512i y = _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(ab + qoff)));
        const __m256 f = _mm512_castps512_ps256(sign ? lanes_s(v, y) : lanes_u(v, y));
        uint16_t dw, da, mw, sa;
        memcpy(&dw, wb, 2), memcpy(&da, ab, 2), memcpy(&mw, wb + 2, 2), memcpy(&sa, ab + 2, 2);
        const __m256 d = _mm256_set1_ps(_cvtsh_ss(dw) * _cvtsh_ss(da));
        acc = kind == K_Q5_1 ? _mm256_fmadd_ps(f, d, acc) : _mm256_fmadd_ps(d, f, acc);
        if (mins) s = fmaf(_cvtsh_ss(mw), _cvtsh_ss(sa), s);
    }
    return hsum8(acc) + s;
}

static float dot_q4_0(int64_t n, const void *w, const void *a) { return dot32(K_Q4_0, n, w, sizeof(mf_block_q4_0), a); }
static float dot_q5_0(int64_t n, const void *w, const void *a) { return dot32(K_Q5_0, n, w, sizeof(mf_block_q5_0), a); }
static float dot_q8_0(int64_t n, const void *w, const void *a) { return dot32(K_Q8_0, n, w, sizeof(mf_block_q8_0), a); }
static float dot_q4_1(int64_t n, const void *w, const void *a) { return dot32(K_Q4_1, n, w, sizeof(mf_block_q4_1), a); }
static float dot_q5_1(int64_t n, const void *w, const void *a) { return dot32(K_Q5_1, n, w, sizeof(mf_block_q5_1), a); }

mf_vec_dot_fn mf_cpu_ordered_dot_avx512(mf_type t) {
    switch (t) {
    case MF_TYPE_Q4_0: return dot_q4_0;
    case MF_TYPE_Q5_0: return dot_q5_0;
    case MF_TYPE_Q8_0: return dot_q8_0;
    case MF_TYPE_Q4_1: return dot_q4_1;
    case MF_TYPE_Q5_1: return dot_q5_1;
    default: return NULL;
    }
}
