/* cpu_dot_order.h: dot products that repeat llama.cpp's float operation order on x86 (see
 * cpu_dot_order_avx2.c), so matmul outputs agree with it bit for bit. */
#ifndef MF_CPU_DOT_ORDER_H
#define MF_CPU_DOT_ORDER_H

#include "cpu/cpu.h"
#include "graph/graph.h"
#include "quant/quant.h"

#include <string.h>

/* An ordered dot, for one weight row or four (rows w + r * w_stride; out[r]), against one
 * activation row of the weight type's vec_dot_type, as the activation quantizers write it. */
typedef void (*mf_cpu_dot4_fn)(int64_t n, const void *w, size_t w_stride, const void *a, float *out);
/* dot8: eight weight rows against one activation row, the same per-output float steps as dot (the
 * rows are interleaved in registers for instruction-level parallelism); NULL where there is none. */
/* dot8n: eight weight rows against nt (1..4) activation rows (a + t * as; out + t * os), each output
 * with dot's float steps; the weight blocks are loaded and unpacked once for all nt tokens (a small
 * batch: server slots decoding together, a speculative draft verified). Where dot8n_aux is set the
 * rows carry their side data (mf_cpu_q4_0_aux) and as leaves room for it. */
typedef void (*mf_cpu_dot8n_fn)(int64_t n, const void *w, size_t ws, const void *a, size_t as, int nt, float *out,
                                size_t os);
/* Defines the mf_cpu_dot8n_fn `name` over an always-inline body called as CALL(k) with a constant
 * token count k (so that its loops over tokens unroll); the body sees n w ws a as out os. */
#define MF_CPU_DOT8N_BODIES(name, CALL)                                                                                \
    static void name(int64_t n, const void *w, size_t ws, const void *a, size_t as, int nt, float *out, size_t os) {  \
        switch (nt) {                                                                                                  \
        case 1: CALL(1); break;                                                                                        \
        case 2: CALL(2); break;                                                                                        \
        case 3: CALL(3); break;                                                                                        \
        default: CALL(4); break;                                                                                       \
        }                                                                                                              \
    }
typedef struct mf_cpu_ordered_dots {
    mf_vec_dot_fn dot;
    mf_cpu_dot4_fn dot4;
    mf_cpu_dot4_fn dot8;
    mf_cpu_dot8n_fn dot8n; /* NULL where there is none */
    int dot8n_tokens;      /* batches of up to this many tokens take dot8n rather than a GEMM (measured) */
    bool dot8n_aux;        /* dot8n reads each activation row's side data (Q4_0: mf_cpu_q4_0_aux) */
    mf_cpu_dot8n_fn dot16n; /* sixteen rows, as dot8n (its side data too); NULL where there is none */
    /* one token takes dot8n too, with its row's side data formed once per matmul rather than once
     * per block of each eight weight rows (where dot8n_aux is set) */
    bool dot8n_one;
} mf_cpu_ordered_dots;

/* The side data of a Q8_0 activation row of n values for the Q4_0 several-token dots, at
 * mf_cpu_q4_0_aux_offset(n) bytes from the row's start (after its n / 32 blocks): per block the
 * correction -8 * sum(quants) (int32; sum((q - 8) * a) = sum(q * a) - 8 * sum(a)), then per block
 * its scale as a float; mf_cpu_q4_0_aux_bytes(n) bytes. Each token's is computed once per matmul
 * rather than once per eight weight rows. */
static inline size_t mf_cpu_q4_0_aux_offset(int64_t n) { return (mf_row_size(MF_TYPE_Q8_0, n) + 3) & ~(size_t)3; }
static inline size_t mf_cpu_q4_0_aux_bytes(int64_t n) { return (size_t)(n / 32) * 8; }
void mf_cpu_q4_0_aux(void *row, int64_t n);
/* Block i's correction and float scale from a row's side data at aux (the row plus
 * mf_cpu_q4_0_aux_offset(n), computed once by the caller), for rows of nb = n / 32 blocks. */
