/* cpu.h: the CPU backend and its kernels. Every kernel has a plain reference twin (cpu_ref.c,
 * double accumulation, no activation quantization, direct formulas) that tests compare it with.
 *
 * Layouts (dimension legend: K input features, N output features, nt tokens, hd head dim,
 * nh query heads, nkv KV heads, C KV cells):
 *   activations x[t][k] (F32, row-major, token-major); weights W[o][k] in their own type;
 *   q[t][h][d]; K and V cache rows [c][kvh][d] (F16 or F32); attention output o[t][h][d]. */
#ifndef MF_CPU_H
#define MF_CPU_H

#include "cpu/pool.h"
#include "graph/graph.h"
#include "graph/kv.h"
#include "graph/sched.h"
#include "simd/simd.h"

/* Largest head dimension the kernels handle (per-head scratch lives on the stack); models with a
 * larger one are refused at load. */
#define MF_MAX_HEAD_DIM 512
/* Largest number of query heads sharing one KV head (n_head / n_head_kv). */
#define MF_MAX_GQA_GROUP 64

/* Which kernels a backend runs: the SIMD level (one this CPU supports) and whether quantized
 * matmuls, SwiGLU and F32-cache attention follow llama.cpp's float order (x86 with AVX2 or AVX-512,
 * MF_ORDER_EXACT) or the SIMD kernels' own, with the dispatch table of that pair (cpu_dispatch.h),
 * which names every kernel. Every kernel takes it; nothing is chosen process-wide. */
struct mf_cpu_kernels;
typedef struct mf_cpu_cfg {
    mf_simd_level level;
    bool ordered;
    const struct mf_cpu_kernels *k;
} mf_cpu_cfg;
/* The configuration for a context's instruction set and float order (AUTO, or a level this CPU
 * lacks, resolves as mf_isa_resolve does). */
mf_cpu_cfg mf_cpu_cfg_for(mf_isa isa, mf_float_order order);

/* The backend. n_threads >= 1. Its supports() accepts every op whose weight types have kernels. */
mf_status mf_cpu_backend_create(int n_threads, const mf_cpu_cfg *cfg, mf_backend **out);
/* The same on the threads of threads_of (a CPU backend: its pool is shared, n_threads ignored; the
 * two backends' runs take turns), or on n_threads threads of its own where threads_of is NULL. */
mf_status mf_cpu_backend_create_on(const mf_backend *threads_of, int n_threads, const mf_cpu_cfg *cfg,
                                   mf_backend **out);
int mf_cpu_backend_n_threads(const mf_backend *b);
/* Whether the CPU can multiply by (or gather rows of) weights of this type. */
bool mf_cpu_type_supported(mf_type t);

/* ---- kernels (the backend calls these; tests too) ---- */

/* Build the kernels' lookup tables (idempotent, thread-safe; the kernels call it themselves). */
void mf_cpu_init_tables(void);

/* The packed layout of w for this CPU's best kernels (MF_ISA_AUTO, MF_ORDER_EXACT; cpu_gemm.h):
 * its size in bytes (0: none for this weight), and writing it at dst (64-byte aligned), after
 * which w->packed and w->packed_for are set. Contexts of other kernels keep reading w->data. */
size_t mf_cpu_packed_size(const mf_weight *w);
void mf_cpu_pack(mf_weight *w, void *dst);

/* Scratch for mf_cpu_matmul on a pool of up to n_threads threads: the activations quantized to the
 * weight's vec_dot_type and, where a prefill GEMM serves nt rows, each thread's GEMM scratch. */
size_t mf_cpu_matmul_work_size(const mf_cpu_cfg *cfg, const mf_weight *w, int64_t nt, int n_threads);
/* y[t][o] = sum_k W[o][k] x[t][k] (+ b[o]) for t < nt, o < N. x {K, nt}, y {N, nt}. Activations are
 * quantized once per row into W's vec_dot_type (Q8_0/Q8_1/Q8_K/F16, as llama.cpp does), then one
 * dispatched dot per (o, t); threads split the output rows. For a given cfg, y's row t is bit for
 * bit the same for every nt and thread count: it depends on x's row t only. */
void mf_cpu_matmul(mf_pool *pool, const mf_cpu_cfg *cfg, const mf_weight *w, const mf_weight *b, const float *x,
                   float *y, int64_t nt, void *work);
