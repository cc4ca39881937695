/* cpu_dispatch.c: the dispatch tables (cpu_dispatch.h). Every choice of an ISA's kernel is made
 * here, once per configuration: the SIMD registry's dots, tiles and quantizers (simd.c, filled by
 * the per-ISA files), llama.cpp-order dots and GEMMs for the ordered configurations, with the
 * AVX-512 kernels in place of the AVX2 ones where they exist (bit-identical either way), and the
 * measured crossovers between them. */
#include "cpu/cpu_dispatch.h"

#include <math.h>
#include <pthread.h>

static mf_cpu_kernels tables[MF_SIMD_LEVEL_COUNT][2];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

void mf_cpu_swiglu_c(const float *a, const float *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + expf(-a[i])) * b[i];
}

void mf_cpu_rope_head_c(const mf_rope_params *rp, const float *cs, float *x, int64_t hd) {
    (void)hd; /* dims past n_dims pass through unchanged */
    int32_t half = rp->n_dims / 2;
    for (int32_t i = 0; i < half; i++) {
        int32_t a = rp->mode == MF_ROPE_NEOX ? i : 2 * i;
        int32_t b = rp->mode == MF_ROPE_NEOX ? i + half : 2 * i + 1;
        float c = cs[2 * i], s = cs[2 * i + 1];
        float x0 = x[a], x1 = x[b];
        /* the contraction llama.cpp's compiled rotation performs: bit-identical results */
        x[a] = fmaf(x0, c, -(x1 * s));
        x[b] = fmaf(x0, s, x1 * c);
    }
}

#if defined(__x86_64__)
/* The ordered dots of (t, variant) at an x86 level: the AVX2 set, with the AVX-512 one-row (plain
 * order), eight-row and several-token dots in their place at the AVX-512 level. */
static mf_cpu_ordered_dots ordered_dots(mf_simd_level level, mf_type t, int variant) {
    mf_cpu_ordered_dots d = mf_cpu_ordered_dots_avx2(t, variant);
    if (d.dot && level == MF_SIMD_AVX512) {
        if (variant == MF_ORDER_PLAIN && mf_cpu_ordered_dot_avx512(t)) d.dot = mf_cpu_ordered_dot_avx512(t);
        const mf_cpu_dot4_fn d8 = mf_cpu_ordered_dot8_avx512(t, variant);
        if (d8) d.dot8 = d8;
        /* bench_gemm, one thread, 4864 x 896 and 896 x 4864 (Zen 5): the Q8_0, Q5_0 and Q5_1 dot8n
         * ahead of the GEMMs through 4 tokens (Q8_0 at 3: 0.20 vs 0.25 ms; Q5_1 at 2: 0.127 vs
         * 0.184 ms); Q4_1's through 3 (2: 0.111 vs 0.141 ms; 3: 0.150 vs 0.162), level at 4.
         * Q4_0's through 4 with the weights coming from memory (bench_gemm --cold, 2 threads, 3 and
         * 4 tokens: 896 x 4864 0.088 vs 0.174 and 0.084 vs 0.180 ms, 1152 x 896 0.024 vs 0.046 and
         * 0.026 vs 0.036; 4864 x 896 level), though hot in cache the two were level at 3 and 4 */
        const mf_cpu_dot8n_fn d8n = mf_cpu_ordered_dot8n_avx512(t, variant);
        if (d8n) { /* reading the AVX2 one's side data (dot8n_aux); else the AVX2 one serves */
            d.dot8n = d8n;
            d.dot8n_tokens = t == MF_TYPE_Q4_1 ? 3 : 4;
        } else if (t == MF_TYPE_Q4_K || t == MF_TYPE_Q6_K) {
            /* the AVX2 Q4_K and Q6_K dot8n were measured against the AVX2 GEMMs only: AVX-512 keeps
             * its GEMMs */
            d.dot8n = NULL;
            d.dot8n_tokens = 0;
        }
        d.dot16n = mf_cpu_ordered_dot16n_avx512(t, variant);
        d.dot8n_one = false; /* one token: AVX-512's dot8 */
    }
    return d;
}

