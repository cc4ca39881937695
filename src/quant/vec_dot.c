/* vec_dot.c: reference dot products of a weight row with an activation row, with exactly the integer
 * sums and float combination order of llama.cpp's scalar (generic) CPU kernels, so that an engine
 * using them reproduces llama.cpp's matmul results bit for bit where llama.cpp runs those kernels.
 *
 * Pairings (traits.vec_dot_type): Q4_0, Q5_0, Q8_0 . Q8_0; Q4_1, Q5_1 . Q8_1 (s = d * sum q carries the
 * weight offset m); Q4_K, Q5_K, Q6_K . Q8_K; F16 . F16; BF16 . BF16; F32 . F32. */
#include "quant/quant_ref.h"
#include "core/core.h"

/* ---- float formats: float products accumulated in double, as ggml_vec_dot_f32/f16/bf16 do ---- */

float mf_quant_dot_f32_f32(int64_t n, const void *w, const void *a) {
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * y[i]);
    return (float)sum;
}

float mf_quant_dot_f16_f16(int64_t n, const void *w, const void *a) {
    const mf_fp16 *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(mf_fp16_to_f32(x[i]) * mf_fp16_to_f32(y[i]));
    return (float)sum;
}

float mf_quant_dot_bf16_bf16(int64_t n, const void *w, const void *a) {
    const mf_bf16 *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(mf_bf16_to_f32(x[i]) * mf_bf16_to_f32(y[i]));
    return (float)sum;
}

/* ---- 32-value blocks: one integer sum per block, then one float term ---- */

static uint32_t qh_u32(const uint8_t b[4]) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

float mf_quant_dot_q4_0_q8_0(int64_t n, const void *w, const void *a) {
    const mf_block_q4_0 *x = w;
    const mf_block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; j++) {
            sumi0 += ((x[ib].qs[j] & 0xF) - 8) * y[ib].qs[j];
            sumi1 += ((x[ib].qs[j] >> 4) - 8) * y[ib].qs[j + 16];
        }
        const int sumi = sumi0 + sumi1;
        sumf += sumi * mf_fp16_to_f32(x[ib].d) * mf_fp16_to_f32(y[ib].d);
    }
    return sumf;
}

float mf_quant_dot_q4_1_q8_1(int64_t n, const void *w, const void *a) {
    const mf_block_q4_1 *x = w;
    const mf_block_q8_1 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_1; ib++) {
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; j++) {
            sumi0 += (x[ib].qs[j] & 0xF) * y[ib].qs[j];
            sumi1 += (x[ib].qs[j] >> 4) * y[ib].qs[j + 16];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (mf_fp16_to_f32(x[ib].d) * mf_fp16_to_f32(y[ib].d)) * sumi +
                mf_fp16_to_f32(x[ib].m) * mf_fp16_to_f32(y[ib].s);
    }
    return sumf;
}

