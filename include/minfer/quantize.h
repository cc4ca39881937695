/* minfer/quantize.h: quantizing a whole GGUF model file (what `minfer quantize` runs). Part of the
 * public API (include minfer.h).
 *
 * A file type (ftype) names the target, as llama-quantize names it: F32, F16, BF16, Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L, Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, and the aliases Q3_K,
 * Q4_K, Q5_K for the _M mixtures. Each tensor's type follows llama.cpp's per-tensor rules for that file
 * type (src/llama-quant.cpp): output.weight (or a tied token_embd.weight) in Q6_K unless the base type
 * is Q8_0, and for the K mixtures and Q2_K more bits for the attn_v, ffn_down and attn_output weights
 * its rules pick. With rules.pure every quantizable weight gets the base type instead (llama-quantize
 * --pure); output_type / token_embd_type override those two tensors (--output-tensor-type,
 * --token-embedding-type; they apply with pure too). Quantizable = a weight with 2 or more dimensions
 * that is not a norm (llama.cpp's list); everything else is copied unchanged. A row length that the
 * chosen type's block does not divide falls back as llama.cpp does (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0,
 * Q5_K -> Q5_1, Q6_K -> Q8_0, then F16). Inputs must be F32, F16 or BF16; an already quantized tensor
 * is only copied when its target type is its own type (requantizing is refused). Tensors are written
 * in llama.cpp's order: by layer number (non-layer tensors first), then by name. The output's bytes
 * equal llama-quantize's for the same input and type.
 */
#ifndef MINFER_QUANTIZE_H
#define MINFER_QUANTIZE_H

#include "minfer.h"
#include "minfer/gguf.h"

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mf_quant_ftype {
    const char *name;   /* "Q4_K_M" */
    mf_type type;       /* the base type: ordinary weights, and every weight when pure */
    uint32_t file_type; /* llama.cpp's LLAMA_FTYPE value: picks the rules; written as general.file_type */
} mf_quant_ftype;

/* How the per-tensor types are chosen; all zero = llama-quantize's defaults. */
typedef struct mf_quant_rules {
    bool pure;                /* every quantizable weight in the base type (no per-tensor rules) */
    bool set_output_type;     /* output.weight in output_type (and a tied token_embd.weight unless */
    mf_type output_type;      /* pure or token_embd_type is set) */
    bool set_token_embd_type; /* token_embd.weight in token_embd_type */
    mf_type token_embd_type;
} mf_quant_rules;

/* Case-insensitive lookup; NULL if name is not a file type. */
const mf_quant_ftype *mf_quant_ftype_find(const char *name);
/* The accepted names, space-separated (static storage). */
const char *mf_quant_ftype_names(void);
/* Whether minfer can write tensors of this type (a file quantizer exists; the override flags). */
bool mf_quant_type_writable(mf_type type);

/* Target type of every tensor of g (types[i] for mf_gguf_tensor_at(g, i)), by the rules above
 * (rules NULL: the defaults); order, if not NULL, receives the output order (order[k] = index in g of
 * the k-th tensor written). Errors: MF_ERR_UNSUPPORTED naming the tensor when a row length fits no
 * fallback (or an override type's block), when a quantized input would have to be requantized or an
 * override type cannot be written; MF_ERR_ARG for an input type minfer cannot convert. */
mf_status mf_quant_plan(const mf_gguf *g, const mf_quant_ftype *ft, const mf_quant_rules *rules, mf_type *types,
                        int64_t *order);

typedef struct mf_quant_progress {
    int64_t index, count; /* tensor index (0-based, output file order) and number of tensors */
    const char *name;
    mf_type from, to;
    const int64_t *ne;    /* shape, MF_GGUF_MAX_DIMS entries */
    bool done;            /* false when the tensor starts, true when written */
} mf_quant_progress;

typedef struct mf_quant_params {
    const mf_quant_ftype *ftype;
    mf_quant_rules rules;
    int n_threads;                       /* <= 0: every online CPU */
    const volatile sig_atomic_t *cancel; /* optional: stop (MF_ERR_IO "interrupted") once nonzero */
    void (*progress)(void *user, const mf_quant_progress *p); /* optional, called from this thread */
    void *user;
} mf_quant_params;

typedef struct mf_quant_stats {
    uint64_t bytes_in, bytes_out; /* tensor data */
    uint64_t values_converted;    /* weights in the converted tensors */
    int64_t n_quantized, n_copied;
    int n_threads;
    double seconds;
} mf_quant_stats;

/* Quantize the model at in_path (a split model: its first part) into out_path. The output is written
 * to a temporary file beside out_path and renamed over it only when complete; on any failure or
 * cancellation no file is left under out_path's name (and an earlier file there is kept). Metadata is
 * copied except the split keys; general.file_type and general.quantization_version (2) are set. stats
 * may be NULL. */
mf_status mf_quant_model(const char *in_path, const char *out_path, const mf_quant_params *p, mf_quant_stats *stats);

#ifdef __cplusplus
}
#endif
#endif /* MINFER_QUANTIZE_H */
