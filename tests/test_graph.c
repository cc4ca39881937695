/* test_graph.c: the graph IR on small random graphs: the builder records without computing, the
 * scheduler's liveness plan never lets two live buffers overlap and reuses memory, the SwiGLU and
 * QKV-bias-RoPE-KV-store fusions fire only when enabled and give the unfused results, and the
 * JSON/DOT exports describe the nodes. */
#include "test.h"

#include "cpu/cpu.h"
#include "graph/sched.h"

#include <jansson.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

static uint64_t rng = 0x1234567887654321ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

typedef struct {
    mf_weight w;
    float *data;
} fweight;

static fweight make_weight(const char *name, int64_t ne0, int64_t ne1) {
    fweight f;
    f.data = malloc((size_t)(ne0 * ne1) * sizeof(float));
    for (int64_t i = 0; i < ne0 * ne1; i++) f.data[i] = frand() * 0.5f;
    f.w = (mf_weight){.name = name, .type = MF_TYPE_F32, .ne = {ne0, ne1, 1, 1}, .row_bytes = (size_t)ne0 * 4,
                      .data = f.data};
    return f;
}

enum { E = 64, HD = 16, NH = 4, NKV = 2, FF = 96, V = 50, NT = 5 };

typedef struct {
    fweight emb, norm, wq, wk, wv, bq, bk, bv, wo, gate, up, down;
} weights;

static void make_weights(weights *w) {
    w->emb = make_weight("emb", E, V);
    w->norm = make_weight("norm", E, 1);
    w->wq = make_weight("wq", E, NH * HD);
    w->wk = make_weight("wk", E, NKV * HD);
    w->wv = make_weight("wv", E, NKV * HD);
    w->bq = make_weight("bq", NH * HD, 1);
    w->bk = make_weight("bk", NKV * HD, 1);
    w->bv = make_weight("bv", NKV * HD, 1);
    w->wo = make_weight("wo", NH * HD, E);
    w->gate = make_weight("gate", E, FF);
    w->up = make_weight("up", E, FF);
    w->down = make_weight("down", FF, E);
}

static void free_weights(weights *w) {
    fweight *all = &w->emb;
    for (int i = 0; i < 12; i++) free(all[i].data);
}

/* One transformer block, as the model builders emit it. */
static void build_block(mf_graph *g, const weights *w, int32_t *out_ffn) {
    mf_graph_init(g);
    int32_t tok = mf_graph_input(g, MF_INPUT_TOKENS, NT), pos = mf_graph_input(g, MF_INPUT_POS, NT);
    int32_t seq = mf_graph_input(g, MF_INPUT_SEQ, NT), cells = mf_graph_input(g, MF_INPUT_CELLS, NT);
    int32_t x = mf_graph_get_rows(g, &w->emb.w, tok);
    int32_t h = mf_graph_rms_norm(g, x, &w->norm.w, 1e-6f);
    int32_t q = mf_graph_reshape_3d(g, mf_graph_matmul(g, h, &w->wq.w, &w->bq.w), HD, NH, NT);
    int32_t k = mf_graph_reshape_3d(g, mf_graph_matmul(g, h, &w->wk.w, &w->bk.w), HD, NKV, NT);
    int32_t v = mf_graph_reshape_3d(g, mf_graph_matmul(g, h, &w->wv.w, &w->bv.w), HD, NKV, NT);
    mf_rope_params rp = {.mode = MF_ROPE_NEOX, .n_dims = HD, .freq_base = 10000.0f, .freq_scale = 1.0f};
    q = mf_graph_rope(g, q, pos, &rp);
    k = mf_graph_rope(g, k, pos, &rp);
    int32_t st = mf_graph_kv_store(g, k, v, cells, 0);
    mf_attn_params ap = {.layer = 0, .n_head = NH, .n_head_kv = NKV, .head_dim = HD, .scale = 0.25f};
    int32_t a = mf_graph_attention(g, q, pos, seq, st, &ap);
    x = mf_graph_add(g, mf_graph_matmul(g, a, &w->wo.w, NULL), x);
    int32_t gt = mf_graph_silu(g, mf_graph_matmul(g, x, &w->gate.w, NULL));
    int32_t f = mf_graph_mul(g, gt, mf_graph_matmul(g, x, &w->up.w, NULL));
    f = mf_graph_matmul(g, f, &w->down.w, NULL);
    *out_ffn = mf_graph_add(g, f, x);
    mf_graph_set_output(g, *out_ffn);
}

