/* dot_neon.c: arm64 NEON kernels with the dot-product extension (sdot: four s8 x s8 products summed
 * into each s32 lane): the dots of every weight type (Q2_K, Q3_K, IQ4_NL and IQ4_XS included) and
 * the activation quantizers. Compiled with
 * -march=armv8.2-a+dotprod+fp16; the dispatcher calls them only when the CPU reports asimddp and
 * asimdhp. As on x86, integer sums inside a block are exact and blocks combine in float; the
 * quantizers are bit-identical to the references (vcvtnq rounds to nearest even). */
#include "simd/simd_kernels.h"
#include "simd/kquant_common.h"
#include "core/core.h"

#include <arm_neon.h>
#include <math.h>

static inline float h2f(uint16_t h) {
    __fp16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}

static inline int32x4_t dot2(int8x16_t a0, int8x16_t b0, int8x16_t a1, int8x16_t b1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, b0), a1, b1);
}

/* Bits 0..15 of qh (little-endian u32) -> bytes 0x10 where set, for values 0..15; bits 16..31 for
 * values 16..31. Each byte is tested against its own bit of a copy of the right qh byte. */
static inline void high_bits(const uint8_t qh[4], uint8x16_t *lo, uint8x16_t *hi) {
    static const uint8_t bit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
    const uint8x16_t m = vld1q_u8(bit), v16 = vdupq_n_u8(0x10);
    *lo = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[0]), vdup_n_u8(qh[1])), m), v16);
    *hi = vandq_u8(vtstq_u8(vcombine_u8(vdup_n_u8(qh[2]), vdup_n_u8(qh[3])), m), v16);
}

static float dot_q4_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t off = vdupq_n_s8(8);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / MF_QK4_0; i++) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), off);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), off);
        const int32x4_t s = dot2(lo, vld1q_s8(a[i].qs), hi, vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), h2f(w[i].d) * h2f(a[i].d));
    }
    return vaddvq_f32(acc);
}

static float dot_q4_1_q8_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_1 *w = vw;
    const mf_block_q8_1 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc = vdupq_n_f32(0);
    float mins = 0;
    for (int64_t i = 0; i < n / MF_QK4_1; i++) {
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int32x4_t s = dot2(vreinterpretq_s8_u8(vandq_u8(q, m4)), vld1q_s8(a[i].qs),
                                 vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), h2f(w[i].d) * h2f(a[i].d));
        mins += h2f(w[i].m) * h2f(a[i].s);
    }
    return vaddvq_f32(acc) + mins;
}

static float dot_q5_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t off = vdupq_n_s8(16);
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / MF_QK5_0; i++) {
        uint8x16_t hl, hh;
        high_bits(w[i].qh, &hl, &hh);
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), hl)), off);
        const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hh)), off);
        const int32x4_t s = dot2(lo, vld1q_s8(a[i].qs), hi, vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), h2f(w[i].d) * h2f(a[i].d));
    }
    return vaddvq_f32(acc);
}

static float dot_q5_1_q8_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_1 *w = vw;
    const mf_block_q8_1 *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc = vdupq_n_f32(0);
    float mins = 0;
    for (int64_t i = 0; i < n / MF_QK5_1; i++) {
        uint8x16_t hl, hh;
        high_bits(w[i].qh, &hl, &hh);
        const uint8x16_t q = vld1q_u8(w[i].qs);
        const int32x4_t s = dot2(vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), hl)), vld1q_s8(a[i].qs),
                                 vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), hh)), vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), h2f(w[i].d) * h2f(a[i].d));
        mins += h2f(w[i].m) * h2f(a[i].s);
    }
    return vaddvq_f32(acc) + mins;
}

static float dot_q8_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q8_0 *w = vw;
    const mf_block_q8_0 *a = va;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / MF_QK8_0; i++) {
        const int32x4_t s = dot2(vld1q_s8(w[i].qs), vld1q_s8(a[i].qs), vld1q_s8(w[i].qs + 16), vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), h2f(w[i].d) * h2f(a[i].d));
    }
    return vaddvq_f32(acc);
}

/* ---- K-quants: see dot_k_avx2.c for the block layouts and the formula per super-block ---- */

