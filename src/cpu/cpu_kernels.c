/* cpu_kernels.c: the CPU backend's kernels (layouts in cpu.h). Numerics follow llama.cpp's CPU
 * path where it matters for agreement: activations quantized per row to the weight's dot type,
 * RMSNorm sums in double, RoPE angles by repeated multiplication, softmax sums in double. */
#include "cpu/cpu.h"
#include "cpu/cpu_dispatch.h"
#include "simd/simd.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- matmul ---- */

bool mf_cpu_type_supported(mf_type t) {
    return mf_type_get_traits(t)->dequantize && mf_cpu_kernels_get(MF_SIMD_SCALAR, false)->mm[t][0].dot;
}

mf_type mf_cpu_matmul_act_type(const mf_weight *w) {
    const mf_cpu_mm_kernels *k = &mf_cpu_kernels_get(MF_SIMD_SCALAR, false)->mm[w->type][0];
    return k->dot && k->quant ? k->act : MF_TYPE_F32;
}

/* The quantized activation rows, then (for a GEMM) each thread's scratch, 64-byte aligned. */
static size_t act_bytes(size_t act_row, int64_t nt) { return (act_row * (size_t)nt + 63) & ~(size_t)63; }

static size_t gemm_scratch(const mf_cpu_gemm *g, int64_t K) { return (g->scratch_size(K) + 63) & ~(size_t)63; }

/* Whether a matmul of nt tokens runs the entry's ordered GEMM (none without one, or without an
 * activation quantizer) rather than the dots: up to dot8n_tokens tokens, the several-token
 * eight-row dots need no packed panels and unpack each weight block once for up to four tokens. A
 * weight packed for the GEMM at load (mf_cpu_pack) takes the GEMM for every token count. */
static bool use_gemm(const mf_cpu_mm_kernels *k, const mf_weight *w, int64_t nt) {
    const mf_cpu_gemm *g = k->gemm;
    if (!k->quant || !g) return false;
    if (mf_cpu_gemm_packed(g, w)) return true;
    return nt >= g->min_tokens && !(k->ord.dot8n && nt <= k->ord.dot8n_tokens);
}

bool mf_cpu_matmul_runs_gemm(const mf_cpu_cfg *cfg, const mf_weight *w, int64_t nt) {
    return use_gemm(mf_cpu_mm_kernels_for(cfg, w), w, nt);
}

/* Whether a matmul of nt tokens runs the several-token dots that read the rows' side data, or a
 * packed weight's GEMM that asks for it. */
static bool use_aux(const mf_cpu_mm_kernels *k, const mf_weight *w, int64_t nt) {
    if (k->quant && k->gemm && mf_cpu_gemm_packed(k->gemm, w)) return nt <= k->gemm->packed_aux_tokens;
    return k->ord.dot8n_aux && (nt > 1 || k->ord.dot8n_one) && !use_gemm(k, w, nt);
}

/* The GEMM of the best kernels that has a packed layout for w, or NULL. */
static const mf_cpu_gemm *packing_gemm(const mf_weight *w) {
    const mf_cpu_cfg cfg = mf_cpu_cfg_for(MF_ISA_AUTO, MF_ORDER_EXACT);
    const mf_cpu_mm_kernels *k = mf_cpu_mm_kernels_for(&cfg, w);
    const mf_cpu_gemm *g = k->quant ? k->gemm : NULL;
    return g && g->pack && g->packed_size(w) ? g : NULL;
}

size_t mf_cpu_packed_size(const mf_weight *w) {
    const mf_cpu_gemm *g = packing_gemm(w);
    return g ? g->packed_size(w) : 0;
}

void mf_cpu_pack(mf_weight *w, void *dst) {
    const mf_cpu_gemm *g = packing_gemm(w);
    MF_ASSERT(g && ((uintptr_t)dst & 63) == 0);
    g->pack(w, dst);
    w->packed = dst;
    w->packed_for = g;
}

size_t mf_cpu_matmul_act_row(const mf_cpu_cfg *cfg, const mf_weight *w, int64_t nt) {
    const mf_cpu_mm_kernels *k = mf_cpu_mm_kernels_for(cfg, w);
    if (!k->dot || !k->quant) return 0;
    const int64_t K = w->ne[0];
    return use_aux(k, w, nt) ? mf_cpu_q4_0_aux_offset(K) + mf_cpu_q4_0_aux_bytes(K) : mf_row_size(k->act, K);
}