static int count_op(const mf_graph *g, mf_op op) {
    int c = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) c += g->nodes[i].op == op;
    return c;
}

/* Live range of every storage root: [first node, last reader]; overlapping ranges must not share
 * bytes. */
static void check_no_overlap(const mf_graph *g) {
    int32_t n = g->n_nodes;
    int32_t *last = calloc((size_t)n, sizeof *last);
    for (int32_t i = 0; i < n; i++) last[i] = i;
    for (int32_t i = 0; i < n; i++) {
        if (g->nodes[i].op == MF_OP_NONE) continue;
        for (int s = 0; s < g->nodes[i].n_src; s++) {
            int32_t r = g->nodes[i].src[s];
            while (g->nodes[r].op == MF_OP_VIEW) r = g->nodes[r].src[0];
            if (last[r] < i) last[r] = i;
        }
    }
    int bad = 0;
    for (int32_t a = 0; a < n; a++) {
        const mf_node *na = &g->nodes[a];
        if (na->offset < 0) continue;
        int32_t a0 = na->op == MF_OP_INPUT ? 0 : a, a1 = na->op == MF_OP_INPUT || na->is_output ? n : last[a];
        for (int32_t b = a + 1; b < n; b++) {
            const mf_node *nb = &g->nodes[b];
            if (nb->offset < 0) continue;
            int32_t b0 = nb->op == MF_OP_INPUT ? 0 : b, b1 = nb->op == MF_OP_INPUT || nb->is_output ? n : last[b];
            if (a1 < b0 || b1 < a0) continue; /* not live at the same time */
            int64_t ea = na->offset + (int64_t)mf_node_nbytes(na), eb = nb->offset + (int64_t)mf_node_nbytes(nb);
            if (na->offset < eb && nb->offset < ea) bad++;
        }
    }
    CHECKF(bad == 0, "%d pairs of live buffers overlap", bad);
    free(last);
}

/* Build, plan with the given fusions, run on tokens, return the output (malloc'd) and the KV. */
static float *run_block(const weights *w, unsigned fuse, mf_backend *cpu, mf_kv_cache *kv, mf_graph *g, mf_plan *plan) {
    int32_t out;
    build_block(g, w, &out);
    /* Building computes nothing: no node has data yet. */
    for (int32_t i = 0; i < g->n_nodes; i++) CHECK(g->nodes[i].data == NULL && g->nodes[i].backend == -1);
    CHECK(mf_kv_init(kv, 1, 16, NKV, HD, MF_TYPE_F32) == MF_OK);
    CHECK(mf_sched_plan(g, &cpu, 1, fuse, kv, plan) == MF_OK);
    CHECK(plan->arena_size < plan->naive_size);
    CHECK(plan->n_splits == 1);
    check_no_overlap(g);
    void *arena = mf_aligned_alloc(64, plan->arena_size), *work = mf_aligned_alloc(64, plan->work_size + 64);
    memset(arena, 0xff, plan->arena_size); /* NaN everywhere: a read of an unwritten buffer shows */
    mf_sched_bind(g, arena);
    int32_t *tok = g->nodes[g->inputs[MF_INPUT_TOKENS]].data, *pos = g->nodes[g->inputs[MF_INPUT_POS]].data;
    int32_t *seq = g->nodes[g->inputs[MF_INPUT_SEQ]].data, *cells = g->nodes[g->inputs[MF_INPUT_CELLS]].data;
    for (int t = 0; t < NT; t++) tok[t] = (t * 7 + 3) % V, pos[t] = t, seq[t] = 0;
    mf_kv_view_buf vb = {0};
    CHECK(mf_kv_reserve(kv, NT, pos, seq, tok, cells) == MF_OK);
    CHECK(mf_kv_view_build(kv, &vb, NT, pos, seq) == MF_OK);
    CHECK(mf_sched_run(g, plan, &cpu, kv, work, NULL, NULL) == MF_OK);
    mf_kv_view_buf_free(&vb);
    float *res = malloc(E * NT * sizeof(float));
    memcpy(res, g->nodes[g->output].data, E * NT * sizeof(float));
    mf_aligned_free(arena);
    mf_aligned_free(work);
    return res;
}

