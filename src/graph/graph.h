/* graph.h: minfer's compute-graph IR. A graph is a list of nodes in execution order (always
 * topological); building one only records nodes, it computes nothing. The scheduler (sched.h) then
 * assigns backends, fuses, and plans memory; a backend executes the nodes.
 *
 * Shapes use GGML order: ne[0] varies fastest. Activations are contiguous F32 (token-major:
 * x[t][d] has ne = {d, n_tokens}); per-head views are {head_dim, n_head, n_tokens}. I32 tensors hold
 * token ids, positions, sequence ids, KV cell indices and output-row ids. Weights are not nodes:
 * ops reference them (mf_weight, memory [rows][row_bytes], ne = {in, out}) in their parameters. */
#ifndef MF_GRAPH_H
#define MF_GRAPH_H

#include "core/core.h"
#include "quant/quant.h"

#include <stdio.h>

#define MF_GRAPH_MAX_SRC 6
#define MF_NODE_NAME_MAX 48

/* A tensor held by the model (mmap'd file data, read-only). ne[0] is the row length. */
typedef struct mf_weight {
    const char *name;
    mf_type type;
    int64_t ne[4];
    size_t row_bytes; /* bytes of one row of ne[0] values */
    const void *data;
    /* A copy of data in the layout of one CPU GEMM (packed_for: that mf_cpu_gemm), made once at load
     * where this CPU runs that GEMM (mf_cpu_pack); NULL: none. Only that GEMM reads it. */
    const void *packed;
    const void *packed_for;
} mf_weight;

/* Append-only: the values appear in exported graphs. */
typedef enum mf_op {
    MF_OP_NONE = 0,   /* a node removed by a fusion pass; never executed, never allocated */
    MF_OP_INPUT,      /* filled by the host before each run (p.input.kind) */
    MF_OP_GET_ROWS,   /* out[t] = table[ids[t]]: table is p.mm.w (any type, dequantized) or src1 (F32) */
    MF_OP_RMS_NORM,   /* per row of ne[0]: y = x / sqrt(mean(x^2) + eps) * w (w optional, length ne[0]) */
    MF_OP_MATMUL,     /* x {K, n} -> y {N, n}: y[t][o] = sum_k W[o][k] x[t][k] (+ b[o]); W = p.mm.w {K, N} */
    MF_OP_ROPE,       /* x {hd, nh, nt}, src1 pos {nt}: rotary embedding, NEOX or normal pairing */
    MF_OP_ADD,        /* a + b, same shape */
    MF_OP_MUL,        /* a * b, same shape */
    MF_OP_SILU,       /* x / (1 + exp(-x)) */
    MF_OP_SWIGLU,     /* silu(a) * b */
    MF_OP_RESERVED_10, /* no longer used (values are stable: they appear in exported graphs) */
    MF_OP_ATTENTION,  /* q {hd, nh, nt}, pos, seq, kv-store dep -> {hd*nh, nt}; reads layer's K/V cache */
    MF_OP_KV_STORE,   /* k {hd, nkv, nt}, v {hd, nkv, nt}, cells {nt}: write rows into the layer's cache */
    MF_OP_VIEW,       /* same bytes as src0 from p.view.offset, another shape; no computation */
    MF_OP_QKV_ROPE_STORE, /* fused: q, k, v (pre-bias), pos, cells -> roped q; k roped + v into cache */
    MF_OP_COUNT
} mf_op;

typedef enum mf_input_kind {
    MF_INPUT_TOKENS,  /* I32 {nt}: token ids */
    MF_INPUT_POS,     /* I32 {nt}: position of each token in its sequence */
    MF_INPUT_SEQ,     /* I32 {nt}: sequence id of each token (-1: padding, ignored) */
    MF_INPUT_CELLS,   /* I32 {nt}: KV cell each token's K/V goes to (-1: padding, not stored) */
    MF_INPUT_OUT_IDS, /* I32 {n_out}: rows (token indices) whose logits are computed */
    MF_INPUT_COUNT
} mf_input_kind;

typedef enum mf_rope_mode { MF_ROPE_NORMAL = 0, MF_ROPE_NEOX = 2 } mf_rope_mode;

typedef struct mf_rope_params {
    int32_t mode;   /* mf_rope_mode: NORMAL rotates (x[2i], x[2i+1]); NEOX (x[i], x[i + n_dims/2]) */
    int32_t n_dims; /* rotated dims per head (<= head_dim); the rest pass through */
    float freq_base, freq_scale; /* theta_i = pos * freq_scale * base^(-2i/n_dims) / ff[i] */
    /* ff: n_dims/2 frequency factors (Llama 3.1+ "rope_freqs.weight", the llama3 rope scaling baked
     * into the file), each dividing its pair's angle; NULL: all 1 */
    const float *freq_factors;
} mf_rope_params;

