/* cpu_backend.c: the CPU backend: runs each graph node with the kernels of cpu_kernels.c, split
 * across the persistent thread pool (rows, tokens or (token, head) pairs per thread). It supports
 * every op, including the fused ones; weight types need a dot kernel. */
#include "cpu/cpu.h"

#include <stdlib.h>

/* The last matmul's quantized activations, which it leaves at the start of the shared work
 * buffer: a matmul right after it (no other node computed in between) on the same source rows
 * with the same activation format reuses them (q, k, v read one normed input; gate and up too). */
typedef struct {
    const mf_graph *g;
    int32_t node, src;
    mf_type act;
    size_t act_row; /* the rows' layout (mf_cpu_matmul_act_row) */
    const void *work;
} act_memo;

typedef struct {
    mf_pool *pool;
    mf_cpu_cfg cfg; /* the kernels this backend runs */
    act_memo memo;
} cpu_impl;

#define SMALL_OP_ELEMENTS 16384

static const mf_node *src(const mf_graph *g, const mf_node *n, int i) { return &g->nodes[n->src[i]]; }

static bool cpu_supports(const mf_backend *b, const mf_graph *g, const mf_node *n) {
    (void)b;
    (void)g;
    switch (n->op) {
    case MF_OP_MATMUL: return mf_cpu_type_supported(n->p.mm.w->type);
    case MF_OP_GET_ROWS: return n->n_src == 2 || mf_cpu_type_supported(n->p.mm.w->type);
    case MF_OP_ATTENTION:
        return n->p.attn.head_dim <= MF_MAX_HEAD_DIM && n->p.attn.n_head / n->p.attn.n_head_kv <= MF_MAX_GQA_GROUP;
    case MF_OP_QKV_ROPE_STORE: return n->p.qkv.attn.head_dim <= MF_MAX_HEAD_DIM;
    default: return n->op > MF_OP_NONE && n->op < MF_OP_COUNT;
    }
}

static size_t per_thread(size_t bytes) { return (bytes + 63) & ~(size_t)63; }

static size_t cpu_work_size(const mf_backend *b, const mf_graph *g, const mf_node *n, const mf_kv_cache *kv) {
    const cpu_impl *c = b->impl;
    size_t nth = (size_t)mf_pool_n_threads(c->pool);
    /* Per-thread scratch is rounded up to 64 bytes, so compute()'s (size / nth) & ~63 covers it. */
    switch (n->op) {
    case MF_OP_MATMUL: return mf_cpu_matmul_work_size(&c->cfg, n->p.mm.w, src(g, n, 0)->ne[1], (int)nth);
    case MF_OP_ATTENTION:
        return nth * per_thread((size_t)(n->p.attn.n_head / n->p.attn.n_head_kv) *
                                ((size_t)kv->n_cells + (size_t)n->p.attn.head_dim) * sizeof(float));
    case MF_OP_QKV_ROPE_STORE:
        return nth * per_thread(2 * (size_t)n->p.qkv.attn.n_head_kv * (size_t)n->p.qkv.attn.head_dim * sizeof(float));
    default: return 0;
    }
}

/* One task type for all ops: the kernels, the node, the graph, the cache and the scratch. */
typedef struct {
    const mf_cpu_cfg *cfg;
    mf_graph *g;
    mf_node *n;
    mf_kv_cache *kv;
    uint8_t *work;
    size_t work_per_thread;
} task;

static void run_get_rows(void *arg, int ith, int nth) {
    task *t = arg;
    const mf_node *n = t->n, *ids = src(t->g, n, 0);
    int64_t r0, r1, K = n->ne[0];
    mf_pool_range(n->ne[1], ith, nth, &r0, &r1);
    const int32_t *id = ids->data;
    if (n->n_src == 2) {
        const float *table = src(t->g, n, 1)->data;
        for (int64_t r = r0; r < r1; r++) memcpy((float *)n->data + r * K, table + (int64_t)id[r] * K, (size_t)K * 4);
    } else if (r1 > r0) {
        mf_cpu_get_rows(n->p.mm.w, id + r0, r1 - r0, (float *)n->data + r0 * K);
    }
}

