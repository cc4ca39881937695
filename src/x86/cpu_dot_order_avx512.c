/* cpu_dot_order_avx512.c: ordered dots (see cpu_dot_order_avx2.c for the orders) with AVX-512 VNNI,
 * bit-identical to the AVX2 ones: the one-row dots of the 32-value block formats, the eight-row
 * decode dots (dot8) of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K and Q6_K, and the 16-lane SwiGLU.
 * Only integer work is regrouped (exact sums); every output keeps its own float steps in order.
 * One-row dots: two blocks share a 512-bit register (block i in i32 lanes 0..7, block i+1 in 8..15). */
#include "x86/cpu_exp_avx512.h"
#include "cpu/cpu_dot_order.h"
#include "x86/x86_common.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

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
        return _mm512_sub_epi8(pair(mf_x86_nibbles32(x->qs), mf_x86_nibbles32(y->qs)), _mm512_set1_epi8(8));
    }
    case K_Q5_0: {
        const mf_block_q5_0 *x = (const mf_block_q5_0 *)wb, *y = (const mf_block_q5_0 *)(wb + bs);
        return _mm512_sub_epi8(
            pair(_mm256_or_si256(mf_x86_nibbles32(x->qs), bit5_32(x->qh)),
                 _mm256_or_si256(mf_x86_nibbles32(y->qs), bit5_32(y->qh))),
            _mm512_set1_epi8(16));
    }
    case K_Q8_0: {
        const mf_block_q8_0 *x = (const mf_block_q8_0 *)wb, *y = (const mf_block_q8_0 *)(wb + bs);
        return load_pair(x->qs, y->qs);
    }
    case K_Q4_1: {
        const mf_block_q4_1 *x = (const mf_block_q4_1 *)wb, *y = (const mf_block_q4_1 *)(wb + bs);
        return pair(mf_x86_nibbles32(x->qs), mf_x86_nibbles32(y->qs));
    }
    default: {
        const mf_block_q5_1 *x = (const mf_block_q5_1 *)wb, *y = (const mf_block_q5_1 *)(wb + bs);
        return pair(_mm256_or_si256(mf_x86_nibbles32(x->qs), bit5_32(x->qh)),
                    _mm256_or_si256(mf_x86_nibbles32(y->qs), bit5_32(y->qh)));
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
    return mf_x86_hsum8(acc) + s;
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

/* ---- eight weight rows against one activation row (dot8) ----
 * Each output keeps exactly its one-row float steps; only the integer work is shared and reordered
 * (the block sums are exact). Rows r and r+1 share a 512-bit register: row r in the low 256 bits,
 * row r+1 in the high, the activation block broadcast to both halves, so one vpdpbusd serves two
 * rows and one 16-lane fma performs both rows' eight-lane step. Every kernel prefetches a later
 * group of eight rows: eight rows advancing a block at a time defeat the hardware prefetchers, and
 * later groups lie right after them when rows are contiguous (ws = row bytes), so their bytes are
 * fetched linearly, 8 * block bytes per block. The group after next where a group is under 8 KB
 * (a 896-wide model's Q4_0, Q5_0, Q8_0), so that the prefetches run far enough ahead of the memory
 * latency (measured: Q4_0 decode 40 -> 51 GB/s with two threads), else the next. A prefetch past
 * the weights never faults. A macro, not a function: GCC judges a function that only prefetches
 * free of effects and deletes its calls. */
#define PREFETCH_NEXT8(w, ws, block_bytes, i, lines)                                                                   \
    do {                                                                                                               \
        const size_t ahead_ = 8 * (ws) < 8192 ? 16 * (ws) : 8 * (ws);                                                  \
        const char *pf_ = (const char *)(w) + ahead_ + (size_t)(i) * 8 * (block_bytes);                                \
        for (int l_ = 0; l_ < (lines); l_++) _mm_prefetch(pf_ + 64 * l_, _MM_HINT_T0);                                 \
    } while (0)

/* The leading half-float scales of block i of rows 0..7, converted: d_w of row r in lane r. */
static inline __m256 scales8(const uint8_t *w, size_t ws, size_t bi) {
    uint64_t lo = 0, hi = 0;
    for (int r = 0; r < 4; r++) {
        uint16_t x, y;
        memcpy(&x, w + (size_t)r * ws + bi, 2), memcpy(&y, w + (size_t)(r + 4) * ws + bi, 2);
        lo |= (uint64_t)x << 16 * r, hi |= (uint64_t)y << 16 * r;
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

/* [lane k of x for 8 lanes | lane k+1 for 8 lanes]: the per-row factor of rows 2p, 2p+1. */
static inline __m512 spread2(__m256 x, int p) {
    const __m512i idx = _mm512_set_epi32(2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1, 2 * p + 1,
                                         2 * p + 1, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p, 2 * p);
    return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(x));
}

/* Row 2p's result from the low half, row 2p+1's from the high half, each by hsum8. */
static inline void store_pairs(const __m512 acc[4], float *out) {
    for (int p = 0; p < 4; p++) {
        out[2 * p] = mf_x86_hsum8(_mm512_castps512_ps256(acc[p]));
        out[2 * p + 1] = mf_x86_hsum8(_mm512_extractf32x8_ps(acc[p], 1));
    }
}

/* Q8_0 and Q5_0 in the plain order: lane p of a row's step is the exact sum of w * a over bytes
 * 4p..4p+3 of the block. The weights enter vpdpbusd as unsigned u = w + bias (Q8_0: w ^ 0x80, bias
 * 128; Q5_0: the 5-bit code, bias 16), so sum(w * a) = sum(u * a) - bias * sum(a) per lane, the
 * correction shared by the eight rows and folded into the accumulator's start. */
static inline __m512i rows_u(int kind, const uint8_t *x0, const uint8_t *x1) {
    if (kind == K_Q8_0) {
        const __m512i v = load_pair(((const mf_block_q8_0 *)x0)->qs, ((const mf_block_q8_0 *)x1)->qs);
        return _mm512_xor_si512(v, _mm512_set1_epi8((char)0x80));
    }
    /* Q5_0: 128-bit quarters [qs0 | qs0 | qs1 | qs1], the high nibbles shifted down in quarters 1
     * and 3, then bit 4 of value j from bit j of qh: rows' qh words make one 64-bit byte mask */
    const mf_block_q5_0 *b0 = (const mf_block_q5_0 *)x0, *b1 = (const mf_block_q5_0 *)x1;
    const __m256i t = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)b0->qs)),
                                              _mm_loadu_si128((const __m128i *)b1->qs), 1);
    const __m512i t2 = _mm512_castsi256_si512(t);
    __m512i z = _mm512_shuffle_i64x2(t2, t2, _MM_SHUFFLE(1, 1, 0, 0));
    z = _mm512_and_si512(_mm512_srlv_epi64(z, _mm512_set_epi64(4, 4, 0, 0, 4, 4, 0, 0)), _mm512_set1_epi8(0x0F));
    uint32_t h0, h1;
    memcpy(&h0, b0->qh, 4), memcpy(&h1, b1->qh, 4);
    return _mm512_mask_add_epi8(z, (__mmask64)((uint64_t)h0 | (uint64_t)h1 << 32), z, _mm512_set1_epi8(0x10));
}