size_t mf_cpu_matmul_work_size(const mf_cpu_cfg *cfg, const mf_weight *w, int64_t nt, int n_threads) {
    const mf_cpu_mm_kernels *k = mf_cpu_mm_kernels_for(cfg, w);
    if (!k->dot || !k->quant) return 0;
    const size_t scratch = use_gemm(k, w, nt) ? gemm_scratch(k->gemm, w->ne[0]) * (size_t)n_threads : 0;
    /* + 64: the caller's buffer need not be aligned */
    return act_bytes(mf_cpu_matmul_act_row(cfg, w, nt), nt) + scratch + 64;
}

typedef struct {
    const mf_weight *w, *b;
    const float *x;
    float *y;
    int64_t nt;
    uint8_t *act;
    size_t act_row;
    mf_quantize_fn quant;
    bool aux;             /* each quantized row gets the several-token dots' side data */
    mf_vec_dot_fn dot;
    mf_gemm_fn gemm; /* multi-row tile for several tokens; NULL: one dot per (row, token) */
    bool gemm_one;   /* the tile serves one token too */
    const mf_cpu_gemm *gemm_ord; /* the ordered GEMM (cpu_gemm.h), when there are enough tokens */
    uint8_t *scratch;             /* its per-thread scratch, scratch_bytes each */
    size_t scratch_bytes;
    mf_cpu_ordered_dots ord;     /* llama.cpp's order, the same for every token */
} mm_task;

static void mm_quantize(void *arg, int ith, int nth) {
    mm_task *m = arg;
    int64_t t0, t1, K = m->w->ne[0];
    mf_pool_range(m->nt, ith, nth, &t0, &t1);
    for (int64_t t = t0; t < t1; t++) {
        m->quant(m->x + t * K, m->act + (size_t)t * m->act_row, K);
        if (m->aux) mf_cpu_q4_0_aux(m->act + (size_t)t * m->act_row, K);
    }
}

/* y[t][o] += bias[o] for every token and the outputs [o0, o1) */
static void add_bias(const mm_task *m, const float *bias, int64_t o0, int64_t o1) {
    const int64_t N = m->w->ne[1];
    for (int64_t t = 0; t < m->nt; t++)
        for (int64_t o = o0; o < o1; o++) m->y[t * N + o] += bias[o];
}

