/* graph_export.c: a built graph as Graphviz DOT or as JSON (format in docs/graph-json.md). Node
 * ids are indices in the node list; nodes removed by fusion are left out, so ids have gaps. */
#include "graph/graph.h"

#include <jansson.h>

static const char *mode_name(int32_t mode) { return mode == MF_ROPE_NEOX ? "neox" : "normal"; }

static json_t *shape_json(const int64_t ne[4]) {
    json_t *a = json_array();
    for (int i = 0; i < 4; i++) json_array_append_new(a, json_integer(ne[i]));
    return a;
}

static json_t *weight_json(const mf_weight *w) {
    if (!w) return json_null();
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(w->name));
    json_object_set_new(o, "type", json_string(mf_type_name(w->type)));
    json_object_set_new(o, "shape", shape_json(w->ne));
    return o;
}

static json_t *rope_json(const mf_rope_params *r) {
    json_t *o = json_object();
    json_object_set_new(o, "mode", json_string(mode_name(r->mode)));
    json_object_set_new(o, "n_dims", json_integer(r->n_dims));
    json_object_set_new(o, "freq_base", json_real(r->freq_base));
    json_object_set_new(o, "freq_scale", json_real(r->freq_scale));
    json_object_set_new(o, "freq_factors", json_boolean(r->freq_factors != NULL));
    return o;
}

static void attn_json(json_t *o, const mf_attn_params *a) {
    json_object_set_new(o, "layer", json_integer(a->layer));
    json_object_set_new(o, "n_head", json_integer(a->n_head));
    json_object_set_new(o, "n_head_kv", json_integer(a->n_head_kv));
    json_object_set_new(o, "head_dim", json_integer(a->head_dim));
    json_object_set_new(o, "scale", json_real(a->scale));
}

/* The op's parameters; weights referenced by the op go to *weight / *bias. */
static json_t *params_json(const mf_node *n, const mf_weight **weight, const mf_weight **bias) {
    json_t *o = json_object();
    *weight = *bias = NULL;
    switch (n->op) {
    case MF_OP_INPUT: json_object_set_new(o, "kind", json_string(mf_input_kind_name(n->p.input.kind))); break;
    case MF_OP_GET_ROWS: *weight = n->n_src == 1 ? n->p.mm.w : NULL; break;
    case MF_OP_MATMUL:
        *weight = n->p.mm.w;
        *bias = n->p.mm.b;
        break;
    case MF_OP_RMS_NORM:
        json_object_set_new(o, "eps", json_real(n->p.norm.eps));
        *weight = n->p.norm.w;
        break;
    case MF_OP_ROPE: {
        json_t *r = rope_json(&n->p.rope);
        json_object_update(o, r);
        json_decref(r);
        break;
    }
    case MF_OP_ATTENTION: attn_json(o, &n->p.attn); break;
    case MF_OP_KV_STORE: json_object_set_new(o, "layer", json_integer(n->p.kv.layer)); break;
    case MF_OP_VIEW: json_object_set_new(o, "offset", json_integer(n->p.view.offset)); break;
    case MF_OP_QKV_ROPE_STORE: {
        attn_json(o, &n->p.qkv.attn);
        json_object_set_new(o, "rope", rope_json(&n->p.qkv.rope));
        json_t *b = json_array();
        const mf_weight *bs[3] = {n->p.qkv.bq, n->p.qkv.bk, n->p.qkv.bv};
        for (int i = 0; i < 3; i++) json_array_append_new(b, weight_json(bs[i]));
        json_object_set_new(o, "biases", b);
        break;
    }
    default: break;
    }
    return o;
}

