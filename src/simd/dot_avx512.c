/* dot_avx512.c: AVX-512 (F/BW/DQ/VL + VNNI) dot products of the 32-value block formats and the
 * float formats. Two blocks share one 512-bit register: values of block i in bytes 0..31, block
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

/* x_k * y_k for the fp16 fields x of four weight blocks (stride sx words) and y of four activation
 * blocks (stride sy words), as floats. */
static inline __m128 mul4_h(const void *x, int sx, const void *y, int sy) {
    const __m256 v = _mm256_cvtph_ps(_mm_unpacklo_epi64(words4(x, sx), words4(y, sy)));
    return _mm_mul_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
}

/* d_w * d_a of four blocks (from mul4_h), block k broadcast over i32 lanes 8k' .. 8k'+7 of the
 * register for blocks (0,1) or (2,3). */
static inline void spread4(__m128 d, __m512 *s01, __m512 *s23) {
    const __m512 z = _mm512_castps128_ps512(d);
    *s01 = _mm512_permutexvar_ps(_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0), z);
    *s23 = _mm512_permutexvar_ps(_mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2), z);
}
/* fields f of w[i..i+3] and g of a[i..i+3] */
#define D4(x, y, f, g) mul4_h(&x[i].f, (int)(sizeof *x / 2), &y[i].g, (int)(sizeof *y / 2))

static inline float hsum16(__m512 x) { return _mm512_reduce_add_ps(x); }

/* sum (q - off) * a per i32 lane, q unsigned, off * a summed by a second vpdpbusd */
static inline __m512i dot_offset(__m512i q, __m512i a, __m512i off) {
    const __m512i z = _mm512_setzero_si512();
    return _mm512_sub_epi32(_mm512_dpbusd_epi32(z, q, a), _mm512_dpbusd_epi32(z, off, a));
}

static float dot_q4_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const int64_t nb = n / MF_QK4_0;
    const __m512i off = _mm512_set1_epi8(8);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        __m512i s0 = dot_offset(nibbles2(w[i].qs, w[i + 1].qs), load2x32(a[i].qs, a[i + 1].qs), off);
        __m512i s1 = dot_offset(nibbles2(w[i + 2].qs, w[i + 3].qs), load2x32(a[i + 2].qs, a[i + 3].qs), off);
        __m512 d01, d23;
        spread4(D4(w, a, d, d), &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(s0), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(s1), acc1);
    }
    float sum = hsum16(_mm512_add_ps(acc0, acc1));
    /* the last 0..3 blocks: integer sums exactly as above, one block at a time */
    for (; i < nb; i++) {
        const __m256i q = mf_x86_nibbles32(w[i].qs), y = mf_x86_load(a[i].qs), z = _mm256_setzero_si256();
        const __m256i s = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, q, y), _mm256_dpbusd_epi32(z, _mm256_set1_epi8(8), y));
        sum += mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d) * (float)mf_x86_hsum8_i32(s);
    }
    return sum;
}

static float dot_q5_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const int64_t nb = n / MF_QK5_0;
    const __m512i off = _mm512_set1_epi8(16);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        __m512i q0 = add_high_bit(nibbles2(w[i].qs, w[i + 1].qs), w[i].qh, w[i + 1].qh);
        __m512i q1 = add_high_bit(nibbles2(w[i + 2].qs, w[i + 3].qs), w[i + 2].qh, w[i + 3].qh);
        __m512i s0 = dot_offset(q0, load2x32(a[i].qs, a[i + 1].qs), off);
        __m512i s1 = dot_offset(q1, load2x32(a[i + 2].qs, a[i + 3].qs), off);
        __m512 d01, d23;
        spread4(D4(w, a, d, d), &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(s0), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(s1), acc1);
    }
    float sum = hsum16(_mm512_add_ps(acc0, acc1));
    for (; i < nb; i++) {
        uint32_t h;
        memcpy(&h, w[i].qh, 4);
        const __m256i q = _mm256_mask_add_epi8(mf_x86_nibbles32(w[i].qs), h, mf_x86_nibbles32(w[i].qs), _mm256_set1_epi8(16));
        const __m256i y = mf_x86_load(a[i].qs), z = _mm256_setzero_si256();
        const __m256i s = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, q, y), _mm256_dpbusd_epi32(z, _mm256_set1_epi8(16), y));
        sum += mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d) * (float)mf_x86_hsum8_i32(s);
    }
    return sum;
}

