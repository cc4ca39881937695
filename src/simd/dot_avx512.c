/* dot_avx512.c: AVX-512 (F/BW/DQ/VL + VNNI) dot products of the 32-value block formats and the
 * float formats, and their multi-row tiles (the float ones a packed-panel GEMM, with AVX512_BF16
 * for BF16 where the CPU has it). Two blocks share one 512-bit register: values of block i in bytes 0..31, block
 * i+1 in bytes 32..63; vpdpbusd (u8 x s8, four products summed into each i32 lane) gives each
 * block's integer sum in eight i32 lanes, which are scaled by that block's d_w * d_a.
 * Activations come from the activation quantizers and lie in [-127, 127]. */
#include "simd/simd_kernels.h"
#include "simd/x86_common.h"

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

/* ---- float formats: 64 values per step in four accumulators, masked tail ---------------------- */

static inline __m512 load_f16x16(const uint16_t *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline __m512 load_bf16x16(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}
static inline __m512 maskload_f16x16(const uint16_t *p, __mmask16 k) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
}
static inline __m512 maskload_bf16x16(const uint16_t *p, __mmask16 k) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(k, p)), 16));
}

#define FLOAT_DOT(name, T, LOAD, MASKLOAD)                                                             \
    static float name(int64_t n, const void *vw, const void *va) {                                     \
        const T *w = vw, *a = va;                                                                      \
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()}; \
        int64_t i = 0;                                                                                 \
        for (; i + 64 <= n; i += 64)                                                                   \
            for (int k = 0; k < 4; k++)                                                                \
                acc[k] = _mm512_fmadd_ps(LOAD(w + i + 16 * k), LOAD(a + i + 16 * k), acc[k]);          \
        for (; i + 16 <= n; i += 16) acc[0] = _mm512_fmadd_ps(LOAD(w + i), LOAD(a + i), acc[0]);       \
        if (i < n) {                                                                                   \
            const __mmask16 k = (__mmask16)((1u << (n - i)) - 1);                                      \
            acc[1] = _mm512_fmadd_ps(MASKLOAD(w + i, k), MASKLOAD(a + i, k), acc[1]);                  \
        }                                                                                              \
        return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]))); \
    }
#define LOAD_F32(p) _mm512_loadu_ps(p)
#define MASKLOAD_F32(p, k) _mm512_maskz_loadu_ps(k, p)
FLOAT_DOT(dot_f32_f32, float, LOAD_F32, MASKLOAD_F32)
FLOAT_DOT(dot_f16_f16, uint16_t, load_f16x16, maskload_f16x16)
FLOAT_DOT(dot_bf16_bf16, uint16_t, load_bf16x16, maskload_bf16x16)

/* Row tiles for a few activation rows: each 32 weights are loaded (and widened) once and multiplied
 * into every activation row's two accumulators; the tail is masked as in the dots. */
#define FLOAT_TILE(name, T, LOAD, MASKLOAD)                                                            \
    static void name(int64_t n, const T *w, const char *a, size_t a_stride, int nc, float *out, size_t out_stride) { \
        __m512 acc[NC][2];                                                                             \
        for (int c = 0; c < NC; c++) acc[c][0] = acc[c][1] = _mm512_setzero_ps();                      \
        int64_t i = 0;                                                                                 \
        for (; i + 32 <= n; i += 32) {                                                                 \
            const __m512 w0 = LOAD(w + i), w1 = LOAD(w + i + 16);                                      \
            for (int c = 0; c < nc; c++) {                                                             \
                const T *ac = (const T *)(a + (size_t)c * a_stride) + i;                               \
                acc[c][0] = _mm512_fmadd_ps(w0, LOAD(ac), acc[c][0]);                                  \
                acc[c][1] = _mm512_fmadd_ps(w1, LOAD(ac + 16), acc[c][1]);                             \
            }                                                                                          \
        }                                                                                              \
        for (; i < n; i += 16) {                                                                       \
            const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);    \
            const __m512 w0 = MASKLOAD(w + i, k);                                                      \
            for (int c = 0; c < nc; c++)                                                               \
                acc[c][0] = _mm512_fmadd_ps(w0, MASKLOAD((const T *)(a + (size_t)c * a_stride) + i, k), acc[c][0]); \
        }                                                                                              \
        for (int c = 0; c < nc; c++)                                                                   \
            out[(size_t)c * out_stride] = _mm512_reduce_add_ps(_mm512_add_ps(acc[c][0], acc[c][1]));   \
    }
