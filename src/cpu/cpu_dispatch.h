/* cpu_dispatch.h: the CPU backend's one dispatch table. For each configuration (SIMD level and
 * float order, mf_cpu_cfg) one table names every kernel the backend runs: per weight type the
 * activation quantizer, the one-row dot, the multi-row dots and the prefill GEMM; SwiGLU, the RoPE
 * rotation and the attention kernels. cpu_dispatch.c is the only place that decides which ISA's
 * kernel serves what (the per-ISA files only offer their kernels); a table is built once, when the
 * first context (or test) asks for its configuration, and the kernels read their entries from it
 * and decide nothing at run time. */
#ifndef MF_CPU_DISPATCH_H
#define MF_CPU_DISPATCH_H

#include "cpu/cpu.h"
#include "cpu/cpu_attn.h"
#include "cpu/cpu_dot_order.h"
#include "cpu/cpu_gemm.h"

/* The matmul kernels of one weight type (and row count class, see mf_cpu_mm_kernels_for). */
typedef struct mf_cpu_mm_kernels {
    mf_type act;           /* the activation format (MF_TYPE_F32: the rows are used as they are) */
    mf_quantize_fn quant;  /* F32 -> act; NULL when act is F32 */
    mf_vec_dot_fn dot;     /* one weight row against one activation row; NULL: no kernel for the type */
    mf_gemm_fn tile;       /* the SIMD level's own multi-row tile; NULL where the ordered dots serve */
    bool tile_one;         /* one token runs on the tile too (its dot is one fma chain: AVX2 floats) */
    mf_cpu_ordered_dots ord;     /* llama.cpp's float order (x86, MF_ORDER_EXACT); all NULL otherwise */
    const mf_cpu_gemm *gemm;     /* the ordered prefill GEMM (from gemm->min_tokens tokens); NULL: none */
} mf_cpu_mm_kernels;

typedef void (*mf_cpu_swiglu_fn)(const float *a, const float *b, float *y, int64_t n);
typedef void (*mf_cpu_rope_head_fn)(const mf_rope_params *rp, const float *cs, float *x, int64_t hd);
typedef void (*mf_cpu_attention_fn)(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                    int64_t u0, int64_t u1, float *scores);

typedef struct mf_cpu_kernels {
    mf_simd_level level;
    bool ordered;
    /* [type][rows % 8 == 0]: llama.cpp repacks Q4_0 and Q4_K weights whose row count is a multiple
     * of 8 and runs another float order on them; for the other types both entries are the same
     * (mf_cpu_order_variant). */
    mf_cpu_mm_kernels mm[MF_TYPE_COUNT][2];
    mf_cpu_swiglu_fn swiglu;
    mf_cpu_rope_head_fn rope_head;
    /* an F32 cache under the ordered kernels: llama.cpp's order; NULL: the blockwise kernel serves */
    mf_cpu_attention_fn attn_f32_ordered;
    /* the blockwise (flash) kernel's tile, and whether it takes mf_cpu_attn_tile_rows_wide rows */
    mf_cpu_attn_tile_fn attn_tile;
    bool attn_wide_rows;
} mf_cpu_kernels;

/* The table of a configuration (built on first use; thread-safe). NULL if the level is not
 * supported here. */
const mf_cpu_kernels *mf_cpu_kernels_get(mf_simd_level level, bool ordered);

/* The matmul kernels for weight w under cfg. */
static inline const mf_cpu_mm_kernels *mf_cpu_mm_kernels_for(const mf_cpu_cfg *cfg, const mf_weight *w) {
    return &cfg->k->mm[w->type][w->ne[1] % 8 == 0];
}

#if defined(__x86_64__)
/* The ordered variant (MF_ORDER_PLAIN or MF_ORDER_REPACKED, cpu_dot_order.h) a weight of type t and
 * `rows` rows runs at an x86 level under the exact float order (llama.cpp's) or the fast one. */
int mf_cpu_order_variant(mf_simd_level level, bool exact, mf_type t, int64_t rows);
/* The AVX2 level's ordered GEMM for (t, variant) built without or with AVX-VNNI (tests: both builds
 * against the dots on one machine); NULL where there is none or this CPU cannot run the build (an
 * AVX-VNNI build also needs mf_simd_avxvnni()). */
const mf_cpu_gemm *mf_cpu_gemm_avx2_build(mf_type t, int variant, bool avxvnni);
#endif

/* The portable kernels the tables fall back on. */
void mf_cpu_swiglu_c(const float *a, const float *b, float *y, int64_t n);
void mf_cpu_rope_head_c(const mf_rope_params *rp, const float *cs, float *x, int64_t hd);

#endif /* MF_CPU_DISPATCH_H */
