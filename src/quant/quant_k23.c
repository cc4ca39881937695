/* quant_k23.c: reference dequantize, quantize and Q8_K dot products for the 2- and 3-bit super-block
 * formats Q2_K and Q3_K (layouts in quant.h), following llama.cpp's reference quantizers (no
 * importance matrix) and generic dot kernels step for step, float operation order included.
 *
 * Both store 2-bit fields the same way: in each half h of 128 values, element 128h + 32k + l (l < 32)
 * is bits 2k..2k+1 of qs[32h + l]. */
#include "quant/quant_ref.h"
#include "core/core.h"

#include <math.h>

#define GROUP_MAX_EPS 1e-15f

static void pack_2bit(const uint8_t L[MF_QK_K], uint8_t qs[MF_QK_K / 4]) {
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 32; l++) {
            const uint8_t *Lh = L + 128 * h;
            qs[32 * h + l] = (uint8_t)(Lh[l] | Lh[l + 32] << 2 | Lh[l + 64] << 4 | Lh[l + 96] << 6);
        }
}

static inline int level_2bit(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

/* ---- Q2_K: x = d * sc_g * q - dmin * m_g ---- */

void mf_quant_quantize_q2_K(const float *src, void *dst, int64_t n) {
    mf_block_q2_K *b = dst;
    uint8_t L[MF_QK_K], Laux[16];
    float weights[16], mins[16], scales[16];
    const float q4scale = 15.f;
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        float max_scale = 0, max_min = 0;
        for (int g = 0; g < 16; g++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(src[16 * g + l]);
            scales[g] = mf_quant_fit_scale_min(16, 3, src + 16 * g, weights, L + 16 * g, &mins[g], Laux, -0.5f, 0.1f,
                                               15, true);
            if (scales[g] > max_scale) max_scale = scales[g];
            if (mins[g] > max_min) max_min = mins[g];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int g = 0; g < 16; g++) b[i].scales[g] = (uint8_t)mf_quant_nearest_int(iscale * scales[g]);
            b[i].d = mf_f32_to_fp16(max_scale / q4scale);
        } else {
            for (int g = 0; g < 16; g++) b[i].scales[g] = 0;
            b[i].d = mf_f32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int g = 0; g < 16; g++) b[i].scales[g] |= (uint8_t)(mf_quant_nearest_int(iscale * mins[g]) << 4);
            b[i].dmin = mf_f32_to_fp16(max_min / q4scale);
        } else {
            b[i].dmin = mf_f32_to_fp16(0.f);
        }
        const float d_all = mf_fp16_to_f32(b[i].d), dmin_all = mf_fp16_to_f32(b[i].dmin);
        for (int g = 0; g < 16; g++) {
            const float d = d_all * (b[i].scales[g] & 0xF);
            if (!d) continue;
            const float dm = dmin_all * (b[i].scales[g] >> 4);
            for (int ii = 0; ii < 16; ii++) {
                const int l = mf_quant_nearest_int((src[16 * g + ii] + dm) / d);
                L[16 * g + ii] = (uint8_t)MF_MAX(0, MF_MIN(3, l));
            }
        }
        pack_2bit(L, b[i].qs);
    }
}

void mf_quant_dequant_q2_K(const void *src, float *dst, int64_t n) {
    const mf_block_q2_K *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++, dst += MF_QK_K) {
        const float d = mf_fp16_to_f32(b[i].d), min = mf_fp16_to_f32(b[i].dmin);
        for (int g = 0; g < 16; g++) { /* group g = elements 16g..16g+15: half g / 8, field (g / 2) % 4 */
            const uint8_t sc = b[i].scales[g];
            const float dl = d * (sc & 0xF), ml = min * (sc >> 4);
            const uint8_t *q = b[i].qs + 32 * (g / 8) + 16 * (g % 2);
            const int shift = 2 * ((g / 2) % 4);
            for (int l = 0; l < 16; l++) dst[16 * g + l] = dl * ((q[l] >> shift) & 3) - ml;
        }
    }
}

/* ---- Q3_K: x = d * (s_g - 32) * (q - 4) with q = low 2 bits + 4 * hmask bit ---- */

/* Symmetric fit of n values to -nmax..nmax-1 weighted by x^2, refining level by level (llama.cpp's
 * make_q3_quants with rmse on). L receives levels + nmax; returns the scale. */
