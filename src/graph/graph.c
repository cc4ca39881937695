/* graph.c: the graph builder. Each call appends a node with its shape derived from its sources;
 * nothing is computed here. Shape mismatches are builder bugs and assert. */
#include "graph/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const op_names[MF_OP_COUNT] = {
    [MF_OP_NONE] = "none",         [MF_OP_INPUT] = "input",     [MF_OP_GET_ROWS] = "get_rows",
    [MF_OP_RMS_NORM] = "rms_norm", [MF_OP_MATMUL] = "matmul",   [MF_OP_ROPE] = "rope",
    [MF_OP_ADD] = "add",           [MF_OP_MUL] = "mul",         [MF_OP_SILU] = "silu",
    [MF_OP_SWIGLU] = "swiglu",     [MF_OP_RESERVED_10] = "reserved", [MF_OP_ATTENTION] = "attention",
    [MF_OP_KV_STORE] = "kv_store", [MF_OP_VIEW] = "view",       [MF_OP_QKV_ROPE_STORE] = "qkv_rope_store",
};
_Static_assert(MF_ARRAY_LEN(op_names) == MF_OP_COUNT, "op name table");

static const char *const input_names[MF_INPUT_COUNT] = {"tokens", "pos", "seq", "cells", "out_ids"};

const char *mf_op_name(mf_op op) { return (unsigned)op < MF_OP_COUNT ? op_names[op] : "?"; }
const char *mf_input_kind_name(mf_input_kind k) { return (unsigned)k < MF_INPUT_COUNT ? input_names[k] : "?"; }

mf_status mf_graph_init(mf_graph *g) {
    memset(g, 0, sizeof *g);
    for (int i = 0; i < MF_INPUT_COUNT; i++) g->inputs[i] = -1;
    g->output = -1;
    return MF_OK;
}

void mf_graph_free(mf_graph *g) {
    if (!g) return;
    free(g->nodes);
    g->nodes = NULL;
    g->n_nodes = g->cap = 0;
}

int64_t mf_node_nelements(const mf_node *n) { return n->ne[0] * n->ne[1] * n->ne[2] * n->ne[3]; }

size_t mf_node_nbytes(const mf_node *n) { return (size_t)mf_node_nelements(n) * 4; /* F32 and I32 */ }

/* Append a node of shape ne with the given sources; returns its id or -1. ne may point into the
 * node array (another node's shape), which the growth below may move: it is copied first. */
static int32_t push(mf_graph *g, mf_op op, mf_type type, const int64_t ne_in[4], int n_src, const int32_t *src) {
    if (g->status != MF_OK) return -1;
    int64_t ne[4];
    memcpy(ne, ne_in, sizeof ne);
    for (int i = 0; i < n_src; i++) {
        if (src[i] < 0) return -1; /* a failed earlier call; status already set */
        MF_ASSERT(src[i] < g->n_nodes);
    }
    if (g->n_nodes == g->cap) {
        int32_t cap = g->cap ? g->cap * 2 : 256;
        mf_node *nn = mf_realloc(g->nodes, (size_t)cap * sizeof *nn);
        if (!nn) {
            g->status = MF_ERR_NOMEM;
            return -1;
        }
        g->nodes = nn;
        g->cap = cap;
    }
    int32_t id = g->n_nodes++;
    mf_node *n = &g->nodes[id];
    memset(n, 0, sizeof *n);
    n->op = op;
    n->type = type;
    for (int i = 0; i < 4; i++) n->ne[i] = ne[i] > 0 ? ne[i] : 1;
    n->n_src = n_src;
    for (int i = 0; i < n_src; i++) n->src[i] = src[i];
    n->backend = -1;
    n->offset = -1;
    snprintf(n->name, sizeof n->name, "%s-%d", op_names[op], id);
    return id;
}

static const mf_node *node(const mf_graph *g, int32_t id) { return &g->nodes[id]; }

