/* quant_k.c: reference dequantize and quantize for the 256-value super-block formats Q4_K, Q5_K,
 * Q6_K and the activation format Q8_K. The quantizers follow llama.cpp's reference (no importance
 * matrix) step for step, float operation order included, so a tensor we quantize has the same bytes
 * as llama-quantize's and the RMSE of a quantized model matches theirs.
 *
 * Q4_K/Q5_K: 8 sub-blocks of 32, x = d * sc_s * q - dmin * m_s, 6-bit sc/m packed (mf_get_scale_min_k4).
 * Q6_K: 16 groups of 16, x = d * sc_g * (q - 32), int8 sc. Q8_K: x = d * q, float d, bsums per 16. */
#include "quant/quant_ref.h"
#include "core/core.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f

/* ---- scale search helpers ---- */

float mf_quant_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                             uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = w[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; i++) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = mf_quant_nearest_int(iscale * (x[i] - min));
        L[i] = (uint8_t)MF_MAX(0, MF_MIN(nmax, l));
        float diff = scale * L[i] + min - x[i];
        best_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * is + nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = mf_quant_nearest_int(iscale * (x[i] - min));
            l = MF_MAX(0, MF_MIN(nmax, l));
            Laux[i] = (uint8_t)l;
            sum_l += w[i] * l;
            sum_l2 += w[i] * l * l;
            sum_xl += w[i] * l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * Laux[i] + this_min - x[i];
                cur_error += w[i] * (use_mad ? fabsf(diff) : diff * diff);
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* Symmetric scale fit of n values to levels -nmax..nmax-1 (stored as L + nmax), weighting errors by
 * x^2: the scale that maps the largest magnitude to -nmax, then 18 nearby grid scalings, keeping the
 * one with the best least-squares score sumlx^2 / suml2. Returns the scale (x ~ scale * l). */
static float fit_scale_sym(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = mf_quant_nearest_int(iscale * x[i]);
        l = MF_MAX(-nmax, MF_MIN(nmax - 1, l));
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        iscale = -(nmax + 0.1f * is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = mf_quant_nearest_int(iscale * x[i]);
            l = MF_MAX(-nmax, MF_MIN(nmax - 1, l));
            float w = x[i] * x[i];
            sumlx += w * x[i] * l;
            suml2 += w * l * l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++) {
                int l = mf_quant_nearest_int(iscale * x[i]);
                L[i] = (int8_t)(nmax + MF_MAX(-nmax, MF_MIN(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* ---- Q4_K and Q5_K share the scale search and the scale/min packing ---- */

/* Fit the 8 sub-blocks of one super-block with levels 0..nmax, pack the 6-bit scales and mins into
 * scales[12], set d/dmin, and requantize every value against the rounded scales into L[256]. */
static void quantize_k_superblock(const float *x, int nmax, float rmin, float rdelta, int nstep, uint8_t L[MF_QK_K],
                                  uint16_t *d_out, uint16_t *dmin_out, uint8_t scales_out[MF_K_SCALE_SIZE]) {
    uint8_t Laux[32];
    float weights[32], mins[8], scales[8];
    float max_scale = 0, max_min = 0; /* scales are positive since the min was subtracted */
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) sum_x2 += xs[l] * xs[l];
        const float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(xs[l]);
        scales[j] = mf_quant_fit_scale_min(32, nmax, xs, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)mf_quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)mf_quant_nearest_int(inv_min * mins[j]);
        ls = MF_MIN(63, ls);
        lm = MF_MIN(63, lm);
        /* j < 4: low 6 bits in bytes j and j+4; j >= 4: low nibbles in byte j+4, top 2 bits in the
         * spare top bits of bytes j-4 (scale) and j (min). */
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | (lm & 0xF) << 4);
            scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales_out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = mf_f32_to_fp16(max_scale / 63.f);
    *dmin_out = mf_f32_to_fp16(max_min / 63.f);
    const float d_all = mf_fp16_to_f32(*d_out), dmin_all = mf_fp16_to_f32(*dmin_out);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        mf_get_scale_min_k4(j, scales_out, &sc, &m);
        const float d = d_all * sc;
        if (!d) continue;
        const float dm = dmin_all * m;
        for (int ii = 0; ii < 32; ii++) {
            int l = mf_quant_nearest_int((x[32 * j + ii] + dm) / d);
            L[32 * j + ii] = (uint8_t)MF_MAX(0, MF_MIN(nmax, l));
        }
    }
}

void mf_quant_quantize_q4_K(const float *src, void *dst, int64_t n) {
    mf_block_q4_K *b = dst;
    uint8_t L[MF_QK_K];
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        memset(b[i].scales, 0, sizeof b[i].scales);
        quantize_k_superblock(src, 15, -1.f, 0.1f, 20, L, &b[i].d, &b[i].dmin, b[i].scales);
        /* chunk c of 32 bytes: low nibbles = sub-block 2c, high nibbles = sub-block 2c+1 */
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) b[i].qs[32 * c + l] = (uint8_t)(L[64 * c + l] | L[64 * c + l + 32] << 4);
    }
}