static void run_rms_norm(void *arg, int ith, int nth) {
    task *t = arg;
    const mf_node *n = t->n;
    int64_t K = n->ne[0], r0, r1;
    mf_pool_range(mf_node_nelements(n) / K, ith, nth, &r0, &r1);
    const float *x = src(t->g, n, 0)->data, *w = n->p.norm.w ? n->p.norm.w->data : NULL;
    mf_cpu_rms_norm_rows(x + r0 * K, w, (float *)n->data + r0 * K, r1 - r0, K, n->p.norm.eps);
}

static void run_rope(void *arg, int ith, int nth) {
    task *t = arg;
    const mf_node *n = t->n;
    int64_t hd = n->ne[0], nh = n->ne[1], r0, r1;
    mf_pool_range(n->ne[2], ith, nth, &r0, &r1);
    const float *x = src(t->g, n, 0)->data;
    const int32_t *pos = src(t->g, n, 1)->data;
    float cs[MF_MAX_HEAD_DIM];
    for (int64_t tok = r0; tok < r1; tok++) {
        mf_cpu_rope_cache(&n->p.rope, pos[tok], cs);
        float *y = (float *)n->data + tok * nh * hd;
        memcpy(y, x + tok * nh * hd, (size_t)(nh * hd) * sizeof(float));
        for (int64_t h = 0; h < nh; h++) mf_cpu_rope_head(t->cfg, &n->p.rope, cs, y + h * hd, hd);
    }
}

static void run_elementwise(void *arg, int ith, int nth) {
    task *t = arg;
    const mf_node *n = t->n;
    int64_t i0, i1;
    mf_pool_range(mf_node_nelements(n), ith, nth, &i0, &i1);
    const float *a = src(t->g, n, 0)->data, *b = n->n_src > 1 ? src(t->g, n, 1)->data : NULL;
    float *y = n->data;
    switch (n->op) {
    case MF_OP_ADD: for (int64_t i = i0; i < i1; i++) y[i] = a[i] + b[i]; break;
    case MF_OP_MUL: for (int64_t i = i0; i < i1; i++) y[i] = a[i] * b[i]; break;
    case MF_OP_SILU: mf_cpu_silu(a + i0, y + i0, i1 - i0); break;
    case MF_OP_SWIGLU: mf_cpu_swiglu(t->cfg, a + i0, b + i0, y + i0, i1 - i0); break;
    default: MF_ASSERT(!"not an elementwise op");
    }
}


static void run_kv_store(void *arg, int ith, int nth) {
    task *t = arg;
    const mf_node *n = t->n;
    int64_t row = n->ne[0] * n->ne[1], r0, r1;
    mf_pool_range(n->ne[2], ith, nth, &r0, &r1);
    const float *k = src(t->g, n, 0)->data, *v = src(t->g, n, 1)->data;
    const int32_t *cells = src(t->g, n, 2)->data;
    for (int64_t tok = r0; tok < r1; tok++)
        if (cells[tok] >= 0) mf_cpu_kv_store_row(t->kv, n->p.kv.layer, cells[tok], k + tok * row, v + tok * row);
}

/* Attention's cost grows with the cells a token sees, plus a fixed part (the output): each thread
 * gets a contiguous range of (token, head) units with an equal share of the estimated cost, so the
 * threads finish together. */
static int64_t attn_unit_cost(const mf_kv_view *v, int64_t t) { return v->n[t] <= 0 ? 1 : (int64_t)v->n[t] + 64; }

static int64_t attn_split(const mf_kv_view *v, int64_t nt, int64_t nh, int64_t total, int ith, int nth) {
    if (ith <= 0) return 0;
    if (ith >= nth) return nt * nh;
    const int64_t target = total / nth * ith + total % nth * ith / nth; /* floor(total * ith / nth) */
    int64_t cum = 0;
    for (int64_t t = 0; t < nt; t++) {
        const int64_t w = attn_unit_cost(v, t);
        if (cum + w * nh > target) return t * nh + (target - cum + w - 1) / w;
        cum += w * nh;
    }
    return nt * nh;
}