FLOAT_TILE(tile_f32, float, LOAD_F32, MASKLOAD_F32)
FLOAT_TILE(tile_f16, uint16_t, load_f16x16, maskload_f16x16)
FLOAT_TILE(tile_bf16, uint16_t, load_bf16x16, maskload_bf16x16)

/* ---- float GEMM: outer products on a packed weight panel ------------------------------------
 * Output tile: 16 weight rows x FT activation rows, in two registers per activation row (rows 0-7,
 * rows 8-15) whose lanes are (row, k parity): lane 2i+e sums row i's products over k = e mod 2. Per
 * block of up to FKB values of k:
 *   ap[c][k]  (f32, FKB floats per activation row): up to FNC activation rows widened once (32 KB);
 *   wp[p][h][2i+e] (f32, 128 bytes per pair p of k values): weight row 8h+i at k = 2p+e, i.e. a
 *             panel's 16 rows widened and transposed in 64-bit pairs; rows >= nr zero, k padded to
 *             a multiple of 16 with zeros (8 KB);
 * then per pair of k two weight-register loads, and per activation row one 64-bit broadcast of
 * (a[2p], a[2p+1]) and two fmas (fewer loads per fma than a 32-bit broadcast per k, and half the
 * transposing). Each block's sums start at zero and are added to out, so a sum is two chains of at
 * most FKB / 2 products plus one add per block. The buffers live on the stack (40 KB): 256-value
 * blocks were not clearly faster and would double that. */
enum { FT = 12, FNC = 64, FKB = 128, FL_F32 = 0, FL_F16 = 1, FL_BF16 = 2 };