/* sum_s m_s * (bsums[2s] + bsums[2s+1]) */
static inline int32_t k4_mins_dot(const uint8_t mins[8], const int16_t *bsums) {
    const int16x8_t pairs = vpaddq_s16(vld1q_s16(bsums), vld1q_s16(bsums + 8));
    const int16x8_t m = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins)));
    return vaddvq_s32(vaddq_s32(vmull_s16(vget_low_s16(m), vget_low_s16(pairs)), vmull_high_s16(m, pairs)));
}

static inline float dot_k4(int64_t n, const uint8_t *base, size_t stride, const mf_block_q8_K *a, bool five) {
    const uint8x16_t m4 = vdupq_n_u8(0x0F), v16 = vdupq_n_u8(0x10);
    float sum = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *blk = base + (size_t)i * stride;
        const mf_block_q4_K *hdr = (const mf_block_q4_K *)blk; /* Q5_K shares d, dmin, scales */
        const uint8_t *qs = five ? ((const mf_block_q5_K *)blk)->qs : hdr->qs;
        const uint8_t *qh = five ? ((const mf_block_q5_K *)blk)->qh : NULL;
        uint8_t sm[16];
        mf_k4_unpack_scales(hdr->scales, sm);
        const int8_t *y = a[i].qs;
        int32x4_t isum = vdupq_n_s32(0);
        for (int j = 0; j < 4; j++) {
            const uint8x16_t q0 = vld1q_u8(qs + 32 * j), q1 = vld1q_u8(qs + 32 * j + 16);
            uint8x16_t l0 = vandq_u8(q0, m4), l1 = vandq_u8(q1, m4), h0 = vshrq_n_u8(q0, 4), h1 = vshrq_n_u8(q1, 4);
            if (five) {
                const uint8x16_t b0 = vdupq_n_u8((uint8_t)(1 << (2 * j))), b1 = vdupq_n_u8((uint8_t)(2 << (2 * j)));
                const uint8x16_t x0 = vld1q_u8(qh), x1 = vld1q_u8(qh + 16);
                l0 = vorrq_u8(l0, vandq_u8(vtstq_u8(x0, b0), v16));
                l1 = vorrq_u8(l1, vandq_u8(vtstq_u8(x1, b0), v16));
                h0 = vorrq_u8(h0, vandq_u8(vtstq_u8(x0, b1), v16));
                h1 = vorrq_u8(h1, vandq_u8(vtstq_u8(x1, b1), v16));
            }
            const int32x4_t pl = dot2(vreinterpretq_s8_u8(l0), vld1q_s8(y + 64 * j), vreinterpretq_s8_u8(l1), vld1q_s8(y + 64 * j + 16));
            const int32x4_t ph = dot2(vreinterpretq_s8_u8(h0), vld1q_s8(y + 64 * j + 32), vreinterpretq_s8_u8(h1), vld1q_s8(y + 64 * j + 48));
            isum = vmlaq_n_s32(isum, pl, sm[2 * j]);
            isum = vmlaq_n_s32(isum, ph, sm[2 * j + 1]);
        }
        sum += a[i].d * h2f(hdr->d) * (float)vaddvq_s32(isum) - a[i].d * h2f(hdr->dmin) * (float)k4_mins_dot(sm + 8, a[i].bsums);
    }
    return sum;
}

static float dot_q4_K_q8_K(int64_t n, const void *w, const void *a) { return dot_k4(n, w, sizeof(mf_block_q4_K), a, false); }
static float dot_q5_K_q8_K(int64_t n, const void *w, const void *a) { return dot_k4(n, w, sizeof(mf_block_q5_K), a, true); }

/* Q6_K: value 128h + 32k + 16c + l (l < 16) uses the nibble of ql[64h + 32(k&1) + 16c + l] (low for
 * k < 2) and bits 2k..2k+1 of qh[32h + 16c + l], minus 32; its scale is scales[8h + 2k + c]. */