/* Q4_0 in the repacked order (dot_q4_0_rp_x8 in cpu_dot_order_avx2.c): lane r of one eight-lane
 * chain is row r, stepped per block by fma((float)block sum, d_w * d_a, acc). A 512-bit register
 * holds four rows' 16 nibble bytes (row k in quarter k): its low nibbles are values 0..15, the high
 * ones 16..31, against the activation's two halves broadcast to every quarter; the block sums are
 * sum(q * a) - 8 * sum(a), exact, with the correction as the accumulators' start. */
static inline __m512i rows4_qs(const uint8_t *w, size_t ws, size_t off) {
    const __m128i *p0 = (const __m128i *)(w + off), *p1 = (const __m128i *)(w + ws + off);
    const __m128i *p2 = (const __m128i *)(w + 2 * ws + off), *p3 = (const __m128i *)(w + 3 * ws + off);
    const __m256i lo = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(p0)), _mm_loadu_si128(p1), 1);
    const __m256i hi = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(p2)), _mm_loadu_si128(p3), 1);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

/* ---- eight weight rows against 1..4 activation rows (dot8n; dot8 is its one-token case) ----
 * The weight side (the rows' unsigned codes or nibbles and their scales) is formed once per block
 * for every token; each (row, token) output keeps its one-row float steps. Four tokens'
 * accumulators fit in the 32 registers. For Q4_0, the reduction leaves rows in lanes 0 4 1 5 2 6 3
 * 7 (the scales follow that order), put back in row order at the end. */
static inline __attribute__((always_inline)) void dot8n_plain32(int kind, const int nt, int64_t n, const uint8_t *w,
                                                                 size_t ws, const uint8_t *a, size_t as, float *out,
                                                                 size_t os) {
    const size_t bs = kind == K_Q8_0 ? sizeof(mf_block_q8_0) : sizeof(mf_block_q5_0);
    const int lines = (int)((8 * bs + 63) / 64);
    const __m512i bias = _mm512_set1_epi8(kind == K_Q8_0 ? (char)0x80 : 16);
    __m512 acc[4][4];
    for (int t = 0; t < nt; t++)
        for (int p = 0; p < 4; p++) acc[t][p] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        PREFETCH_NEXT8(w, ws, bs, i, lines);
        __m512i u[4];
        __m512 dw[4];
        const __m256 d8 = scales8(w, ws, (size_t)i * bs);
        for (int p = 0; p < 4; p++) {
            const uint8_t *x0 = w + (size_t)(2 * p) * ws + (size_t)i * bs;
            u[p] = rows_u(kind, x0, x0 + ws);
            dw[p] = spread2(d8, p);
        }
        for (int t = 0; t < nt; t++) {
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)(a + (size_t)t * as) + i;
            const __m512i av = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)ab->qs));
            const __m512i zero = _mm512_setzero_si512();
            const __m512i neg = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, av));
            uint16_t da;
            memcpy(&da, &ab->d, 2);
            const __m512 dav = _mm512_set1_ps(_cvtsh_ss(da));
            for (int p = 0; p < 4; p++) {
                /* spread2(d_w * d_a, p) = spread2(d_w, p) * d_a, lane for lane */
                const __m512i sm = _mm512_dpbusd_epi32(neg, u[p], av);
                acc[t][p] = _mm512_fmadd_ps(_mm512_mul_ps(dw[p], dav), _mm512_cvtepi32_ps(sm), acc[t][p]);
            }
        }
    }
    for (int t = 0; t < nt; t++) store_pairs(acc[t], out + (size_t)t * os);
}

/* aux: the activation rows carry their corrections and float scales (mf_cpu_q4_0_aux), read in
 * place of forming them per block (two vpdpbusd and a subtraction, a half-float conversion). */
static inline __attribute__((always_inline)) void dot8n_q4_0_rp_t(const bool aux, const int nt, int64_t n,
                                                                   const uint8_t *wb, size_t ws, const uint8_t *a,
                                                                   size_t as, float *out, size_t os) {
    const size_t aux_at = mf_cpu_q4_0_aux_offset(n);
    const size_t bs = sizeof(mf_block_q4_0);
    const __m512i m4 = _mm512_set1_epi8(0x0F), eight = _mm512_set1_epi8(8);
    __m256 acc[4];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        PREFETCH_NEXT8(wb, ws, bs, i, 3);
        const size_t bi = (size_t)i * bs;
        const __m512i x0 = rows4_qs(wb, ws, bi + 2), x1 = rows4_qs(wb + 4 * ws, ws, bi + 2);
        const __m512i l0 = _mm512_and_si512(x0, m4), l1 = _mm512_and_si512(x1, m4);
        const __m512i h0 = _mm512_and_si512(_mm512_srli_epi16(x0, 4), m4);
        const __m512i h1 = _mm512_and_si512(_mm512_srli_epi16(x1, 4), m4);
        uint64_t lo = 0, hi = 0;
        for (int r = 0; r < 4; r++) {
            uint16_t e0, e1;
            memcpy(&e0, wb + (size_t)r * ws + bi, 2), memcpy(&e1, wb + (size_t)(r + 4) * ws + bi, 2);
            if (r < 2)
                lo |= ((uint64_t)e0 | (uint64_t)e1 << 16) << 32 * r;
            else
                hi |= ((uint64_t)e0 | (uint64_t)e1 << 16) << 32 * (r - 2);
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
        for (int t = 0; t < nt; t++) {
            const uint8_t *at = a + (size_t)t * as;
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)at + i;
            const __m512i alo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ab->qs));
            const __m512i ahi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(ab->qs + 16)));
            const __m512i zero = _mm512_setzero_si512();
            const __m512i neg =
                aux ? zero : _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, eight, alo), eight, ahi));
            __m512i z0 = _mm512_dpbusd_epi32(neg, l0, alo), z1 = _mm512_dpbusd_epi32(neg, l1, alo);
            z0 = _mm512_dpbusd_epi32(z0, h0, ahi);
            z1 = _mm512_dpbusd_epi32(z1, h1, ahi);
            __m512i v = _mm512_add_epi32(_mm512_unpacklo_epi32(z0, z1), _mm512_unpackhi_epi32(z0, z1));
            v = _mm512_add_epi32(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC));
            __m256i sum = _mm512_castsi512_si256(
                _mm512_permutexvar_epi32(_mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 13, 12, 9, 8, 5, 4, 1, 0), v));
            float dav;
            if (aux) {
                int32_t c;
                mf_cpu_q4_0_aux_get(at + aux_at, n / 32, i, &c, &dav);
                sum = _mm256_add_epi32(sum, _mm256_set1_epi32(c));
            } else {
                uint16_t da;
                memcpy(&da, &ab->d, 2);
                dav = _cvtsh_ss(da);
            }
            const __m256 d = _mm256_mul_ps(dw, _mm256_set1_ps(dav));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), d, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++)
        _mm256_storeu_ps(out + (size_t)t * os, _mm256_permutexvar_ps(_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7), acc[t]));
}