/* 16 values of a float row from index i, lanes outside mask m zero (and not read) */
static inline __m512 fl_load(int kind, const void *p, int64_t i, __mmask16 m) {
    if (kind == FL_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    if (kind == FL_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* Eight rows of 16 floats, seen as eight 64-bit pairs each (pair p = values 2p, 2p+1): r[i].pair[p]
 * -> r[p].pair[i]. Pair unpacks of rows 2q, 2q+1 put pair 2l+e of both in 128-bit lane l of
 * t[2q+e]; 128-bit lanes then gather pair 2l+e from t[e], t[2+e], t[4+e], t[6+e]. */
static inline void transpose8x2(__m512 r[8]) {
    __m512d t[8];
    for (int q = 0; q < 4; q++) {
        const __m512d x = _mm512_castps_pd(r[2 * q]), y = _mm512_castps_pd(r[2 * q + 1]);
        t[2 * q] = _mm512_unpacklo_pd(x, y);
        t[2 * q + 1] = _mm512_unpackhi_pd(x, y);
    }
    for (int e = 0; e < 2; e++) {
        const __m512d u1 = _mm512_shuffle_f64x2(t[e], t[2 + e], 0x44), u2 = _mm512_shuffle_f64x2(t[e], t[2 + e], 0xEE);
        const __m512d v1 = _mm512_shuffle_f64x2(t[4 + e], t[6 + e], 0x44), v2 = _mm512_shuffle_f64x2(t[4 + e], t[6 + e], 0xEE);
        r[e] = _mm512_castpd_ps(_mm512_shuffle_f64x2(u1, v1, 0x88));
        r[2 + e] = _mm512_castpd_ps(_mm512_shuffle_f64x2(u1, v1, 0xDD));
        r[4 + e] = _mm512_castpd_ps(_mm512_shuffle_f64x2(u2, v2, 0x88));
        r[6 + e] = _mm512_castpd_ps(_mm512_shuffle_f64x2(u2, v2, 0xDD));
    }
}

static inline __mmask16 mask16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }

/* Fetch values k0 .. k0+kb-1 of nrows rows into L2 (prefetches never fault, so any k0 is fine). */
static inline void fl_prefetch(int kind, const char *p, size_t stride, int nrows, int64_t k0, int kb) {
    const size_t es = kind == FL_F32 ? 4 : 2;
    for (int i = 0; i < nrows; i++)
        for (size_t off = (size_t)k0 * es; off < (size_t)(k0 + kb) * es; off += 64) _mm_prefetch(p + (size_t)i * stride + off, _MM_HINT_T1);
}

/* wp <- weights k0 .. k0+kb-1 of nr <= 16 rows in the pair layout (see above) */
static inline void pack_w(int kind, const char *w, size_t w_stride, int nr, int64_t k0, int kb, float *wp) {
    for (int kk = 0; kk < kb; kk += 16) {
        const __mmask16 m = mask16(kb - kk);
        for (int h = 0; h < 2; h++) {
            __m512 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = 8 * h + i < nr ? fl_load(kind, w + (size_t)(8 * h + i) * w_stride, k0 + kk, m) : _mm512_setzero_ps();
            transpose8x2(r);
            for (int p = 0; p < 8; p++) _mm512_store_ps(wp + (size_t)(kk / 2 + p) * 32 + 16 * h, r[p]);
        }
    }
}

/* ap <- activations k0 .. k0+kb-1 of nc rows, as ap[c][k] with FKB floats per row */
static inline void pack_a(int kind, const char *a, size_t a_stride, int nc, int64_t k0, int kb, float *ap) {
    for (int c = 0; c < nc; c++)
        for (int kk = 0; kk < kb; kk += 16)
            _mm512_store_ps(ap + (size_t)c * FKB + kk, fl_load(kind, a + (size_t)c * a_stride, k0 + kk, mask16(kb - kk)));
}

/* out[c][0..15] (+)= sum_k w[k][.] * ap[c][k] for c < T, rows outside mask rows untouched. acc
 * lane 2i+e of lo[c] (hi[c]) sums row i (8+i) over k = e mod 2; even and odd lanes are added at the
 * end, which puts row r in lane r. */
static inline __attribute__((always_inline)) void fl_tile(int T, int kb, const float *wp, const float *ap, bool first,
                                                          float *out, size_t out_stride, __mmask16 rows) {
    __m512 lo[FT], hi[FT];
#pragma GCC unroll 16
    for (int c = 0; c < T; c++) lo[c] = hi[c] = _mm512_setzero_ps();
    for (int p = 0; p < (kb + 1) / 2; p++) {
        const __m512 wl = _mm512_load_ps(wp + (size_t)p * 32), wh = _mm512_load_ps(wp + (size_t)p * 32 + 16);
#pragma GCC unroll 16
        for (int c = 0; c < T; c++) {
            double pair;
            memcpy(&pair, ap + c * FKB + 2 * p, sizeof pair);
            const __m512 x = _mm512_castpd_ps(_mm512_set1_pd(pair));
            lo[c] = _mm512_fmadd_ps(wl, x, lo[c]);
            hi[c] = _mm512_fmadd_ps(wh, x, hi[c]);
        }
    }
    const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
#pragma GCC unroll 16
    for (int c = 0; c < T; c++) {
        float *o = out + (size_t)c * out_stride;
        __m512 v = _mm512_add_ps(_mm512_permutex2var_ps(lo[c], even, hi[c]), _mm512_permutex2var_ps(lo[c], odd, hi[c]));
        if (!first) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(rows, o));
        _mm512_mask_storeu_ps(o, rows, v);
    }
}

typedef void (*fl_tile_fn)(int kb, const float *wp, const float *ap, bool first, float *out, size_t out_stride,
                           __mmask16 rows);
#define FL_TILE(T)                                                                                      \
    static void fl_tile_##T(int kb, const float *wp, const float *ap, bool first, float *out, size_t out_stride, \
                            __mmask16 rows) {                                                           \
        fl_tile(T, kb, wp, ap, first, out, out_stride, rows);                                           \
    }
FL_TILE(1) FL_TILE(2) FL_TILE(3) FL_TILE(4) FL_TILE(5) FL_TILE(6) FL_TILE(7) FL_TILE(8)
FL_TILE(9) FL_TILE(10) FL_TILE(11) FL_TILE(12)
static const fl_tile_fn fl_tiles[FT + 1] = {NULL,       fl_tile_1, fl_tile_2, fl_tile_3,  fl_tile_4,  fl_tile_5, fl_tile_6,
                                            fl_tile_7,  fl_tile_8, fl_tile_9, fl_tile_10, fl_tile_11, fl_tile_12};