static void mm_dot(void *arg, int ith, int nth) {
    mm_task *m = arg;
    int64_t K = m->w->ne[0], N = m->w->ne[1], o0, o1;
    mf_pool_range(N, ith, nth, &o0, &o1);
    const float *bias = m->b ? m->b->data : NULL;
    if (m->gemm_ord) {
        /* Panels of 16 weight rows: each thread takes whole panels. */
        mf_pool_range((N + 15) / 16, ith, nth, &o0, &o1);
        o0 *= 16, o1 = MF_MIN(o1 * 16, N);
        if (o1 > o0)
            m->gemm_ord->run(m->w, o0, o1, m->act, m->act_row, m->nt, m->y, (size_t)N,
                             m->scratch + (size_t)ith * m->scratch_bytes);
        if (bias) add_bias(m, bias, o0, o1);
        return;
    }
    if (m->gemm && (m->nt > 1 || m->gemm_one)) {
        /* Calls of 128 weight rows x 64 tokens: the float GEMM widens each activation block once per
         * call for all its rows, the quantized tiles load each weight block once per token group. */
        for (int64_t ob = o0; ob < o1; ob += 128) {
            int nr = (int)MF_MIN(128, o1 - ob);
            const uint8_t *wr = (const uint8_t *)m->w->data + (size_t)ob * m->w->row_bytes;
            for (int64_t t0 = 0; t0 < m->nt; t0 += 64) {
                int nc = (int)MF_MIN(64, m->nt - t0);
                m->gemm(K, nr, nc, wr, m->w->row_bytes, m->act + (size_t)t0 * m->act_row, m->act_row, m->y + t0 * N + ob,
                        (size_t)N);
            }
        }
        if (bias) add_bias(m, bias, o0, o1);
        return;
    }
    if (m->ord.dot) {
        /* Ordered dots in blocks of 16 weight rows that stay in cache while every token passes
         * over them: eight rows at a time where there is an eight-row dot (it prefetches the next
         * eight), else with several tokens (rows in cache) four, else one. */
        const uint8_t *wd = m->w->data;
        const size_t rb = m->w->row_bytes;
        const mf_cpu_ordered_dots d = m->ord;
        if (d.dot8n && (m->nt > 1 || d.dot8n_one)) {
            /* Several tokens (or one, dot8n_one): each group of sixteen (where there is a dot16n) or
             * eight weight rows is unpacked once for up to four tokens at a time. */
            int64_t o = o0;
            for (; d.dot16n && o + 16 <= o1; o += 16)
                for (int64_t t0 = 0; t0 < m->nt; t0 += 4)
                    d.dot16n(K, wd + (size_t)o * rb, rb, m->act + (size_t)t0 * m->act_row, m->act_row,
                             (int)MF_MIN(4, m->nt - t0), m->y + t0 * N + o, (size_t)N);
            for (; o + 8 <= o1; o += 8)
                for (int64_t t0 = 0; t0 < m->nt; t0 += 4)
                    d.dot8n(K, wd + (size_t)o * rb, rb, m->act + (size_t)t0 * m->act_row, m->act_row,
                            (int)MF_MIN(4, m->nt - t0), m->y + t0 * N + o, (size_t)N);
            for (int64_t t = 0; t < m->nt; t++) {
                const uint8_t *a = m->act + (size_t)t * m->act_row;
                for (int64_t r = o; r < o1; r++) m->y[t * N + r] = d.dot(K, wd + (size_t)r * rb, a);
            }
            if (bias) add_bias(m, bias, o0, o1);
            return;
        }
        for (int64_t ob = o0; ob < o1; ob += 16) {
            const int64_t oe = MF_MIN(ob + 16, o1);
            for (int64_t t = 0; t < m->nt; t++) {
                const uint8_t *a = m->act + (size_t)t * m->act_row;
                float *yt = m->y + t * N;
                int64_t o = ob;
                for (; d.dot8 && o + 8 <= oe; o += 8) d.dot8(K, wd + (size_t)o * rb, rb, a, yt + o);
                for (; m->nt > 1 && o + 4 <= oe; o += 4) d.dot4(K, wd + (size_t)o * rb, rb, a, yt + o);
                for (; o < oe; o++) yt[o] = d.dot(K, wd + (size_t)o * rb, a);
                if (bias)
                    for (o = ob; o < oe; o++) yt[o] += bias[o];
            }
        }
        return;
    }
    /* Blocks of 8 weight rows stay in cache while every token passes over them. */
    for (int64_t ob = o0; ob < o1; ob += 8) {
        int64_t oe = MF_MIN(ob + 8, o1);
        for (int64_t t = 0; t < m->nt; t++) {
            const uint8_t *a = m->act + (size_t)t * m->act_row;
            float *yt = m->y + t * N;
            for (int64_t o = ob; o < oe; o++) {
                const uint8_t *wr = (const uint8_t *)m->w->data + (size_t)o * m->w->row_bytes;
                float v = m->dot(K, wr, a);
                yt[o] = bias ? v + bias[o] : v;
            }
        }
    }
}

void mf_cpu_matmul(mf_pool *pool, const mf_cpu_cfg *cfg, const mf_weight *w, const mf_weight *b, const float *x,
                   float *y, int64_t nt, void *work) {
    mf_cpu_matmul_reusing(pool, cfg, w, b, x, y, nt, work, false);
}

void mf_cpu_matmul_reusing(mf_pool *pool, const mf_cpu_cfg *cfg, const mf_weight *w, const mf_weight *b,
                           const float *x, float *y, int64_t nt, void *work, bool act_ready) {
    const mf_cpu_mm_kernels *k = mf_cpu_mm_kernels_for(cfg, w);
    MF_ASSERT(k->dot);
    /* the ordered dots (llama.cpp's float order, the same for every token) or the level's tile */
    mm_task m = {.w = w, .b = b, .x = x, .y = y, .nt = nt};
    m.quant = k->quant, m.dot = k->dot, m.gemm = k->tile, m.gemm_one = k->tile_one, m.ord = k->ord;
    if (use_gemm(k, w, nt)) {
        m.gemm_ord = k->gemm;
        m.scratch_bytes = gemm_scratch(k->gemm, w->ne[0]);
    }
    if (m.quant) {
        m.act = (uint8_t *)(((uintptr_t)work + 63) & ~(uintptr_t)63);
        m.act_row = mf_cpu_matmul_act_row(cfg, w, nt);
        m.aux = use_aux(k, w, nt);
        m.scratch = m.act + act_bytes(m.act_row, nt);
        if (act_ready)
            ; /* the previous matmul left these rows quantized in work */
        else if (nt == 1)
            mm_quantize(&m, 0, 1); /* one row: not worth waking the workers */
        else
            mf_pool_run(pool, mm_quantize, &m);
    } else {
        m.act = (uint8_t *)x;
        m.act_row = (size_t)w->ne[0] * sizeof(float);
    }
    mf_pool_run(pool, mm_dot, &m);
}