/* Q4_0 in the repacked order, sixteen weight rows against 1..4 tokens (dot16n): one 32-bit lane per
 * row, as the GEMMs hold them, so a token's block sums need no horizontal reduction. Per block the
 * rows' sixteen bytes of nibbles are transposed in registers (rows 4g..4g+3 in one register, unpacks
 * of dwords and quadwords) into four vectors whose lane 4q + p holds dword j of row 4p + q; each
 * splits into its low nibbles (values 4j..4j+3) and high ones (16 + 4j..), eight steps, each against
 * four activation bytes broadcast from memory into the vpdpbusd. A lane starts from the row's
 * correction (mf_cpu_q4_0_aux) and ends as the exact block sum; then the one float step per block,
 * fma((float)sum, d_w * d_a, acc), as the dot's. The lanes go back to row order at the end. */
#define DPB_MEM(acc, u, p, off) __asm__("vpdpbusd " #off "(%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p))

/* The half-float scales of block bi of rows c, c + 4, c + 8, c + 12 in a u64 (lanes 4c..4c+3). */
static inline uint64_t scales4_rows(const uint8_t *w, size_t ws, size_t bi, int c) {
    uint16_t h[4];
    for (int p = 0; p < 4; p++) memcpy(&h[p], w + (size_t)(4 * p + c) * ws + bi, 2);
    return (uint64_t)h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
}