static float dot_q6_K_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q6_K *w = vw;
    const mf_block_q8_K *a = va;
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m2 = vdupq_n_u8(0x30);
    const int8x16_t off = vdupq_n_s8(32);
    float sum = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int32x4_t isum = vdupq_n_s32(0);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h, *qh = w[i].qh + 32 * h;
            const int8_t *y = a[i].qs + 128 * h;
            const int8_t *sc = w[i].scales + 8 * h;
            for (int c = 0; c < 2; c++) {
                const uint8x16_t a0 = vld1q_u8(ql + 16 * c), a1 = vld1q_u8(ql + 32 + 16 * c), hb = vld1q_u8(qh + 16 * c);
                uint8x16_t q[4];
                q[0] = vorrq_u8(vandq_u8(a0, m4), vandq_u8(vshlq_n_u8(hb, 4), m2));
                q[1] = vorrq_u8(vandq_u8(a1, m4), vandq_u8(vshlq_n_u8(hb, 2), m2));
                q[2] = vorrq_u8(vshrq_n_u8(a0, 4), vandq_u8(hb, m2));
                q[3] = vorrq_u8(vshrq_n_u8(a1, 4), vandq_u8(vshrq_n_u8(hb, 2), m2));
                for (int k = 0; k < 4; k++) {
                    const int8x16_t qs = vsubq_s8(vreinterpretq_s8_u8(q[k]), off);
                    const int32x4_t p = vdotq_s32(vdupq_n_s32(0), qs, vld1q_s8(y + 32 * k + 16 * c));
                    isum = vmlaq_n_s32(isum, p, sc[2 * k + c]);
                }
            }
        }
        sum += a[i].d * h2f(w[i].d) * (float)vaddvq_s32(isum);
    }
    return sum;
}

/* Q2_K and Q3_K: value 128h + 32k + l (l < 32) is bits 2k..2k+1 of qs[32h + l]; Q3_K's less 4 where
 * bit 4h + k of hmask[l] is clear. Group j = 8h + 2k + l / 16 takes scale j. Per super-block one
 * exact integer sum of the groups' scaled sums (Q2_K: less the minimums' sum over the bsums). */
static inline void k23_values(const uint8_t *qs, const uint8_t *hmask, int h, int k, int8x16_t v[2]) {
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int c = 0; c < 2; c++) {
        uint8x16_t q = vandq_u8(vshlq_u8(vld1q_u8(qs + 32 * h + 16 * c), vdupq_n_s8((int8_t)(-2 * k))), m3);
        int8x16_t sq = vreinterpretq_s8_u8(q);
        if (hmask) { /* 4 where the bit is clear */
            const uint8x16_t set = vtstq_u8(vld1q_u8(hmask + 16 * c), vdupq_n_u8((uint8_t)(1 << (4 * h + k))));
            sq = vsubq_s8(sq, vreinterpretq_s8_u8(vbicq_u8(vdupq_n_u8(4), set)));
        }
        v[c] = sq;
    }
}

static inline int32_t k23_sum(const uint8_t *qs, const uint8_t *hmask, const int8_t *y, const int sc[16]) {
    int32x4_t isum = vdupq_n_s32(0);
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++) {
            int8x16_t v[2];
            k23_values(qs, hmask, h, k, v);
            const int8_t *yk = y + 128 * h + 32 * k;
            isum = vmlaq_n_s32(isum, vdotq_s32(vdupq_n_s32(0), v[0], vld1q_s8(yk)), sc[8 * h + 2 * k]);
            isum = vmlaq_n_s32(isum, vdotq_s32(vdupq_n_s32(0), v[1], vld1q_s8(yk + 16)), sc[8 * h + 2 * k + 1]);
        }
    return vaddvq_s32(isum);
}

static float dot_q2_K_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q2_K *w = vw;
    const mf_block_q8_K *a = va;
    float sum = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int sc[16];
        int32_t summs = 0;
        for (int j = 0; j < 16; j++) sc[j] = w[i].scales[j] & 0xF, summs += a[i].bsums[j] * (w[i].scales[j] >> 4);
        const int32_t isum = k23_sum(w[i].qs, NULL, a[i].qs, sc);
        sum += a[i].d * h2f(w[i].d) * (float)isum - a[i].d * h2f(w[i].dmin) * (float)summs;
    }
    return sum;
}

static float dot_q3_K_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q3_K *w = vw;
    const mf_block_q8_K *a = va;
    float sum = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int sc[16];
        for (int j = 0; j < 16; j++) sc[j] = mf_q3_K_scale(w[i].scales, j);
        sum += a[i].d * h2f(w[i].d) * (float)k23_sum(w[i].qs, w[i].hmask, a[i].qs, sc);
    }
    return sum;
}

