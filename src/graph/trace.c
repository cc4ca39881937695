/* trace.c: collects node statistics into a jansson document; written once at the end. At most
 * MAX_RUNS forward passes are recorded so a long generation keeps the file small. With
 * MINFER_DUMP_DIR set as well, each traced node's values (real tokens only) are also written as raw
 * f32 to DIR/<run>_<node id>_<name>.f32, for comparing activations with another engine. */
#include "graph/trace.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_RUNS 256

struct mf_trace {
    char *path;
    char *dump_dir; /* where node values go as raw f32, or NULL */
    json_t *root, *runs, *cur_nodes, *cur_run;
    int32_t n_real, n_graph_tokens;
};

mf_status mf_trace_create(const char *path, const char *dump_dir, mf_trace **out) {
    *out = NULL;
    mf_trace *t = mf_calloc(1, sizeof *t);
    if (!t) return MF_ERR_NOMEM;
    t->path = mf_strdup(path);
    t->root = json_object();
    t->runs = json_array();
    if (!t->path || !t->root || !t->runs) {
        json_decref(t->runs);
        json_decref(t->root);
        free(t->path);
        free(t);
        return mf_fail(MF_ERR_NOMEM, "trace: out of memory");
    }
    if (dump_dir && *dump_dir && !(t->dump_dir = mf_strdup(dump_dir))) {
        json_decref(t->runs);
        json_decref(t->root);
        free(t->path);
        free(t);
        return MF_ERR_NOMEM;
    }
    json_object_set_new(t->root, "format", json_string("minfer-trace"));
    json_object_set_new(t->root, "version", json_integer(1));
    json_object_set(t->root, "runs", t->runs);
    *out = t;
    return MF_OK;
}

mf_status mf_trace_finish(mf_trace *t) {
    if (!t) return MF_OK;
    mf_status st = MF_OK;
    if (json_dump_file(t->root, t->path, JSON_INDENT(1)) != 0)
        st = mf_fail(MF_ERR_IO, "cannot write trace file '%s'", t->path);
    json_decref(t->runs);
    json_decref(t->root);
    free(t->path);
    free(t->dump_dir);
    free(t);
    return st;
}

void mf_trace_begin(mf_trace *t, const mf_graph *g, const char *kind, int32_t n_real, int32_t n_graph_tokens) {
    (void)g;
    t->cur_run = NULL;
    t->cur_nodes = NULL;
    if (json_array_size(t->runs) >= MAX_RUNS) return;
    t->n_real = n_real;
    t->n_graph_tokens = n_graph_tokens;
    t->cur_run = json_object();
    t->cur_nodes = json_array();
    json_object_set_new(t->cur_run, "index", json_integer((json_int_t)json_array_size(t->runs)));
    json_object_set_new(t->cur_run, "kind", json_string(kind));
    json_object_set_new(t->cur_run, "n_tokens", json_integer(n_real));
    json_object_set_new(t->cur_run, "graph_tokens", json_integer(n_graph_tokens));
    json_object_set_new(t->cur_run, "nodes", t->cur_nodes);
    json_array_append_new(t->runs, t->cur_run);
}

/* JSON has no NaN/Inf: such values are written as null (the counts say why). */
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Best effort: a debugging aid, so a file that cannot be written is skipped silently. */
static void dump_node(const mf_trace *t, const mf_node *n, int32_t id, int64_t count) {
    char path[1024];
    int len = snprintf(path, sizeof path, "%s/%03zu_%04d_", t->dump_dir, json_array_size(t->runs) - 1, (int)id);
    if (len < 0 || (size_t)len >= sizeof path) return;
    for (const char *c = n->name; *c && (size_t)len + 5 < sizeof path; c++)
        path[len++] = (*c == '/' || *c == ' ' || *c == '(' || *c == ')') ? '_' : *c;
    memcpy(path + len, ".f32", 5);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(n->data, sizeof(float), (size_t)count, f);
    fclose(f);
}

void mf_node_stats_compute(const mf_node *n, int32_t n_real, int32_t n_graph_tokens, mf_node_stats *s) {
    /* Rows of padding tokens are the tail of the outermost dimension that equals the token count. */
    int64_t total = mf_node_nelements(n), count = total;
    int outer = 3;
    while (outer > 0 && n->ne[outer] == 1) outer--;
    if (n->ne[outer] == n_graph_tokens && n_real < n_graph_tokens) count = total / n->ne[outer] * n_real;
    double mn = INFINITY, mx = -INFINITY, sum = 0.0, sq = 0.0;
    int64_t nan = 0, inf = 0, finite = 0;
    for (int64_t i = 0; i < count; i++) {
        double v = n->type == MF_TYPE_I32 ? (double)((const int32_t *)n->data)[i] : ((const float *)n->data)[i];
        if (isnan(v)) { nan++; continue; }
        if (isinf(v)) { inf++; continue; }
        finite++;
        mn = fmin(mn, v);
        mx = fmax(mx, v);
        sum += v;
        sq += v * v;
    }
    *s = (mf_node_stats){.count = count, .nan = nan, .inf = inf, .min = finite ? mn : NAN,
                         .max = finite ? mx : NAN, .mean = finite ? sum / (double)finite : NAN,
                         .rms = finite ? sqrt(sq / (double)finite) : NAN};
}

void mf_trace_node(void *ud, const mf_graph *g, int32_t id) {
    mf_trace *t = ud;
    const mf_node *n = &g->nodes[id];
    if (!t->cur_nodes || !n->data) return;
    mf_node_stats s;
    mf_node_stats_compute(n, t->n_real, t->n_graph_tokens, &s);
    if (t->dump_dir && n->type == MF_TYPE_F32) dump_node(t, n, id, s.count);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(id));
    json_object_set_new(o, "name", json_string(n->name));
    json_object_set_new(o, "op", json_string(mf_op_name(n->op)));
    json_object_set_new(o, "count", json_integer(s.count));
    json_object_set_new(o, "min", num(s.min));
    json_object_set_new(o, "max", num(s.max));
    json_object_set_new(o, "mean", num(s.mean));
    json_object_set_new(o, "rms", num(s.rms));
    json_object_set_new(o, "nan", json_integer(s.nan));
    json_object_set_new(o, "inf", json_integer(s.inf));
    json_array_append_new(t->cur_nodes, o);
}

void mf_trace_end(mf_trace *t, const float *logits, int32_t n_vocab) {
    if (!t->cur_run || !logits) return;
    int32_t top[5];
    int k = 0;
    for (int32_t i = 0; i < n_vocab; i++) {
        int pos = k < 5 ? k++ : 5;
        while (pos > 0 && logits[i] > logits[top[pos - 1]]) {
            if (pos < 5) top[pos] = top[pos - 1];
            pos--;
        }
        if (pos < 5) top[pos] = i;
    }
    json_t *arr = json_array();
    for (int i = 0; i < k; i++) {
        json_t *e = json_object();
        json_object_set_new(e, "token", json_integer(top[i]));
        json_object_set_new(e, "logit", num(logits[top[i]]));
        json_array_append_new(arr, e);
    }
    json_object_set_new(t->cur_run, "logits_top5", arr);
}
