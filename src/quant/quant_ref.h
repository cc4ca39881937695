/* quant_ref.h: the scalar reference row functions behind the type-traits table (types.c), shared by
 * quant_legacy.c (32-value blocks, float formats), quant_k.c (256-value super-blocks) and vec_dot.c.
 * Every function takes n values (a multiple of the type's block size); see quant.h for the types. */
#ifndef MF_QUANT_REF_H
#define MF_QUANT_REF_H

#include "quant/quant.h"

#include <string.h>

/* Round to nearest, ties to even, for |x| <= 2^22: adding 1.5 * 2^23 leaves the rounded integer in
 * the low mantissa bits. This is the rounding every K-quant and Q8_K reference in llama.cpp uses, so
 * files and activations we produce are bit-identical to theirs. */
static inline int mf_quant_nearest_int(float x) {
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* Asymmetric (scale, min) fit of n values to levels 0..nmax, minimizing the weighted squared (or,
 * with use_mad, absolute) error: start from the min/max grid, then try nstep + 1 grid scalings
 * (rmin + rdelta * is + nmax) / range, solving the 2x2 least-squares system for scale and min at each.
 * L receives the levels, *the_min the (positive) offset: x ~ scale * L - *the_min. Laux: n scratch
 * bytes. llama.cpp's make_qkx2_quants, float operation order included. */
float mf_quant_fit_scale_min(int n, int nmax, const float *x, const float *w, uint8_t *L, float *the_min,
                             uint8_t *Laux, float rmin, float rdelta, int nstep, bool use_mad);

/* dequantize: blocks -> floats */
void mf_quant_dequant_f32(const void *src, float *dst, int64_t n);
void mf_quant_dequant_f16(const void *src, float *dst, int64_t n);
void mf_quant_dequant_bf16(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q4_0(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q4_1(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q5_0(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q5_1(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q8_0(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q8_1(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q2_K(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q3_K(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q4_K(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q5_K(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q6_K(const void *src, float *dst, int64_t n);
void mf_quant_dequant_q8_K(const void *src, float *dst, int64_t n);
void mf_quant_dequant_iq4_nl(const void *src, float *dst, int64_t n);
void mf_quant_dequant_iq4_xs(const void *src, float *dst, int64_t n);

/* quantize: floats -> blocks. Weight formats use llama.cpp's reference (file) quantizers. */
void mf_quant_quantize_f32(const float *src, void *dst, int64_t n);
void mf_quant_quantize_f16(const float *src, void *dst, int64_t n);
void mf_quant_quantize_bf16(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q4_0(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q4_1(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q5_0(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q5_1(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q2_K(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q3_K(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q4_K(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q5_K(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q6_K(const float *src, void *dst, int64_t n);
/* Q8_0 as a weight (file) format: d = amax/127, q = round-half-away(x * (1/d)). */
void mf_quant_quantize_q8_0_weight(const float *src, void *dst, int64_t n);
/* Activation quantizers (see quant.h: mf_quant_act_* semantics). */
void mf_quant_quantize_q8_0_act(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q8_1_act(const float *src, void *dst, int64_t n);
void mf_quant_quantize_q8_K_act(const float *src, void *dst, int64_t n);

/* dot products: weight row . activation row */
float mf_quant_dot_f32_f32(int64_t n, const void *w, const void *a);
float mf_quant_dot_f16_f16(int64_t n, const void *w, const void *a);
float mf_quant_dot_bf16_bf16(int64_t n, const void *w, const void *a);
float mf_quant_dot_q4_0_q8_0(int64_t n, const void *w, const void *a);
float mf_quant_dot_q4_1_q8_1(int64_t n, const void *w, const void *a);
float mf_quant_dot_q5_0_q8_0(int64_t n, const void *w, const void *a);
float mf_quant_dot_q5_1_q8_1(int64_t n, const void *w, const void *a);
float mf_quant_dot_q8_0_q8_0(int64_t n, const void *w, const void *a);
float mf_quant_dot_q2_K_q8_K(int64_t n, const void *w, const void *a);
float mf_quant_dot_q3_K_q8_K(int64_t n, const void *w, const void *a);
float mf_quant_dot_q4_K_q8_K(int64_t n, const void *w, const void *a);
float mf_quant_dot_q5_K_q8_K(int64_t n, const void *w, const void *a);
float mf_quant_dot_q6_K_q8_K(int64_t n, const void *w, const void *a);
float mf_quant_dot_iq4_nl_q8_0(int64_t n, const void *w, const void *a);
float mf_quant_dot_iq4_xs_q8_K(int64_t n, const void *w, const void *a);

#endif /* MF_QUANT_REF_H */