/* The ordered prefill GEMMs: [build] for the AVX2 level without and with AVX-VNNI (the K-quants have
 * one build: gemm_avx2_util.h), and AVX-512. */
typedef const mf_cpu_gemm *(*gemm_get_fn)(void);
enum { G_AVX2, G_AVXVNNI, G_AVX512 };
static const struct {
    mf_type t;
    int variant;
    gemm_get_fn get[3];
} gemms[] = {
    /* Q4_0 and Q4_K with rows not a multiple of 8 have none: the dots serve */
    {MF_TYPE_Q4_0, MF_ORDER_REPACKED, {mf_cpu_gemm_q4_0_avx2, mf_cpu_gemm_q4_0_avxvnni, mf_cpu_gemm_q4_0_avx512}},
    {MF_TYPE_Q4_K, MF_ORDER_REPACKED, {mf_cpu_gemm_q4_K_avx2, mf_cpu_gemm_q4_K_avx2, mf_cpu_gemm_q4_K_avx512}},
    {MF_TYPE_Q4_1, MF_ORDER_PLAIN, {mf_cpu_gemm_q4_1_avx2, mf_cpu_gemm_q4_1_avxvnni, mf_cpu_gemm_q4_1_avx512}},
    {MF_TYPE_Q5_0, MF_ORDER_PLAIN, {mf_cpu_gemm_q5_0_avx2, mf_cpu_gemm_q5_0_avxvnni, mf_cpu_gemm_q5_0_avx512}},
    {MF_TYPE_Q5_1, MF_ORDER_PLAIN, {mf_cpu_gemm_q5_1_avx2, mf_cpu_gemm_q5_1_avxvnni, mf_cpu_gemm_q5_1_avx512}},
    {MF_TYPE_Q8_0, MF_ORDER_PLAIN, {mf_cpu_gemm_q8_0_avx2, mf_cpu_gemm_q8_0_avxvnni, mf_cpu_gemm_q8_0_avx512}},
    {MF_TYPE_Q8_0, MF_ORDER_REPACKED, {mf_cpu_gemm_q8_0_rp_avx2, mf_cpu_gemm_q8_0_rp_avxvnni, NULL}},
    {MF_TYPE_Q5_K, MF_ORDER_PLAIN, {mf_cpu_gemm_q5_K_avx2, mf_cpu_gemm_q5_K_avx2, mf_cpu_gemm_q5_K_avx512}},
    {MF_TYPE_Q6_K, MF_ORDER_PLAIN, {mf_cpu_gemm_q6_K_avx2, mf_cpu_gemm_q6_K_avx2, mf_cpu_gemm_q6_K_avx512}},
    /* the formats whose dots are AVX2 code at every x86 level: their AVX2 GEMMs at each */
    {MF_TYPE_IQ4_NL, MF_ORDER_PLAIN, {mf_cpu_gemm_iq4_nl_avx2, mf_cpu_gemm_iq4_nl_avx2, mf_cpu_gemm_iq4_nl_avx2}},
    {MF_TYPE_Q3_K, MF_ORDER_PLAIN, {mf_cpu_gemm_q3_K_avx2, mf_cpu_gemm_q3_K_avx2, mf_cpu_gemm_q3_K_avx2}},
    {MF_TYPE_IQ4_XS, MF_ORDER_PLAIN, {mf_cpu_gemm_iq4_xs_avx2, mf_cpu_gemm_iq4_xs_avx2, mf_cpu_gemm_iq4_xs_avx2}},
    {MF_TYPE_Q2_K, MF_ORDER_PLAIN, {mf_cpu_gemm_q2_K_avx2, mf_cpu_gemm_q2_K_avx2, mf_cpu_gemm_q2_K_avx2}},
};