static void test_block(void) {
    weights w;
    make_weights(&w);
    mf_backend *cpu;
    CHECK(mf_cpu_backend_create(2, &cfg, &cpu) == MF_OK);
    mf_kv_cache kv0, kv1;
    mf_graph g0, g1;
    mf_plan p0, p1;
    float *r0 = run_block(&w, 0, cpu, &kv0, &g0, &p0);
    float *r1 = run_block(&w, MF_FUSE_ALL, cpu, &kv1, &g1, &p1);
    CHECK(count_op(&g0, MF_OP_SWIGLU) == 0 && count_op(&g0, MF_OP_QKV_ROPE_STORE) == 0);
    CHECK(count_op(&g1, MF_OP_SWIGLU) == 1 && count_op(&g1, MF_OP_QKV_ROPE_STORE) == 1);
    CHECK(count_op(&g1, MF_OP_ROPE) == 0 && count_op(&g1, MF_OP_KV_STORE) == 0 && count_op(&g1, MF_OP_SILU) == 0);
    double maxd = 0;
    int finite = 1;
    for (int i = 0; i < E * NT; i++) {
        maxd = fmax(maxd, fabs(r0[i] - r1[i]));
        finite &= isfinite(r0[i]);
    }
    CHECK(finite);
    CHECKF(maxd < 1e-5, "fused and unfused differ by %g", maxd);
    CHECK(!memcmp(kv0.v[0], kv1.v[0], kv0.row_bytes * NT)); /* V is not roped: identical */
    double kd = 0;
    for (int i = 0; i < NKV * HD * NT; i++) kd = fmax(kd, fabs(((float *)kv0.k[0])[i] - ((float *)kv1.k[0])[i]));
    CHECK(kd < 1e-6);

    /* The same block from the reference kernels, token by token. */
    mf_kv_cache kvr;
    CHECK(mf_kv_init(&kvr, 1, 16, NKV, HD, MF_TYPE_F32) == MF_OK);
    static float xs[NT][E], qs[NT][NH * HD], ref[NT][E];
    mf_rope_params rp = {.mode = MF_ROPE_NEOX, .n_dims = HD, .freq_base = 10000.0f, .freq_scale = 1.0f};
    int32_t pos[NT], seq[NT], tok[NT] = {0}, cells[NT];
    for (int t = 0; t < NT; t++) pos[t] = t, seq[t] = 0;
    CHECK(mf_kv_reserve(&kvr, NT, pos, seq, tok, cells) == MF_OK);
    mf_kv_view_buf vb = {0};
    CHECK(mf_kv_view_build(&kvr, &vb, NT, pos, seq) == MF_OK);
    for (int t = 0; t < NT; t++) {
        float h[E], q[NH * HD], k[NKV * HD], v[NKV * HD], kr[NKV * HD];
        memcpy(xs[t], w.emb.data + ((t * 7 + 3) % V) * E, sizeof xs[t]);
        mf_cpu_rms_norm_row_ref(xs[t], w.norm.data, h, E, 1e-6f);
        mf_cpu_matmul_ref(&w.wq.w, &w.bq.w, h, q, 1);
        mf_cpu_matmul_ref(&w.wk.w, &w.bk.w, h, k, 1);
        mf_cpu_matmul_ref(&w.wv.w, &w.bv.w, h, v, 1);
        for (int hh = 0; hh < NH; hh++) mf_cpu_rope_head_ref(&rp, t, q + hh * HD, qs[t] + hh * HD, HD);
        for (int hh = 0; hh < NKV; hh++) mf_cpu_rope_head_ref(&rp, t, k + hh * HD, kr + hh * HD, HD);
        mf_cpu_kv_store_row(&kvr, 0, cells[t], kr, v);
    }
    static float att[NT][NH * HD];
    mf_attn_params ap = {.layer = 0, .n_head = NH, .n_head_kv = NKV, .head_dim = HD, .scale = 0.25f};
    mf_cpu_attention_ref(&ap, &kvr, &qs[0][0], &att[0][0], NT);
    mf_kv_view_buf_free(&vb);
    for (int t = 0; t < NT; t++) {
        float o[E], gt[FF], up[FF], dn[E];
        mf_cpu_matmul_ref(&w.wo.w, NULL, att[t], o, 1);
        for (int i = 0; i < E; i++) xs[t][i] += o[i];
        mf_cpu_matmul_ref(&w.gate.w, NULL, xs[t], gt, 1);
        mf_cpu_matmul_ref(&w.up.w, NULL, xs[t], up, 1);
        for (int i = 0; i < FF; i++) gt[i] = gt[i] / (1.0f + expf(-gt[i])) * up[i];
        mf_cpu_matmul_ref(&w.down.w, NULL, gt, dn, 1);
        for (int i = 0; i < E; i++) ref[t][i] = dn[i] + xs[t][i];
    }
    double rd = 0;
    for (int i = 0; i < E * NT; i++) rd = fmax(rd, fabs(r0[i] - (&ref[0][0])[i]));
    CHECKF(rd < 1e-4, "graph result differs from the reference kernels by %g", rd);
    mf_kv_free(&kvr);

    /* Exports. */
    const char *names[1] = {"CPU"};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(mf_graph_write_json(&g1, names, "prefill", f) == MF_OK);
    fclose(f);
    json_error_t err;
    json_t *root = json_loads(buf, 0, &err);
    CHECKF(root != NULL, "graph JSON does not parse: %s", err.text);
    if (root) {
        json_t *nodes = json_object_get(root, "nodes");
        CHECK(json_array_size(nodes) == (size_t)json_integer_value(json_object_get(root, "n_nodes")));
        int matmuls = 0, with_weight = 0;
        size_t i;
        json_t *n;
        json_array_foreach(nodes, i, n) {
            if (!strcmp(json_string_value(json_object_get(n, "op")), "matmul")) {
                matmuls++;
                json_t *wj = json_object_get(n, "weight");
                with_weight += wj && json_string_value(json_object_get(wj, "name")) &&
                               !strcmp(json_string_value(json_object_get(wj, "type")), "F32");
            }
            CHECK(!strcmp(json_string_value(json_object_get(n, "backend")), "CPU"));
        }
        CHECK(matmuls == 7 && with_weight == 7);
        CHECK(!strcmp(json_string_value(json_object_get(root, "kind")), "prefill"));
        json_decref(root);
    }
    free(buf);
    f = open_memstream(&buf, &len);
    CHECK(mf_graph_write_dot(&g1, names, "prefill", f) == MF_OK);
    fclose(f);
    CHECK(strstr(buf, "digraph") && strstr(buf, "qkv_rope_store") && strstr(buf, "wq F32"));
    free(buf);

    free(r0);
    free(r1);
    mf_graph_free(&g0);
    mf_graph_free(&g1);
    mf_plan_free(&p0);
    mf_plan_free(&p1);
    mf_kv_free(&kv0);
    mf_kv_free(&kv1);
    cpu->free(cpu);
    free_weights(&w);
}