/* ---- row ops ---- */

void mf_cpu_get_rows(const mf_weight *table, const int32_t *ids, int64_t n, float *out) {
    int64_t K = table->ne[0];
    mf_dequantize_fn deq = mf_type_get_traits(table->type)->dequantize;
    /* a table packed as an output matrix: its rows from the packed copy (the file's pages were
     * released; without memory for a row, from the file) */
    const mf_cpu_gemm *g = table->packed ? table->packed_for : NULL;
    uint8_t *buf = g && g->packed_row ? malloc(table->row_bytes) : NULL;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *row = (const uint8_t *)table->data + (size_t)ids[t] * table->row_bytes;
        if (buf) g->packed_row(table, ids[t], buf), row = buf;
        float *o = out + t * K;
        if (table->type == MF_TYPE_F32)
            memcpy(o, row, (size_t)K * sizeof(float));
        else
            deq(row, o, K);
    }
    free(buf);
}

static void rms_scale_row(const float *x, const float *w, float *y, int64_t n, float eps, double sum) {
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int64_t i = 0; i < n; i++) y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

void mf_cpu_rms_norm_row(const float *x, const float *w, float *y, int64_t n, float eps) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
    rms_scale_row(x, w, y, n, eps, sum);
}

void mf_cpu_rms_norm_rows(const float *x, const float *w, float *y, int64_t nrows, int64_t n, float eps) {
    int64_t r = 0;
    /* Each row's sum of squares is one sequential chain of double additions (llama.cpp's order);
     * four rows' chains interleaved keep the adder busy where one waits on its latency. */
    for (; r + 4 <= nrows; r += 4) {
        const float *x0 = x + r * n, *x1 = x0 + n, *x2 = x1 + n, *x3 = x2 + n;
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        for (int64_t i = 0; i < n; i++) {
            s0 += (double)(x0[i] * x0[i]);
            s1 += (double)(x1[i] * x1[i]);
            s2 += (double)(x2[i] * x2[i]);
            s3 += (double)(x3[i] * x3[i]);
        }
        rms_scale_row(x0, w, y + r * n, n, eps, s0);
        rms_scale_row(x1, w, y + (r + 1) * n, n, eps, s1);
        rms_scale_row(x2, w, y + (r + 2) * n, n, eps, s2);
        rms_scale_row(x3, w, y + (r + 3) * n, n, eps, s3);
    }
    for (; r < nrows; r++) mf_cpu_rms_norm_row(x + r * n, w, y + r * n, n, eps);
}

void mf_cpu_rope_cache(const mf_rope_params *rp, int32_t pos, float *cs) {
    const float theta_scale = powf(rp->freq_base, -2.0f / (float)rp->n_dims);
    float theta = (float)pos;
    const float *ff = rp->freq_factors;
    for (int32_t i = 0; i < rp->n_dims / 2; i++) {
        /* as llama.cpp's rope cache: the factor divides the angle before the frequency scale */
        float th = rp->freq_scale * (ff ? theta / ff[i] : theta);
        cs[2 * i] = cosf(th);
        cs[2 * i + 1] = sinf(th);
        theta *= theta_scale;
    }
}

void mf_cpu_rope_head(const mf_cpu_cfg *cfg, const mf_rope_params *rp, const float *cs, float *x, int64_t hd) {
    cfg->k->rope_head(rp, cs, x, hd);
}

void mf_cpu_silu(const float *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = x[i] / (1.0f + expf(-x[i]));
}

void mf_cpu_swiglu(const mf_cpu_cfg *cfg, const float *a, const float *b, float *y, int64_t n) {
    cfg->k->swiglu(a, b, y, n);
}


/* ---- KV cache and attention ---- */

void mf_cpu_kv_store_row(mf_kv_cache *kv, int32_t layer, int32_t cell, const float *k, const float *v) {
    int64_t n = (int64_t)kv->n_head_kv * kv->head_dim;
    uint8_t *kd = kv->k[layer] + (size_t)cell * kv->row_bytes;
    uint8_t *vd = kv->v[layer] + (size_t)cell * kv->row_bytes;
    if (kv->type == MF_TYPE_F32) {
        memcpy(kd, k, (size_t)n * sizeof(float));
        memcpy(vd, v, (size_t)n * sizeof(float));
    } else {
        mf_fp16 *kh = (mf_fp16 *)kd, *vh = (mf_fp16 *)vd;
        for (int64_t i = 0; i < n; i++) {
            kh[i] = mf_f32_to_fp16(k[i]);
            vh[i] = mf_f32_to_fp16(v[i]);
        }
    }
}