static inline __attribute__((always_inline)) void dot16n_q4_0_rp_t(const int nt, int64_t n, const uint8_t *wb,
                                                                    size_t ws, const uint8_t *a, size_t as,
                                                                    float *out, size_t os) {
    const size_t bs = sizeof(mf_block_q4_0), aux_at = mf_cpu_q4_0_aux_offset(n);
    const int64_t nb = n / 32;
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* the group after next where a group of rows is under 8 KB, else the next (see PREFETCH_NEXT8) */
    const size_t ahead = 16 * ws < 8192 ? 32 * ws : 16 * ws;
    __m512 acc[4];
    for (int t = 0; t < nt; t++) acc[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const size_t bi = (size_t)i * bs;
        {
            const char *pf = (const char *)wb + ahead + (size_t)i * 16 * bs;
            for (int l = 0; l < 5; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        }
        __m512i x[4];
        for (int g = 0; g < 4; g++) x[g] = rows4_qs(wb + (size_t)(4 * g) * ws, ws, bi + 2);
        const __m512i t0 = _mm512_unpacklo_epi32(x[0], x[1]), t1 = _mm512_unpackhi_epi32(x[0], x[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(x[2], x[3]), t3 = _mm512_unpackhi_epi32(x[2], x[3]);
        const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                              _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
        __m512i q[8];
        for (int j = 0; j < 4; j++) {
            q[j] = _mm512_and_si512(u[j], m4);
            q[4 + j] = _mm512_and_si512(_mm512_srli_epi32(u[j], 4), m4);
        }
        const __m512 dw = _mm512_cvtph_ps(_mm256_set_epi64x((long long)scales4_rows(wb, ws, bi, 3),
                                                            (long long)scales4_rows(wb, ws, bi, 2),
                                                            (long long)scales4_rows(wb, ws, bi, 1),
                                                            (long long)scales4_rows(wb, ws, bi, 0)));
        for (int t = 0; t < nt; t++) {
            const uint8_t *at = a + (size_t)t * as, *qa = at + (size_t)i * sizeof(mf_block_q8_0) + 2;
            int32_t c;
            float da;
            mf_cpu_q4_0_aux_get(at + aux_at, nb, i, &c, &da);
            __m512i z = _mm512_set1_epi32(c);
            DPB_MEM(z, q[0], qa, 0);
            DPB_MEM(z, q[1], qa, 4);
            DPB_MEM(z, q[2], qa, 8);
            DPB_MEM(z, q[3], qa, 12);
            DPB_MEM(z, q[4], qa, 16);
            DPB_MEM(z, q[5], qa, 20);
            DPB_MEM(z, q[6], qa, 24);
            DPB_MEM(z, q[7], qa, 28);
            acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(z), _mm512_mul_ps(dw, _mm512_set1_ps(da)), acc[t]);
        }
    }
    /* lane 4q + p holds row 4p + q */
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int t = 0; t < nt; t++) _mm512_storeu_ps(out + (size_t)t * os, _mm512_permutexvar_ps(order, acc[t]));
}
#undef DPB_MEM

#define CALL_Q4_0_RP16(k) dot16n_q4_0_rp_t(k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot16n_q4_0_rp, CALL_Q4_0_RP16)
#undef CALL_Q4_0_RP16

mf_cpu_dot8n_fn mf_cpu_ordered_dot16n_avx512(mf_type t, int variant) {
    return t == MF_TYPE_Q4_0 && variant == MF_ORDER_REPACKED ? dot16n_q4_0_rp : NULL;
}

#define CALL_Q8_0(k) dot8n_plain32(K_Q8_0, k, n, w, ws, a, as, out, os)
#define CALL_Q5_0(k) dot8n_plain32(K_Q5_0, k, n, w, ws, a, as, out, os)
#define CALL_Q4_0_RP(k) dot8n_q4_0_rp_t(true, k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot8n_q8_0, CALL_Q8_0)
MF_CPU_DOT8N_BODIES(dot8n_q5_0, CALL_Q5_0)
MF_CPU_DOT8N_BODIES(dot8n_q4_0_rp, CALL_Q4_0_RP)
#undef CALL_Q8_0
#undef CALL_Q5_0
#undef CALL_Q4_0_RP

static void dot8_q8_0(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_plain32(K_Q8_0, 1, n, w, ws, a, 0, out, 0);
}
static void dot8_q5_0(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_plain32(K_Q5_0, 1, n, w, ws, a, 0, out, 0);
}
static void dot8_q4_0_rp(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_q4_0_rp_t(false, 1, n, w, ws, a, 0, out, 0);
}

/* Q4_1 and Q5_1 in the plain order with minimums (st_q4_1 / st_q5_1 in cpu_dot_order_avx2.c): per
 * block, acc = fma(d_w * d_a, lanes, acc) with lane p the exact sum of q * a over bytes 4p..4p+3 (q
 * the unsigned 4- or 5-bit code, straight into vpdpbusd), and s = fma(m_w, s_a, s); mf_x86_hsum8(acc) + s
 * at the end. As in dot8_q4_0_rp, a register holds four rows' 16 code bytes (row k in quarter k):
 * its low nibbles (values 0..15) against the activation's first 16 bytes give lanes 0..3 of each
 * row, its high nibbles lanes 4..7, so the float chains live in two registers per four rows, lo
 * (quarter k: row k's lanes 0..3) and hi (lanes 4..7), each lane its own chain as in the one-row
 * dot. A second load of four rows' leading 16 bytes gives the eight rows' (d, m) halves, converted
 * together (row r in lanes 2r, 2r+1; the minimum chains run in the odd lanes of one register).
 * Q5_1's fifth bits become byte masks on the scalar side (measured faster than vpshufb + vptestmb
 * on the header): bits 0..15 of four rows' qh words for the low nibbles, bits 16..31 for the high. */
static inline __attribute__((always_inline)) void dot8n_min32(int kind, const int nt, int64_t n, const uint8_t *w,
                                                               size_t ws, const uint8_t *a, size_t as, float *out,
                                                               size_t os) {
    const size_t bs = kind == K_Q4_1 ? sizeof(mf_block_q4_1) : sizeof(mf_block_q5_1);
    const size_t qo = kind == K_Q4_1 ? offsetof(mf_block_q4_1, qs) : offsetof(mf_block_q5_1, qs);
    const int lines = (int)((8 * bs + 63) / 64);
    const __m512i m4 = _mm512_set1_epi8(0x0F), b5 = _mm512_set1_epi8(0x10);
    /* (d, m) of rows 0..3 are dwords 0 4 8 12 of the first header register, of rows 4..7 of the second */
    const __m512i dm_idx = _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 28, 24, 20, 16, 12, 8, 4, 0);
    /* each quarter k of a chain register gets row 4g + k's d_w * d_a (float lane 2 (4g + k)) */
    const __m512i d_idx[2] = {_mm512_set_epi32(6, 6, 6, 6, 4, 4, 4, 4, 2, 2, 2, 2, 0, 0, 0, 0),
                              _mm512_set_epi32(14, 14, 14, 14, 12, 12, 12, 12, 10, 10, 10, 10, 8, 8, 8, 8)};
    __m512 lo[4][2], hi[4][2], s[4];
    for (int t = 0; t < nt; t++)
        lo[t][0] = lo[t][1] = hi[t][0] = hi[t][1] = s[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        PREFETCH_NEXT8(w, ws, bs, i, lines);
        const size_t bi = (size_t)i * bs;
        const __m512i hd[2] = {rows4_qs(w, ws, bi), rows4_qs(w + 4 * ws, ws, bi)};
        const __m512 h = _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutex2var_epi32(hd[0], dm_idx, hd[1])));
        __m512i ql[2], qh[2];
        for (int g = 0; g < 2; g++) {
            const __m512i x = rows4_qs(w + (size_t)(4 * g) * ws, ws, bi + qo);
            ql[g] = _mm512_and_si512(x, m4), qh[g] = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
            if (kind == K_Q5_1) {
                const uint8_t *q0 = w + (size_t)(4 * g) * ws + bi + offsetof(mf_block_q5_1, qh);
                uint32_t h0, h1, h2, h3;
                memcpy(&h0, q0, 4), memcpy(&h1, q0 + ws, 4), memcpy(&h2, q0 + 2 * ws, 4), memcpy(&h3, q0 + 3 * ws, 4);
                const uint64_t x01 = (uint64_t)h0 | (uint64_t)h1 << 32, x23 = (uint64_t)h2 | (uint64_t)h3 << 32;
                const uint64_t ml = 0x0000FFFF0000FFFFull, mh = 0xFFFF0000FFFF0000ull;
                ql[g] = _mm512_mask_add_epi8(ql[g], (__mmask64)(_pext_u64(x01, ml) | _pext_u64(x23, ml) << 32), ql[g], b5);
                qh[g] = _mm512_mask_add_epi8(qh[g], (__mmask64)(_pext_u64(x01, mh) | _pext_u64(x23, mh) << 32), qh[g], b5);
            }
        }
        for (int t = 0; t < nt; t++) {
            const mf_block_q8_1 *ab = (const mf_block_q8_1 *)(a + (size_t)t * as) + i;
            const __m512i alo = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ab->qs));
            const __m512i ahi = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(ab->qs + 16)));
            uint16_t da, sa;
            memcpy(&da, &ab->d, 2), memcpy(&sa, &ab->s, 2);
            const __m512 d = _mm512_mul_ps(h, _mm512_set1_ps(_cvtsh_ss(da))); /* even lanes: d_w * d_a */
            s[t] = _mm512_mask3_fmadd_ps(h, _mm512_set1_ps(_cvtsh_ss(sa)), s[t], (__mmask16)0xAAAA);
            for (int g = 0; g < 2; g++) {
                const __m512 dg = _mm512_permutexvar_ps(d_idx[g], d);
                const __m512i zero = _mm512_setzero_si512();
                lo[t][g] = _mm512_fmadd_ps(dg, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, ql[g], alo)), lo[t][g]);
                hi[t][g] = _mm512_fmadd_ps(dg, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, qh[g], ahi)), hi[t][g]);
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        float sm[16], l[2][16], u[2][16];
        _mm512_storeu_ps(sm, s[t]);
        for (int g = 0; g < 2; g++) _mm512_storeu_ps(l[g], lo[t][g]), _mm512_storeu_ps(u[g], hi[t][g]);
        for (int r = 0; r < 8; r++) {
            const int g = r / 4, k = r % 4;
            const __m256 v = _mm256_setr_m128(_mm_loadu_ps(l[g] + 4 * k), _mm_loadu_ps(u[g] + 4 * k));
            out[(size_t)t * os + r] = mf_x86_hsum8(v) + sm[2 * r + 1];
        }
    }
}

#define CALL_Q4_1(k) dot8n_min32(K_Q4_1, k, n, w, ws, a, as, out, os)
#define CALL_Q5_1(k) dot8n_min32(K_Q5_1, k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot8n_q4_1, CALL_Q4_1)
MF_CPU_DOT8N_BODIES(dot8n_q5_1, CALL_Q5_1)
#undef CALL_Q4_1
#undef CALL_Q5_1