/* A chain of adds reuses memory: at most a few buffers live at once. */
static void test_liveness_chain(void) {
    mf_graph g;
    mf_graph_init(&g);
    fweight emb = make_weight("emb", 256, 10);
    int32_t ids = mf_graph_input(&g, MF_INPUT_TOKENS, 8);
    int32_t x = mf_graph_get_rows(&g, &emb.w, ids);
    for (int i = 0; i < 50; i++) x = mf_graph_silu(&g, x);
    mf_graph_set_output(&g, x);
    mf_backend *cpu;
    CHECK(mf_cpu_backend_create(1, &cfg, &cpu) == MF_OK);
    mf_plan p;
    mf_kv_cache kv = {0};
    CHECK(mf_sched_plan(&g, &cpu, 1, MF_FUSE_ALL, &kv, &p) == MF_OK);
    size_t one = 256 * 8 * 4;
    CHECKF(p.arena_size <= 4 * one, "arena %zu for a chain of 51 buffers of %zu", p.arena_size, one);
    CHECK(p.naive_size >= 51 * one);
    check_no_overlap(&g);
    mf_plan_free(&p);
    mf_graph_free(&g);
    cpu->free(cpu);
    free(emb.data);
}

/* A second backend first in priority that takes only matmuls (running them with the CPU's
 * kernels): assignment follows priority, splits alternate, cross-backend reads are listed as
 * copies, and the results equal the CPU-only run. A backend with its own memory is refused until
 * copies between memories exist. */
