/* sched.c: backend assignment, liveness memory planning, splits and execution of a graph.
 *
 * Memory plan: nodes are visited in execution order (the node list). A node that produces data
 * gets a block of the arena from a best-fit free list; a block returns to the list right after the
 * last node that reads it (directly or through views) has been planned, so a node's output never
 * overlaps its own inputs. Inputs and the output are never freed: inputs are filled by the host
 * before the run and must not share storage (two inputs in one block would overwrite each other). */
#include "graph/sched.h"

#include <stdlib.h>

/* ---- free-list allocator over offsets ---- */

typedef struct {
    size_t off, size;
} block;

typedef struct {
    block *free;
    int32_t n_free, cap;
    size_t end; /* high-water mark */
} offset_alloc;

static size_t align_up(size_t x) { return (x + MF_ARENA_ALIGN - 1) & ~(size_t)(MF_ARENA_ALIGN - 1); }

static size_t oa_alloc(offset_alloc *a, size_t size) {
    size = align_up(size ? size : 1);
    int32_t best = -1;
    for (int32_t i = 0; i < a->n_free; i++)
        if (a->free[i].size >= size && (best < 0 || a->free[i].size < a->free[best].size)) best = i;
    if (best < 0) {
        /* Grow: if the last free block touches the end, extend it instead of leaving a hole. */
        if (a->n_free && a->free[a->n_free - 1].off + a->free[a->n_free - 1].size == a->end) {
            block *last = &a->free[a->n_free - 1];
            size_t off = last->off;
            a->end = off + size;
            a->n_free--;
            return off;
        }
        size_t off = a->end;
        a->end += size;
        return off;
    }
    size_t off = a->free[best].off;
    a->free[best].off += size;
    a->free[best].size -= size;
    if (a->free[best].size == 0) {
        memmove(&a->free[best], &a->free[best + 1], (size_t)(a->n_free - best - 1) * sizeof(block));
        a->n_free--;
    }
    return off;
}

/* Return [off, off+size) to the sorted free list, merging neighbours. */
static mf_status oa_free(offset_alloc *a, size_t off, size_t size) {
    size = align_up(size ? size : 1);
    int32_t i = 0;
    while (i < a->n_free && a->free[i].off < off) i++;
    bool merge_prev = i > 0 && a->free[i - 1].off + a->free[i - 1].size == off;
    bool merge_next = i < a->n_free && off + size == a->free[i].off;
    if (merge_prev && merge_next) {
        a->free[i - 1].size += size + a->free[i].size;
        memmove(&a->free[i], &a->free[i + 1], (size_t)(a->n_free - i - 1) * sizeof(block));
        a->n_free--;
    } else if (merge_prev) {
        a->free[i - 1].size += size;
    } else if (merge_next) {
        a->free[i].off = off;
        a->free[i].size += size;
    } else {
        if (a->n_free == a->cap) {
            int32_t cap = a->cap ? a->cap * 2 : 64;
            block *nb = mf_realloc(a->free, (size_t)cap * sizeof *nb);
            if (!nb) return MF_ERR_NOMEM;
            a->free = nb;
            a->cap = cap;
        }
        memmove(&a->free[i + 1], &a->free[i], (size_t)(a->n_free - i) * sizeof(block));
        a->free[i] = (block){off, size};
        a->n_free++;
    }
    return MF_OK;
}

/* ---- planning ---- */

static bool has_storage(const mf_node *n) {
    return n->op != MF_OP_NONE && n->op != MF_OP_VIEW && n->op != MF_OP_KV_STORE;
}

/* The node whose buffer n's data lives in (follows views). */
static int32_t storage_root(const mf_graph *g, int32_t id) {
    while (g->nodes[id].op == MF_OP_VIEW) id = g->nodes[id].src[0];
    return id;
}