static void dot8_q4_1(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_min32(K_Q4_1, 1, n, w, ws, a, 0, out, 0);
}
static void dot8_q5_1(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_min32(K_Q5_1, 1, n, w, ws, a, 0, out, 0);
}

/* Q6_K in the plain order (see st_q6_K in cpu_dot_order_avx2.c): lane p of a row's step is
 * sum over the super-block's eight 32-value groups of scale * (q * a over bytes 4p..4p+3), q the
 * unsigned 6-bit code, minus 32 * (S[2p] sc[2p] + S[2p+1] sc[2p+1]) with S the activation sums of
 * 16. Here a row's 512-bit accumulator holds two groups (lanes 0..7 and 8..15, added at the end)
 * and starts at minus the offsets; the scales enter as int16 through vpdpwssd. */
static inline __m256i q6_row_lanes(const mf_block_q6_K *x, const mf_block_q8_K *a, __m256i bneg) {
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
    /* - 32 * (S[2p] sc[2p] + S[2p+1] sc[2p+1]) in lane p (|32 sc| <= 4096 fits int16) */
    __m512i acc = _mm512_zextsi256_si512(_mm256_madd_epi16(bneg, _mm256_slli_epi16(sc16, 5)));
    const __m512i sc = _mm512_castsi256_si512(sc16);
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    for (int j = 0; j < 2; j++) {
        /* values 128j..128j+63 (groups 4j, 4j+1: low nibbles of ql[64j..64j+63], qh bits 0-1 and 2-3)
         * and 128j+64..128j+127 (groups 4j+2, 4j+3: high nibbles, qh bits 4-5 and 6-7) */
        const __m512i l = _mm512_loadu_si512(x->ql + 64 * j);
        const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * j)));
        const __m512i h0 = _mm512_and_si512(_mm512_sllv_epi64(h, _mm512_set_epi64(2, 2, 2, 2, 4, 4, 4, 4)), m30);
        const __m512i h1 = _mm512_and_si512(_mm512_srlv_epi64(h, _mm512_set_epi64(2, 2, 2, 2, 0, 0, 0, 0)), m30);
        /* bit select: the low nibble from the first operand, the rest from the second */
        const __m512i q0 = _mm512_ternarylogic_epi32(m4, l, h0, 0xCA);
        const __m512i q1 = _mm512_ternarylogic_epi32(m4, _mm512_srli_epi16(l, 4), h1, 0xCA);
        /* scales 8j..8j+3 and 8j+4..8j+7, each over 16 values (eight int16 pairs) */
        const __m512i s0 = _mm512_permutexvar_epi16(
            _mm512_set_epi16(8 * j + 3, 8 * j + 3, 8 * j + 3, 8 * j + 3, 8 * j + 3, 8 * j + 3, 8 * j + 3, 8 * j + 3,
                             8 * j + 2, 8 * j + 2, 8 * j + 2, 8 * j + 2, 8 * j + 2, 8 * j + 2, 8 * j + 2, 8 * j + 2,
                             8 * j + 1, 8 * j + 1, 8 * j + 1, 8 * j + 1, 8 * j + 1, 8 * j + 1, 8 * j + 1, 8 * j + 1,
                             8 * j, 8 * j, 8 * j, 8 * j, 8 * j, 8 * j, 8 * j, 8 * j),
            sc);
        const __m512i s1 = _mm512_permutexvar_epi16(
            _mm512_set_epi16(8 * j + 7, 8 * j + 7, 8 * j + 7, 8 * j + 7, 8 * j + 7, 8 * j + 7, 8 * j + 7, 8 * j + 7,
                             8 * j + 6, 8 * j + 6, 8 * j + 6, 8 * j + 6, 8 * j + 6, 8 * j + 6, 8 * j + 6, 8 * j + 6,
                             8 * j + 5, 8 * j + 5, 8 * j + 5, 8 * j + 5, 8 * j + 5, 8 * j + 5, 8 * j + 5, 8 * j + 5,
                             8 * j + 4, 8 * j + 4, 8 * j + 4, 8 * j + 4, 8 * j + 4, 8 * j + 4, 8 * j + 4, 8 * j + 4),
            sc);
        const __m512i a0 = _mm512_loadu_si512(a->qs + 128 * j), a1 = _mm512_loadu_si512(a->qs + 128 * j + 64);
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q0, a0), s0);
        acc = _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(q1, a1), s1);
    }
    return _mm256_add_epi32(_mm512_castsi512_si256(acc), _mm512_extracti64x4_epi64(acc, 1));
}

static void dot8_q6_K(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    const uint8_t *wb = w;
    const mf_block_q8_K *ab = a;
    const size_t bs = sizeof(mf_block_q6_K);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    for (int64_t i = 0; i < n / 256; i++) {
        PREFETCH_NEXT8(wb, ws, bs, i, (int)((8 * bs + 63) / 64));
        const __m256i bneg = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_loadu_si256((const __m256i *)ab[i].bsums));
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(ab[i].d),
                                       scales8(wb + offsetof(mf_block_q6_K, d), ws, (size_t)i * bs));
        for (int p = 0; p < 4; p++) {
            const mf_block_q6_K *x0 = (const mf_block_q6_K *)(wb + (size_t)(2 * p) * ws) + i;
            const mf_block_q6_K *x1 = (const mf_block_q6_K *)(wb + (size_t)(2 * p + 1) * ws) + i;
            const __m512i s = _mm512_inserti64x4(_mm512_castsi256_si512(q6_row_lanes(x0, ab + i, bneg)),
                                                 q6_row_lanes(x1, ab + i, bneg), 1);
            acc[p] = _mm512_fmadd_ps(spread2(d, p), _mm512_cvtepi32_ps(s), acc[p]);
        }
    }
    store_pairs(acc, out);
}

/* ---- Q4_K and Q5_K: the 6-bit scales and mins of eight rows ---- */

/* The 6-bit scales and mins of four rows' Q4_K/Q5_K super-blocks (k4_scales of the AVX2 file, four
 * rows at once) from z = rows4_qs(rows, block start): quarter k of z is row k's d | dmin << 16 and
 * its packed scale words u0 u1 u2; quarter k of the result holds row k's eight scales (bytes 0..7)
 * and eight mins (8..15). Scales 0-3 = u0 & 0x3f.., mins 0-3 = u1 & 0x3f.., scales 4-7 =
 * (u2 & 0x0f..) | (u0 >> 6 & 0x03..) << 4, mins 4-7 = (u2 >> 4 & 0x0f..) | (u1 >> 6 & 0x03..) << 4. */