static float fit_q3(int n, int nmax, const float *x, int8_t *L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; i++) {
        const float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < GROUP_MAX_EPS) {
        for (int i = 0; i < n; i++) L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = mf_quant_nearest_int(iscale * x[i]);
        l = MF_MAX(-nmax, MF_MIN(nmax - 1, l));
        L[i] = (int8_t)l;
        const float w = x[i] * x[i];
        sumlx += w * x[i] * l;
        suml2 += w * l * l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            const float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * L[i];
            if (slx > 0) {
                float sl2 = suml2 - w * L[i] * L[i];
                int new_l = mf_quant_nearest_int(x[i] * sl2 / slx);
                new_l = MF_MAX(-nmax, MF_MIN(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * new_l;
                    sl2 += w * new_l * new_l;
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}


void mf_quant_quantize_q3_K(const float *src, void *dst, int64_t n) {
    mf_block_q3_K *b = dst;
    int8_t L[MF_QK_K];
    float scales[16];
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        float max_scale = 0, amax = 0;
        for (int g = 0; g < 16; g++) {
            scales[g] = fit_q3(16, 4, src + 16 * g, L + 16 * g);
            if (fabsf(scales[g]) > amax) {
                amax = fabsf(scales[g]);
                max_scale = scales[g];
            }
        }
        memset(b[i].scales, 0, sizeof b[i].scales);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int g = 0; g < 16; g++) {
                int l = (int8_t)mf_quant_nearest_int(iscale * scales[g]);
                l = MF_MAX(-32, MF_MIN(31, l)) + 32;
                if (g < 8)
                    b[i].scales[g] = (uint8_t)(l & 0xF);
                else
                    b[i].scales[g - 8] |= (uint8_t)((l & 0xF) << 4);
                b[i].scales[g % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (g / 4)));
            }
            b[i].d = mf_f32_to_fp16(1 / iscale);
        } else {
            b[i].d = mf_f32_to_fp16(0.f);
        }
        const float d_all = mf_fp16_to_f32(b[i].d);
        for (int g = 0; g < 16; g++) {
            const float d = d_all * mf_q3_K_scale(b[i].scales, g);
            if (!d) continue;
            for (int ii = 0; ii < 16; ii++) {
                const int l = mf_quant_nearest_int(src[16 * g + ii] / d);
                L[16 * g + ii] = (int8_t)(MF_MAX(-4, MF_MIN(3, l)) + 4);
            }
        }
        /* bit 2 of element e goes to bit e / 32 of hmask[e % 32] */
        memset(b[i].hmask, 0, sizeof b[i].hmask);
        uint8_t low[MF_QK_K];
        for (int e = 0; e < MF_QK_K; e++) {
            if (L[e] > 3) b[i].hmask[e % 32] |= (uint8_t)(1u << (e / 32));
            low[e] = (uint8_t)(L[e] & 3);
        }
        pack_2bit(low, b[i].qs);
    }
}

void mf_quant_dequant_q3_K(const void *src, float *dst, int64_t n) {
    const mf_block_q3_K *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++, dst += MF_QK_K) {
        const float d_all = mf_fp16_to_f32(b[i].d);
        for (int g = 0; g < 16; g++) {
            const float dl = d_all * mf_q3_K_scale(b[i].scales, g);
            const uint8_t *q = b[i].qs + 32 * (g / 8) + 16 * (g % 2), *hm = b[i].hmask + 16 * (g % 2);
            const int shift = 2 * ((g / 2) % 4), hbit = g / 2; /* e / 32 for e in group g */
            for (int l = 0; l < 16; l++) dst[16 * g + l] = dl * (((q[l] >> shift) & 3) - ((hm[l] >> hbit) & 1 ? 0 : 4));
        }
    }
}

/* ---- dots against Q8_K ---- */

/* llama.cpp's generic Q2_K dot: per super-block one integer sum of sc_g * sum(q8 * q) over the groups
 * and one of bsums * m_g, combined as d_a * d * isum - d_a * dmin * summs. */
float mf_quant_dot_q2_K_q8_K(int64_t n, const void *w, const void *a) {
    const mf_block_q2_K *x = w;
    const mf_block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int summs = 0;
        for (int g = 0; g < 16; g++) summs += y[i].bsums[g] * (x[i].scales[g] >> 4);
        const float dall = y[i].d * mf_fp16_to_f32(x[i].d);
        const float dmin = y[i].d * mf_fp16_to_f32(x[i].dmin);
        int isum = 0;
        for (int g = 0; g < 16; g++) {
            int isuml = 0;
            for (int l = 0; l < 16; l++) isuml += y[i].qs[16 * g + l] * level_2bit(x[i].qs, 16 * g + l);
            isum += (x[i].scales[g] & 0xF) * isuml;
        }
        sumf += dall * isum - dmin * summs;
    }
    return sumf;
}

/* llama.cpp's generic Q3_K dot: the 8-lane structure of the Q4_K..Q6_K dots (see vec_dot.c), with
 * per-group scales s_g - 32 and no min term. */
float mf_quant_dot_q3_K_q8_K(int64_t n, const void *w, const void *a) {
    const mf_block_q3_K *x = w;
    const mf_block_q8_K *y = a;
    float sums[8] = {0}, sumf = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int32_t lanes[8] = {0};
        for (int e = 0; e < MF_QK_K; e++) {
            const int q = level_2bit(x[i].qs, e) - ((x[i].hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
            lanes[e % 8] += mf_q3_K_scale(x[i].scales, e / 16) * (y[i].qs[e] * q);
        }
        const float d = mf_fp16_to_f32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] += d * lanes[l];
    }
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}