static void run_attention(void *arg, int ith, int nth) {
    task *t = arg;
    const mf_node *n = t->n;
    const mf_node *q = src(t->g, n, 0);
    const mf_kv_view *v = &t->kv->view;
    const int64_t nt = q->ne[2], nh = n->p.attn.n_head;
    int64_t total = 0;
    for (int64_t tok = 0; tok < nt; tok++) total += attn_unit_cost(v, tok) * nh;
    const int64_t u0 = attn_split(v, nt, nh, total, ith, nth), u1 = attn_split(v, nt, nh, total, ith + 1, nth);
    float *scores = (float *)(t->work + (size_t)ith * t->work_per_thread);
    if (u1 > u0) mf_cpu_attention(t->cfg, &n->p.attn, t->kv, q->data, n->data, u0, u1, scores);
}

/* Fused: per token, q = rope(q + bq) into the output; k = rope(k + bk) and v + bv into the cache. */
static void run_qkv_rope_store(void *arg, int ith, int nth) {
    task *t = arg;
    const mf_node *n = t->n;
    const mf_attn_params *ap = &n->p.qkv.attn;
    const mf_rope_params *rp = &n->p.qkv.rope;
    int64_t hd = ap->head_dim, qrow = hd * ap->n_head, kvrow = hd * ap->n_head_kv, r0, r1;
    mf_pool_range(n->ne[2], ith, nth, &r0, &r1);
    const float *q = src(t->g, n, 0)->data, *k = src(t->g, n, 1)->data, *v = src(t->g, n, 2)->data;
    const int32_t *pos = src(t->g, n, 3)->data, *cells = src(t->g, n, 4)->data;
    const float *bq = n->p.qkv.bq ? n->p.qkv.bq->data : NULL, *bk = n->p.qkv.bk ? n->p.qkv.bk->data : NULL,
                *bv = n->p.qkv.bv ? n->p.qkv.bv->data : NULL;
    float *kt = (float *)(t->work + (size_t)ith * t->work_per_thread), *vt = kt + kvrow;
    float cs[MF_MAX_HEAD_DIM];
    for (int64_t tok = r0; tok < r1; tok++) {
        mf_cpu_rope_cache(rp, pos[tok], cs);
        float *y = (float *)n->data + tok * qrow;
        for (int64_t i = 0; i < qrow; i++) y[i] = bq ? q[tok * qrow + i] + bq[i] : q[tok * qrow + i];
        for (int64_t h = 0; h < ap->n_head; h++) mf_cpu_rope_head(t->cfg, rp, cs, y + h * hd, hd);
        if (cells[tok] < 0) continue;
        for (int64_t i = 0; i < kvrow; i++) {
            kt[i] = bk ? k[tok * kvrow + i] + bk[i] : k[tok * kvrow + i];
            vt[i] = bv ? v[tok * kvrow + i] + bv[i] : v[tok * kvrow + i];
        }
        for (int64_t h = 0; h < ap->n_head_kv; h++) mf_cpu_rope_head(t->cfg, rp, cs, kt + h * hd, hd);
        mf_cpu_kv_store_row(t->kv, ap->layer, cells[tok], kt, vt);
    }
}

/* Whether matmul node id may reuse the previous matmul's quantized rows: it ran just before (only
 * nodes that compute nothing in between), on the same graph, source, format and work buffer. The
 * source node's row length and count are the same by construction. */
static bool act_memo_hit(const act_memo *m, const mf_graph *g, int32_t id, mf_type act, size_t act_row,
                         const void *work) {
    if (m->g != g || m->node >= id || m->work != work || m->act != act || m->act_row != act_row ||
        g->nodes[id].src[0] != m->src)
        return false;
    for (int32_t i = m->node + 1; i < id; i++) {
        const mf_op op = g->nodes[i].op;
        if (op != MF_OP_NONE && op != MF_OP_INPUT && op != MF_OP_VIEW) return false;
    }
    return true;
}

