/* dot_avx512.c: AVX-512 (F/BW/DQ/VL + VNNI) dot products of the 32-value block formats and their
 * multi-row tiles (the float formats are in dot_float_avx512.c). Two blocks share one 512-bit
 * register: values of block i in bytes 0..31, block i+1 in bytes 32..63; vpdpbusd (u8 x s8, four
 * products summed into each i32 lane) gives each block's integer sum in eight i32 lanes, which are
 * scaled by that block's d_w * d_a.
 * Activations come from the activation quantizers and lie in [-127, 127]. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

/* Two 16-byte nibble arrays -> 64 bytes: (lo(p0) hi(p0) | lo(p1) hi(p1)), i.e. both blocks' values
 * in block order, 0..15: each array is broadcast to two 128-bit lanes, the second copy shifted
 * right by 4. */
static inline __m512i nibbles2(const uint8_t *p0, const uint8_t *p1) {
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p0))),
                                         _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p1)), 1);
    const __m512i shift = _mm512_set_epi64(0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                           0x0004000400040004, 0, 0);
    return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(0x0F));
}

static inline __m512i load2x32(const void *p0, const void *p1) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(mf_x86_load(p0)), mf_x86_load(p1), 1);
}

/* bit j of the two 32-bit masks -> +16 on byte j of each block (the 5th bit of Q5_0/Q5_1) */
static inline __m512i add_high_bit(__m512i q, const uint8_t *qh0, const uint8_t *qh1) {
    uint32_t h0, h1;
    memcpy(&h0, qh0, 4);
    memcpy(&h1, qh1, 4);
    const __mmask64 k = (__mmask64)h0 | (__mmask64)h1 << 32;
    return _mm512_mask_add_epi8(q, k, q, _mm512_set1_epi8(16));
}

/* The 16-bit words p[0], p[s], p[2s], p[3s] (the fp16 field at the same place in four consecutive
 * blocks of s words) in words 0..3. One or two 64-byte loads and a word permute; the second load is
 * masked to the words needed, so nothing past the fourth block is read. */
static inline __m128i words4(const uint16_t *p, int s) {
    const __m512i idx = _mm512_set_epi64(0, 0, 0, 0, 0, 0, 0,
                                         (long long)((uint64_t)(3 * s) << 48 | (uint64_t)(2 * s) << 32 | (uint64_t)s << 16));
    if (3 * s < 32) return _mm512_castsi512_si128(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(p)));
    const __mmask32 tail = (__mmask32)((1ull << (3 * s - 31)) - 1);
    return _mm512_castsi512_si128(_mm512_permutex2var_epi16(_mm512_loadu_si512(p), idx, _mm512_maskz_loadu_epi16(tail, p + 32)));
}

static inline __m128 cvt4_h(const void *p, int stride_words) { return _mm_cvtph_ps(words4(p, stride_words)); }

/* d_w * d_a of four blocks, block k broadcast over i32 lanes 8k' .. 8k'+7 of the register for
 * blocks (0,1) or (2,3). */
static inline void spread4(__m128 d, __m512 *s01, __m512 *s23) {
    const __m512 z = _mm512_castps128_ps512(d);
    *s01 = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), z);
    *s23 = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2), z);
}

enum { B32_Q4_0, B32_Q4_1, B32_Q5_0, B32_Q5_1, B32_Q8_0 };

/* Blocks b and b + bs (bytes) of a 32-value format -> 64 weights: signed v = q - 8, q - 16 or the
 * Q8_0 value for Q4_0/Q5_0/Q8_0, unsigned q for Q4_1/Q5_1. */
static inline __m512i b32_values(int kind, const uint8_t *b, size_t bs) {
    switch (kind) {
    case B32_Q4_0: {
        const mf_block_q4_0 *x = (const mf_block_q4_0 *)b, *y = (const mf_block_q4_0 *)(b + bs);
        return _mm512_sub_epi8(nibbles2(x->qs, y->qs), _mm512_set1_epi8(8));
    }
    case B32_Q4_1: {
        const mf_block_q4_1 *x = (const mf_block_q4_1 *)b, *y = (const mf_block_q4_1 *)(b + bs);
        return nibbles2(x->qs, y->qs);
    }
    case B32_Q5_0: {
        const mf_block_q5_0 *x = (const mf_block_q5_0 *)b, *y = (const mf_block_q5_0 *)(b + bs);
        return _mm512_sub_epi8(add_high_bit(nibbles2(x->qs, y->qs), x->qh, y->qh), _mm512_set1_epi8(16));
    }
    case B32_Q5_1: {
        const mf_block_q5_1 *x = (const mf_block_q5_1 *)b, *y = (const mf_block_q5_1 *)(b + bs);
        return add_high_bit(nibbles2(x->qs, y->qs), x->qh, y->qh);
    }
    default: {
        const mf_block_q8_0 *x = (const mf_block_q8_0 *)b, *y = (const mf_block_q8_0 *)(b + bs);
        return load2x32(x->qs, y->qs);
    }
    }
}

