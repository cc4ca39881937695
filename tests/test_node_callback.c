/* test_node_callback.c: mf_context_params.node_callback (the viewer's live events) on a fixture
 * model: one event per executed node of each pass, with the export's ids, names, ops and shapes;
 * statistics that equal the values handed over and the MINFER_TRACE file's; MACs of a matmul as
 * its weight's shape says; logits bit for bit the same with the callback as without. */
#include "test.h"

#include <jansson.h>
#include <unistd.h>

#define MAX_EV 4096

typedef struct {
    mf_node_event ev;
    char name[64], op[32];
    double data_max; /* recomputed from ev.data */
    bool data_ok;    /* min/max/mean/count agree with ev.data */
} rec;

static rec recs[MAX_EV];
static int n_recs;

static void on_node(const mf_node_event *ev, void *user) {
    (void)user;
    if (n_recs >= MAX_EV) return;
    rec *r = &recs[n_recs++];
    r->ev = *ev;
    snprintf(r->name, sizeof r->name, "%s", ev->name);
    snprintf(r->op, sizeof r->op, "%s", ev->op);
    r->data_ok = true;
    if (ev->data) {
        double mn = INFINITY, mx = -INFINITY, sum = 0;
        int64_t fin = 0;
        for (int64_t i = 0; i < ev->count; i++)
            if (isfinite(ev->data[i])) mn = fmin(mn, ev->data[i]), mx = fmax(mx, ev->data[i]), sum += ev->data[i], fin++;
        r->data_max = mx;
        r->data_ok = fin + ev->n_nan + ev->n_inf == ev->count && (!fin || (mn == ev->min && mx == ev->max &&
                                                                           fabs(sum / (double)fin - ev->mean) <= 1e-9 * (1 + fabs(ev->mean))));
    }
    r->ev.data = NULL;
}

/* The export of the graph a pass of n tokens runs (one output row). */
static json_t *export_graph(mf_context *c, int32_t n) {
    char path[] = "/tmp/minfer-test-graph-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return NULL;
    close(fd);
    json_t *g = mf_context_dump_graph(c, n, 1, "json", path) ? NULL : json_load_file(path, 0, NULL);
    unlink(path);
    return g;
}

static json_t *find_node(json_t *g, int id) {
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(g, "nodes"), i, n) if (json_integer_value(json_object_get(n, "id")) == id) return n;
    return NULL;
}

/* Check the events of pass `pass` against graph g; returns the number of events of that pass. */
static int check_pass(json_t *g, int pass, bool decode, int n_tokens) {
    int n_ev = 0, last_id = -1, n_expect = 0;
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(g, "nodes"), i, n) {
        const char *op = json_string_value(json_object_get(n, "op"));
        n_expect += strcmp(op, "input") && strcmp(op, "view") && strcmp(op, "kv_store");
    }
    for (int k = 0; k < n_recs; k++) {
        const rec *r = &recs[k];
        if (r->ev.pass != pass) continue;
        n_ev++;
        json_t *node = find_node(g, r->ev.id);
        CHECKF(node, "event for node %d, which the export lacks", r->ev.id);
        if (!node) continue;
        CHECK(r->ev.id > last_id);
        last_id = r->ev.id;
        CHECK(!strcmp(r->name, json_string_value(json_object_get(node, "name"))));
        CHECK(!strcmp(r->op, json_string_value(json_object_get(node, "op"))));
        for (int d = 0; d < 4; d++) CHECK(r->ev.ne[d] == json_integer_value(json_array_get(json_object_get(node, "shape"), d)));
        CHECK(r->ev.decode == decode && r->ev.n_tokens == n_tokens);
        CHECK(r->ev.seconds >= 0 && r->ev.bytes > 0);
        CHECKF(r->data_ok, "node %d %s: statistics disagree with the values", r->ev.id, r->name);
        CHECK(r->ev.n_nan == 0 && r->ev.n_inf == 0);
        json_t *w = json_object_get(node, "weight");
        if (!strcmp(r->op, "matmul") && w) {
            const long long K = json_integer_value(json_array_get(json_object_get(w, "shape"), 0));
            const long long N = json_integer_value(json_array_get(json_object_get(w, "shape"), 1));
            CHECK((long long)r->ev.macs == K * N * r->ev.ne[1]);
        } else if (strcmp(r->op, "attention")) {
            CHECK(r->ev.macs == 0);
        }
    }
    CHECKF(n_ev == n_expect, "pass %d: %d events, %d executed nodes with an output", pass, n_ev, n_expect);
    return n_ev;
}