static mf_status cpu_compute(mf_backend *b, mf_graph *g, int32_t id, mf_kv_cache *kv, void *work, size_t work_size) {
    cpu_impl *c = b->impl;
    mf_node *n = &g->nodes[id];
    int nth = mf_pool_n_threads(c->pool);
    task t = {.cfg = &c->cfg, .g = g, .n = n, .kv = kv, .work = work, .work_per_thread = (work_size / (size_t)nth) & ~(size_t)63};
    mf_pool_fn fn = NULL;
    if (n->op != MF_OP_MATMUL) c->memo.g = NULL; /* any other node may overwrite the work buffer */
    switch (n->op) {
    case MF_OP_GET_ROWS: fn = run_get_rows; break;
    case MF_OP_RMS_NORM: fn = run_rms_norm; break;
    case MF_OP_MATMUL: {
        const mf_type act = mf_cpu_matmul_act_type(n->p.mm.w);
        const int64_t nt = src(g, n, 0)->ne[1];
        const size_t act_row = mf_cpu_matmul_act_row(&c->cfg, n->p.mm.w, nt);
        const bool ready = act != MF_TYPE_F32 && act_memo_hit(&c->memo, g, id, act, act_row, work);
        mf_cpu_matmul_reusing(c->pool, &c->cfg, n->p.mm.w, n->p.mm.b, src(g, n, 0)->data, n->data, nt, work, ready);
        c->memo = (act_memo){g, id, n->src[0], act, act_row, work};
        return MF_OK;
    }
    case MF_OP_ROPE: fn = run_rope; break;
    case MF_OP_ADD:
    case MF_OP_MUL:
    case MF_OP_SILU:
    case MF_OP_SWIGLU: fn = run_elementwise; break;
    case MF_OP_KV_STORE: fn = run_kv_store; break;
    case MF_OP_ATTENTION:
        if (!kv || n->p.attn.layer >= kv->n_layer) return mf_fail(MF_ERR_INTERNAL, "attention without a KV cache");
        fn = run_attention;
        break;
    case MF_OP_QKV_ROPE_STORE: fn = run_qkv_rope_store; break;
    case MF_OP_NONE:
    case MF_OP_INPUT:
    case MF_OP_VIEW: return MF_OK;
    default: return mf_fail(MF_ERR_UNSUPPORTED, "CPU backend: op %s", mf_op_name(n->op));
    }
    /* Small ops (a decode step's norms, adds, RoPE) cost less than waking the workers. */
    if (n->op != MF_OP_ATTENTION && mf_node_nelements(n) < SMALL_OP_ELEMENTS)
        fn(&t, 0, 1);
    else
        mf_pool_run(c->pool, fn, &t);
    return MF_OK;
}

static void cpu_free(mf_backend *b) {
    if (!b) return;
    cpu_impl *c = b->impl;
    if (c) mf_pool_free(c->pool);
    free(c);
    free(b);
}

mf_status mf_cpu_backend_create(int n_threads, const mf_cpu_cfg *cfg, mf_backend **out) {
    return mf_cpu_backend_create_on(NULL, n_threads, cfg, out);
}

mf_status mf_cpu_backend_create_on(const mf_backend *threads_of, int n_threads, const mf_cpu_cfg *cfg,
                                   mf_backend **out) {
    *out = NULL;
    mf_backend *b = mf_calloc(1, sizeof *b);
    cpu_impl *c = mf_calloc(1, sizeof *c);
    if (!b || !c) {
        free(b);
        free(c);
        return MF_ERR_NOMEM;
    }
    c->cfg = *cfg;
    mf_status st = MF_OK;
    if (threads_of && threads_of->free == cpu_free)
        c->pool = mf_pool_retain(((const cpu_impl *)threads_of->impl)->pool);
    else
        st = mf_pool_create(n_threads, &c->pool);
    if (st) {
        free(b);
        free(c);
        return st;
    }
    b->name = "CPU";
    b->supports = cpu_supports;
    b->work_size = cpu_work_size;
    b->compute = cpu_compute;
    b->free = cpu_free;
    b->host_memory = true;
    b->impl = c;
    *out = b;
    return MF_OK;
}

int mf_cpu_backend_n_threads(const mf_backend *b) { return mf_pool_n_threads(((const cpu_impl *)b->impl)->pool); }