/* IQ4_NL and IQ4_XS: a block's 32 values from the 16-entry table (low nibbles the first 16). */
static inline void iq4_values(const uint8_t qs[16], int8x16_t *lo, int8x16_t *hi) {
    const int8x16_t lut = vld1q_s8(mf_iq4nl_values);
    const uint8x16_t q = vld1q_u8(qs);
    *lo = vqtbl1q_s8(lut, vandq_u8(q, vdupq_n_u8(0x0F)));
    *hi = vqtbl1q_s8(lut, vshrq_n_u8(q, 4));
}

static float dot_iq4_nl_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_iq4_nl *w = vw;
    const mf_block_q8_0 *a = va;
    float32x4_t acc = vdupq_n_f32(0);
    for (int64_t i = 0; i < n / 32; i++) {
        int8x16_t lo, hi;
        iq4_values(w[i].qs, &lo, &hi);
        const int32x4_t s = dot2(lo, vld1q_s8(a[i].qs), hi, vld1q_s8(a[i].qs + 16));
        acc = vfmaq_n_f32(acc, vcvtq_f32_s32(s), h2f(w[i].d) * h2f(a[i].d));
    }
    return vaddvq_f32(acc);
}

static float dot_iq4_xs_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_iq4_xs *w = vw;
    const mf_block_q8_K *a = va;
    float sum = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int32x4_t isum = vdupq_n_s32(0);
        for (int b = 0; b < 8; b++) {
            const int ls = mf_iq4_xs_scale(&w[i], b);
            int8x16_t lo, hi;
            iq4_values(w[i].qs + 16 * b, &lo, &hi);
            isum = vmlaq_n_s32(isum, dot2(lo, vld1q_s8(a[i].qs + 32 * b), hi, vld1q_s8(a[i].qs + 32 * b + 16)), ls);
        }
        sum += a[i].d * h2f(w[i].d) * (float)vaddvq_s32(isum);
    }
    return sum;
}

/* ---- float formats ---- */

static float dot_f32_f32(int64_t n, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    float32x4_t acc[4] = {vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 4; k++) acc[k] = vfmaq_f32(acc[k], vld1q_f32(w + i + 4 * k), vld1q_f32(a + i + 4 * k));
    float s = vaddvq_f32(vaddq_f32(vaddq_f32(acc[0], acc[1]), vaddq_f32(acc[2], acc[3])));
    for (; i < n; i++) s += w[i] * a[i];
    return s;
}

static float dot_f16_f16(int64_t n, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const float16x8_t x = vreinterpretq_f16_u16(vld1q_u16(w + i)), y = vreinterpretq_f16_u16(vld1q_u16(a + i));
        acc[0] = vfmaq_f32(acc[0], vcvt_f32_f16(vget_low_f16(x)), vcvt_f32_f16(vget_low_f16(y)));
        acc[1] = vfmaq_f32(acc[1], vcvt_high_f32_f16(x), vcvt_high_f32_f16(y));
    }
    float s = vaddvq_f32(vaddq_f32(acc[0], acc[1]));
    for (; i < n; i++) s += h2f(w[i]) * h2f(a[i]);
    return s;
}

static float dot_bf16_bf16(int64_t n, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    float32x4_t acc[2] = {vdupq_n_f32(0), vdupq_n_f32(0)};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const uint16x8_t x = vld1q_u16(w + i), y = vld1q_u16(a + i);
        acc[0] = vfmaq_f32(acc[0], vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(x), 16)),
                           vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(y), 16)));
        acc[1] = vfmaq_f32(acc[1], vreinterpretq_f32_u32(vshll_high_n_u16(x, 16)), vreinterpretq_f32_u32(vshll_high_n_u16(y, 16)));
    }
    float s = vaddvq_f32(vaddq_f32(acc[0], acc[1]));
    for (; i < n; i++) s += mf_bf16_to_f32(w[i]) * mf_bf16_to_f32(a[i]);
    return s;
}

/* ---- activation quantizers (semantics in act_avx2.c and quant.h) ---- */

