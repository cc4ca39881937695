/* quant_legacy.c: reference dequantize and quantize for the float formats (F32, F16, BF16) and the
 * 32-value block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1), with the exact arithmetic of
 * llama.cpp's reference quantizers so that a file we quantize matches one llama-quantize writes.
 *
 * Nibble order in every 32-value block: byte j (0..15) holds element j in its low nibble and element
 * j + 16 in its high nibble; for the 5-bit formats bit j of the 32-bit qh is bit 4 of element j. */
#include "quant/quant_ref.h"
#include "core/core.h"

#include <float.h>
#include <math.h>

/* ---- float formats ---- */

void mf_quant_dequant_f32(const void *src, float *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void mf_quant_dequant_f16(const void *src, float *dst, int64_t n) {
    const mf_fp16 *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = mf_fp16_to_f32(s[i]);
}

void mf_quant_dequant_bf16(const void *src, float *dst, int64_t n) {
    const mf_bf16 *s = src;
    for (int64_t i = 0; i < n; i++) dst[i] = mf_bf16_to_f32(s[i]);
}

void mf_quant_quantize_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void mf_quant_quantize_f16(const float *src, void *dst, int64_t n) {
    mf_fp16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = mf_f32_to_fp16(src[i]);
}

void mf_quant_quantize_bf16(const float *src, void *dst, int64_t n) {
    mf_bf16 *d = dst;
    for (int64_t i = 0; i < n; i++) d[i] = mf_f32_to_bf16(src[i]);
}

/* ---- helpers ---- */

/* The element of largest magnitude, signed (the first one on ties), and its magnitude. */
static float signed_absmax(const float *x, int n, float *amax_out) {
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    *amax_out = amax;
    return max;
}

static void min_max(const float *x, int n, float *mn, float *mx) {
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

static uint32_t load_u32(const uint8_t b[4]) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void store_u32(uint8_t b[4], uint32_t v) {
    b[0] = (uint8_t)v;
    b[1] = (uint8_t)(v >> 8);
    b[2] = (uint8_t)(v >> 16);
    b[3] = (uint8_t)(v >> 24);
}

/* Truncate toward zero then clamp to [0, hi]: the reference quantizers' `MIN(hi, (int8_t)(v))`
 * where v >= 0 is already rounded by +0.5. */
static inline uint8_t trunc_clamp(float v, int hi) {
    int q = v > 0.f ? (int)v : 0; /* v <= 0 or NaN -> 0 */
    return (uint8_t)(q > hi ? hi : q);
}

/* ---- Q4_0: x = (q - 8) * d, d = max / -8 so the largest magnitude maps to q = 0 exactly ---- */

void mf_quant_dequant_q4_0(const void *src, float *dst, int64_t n) {
    const mf_block_q4_0 *b = src;
    for (int64_t i = 0; i < n / MF_QK4_0; i++, dst += MF_QK4_0) {
        const float d = mf_fp16_to_f32(b[i].d);
        for (int j = 0; j < 16; j++) {
            dst[j] = ((b[i].qs[j] & 0xF) - 8) * d;
            dst[j + 16] = ((b[i].qs[j] >> 4) - 8) * d;
        }
    }
}

void mf_quant_quantize_q4_0(const float *src, void *dst, int64_t n) {
    mf_block_q4_0 *b = dst;
    for (int64_t i = 0; i < n / MF_QK4_0; i++, src += MF_QK4_0) {
        float amax;
        const float max = signed_absmax(src, MF_QK4_0, &amax);
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = mf_f32_to_fp16(d);
        for (int j = 0; j < 16; j++) {
            const uint8_t q0 = trunc_clamp(src[j] * id + 8.5f, 15);
            const uint8_t q1 = trunc_clamp(src[j + 16] * id + 8.5f, 15);
            b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* ---- Q4_1: x = q * d + m over [min, max] ---- */

void mf_quant_dequant_q4_1(const void *src, float *dst, int64_t n) {
    const mf_block_q4_1 *b = src;
    for (int64_t i = 0; i < n / MF_QK4_1; i++, dst += MF_QK4_1) {
        const float d = mf_fp16_to_f32(b[i].d), m = mf_fp16_to_f32(b[i].m);
        for (int j = 0; j < 16; j++) {
            dst[j] = (b[i].qs[j] & 0xF) * d + m;
            dst[j + 16] = (b[i].qs[j] >> 4) * d + m;
        }
    }
}

void mf_quant_quantize_q4_1(const float *src, void *dst, int64_t n) {
    mf_block_q4_1 *b = dst;
    for (int64_t i = 0; i < n / MF_QK4_1; i++, src += MF_QK4_1) {
        float mn, mx;
        min_max(src, MF_QK4_1, &mn, &mx);
        const float d = (mx - mn) / 15;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = mf_f32_to_fp16(d);
        b[i].m = mf_f32_to_fp16(mn);
        for (int j = 0; j < 16; j++) {
            const uint8_t q0 = trunc_clamp((src[j] - mn) * id + 0.5f, 15);
            const uint8_t q1 = trunc_clamp((src[j + 16] - mn) * id + 0.5f, 15);
            b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* ---- Q5_0: x = (q - 16) * d, d = max / -16 ---- */

void mf_quant_dequant_q5_0(const void *src, float *dst, int64_t n) {
    const mf_block_q5_0 *b = src;
    for (int64_t i = 0; i < n / MF_QK5_0; i++, dst += MF_QK5_0) {
        const float d = mf_fp16_to_f32(b[i].d);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            const int q0 = (b[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = (q0 - 16) * d;
            dst[j + 16] = (q1 - 16) * d;
        }
    }
}

void mf_quant_quantize_q5_0(const float *src, void *dst, int64_t n) {
    mf_block_q5_0 *b = dst;
    for (int64_t i = 0; i < n / MF_QK5_0; i++, src += MF_QK5_0) {
        float amax;
        const float max = signed_absmax(src, MF_QK5_0, &amax);
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = mf_f32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t q0 = trunc_clamp(src[j] * id + 16.5f, 31);
            const uint8_t q1 = trunc_clamp(src[j + 16] * id + 16.5f, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_u32(b[i].qh, qh);
    }
}

/* ---- Q5_1: x = q * d + m ---- */

void mf_quant_dequant_q5_1(const void *src, float *dst, int64_t n) {
    const mf_block_q5_1 *b = src;
    for (int64_t i = 0; i < n / MF_QK5_1; i++, dst += MF_QK5_1) {
        const float d = mf_fp16_to_f32(b[i].d), m = mf_fp16_to_f32(b[i].m);
        const uint32_t qh = load_u32(b[i].qh);
        for (int j = 0; j < 16; j++) {
            const int q0 = (b[i].qs[j] & 0xF) | (int)((qh >> j) & 1) << 4;
            const int q1 = (b[i].qs[j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = q0 * d + m;
            dst[j + 16] = q1 * d + m;
        }
    }
}

void mf_quant_quantize_q5_1(const float *src, void *dst, int64_t n) {
    mf_block_q5_1 *b = dst;
    for (int64_t i = 0; i < n / MF_QK5_1; i++, src += MF_QK5_1) {
        float mn, mx;
        min_max(src, MF_QK5_1, &mn, &mx);
        const float d = (mx - mn) / 31;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = mf_f32_to_fp16(d);
        b[i].m = mf_f32_to_fp16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < 16; j++) {
            const uint8_t q0 = trunc_clamp((src[j] - mn) * id + 0.5f, 31);
            const uint8_t q1 = trunc_clamp((src[j + 16] - mn) * id + 0.5f, 31);
            b[i].qs[j] = (uint8_t)((q0 & 0xF) | (q1 & 0xF) << 4);
            qh |= (uint32_t)(q0 >> 4) << j | (uint32_t)(q1 >> 4) << (j + 16);
        }
        store_u32(b[i].qh, qh);
    }
}

/* ---- Q8_0 and Q8_1: x = q * d, d = amax / 127 ---- */

void mf_quant_dequant_q8_0(const void *src, float *dst, int64_t n) {
    const mf_block_q8_0 *b = src;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, dst += MF_QK8_0) {
        const float d = mf_fp16_to_f32(b[i].d);
        for (int j = 0; j < MF_QK8_0; j++) dst[j] = b[i].qs[j] * d;
    }
}

void mf_quant_dequant_q8_1(const void *src, float *dst, int64_t n) {
    const mf_block_q8_1 *b = src;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, dst += MF_QK8_1) {
        const float d = mf_fp16_to_f32(b[i].d);
        for (int j = 0; j < MF_QK8_1; j++) dst[j] = b[i].qs[j] * d;
    }
}

static float absmax(const float *x, int n) {
    float amax = 0.f;
    for (int j = 0; j < n; j++) amax = MF_MAX(amax, fabsf(x[j]));
    return amax;
}

/* The file quantizer: llama.cpp's quantize_row_q8_0_ref (multiply by 1/d, round half away from 0). */
void mf_quant_quantize_q8_0_weight(const float *src, void *dst, int64_t n) {
    mf_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, src += MF_QK8_0) {
        const float d = absmax(src, MF_QK8_0) / 127;
        const float id = d ? 1.0f / d : 0.0f;
        b[i].d = mf_f32_to_fp16(d);
        for (int j = 0; j < MF_QK8_0; j++) {
            const float r = roundf(src[j] * id); /* |r| <= 127 for finite input; NaN -> 0 */
            b[i].qs[j] = (int8_t)(r >= 127.f ? 127 : r <= -128.f ? -128 : r == r ? (int)r : 0);
        }
    }
}

/* Activation quantization as llama.cpp's x86 CPU backend does it (quantize_row_q8_0/_q8_1 with AVX2,
 * which every AVX2 or AVX-512 build uses): the multiplier is 127 / amax (not 1 / d), rounding is to
 * nearest with ties to even, and the int32 -> int8 pack saturates. Returns sum(q) for Q8_1. */
static int quantize_act_block(const float *x, int8_t *q, float *d_out) {
    const float amax = absmax(x, 32);
    const float id = amax != 0.0f ? 127.f / amax : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; j++) {
        int v = mf_quant_nearest_int(x[j] * id);
        v = v > 127 ? 127 : v < -128 ? -128 : v;
        q[j] = (int8_t)v;
        sum += v;
    }
    *d_out = amax / 127.f;
    return sum;
}

void mf_quant_quantize_q8_0_act(const float *src, void *dst, int64_t n) {
    mf_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, src += MF_QK8_0) {
        float d;
        quantize_act_block(src, b[i].qs, &d);
        b[i].d = mf_f32_to_fp16(d);
    }
}

void mf_quant_quantize_q8_1_act(const float *src, void *dst, int64_t n) {
    mf_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, src += MF_QK8_1) {
        float d;
        const int sum = quantize_act_block(src, b[i].qs, &d);
        b[i].d = mf_f32_to_fp16(d);
        b[i].s = mf_f32_to_fp16(d * (float)sum); /* s = d * sum(q), with the f32 d, not the fp16 one */
    }
}