int32_t mf_graph_input(mf_graph *g, mf_input_kind kind, int64_t n) {
    MF_ASSERT((unsigned)kind < MF_INPUT_COUNT && g->inputs[kind] < 0);
    int64_t ne[4] = {n, 1, 1, 1};
    int32_t id = push(g, MF_OP_INPUT, MF_TYPE_I32, ne, 0, NULL);
    if (id < 0) return -1;
    g->nodes[id].p.input.kind = kind;
    snprintf(g->nodes[id].name, MF_NODE_NAME_MAX, "inp_%s", input_names[kind]);
    g->inputs[kind] = id;
    return id;
}

int32_t mf_graph_get_rows(mf_graph *g, const mf_weight *table, int32_t ids) {
    if (g->status || ids < 0) return -1;
    MF_ASSERT(node(g, ids)->type == MF_TYPE_I32);
    int64_t ne[4] = {table->ne[0], node(g, ids)->ne[0], 1, 1};
    int32_t id = push(g, MF_OP_GET_ROWS, MF_TYPE_F32, ne, 1, &ids);
    if (id >= 0) g->nodes[id].p.mm.w = table;
    return id;
}

int32_t mf_graph_get_rows_f32(mf_graph *g, int32_t table, int32_t ids) {
    if (g->status || ids < 0 || table < 0) return -1;
    MF_ASSERT(node(g, ids)->type == MF_TYPE_I32 && node(g, table)->type == MF_TYPE_F32);
    MF_ASSERT(node(g, table)->ne[2] == 1 && node(g, table)->ne[3] == 1);
    int64_t ne[4] = {node(g, table)->ne[0], node(g, ids)->ne[0], 1, 1};
    int32_t src[2] = {ids, table};
    return push(g, MF_OP_GET_ROWS, MF_TYPE_F32, ne, 2, src);
}

int32_t mf_graph_rms_norm(mf_graph *g, int32_t x, const mf_weight *w, float eps) {
    if (g->status || x < 0) return -1;
    MF_ASSERT(!w || (w->type == MF_TYPE_F32 && w->ne[0] == node(g, x)->ne[0]));
    int32_t id = push(g, MF_OP_RMS_NORM, MF_TYPE_F32, node(g, x)->ne, 1, &x);
    if (id >= 0) {
        g->nodes[id].p.norm.eps = eps;
        g->nodes[id].p.norm.w = w;
    }
    return id;
}

int32_t mf_graph_matmul(mf_graph *g, int32_t x, const mf_weight *w, const mf_weight *b) {
    if (g->status || x < 0) return -1;
    const mf_node *xn = node(g, x);
    MF_ASSERT(xn->type == MF_TYPE_F32 && xn->ne[0] == w->ne[0] && xn->ne[2] == 1 && xn->ne[3] == 1);
    MF_ASSERT(!b || (b->type == MF_TYPE_F32 && b->ne[0] == w->ne[1]));
    int64_t ne[4] = {w->ne[1], xn->ne[1], 1, 1};
    int32_t id = push(g, MF_OP_MATMUL, MF_TYPE_F32, ne, 1, &x);
    if (id >= 0) {
        g->nodes[id].p.mm.w = w;
        g->nodes[id].p.mm.b = b;
    }
    return id;
}

int32_t mf_graph_rope(mf_graph *g, int32_t x, int32_t pos, const mf_rope_params *rp) {
    if (g->status || x < 0 || pos < 0) return -1;
    const mf_node *xn = node(g, x);
    MF_ASSERT(xn->ne[2] == node(g, pos)->ne[0] && rp->n_dims <= xn->ne[0] && rp->n_dims % 2 == 0);
    int32_t src[2] = {x, pos};
    int32_t id = push(g, MF_OP_ROPE, MF_TYPE_F32, xn->ne, 2, src);
    if (id >= 0) g->nodes[id].p.rope = *rp;
    return id;
}

static int32_t binary(mf_graph *g, mf_op op, int32_t a, int32_t b) {
    if (g->status || a < 0 || b < 0) return -1;
    MF_ASSERT(mf_node_nelements(node(g, a)) == mf_node_nelements(node(g, b)));
    int32_t src[2] = {a, b};
    return push(g, op, MF_TYPE_F32, node(g, a)->ne, 2, src);
}

