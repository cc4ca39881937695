/* context.c: a context: the KV cache, the backends, a small cache of built-and-scheduled graphs
 * with one arena between them, and the forward pass. A graph is keyed by (tokens, outputs); the
 * context size, backends and fusions are fixed per context. Token ids, positions, sequence ids, KV
 * cells and output rows are graph inputs, so one decode graph serves every decode step and nothing
 * is allocated per token. Inputs longer than n_ubatch run in chunks, each with a graph of exactly its
 * own token and output counts: a padded token would cost a whole token's matmuls (a 33-token step run
 * as 64 took 1.5x the time of 40 exact), and a graph costs 0.2-0.5 ms to build and schedule.
 *
 * A decode is atomic: the batch is checked and its cells reserved before anything runs, and a
 * failure part way releases them, so the cache is as before the call. */
#include "model/model.h"
#include "cpu/cpu.h"
#include "graph/sched.h"
#include "graph/trace.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

_Static_assert(MF_FUSION_SWIGLU == MF_FUSE_SWIGLU && MF_FUSION_QKV_ROPE_STORE == MF_FUSE_QKV_ROPE_STORE &&
                   MF_FUSION_ALL == MF_FUSE_ALL,
               "public fusion bits are the scheduler's");

/* Graphs kept, least recently used out. A kept graph is its nodes and plan (some hundred KB): the
 * arena and scratch they compute in are the context's, one of each, sized for the largest graph
 * built so far, since one pass runs at a time and a pass's inputs are all written before it runs. */
#define GRAPH_CACHE_SIZE 32

typedef struct {
    bool used;
    int32_t n_tokens, n_outputs;
    uint64_t last_use;
    mf_graph g;
    mf_plan plan;
} cached_graph;

struct mf_context {
    const mf_model *m;
    mf_context_params p;
    mf_backend *backends[1];
    int32_t n_backends;
    mf_kv_cache kv;
    cached_graph graphs[GRAPH_CACHE_SIZE];
    void *arena, *work; /* shared by the cached graphs; bytes: */
    size_t arena_cap, work_cap;
    uint64_t tick;
    int32_t n_builds;
    float *logits;
    size_t logits_cap; /* rows */
    int32_t n_outputs;
    int32_t *chunk; /* n_ubatch ints: output rows of a chunk */
    int32_t *bpos, *bseq, *bcells; /* per batch token: its position, sequence and reserved cell */
    size_t bcap;
    mf_kv_view_buf views; /* the attention view of a chunk (kv.h) */
    mf_trace *trace;
    /* The per-node observer (node_callback and the trace share one scheduler hook). */
    int32_t n_passes;     /* forward passes run so far */
    int32_t obs_real, obs_graph; /* the running pass: real and graph token counts */
    double obs_t;         /* when the node being observed started */
};

mf_context_params mf_context_default_params(void) {
    return (mf_context_params){.n_ctx = 0, .n_ubatch = 512, .n_threads = 0, .kv_f32 = false,
                               .fusions = MF_FUSION_ALL};
}

static int32_t default_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int32_t)MF_MIN(n, 64) : 1;
}

