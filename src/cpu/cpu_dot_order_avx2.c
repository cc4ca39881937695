/* cpu_dot_order_avx2.c: quantized dot products whose float operations run in the same order as
 * llama.cpp's x86 CPU kernels, so that minfer's matmul outputs equal llama.cpp's bit for bit.
 * Agreement needs it: a last-bit difference in one matmul output can move a later activation
 * across a Q8 rounding boundary, which changes it by a whole quantization step.
 *
 * The shared shape (32-value blocks and K-quants alike): eight float lanes; lane p holds the
 * integer sum of the products whose position inside each 32-byte group is 4p..4p+3 (what
 * maddubs + madd, or vpdpbusd, leave in i32 lane p); per block (or super-block) the lanes get
 * acc[p] = fma(d, (float)isum[p], acc[p]); the result is ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
 * plus, for formats with minimums, a scalar sum of m * s accumulated with fma. The integer lane
 * sums are exact, so only the lane partition and the float steps have to match. */
#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

static inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

/* ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) */
static inline float hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* i32 lane p = sum of u[i] * s[i] over bytes i = 4p..4p+3 (u unsigned <= 255, s signed; the
 * callers keep every pair sum within int16). */
static inline __m256i lanes_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Signed x signed: |x| against y carrying x's sign (x, y in [-128, 127], y never -128). */
static inline __m256i lanes_ss(__m256i x, __m256i y) { return lanes_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)); }

/* 16 bytes of nibbles -> 32 bytes: low nibbles are values 0..15, high nibbles 16..31. */
static inline __m256i nib32(const uint8_t *qs) {
    const __m128i t = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(0x0F));
}

/* Bit j of the little-endian u32 at qh -> 0x10 in byte j. */
static inline __m256i bit5_32(const uint8_t *qh) {
    uint32_t x;
    memcpy(&x, qh, 4);
    const __m256i pick = _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    const __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), pick);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit), _mm256_set1_epi8(0x10));
}

static inline __m256i load32(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* ---- 32-value blocks ---- */

static float dot_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q8_0 *w = vw, *a = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256 d = _mm256_set1_ps(h2f(w[i].d) * h2f(a[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_ss(load32(w[i].qs), load32(a[i].qs))), acc);
    }
    return hsum8(acc);
}

static float dot_q4_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_0 *w = vw;
    const mf_block_q8_0 *a = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256 d = _mm256_set1_ps(h2f(w[i].d) * h2f(a[i].d));
        const __m256i q = _mm256_sub_epi8(nib32(w[i].qs), _mm256_set1_epi8(8));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_ss(q, load32(a[i].qs))), acc);
    }
    return hsum8(acc);
}

static float dot_q5_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_0 *w = vw;
    const mf_block_q8_0 *a = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256 d = _mm256_set1_ps(h2f(w[i].d) * h2f(a[i].d));
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(nib32(w[i].qs), bit5_32(w[i].qh)), _mm256_set1_epi8(16));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_ss(q, load32(a[i].qs))), acc);
    }
    return hsum8(acc);
}

/* Q4_1: acc = fma(d_w * d_a, lanes, acc); mins summed as fma(m_w, s_a, summs). */
static float dot_q4_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_1 *w = vw;
    const mf_block_q8_1 *a = va;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        summs = fmaf(h2f(w[i].m), h2f(a[i].s), summs);
        const __m256 d = _mm256_set1_ps(h2f(w[i].d) * h2f(a[i].d));
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_us(nib32(w[i].qs), load32(a[i].qs))), acc);
    }
    return hsum8(acc) + summs;
}

/* Q5_1: the same, with the lanes as the first factor of the fma (the product is the same). */
static float dot_q5_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_1 *w = vw;
    const mf_block_q8_1 *a = va;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        summs = fmaf(h2f(w[i].m), h2f(a[i].s), summs);
        const __m256i q = _mm256_or_si256(nib32(w[i].qs), bit5_32(w[i].qh));
        const __m256 d = _mm256_set1_ps(h2f(w[i].d) * h2f(a[i].d));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes_us(q, load32(a[i].qs))), d, acc);
    }
    return hsum8(acc) + summs;
}

/* ---- K-quants (256-value super-blocks, Q8_K activations) ---- */