/* Loop order: chunks of FNC activation rows, k-blocks, 16-row panels, groups of FT activation rows.
 * A chunk's block is widened once for all panels and each panel block packed once per chunk: at
 * 16 rows x 64 activation rows the two cost about a quarter of the time, so a caller passing more
 * rows per call spends less of it on the widening (64 rows: ~20% faster). The panel's weights,
 * read in short runs from 16 rows (from memory on a panel's first call), are prefetched a block
 * ahead; the same for the activations measured slower (they are mostly in cache already). */
static void fl_gemm(int kind, int64_t n, int nr, int nc, const char *w, size_t w_stride, const char *a,
                    size_t a_stride, float *out, size_t out_stride) {
    _Alignas(64) float wp[FKB * 16], ap[FNC * FKB];
    for (int cc = 0; cc < nc; cc += FNC) {
        const int cn = MF_MIN(FNC, nc - cc);
        const char *ac = a + (size_t)cc * a_stride;
        float *oc = out + (size_t)cc * out_stride;
        for (int64_t k0 = 0; k0 < n; k0 += FKB) {
            const int kb = (int)MF_MIN(FKB, n - k0);
            pack_a(kind, ac, a_stride, cn, k0, kb, ap);
            for (int r0 = 0; r0 < nr; r0 += 16) {
                const int pr = MF_MIN(16, nr - r0);
                const char *wr = w + (size_t)r0 * w_stride;
                pack_w(kind, wr, w_stride, pr, k0, kb, wp);
                if (k0 + FKB < n) fl_prefetch(kind, wr, w_stride, pr, k0 + FKB, (int)MF_MIN(FKB, n - k0 - FKB));
                for (int c0 = 0; c0 < cn; c0 += FT)
                    fl_tiles[MF_MIN(FT, cn - c0)](kb, wp, ap + (size_t)c0 * FKB, k0 == 0,
                                                  oc + (size_t)c0 * out_stride + (size_t)r0, out_stride, mask16(pr));
            }
        }
    }
}

/* ---- BF16 with AVX512_BF16: vdpbf16ps adds two bf16 products to each f32 lane -----------------
 * The products are exact in f32 and are added one at a time (denormal inputs and results flushed
 * to zero, far below any weight or activation), so the sums are those of the fma path in a
 * different order. The same tiles on bf16 pairs as 32-bit units, without widening:
 *   ab[c][k]  (bf16, FKB values per activation row): up to FNC activation rows copied (16 KB);
 *   wb[p][r]  (u32, 64 bytes per pair p of k values): the bf16 pair (k = 2p, 2p+1) of weight row r,
 *             transposed 16 x 16 pairs at a time; rows >= nr and k past the end zero (4 KB);
 * then per pair one weight-register load and BT vdpbf16ps with the activation pair broadcast from
 * memory. */
#define BF_TARGET __attribute__((target("avx512bf16")))
enum { BT = 16 };

/* r[i][j] -> r[j][i]. Pairs of rows interleave (ps, then pd unpacks: register 4i+m then holds
 * column 4l+m of rows 4i..4i+3 in 128-bit lane l), then 128-bit lanes gather column c = 4l+m from
 * registers m, 4+m, 8+m, 12+m. */
static inline void transpose16(__m512 r[16]) {
    __m512 a[16], b[16];
    for (int i = 0; i < 8; i++) {
        a[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        a[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        const __m512d x0 = _mm512_castps_pd(a[4 * i]), x1 = _mm512_castps_pd(a[4 * i + 1]);
        const __m512d x2 = _mm512_castps_pd(a[4 * i + 2]), x3 = _mm512_castps_pd(a[4 * i + 3]);
        b[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(x0, x2));
        b[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(x0, x2));
        b[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(x1, x3));
        b[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(x1, x3));
    }
    for (int m = 0; m < 4; m++) {
        const __m512 c1 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0x44), c2 = _mm512_shuffle_f32x4(b[m], b[4 + m], 0xEE);
        const __m512 d1 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0x44);
        const __m512 d2 = _mm512_shuffle_f32x4(b[8 + m], b[12 + m], 0xEE);
        r[m] = _mm512_shuffle_f32x4(c1, d1, 0x88);
        r[4 + m] = _mm512_shuffle_f32x4(c1, d1, 0xDD);
        r[8 + m] = _mm512_shuffle_f32x4(c2, d2, 0x88);
        r[12 + m] = _mm512_shuffle_f32x4(c2, d2, 0xDD);
    }
}

