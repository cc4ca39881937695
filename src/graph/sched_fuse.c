/* sched_fuse.c: fusion passes. Each rewrites matching node patterns in place (the fused op takes
 * the slot of the last node of the pattern, so the list stays topological) and marks the absorbed
 * nodes MF_OP_NONE. A pattern is fused only when its intermediate results have no other readers
 * and the backend of the replaced node supports the fused op. */
#include "graph/sched.h"

static bool backend_supports(mf_backend *const *backends, const mf_graph *g, const mf_node *n) {
    return n->backend >= 0 && backends[n->backend]->supports(backends[n->backend], g, n);
}

int32_t mf_fuse_swiglu(mf_graph *g, mf_backend *const *backends) {
    int32_t count = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        mf_node *n = &g->nodes[i];
        if (n->op != MF_OP_MUL) continue;
        for (int side = 0; side < 2; side++) {
            int32_t s = n->src[side], other = n->src[1 - side];
            mf_node *silu = &g->nodes[s];
            if (silu->op != MF_OP_SILU || silu->is_output || mf_graph_n_consumers(g, s) != 1) continue;
            if (silu->backend != n->backend) continue;
            mf_node cand = *n;
            cand.op = MF_OP_SWIGLU;
            cand.src[0] = silu->src[0];
            cand.src[1] = other;
            if (!backend_supports(backends, g, &cand)) continue;
            *n = cand;
            silu->op = MF_OP_NONE;
            count++;
            break;
        }
    }
    return count;
}

/* Follow a zero-offset VIEW to its source (a reshape). */
static int32_t unview(const mf_graph *g, int32_t id) {
    const mf_node *n = &g->nodes[id];
    return n->op == MF_OP_VIEW && n->p.view.offset == 0 ? n->src[0] : id;
}

static bool single_use(const mf_graph *g, int32_t id) {
    return !g->nodes[id].is_output && mf_graph_n_consumers(g, id) == 1;
}

/* Pattern (per layer), as the model builders emit it:
 *   q = view(matmul(x, wq, bq)); k = view(matmul(x, wk, bk)); v = view(matmul(x, wv, bv))
 *   qr = rope(q, pos); kr = rope(k, pos); st = kv_store(kr, v, cells); attention(qr, pos, seq, st)
 * becomes st := qkv_rope_store(q, k, v, pos, cells) -> roped q, and the attention reads st for
 * both q and the store dependency. The biases move from the matmuls into the fused op. */
int32_t mf_fuse_qkv_rope_store(mf_graph *g, mf_backend *const *backends) {
    int32_t count = 0;
    for (int32_t a = 0; a < g->n_nodes; a++) {
        mf_node *attn = &g->nodes[a];
        if (attn->op != MF_OP_ATTENTION) continue;
        int32_t qr = attn->src[0], st = attn->src[3];
        mf_node *qrn = &g->nodes[qr], *stn = &g->nodes[st];
        if (qrn->op != MF_OP_ROPE || stn->op != MF_OP_KV_STORE || qr > st) continue;
        int32_t kr = stn->src[0];
        mf_node *krn = &g->nodes[kr];
        if (krn->op != MF_OP_ROPE || krn->src[1] != qrn->src[1]) continue;
        if (memcmp(&krn->p.rope, &qrn->p.rope, sizeof krn->p.rope) != 0) continue;
        if (!single_use(g, qr) || !single_use(g, kr) || !single_use(g, st)) continue;
        int32_t views[3] = {qrn->src[0], krn->src[0], stn->src[1]};
        int32_t mm[3];
        bool ok = true;
        for (int j = 0; j < 3; j++) {
            mm[j] = unview(g, views[j]);
            ok &= g->nodes[mm[j]].op == MF_OP_MATMUL && single_use(g, mm[j]) && single_use(g, views[j]);
        }
        if (!ok) continue;
        mf_node cand = *stn;
        cand.op = MF_OP_QKV_ROPE_STORE;
        cand.n_src = 5;
        cand.src[0] = qrn->src[0];
        cand.src[1] = krn->src[0];
        cand.src[2] = stn->src[1];
        cand.src[3] = qrn->src[1];
        cand.src[4] = stn->src[2];
        memcpy(cand.ne, qrn->ne, sizeof cand.ne);
        int32_t layer = stn->p.kv.layer;
        memset(&cand.p, 0, sizeof cand.p);
        cand.p.qkv.rope = qrn->p.rope;
        cand.p.qkv.attn = attn->p.attn;
        cand.p.qkv.attn.layer = layer;
        cand.p.qkv.bq = g->nodes[mm[0]].p.mm.b;
        cand.p.qkv.bk = g->nodes[mm[1]].p.mm.b;
        cand.p.qkv.bv = g->nodes[mm[2]].p.mm.b;
        if (!backend_supports(backends, g, &cand)) continue;
        for (int j = 0; j < 3; j++) g->nodes[mm[j]].p.mm.b = NULL;
        snprintf(cand.name, sizeof cand.name, "qkv_rope_store-%d", layer);
        *stn = cand;
        qrn->op = MF_OP_NONE;
        krn->op = MF_OP_NONE;
        attn->src[0] = st;
        count++;
    }
    return count;
}