int32_t mf_graph_add(mf_graph *g, int32_t a, int32_t b) { return binary(g, MF_OP_ADD, a, b); }
int32_t mf_graph_mul(mf_graph *g, int32_t a, int32_t b) { return binary(g, MF_OP_MUL, a, b); }

int32_t mf_graph_silu(mf_graph *g, int32_t x) {
    if (g->status || x < 0) return -1;
    return push(g, MF_OP_SILU, MF_TYPE_F32, node(g, x)->ne, 1, &x);
}


int32_t mf_graph_kv_store(mf_graph *g, int32_t k, int32_t v, int32_t cells, int32_t layer) {
    if (g->status || k < 0 || v < 0 || cells < 0) return -1;
    const mf_node *kn = node(g, k);
    MF_ASSERT(mf_node_nelements(kn) == mf_node_nelements(node(g, v)) && kn->ne[2] == node(g, cells)->ne[0]);
    /* The node's own output is empty: its effect is the write into the cache. Its shape records
     * what it stores, {head_dim, n_head_kv, n_tokens}. */
    int32_t src[3] = {k, v, cells};
    int32_t id = push(g, MF_OP_KV_STORE, MF_TYPE_F32, kn->ne, 3, src);
    if (id >= 0) g->nodes[id].p.kv.layer = layer;
    return id;
}

int32_t mf_graph_attention(mf_graph *g, int32_t q, int32_t pos, int32_t seq, int32_t kv_store,
                           const mf_attn_params *ap) {
    if (g->status || q < 0 || pos < 0 || seq < 0 || kv_store < 0) return -1;
    const mf_node *qn = node(g, q);
    MF_ASSERT(qn->ne[0] == ap->head_dim && qn->ne[1] == ap->n_head && ap->n_head % ap->n_head_kv == 0);
    int64_t ne[4] = {ap->head_dim * ap->n_head, qn->ne[2], 1, 1};
    int32_t src[4] = {q, pos, seq, kv_store};
    int32_t id = push(g, MF_OP_ATTENTION, MF_TYPE_F32, ne, 4, src);
    if (id >= 0) g->nodes[id].p.attn = *ap;
    return id;
}

int32_t mf_graph_view(mf_graph *g, int32_t src, const int64_t ne[4], int64_t offset) {
    if (g->status || src < 0) return -1;
    const mf_node *s = node(g, src);
    int64_t n = ne[0] * MF_MAX(ne[1], 1) * MF_MAX(ne[2], 1) * MF_MAX(ne[3], 1);
    MF_ASSERT(offset >= 0 && offset % 4 == 0 && offset / 4 + n <= mf_node_nelements(s));
    int32_t id = push(g, MF_OP_VIEW, s->type, ne, 1, &src);
    if (id >= 0) g->nodes[id].p.view.offset = offset;
    return id;
}

int32_t mf_graph_reshape_3d(mf_graph *g, int32_t src, int64_t ne0, int64_t ne1, int64_t ne2) {
    int64_t ne[4] = {ne0, ne1, ne2, 1};
    return mf_graph_view(g, src, ne, 0);
}

int32_t mf_graph_name(mf_graph *g, int32_t id, const char *fmt, ...) {
    if (id < 0) return id;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g->nodes[id].name, MF_NODE_NAME_MAX, fmt, ap);
    va_end(ap);
    return id;
}

void mf_graph_set_output(mf_graph *g, int32_t id) {
    if (id < 0) return;
    g->nodes[id].is_output = true;
    g->output = id;
}

int32_t mf_graph_n_consumers(const mf_graph *g, int32_t id) {
    int32_t c = 0;
    for (int32_t i = id + 1; i < g->n_nodes; i++) {
        if (g->nodes[i].op == MF_OP_NONE) continue;
        for (int s = 0; s < g->nodes[i].n_src; s++) c += g->nodes[i].src[s] == id;
    }
    return c;
}