mf_status mf_context_create(const mf_model *m, const mf_context_params *params, mf_context **out) {
    *out = NULL;
    mf_context_params p = params ? *params : mf_context_default_params();
    if (p.n_ctx == 0) p.n_ctx = m->hp.n_ctx_train;
    if (p.n_ctx < 1 || p.n_ctx > (1 << 24))
        return mf_fail(MF_ERR_ARG, "context size %d: must be in [1, %d]", p.n_ctx, 1 << 24);
    if (p.n_ubatch < 1 || p.n_ubatch > 8192)
        return mf_fail(MF_ERR_ARG, "ubatch %d: must be in [1, 8192]", p.n_ubatch);
    if (p.threads_of) p.n_threads = p.threads_of->p.n_threads;
    if (p.n_threads == 0) p.n_threads = default_threads();
    if (p.n_threads < 1 || p.n_threads > 1024)
        return mf_fail(MF_ERR_ARG, "thread count %d: must be in [1, 1024]", p.n_threads);
    if (p.fusions & ~MF_FUSION_ALL) return mf_fail(MF_ERR_ARG, "fusion flags 0x%x: unknown bits", p.fusions);
    if ((unsigned)p.isa >= MF_ISA_COUNT) return mf_fail(MF_ERR_ARG, "instruction set %d: unknown", (int)p.isa);
    if (p.order != MF_ORDER_EXACT && p.order != MF_ORDER_FAST)
        return mf_fail(MF_ERR_ARG, "float order %d: use MF_ORDER_EXACT or MF_ORDER_FAST", (int)p.order);
    if (p.isa != MF_ISA_AUTO && !mf_isa_supported(p.isa))
        mf_log(MF_LOG_WARN, "instruction set %s is not supported on this CPU or build; using %s", mf_isa_name(p.isa),
               mf_isa_name(mf_isa_resolve(p.isa)));
    p.isa = mf_isa_resolve(p.isa);
    mf_context *c = mf_calloc(1, sizeof *c);
    if (!c) return MF_ERR_NOMEM;
    c->m = m;
    c->p = p;
    const mf_cpu_cfg cfg = mf_cpu_cfg_for(p.isa, p.order);
    mf_status st = mf_cpu_backend_create_on(p.threads_of ? p.threads_of->backends[0] : NULL, p.n_threads, &cfg,
                                            &c->backends[0]);
    c->p.threads_of = NULL; /* the threads are this context's too now; the other may go first */
    if (st) goto fail;
    c->n_backends = 1; /* priority order: a CUDA backend, when built, goes first */
    st = mf_kv_init(&c->kv, m->hp.n_layer, p.n_ctx, m->hp.n_head_kv, m->hp.head_dim,
                    p.kv_f32 ? MF_TYPE_F32 : MF_TYPE_F16);
    if (st) goto fail;
    c->chunk = mf_malloc((size_t)p.n_ubatch * sizeof *c->chunk);
    if (!c->chunk) {
        st = MF_ERR_NOMEM;
        goto fail;
    }
    if (p.trace_path && *p.trace_path && (st = mf_trace_create(p.trace_path, p.trace_dump_dir, &c->trace))) goto fail;
    c->p.trace_path = c->p.trace_dump_dir = NULL; /* the caller's strings need not outlive the call */
    *out = c;
    return MF_OK;
fail:
    mf_context_free(c);
    return st;
}

static void drop_graph(cached_graph *cg) {
    mf_graph_free(&cg->g);
    mf_plan_free(&cg->plan);
    memset(cg, 0, sizeof *cg);
}

void mf_context_free(mf_context *c) {
    if (!c) return;
    if (c->trace) {
        mf_status st = mf_trace_finish(c->trace);
        if (st) mf_log(MF_LOG_ERROR, "%s", mf_last_error());
    }
    for (int i = 0; i < GRAPH_CACHE_SIZE; i++) drop_graph(&c->graphs[i]);
    mf_aligned_free(c->arena);
    mf_aligned_free(c->work);
    for (int32_t i = 0; i < c->n_backends; i++) c->backends[i]->free(c->backends[i]);
    mf_kv_free(&c->kv);
    free(c->logits);
    free(c->chunk);
    free(c->bpos);
    free(c->bseq);
    free(c->bcells);
    mf_kv_view_buf_free(&c->views);
    free(c);
}

int32_t mf_context_n_ctx(const mf_context *c) { return c->p.n_ctx; }
mf_kv_cache *mf_context_kv(mf_context *c) { return &c->kv; }
const mf_model *mf_context_model(const mf_context *c) { return c->m; }
int32_t mf_context_n_threads(const mf_context *c) { return c->p.n_threads; }
int32_t mf_context_n_ubatch(const mf_context *c) { return c->p.n_ubatch; }
mf_isa mf_context_isa(const mf_context *c) { return c->p.isa; }
mf_type mf_context_kv_type(const mf_context *c) { return c->p.kv_f32 ? MF_TYPE_F32 : MF_TYPE_F16; }
mf_float_order mf_context_order(const mf_context *c) { return c->p.order; }
int32_t mf_context_n_graph_builds(const mf_context *c) { return c->n_builds; }
int32_t mf_context_n_outputs(const mf_context *c) { return c->n_outputs; }
static mf_status check_seq(int32_t seq, bool all_ok) {
    if ((seq >= 0 && seq < MF_MAX_SEQ) || (all_ok && seq == -1)) return MF_OK;
    return mf_fail(MF_ERR_ARG, "sequence id %d: must be in [0, %d)%s", seq, MF_MAX_SEQ, all_ok ? " or -1 (all)" : "");
}