void mf_quant_quantize_q5_K(const float *src, void *dst, int64_t n) {
    mf_block_q5_K *b = dst;
    uint8_t L[MF_QK_K];
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        memset(b[i].scales, 0, sizeof b[i].scales);
        quantize_k_superblock(src, 31, -0.5f, 0.1f, 15, L, &b[i].d, &b[i].dmin, b[i].scales);
        /* as Q4_K, plus bit 4 of element l of sub-block s in bit s of qh[l] */
        memset(b[i].qh, 0, sizeof b[i].qh);
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const int lo = L[64 * c + l], hi = L[64 * c + l + 32];
                b[i].qh[l] |= (uint8_t)((lo >> 4) << (2 * c) | (hi >> 4) << (2 * c + 1));
                b[i].qs[32 * c + l] = (uint8_t)((lo & 0xF) | (hi & 0xF) << 4);
            }
        }
    }
}

void mf_quant_dequant_q4_K(const void *src, float *dst, int64_t n) {
    const mf_block_q4_K *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = mf_fp16_to_f32(b[i].d), min = mf_fp16_to_f32(b[i].dmin);
        const uint8_t *q = b[i].qs;
        for (int c = 0; c < 4; c++, q += 32) {
            uint8_t sc, m;
            mf_get_scale_min_k4(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            mf_get_scale_min_k4(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            for (int l = 0; l < 32; l++) *dst++ = d1 * (q[l] & 0xF) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * (q[l] >> 4) - m2;
        }
    }
}

void mf_quant_dequant_q5_K(const void *src, float *dst, int64_t n) {
    const mf_block_q5_K *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = mf_fp16_to_f32(b[i].d), min = mf_fp16_to_f32(b[i].dmin);
        const uint8_t *ql = b[i].qs, *qh = b[i].qh;
        for (int c = 0; c < 4; c++, ql += 32) {
            uint8_t sc, m;
            mf_get_scale_min_k4(2 * c, b[i].scales, &sc, &m);
            const float d1 = d * sc, m1 = min * m;
            mf_get_scale_min_k4(2 * c + 1, b[i].scales, &sc, &m);
            const float d2 = d * sc, m2 = min * m;
            const uint8_t u1 = (uint8_t)(1u << (2 * c)), u2 = (uint8_t)(2u << (2 * c));
            for (int l = 0; l < 32; l++) *dst++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
            for (int l = 0; l < 32; l++) *dst++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
        }
    }
}

/* ---- Q6_K ---- */