/* The 6-bit scales and mins of Q4_K/Q5_K's eight sub-blocks. */
static inline void k4_scales(const uint8_t *packed, uint8_t sc[8], uint8_t mn[8]) {
    for (int j = 0; j < 8; j++) mf_get_scale_min_k4(j, packed, &sc[j], &mn[j]);
}

/* Sum over the sub-blocks of mins[j] * (sum of that sub-block's 32 activations), an exact integer. */
static inline int32_t k4_min_sum(const uint8_t mn[8], const int16_t *bsums) {
    int32_t s = 0;
    for (int j = 0; j < 8; j++) s += (int32_t)mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return s;
}

/* Lanes of 32 unsigned weight bytes q (<= 63) times 32 activations, scaled by one int16 scale. */
static inline __m256i k_lanes(__m256i q, const int8_t *a, int16_t scale) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, load32(a)), _mm256_set1_epi16(scale));
}

/* Lanes of 32 unsigned weight bytes times activations with two scales: bytes 0..15 and 16..31. */
static inline __m256i k_lanes2(__m256i q, const int8_t *a, int16_t s0, int16_t s1) {
    const __m256i sc = _mm256_setr_m128i(_mm_set1_epi16(s0), _mm_set1_epi16(s1));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, load32(a)), sc);
}

/* Q4_K keeps its minimums in four float lanes: lane m gets fma(dmin, mins[2m] * S[2m] +
 * mins[2m+1] * S[2m+1]) with S[j] the activation sum of sub-block j; (m0+m2) + (m1+m3) at the end. */
static float dot_q4_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_K *w = vw;
    const mf_block_q8_K *a = va;
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = a[i].d * h2f(w[i].d), dmin = -a[i].d * h2f(w[i].dmin);
        uint8_t sc[8], mn[8];
        k4_scales(w[i].scales, sc, mn);
        const int16_t *bs = a[i].bsums;
        int32_t m4[4];
        for (int m = 0; m < 4; m++)
            m4[m] = (int32_t)mn[2 * m] * (bs[4 * m] + bs[4 * m + 1]) + (int32_t)mn[2 * m + 1] * (bs[4 * m + 2] + bs[4 * m + 3]);
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)m4)), accm);
        __m256i sum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i bits = load32(w[i].qs + 32 * c);
            const __m256i lo = _mm256_and_si256(bits, _mm256_set1_epi8(0x0F));
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0F));
            sum = _mm256_add_epi32(sum, _mm256_add_epi32(k_lanes(lo, a[i].qs + 64 * c, sc[2 * c]),
                                                         k_lanes(hi, a[i].qs + 64 * c + 32, sc[2 * c + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return hsum8(acc) + _mm_cvtss_f32(accm);
}

static float dot_q5_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_K *w = vw;
    const mf_block_q8_K *a = va;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = a[i].d * h2f(w[i].d), dmin = -a[i].d * h2f(w[i].dmin);
        uint8_t sc[8], mn[8];
        k4_scales(w[i].scales, sc, mn);
        summs = fmaf(dmin, (float)k4_min_sum(mn, a[i].bsums), summs);
        const __m256i hbits = load32(w[i].qh);
        __m256i sum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i bits = load32(w[i].qs + 32 * c);
            /* bit 2c of qh[k] is the fifth bit of value k of sub-block 2c, bit 2c+1 of sub-block 2c+1 */
            const __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 2 * c), 4), _mm256_set1_epi8(0x10));
            const __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 2 * c + 1), 4), _mm256_set1_epi8(0x10));
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi8(0x0F)), h0);
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0F)), h1);
            sum = _mm256_add_epi32(sum, _mm256_add_epi32(k_lanes(lo, a[i].qs + 64 * c, sc[2 * c]),
                                                         k_lanes(hi, a[i].qs + 64 * c + 32, sc[2 * c + 1])));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum8(acc) + summs;
}

/* Q6_K: unsigned 6-bit q against the activations, minus 32 * sum(scale * activation) taken per
 * 32 consecutive values (lane p gets values 32p..32p+31 of the super-block, from bsums). */