int32_t mf_context_seq_len(const mf_context *c, int32_t seq) {
    return check_seq(seq, false) ? 0 : mf_kv_seq_count(&c->kv, seq);
}
int32_t mf_context_seq_pos_min(const mf_context *c, int32_t seq) {
    return check_seq(seq, false) ? -1 : mf_kv_seq_pos_min(&c->kv, seq);
}
int32_t mf_context_seq_pos_max(const mf_context *c, int32_t seq) {
    return check_seq(seq, false) ? -1 : mf_kv_seq_pos_max(&c->kv, seq);
}
int32_t mf_context_n_used(const mf_context *c) { return c->kv.n_used; }

mf_status mf_context_seq_rm(mf_context *c, int32_t seq, int32_t p0, int32_t p1) {
    mf_status st = check_seq(seq, true);
    if (st) return st;
    mf_kv_seq_rm(&c->kv, seq, MF_MAX(p0, 0), p1);
    return MF_OK;
}

mf_status mf_context_seq_cp(mf_context *c, int32_t src, int32_t dst, int32_t p0, int32_t p1) {
    mf_status st = check_seq(src, false);
    if (!st) st = check_seq(dst, false);
    if (st) return st;
    mf_kv_seq_cp(&c->kv, src, dst, MF_MAX(p0, 0), p1);
    return MF_OK;
}

mf_status mf_context_seq_keep(mf_context *c, int32_t seq) {
    mf_status st = check_seq(seq, false);
    if (st) return st;
    mf_kv_seq_keep(&c->kv, seq);
    return MF_OK;
}

void mf_context_clear(mf_context *c) { mf_kv_clear(&c->kv); }

int32_t mf_context_seq_tokens(const mf_context *c, int32_t seq, int32_t *tokens, int32_t *pos, int32_t cap) {
    if (check_seq(seq, false)) return -1;
    const int32_t n = mf_kv_seq_count(&c->kv, seq);
    if (!tokens && !pos) return n;
    int32_t *list = mf_malloc((size_t)MF_MAX(n, 1) * sizeof *list);
    if (!list) return -1;
    mf_kv_seq_cells(&c->kv, seq, list);
    for (int32_t i = 0; i < n && i < cap; i++) {
        if (tokens) tokens[i] = c->kv.cell_tok[list[i]];
        if (pos) pos[i] = c->kv.cell_pos[list[i]];
    }
    free(list);
    return n;
}

const float *mf_context_logits(const mf_context *c, int32_t i) {
    if (i < 0 || i >= c->n_outputs) return NULL;
    return c->logits + (size_t)i * (size_t)c->m->hp.n_vocab;
}


/* Grow the shared arena and scratch to hold plan's; a new arena rebinds every cached graph. On
 * failure nothing changes. */
static mf_status fit_memory(mf_context *c, const mf_plan *plan, int32_t n_tokens) {
    void *arena = NULL, *work = NULL;
    if (plan->arena_size > c->arena_cap && !(arena = mf_aligned_alloc(MF_ARENA_ALIGN, plan->arena_size))) goto nomem;
    if (plan->work_size > c->work_cap && !(work = mf_aligned_alloc(MF_ARENA_ALIGN, plan->work_size))) goto nomem;
    if (work) {
        mf_aligned_free(c->work);
        c->work = work, c->work_cap = plan->work_size;
    }
    if (arena) {
        mf_aligned_free(c->arena);
        c->arena = arena, c->arena_cap = plan->arena_size;
        for (int i = 0; i < GRAPH_CACHE_SIZE; i++)
            if (c->graphs[i].used) mf_sched_bind(&c->graphs[i].g, c->arena);
    }
    return MF_OK;
nomem:
    mf_aligned_free(arena);
    return mf_fail(MF_ERR_NOMEM, "graph for %d tokens: cannot allocate %zu + %zu bytes", n_tokens, plan->arena_size,
                   plan->work_size);
}

/* Build and schedule a graph; alloc: also bind it to the shared arena (grown to fit), cached. */
static mf_status make_graph(mf_context *c, int32_t n_tokens, int32_t n_outputs, bool alloc, cached_graph *cg) {
    memset(cg, 0, sizeof *cg);
    mf_status st = mf_model_build_graph(c->m, n_tokens, n_outputs, &cg->g);
    if (st) return st;
    st = mf_sched_plan(&cg->g, c->backends, c->n_backends, c->p.fusions, &c->kv, &cg->plan);
    if (st || !alloc) goto done;
    if ((st = fit_memory(c, &cg->plan, n_tokens))) goto done;
    mf_sched_bind(&cg->g, c->arena);
    cg->used = true;
    cg->n_tokens = n_tokens;
    cg->n_outputs = n_outputs;
done:
    if (st) drop_graph(cg);
    return st;
}