/* The same, reusing the quantized activations where act_ready: work already holds x quantized to
 * w's activation type, as the previous matmul on the same x with the same activation type and row
 * length left it (the caller knows nothing ran in between). */
void mf_cpu_matmul_reusing(mf_pool *pool, const mf_cpu_cfg *cfg, const mf_weight *w, const mf_weight *b,
                           const float *x, float *y, int64_t nt, void *work, bool act_ready);
/* The format mf_cpu_matmul quantizes activations to for weight w (F32: none), and the bytes of each
 * quantized row in its work buffer for nt tokens under cfg (the row, and side data some dots read;
 * 0: none). A matmul may reuse the rows the previous one left only where both agree. */
mf_type mf_cpu_matmul_act_type(const mf_weight *w);
size_t mf_cpu_matmul_act_row(const mf_cpu_cfg *cfg, const mf_weight *w, int64_t nt);
void mf_cpu_matmul_ref(const mf_weight *w, const mf_weight *b, const float *x, float *y, int64_t nt);

/* out[t] = dequantized row ids[t] of table (ne[0] values each). */
void mf_cpu_get_rows(const mf_weight *table, const int32_t *ids, int64_t n, float *out);

/* One row: y = x / sqrt(mean(x^2) + eps) * w (w may be NULL). y may equal x. */
void mf_cpu_rms_norm_row(const float *x, const float *w, float *y, int64_t n, float eps);
/* The same for nrows consecutive rows of n values (x and y row-major). */
void mf_cpu_rms_norm_rows(const float *x, const float *w, float *y, int64_t nrows, int64_t n, float eps);
void mf_cpu_rms_norm_row_ref(const float *x, const float *w, float *y, int64_t n, float eps);

/* cos/sin of every rotated pair for one position: cs[2i] = cos(theta_i), cs[2i+1] = sin(theta_i),
 * i < n_dims/2, theta computed as llama.cpp does (theta_{i+1} = theta_i * base^(-2/n_dims)). */
void mf_cpu_rope_cache(const mf_rope_params *rp, int32_t pos, float *cs);
/* Rotate one head of hd values in place with a cache from mf_cpu_rope_cache. */
void mf_cpu_rope_head(const mf_cpu_cfg *cfg, const mf_rope_params *rp, const float *cs, float *x, int64_t hd);
#if defined(__x86_64__)
void mf_cpu_rope_head_avx2(const mf_rope_params *rp, const float *cs, float *x, int64_t hd); /* AVX2 + FMA */
#endif
/* Reference: theta_i = pos * freq_scale * base^(-2i/n_dims) in double, out of place. */
void mf_cpu_rope_head_ref(const mf_rope_params *rp, int32_t pos, const float *x, float *y, int64_t hd);

void mf_cpu_silu(const float *x, float *y, int64_t n);
void mf_cpu_swiglu(const mf_cpu_cfg *cfg, const float *a, const float *b, float *y, int64_t n);

/* Store token rows of K and V ({hd * nkv} floats each, per token) into layer's cache cells
 * (cells[t] < 0: skipped), converting to the cache type. */
void mf_cpu_kv_store_row(mf_kv_cache *kv, int32_t layer, int32_t cell, const float *k, const float *v);

/* Attention for the (token, head) pairs u = t * nh + h in [u0, u1) of q {hd, nh, nt}: each query
 * head h uses KV head h / (nh / nkv) and sees the kv->view.n[t] first cells of kv->view.list[t]
 * (its sequence's cells at positions <= its own, in position order, kv.h); tokens that see no cell
 * produce zeros. scores: scratch of g * (kv->n_cells + head_dim) floats, g = MF_MIN(n_head /
 * n_head_kv, u1 - u0) (used by the F32 ordered path). An F32 cache with the ordered kernels on
 * follows llama.cpp's float order; otherwise a blockwise kernel with an online softmax in float
 * (cpu_attn.h), within ~5e-6 of the reference in units of V. A token's result depends only on its
 * query and its list: any split of the units, and any other tokens or sequences in the batch or
 * the cache, give the same bits. */
void mf_cpu_attention(const mf_cpu_cfg *cfg, const mf_attn_params *ap, const mf_kv_cache *kv, const float *q,
                      float *out, int64_t u0, int64_t u1, float *scores);
void mf_cpu_attention_ref(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int64_t nt);

#endif /* MF_CPU_H */