static mf_status assign_backends(mf_graph *g, mf_backend *const *backends, int32_t n_backends) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        mf_node *n = &g->nodes[i];
        if (n->op == MF_OP_NONE || n->backend >= 0) continue;
        for (int32_t b = 0; b < n_backends && n->backend < 0; b++)
            if (backends[b]->supports(backends[b], g, n)) n->backend = b;
        if (n->backend < 0)
            return mf_fail(MF_ERR_UNSUPPORTED, "graph node %d '%s' (op %s): no backend supports it", i, n->name,
                           mf_op_name(n->op));
    }
    return MF_OK;
}

static mf_status plan_memory(mf_graph *g, mf_plan *plan) {
    int32_t n = g->n_nodes;
    int32_t *last_use = mf_malloc((size_t)n * sizeof *last_use);
    if (!last_use) return MF_ERR_NOMEM;
    for (int32_t i = 0; i < n; i++) last_use[i] = i;
    /* A read through a view is a read of the view's root buffer. */
    for (int32_t i = 0; i < n; i++) {
        const mf_node *nd = &g->nodes[i];
        if (nd->op == MF_OP_NONE) continue;
        for (int s = 0; s < nd->n_src; s++) {
            int32_t r = storage_root(g, nd->src[s]);
            if (last_use[r] < i) last_use[r] = i;
        }
    }

    offset_alloc a = {0};
    mf_status st = MF_OK;
    plan->naive_size = 0;
    /* Inputs first, each its own block, never freed. */
    for (int32_t i = 0; i < n; i++) {
        mf_node *nd = &g->nodes[i];
        nd->offset = -1;
        if (nd->op == MF_OP_INPUT) nd->offset = (int64_t)oa_alloc(&a, mf_node_nbytes(nd));
    }
    for (int32_t i = 0; i < n && st == MF_OK; i++) {
        mf_node *nd = &g->nodes[i];
        if (nd->op == MF_OP_NONE) continue;
        if (has_storage(nd)) plan->naive_size += align_up(mf_node_nbytes(nd));
        if (has_storage(nd) && nd->op != MF_OP_INPUT) nd->offset = (int64_t)oa_alloc(&a, mf_node_nbytes(nd));
        /* Release every block whose last reader is this node (a result nobody reads dies here). */
        int32_t cand[MF_GRAPH_MAX_SRC + 1];
        int nc = 0;
        for (int s = 0; s < nd->n_src; s++) cand[nc++] = storage_root(g, nd->src[s]);
        cand[nc++] = storage_root(g, i);
        for (int c = 0; c < nc && st == MF_OK; c++) {
            int32_t r = cand[c];
            bool dup = false;
            for (int d = 0; d < c; d++) dup |= cand[d] == r;
            mf_node *rn = &g->nodes[r];
            if (dup || last_use[r] != i || !has_storage(rn) || rn->op == MF_OP_INPUT || rn->is_output) continue;
            st = oa_free(&a, (size_t)rn->offset, mf_node_nbytes(rn));
        }
    }
    plan->arena_size = a.end;
    free(a.free);
    free(last_use);
    return st;
}

static mf_status make_splits(mf_graph *g, mf_backend *const *backends, mf_plan *plan) {
    int32_t cap = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const mf_node *nd = &g->nodes[i];
        if (nd->op == MF_OP_NONE) continue;
        mf_split *cur = plan->n_splits ? &plan->splits[plan->n_splits - 1] : NULL;
        if (!cur || cur->backend != nd->backend) {
            if (plan->n_splits == cap) {
                cap = cap ? cap * 2 : 4;
                mf_split *ns = mf_realloc(plan->splits, (size_t)cap * sizeof *ns);
                if (!ns) return MF_ERR_NOMEM;
                plan->splits = ns;
            }
            cur = &plan->splits[plan->n_splits++];
            *cur = (mf_split){.backend = nd->backend, .first = i};
        }
        cur->last = i;
        for (int s = 0; s < nd->n_src; s++) {
            int32_t src = nd->src[s];
            if (g->nodes[src].backend == nd->backend) continue;
            bool seen = false;
            for (int32_t k = 0; k < cur->n_copy_in; k++) seen |= cur->copy_in[k] == src;
            if (seen) continue;
            int32_t *nc = mf_realloc(cur->copy_in, (size_t)(cur->n_copy_in + 1) * sizeof *nc);
            if (!nc) return MF_ERR_NOMEM;
            cur->copy_in = nc;
            cur->copy_in[cur->n_copy_in++] = src;
            if (!backends[nd->backend]->host_memory || !backends[g->nodes[src].backend]->host_memory)
                return mf_fail(MF_ERR_UNSUPPORTED, "node '%s' on %s reads '%s' from %s: copies between device "
                               "memories are not implemented", nd->name, backends[nd->backend]->name,
                               g->nodes[src].name, backends[g->nodes[src].backend]->name);
        }
    }
    return MF_OK;
}

