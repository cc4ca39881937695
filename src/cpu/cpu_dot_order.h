/* cpu_dot_order.h: dot products that repeat llama.cpp's float operation order on x86 (see
 * cpu_dot_order_avx2.c), so matmul outputs agree with it bit for bit. */
#ifndef MF_CPU_DOT_ORDER_H
#define MF_CPU_DOT_ORDER_H

#include "quant/quant.h"

/* The ordered dot of weight type t against its vec_dot_type activations, or NULL where there is
 * none (no such kernel, not x86, the CPU lacks AVX2/FMA/F16C, or MINFER_ISA=scalar). Same
 * signature and inputs as mf_simd_vec_dot(t). */
mf_vec_dot_fn mf_cpu_ordered_dot(mf_type t);

#if defined(__x86_64__)
mf_vec_dot_fn mf_cpu_ordered_dot_avx2(mf_type t); /* AVX2 + FMA + F16C required */
#endif

#endif /* MF_CPU_DOT_ORDER_H */