static mf_status get_graph(mf_context *c, int32_t n_tokens, int32_t n_outputs, cached_graph **out) {
    cached_graph *victim = NULL; /* a free slot, else the least recently used graph */
    for (int i = 0; i < GRAPH_CACHE_SIZE; i++) {
        cached_graph *cg = &c->graphs[i];
        if (cg->used && cg->n_tokens == n_tokens && cg->n_outputs == n_outputs) {
            cg->last_use = ++c->tick;
            *out = cg;
            return MF_OK;
        }
        if (!victim || (victim->used && (!cg->used || cg->last_use < victim->last_use))) victim = cg;
    }
    drop_graph(victim);
    mf_status st = make_graph(c, n_tokens, n_outputs, true, victim);
    if (st) return st;
    c->n_builds++;
    victim->last_use = ++c->tick;
    *out = victim;
    return MF_OK;
}

/* Bytes a node moves and its multiply-accumulates, for the node callback's achieved GB/s and GMAC/s:
 * weights it reads (all rows for a matmul, the looked-up rows for get_rows), its sources and its
 * output as F32/I32, and for attention the K and V of the cache's occupied cells. */
static void node_cost(const mf_context *c, const mf_graph *g, const mf_node *n, uint64_t *bytes, uint64_t *macs) {
    uint64_t b = (uint64_t)mf_node_nelements(n) * 4, m = 0;
    for (int s = 0; s < n->n_src; s++) b += (uint64_t)mf_node_nelements(&g->nodes[n->src[s]]) * 4;
    if (n->op == MF_OP_MATMUL || n->op == MF_OP_RMS_NORM) {
        const mf_weight *w = n->op == MF_OP_MATMUL ? n->p.mm.w : n->p.norm.w;
        if (w) b += (uint64_t)w->row_bytes * (uint64_t)(w->ne[1] * w->ne[2] * w->ne[3]);
        if (n->op == MF_OP_MATMUL) m = (uint64_t)w->ne[0] * (uint64_t)w->ne[1] * (uint64_t)n->ne[1];
    } else if (n->op == MF_OP_GET_ROWS && n->n_src == 1 && n->p.mm.w) {
        b += (uint64_t)n->p.mm.w->row_bytes * (uint64_t)n->ne[1];
    } else if (n->op == MF_OP_ATTENTION) {
        const mf_attn_params *a = &n->p.attn;
        const uint64_t cells = (uint64_t)c->kv.n_used, kv_elt = c->kv.type == MF_TYPE_F32 ? 4 : 2;
        b += 2 * cells * (uint64_t)a->n_head_kv * (uint64_t)a->head_dim * kv_elt;
        m = 2 * cells * (uint64_t)a->n_head * (uint64_t)a->head_dim * (uint64_t)c->obs_real;
    }
    *bytes = b;
    *macs = m;
}

/* The scheduler hook while a trace or a node callback is set. */
static void observe_node(void *ud, const mf_graph *g, int32_t id) {
    mf_context *c = ud;
    const double t_done = mf_time_s();
    if (c->trace) mf_trace_node(c->trace, g, id);
    const mf_node *n = &g->nodes[id];
    if (c->p.node_callback && n->data) {
        mf_node_stats s;
        mf_node_stats_compute(n, c->obs_real, c->obs_graph, &s);
        mf_node_event ev = {.pass = c->n_passes, .id = id, .name = n->name, .op = mf_op_name(n->op),
                            .decode = c->obs_graph == 1, .n_tokens = c->obs_real, .graph_tokens = c->obs_graph,
                            .seconds = t_done - c->obs_t, .count = s.count, .min = s.min, .max = s.max,
                            .mean = s.mean, .rms = s.rms, .n_nan = s.nan, .n_inf = s.inf,
                            .data = n->type == MF_TYPE_F32 ? n->data : NULL};
        memcpy(ev.ne, n->ne, sizeof ev.ne);
        node_cost(c, g, n, &ev.bytes, &ev.macs);
        c->p.node_callback(&ev, c->p.node_callback_user);
    }
    c->obs_t = mf_time_s(); /* the next node starts now: observing is not counted in its time */
}

/* One chunk of at most n_ubatch tokens with reserved cells; logits of its wanted tokens go to rows
 * out_row.. */