static float dot_q6_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q6_K *w = vw;
    const mf_block_q8_K *a = va;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const float d = a[i].d * h2f(w[i].d);
        const int8_t *sc = w[i].scales;
        int32_t off[8];
        for (int p = 0; p < 8; p++)
            off[p] = 32 * ((int32_t)a[i].bsums[2 * p] * sc[2 * p] + (int32_t)a[i].bsums[2 * p + 1] * sc[2 * p + 1]);
        __m256i sum = _mm256_setzero_si256();
        for (int j = 0; j < 2; j++) {
            const __m256i l0 = load32(w[i].ql + 64 * j), l1 = load32(w[i].ql + 64 * j + 32);
            const __m256i h = load32(w[i].qh + 32 * j);
            const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
            const __m256i q[4] = {
                _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4)),
                _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4)),
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4)),
            };
            for (int v = 0; v < 4; v++) {
                const int s = 8 * j + 2 * v;
                sum = _mm256_add_epi32(sum, k_lanes2(q[v], a[i].qs + 128 * j + 32 * v, sc[s], sc[s + 1]));
            }
        }
        sum = _mm256_sub_epi32(sum, _mm256_loadu_si256((const __m256i *)off));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), acc);
    }
    return hsum8(acc);
}

/* ---- float kernels of attention and the FFN, in llama.cpp's AVX-512 order ----
 * exp: llama.cpp's vector exp (round x / ln2 to n with the 1.5 * 2^23 trick, reduce by ln2 split in
 * two, degree-5 polynomial, scale by 2^n), written per lane; |n| > 192 gives 0 or infinity. */
static inline float exp_ord(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return ldexpf(j, (int)n);
}

/* Sum of 16 floats as _mm512_reduce_add_ps adds them: halves, quarters, then pairs. */
static inline float reduce16(const float *a) {
    float t8[8], t4[4];
    for (int i = 0; i < 8; i++) t8[i] = a[i + 8] + a[i];
    for (int i = 0; i < 4; i++) t4[i] = t8[i + 4] + t8[i];
    return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

void mf_cpu_swiglu_ord_avx2(const float *a, const float *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + exp_ord(0.0f - a[i])) * b[i];
}

/* x . y: four 16-lane accumulators over steps of 64, combined (0+2, 1+3, then 0+1) and reduced;
 * a tail below 64 is added in order with fma. */
float mf_cpu_dot_f32_ord_avx2(const float *x, const float *y, int64_t n) {
    float acc[4][16] = {{0}};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++) acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
    for (int l = 0; l < 16; l++) {
        acc[0][l] += acc[2][l];
        acc[1][l] += acc[3][l];
        acc[0][l] += acc[1][l];
    }
    float s = reduce16(acc[0]);
    for (int64_t i = np; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

/* e[c] = exp(x[c] - mx) in place; returns the sum in double of each 16-entry chunk's float sum
 * (entries past n count as zeros). */
double mf_cpu_softmax_exp_ord_avx2(float *x, int64_t n, float mx) {
    double sum = 0.0;
    for (int64_t c0 = 0; c0 < n; c0 += 16) {
        float v[16];
        for (int l = 0; l < 16; l++) {
            int64_t c = c0 + l;
            v[l] = c < n ? (x[c] = exp_ord(x[c] - mx)) : 0.0f;
        }
        sum += (double)reduce16(v);
    }
    return sum;
}

/* out[d] = sum_c p[c] * v_c[d] as llama.cpp's F32 GEMM over V^T adds it: lane c % 16 accumulates
 * its cells in order with fma, the 16 lanes are reduced at the end. acc: 16 * hd floats. */
void mf_cpu_pv_ord_avx2(const float *p, int64_t nc, const float *v, size_t v_stride, int64_t hd, float *acc,
                        float *out) {
    memset(acc, 0, (size_t)(16 * hd) * sizeof(float));
    for (int64_t c = 0; c < nc; c++) {
        if (p[c] == 0.0f) continue;
        const float *vr = v + (size_t)c * v_stride;
        float *a = acc + (c & 15) * hd;
        for (int64_t d = 0; d < hd; d++) a[d] = fmaf(vr[d], p[c], a[d]);
    }
    for (int64_t d = 0; d < hd; d++) {
        float l[16];
        for (int k = 0; k < 16; k++) l[k] = acc[k * hd + d];
        out[d] = reduce16(l);
    }
}

mf_vec_dot_fn mf_cpu_ordered_dot_avx2(mf_type t) {
    switch (t) {
    case MF_TYPE_Q4_0: return dot_q4_0;
    case MF_TYPE_Q4_1: return dot_q4_1;
    case MF_TYPE_Q5_0: return dot_q5_0;
    case MF_TYPE_Q5_1: return dot_q5_1;
    case MF_TYPE_Q8_0: return dot_q8_0;
    case MF_TYPE_Q4_K: return dot_q4_K;
    case MF_TYPE_Q5_K: return dot_q5_K;
    case MF_TYPE_Q6_K: return dot_q6_K;
    default: return NULL;
    }
}

/* ---- llama.cpp's repacked Q4_0 / Q4_K (8 weight rows interleaved) ----
 * Each output is one float lane: per block, fma(exact integer block sum, d_w * d_a, acc); Q4_K
 * keeps its minimums in a second chain, fma(exact sum of mins * activation sums, dmin_w * d_a),
 * and returns acc - acc_min. */
static inline int32_t hsum_i32(__m256i v) {
    __m128i r = _mm_add_epi32(_mm256_extracti128_si256(v, 1), _mm256_castsi256_si128(v));
    r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 1));
    return _mm_cvtsi128_si32(r);
}