static inline void mf_cpu_q4_0_aux_get(const uint8_t *aux, int64_t nb, int64_t i, int32_t *corr, float *d) {
    memcpy(corr, aux + 4 * (size_t)i, 4);
    memcpy(d, aux + 4 * (size_t)(nb + i), 4);
}

/* Which of llama.cpp's kernels to follow: its plain dots, or (Q4_0 and Q4_K only) its repacked
 * 8-row kernels. For Q4_K, llama.cpp's repacked kernels have two orders: its GEMM, which a prefill
 * runs for the token rows in groups of four (one float step per 64 values, a pair of sub-blocks),
 * and its GEMV (one step per super-block), for the last n % 4 rows and for decode. minfer takes the
 * GEMM's per-output order for every token, alone or in a batch of any size (one order per weight:
 * batch invariance), so its prefills match llama.cpp's but for the remainder rows. */
enum { MF_ORDER_PLAIN, MF_ORDER_REPACKED };
/* Q8_0 has no repacked kernel in llama.cpp on x86; its REPACKED variant is minfer's one-chain order
 * (mf_cpu_dot_q8_0_rp_ref), which the AVX2 level runs for every Q8_0 weight under MF_ORDER_FAST:
 * llama.cpp's eight float lanes per output cost a conversion and an fma per 32 products, which on
 * 256-bit units held the GEMM to about llama.cpp's own speed (mf_cpu_order_variant). */

/* The ordered dots for this weight under cfg (its entry in the dispatch table, cpu_dispatch.h), or
 * all NULL where there are none (no such kernel, not x86, or cfg is not ordered: the scalar level or
 * MF_ORDER_FAST). llama.cpp repacks every Q4_0 and Q4_K matmul weight with a multiple of 8 rows (a
 * tied lm_head too: it loads a second copy). One order per weight: every token, alone or in a
 * batch of any size, gets the same float steps. */
mf_cpu_ordered_dots mf_cpu_ordered_dots_for(const mf_cpu_cfg *cfg, const mf_weight *w);

/* Plain scalar twin of the repacked Q4_K order (cpu_dot_order_ref.c; any CPU), bit for bit the
 * ordered dots' result: n values of a Q4_K row against a Q8_K row. */
float mf_cpu_dot_q4_K_rp_ref(int64_t n, const void *w, const void *a);
/* Plain scalar twin of Q8_0's one-chain order (MF_ORDER_REPACKED for Q8_0, the AVX2 level's fast
 * order: mf_cpu_order_variant): per block the exact integer sum of the 32 products, then
 * s = fma(sum, d_w * d_a, s), the float steps of the repacked Q4_0 order. n values of a Q8_0 row
 * against a Q8_0 row. */
float mf_cpu_dot_q8_0_rp_ref(int64_t n, const void *w, const void *a);
/* Plain scalar twins of llama.cpp's x86 Q2_K and Q3_K dots (its AVX2 ggml_vec_dot_q2_K_q8_K and
 * q3_K_q8_K), which the x86 levels' kernels for these types follow bit for bit (dot_k_avx2.c):
 * eight int32 lanes per super-block, lane k the scaled products of values 32c + 4k .. 32c + 4k + 3
 * of every chunk c of 32, then acc_k = fma(d_w * d_a, lane_k, acc_k) (Q2_K after acc_k =
 * fma(-d_a * dmin, m_2k bsums_2k + m_2k+1 bsums_2k+1, acc_k)), and at the end
 * ((acc0 + acc4) + (acc2 + acc6)) + ((acc1 + acc5) + (acc3 + acc7)). The portable reference
 * (mf_quant_dot_q2_K_q8_K, q3_K) is llama.cpp's generic order. n values of a row against a Q8_K row. */
float mf_cpu_dot_q2_K_x86_ref(int64_t n, const void *w, const void *a);
float mf_cpu_dot_q3_K_x86_ref(int64_t n, const void *w, const void *a);
/* Plain scalar twins of llama.cpp's x86 orders of IQ4_NL (its repacked 8x8 GEMV/GEMM on AVX2: per
 * block s = fma(exact sum of the 32 products, d_w * d_a, s); n values against a Q8_0 row) and IQ4_XS
 * (its AVX2 ggml_vec_dot_iq4_xs_q8_K: the eight-lane shape of the Q2_K / Q3_K twins above, lane k the
 * values 4k .. 4k + 3 of each sub-block of 32 times its scale; against a Q8_K row), which the x86
 * levels' kernels follow bit for bit (dot_iq4_avx2.c). */
