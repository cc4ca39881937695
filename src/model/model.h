/* model.h: a loaded model (hyper-parameters from GGUF metadata, weights as zero-copy views of the
 * mapped file) and the graph builders of the supported architectures. A model is read-only after
 * load and shared by every context made from it. */
#ifndef MF_MODEL_H
#define MF_MODEL_H

#include "minfer.h"

#include <pthread.h>
#include "gguf/gguf.h"
#include "graph/graph.h"
#include "graph/kv.h"

typedef enum mf_arch { MF_ARCH_LLAMA, MF_ARCH_QWEN2, MF_ARCH_QWEN3, MF_ARCH_COUNT } mf_arch;

typedef struct mf_hparams {
    int32_t n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx_train;
    float norm_eps;
    mf_rope_params rope;
    float attn_scale; /* 1/sqrt(head_dim) */
} mf_hparams;

/* Per-layer weights; NULL where the architecture has none (biases, Q/K norms). */
typedef struct mf_layer {
    const mf_weight *attn_norm, *wq, *wk, *wv, *wo, *bq, *bk, *bv, *q_norm, *k_norm;
    const mf_weight *ffn_norm, *ffn_gate, *ffn_up, *ffn_down;
} mf_layer;

struct mf_model {
    mf_gguf *gguf;
    mf_arch arch;
    const char *arch_name;
    mf_hparams hp;
    mf_weight *weights; /* every tensor of the file, in file order */
    int64_t n_weights;
    bool *used;         /* [n_weights] the architecture uses weight i */
    bool tied;          /* output is tok_embd */
    char fingerprint[33]; /* mf_gguf_fingerprint of the file */
    char *name;           /* general.name, or NULL */
    bool no_mmap;
    /* the tokenizer, built on first use (mf_model_tokenizer) */
    pthread_mutex_t tok_lock;
    mf_tokenizer *tok;
    mf_status tok_status;
    char tok_error[256];
    const mf_weight *tok_embd, *output_norm, *output, *output_b; /* output may be tok_embd (tied) */
    mf_layer *layers;
    double load_s;
    mf_gguf_pages pages; /* how the page cache held the mapped file (after mf_gguf_settle_pages) */
    void *packed;        /* the matrices' packed copies (mf_cpu_pack): one mapping of packed_len bytes */
    size_t packed_len;
    uint64_t packed_bytes;
    uint32_t n_packed;
};

const mf_hparams *mf_model_hparams(const mf_model *m);

/* Build the forward graph for n_tokens tokens, of which n_outputs rows (chosen by the OUT_IDS
 * input when n_outputs < n_tokens) reach the output norm and lm_head. Nodes are only recorded. */
mf_status mf_model_build_graph(const mf_model *m, int32_t n_tokens, int32_t n_outputs, mf_graph *g);

/* The context's KV cache and model (state.c). */
mf_kv_cache *mf_context_kv(mf_context *c);
const mf_model *mf_context_model(const mf_context *c);

/* Graphs this context has built so far (tests check that decoding reuses one). */
int32_t mf_context_n_graph_builds(const mf_context *c);

#endif /* MF_MODEL_H */