static mf_status run_chunk(mf_context *c, int32_t n, const int32_t *tok, const int32_t *pos, const int32_t *seq,
                           const int32_t *cells, const int8_t *want, int32_t out_row) {
    /* Output row r of the graph is token rows[r]; with no OUT_IDS input, row r is token r. A chunk
     * that wants no logits still computes its last token's (the trace's summary reads them). */
    int32_t *rows = c->chunk, k = 0;
    for (int32_t i = 0; i < n; i++)
        if (want[i]) rows[k++] = i;
    const int32_t n_want = k;
    if (k == 0) rows[k++] = n - 1;
    cached_graph *cg;
    mf_status st = get_graph(c, n, k, &cg);
    if (st) return st;
    mf_graph *g = &cg->g;
    int32_t *in_pos = g->nodes[g->inputs[MF_INPUT_POS]].data, *in_seq = g->nodes[g->inputs[MF_INPUT_SEQ]].data;
    memcpy(g->nodes[g->inputs[MF_INPUT_TOKENS]].data, tok, (size_t)n * sizeof *tok);
    memcpy(in_pos, pos, (size_t)n * sizeof *pos);
    memcpy(in_seq, seq, (size_t)n * sizeof *seq);
    memcpy(g->nodes[g->inputs[MF_INPUT_CELLS]].data, cells, (size_t)n * sizeof *cells);
    if ((st = mf_kv_view_build(&c->kv, &c->views, n, in_pos, in_seq))) return st;
    if (g->inputs[MF_INPUT_OUT_IDS] >= 0) memcpy(g->nodes[g->inputs[MF_INPUT_OUT_IDS]].data, rows, (size_t)k * 4);
    if (c->trace) mf_trace_begin(c->trace, g, n == 1 ? "decode" : "prefill", n, n);
    const bool observe = c->trace || c->p.node_callback;
    c->obs_real = n;
    c->obs_graph = n;
    c->obs_t = observe ? mf_time_s() : 0.0;
    st = mf_sched_run(g, &cg->plan, c->backends, &c->kv, c->work, observe ? observe_node : NULL, c);
    c->n_passes++;
    c->kv.view = (mf_kv_view){NULL, NULL};
    if (st) return st;
    const int32_t V = c->m->hp.n_vocab;
    const float *res = g->nodes[g->output].data;
    for (int32_t r = 0; r < n_want; r++) {
        int32_t src_row = g->inputs[MF_INPUT_OUT_IDS] >= 0 ? r : rows[r];
        memcpy(c->logits + (size_t)(out_row + r) * V, res + (size_t)src_row * V, (size_t)V * sizeof(float));
    }
    if (c->trace) mf_trace_end(c->trace, res + (size_t)(g->inputs[MF_INPUT_OUT_IDS] >= 0 ? k - 1 : rows[k - 1]) * V, V);
    return MF_OK;
}

/* Check a batch and resolve its positions into c->bpos (growing the per-batch buffers). Nothing
 * else changes, so a bad batch leaves the context as it was. */