/* 16 floats times m, rounded to nearest even, saturated to s8 */
static inline int8x16_t round16(const float *x, float32x4_t m) {
    int32x4_t r[4];
    for (int k = 0; k < 4; k++) r[k] = vcvtnq_s32_f32(vmulq_f32(vld1q_f32(x + 4 * k), m));
    const int16x8_t a = vcombine_s16(vqmovn_s32(r[0]), vqmovn_s32(r[1])), b = vcombine_s16(vqmovn_s32(r[2]), vqmovn_s32(r[3]));
    return vcombine_s8(vqmovn_s16(a), vqmovn_s16(b));
}

static inline float absmax(const float *x, int n) {
    float32x4_t m = vdupq_n_f32(0);
    for (int k = 0; k < n; k += 4) m = vmaxq_f32(m, vabsq_f32(vld1q_f32(x + k)));
    return vmaxvq_f32(m);
}

/* Blocks holding NaN or infinity (vmaxq propagates NaN into amax), or whose amax is so small that
 * 127 / amax is infinite, produce inf/NaN products on which the reference's rounding trick and
 * vcvtnq disagree: they go to the reference quantizer. */
static inline bool needs_reference(float amax) { return !(amax <= 3.4e38f) || (amax != 0.0f && amax < 3.8e-37f); }

/* Returns sum(q), or -1000 without writing when the block needs the reference. */
static inline int q8_block(const float *x, int8_t *q, float *d_out) {
    const float amax = absmax(x, 32);
    if (MF_UNLIKELY(needs_reference(amax))) return -1000;
    const float32x4_t id = vdupq_n_f32(amax != 0.0f ? 127.f / amax : 0.0f);
    const int8x16_t q0 = round16(x, id), q1 = round16(x + 16, id);
    vst1q_s8(q, q0);
    vst1q_s8(q + 16, q1);
    *d_out = amax / 127.f;
    return vaddlvq_s8(q0) + vaddlvq_s8(q1);
}

static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    mf_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, src += MF_QK8_0) {
        float d;
        if (MF_UNLIKELY(q8_block(src, b[i].qs, &d) == -1000)) {
            mf_type_get_traits(MF_TYPE_Q8_0)->quantize(src, &b[i], MF_QK8_0);
            continue;
        }
        b[i].d = mf_f32_to_fp16(d);
    }
}

static void quantize_q8_1(const float *src, void *dst, int64_t n) {
    mf_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, src += MF_QK8_1) {
        float d;
        const int sum = q8_block(src, b[i].qs, &d);
        if (MF_UNLIKELY(sum == -1000)) {
            mf_type_get_traits(MF_TYPE_Q8_1)->quantize(src, &b[i], MF_QK8_1);
            continue;
        }
        b[i].d = mf_f32_to_fp16(d);
        b[i].s = mf_f32_to_fp16(d * (float)sum);
    }
}

static void quantize_q8_K(const float *src, void *dst, int64_t n) {
    mf_block_q8_K *b = dst;
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        const float amax = absmax(src, MF_QK_K);
        if (MF_UNLIKELY(needs_reference(amax))) {
            mf_type_get_traits(MF_TYPE_Q8_K)->quantize(src, &b[i], MF_QK_K);
            continue;
        }
        if (!(amax > 0.0f)) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float max = amax;
        for (int j = 0; j < MF_QK_K; j++)
            if (fabsf(src[j]) == amax) {
                max = src[j];
                break;
            }
        const float iscale = -127.f / max;
        const float32x4_t is = vdupq_n_f32(iscale);
        for (int g = 0; g < MF_QK_K / 16; g++) {
            const int8x16_t q = round16(src + 16 * g, is);
            vst1q_s8(b[i].qs + 16 * g, q);
            b[i].bsums[g] = (int16_t)vaddlvq_s8(q);
        }
        b[i].d = 1 / iscale;
    }
}

static void quantize_f16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(src + i);
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(v)));
        if (MF_UNLIKELY(vminvq_u32(vceqq_f32(v, v)) == 0)) /* NaN payloads: as the scalar converter */
            for (int k = 0; k < 4; k++) y[i + k] = mf_f32_to_fp16(src[i + k]);
    }
    for (; i < n; i++) y[i] = mf_f32_to_fp16(src[i]);
}

static void quantize_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(src + i);
        const uint32x4_t u = vreinterpretq_u32_f32(v), top = vshrq_n_u32(u, 16);
        const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(u, vdupq_n_u32(0x7fff)), vandq_u32(top, vdupq_n_u32(1))), 16);
        const uint32x4_t r = vbslq_u32(vceqq_f32(v, v), rounded, vorrq_u32(top, vdupq_n_u32(0x40)));
        vst1_u16(y + i, vmovn_u32(r));
    }
    for (; i < n; i++) y[i] = mf_f32_to_bf16(src[i]);
}