static inline __m512i k4_scales_rows4(__m512i z) {
    const __m512i a = _mm512_shuffle_epi32(z, _MM_SHUFFLE(3, 2, 3, 1)); /* u0 u2 u1 u2 */
    const __m512i b = _mm512_shuffle_epi32(z, _MM_SHUFFLE(2, 2, 1, 1)); /* u0 u0 u1 u1 */
    const __m512i lo = _mm512_and_si512(_mm512_srlv_epi32(a, _mm512_set4_epi32(4, 0, 0, 0)),
                                        _mm512_set4_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f));
    const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(b, 2), _mm512_set4_epi32(0x30303030, 0, 0x30303030, 0));
    return _mm512_or_si512(lo, hi); /* s0-3 s4-7 m0-3 m4-7 */
}

/* The activation sums of a Q8_K super-block's eight 32-value sub-blocks as int16 (exact: |sum| <=
 * 32 * 128). */
static inline __m128i sub_sums8(const int16_t *bsums) {
    const __m256i bsv = _mm256_loadu_si256((const __m256i *)bsums);
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_hadd_epi16(bsv, bsv), _MM_SHUFFLE(3, 1, 2, 0)));
}

/* Eight rows' minimum sums (k4_min_sum of the AVX2 file) in row order: sm[p] holds rows 2p, 2p+1's
 * scales and mins as int16 (row 2p: scales 0..7, mins 8..15; row 2p+1 at 16..31), bs8 the sub-block
 * sums. */
static inline __m256i k4_min_sums8(const __m512i sm[4], __m128i bs8) {
    /* mins against the sub-block sums; madd leaves four partial sums of row 2p in quarter 1 of t[p],
     * of row 2p+1 in quarter 3 */
    const __m512i bsm = _mm512_maskz_broadcast_i32x4(0xF0F0, bs8);
    __m512i t[4];
    for (int p = 0; p < 4; p++) t[p] = _mm512_madd_epi16(sm[p], bsm);
    /* quarters [row 2p+2 | row 2p | row 2p+3 | row 2p+1] for p = 0, 2 (rows 0-3, then 4-7) */
    __m512i v0 = _mm512_add_epi32(t[0], _mm512_shuffle_i64x2(t[1], t[1], _MM_SHUFFLE(2, 3, 0, 1)));
    __m512i v1 = _mm512_add_epi32(t[2], _mm512_shuffle_i64x2(t[3], t[3], _MM_SHUFFLE(2, 3, 0, 1)));
    v0 = _mm512_add_epi32(v0, _mm512_shuffle_epi32(v0, _MM_PERM_BADC));
    v1 = _mm512_add_epi32(v1, _mm512_shuffle_epi32(v1, _MM_PERM_BADC));
    v0 = _mm512_add_epi32(v0, _mm512_shuffle_epi32(v0, _MM_PERM_CDAB));
    v1 = _mm512_add_epi32(v1, _mm512_shuffle_epi32(v1, _MM_PERM_CDAB));
    /* row order: rows 0 1 2 3 are quarters 1 3 0 2 of v0; rows 4-7 the same of v1 */
    return _mm512_castsi512_si256(
        _mm512_permutex2var_epi32(v0, _mm512_set_epi32(0, 0, 0, 0, 0, 0, 0, 0, 24, 16, 28, 20, 8, 0, 12, 4), v1));
}

/* The scales and mins of rows 2p, 2p+1 as int16 (see k4_min_sums8), p = 0..3, from the unpacked
 * scales of rows 0-3 (k03) and 4-7 (k47). */
static inline void k4_scales8(__m512i k03, __m512i k47, __m512i sm[4]) {
    sm[0] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(k03));
    sm[1] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(k03, 1));
    sm[2] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(k47));
    sm[3] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(k47, 1));
}

/* Q4_K in the repacked order (st_q4_K_rp in cpu_dot_order_avx2.c): per super-block and row, for
 * c = 0..3, s = fma((float)isum_c, d_w * d_a, s) and sm = fma((float)msum_c, dmin_w * d_a, sm),
 * the result s - sm, with isum_c = sc[2c] * D[2c] + sc[2c+1] * D[2c+1] (D[j] = q . a over sub-block
 * j) and msum_c = mn[2c] * S[2c] + mn[2c+1] * S[2c+1] (S[j] the activation sum of sub-block j),
 * exact integers formed in any grouping. One 16-lane chain holds all eight rows' s (lanes 0..7) and
 * sm (8..15), stepped four times per super-block.
 *
 * The integer sums: a row's 64-byte load h holds qs chunks 2h, 2h+1, so its low nibbles are
 * sub-blocks 4h and 4h+2, its high nibbles 4h+1 and 4h+3; vpdpbusd against the activations regrouped
 * to match (av) gives i32 lanes of four products each (|lane| <= 4 * 15 * 128, so int16 holds it).
 * Packing the low nibbles' lanes of h = 0 and h = 1 into one int16 vector (and the high nibbles'
 * into another) and vpdpwssd by the scales spread over each sub-block's pairs leaves the row's
 * sums in one register z with each pair c in its own lanes: in every quarter lanes 0-1 come from
 * h = 0, 2-3 from h = 1, and quarters 0-1 hold the low sub-block pairs, 2-3 the high ones, so
 * quarters 0-1 are (c0 c0 c2 c2), quarters 2-3 (c1 c1 c3 c3). */

/* Scale indices of the packed int16 lanes of a row whose scales start at int16 o of its sm[]:
 * quarters 0-1 take sub-blocks (a, b) for their lanes 0-3 and 4-7, quarters 2-3 (c, d). */
static inline __m512i k4_spread(short o, short a, short b, short c, short d) {
    a += o, b += o, c += o, d += o;
    return _mm512_set_epi16(d, d, d, d, c, c, c, c, d, d, d, d, c, c, c, c, b, b, b, b, a, a, a, a, b, b, b, b, a, a, a,
                            a);
}