static float dot_q4_0_rp(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_0 *w = vw;
    const mf_block_q8_0 *a = va;
    float acc = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        const __m256i q = _mm256_sub_epi8(nib32(w[i].qs), _mm256_set1_epi8(8));
        acc = fmaf((float)hsum_i32(lanes_ss(q, load32(a[i].qs))), h2f(w[i].d) * h2f(a[i].d), acc);
    }
    return acc;
}

static float dot_q4_K_rp(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_K *w = vw;
    const mf_block_q8_K *a = va;
    float acc = 0.0f, accm = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        uint8_t sc[8], mn[8];
        k4_scales(w[i].scales, sc, mn);
        __m256i sum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            const __m256i bits = load32(w[i].qs + 32 * c);
            const __m256i lo = _mm256_and_si256(bits, _mm256_set1_epi8(0x0F));
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0F));
            sum = _mm256_add_epi32(sum, _mm256_add_epi32(k_lanes(lo, a[i].qs + 64 * c, sc[2 * c]),
                                                         k_lanes(hi, a[i].qs + 64 * c + 32, sc[2 * c + 1])));
        }
        acc = fmaf((float)hsum_i32(sum), h2f(w[i].d) * a[i].d, acc);
        accm = fmaf((float)k4_min_sum(mn, a[i].bsums), h2f(w[i].dmin) * a[i].d, accm);
    }
    return acc - accm;
}

/* Q4_K in llama.cpp's repacked GEMM (tokens in groups of four): the same two chains, but one fma
 * per 64 values (a pair of sub-blocks) instead of one per super-block. */
static float dot_q4_K_rp4(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_K *w = vw;
    const mf_block_q8_K *a = va;
    float acc = 0.0f, accm = 0.0f;
    for (int64_t i = 0; i < n / 256; i++) {
        uint8_t sc[8], mn[8];
        k4_scales(w[i].scales, sc, mn);
        const float d = h2f(w[i].d) * a[i].d, dm = h2f(w[i].dmin) * a[i].d;
        const int16_t *bs = a[i].bsums;
        for (int c = 0; c < 4; c++) {
            const __m256i bits = load32(w[i].qs + 32 * c);
            const __m256i lo = _mm256_and_si256(bits, _mm256_set1_epi8(0x0F));
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0F));
            const __m256i s = _mm256_add_epi32(k_lanes(lo, a[i].qs + 64 * c, sc[2 * c]),
                                               k_lanes(hi, a[i].qs + 64 * c + 32, sc[2 * c + 1]));
            const int32_t m = (int32_t)mn[2 * c] * (bs[4 * c] + bs[4 * c + 1]) +
                              (int32_t)mn[2 * c + 1] * (bs[4 * c + 2] + bs[4 * c + 3]);
            acc = fmaf((float)hsum_i32(s), d, acc);
            accm = fmaf((float)m, dm, accm);
        }
    }
    return acc - accm;
}

mf_vec_dot_fn mf_cpu_repacked_dot_avx2(mf_type t, bool grouped) {
    switch (t) {
    case MF_TYPE_Q4_0: return dot_q4_0_rp;
    case MF_TYPE_Q4_K: return grouped ? dot_q4_K_rp4 : dot_q4_K_rp;
    default: return NULL;
    }
}