void mf_quant_quantize_q6_K(const float *src, void *dst, int64_t n) {
    mf_block_q6_K *b = dst;
    int8_t L[MF_QK_K];
    float scales[MF_QK_K / 16];
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        float max_scale = 0, max_abs_scale = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_scale_sym(16, 32, src + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        if (max_abs_scale < GROUP_MAX_EPS) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -128.f / max_scale;
        b[i].d = mf_f32_to_fp16(1 / iscale);
        for (int g = 0; g < 16; g++) b[i].scales[g] = (int8_t)MF_MIN(127, mf_quant_nearest_int(iscale * scales[g]));
        const float d_all = mf_fp16_to_f32(b[i].d);
        for (int g = 0; g < 16; g++) {
            const float d = d_all * b[i].scales[g];
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                int l = mf_quant_nearest_int(src[16 * g + ii] / d);
                L[16 * g + ii] = (int8_t)(MF_MAX(-32, MF_MIN(31, l)) + 32);
            }
        }
        /* Half h (128 values) uses ql[64h..64h+63] and qh[32h..32h+31]: for l < 32, ql[l] holds the
         * low nibbles of elements l (low) and l+64 (high), ql[l+32] those of l+32 and l+96; qh[l]
         * holds the top 2 bits of l, l+32, l+64, l+96 at bit offsets 0, 2, 4, 6. */
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *Lh = L + 128 * h;
            for (int l = 0; l < 32; l++) {
                const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
                ql[l] = (uint8_t)((q1 & 0xF) | (q3 & 0xF) << 4);
                ql[l + 32] = (uint8_t)((q2 & 0xF) | (q4 & 0xF) << 4);
                qh[l] = (uint8_t)((q1 >> 4) | (q2 >> 4) << 2 | (q3 >> 4) << 4 | (q4 >> 4) << 6);
            }
        }
    }
}

void mf_quant_dequant_q6_K(const void *src, float *dst, int64_t n) {
    const mf_block_q6_K *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = mf_fp16_to_f32(b[i].d);
        for (int h = 0; h < 2; h++, dst += 128) {
            const uint8_t *ql = b[i].ql + 64 * h, *qh = b[i].qh + 32 * h;
            const int8_t *sc = b[i].scales + 8 * h;
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32;
                const int q3 = ((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32;
                const int q4 = ((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32;
                dst[l] = d * sc[is + 0] * q1;
                dst[l + 32] = d * sc[is + 2] * q2;
                dst[l + 64] = d * sc[is + 4] * q3;
                dst[l + 96] = d * sc[is + 6] * q4;
            }
        }
    }
}

/* ---- Q8_K (activations for K-quant dots) ----
 * llama.cpp's x86 CPU backend uses the reference quantize_row_q8_K_ref for Q8_K, so this is it:
 * iscale = -127 / max with max the signed value of largest magnitude, q = nearest-even(iscale * x)
 * capped at 127, d = 1 / iscale (so d < 0 when max > 0), bsums[g] = sum of q in group g of 16. */
void mf_quant_quantize_q8_K_act(const float *src, void *dst, int64_t n) {
    mf_block_q8_K *b = dst;
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        float max = 0, amax = 0;
        for (int j = 0; j < MF_QK_K; j++) {
            const float ax = fabsf(src[j]);
            if (ax > amax) {
                amax = ax;
                max = src[j];
            }
        }
        if (!amax) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < MF_QK_K; j++) {
            const int v = mf_quant_nearest_int(iscale * src[j]);
            b[i].qs[j] = (int8_t)MF_MAX(-128, MF_MIN(127, v));
        }
        for (int g = 0; g < MF_QK_K / 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += b[i].qs[16 * g + l];
            b[i].bsums[g] = (int16_t)sum;
        }
        b[i].d = 1 / iscale;
    }
}

void mf_quant_dequant_q8_K(const void *src, float *dst, int64_t n) {
    const mf_block_q8_K *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++, dst += MF_QK_K)
        for (int j = 0; j < MF_QK_K; j++) dst[j] = b[i].d * b[i].qs[j];
}