static const mf_cpu_gemm *gemm_build(mf_type t, int variant, int build) {
    for (size_t i = 0; i < MF_ARRAY_LEN(gemms); i++)
        if (gemms[i].t == t && gemms[i].variant == variant) return gemms[i].get[build] ? gemms[i].get[build]() : NULL;
    return NULL;
}

/* The ordered prefill GEMM of (t, variant) at an x86 level, or NULL. */
static const mf_cpu_gemm *ordered_gemm(mf_simd_level level, mf_type t, int variant) {
    if (level == MF_SIMD_AVX512) return gemm_build(t, variant, G_AVX512);
    return gemm_build(t, variant, mf_simd_avxvnni() ? G_AVXVNNI : G_AVX2);
}

int mf_cpu_order_variant(mf_simd_level level, bool exact, mf_type t, int64_t rows) {
    /* llama.cpp repacks Q4_0 and Q4_K weights of 8k rows (a tied lm_head too) */
    if (rows % 8 == 0 && (t == MF_TYPE_Q4_0 || t == MF_TYPE_Q4_K)) return MF_ORDER_REPACKED;
    /* Q8_0 in llama.cpp's eight lanes costs the AVX2 GEMM a conversion and an fma per 32 products:
     * on Zen 3 it runs at llama.cpp's speed and no faster (bench_gemm --threads 1 q8_0 4864 896 128:
     * 32-41 GMAC/s), in one chain per output 50-57. The fast order takes the chain, every row count;
     * the exact one keeps llama.cpp's order (the one chain moved the fixtures' logits up to 1.0e-4
     * NMSE from llama.cpp's: cpu_dot_order.h) */
    if (t == MF_TYPE_Q8_0 && level == MF_SIMD_AVX2 && !exact) return MF_ORDER_REPACKED;
    return MF_ORDER_PLAIN;
}

const mf_cpu_gemm *mf_cpu_gemm_avx2_build(mf_type t, int variant, bool avxvnni) {
    if (avxvnni ? !mf_simd_avxvnni() : !mf_simd_level_supported(MF_SIMD_AVX2)) return NULL;
    return gemm_build(t, variant, avxvnni ? G_AVXVNNI : G_AVX2);
}
#endif