static inline __mmask32 mask32(int64_t left) { return left >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << left) - 1); }

static inline void bf_pack_w(const char *w, size_t w_stride, int nr, int64_t k0, int kb, uint32_t *wb) {
    for (int kk = 0; kk < kb; kk += 32) {
        const __mmask32 m = mask32(kb - kk);
        __m512 r[16];
        for (int i = 0; i < 16; i++)
            r[i] = i < nr ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(m, (const uint16_t *)(w + (size_t)i * w_stride) + k0 + kk))
                          : _mm512_setzero_ps();
        transpose16(r);
        for (int p = 0; p < 16; p++) _mm512_store_ps(wb + (size_t)(kk / 2 + p) * 16, r[p]);
    }
}

static inline void bf_pack_a(const char *a, size_t a_stride, int nc, int64_t k0, int kb, uint16_t *ab) {
    for (int c = 0; c < nc; c++)
        for (int kk = 0; kk < kb; kk += 32)
            _mm512_store_si512(ab + (size_t)c * FKB + kk,
                               _mm512_maskz_loadu_epi16(mask32(kb - kk), (const uint16_t *)(a + (size_t)c * a_stride) + k0 + kk));
}

static inline __attribute__((always_inline)) BF_TARGET void bf_tile(int T, int kb, const uint32_t *wb, const uint16_t *ab,
                                                                    bool first, float *out, size_t out_stride, __mmask16 rows) {
    __m512 acc[BT];
#pragma GCC unroll 16
    for (int c = 0; c < T; c++) acc[c] = _mm512_setzero_ps();
    for (int p = 0; p < (kb + 1) / 2; p++) {
        const __m512bh w = (__m512bh)_mm512_load_si512(wb + (size_t)p * 16);
#pragma GCC unroll 16
        for (int c = 0; c < T; c++) {
            uint32_t x;
            memcpy(&x, ab + c * FKB + 2 * p, sizeof x);
            acc[c] = _mm512_dpbf16_ps(acc[c], w, (__m512bh)_mm512_set1_epi32((int)x));
        }
    }
#pragma GCC unroll 16
    for (int c = 0; c < T; c++) {
        float *o = out + (size_t)c * out_stride;
        if (!first) acc[c] = _mm512_add_ps(acc[c], _mm512_maskz_loadu_ps(rows, o));
        _mm512_mask_storeu_ps(o, rows, acc[c]);
    }
}

typedef void (*bf_tile_fn)(int kb, const uint32_t *wb, const uint16_t *ab, bool first, float *out, size_t out_stride,
                           __mmask16 rows);
#define BF_TILE(T)                                                                                      \
    static BF_TARGET void bf_tile_##T(int kb, const uint32_t *wb, const uint16_t *ab, bool first, float *out, \
                                      size_t out_stride, __mmask16 rows) {                              \
        bf_tile(T, kb, wb, ab, first, out, out_stride, rows);                                           \
    }
BF_TILE(1) BF_TILE(2) BF_TILE(3) BF_TILE(4) BF_TILE(5) BF_TILE(6) BF_TILE(7) BF_TILE(8)
BF_TILE(9) BF_TILE(10) BF_TILE(11) BF_TILE(12) BF_TILE(13) BF_TILE(14) BF_TILE(15) BF_TILE(16)
static const bf_tile_fn bf_tiles[BT + 1] = {NULL,       bf_tile_1,  bf_tile_2,  bf_tile_3,  bf_tile_4,  bf_tile_5,
                                            bf_tile_6,  bf_tile_7,  bf_tile_8,  bf_tile_9,  bf_tile_10, bf_tile_11,
                                            bf_tile_12, bf_tile_13, bf_tile_14, bf_tile_15, bf_tile_16};