float mf_cpu_dot_iq4_nl_x86_ref(int64_t n, const void *w, const void *a);
float mf_cpu_dot_iq4_xs_x86_ref(int64_t n, const void *w, const void *a);

#if defined(__x86_64__)
/* What the x86 files offer the dispatch table (cpu_dispatch.c decides which serves where). The
 * AVX2 set (AVX2 + FMA + F16C required). */
mf_cpu_ordered_dots mf_cpu_ordered_dots_avx2(mf_type t, int variant);
/* IQ4_NL's ordered dots (dot_iq4_avx2.c: one row, four, eight), in mf_cpu_dot_iq4_nl_x86_ref's order */
mf_cpu_ordered_dots mf_cpu_ordered_dots_iq4_nl_avx2(void);
/* A level's ordered dots for (t, variant): the AVX2 set, with the AVX-512 one-row (plain order) and
 * eight-row dots in their place at the AVX-512 level (bit-identical either way). */
mf_cpu_ordered_dots mf_cpu_ordered_dots_at(mf_simd_level level, mf_type t, int variant);
/* Eight-row dots with AVX-512 VNNI, bit-identical to the AVX2 one-row dots of the same variant;
 * NULL where there is none. */
mf_cpu_dot4_fn mf_cpu_ordered_dot8_avx512(mf_type t, int variant);
/* Several-token eight-row dots with AVX-512 VNNI (Q4_0 repacked, Q8_0, Q5_0, Q4_1, Q5_1), bit-identical to the
 * AVX2 one-row dots of the same variant; NULL for other types. */
mf_cpu_dot8n_fn mf_cpu_ordered_dot8n_avx512(mf_type t, int variant);
/* Several-token sixteen-row dots with AVX-512 VNNI (Q4_0 repacked), bit-identical to the AVX2
 * one-row dots, reading the rows' side data as dot8n; NULL for other types. */
mf_cpu_dot8n_fn mf_cpu_ordered_dot16n_avx512(mf_type t, int variant);
/* Faster one-row plain dots of Q4_0 Q4_1 Q5_0 Q5_1 Q8_0, bit-identical to the AVX2 ones (AVX-512
 * F/BW/DQ/VL + VNNI required); NULL for other types. */
mf_vec_dot_fn mf_cpu_ordered_dot_avx512(mf_type t);
/* SwiGLU a / (1 + exp(-a)) * b with llama.cpp's vector exp: one lane at a time (the reference,
 * AVX2 + FMA), 8 lanes (AVX2) or 16 (AVX-512), with bit-identical results. */
void mf_cpu_swiglu_ord_ref(const float *a, const float *b, float *y, int64_t n);
/* That exp, one value (the reference of the vector versions). */
float mf_cpu_exp_ord_ref(float x);
void mf_cpu_swiglu_ord_avx2(const float *a, const float *b, float *y, int64_t n);
void mf_cpu_swiglu_ord_avx512(const float *a, const float *b, float *y, int64_t n);
/* F32 dot in llama.cpp's order (4 x 16 lanes, then its reduction). */
float mf_cpu_dot_f32_ord_avx2(const float *x, const float *y, int64_t n);
/* x[c] = exp(x[c] - mx) for c < n; the double sum of per-16 float sums. */
double mf_cpu_softmax_exp_ord_avx2(float *x, int64_t n, float mx);
/* out[hd] = sum over c < nc of p[c] * v[cells[c] * v_stride + d], 16 lanes by list entry; acc: 16 * hd floats. */
void mf_cpu_pv_ord_avx2(const float *p, int64_t nc, const float *v, const int32_t *cells, size_t v_stride, int64_t hd,
                        float *acc, float *out);
#endif

#endif /* MF_CPU_DOT_ORDER_H */