static mf_status check_batch(mf_context *c, const mf_batch *b, int32_t *n_out) {
    if (!b || b->n_tokens <= 0 || !b->tokens) return mf_fail(MF_ERR_ARG, "decode: empty batch");
    const int32_t n = b->n_tokens, V = c->m->hp.n_vocab;
    if ((size_t)n > c->bcap) {
        int32_t **bufs[3] = {&c->bpos, &c->bseq, &c->bcells};
        for (int k = 0; k < 3; k++) {
            int32_t *p = mf_realloc(*bufs[k], (size_t)n * sizeof *p);
            if (!p) return MF_ERR_NOMEM;
            *bufs[k] = p;
        }
        c->bcap = (size_t)n;
    }
    /* per sequence: its largest position in the cache (computed when first needed), and the last
     * position this batch gave it */
    int32_t cache_max[MF_MAX_SEQ], prev[MF_MAX_SEQ];
    for (int s = 0; s < MF_MAX_SEQ; s++) cache_max[s] = prev[s] = INT32_MIN;
    *n_out = 0;
    for (int32_t i = 0; i < n; i++) {
        const int32_t t = b->tokens[i], s = b->seq ? b->seq[i] : 0;
        if (t < 0 || t >= V) return mf_fail(MF_ERR_ARG, "token %d at batch index %d: ids must be in [0, %d)", t, i, V);
        if (s < 0 || s >= MF_MAX_SEQ)
            return mf_fail(MF_ERR_ARG, "sequence id %d at batch index %d: must be in [0, %d)", s, i, MF_MAX_SEQ);
        *n_out += b->logits ? b->logits[i] != 0 : i == n - 1;
        if (cache_max[s] == INT32_MIN) cache_max[s] = mf_kv_seq_pos_max(&c->kv, s);
        const int32_t p = b->pos ? b->pos[i] : MF_MAX(cache_max[s], prev[s]) + 1;
        if (p < 0 || p == INT32_MAX)
            return mf_fail(MF_ERR_ARG, "position %d at batch index %d: must be in [0, %d)", p, i, INT32_MAX);
        if (prev[s] != INT32_MIN && p <= prev[s])
            return mf_fail(MF_ERR_ARG,
                           "position %d of sequence %d at batch index %d: a sequence's positions must increase "
                           "along the batch (the one before was %d)", p, s, i, prev[s]);
        if (p <= cache_max[s] && mf_kv_has(&c->kv, s, p))
            return mf_fail(MF_ERR_ARG,
                           "position %d of sequence %d at batch index %d is already in the cache (positions up to "
                           "%d); remove it first (mf_context_seq_rm)", p, s, i, cache_max[s]);
        c->bpos[i] = p;
        c->bseq[i] = s;
        prev[s] = p;
    }
    if ((size_t)*n_out > c->logits_cap) {
        float *l = mf_realloc(c->logits, (size_t)*n_out * (size_t)V * sizeof(float));
        if (!l) return MF_ERR_NOMEM;
        c->logits = l;
        c->logits_cap = (size_t)*n_out;
    }
    return MF_OK;
}

mf_status mf_context_decode(mf_context *c, const mf_batch *b) {
    int32_t n_out = 0;
    mf_status st = check_batch(c, b, &n_out);
    if (st) return st;
    const int32_t n = b->n_tokens, U = c->p.n_ubatch;
    st = mf_kv_reserve(&c->kv, n, c->bpos, c->bseq, b->tokens, c->bcells);
    if (st) return st;
    c->n_outputs = 0; /* from here on the previous logits are overwritten */
    int32_t out_row = 0;
    int8_t want[8192];
    for (int32_t i0 = 0; i0 < n && !st; i0 += U) {
        const int32_t m = MF_MIN(U, n - i0);
        int32_t chunk_out = 0;
        for (int32_t i = 0; i < m; i++) {
            want[i] = (int8_t)(b->logits ? b->logits[i0 + i] != 0 : i0 + i == n - 1);
            chunk_out += want[i];
        }
        st = run_chunk(c, m, b->tokens + i0, c->bpos + i0, c->bseq + i0, c->bcells + i0, want, out_row);
        out_row += chunk_out;
    }
    if (st) {
        mf_kv_release(&c->kv, n, c->bcells);
        return st;
    }
    c->n_outputs = n_out;
    return MF_OK;
}

mf_status mf_context_dump_graph(mf_context *c, int32_t n_tokens, int32_t n_outputs, const char *format,
                                const char *path) {
    if (n_tokens < 1 || n_outputs < 1 || n_outputs > n_tokens)
        return mf_fail(MF_ERR_ARG, "graph dump: %d tokens and %d outputs (need 1 <= outputs <= tokens)", n_tokens,
                       n_outputs);
    bool json = !strcmp(format, "json");
    if (!json && strcmp(format, "dot")) return mf_fail(MF_ERR_ARG, "graph dump format '%s': use dot or json", format);
    const int32_t nb = MF_MIN(n_tokens, c->p.n_ubatch), nob = MF_MIN(n_outputs, nb);
    cached_graph cg;
    mf_status st = make_graph(c, nb, nob, false, &cg);
    if (st) return st;
    FILE *f = fopen(path, "w");
    if (!f) {
        drop_graph(&cg);
        return mf_fail(MF_ERR_IO, "cannot create '%s': %s", path, strerror(errno));
    }
    const char *names[1] = {c->backends[0]->name};
    const char *kind = nb == 1 ? "decode" : "prefill";
    st = json ? mf_graph_write_json(&cg.g, names, kind, f) : mf_graph_write_dot(&cg.g, names, kind, f);
    if (fclose(f) != 0 && !st) st = mf_fail(MF_ERR_IO, "cannot write '%s'", path);
    drop_graph(&cg);
    return st;
}


