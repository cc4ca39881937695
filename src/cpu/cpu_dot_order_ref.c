/* cpu_dot_order_ref.c: plain scalar twins of the ordered dots (cpu_dot_order.h) whose order is not
 * the shared eight-lane shape: the same float steps as the SIMD kernels, written out one value at a
 * time, so tests can hold the AVX2 and AVX-512 kernels to them bit for bit on any CPU. */
#include "cpu/cpu_dot_order.h"
#include "core/core.h"

#include <math.h>

/* Q4_K in the repacked order (llama.cpp's ggml_gemm_q4_K_8x8_q8_K, per output): per super-block,
 * d = d_w * d_a and dm = dmin_w * d_a, then for each pair c = 0..3 of sub-blocks (2c, 2c+1), the
 * exact integers isum = sc[2c] * D[2c] + sc[2c+1] * D[2c+1] (D[j]: unsigned nibbles of sub-block j
 * times the activations there) and msum = mn[2c] * S[2c] + mn[2c+1] * S[2c+1] (S[j]: the activation
 * sum of sub-block j) enter s = fma(isum, d, s) and sm = fma(msum, dm, sm); the result is s - sm. */
float mf_cpu_dot_q4_K_rp_ref(int64_t n, const void *w, const void *a) {
    const mf_block_q4_K *x = w;
    const mf_block_q8_K *y = a;
    float s = 0.0f, sm = 0.0f;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = mf_fp16_to_f32(x[i].d) * y[i].d, dm = mf_fp16_to_f32(x[i].dmin) * y[i].d;
        for (int c = 0; c < 4; c++) {
            int32_t isum = 0, msum = 0;
            for (int h = 0; h < 2; h++) {
                const int j = 2 * c + h;
                uint8_t sc, mn;
                mf_get_scale_min_k4(j, x[i].scales, &sc, &mn);
                int32_t dj = 0;
                for (int l = 0; l < 32; l++) dj += ((x[i].qs[32 * c + l] >> (4 * h)) & 0x0F) * y[i].qs[32 * j + l];
                isum += sc * dj;
                msum += mn * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
            }
            s = fmaf((float)isum, d, s);
            sm = fmaf((float)msum, dm, sm);
        }
    }
    return s - sm;
}

/* A Q2_K / Q3_K block's 2-bit field of value e (quant.h: bits 2k of qs[32h + l], e = 128h + 32k + l). */
static inline int k23_low(const uint8_t *qs, int e) { return (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

/* llama.cpp's horizontal sum of eight float lanes */
static float hsum8_x86(const float *a) { return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7])); }

float mf_cpu_dot_q2_K_x86_ref(int64_t n, const void *w, const void *a) {
    const mf_block_q2_K *x = w;
    const mf_block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * mf_fp16_to_f32(x[i].d), dmin = -y[i].d * mf_fp16_to_f32(x[i].dmin);
        int32_t lane[8] = {0};
        for (int e = 0; e < MF_QK_K; e++) lane[e % 32 / 4] += (x[i].scales[e / 16] & 0xF) * k23_low(x[i].qs, e) * y[i].qs[e];
        for (int k = 0; k < 8; k++) {
            const int32_t prod = (x[i].scales[2 * k] >> 4) * y[i].bsums[2 * k] + (x[i].scales[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
            acc[k] = fmaf(dmin, (float)prod, acc[k]);
            acc[k] = fmaf(d, (float)lane[k], acc[k]);
        }
    }
    return hsum8_x86(acc);
}

float mf_cpu_dot_q3_K_x86_ref(int64_t n, const void *w, const void *a) {
    const mf_block_q3_K *x = w;
    const mf_block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = y[i].d * mf_fp16_to_f32(x[i].d);
        int32_t lane[8] = {0};
        for (int e = 0; e < MF_QK_K; e++) {
            const int q = k23_low(x[i].qs, e) - ((x[i].hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
            lane[e % 32 / 4] += mf_q3_K_scale(x[i].scales, e / 16) * q * y[i].qs[e];
        }
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    return hsum8_x86(acc);
}

float mf_cpu_dot_iq4_nl_x86_ref(int64_t n, const void *w, const void *a) {
    const mf_block_iq4_nl *x = w;
    const mf_block_q8_0 *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t isum = 0;
        for (int l = 0; l < 16; l++)
            isum += mf_iq4nl_values[x[i].qs[l] & 0xF] * y[i].qs[l] + mf_iq4nl_values[x[i].qs[l] >> 4] * y[i].qs[l + 16];
        s = fmaf((float)isum, mf_fp16_to_f32(x[i].d) * mf_fp16_to_f32(y[i].d), s);
    }
    return s;
}

float mf_cpu_dot_iq4_xs_x86_ref(int64_t n, const void *w, const void *a) {
    const mf_block_iq4_xs *x = w;
    const mf_block_q8_K *y = a;
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        int32_t lane[8] = {0};
        for (int b = 0; b < MF_QK_K / 32; b++) {
            const int ls = mf_iq4_xs_scale(&x[i], b);
            for (int l = 0; l < 32; l++) {
                const uint8_t q = x[i].qs[16 * b + l % 16];
                lane[l / 4] += ls * mf_iq4nl_values[l < 16 ? q & 0xF : q >> 4] * y[i].qs[32 * b + l];
            }
        }
        const float d = mf_fp16_to_f32(x[i].d) * y[i].d;
        for (int k = 0; k < 8; k++) acc[k] = fmaf(d, (float)lane[k], acc[k]);
    }
    return hsum8_x86(acc);
}

float mf_cpu_dot_q8_0_rp_ref(int64_t n, const void *w, const void *a) {
    const mf_block_q8_0 *x = w, *y = a;
    float s = 0.0f;
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t isum = 0;
        for (int l = 0; l < 32; l++) isum += x[i].qs[l] * y[i].qs[l];
        s = fmaf((float)isum, mf_fp16_to_f32(x[i].d) * mf_fp16_to_f32(y[i].d), s);
    }
    return s;
}

void mf_cpu_q4_0_aux(void *row, int64_t n) {
    const mf_block_q8_0 *b = row;
    int32_t *corr = (int32_t *)((uint8_t *)row + mf_cpu_q4_0_aux_offset(n));
    float *d = (float *)(corr + n / 32);
    for (int64_t i = 0; i < n / 32; i++) {
        int32_t sum = 0;
        for (int k = 0; k < 32; k++) sum += b[i].qs[k];
        corr[i] = -8 * sum;
        d[i] = mf_fp16_to_f32(b[i].d);
    }
}