typedef struct mf_attn_params {
    int32_t layer, n_head, n_head_kv, head_dim;
    float scale; /* applied to q.k before the softmax, usually 1/sqrt(head_dim) */
} mf_attn_params;

typedef union mf_op_params {
    struct { int32_t kind; } input;                            /* INPUT */
    struct { const mf_weight *w, *b; } mm;                     /* MATMUL (w, optional b), GET_ROWS (w) */
    struct { float eps; const mf_weight *w; } norm;           /* RMS_NORM */
    mf_rope_params rope;                                       /* ROPE */
    mf_attn_params attn;                                       /* ATTENTION */
    struct { int32_t layer; } kv;                              /* KV_STORE */
    struct { int64_t offset; } view;                           /* VIEW (bytes into src0) */
    struct {                                                   /* QKV_ROPE_STORE */
        mf_rope_params rope;
        mf_attn_params attn;
        const mf_weight *bq, *bk, *bv;
    } qkv;
} mf_op_params;

typedef struct mf_node {
    mf_op op;
    mf_type type;  /* MF_TYPE_F32 or MF_TYPE_I32 */
    int64_t ne[4];
    int32_t src[MF_GRAPH_MAX_SRC];
    int32_t n_src;
    mf_op_params p;
    char name[MF_NODE_NAME_MAX];
    int32_t backend; /* index into the scheduler's backend list; -1 until assigned */
    bool is_output;
    /* Filled by the planner: byte offset in the graph's arena (-1: none, e.g. a VIEW or a dead
     * node), and the data pointer once the arena exists (views point into their source). */
    int64_t offset;
    void *data;
} mf_node;

typedef struct mf_graph {
    mf_node *nodes;
    int32_t n_nodes, cap;
    int32_t inputs[MF_INPUT_COUNT]; /* node id of each input kind, -1 when absent */
    int32_t output;                 /* the logits node, -1 until set */
    mf_status status;               /* first builder error (sticky) */
} mf_graph;

mf_status mf_graph_init(mf_graph *g);
void mf_graph_free(mf_graph *g); /* accepts NULL and a zeroed graph */

/* Builder. Every call appends one node and returns its id, or -1 after a failure (recorded in
 * g->status and mf_last_error). Shape errors are programmer errors and assert. */
int32_t mf_graph_input(mf_graph *g, mf_input_kind kind, int64_t n);
int32_t mf_graph_get_rows(mf_graph *g, const mf_weight *table, int32_t ids);
int32_t mf_graph_get_rows_f32(mf_graph *g, int32_t table, int32_t ids);
int32_t mf_graph_rms_norm(mf_graph *g, int32_t x, const mf_weight *w, float eps);
int32_t mf_graph_matmul(mf_graph *g, int32_t x, const mf_weight *w, const mf_weight *b);
int32_t mf_graph_rope(mf_graph *g, int32_t x, int32_t pos, const mf_rope_params *rp);
int32_t mf_graph_add(mf_graph *g, int32_t a, int32_t b);
int32_t mf_graph_mul(mf_graph *g, int32_t a, int32_t b);
int32_t mf_graph_silu(mf_graph *g, int32_t x);
int32_t mf_graph_kv_store(mf_graph *g, int32_t k, int32_t v, int32_t cells, int32_t layer);
int32_t mf_graph_attention(mf_graph *g, int32_t q, int32_t pos, int32_t seq, int32_t kv_store,
                           const mf_attn_params *ap);
/* A contiguous view of src's bytes [offset, offset + size of ne) with shape ne. */
int32_t mf_graph_view(mf_graph *g, int32_t src, const int64_t ne[4], int64_t offset);
int32_t mf_graph_reshape_3d(mf_graph *g, int32_t src, int64_t ne0, int64_t ne1, int64_t ne2);
/* Name a node (printf-style, truncated to MF_NODE_NAME_MAX-1). Returns id. */
int32_t mf_graph_name(mf_graph *g, int32_t id, const char *fmt, ...) MF_PRINTF(3, 4);
void mf_graph_set_output(mf_graph *g, int32_t id);

int64_t mf_node_nelements(const mf_node *n);
size_t mf_node_nbytes(const mf_node *n);
const char *mf_op_name(mf_op op);
const char *mf_input_kind_name(mf_input_kind k);
/* Number of live consumers of node id (nodes with op != NONE that list it as a source). */
int32_t mf_graph_n_consumers(const mf_graph *g, int32_t id);

/* Export (graph_export.c). backend_names[i] names backend index i (may be NULL). kind is a label
 * such as "prefill" or "decode". Return MF_ERR_IO on write failure. */
mf_status mf_graph_write_dot(const mf_graph *g, const char *const *backend_names, const char *kind, FILE *f);
mf_status mf_graph_write_json(const mf_graph *g, const char *const *backend_names, const char *kind, FILE *f);

#endif /* MF_GRAPH_H */