/* Q4_1 / Q5_1 against Q8_1: d_w d_a sum(q a) + m_w s_a per block (s_a = d_a sum(a)). */
static float dot_q4_1_q8_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_1 *w = vw;
    const mf_block_q8_1 *a = va;
    const int64_t nb = n / MF_QK4_1;
    const __m512i z = _mm512_setzero_si512();
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps(); /* m_w * s_a of four blocks at a time */
    float mins = 0.0f;
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        __m512i s0 = _mm512_dpbusd_epi32(z, nibbles2(w[i].qs, w[i + 1].qs), load2x32(a[i].qs, a[i + 1].qs));
        __m512i s1 = _mm512_dpbusd_epi32(z, nibbles2(w[i + 2].qs, w[i + 3].qs), load2x32(a[i + 2].qs, a[i + 3].qs));
        __m512 d01, d23;
        spread4(D4(w, a, d, d), &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(s0), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(s1), acc1);
        accm = _mm_add_ps(accm, D4(w, a, m, s));
    }
    float sum = hsum16(_mm512_add_ps(acc0, acc1));
    mins = mf_x86_hsum4(accm);
    for (; i < nb; i++) {
        const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), mf_x86_nibbles32(w[i].qs), mf_x86_load(a[i].qs));
        sum += mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d) * (float)mf_x86_hsum8_i32(s);
        mins += mf_x86_h2f(w[i].m) * mf_x86_h2f(a[i].s);
    }
    return sum + mins;
}

static float dot_q5_1_q8_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_1 *w = vw;
    const mf_block_q8_1 *a = va;
    const int64_t nb = n / MF_QK5_1;
    const __m512i z = _mm512_setzero_si512();
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps(); /* m_w * s_a of four blocks at a time */
    float mins = 0.0f;
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        __m512i q0 = add_high_bit(nibbles2(w[i].qs, w[i + 1].qs), w[i].qh, w[i + 1].qh);
        __m512i q1 = add_high_bit(nibbles2(w[i + 2].qs, w[i + 3].qs), w[i + 2].qh, w[i + 3].qh);
        __m512i s0 = _mm512_dpbusd_epi32(z, q0, load2x32(a[i].qs, a[i + 1].qs));
        __m512i s1 = _mm512_dpbusd_epi32(z, q1, load2x32(a[i + 2].qs, a[i + 3].qs));
        __m512 d01, d23;
        spread4(D4(w, a, d, d), &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(s0), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(s1), acc1);
        accm = _mm_add_ps(accm, D4(w, a, m, s));
    }
    float sum = hsum16(_mm512_add_ps(acc0, acc1));
    mins = mf_x86_hsum4(accm);
    for (; i < nb; i++) {
        uint32_t h;
        memcpy(&h, w[i].qh, 4);
        const __m256i q = _mm256_mask_add_epi8(mf_x86_nibbles32(w[i].qs), h, mf_x86_nibbles32(w[i].qs), _mm256_set1_epi8(16));
        const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, mf_x86_load(a[i].qs));
        sum += mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d) * (float)mf_x86_hsum8_i32(s);
        mins += mf_x86_h2f(w[i].m) * mf_x86_h2f(a[i].s);
    }
    return sum + mins;
}

/* Signed x signed: vpdpbusd wants an unsigned operand, so use |w| and a with w's sign. |w| <= 128
 * and |a| <= 127 keep every product exact. */
static inline __m512i dot_i8(__m512i x, __m512i y) {
    const __mmask64 neg = _mm512_movepi8_mask(x);
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(x),
                               _mm512_mask_sub_epi8(y, neg, _mm512_setzero_si512(), y));
}

static float dot_q8_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q8_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const int64_t nb = n / MF_QK8_0;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) {
        __m512i s0 = dot_i8(load2x32(w[i].qs, w[i + 1].qs), load2x32(a[i].qs, a[i + 1].qs));
        __m512i s1 = dot_i8(load2x32(w[i + 2].qs, w[i + 3].qs), load2x32(a[i + 2].qs, a[i + 3].qs));
        __m512 d01, d23;
        spread4(D4(w, a, d, d), &d01, &d23);
        acc0 = _mm512_fmadd_ps(d01, _mm512_cvtepi32_ps(s0), acc0);
        acc1 = _mm512_fmadd_ps(d23, _mm512_cvtepi32_ps(s1), acc1);
    }
    float sum = hsum16(_mm512_add_ps(acc0, acc1));
    for (; i < nb; i++) {
        const __m256i x = mf_x86_load(w[i].qs), y = mf_x86_load(a[i].qs);
        const __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(x), _mm256_sign_epi8(y, x));
        sum += mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d) * (float)mf_x86_hsum8_i32(s);
    }
    return sum;
}