mf_status mf_graph_write_json(const mf_graph *g, const char *const *backend_names, const char *kind, FILE *f) {
    json_t *root = json_object(), *nodes = json_array(), *inputs = json_object();
    json_object_set_new(root, "format", json_string("minfer-graph"));
    json_object_set_new(root, "version", json_integer(1));
    json_object_set_new(root, "kind", json_string(kind));
    for (int k = 0; k < MF_INPUT_COUNT; k++)
        if (g->inputs[k] >= 0) json_object_set_new(inputs, mf_input_kind_name((mf_input_kind)k), json_integer(g->inputs[k]));
    json_object_set_new(root, "inputs", inputs);
    json_object_set_new(root, "output", json_integer(g->output));
    int32_t live = 0;
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const mf_node *n = &g->nodes[i];
        if (n->op == MF_OP_NONE) continue;
        live++;
        json_t *o = json_object(), *src = json_array();
        json_object_set_new(o, "id", json_integer(i));
        json_object_set_new(o, "name", json_string(n->name));
        json_object_set_new(o, "op", json_string(mf_op_name(n->op)));
        json_object_set_new(o, "shape", shape_json(n->ne));
        json_object_set_new(o, "type", json_string(mf_type_name(n->type)));
        const char *bn = n->backend >= 0 && backend_names ? backend_names[n->backend] : NULL;
        json_object_set_new(o, "backend", bn ? json_string(bn) : json_null());
        for (int s = 0; s < n->n_src; s++) json_array_append_new(src, json_integer(n->src[s]));
        json_object_set_new(o, "src", src);
        const mf_weight *w, *b;
        json_object_set_new(o, "params", params_json(n, &w, &b));
        if (w) json_object_set_new(o, "weight", weight_json(w));
        if (b) json_object_set_new(o, "bias", weight_json(b));
        json_object_set_new(o, "offset", n->offset >= 0 ? json_integer(n->offset) : json_null());
        json_object_set_new(o, "is_output", json_boolean(n->is_output));
        json_array_append_new(nodes, o);
    }
    json_object_set_new(root, "n_nodes", json_integer(live));
    json_object_set_new(root, "nodes", nodes);
    int rc = json_dumpf(root, f, JSON_INDENT(1));
    json_decref(root);
    if (rc != 0 || fputc('\n', f) == EOF) return mf_fail(MF_ERR_IO, "writing the graph JSON failed");
    return MF_OK;
}

static const char *backend_color(const char *name) {
    if (!name) return "white";
    if (!strcmp(name, "CPU")) return "lightyellow";
    if (!strcmp(name, "CUDA")) return "lightgreen";
    return "lightblue";
}

mf_status mf_graph_write_dot(const mf_graph *g, const char *const *backend_names, const char *kind, FILE *f) {
    fprintf(f, "digraph minfer {\n  label=\"minfer %s graph\";\n  rankdir=TB;\n", kind);
    fprintf(f, "  node [shape=record, style=filled, fontname=monospace, fontsize=10];\n");
    for (int32_t i = 0; i < g->n_nodes; i++) {
        const mf_node *n = &g->nodes[i];
        if (n->op == MF_OP_NONE) continue;
        const char *bn = n->backend >= 0 && backend_names ? backend_names[n->backend] : NULL;
        fprintf(f, "  n%d [fillcolor=%s, label=\"{%d %s|%s|[%lld,%lld,%lld,%lld] %s%s%s", i,
                n->is_output ? "orange" : backend_color(bn), i, n->name, mf_op_name(n->op), (long long)n->ne[0],
                (long long)n->ne[1], (long long)n->ne[2], (long long)n->ne[3], mf_type_name(n->type),
                bn ? " " : "", bn ? bn : "");
        const mf_weight *w = NULL;
        if (n->op == MF_OP_MATMUL || (n->op == MF_OP_GET_ROWS && n->n_src == 1)) w = n->p.mm.w;
        if (w) fprintf(f, "|%s %s", w->name, mf_type_name(w->type));
        if (n->op == MF_OP_MATMUL && n->p.mm.b) fprintf(f, " + %s", n->p.mm.b->name);
        fprintf(f, "}\"];\n");
        for (int s = 0; s < n->n_src; s++) fprintf(f, "  n%d -> n%d;\n", n->src[s], i);
    }
    fprintf(f, "}\n");
    return ferror(f) ? mf_fail(MF_ERR_IO, "writing the graph DOT failed") : MF_OK;
}