static void build(mf_cpu_kernels *k, mf_simd_level level, bool ordered) {
    *k = (mf_cpu_kernels){.level = level, .ordered = ordered};
    for (int t = 0; t < MF_TYPE_COUNT; t++) {
        mf_cpu_mm_kernels m = {.act = mf_type_get_traits((mf_type)t)->vec_dot_type};
        const bool is_float = t == MF_TYPE_F32 || t == MF_TYPE_F16 || t == MF_TYPE_BF16;
        /* float weights on an AVX-512 that splits its operations in halves: the AVX2 kernels, dot
         * and tile alike (one order per type still: every token count runs them) */
        const mf_simd_level fl = level == MF_SIMD_AVX512 && is_float && mf_simd_avx512_narrow() ? MF_SIMD_AVX2 : level;
        m.dot = mf_simd_vec_dot_at(fl, (mf_type)t);
        m.quant = m.act == MF_TYPE_F32 ? NULL : mf_simd_quantize_row_at(fl, m.act);
        if (!m.dot || (m.act != MF_TYPE_F32 && !m.quant)) {
            k->mm[t][0] = k->mm[t][1] = (mf_cpu_mm_kernels){.act = m.act};
            continue;
        }
        m.tile = mf_simd_gemm_at(fl, (mf_type)t);
        /* there, the AVX2 tile built for AVX-512's registers (the same bits) */
        if (fl != level && mf_simd_gemm_avx2_wide((mf_type)t)) m.tile = mf_simd_gemm_avx2_wide((mf_type)t);
        /* the AVX2 float dot is one fma chain per row (dot_float_avx2.c): a one-token matmul runs
         * on the tile, which takes rows from four strands of the matrix side by side */
        m.tile_one = fl == MF_SIMD_AVX2 && is_float;
        for (int rows8 = 0; rows8 < 2; rows8++) {
            mf_cpu_mm_kernels e = m;
#if defined(__x86_64__)
            /* the quantized matmuls take these kernels in either order (under MF_ORDER_FAST too:
             * they are the fastest minfer has on x86), in the order mf_cpu_order_variant picks */
            if (level == MF_SIMD_AVX2 || level == MF_SIMD_AVX512) {
                const int variant = mf_cpu_order_variant(level, ordered, (mf_type)t, rows8 ? 8 : 1);
                e.ord = ordered_dots(level, (mf_type)t, variant);
                if (e.ord.dot) e.tile = NULL;
                /* a GEMM in the order of the type's dots: the ordered ones, or (Q2_K, Q3_K, IQ4_XS: no
                 * ordered dots) the level's dot and tile, which are llama.cpp's x86 order */
                if (e.quant) e.gemm = ordered_gemm(level, (mf_type)t, variant);
            }
#endif
            k->mm[t][rows8] = e;
        }
    }
    k->swiglu = mf_cpu_swiglu_c;
    k->rope_head = mf_cpu_rope_head_c;
    k->attn_tile = mf_cpu_attn_tile_c;
#if defined(__x86_64__)
    if (level == MF_SIMD_AVX2 || level == MF_SIMD_AVX512) {
        k->rope_head = mf_cpu_rope_head_avx2;
        /* llama.cpp's vector exp, faster than expf a value at a time: the fast order's too */
        k->swiglu = level == MF_SIMD_AVX512 ? mf_cpu_swiglu_ord_avx512 : mf_cpu_swiglu_ord_avx2;
        if (ordered)
            k->attn_f32_ordered =
                level == MF_SIMD_AVX512 ? mf_cpu_attention_ordered_avx512 : mf_cpu_attention_ordered_ref;
        if (level == MF_SIMD_AVX512) {
            k->attn_tile = mf_cpu_attn_tile_avx512;
        } else {
            k->attn_tile = mf_cpu_attn_tile_avx2;
            k->attn_wide_rows = true;
        }
    }
#endif
}

static void build_all(void) {
    for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) {
        if (!mf_simd_level_supported((mf_simd_level)l)) continue;
        const bool x86 = l == MF_SIMD_AVX2 || l == MF_SIMD_AVX512;
        for (int o = 0; o < 2; o++) build(&tables[l][o], (mf_simd_level)l, o && x86);
    }
}

const mf_cpu_kernels *mf_cpu_kernels_get(mf_simd_level level, bool ordered) {
    if (!mf_simd_level_supported(level)) return NULL;
#if !defined(__x86_64__)
    ordered = false; /* llama.cpp's order exists for x86 only */
#endif
    if (level != MF_SIMD_AVX2 && level != MF_SIMD_AVX512) ordered = false;
    pthread_once(&tables_once, build_all);
    return &tables[level][ordered];
}

mf_cpu_cfg mf_cpu_cfg_for(mf_isa isa, mf_float_order order) {
    const mf_simd_level level = (mf_simd_level)(mf_isa_resolve(isa) - 1);
    const mf_cpu_kernels *k = mf_cpu_kernels_get(level, order == MF_ORDER_EXACT);
    return (mf_cpu_cfg){level, k->ordered, k};
}

mf_cpu_ordered_dots mf_cpu_ordered_dots_for(const mf_cpu_cfg *cfg, const mf_weight *w) {
    return mf_cpu_mm_kernels_for(cfg, w)->ord;
}

const mf_cpu_gemm *mf_cpu_gemm_for(const mf_cpu_cfg *cfg, const mf_weight *w) {
    return mf_cpu_mm_kernels_for(cfg, w)->gemm;
}

#if defined(__x86_64__)
mf_cpu_ordered_dots mf_cpu_ordered_dots_at(mf_simd_level level, mf_type t, int variant) {
    return mf_simd_level_supported(level) ? ordered_dots(level, t, variant) : (mf_cpu_ordered_dots){0};
}
#endif