float mf_quant_dot_q5_0_q8_0(int64_t n, const void *w, const void *a) {
    const mf_block_q5_0 *x = w;
    const mf_block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        const uint32_t qh = qh_u32(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; j++) {
            const int x0 = ((x[ib].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4) - 16;
            const int x1 = ((x[ib].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4) - 16;
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + 16];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (mf_fp16_to_f32(x[ib].d) * mf_fp16_to_f32(y[ib].d)) * sumi;
    }
    return sumf;
}

float mf_quant_dot_q5_1_q8_1(int64_t n, const void *w, const void *a) {
    const mf_block_q5_1 *x = w;
    const mf_block_q8_1 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_1; ib++) {
        const uint32_t qh = qh_u32(x[ib].qh);
        int sumi0 = 0, sumi1 = 0;
        for (int j = 0; j < 16; j++) {
            const int x0 = (x[ib].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int x1 = (x[ib].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            sumi0 += x0 * y[ib].qs[j];
            sumi1 += x1 * y[ib].qs[j + 16];
        }
        const int sumi = sumi0 + sumi1;
        sumf += (mf_fp16_to_f32(x[ib].d) * mf_fp16_to_f32(y[ib].d)) * sumi +
                mf_fp16_to_f32(x[ib].m) * mf_fp16_to_f32(y[ib].s);
    }
    return sumf;
}

float mf_quant_dot_q8_0_q8_0(int64_t n, const void *w, const void *a) {
    const mf_block_q8_0 *x = w;
    const mf_block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / MF_QK8_0; ib++) {
        int sumi = 0;
        for (int j = 0; j < MF_QK8_0; j++) sumi += x[ib].qs[j] * y[ib].qs[j];
        sumf += sumi * (mf_fp16_to_f32(x[ib].d) * mf_fp16_to_f32(y[ib].d));
    }
    return sumf;
}

/* ---- super-blocks of 256 ----
 * llama.cpp's generic K-quant dots keep 8 integer lanes: lane l accumulates, over the super-block,
 * scale(e) * q8[e] * q[e] for the elements e with e % 8 == l. Each lane is then scaled by
 * d = d_w * d_a into float lane sums that run across super-blocks; the min terms
 * (-dmin_w * d_a * sum_s m_s * bsum_s) go straight into the total, and the 8 lanes are added to the
 * total last. The float order matters for bit-exact agreement, so it is kept here. */

/* Lane sums for one super-block, given the weight levels q[256] (signed or not) and a per-element
 * scale taken from sc[e / group] with group 32 (Q4_K, Q5_K) or 16 (Q6_K). */
static void k_lanes(const int8_t *q, const int8_t *q8, const int *sc, int group, int32_t lanes[8]) {
    for (int l = 0; l < 8; l++) lanes[l] = 0;
    for (int e = 0; e < MF_QK_K; e++) lanes[e % 8] += sc[e / group] * (q8[e] * q[e]);
}

static float k_finish(float sums[8], float sumf) {
    for (int l = 0; l < 8; l++) sumf += sums[l];
    return sumf;
}

/* Shared by Q4_K and Q5_K: q holds the unpacked levels 0..31. */
static void k45_block(const int8_t q[MF_QK_K], const uint8_t scales12[MF_K_SCALE_SIZE], uint16_t d, uint16_t dmin,
                      const mf_block_q8_K *y, float sums[8], float *sumf) {
    int sc[8], mn[8];
    for (int j = 0; j < 8; j++) {
        uint8_t s, m;
        mf_get_scale_min_k4(j, scales12, &s, &m);
        sc[j] = s;
        mn[j] = m;
    }
    int sumi = 0;
    for (int g = 0; g < 16; g++) sumi += y->bsums[g] * mn[g / 2];
    int32_t lanes[8];
    k_lanes(q, y->qs, sc, 32, lanes);
    const float dd = mf_fp16_to_f32(d) * y->d;
    for (int l = 0; l < 8; l++) sums[l] += dd * lanes[l];
    const float dm = mf_fp16_to_f32(dmin) * y->d;
    *sumf -= dm * sumi;
}

float mf_quant_dot_q4_K_q8_K(int64_t n, const void *w, const void *a) {
    const mf_block_q4_K *x = w;
    const mf_block_q8_K *y = a;
    float sums[8] = {0}, sumf = 0;
    int8_t q[MF_QK_K];
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                q[64 * c + l] = (int8_t)(x[i].qs[32 * c + l] & 0xF);
                q[64 * c + 32 + l] = (int8_t)(x[i].qs[32 * c + l] >> 4);
            }
        }
        k45_block(q, x[i].scales, x[i].d, x[i].dmin, &y[i], sums, &sumf);
    }
    return k_finish(sums, sumf);
}

float mf_quant_dot_q5_K_q8_K(int64_t n, const void *w, const void *a) {
    const mf_block_q5_K *x = w;
    const mf_block_q8_K *y = a;
    float sums[8] = {0}, sumf = 0;
    int8_t q[MF_QK_K];
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        for (int c = 0; c < 4; c++) {
            for (int l = 0; l < 32; l++) {
                const uint8_t h = x[i].qh[l];
                q[64 * c + l] = (int8_t)((x[i].qs[32 * c + l] & 0xF) | ((h >> (2 * c)) & 1) << 4);
                q[64 * c + 32 + l] = (int8_t)((x[i].qs[32 * c + l] >> 4) | ((h >> (2 * c + 1)) & 1) << 4);
            }
        }
        k45_block(q, x[i].scales, x[i].d, x[i].dmin, &y[i], sums, &sumf);
    }
    return k_finish(sums, sumf);
}

float mf_quant_dot_q6_K_q8_K(int64_t n, const void *w, const void *a) {
    const mf_block_q6_K *x = w;
    const mf_block_q8_K *y = a;
    float sums[8] = {0}, sumf = 0;
    int8_t q[MF_QK_K];
    int sc[16];
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[i].ql + 64 * h, *qh = x[i].qh + 32 * h;
            int8_t *qo = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                qo[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] >> 0) & 3) << 4) - 32);
                qo[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | ((qh[l] >> 2) & 3) << 4) - 32);
                qo[l + 64] = (int8_t)(((ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4) - 32);
                qo[l + 96] = (int8_t)(((ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4) - 32);
            }
        }
        for (int g = 0; g < 16; g++) sc[g] = x[i].scales[g];
        int32_t lanes[8];
        k_lanes(q, y[i].qs, sc, 16, lanes);
        const float dd = mf_fp16_to_f32(x[i].d) * y[i].d;
        for (int l = 0; l < 8; l++) sums[l] += dd * lanes[l];
    }
    return k_finish(sums, sumf);
}