/* the loop order of fl_gemm */
static void bf_gemm(int64_t n, int nr, int nc, const char *w, size_t w_stride, const char *a, size_t a_stride,
                    float *out, size_t out_stride) {
    _Alignas(64) uint32_t wb[FKB / 2 * 16];
    _Alignas(64) uint16_t ab[FNC * FKB];
    for (int cc = 0; cc < nc; cc += FNC) {
        const int cn = MF_MIN(FNC, nc - cc);
        const char *ac = a + (size_t)cc * a_stride;
        float *oc = out + (size_t)cc * out_stride;
        for (int64_t k0 = 0; k0 < n; k0 += FKB) {
            const int kb = (int)MF_MIN(FKB, n - k0);
            bf_pack_a(ac, a_stride, cn, k0, kb, ab);
            for (int r0 = 0; r0 < nr; r0 += 16) {
                const int pr = MF_MIN(16, nr - r0);
                const char *wr = w + (size_t)r0 * w_stride;
                bf_pack_w(wr, w_stride, pr, k0, kb, wb);
                if (k0 + FKB < n) fl_prefetch(FL_BF16, wr, w_stride, pr, k0 + FKB, (int)MF_MIN(FKB, n - k0 - FKB));
                for (int c0 = 0; c0 < cn; c0 += BT)
                    bf_tiles[MF_MIN(BT, cn - c0)](kb, wb, ab + (size_t)c0 * FKB, k0 == 0,
                                                  oc + (size_t)c0 * out_stride + (size_t)r0, out_stride, mask16(pr));
            }
        }
    }
}

/* Under FL_MIN_NC activation rows the row tiles (widening each weight once per group of NC
 * activation rows costs less than packing the panel; measured crossover at 16 x 896: 5); else the
 * packed GEMM. */
#define FLOAT_GEMM(name, tile, T, kind)                                                               \
    static void name(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,        \
                     size_t a_stride, float *out, size_t out_stride) {                                \
        if (nc >= FL_MIN_NC) {                                                                        \
            fl_gemm(kind, n, nr, nc, w, w_stride, a, a_stride, out, out_stride);                      \
            return;                                                                                   \
        }                                                                                             \
        for (int r = 0; r < nr; r++)                                                                  \
            for (int c0 = 0; c0 < nc; c0 += NC)                                                       \
                tile(n, (const T *)((const char *)w + (size_t)r * w_stride), (const char *)a + (size_t)c0 * a_stride, \
                     a_stride, MF_MIN(NC, nc - c0), out + (size_t)c0 * out_stride + (size_t)r, out_stride); \
    }
enum { FL_MIN_NC = 5 };
FLOAT_GEMM(gemm_f32, tile_f32, float, FL_F32)
FLOAT_GEMM(gemm_f16, tile_f16, uint16_t, FL_F16)
FLOAT_GEMM(gemm_bf16, tile_bf16, uint16_t, FL_BF16)

/* BF16 where the CPU has AVX512_BF16 (checked once, at registration) */
static void gemm_bf16_dp(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a, size_t a_stride,
                         float *out, size_t out_stride) {
    if (nc < FL_MIN_NC) gemm_bf16(n, nr, nc, w, w_stride, a, a_stride, out, out_stride);
    else bf_gemm(n, nr, nc, w, w_stride, a, a_stride, out, out_stride);
}

void mf_simd_register_avx512(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_0, Q8_0, dot_q4_0_q8_0, gemm_q4_0);
    MF_SIMD_SET_DOT(t, Q4_1, Q8_1, dot_q4_1_q8_1, gemm_q4_1);
    MF_SIMD_SET_DOT(t, Q5_0, Q8_0, dot_q5_0_q8_0, gemm_q5_0);
    MF_SIMD_SET_DOT(t, Q5_1, Q8_1, dot_q5_1_q8_1, gemm_q5_1);
    MF_SIMD_SET_DOT(t, Q8_0, Q8_0, dot_q8_0_q8_0, gemm_q8_0);
    MF_SIMD_SET_DOT(t, F32, F32, dot_f32_f32, gemm_f32);
    MF_SIMD_SET_DOT(t, F16, F16, dot_f16_f16, gemm_f16);
    /* AVX512_BF16 (Zen 4 on, Cooper Lake, Sapphire Rapids on): twice the products per instruction */
    MF_SIMD_SET_DOT(t, BF16, BF16, dot_bf16_bf16, mf_simd_detected_features()->avx512bf16 ? gemm_bf16_dp : gemm_bf16);
}