static mf_backend *fake_cpu;
static bool fake_supports(const mf_backend *b, const mf_graph *g, const mf_node *n) {
    return n->op == MF_OP_MATMUL && fake_cpu->supports(fake_cpu, g, n);
}
static mf_status fake_compute(mf_backend *b, mf_graph *g, int32_t id, mf_kv_cache *kv, void *work, size_t ws) {
    return fake_cpu->compute(fake_cpu, g, id, kv, work, ws);
}
static size_t fake_work(const mf_backend *b, const mf_graph *g, const mf_node *n, const mf_kv_cache *kv) {
    return fake_cpu->work_size(fake_cpu, g, n, kv);
}

static void test_two_backends(void) {
    weights w;
    make_weights(&w);
    mf_backend *cpu;
    CHECK(mf_cpu_backend_create(2, &cfg, &cpu) == MF_OK);
    fake_cpu = cpu;
    mf_backend fake = {.name = "MM", .supports = fake_supports, .work_size = fake_work, .compute = fake_compute,
                       .host_memory = true};
    mf_kv_cache kv0, kv1;
    mf_graph g0, g1;
    mf_plan p0, p1;
    float *r0 = run_block(&w, MF_FUSE_ALL, cpu, &kv0, &g0, &p0);
    int32_t out;
    build_block(&g1, &w, &out);
    mf_backend *both[2] = {&fake, cpu};
    CHECK(mf_kv_init(&kv1, 1, 16, NKV, HD, MF_TYPE_F32) == MF_OK);
    CHECK(mf_sched_plan(&g1, both, 2, MF_FUSE_ALL, &kv1, &p1) == MF_OK);
    int on_fake = 0, copies = 0;
    for (int32_t i = 0; i < g1.n_nodes; i++)
        if (g1.nodes[i].op != MF_OP_NONE) {
            CHECK((g1.nodes[i].backend == 0) == (g1.nodes[i].op == MF_OP_MATMUL));
            on_fake += g1.nodes[i].backend == 0;
        }
    CHECK(on_fake == 7);
    CHECK(p1.n_splits > 2);
    for (int32_t s = 0; s < p1.n_splits; s++) {
        copies += p1.splits[s].n_copy_in;
        for (int32_t k = 0; k < p1.splits[s].n_copy_in; k++)
            CHECK(g1.nodes[p1.splits[s].copy_in[k]].backend != p1.splits[s].backend);
        if (s > 0) CHECK(p1.splits[s].backend != p1.splits[s - 1].backend && p1.splits[s].first > p1.splits[s - 1].last);
    }
    CHECK(copies > 0);
    void *arena = mf_aligned_alloc(64, p1.arena_size), *work = mf_aligned_alloc(64, p1.work_size + 64);
    mf_sched_bind(&g1, arena);
    int32_t *tok = g1.nodes[g1.inputs[MF_INPUT_TOKENS]].data, *pos = g1.nodes[g1.inputs[MF_INPUT_POS]].data;
    int32_t *seq = g1.nodes[g1.inputs[MF_INPUT_SEQ]].data, *cells = g1.nodes[g1.inputs[MF_INPUT_CELLS]].data;
    for (int t = 0; t < NT; t++) tok[t] = (t * 7 + 3) % V, pos[t] = t, seq[t] = 0;
    mf_kv_view_buf vb = {0};
    mf_kv_clear(&kv1);
    CHECK(mf_kv_reserve(&kv1, NT, pos, seq, tok, cells) == MF_OK);
    CHECK(mf_kv_view_build(&kv1, &vb, NT, pos, seq) == MF_OK);
    CHECK(mf_sched_run(&g1, &p1, both, &kv1, work, NULL, NULL) == MF_OK);
    mf_kv_view_buf_free(&vb);
    CHECK(!memcmp(r0, g1.nodes[g1.output].data, E * NT * sizeof(float)));
    mf_aligned_free(arena);
    mf_aligned_free(work);
    mf_plan_free(&p1);
    mf_graph_free(&g1);

    fake.host_memory = false;
    build_block(&g1, &w, &out);
    CHECK(mf_sched_plan(&g1, both, 2, MF_FUSE_ALL, &kv1, &p1) == MF_ERR_UNSUPPORTED);
    CHECK(strstr(mf_last_error(), "copies between device memories") != NULL);
    mf_graph_free(&g1);

    free(r0);
    mf_graph_free(&g0);
    mf_plan_free(&p0);
    mf_kv_free(&kv0);
    mf_kv_free(&kv1);
    cpu->free(cpu);
    free_weights(&w);
}

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
    test_block();
    test_two_backends();
    test_liveness_chain();
    return test_summary("test_graph");
}