static inline bool b32_signed(int kind) { return kind == B32_Q4_0 || kind == B32_Q5_0 || kind == B32_Q8_0; }

/* i32 partial sums of two blocks' weights times 64 activations y. vpdpbusd wants an unsigned
 * operand: signed weights go in as |v| with their signs moved onto y (|v| <= 128 and |y| <= 127
 * keep every product exact). */
static inline __m512i b32_pair_sum(int kind, const uint8_t *b, size_t bs, __m512i y) {
    const __m512i zero = _mm512_setzero_si512(), v = b32_values(kind, b, bs);
    if (!b32_signed(kind)) return _mm512_dpbusd_epi32(zero, v, y);
    return _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(v), _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(v), zero, y));
}

/* Blocks i .. nb-1 (at most three) of a row added to sum one at a time, each as a pair of the
 * block with itself whose second half meets zero activations. The dot and the tile both end with
 * this, so their results agree bit for bit. */
static inline float b32_tail(int kind, float sum, int64_t i, int64_t nb, const uint8_t *w, size_t bs, const uint8_t *a) {
    const bool mins = kind == B32_Q4_1 || kind == B32_Q5_1;
    const size_t as = mins ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0), qoff = as - 32;
    for (; i < nb; i++) {
        const uint8_t *wb = w + (size_t)i * bs, *ab = a + (size_t)i * as;
        const __m512i y = _mm512_zextsi256_si512(mf_x86_load(ab + qoff));
        const int s = _mm512_reduce_add_epi32(b32_pair_sum(kind, wb, 0, y));
        uint16_t dw, da, mw, sa;
        memcpy(&dw, wb, 2), memcpy(&da, ab, 2), memcpy(&mw, wb + 2, 2), memcpy(&sa, ab + 2, 2);
        sum += mf_x86_h2f(dw) * mf_x86_h2f(da) * (float)s;
        if (mins) sum += mf_x86_h2f(mw) * mf_x86_h2f(sa);
    }
    return sum;
}

/* One row: four blocks per step (two registers), their d_w * d_a converted together; Q4_1/Q5_1 add
 * m_w * s_a per block (s_a = d_a * sum(a)); then the last 0..3 blocks (b32_tail). */
static inline float dot_b32(int kind, int64_t n, const uint8_t *w, size_t bs, const uint8_t *a) {
    const bool mins = kind == B32_Q4_1 || kind == B32_Q5_1;
    const size_t as = mins ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0), qoff = as - 32;
    const int64_t nb = n / 32;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        const uint8_t *wb = w + (size_t)i * bs, *ab = a + (size_t)i * as;
        const __m512i s0 = b32_pair_sum(kind, wb, bs, load2x32(ab + qoff, ab + as + qoff));
        const __m512i s1 = b32_pair_sum(kind, wb + 2 * bs, bs, load2x32(ab + 2 * as + qoff, ab + 3 * as + qoff));
        __m512 d01, d23;
        spread4(_mm_mul_ps(cvt4_h(wb, (int)(bs / 2)), cvt4_h(ab, (int)(as / 2))), &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(s0), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(s1), acc1);
        if (mins) accm = _mm_fmadd_ps(cvt4_h(wb + 2, (int)(bs / 2)), cvt4_h(ab + 2, (int)(as / 2)), accm);
    }
    return b32_tail(kind, _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + mf_x86_hsum4(accm), i, nb, w, bs, a);
}

