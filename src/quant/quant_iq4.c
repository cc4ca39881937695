/* quant_iq4.c: reference dequantize and dot products for the non-linear 4-bit formats IQ4_NL (blocks
 * of 32, . Q8_0) and IQ4_XS (super-blocks of 256 with 6-bit sub-block scales, . Q8_K), with the integer
 * sums and float order of llama.cpp's generic kernels. minfer reads these formats but does not
 * write them (their quantizers need an importance-matrix search). Layouts in quant.h. */
#include "quant/quant_ref.h"
#include "core/core.h"

void mf_quant_dequant_iq4_nl(const void *src, float *dst, int64_t n) {
    const mf_block_iq4_nl *b = src;
    for (int64_t i = 0; i < n / 32; i++, dst += 32) {
        const float d = mf_fp16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * mf_iq4nl_values[b[i].qs[j] & 0xF];
            dst[j + 16] = d * mf_iq4nl_values[b[i].qs[j] >> 4];
        }
    }
}

void mf_quant_dequant_iq4_xs(const void *src, float *dst, int64_t n) {
    const mf_block_iq4_xs *b = src;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d = mf_fp16_to_f32(b[i].d);
        for (int s = 0; s < 8; s++, dst += 32) {
            const float dl = d * mf_iq4_xs_scale(&b[i], s);
            const uint8_t *qs = b[i].qs + 16 * s;
            for (int j = 0; j < 16; j++) {
                dst[j] = dl * mf_iq4nl_values[qs[j] & 0xF];
                dst[j + 16] = dl * mf_iq4nl_values[qs[j] >> 4];
            }
        }
    }
}

/* one sub-block of 32: sum of q8 * level */
static inline int iq4_block_sum(const uint8_t qs[16], const int8_t q8[32]) {
    int sumi1 = 0, sumi2 = 0;
    for (int j = 0; j < 16; j++) {
        sumi1 += q8[j] * mf_iq4nl_values[qs[j] & 0xF];
        sumi2 += q8[j + 16] * mf_iq4nl_values[qs[j] >> 4];
    }
    return sumi1 + sumi2;
}

float mf_quant_dot_iq4_nl_q8_0(int64_t n, const void *w, const void *a) {
    const mf_block_iq4_nl *x = w;
    const mf_block_q8_0 *y = a;
    float sumf = 0;
    for (int64_t ib = 0; ib < n / 32; ib++) {
        const float d = mf_fp16_to_f32(y[ib].d) * mf_fp16_to_f32(x[ib].d);
        sumf += d * iq4_block_sum(x[ib].qs, y[ib].qs);
    }
    return sumf;
}

float mf_quant_dot_iq4_xs_q8_K(int64_t n, const void *w, const void *a) {
    const mf_block_iq4_xs *x = w;
    const mf_block_q8_K *y = a;
    float sumf = 0;
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const float d4d8 = mf_fp16_to_f32(x[i].d) * y[i].d;
        for (int s = 0; s < 8; s++) {
            const float dl = d4d8 * mf_iq4_xs_scale(&x[i], s);
            sumf += dl * iq4_block_sum(x[i].qs + 16 * s, y[i].qs + 32 * s);
        }
    }
    return sumf;
}
