/* qmodel.h: quantizing a whole GGUF model file (what `minfer quantize` runs).
 *
 * A file type (ftype) names the target: a plain type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
 * Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) puts every quantizable weight in that type, like llama-quantize --pure;
 * Q3_K_M, Q4_K_M and Q5_K_M are llama.cpp's mixtures (Q6_K for output.weight and a tied
 * token_embd.weight, more bits for the attn_v and ffn_down weights its rules pick, and for Q3_K_M
 * Q4_K attn_output). Quantizable = a weight with 2 or more dimensions that is not a norm (llama.cpp's
 * rules); everything else is copied unchanged. A row length that the chosen type's block does not
 * divide falls back as llama.cpp does (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0,
 * then F16). Inputs must be F32, F16 or BF16; an already quantized tensor is only copied when its
 * target type is its own type (requantizing is refused).
 */
#ifndef MF_QMODEL_H
#define MF_QMODEL_H

#include <signal.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

typedef struct mf_quant_ftype {
    const char *name;   /* "Q4_K_M" */
    mf_type type;       /* the type of ordinary weights */
    uint32_t file_type; /* general.file_type written (llama.cpp's LLAMA_FTYPE value) */
    bool mixture;       /* llama.cpp's per-tensor rules (Q3_K_M, Q4_K_M, Q5_K_M) */
} mf_quant_ftype;

/* Case-insensitive lookup; NULL if name is not a file type. */
const mf_quant_ftype *mf_quant_ftype_find(const char *name);
/* The accepted names, space-separated (static storage). */
const char *mf_quant_ftype_names(void);

/* Target type of every tensor of g (types[i] for mf_gguf_tensor_at(g, i)), by the rules above.
 * Errors: MF_ERR_UNSUPPORTED naming the tensor when a row length fits no fallback or a quantized
 * input would have to be requantized, MF_ERR_ARG for an input type minfer cannot convert. */
mf_status mf_quant_plan(const mf_gguf *g, const mf_quant_ftype *ft, mf_type *types);

typedef struct mf_quant_progress {
    int64_t index, count; /* tensor index (0-based, file order) and number of tensors */
    const char *name;
    mf_type from, to;
    const int64_t *ne;    /* shape, MF_GGUF_MAX_DIMS entries */
    bool done;            /* false when the tensor starts, true when written */
} mf_quant_progress;

typedef struct mf_quant_params {
    const mf_quant_ftype *ftype;
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
 * cancellation no file is left under out_path's name. Metadata is copied except the split keys;
 * general.file_type and general.quantization_version (2) are set. stats may be NULL. */
mf_status mf_quant_model(const char *in_path, const char *out_path, const mf_quant_params *p, mf_quant_stats *stats);

#endif /* MF_QMODEL_H */