static void dot8_q4_K_rp(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    const uint8_t *wb = w;
    const mf_block_q8_K *ab = a;
    const size_t bs = sizeof(mf_block_q4_K);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* [parity of the row][low / high nibbles]: the low nibbles' packed lanes are sub-blocks 0, 4 in
     * quarters 0-1 and 2, 6 in quarters 2-3; the high nibbles' 1, 5 and 3, 7 */
    const __m512i spread[2][2] = {{k4_spread(0, 0, 4, 2, 6), k4_spread(0, 1, 5, 3, 7)},
                                  {k4_spread(16, 0, 4, 2, 6), k4_spread(16, 1, 5, 3, 7)}};
    /* the reduction leaves (row r < 4, pair c) in lane 4 (2 (r & 1) + (c & 1)) + 2 (r >> 1) + (c >> 1)
     * of rs[0], rows 4..7 the same in rs[1]; pick01 gathers [c0 of rows 0..7 | c1 of rows 0..7],
     * pick23 the same of c2, c3 */
#define K4_LANE(r, c) (4 * (2 * ((r) & 1) + ((c) & 1)) + 2 * (((r) & 3) >> 1) + ((c) >> 1) + ((r) >= 4 ? 16 : 0))
#define K4_PAIRS(c)                                                                                                    \
    _mm512_set_epi32(K4_LANE(7, c + 1), K4_LANE(6, c + 1), K4_LANE(5, c + 1), K4_LANE(4, c + 1), K4_LANE(3, c + 1),    \
                     K4_LANE(2, c + 1), K4_LANE(1, c + 1), K4_LANE(0, c + 1), K4_LANE(7, c), K4_LANE(6, c),            \
                     K4_LANE(5, c), K4_LANE(4, c), K4_LANE(3, c), K4_LANE(2, c), K4_LANE(1, c), K4_LANE(0, c))
    const __m512i pick01 = K4_PAIRS(0), pick23 = K4_PAIRS(2);
#undef K4_PAIRS
#undef K4_LANE
    /* words of the unpacked mins: pair c of row r (bytes 8 + 2c, 9 + 2c of quarter r % 4) for
     * (c, r) in [c0 rows 0..7 | c1 rows 0..7 | c2 | c3]; d and dmin of rows 0..7 from the headers */
    const __m512i mpick = _mm512_set_epi16(63, 55, 47, 39, 31, 23, 15, 7, 62, 54, 46, 38, 30, 22, 14, 6, 61, 53, 45, 37,
                                           29, 21, 13, 5, 60, 52, 44, 36, 28, 20, 12, 4);
    const __m256i dpick = _mm256_setr_epi16(0, 8, 16, 24, 32, 40, 48, 56, 1, 9, 17, 25, 33, 41, 49, 57);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        PREFETCH_NEXT8(wb, ws, bs, i, (int)((8 * bs + 63) / 64));
        const mf_block_q8_K *y = ab + i;
        const size_t bi = (size_t)i * bs;
        /* activations regrouped: av[2h] = [sub-block 4h | 4h + 2], av[2h + 1] = [4h + 1 | 4h + 3] */
        __m512i av[4];
        for (int h = 0; h < 2; h++) {
            const __m256i *q = (const __m256i *)(y->qs + 128 * h);
            av[2 * h] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(q)), _mm256_loadu_si256(q + 2), 1);
            av[2 * h + 1] =
                _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(q + 1)), _mm256_loadu_si256(q + 3), 1);
        }
        const __m512i z03 = rows4_qs(wb, ws, bi), z47 = rows4_qs(wb + 4 * ws, ws, bi);
        const __m512i k03 = k4_scales_rows4(z03), k47 = k4_scales_rows4(z47);
        __m512i sm[4];
        k4_scales8(k03, k47, sm);
        __m512i z[8];
        for (int r = 0; r < 8; r++) {
            const mf_block_q4_K *x = (const mf_block_q4_K *)(wb + (size_t)r * ws) + i;
            const __m512i zero = _mm512_setzero_si512();
            __m512i p[2][2]; /* [h][low / high nibbles] */
            for (int h = 0; h < 2; h++) {
                const __m512i bits = _mm512_loadu_si512(x->qs + 64 * h);
                p[h][0] = _mm512_dpbusd_epi32(zero, _mm512_and_si512(bits, m4), av[2 * h]);
                p[h][1] = _mm512_dpbusd_epi32(zero, _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4), av[2 * h + 1]);
            }
            const __m512i lo = _mm512_packs_epi32(p[0][0], p[1][0]), hi = _mm512_packs_epi32(p[0][1], p[1][1]);
            const __m512i sl = _mm512_permutexvar_epi16(spread[r & 1][0], sm[r / 2]);
            const __m512i sh = _mm512_permutexvar_epi16(spread[r & 1][1], sm[r / 2]);
            z[r] = _mm512_dpwssd_epi32(_mm512_dpwssd_epi32(zero, lo, sl), hi, sh);
        }
        /* g[q], rows 2q, 2q+1: [2q: quarters 0+1, 2q: 2+3, 2q+1: 0+1, 2q+1: 2+3], each quarter
         * (cA cA cB cB); then lanes added in pairs: quarter k of rs[q] = (lanes 0+1, 2+3 of quarter
         * k of g[2q], the same of g[2q+1]) */
        __m512i g[4];
        for (int q = 0; q < 4; q++)
            g[q] = _mm512_add_epi32(_mm512_shuffle_i64x2(z[2 * q], z[2 * q + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm512_shuffle_i64x2(z[2 * q], z[2 * q + 1], _MM_SHUFFLE(3, 1, 3, 1)));
        __m512i rs[2];
        for (int q = 0; q < 2; q++) {
            const __m512 a0 = _mm512_castsi512_ps(g[2 * q]), a1 = _mm512_castsi512_ps(g[2 * q + 1]);
            rs[q] = _mm512_add_epi32(_mm512_castps_si512(_mm512_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0))),
                                     _mm512_castps_si512(_mm512_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1))));
        }
        const __m512 i01 = _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(rs[0], pick01, rs[1]));
        const __m512 i23 = _mm512_cvtepi32_ps(_mm512_permutex2var_epi32(rs[0], pick23, rs[1]));
        /* msum_c: the mins' int16 pairs (mn[2c], mn[2c+1]) against (S[2c], S[2c+1]) by madd */
        const __m512i mw = _mm512_permutex2var_epi16(k03, mpick, k47);
        const __m512i bs8 = _mm512_castsi128_si512(sub_sums8(y->bsums));
        const __m512i b01 = _mm512_permutexvar_epi32(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                                                     bs8);
        const __m512i b23 = _mm512_permutexvar_epi32(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
                                                     bs8);
        const __m512 m01 = _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_castsi512_si256(mw)), b01));
        const __m512 m23 =
            _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(mw, 1)), b23));
        /* [d_w of rows 0..7 | dmin_w of rows 0..7] * d_a; then the four steps, each on
         * [isum_c of rows 0..7 | msum_c of rows 0..7] */
        const __m256i hd = _mm512_castsi512_si256(_mm512_permutex2var_epi16(z03, _mm512_zextsi256_si512(dpick), z47));
        const __m512 d = _mm512_mul_ps(_mm512_cvtph_ps(hd), _mm512_set1_ps(y->d));
        acc = _mm512_fmadd_ps(_mm512_shuffle_f32x4(i01, m01, _MM_SHUFFLE(1, 0, 1, 0)), d, acc);
        acc = _mm512_fmadd_ps(_mm512_shuffle_f32x4(i01, m01, _MM_SHUFFLE(3, 2, 3, 2)), d, acc);
        acc = _mm512_fmadd_ps(_mm512_shuffle_f32x4(i23, m23, _MM_SHUFFLE(1, 0, 1, 0)), d, acc);
        acc = _mm512_fmadd_ps(_mm512_shuffle_f32x4(i23, m23, _MM_SHUFFLE(3, 2, 3, 2)), d, acc);
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1)));
}
/* Q5_K in the plain order (st_q5_K in cpu_dot_order_avx2.c): per super-block, acc = fma(d_a * d_w,
 * lanes, acc) with lane p = sum over the eight sub-blocks j of sc[j] * (q * a over bytes 4p..4p+3 of
 * sub-block j), q the 5-bit code; s = fma(-d_a * dmin_w, (float)msum, s), msum = sum over j of
 * mn[j] * (activation sum of sub-block j); mf_x86_hsum8(acc) + s at the end. Rows 2p, 2p+1 share a
 * register: qs chunk c of each (sub-blocks 2c, 2c+1 in the low and high nibbles), the fifth bits
 * from their qh (bit 2c / 2c+1 of byte k, rotated to bit 4 of the byte), maddubs against sub-block
 * 2c's (2c+1's) activations in both halves, then vpdpwssd by the row's scale spread over its half,
 * so the i32 lanes are row 2p's eight lanes, then row 2p+1's: no folding. */