static void quantize_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

MF_SIMD_GEMM_FROM_DOT(gemm_q4_0, dot_q4_0_q8_0)
MF_SIMD_GEMM_FROM_DOT(gemm_q4_1, dot_q4_1_q8_1)
MF_SIMD_GEMM_FROM_DOT(gemm_q5_0, dot_q5_0_q8_0)
MF_SIMD_GEMM_FROM_DOT(gemm_q5_1, dot_q5_1_q8_1)
MF_SIMD_GEMM_FROM_DOT(gemm_q8_0, dot_q8_0_q8_0)
MF_SIMD_GEMM_FROM_DOT(gemm_q4_K, dot_q4_K_q8_K)
MF_SIMD_GEMM_FROM_DOT(gemm_q5_K, dot_q5_K_q8_K)
MF_SIMD_GEMM_FROM_DOT(gemm_q6_K, dot_q6_K_q8_K)
MF_SIMD_GEMM_FROM_DOT(gemm_q2_K, dot_q2_K_q8_K)
MF_SIMD_GEMM_FROM_DOT(gemm_q3_K, dot_q3_K_q8_K)
MF_SIMD_GEMM_FROM_DOT(gemm_iq4_nl, dot_iq4_nl_q8_0)
MF_SIMD_GEMM_FROM_DOT(gemm_iq4_xs, dot_iq4_xs_q8_K)
MF_SIMD_GEMM_FROM_DOT(gemm_f32, dot_f32_f32)
MF_SIMD_GEMM_FROM_DOT(gemm_f16, dot_f16_f16)
MF_SIMD_GEMM_FROM_DOT(gemm_bf16, dot_bf16_bf16)

void mf_simd_register_neon(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_0, Q8_0, dot_q4_0_q8_0, gemm_q4_0);
    MF_SIMD_SET_DOT(t, Q4_1, Q8_1, dot_q4_1_q8_1, gemm_q4_1);
    MF_SIMD_SET_DOT(t, Q5_0, Q8_0, dot_q5_0_q8_0, gemm_q5_0);
    MF_SIMD_SET_DOT(t, Q5_1, Q8_1, dot_q5_1_q8_1, gemm_q5_1);
    MF_SIMD_SET_DOT(t, Q8_0, Q8_0, dot_q8_0_q8_0, gemm_q8_0);
    MF_SIMD_SET_DOT(t, Q4_K, Q8_K, dot_q4_K_q8_K, gemm_q4_K);
    MF_SIMD_SET_DOT(t, Q5_K, Q8_K, dot_q5_K_q8_K, gemm_q5_K);
    MF_SIMD_SET_DOT(t, Q6_K, Q8_K, dot_q6_K_q8_K, gemm_q6_K);
    MF_SIMD_SET_DOT(t, Q2_K, Q8_K, dot_q2_K_q8_K, gemm_q2_K);
    MF_SIMD_SET_DOT(t, Q3_K, Q8_K, dot_q3_K_q8_K, gemm_q3_K);
    MF_SIMD_SET_DOT(t, IQ4_NL, Q8_0, dot_iq4_nl_q8_0, gemm_iq4_nl);
    MF_SIMD_SET_DOT(t, IQ4_XS, Q8_K, dot_iq4_xs_q8_K, gemm_iq4_xs);
    MF_SIMD_SET_DOT(t, F32, F32, dot_f32_f32, gemm_f32);
    MF_SIMD_SET_DOT(t, F16, F16, dot_f16_f16, gemm_f16);
    MF_SIMD_SET_DOT(t, BF16, BF16, dot_bf16_bf16, gemm_bf16);
    t->quantize[MF_TYPE_Q8_0] = quantize_q8_0;
    t->quantize[MF_TYPE_Q8_1] = quantize_q8_1;
    t->quantize[MF_TYPE_Q8_K] = quantize_q8_K;
    t->quantize[MF_TYPE_F16] = quantize_f16;
    t->quantize[MF_TYPE_BF16] = quantize_bf16;
    t->quantize[MF_TYPE_F32] = quantize_f32;
}