mf_status mf_sched_plan(mf_graph *g, mf_backend *const *backends, int32_t n_backends, unsigned fuse_flags,
                        const mf_kv_cache *kv, mf_plan *plan) {
    memset(plan, 0, sizeof *plan);
    if (g->status != MF_OK) return g->status;
    mf_status st = assign_backends(g, backends, n_backends);
    if (st) return st;
    /* Fusions rewrite nodes in place; the fused op goes to the backend of the node it replaces,
     * and a pass only fuses when that backend supports the fused op. */
    if (fuse_flags & MF_FUSE_SWIGLU) mf_fuse_swiglu(g, backends);
    if (fuse_flags & MF_FUSE_QKV_ROPE_STORE) mf_fuse_qkv_rope_store(g, backends);
    if ((st = plan_memory(g, plan)) != MF_OK) goto fail;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const mf_node *nd = &g->nodes[i];
        if (nd->op == MF_OP_NONE) continue;
        const mf_backend *b = backends[nd->backend];
        size_t ws = b->work_size ? b->work_size(b, g, nd, kv) : 0;
        if (ws > plan->work_size) plan->work_size = ws;
    }
    if ((st = make_splits(g, backends, plan)) != MF_OK) goto fail;
    return MF_OK;
fail:
    mf_plan_free(plan);
    return st;
}

void mf_plan_free(mf_plan *p) {
    if (!p) return;
    for (int32_t i = 0; i < p->n_splits; i++) free(p->splits[i].copy_in);
    free(p->splits);
    memset(p, 0, sizeof *p);
}

void mf_sched_bind(mf_graph *g, void *arena) {
    for (int32_t i = 0; i < g->n_nodes; i++) {
        mf_node *n = &g->nodes[i];
        if (n->op == MF_OP_VIEW)
            n->data = (uint8_t *)g->nodes[n->src[0]].data + n->p.view.offset; /* sources come first */
        else
            n->data = n->offset >= 0 ? (uint8_t *)arena + n->offset : NULL;
    }
}

mf_status mf_sched_run(mf_graph *g, const mf_plan *p, mf_backend *const *backends, mf_kv_cache *kv, void *work,
                       mf_node_hook hook, void *hook_ud) {
    for (int32_t s = 0; s < p->n_splits; s++) {
        const mf_split *sp = &p->splits[s];
        mf_backend *b = backends[sp->backend];
        /* Host-memory backends read each other's results in place; make_splits refused the rest. */
        for (int32_t i = sp->first; i <= sp->last; i++) {
            mf_node *n = &g->nodes[i];
            if (n->op == MF_OP_NONE || n->op == MF_OP_INPUT || n->op == MF_OP_VIEW) continue;
            mf_status st = b->compute(b, g, i, kv, work, p->work_size);
            if (st) return mf_fail_context(st, "node %d '%s' (%s on %s)", i, n->name, mf_op_name(n->op), b->name);
            if (hook) hook(hook_ud, g, i);
        }
    }
    return MF_OK;
}