static float dot_q4_0_q8_0(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q4_0, n, w, sizeof(mf_block_q4_0), a); }
static float dot_q4_1_q8_1(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q4_1, n, w, sizeof(mf_block_q4_1), a); }
static float dot_q5_0_q8_0(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q5_0, n, w, sizeof(mf_block_q5_0), a); }
static float dot_q5_1_q8_1(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q5_1, n, w, sizeof(mf_block_q5_1), a); }
static float dot_q8_0_q8_0(int64_t n, const void *w, const void *a) { return dot_b32(B32_Q8_0, n, w, sizeof(mf_block_q8_0), a); }

/* ---- multi-row tiles: one weight row, up to MF_SIMD_GEMM_NC activation rows -----------------
 * Four blocks at a time: the weights are unpacked once into two registers of magnitudes |v| and
 * sign masks (signed kinds; each activation row gets v's signs before vpdpbusd), and the four
 * weight scales are converted once. Each output takes the dot's float steps (the integer sums are
 * exact either way), so it equals dot_b32's result bit for bit. */
#define NC MF_SIMD_GEMM_NC

static inline void tile_b32(int kind, int64_t n, const uint8_t *w, size_t bs, const char *a, size_t a_stride, int nc,
                            float *out, size_t out_stride) {
    const bool sign = kind == B32_Q4_0 || kind == B32_Q5_0 || kind == B32_Q8_0;
    const bool mins = kind == B32_Q4_1 || kind == B32_Q5_1;
    const size_t as = mins ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0);
    const int64_t nb = n / 32, n4 = nb / 4 * 4;
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc0[NC], acc1[NC];
    __m128 accm[NC];
    for (int c = 0; c < NC; c++) acc0[c] = acc1[c] = _mm512_setzero_ps(), accm[c] = _mm_setzero_ps();
    for (int64_t i = 0; i < n4; i += 4) {
        const uint8_t *wb = w + (size_t)i * bs;
        __m512i u0 = b32_values(kind, wb, bs), u1 = b32_values(kind, wb + 2 * bs, bs);
        __mmask64 neg0 = 0, neg1 = 0;
        if (sign) {
            neg0 = _mm512_movepi8_mask(u0), neg1 = _mm512_movepi8_mask(u1);
            u0 = _mm512_abs_epi8(u0), u1 = _mm512_abs_epi8(u1);
        }
        const __m128 dw = cvt4_h(wb, (int)(bs / 2)); /* d is the first field of every format */
        const __m128 mw = mins ? cvt4_h(wb + 2, (int)(bs / 2)) : _mm_setzero_ps(); /* m follows d */
        for (int c = 0; c < nc; c++) {
            const uint8_t *ab = (const uint8_t *)(a + (size_t)c * a_stride) + (size_t)i * as;
            const int8_t *q0 = (const int8_t *)(ab + as - 32); /* qs ends every activation block */
            __m512i y0 = load2x32(q0, q0 + as), y1 = load2x32(q0 + 2 * as, q0 + 3 * as);
            if (sign) y0 = _mm512_mask_sub_epi8(y0, neg0, zero, y0), y1 = _mm512_mask_sub_epi8(y1, neg1, zero, y1);
            __m512 d01, d23;
            spread4(_mm_mul_ps(dw, cvt4_h(ab, (int)(as / 2))), &d01, &d23);
            acc0[c] = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, u0, y0)), acc0[c]);
            acc1[c] = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(zero, u1, y1)), acc1[c]);
            if (mins) accm[c] = _mm_fmadd_ps(mw, cvt4_h(ab + 2, (int)(as / 2)), accm[c]);
        }
    }
    for (int c = 0; c < nc; c++) {
        const float r = _mm512_reduce_add_ps(_mm512_add_ps(acc0[c], acc1[c])) + mf_x86_hsum4(accm[c]);
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

void mf_simd_register_avx512(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_0, Q8_0, dot_q4_0_q8_0, gemm_q4_0);
    MF_SIMD_SET_DOT(t, Q4_1, Q8_1, dot_q4_1_q8_1, gemm_q4_1);
    MF_SIMD_SET_DOT(t, Q5_0, Q8_0, dot_q5_0_q8_0, gemm_q5_0);
    MF_SIMD_SET_DOT(t, Q5_1, Q8_1, dot_q5_1_q8_1, gemm_q5_1);
    MF_SIMD_SET_DOT(t, Q8_0, Q8_0, dot_q8_0_q8_0, gemm_q8_0);
}