static void dot8_q5_K(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    const uint8_t *wb = w;
    const mf_block_q8_K *ab = a;
    const size_t bs = sizeof(mf_block_q5_K);
    const __m512i m4 = _mm512_set1_epi8(0x0F), b5 = _mm512_set1_epi8(0x10);
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    __m256 s = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        PREFETCH_NEXT8(wb, ws, bs, i, (int)((8 * bs + 63) / 64));
        const mf_block_q8_K *y = ab + i;
        const size_t bi = (size_t)i * bs;
        __m512i sm[4];
        k4_scales8(k4_scales_rows4(rows4_qs(wb, ws, bi)), k4_scales_rows4(rows4_qs(wb + 4 * ws, ws, bi)), sm);
        const __m256i msum = k4_min_sums8(sm, sub_sums8(y->bsums));
        const __m256 da = _mm256_set1_ps(y->d), nda = _mm256_set1_ps(-y->d);
        const __m256 d = _mm256_mul_ps(da, scales8(wb, ws, bi));
        s = _mm256_fmadd_ps(_mm256_mul_ps(nda, scales8(wb + 2, ws, bi)), _mm256_cvtepi32_ps(msum), s);
        for (int p = 0; p < 4; p++) {
            const mf_block_q5_K *x0 = (const mf_block_q5_K *)(wb + (size_t)(2 * p) * ws + bi);
            const mf_block_q5_K *x1 = (const mf_block_q5_K *)(wb + (size_t)(2 * p + 1) * ws + bi);
            /* int16 lanes [row 2p's scales | again | row 2p+1's | again]: vpshufb spreads one */
            const __m512i sc = _mm512_shuffle_i64x2(sm[p], sm[p], _MM_SHUFFLE(2, 2, 0, 0));
            const __m512i h = load_pair((const int8_t *)x0->qh, (const int8_t *)x1->qh);
            __m512i z = _mm512_setzero_si512();
            for (int c = 0; c < 4; c++) {
                const __m512i x = load_pair((const int8_t *)x0->qs + 32 * c, (const int8_t *)x1->qs + 32 * c);
                /* bit 2c (2c+1) of a qh byte rotated to bit 4, then (code | (rot & 0x10)) */
                const __m512i rl = _mm512_rolv_epi64(h, _mm512_set1_epi64((4 - 2 * c) & 63));
                const __m512i rh = _mm512_rolv_epi64(h, _mm512_set1_epi64((3 - 2 * c) & 63));
                const __m512i ql = _mm512_ternarylogic_epi32(_mm512_and_si512(x, m4), rl, b5, 0xF8);
                const __m512i xh = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
                const __m512i qh = _mm512_ternarylogic_epi32(xh, rh, b5, 0xF8);
                const __m512i al = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(y->qs + 64 * c)));
                const __m512i ah = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32)));
                const __m512i sl = _mm512_shuffle_epi8(sc, _mm512_set1_epi16((short)(0x0100 + 0x0202 * (2 * c))));
                const __m512i sh = _mm512_shuffle_epi8(sc, _mm512_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
                z = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(ql, al), sl);
                z = _mm512_dpwssd_epi32(z, _mm512_maddubs_epi16(qh, ah), sh);
            }
            acc[p] = _mm512_fmadd_ps(spread2(d, p), _mm512_cvtepi32_ps(z), acc[p]);
        }
    }
    float sv[8];
    _mm256_storeu_ps(sv, s);
    for (int p = 0; p < 4; p++) {
        out[2 * p] = mf_x86_hsum8(_mm512_castps512_ps256(acc[p])) + sv[2 * p];
        out[2 * p + 1] = mf_x86_hsum8(_mm512_extractf32x8_ps(acc[p], 1)) + sv[2 * p + 1];
    }
}

mf_cpu_dot4_fn mf_cpu_ordered_dot8_avx512(mf_type t, int variant) {
    if (variant == MF_ORDER_REPACKED) return t == MF_TYPE_Q4_K ? dot8_q4_K_rp : t == MF_TYPE_Q4_0 ? dot8_q4_0_rp : NULL;
    switch (t) {
    case MF_TYPE_Q8_0: return dot8_q8_0;
    case MF_TYPE_Q5_0: return dot8_q5_0;
    case MF_TYPE_Q4_1: return dot8_q4_1;
    case MF_TYPE_Q5_1: return dot8_q5_1;
    case MF_TYPE_Q5_K: return dot8_q5_K;
    case MF_TYPE_Q6_K: return dot8_q6_K;
    default: return NULL;
    }
}

/* ---- SwiGLU a / (1 + exp(-a)) * b with the ordered vector exp (cpu_exp_avx512.h) ---- */

void mf_cpu_swiglu_ord_avx512(const float *a, const float *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 x = _mm512_maskz_loadu_ps(m, a + i), g = _mm512_maskz_loadu_ps(m, b + i);
        const __m512 e = mf_exp_ord16(_mm512_sub_ps(_mm512_setzero_ps(), x));
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e)), g));
    }
}

mf_cpu_dot8n_fn mf_cpu_ordered_dot8n_avx512(mf_type t, int variant) {
    if (variant == MF_ORDER_REPACKED) return t == MF_TYPE_Q4_0 ? dot8n_q4_0_rp : NULL;
    switch (t) {
    case MF_TYPE_Q8_0: return dot8n_q8_0;
    case MF_TYPE_Q5_0: return dot8n_q5_0;
    case MF_TYPE_Q4_1: return dot8n_q4_1;
    case MF_TYPE_Q5_1: return dot8n_q5_1;
    default: return NULL;
    }
}