int main(void) {
    mf_model *m;
    if (mf_model_load(fixture("models/mini-qwen2.Q8_0.gguf"), &m)) {
        fprintf(stderr, "%s\n", mf_last_error());
        return 1;
    }
    const int32_t V = mf_model_n_vocab(m);
    const int32_t prompt[5] = {1, 17, 300, 42, 9};
    char trace_path[] = "/tmp/minfer-test-trace-XXXXXX";
    int fd = mkstemp(trace_path);
    CHECK(fd >= 0);
    close(fd);

    /* the reference: no callback */
    mf_context_params p = mf_context_default_params();
    p.n_ctx = 64;
    p.n_threads = 2;
    p.isa = test_isa();
    p.order = test_order();
    mf_context *plain, *obs;
    CHECK(!mf_context_create(m, &p, &plain));
    p.node_callback = on_node;
    p.trace_path = trace_path;
    CHECK(!mf_context_create(m, &p, &obs));

    float *ref = malloc((size_t)V * sizeof *ref);
    const mf_batch b5 = {.n_tokens = 5, .tokens = prompt};
    CHECK(!mf_context_decode(plain, &b5) && !mf_context_decode(obs, &b5));
    memcpy(ref, mf_context_logits(plain, 0), (size_t)V * sizeof *ref);
    CHECK(!memcmp(ref, mf_context_logits(obs, 0), (size_t)V * sizeof *ref));
    /* the logits node's event saw exactly these logits */
    const rec *last = n_recs ? &recs[n_recs - 1] : NULL;
    CHECK(last && last->ev.count == V);
    double mx = -INFINITY;
    for (int32_t i = 0; i < V; i++) mx = fmax(mx, ref[i]);
    CHECK(last && last->data_max == mx && last->ev.max == mx);
    const int32_t next = 77;
    const mf_batch b1 = {.n_tokens = 1, .tokens = &next};
    CHECK(!mf_context_decode(plain, &b1) && !mf_context_decode(obs, &b1));
    CHECK(!memcmp(mf_context_logits(plain, 0), mf_context_logits(obs, 0), (size_t)V * sizeof(float)));

    json_t *gp = export_graph(obs, 5), *gd = export_graph(obs, 1);
    CHECK(gp && gd);
    int n0 = gp ? check_pass(gp, 0, false, 5) : 0;
    if (gd) check_pass(gd, 1, true, 1);
    const int n_first = n_recs;

    /* the trace file, written when the context goes, holds the same statistics */
    mf_context_free(obs);
    json_t *t = json_load_file(trace_path, 0, NULL);
    unlink(trace_path);
    CHECK(t);
    json_t *run0 = json_array_get(json_object_get(t, "runs"), 0), *tn = json_object_get(run0, "nodes");
    CHECK((int)json_array_size(tn) == n0);
    for (int k = 0; k < n0 && k < (int)json_array_size(tn); k++) {
        json_t *e = json_array_get(tn, (size_t)k);
        CHECK(json_integer_value(json_object_get(e, "id")) == recs[k].ev.id);
        CHECK(json_integer_value(json_object_get(e, "count")) == recs[k].ev.count);
        CHECK(json_real_value(json_object_get(e, "max")) == recs[k].ev.max);
        CHECK(json_real_value(json_object_get(e, "rms")) == recs[k].ev.rms);
    }
    CHECK(n_first == n_recs);
    json_decref(t);
    json_decref(gp);
    json_decref(gd);
    free(ref);
    mf_context_free(plain);
    mf_model_free(m);
    return test_summary("test_node_callback");
}