/* ---- multi-row tiles: one weight row, up to MF_SIMD_GEMM_NC activation rows ---------------- */
#define NC MF_SIMD_GEMM_NC

/* Q4_0 one block at a time, 256-bit: the unpacked weights are shared by the nc activation rows. */
static void tile_q4_0(int64_t n, const mf_block_q4_0 *w, const char *a, size_t a_stride, int nc, float *out,
                      size_t out_stride) {
    const int64_t nb = n / MF_QK4_0;
    const __m256i off = _mm256_set1_epi8(8), z = _mm256_setzero_si256();
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = mf_x86_nibbles32(w[i].qs);
        const float dw = mf_x86_h2f(w[i].d);
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)(a + (size_t)c * a_stride) + i;
            const __m256i y = mf_x86_load(ab->qs);
            const __m256i s = _mm256_sub_epi32(_mm256_dpbusd_epi32(z, q, y), _mm256_dpbusd_epi32(z, off, y));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * mf_x86_h2f(ab->d)), _mm256_cvtepi32_ps(s), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

static void tile_q8_0(int64_t n, const mf_block_q8_0 *w, const char *a, size_t a_stride, int nc, float *out,
                      size_t out_stride) {
    const int64_t nb = n / MF_QK8_0;
    const __m256i z = _mm256_setzero_si256();
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i x = mf_x86_load(w[i].qs), ax = _mm256_abs_epi8(x);
        const float dw = mf_x86_h2f(w[i].d);
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)(a + (size_t)c * a_stride) + i;
            const __m256i s = _mm256_dpbusd_epi32(z, ax, _mm256_sign_epi8(mf_x86_load(ab->qs), x));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * mf_x86_h2f(ab->d)), _mm256_cvtepi32_ps(s), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

#define TILE_GEMM(name, tile, wtype)                                                                  \
    static void name(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,        \
                     size_t a_stride, float *out, size_t out_stride) {                                \
        for (int r = 0; r < nr; r++)                                                                  \
            for (int c0 = 0; c0 < nc; c0 += NC)                                                       \
                tile(n, (const wtype *)((const char *)w + (size_t)r * w_stride),                      \
                     (const char *)a + (size_t)c0 * a_stride, a_stride, MF_MIN(NC, nc - c0),          \
                     out + (size_t)c0 * out_stride + (size_t)r, out_stride);                          \
    }
TILE_GEMM(gemm_q4_0, tile_q4_0, mf_block_q4_0)
TILE_GEMM(gemm_q8_0, tile_q8_0, mf_block_q8_0)

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

MF_SIMD_GEMM_FROM_DOT(gemm_q4_1, dot_q4_1_q8_1)
MF_SIMD_GEMM_FROM_DOT(gemm_q5_0, dot_q5_0_q8_0)
MF_SIMD_GEMM_FROM_DOT(gemm_q5_1, dot_q5_1_q8_1)
MF_SIMD_GEMM_FROM_DOT(gemm_f32, dot_f32_f32)
MF_SIMD_GEMM_FROM_DOT(gemm_f16, dot_f16_f16)
MF_SIMD_GEMM_FROM_DOT(gemm_bf16, dot_bf16_bf16)

void mf_simd_register_avx512(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_0, Q8_0, dot_q4_0_q8_0, gemm_q4_0);
    MF_SIMD_SET_DOT(t, Q4_1, Q8_1, dot_q4_1_q8_1, gemm_q4_1);
    MF_SIMD_SET_DOT(t, Q5_0, Q8_0, dot_q5_0_q8_0, gemm_q5_0);
    MF_SIMD_SET_DOT(t, Q5_1, Q8_1, dot_q5_1_q8_1, gemm_q5_1);
    MF_SIMD_SET_DOT(t, Q8_0, Q8_0, dot_q8_0_q8_0, gemm_q8_0);
    MF_SIMD_SET_DOT(t, F32, F32, dot_f32_f32, gemm_f32);
    MF_SIMD_SET_DOT(t, F16, F16, dot_f16_f16, gemm_f16);
    MF_SIMD_SET_DOT(t, BF16, BF16, dot_bf16_bf16, gemm_bf16);
}
