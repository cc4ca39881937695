/* cpu_dot_order.h: dot products that repeat llama.cpp's float operation order on x86 (see
 * cpu_dot_order_avx2.c), so matmul outputs agree with it bit for bit. */
#ifndef MF_CPU_DOT_ORDER_H
#define MF_CPU_DOT_ORDER_H

#include "graph/graph.h"
#include "quant/quant.h"

/* The ordered dot of weight type t against its vec_dot_type activations, or NULL where there is
 * none (no such kernel, not x86, the CPU lacks AVX2/FMA/F16C, or MINFER_ISA=scalar). Same
 * signature and inputs as mf_simd_vec_dot(t). */
mf_vec_dot_fn mf_cpu_ordered_dot(mf_type t);
/* The ordered dot for this weight: llama.cpp repacks every Q4_0 and Q4_K matmul weight with a
 * multiple of 8 rows (a tied lm_head too: it loads a second copy), and those kernels sum in another order;
 * grouped selects its GEMM order (llama.cpp runs the first n - n % 4 of n > 3 token rows through
 * its GEMM, the rest through its GEMV). */
mf_vec_dot_fn mf_cpu_ordered_dot_for(const mf_weight *w, bool grouped);

#if defined(__x86_64__)
mf_vec_dot_fn mf_cpu_ordered_dot_avx2(mf_type t); /* AVX2 + FMA + F16C required */
/* The order of llama.cpp's repacked (8-row interleaved) kernels: Q4_0 and Q4_K only. grouped: the
 * GEMM it runs on tokens in groups of four, otherwise its GEMV (they differ for Q4_K). */
mf_vec_dot_fn mf_cpu_repacked_dot_avx2(mf_type t, bool grouped);
/* SwiGLU a / (1 + exp(-a)) * b with llama.cpp's vector exp. */
void mf_cpu_swiglu_ord_avx2(const float *a, const float *b, float *y, int64_t n);
/* F32 dot in llama.cpp's order (4 x 16 lanes, then its reduction). */
float mf_cpu_dot_f32_ord_avx2(const float *x, const float *y, int64_t n);
/* x[c] = exp(x[c] - mx) for c < n; the double sum of per-16 float sums. */
double mf_cpu_softmax_exp_ord_avx2(float *x, int64_t n, float mx);
/* out[hd] = sum over c < nc of p[c] * v[c * v_stride + d], 16 lanes by cell; acc: 16 * hd floats. */
void mf_cpu_pv_ord_avx2(const float *p, int64_t nc, const float *v, size_t v_stride, int64_t hd, float *acc,
                        float *out);
#endif

/* Whether the ordered float kernels above are in use (x86 with AVX2 and not MINFER_ISA=scalar). */
bool mf_cpu_ordered_float(void);

#endif /* MF_CPU_DOT_ORDER_H */
