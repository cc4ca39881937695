/* minfer.h: the public C API of libminfer, a local LLM inference engine for GGUF models. It is
 * the whole API: the minfer program uses nothing else.
 *
 * Conventions for every call in this header and the ones it includes:
 * - Functions that can fail return an mf_status; MF_OK is 0. On failure, mf_last_error() returns a
 *   message for the calling thread that names the thing, the bad value and, where known, the fix.
 * - Handles are opaque. Each open or create call has a free call that accepts NULL. Strings a call
 *   returns belong to the object they come from unless the call says "caller frees" (free()).
 * - Nothing here calls exit() or aborts on bad input; only broken internal invariants abort
 *   (on in release builds too).
 * - Thread safety: a loaded model (and its tokenizer and metadata) is read-only and may be shared by
 *   threads; everything else (contexts, samplers, generators, streams) belongs to one thread at a
 *   time. The log callback and level are process-wide.
 * - The library reads no environment variables: programs fill the params structs (the minfer
 *   program reads MINFER_ISA, MINFER_ORDER, MINFER_TRACE, MINFER_DUMP_DIR and MINFER_LOG into them).
 *
 * Parts: this file (status, logging, weight types, system, models, contexts, batches, sequences,
 * saved states), minfer/gguf.h (GGUF metadata and tensors), minfer/tokenizer.h, minfer/chat.h
 * (chat templates), minfer/sample.h (sampler chain, stop strings, the generation loop),
 * minfer/quantize.h. docs/api.md has a whole generation in one page. */
#ifndef MINFER_H
#define MINFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MINFER_VERSION "0.1.0"

/* Status codes. Append-only: values are stable. */
typedef enum mf_status {
    MF_OK = 0,
    MF_ERR_IO,          /* open/read/write/mmap/rename failed (errno text in the message) */
    MF_ERR_FORMAT,      /* input file or data is malformed (GGUF, JSON, session file, ...) */
    MF_ERR_UNSUPPORTED, /* valid input that minfer does not handle (architecture, type, ...) */
    MF_ERR_NOT_FOUND,   /* a key, tensor, token or file that was asked for is absent */
    MF_ERR_TYPE,        /* a value exists but has another type than the caller asked for */
    MF_ERR_ARG,         /* a caller passed an invalid argument */
    MF_ERR_NOMEM,       /* an allocation failed */
    MF_ERR_RANGE,       /* a value is outside its valid range (context full, index too big) */
    MF_ERR_INTERNAL,    /* an internal limit or state problem that is not the caller's fault */
    MF_STATUS_COUNT
} mf_status;

/* Name of a status ("ok", "io error", ...). Never NULL. */
const char *mf_status_str(mf_status s);

/* The message of the last failure on this thread; "" when none. Valid until the next failing call
 * on this thread. */
const char *mf_last_error(void);
/* Record a failure message for this thread (printf format) and return s, for programs and modules
 * built on the library that report their errors the same way. */
mf_status mf_set_error(mf_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* ==== Logging ====
 * The library's warnings and notes go to a callback; the default writes "minfer: <level>: <msg>"
 * lines to stderr. Messages above the level are not formatted at all. */
typedef enum mf_log_level { MF_LOG_ERROR, MF_LOG_WARN, MF_LOG_INFO, MF_LOG_DEBUG } mf_log_level;
/* msg has no trailing newline; it is valid only during the call. */
typedef void (*mf_log_fn)(mf_log_level level, const char *msg, void *user);
/* fn NULL restores the default. Set it before other threads use the library. */
void mf_log_set_callback(mf_log_fn fn, void *user);
void mf_log_set_level(mf_log_level level); /* default MF_LOG_WARN */
mf_log_level mf_log_get_level(void);
/* Log a message through the callback, as the library's own messages go (printf format). */
void mf_log_message(mf_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* "error", "warn" (or "warning"), "info", "debug"; MF_ERR_ARG for anything else. */
mf_status mf_log_level_from_name(const char *name, mf_log_level *out);

/* Monotonic time in seconds (the clock behind every speed the library reports). */
double mf_time_s(void);

/* ==== Weight and tensor types ====
 * GGML's on-disk type ids (append-only). */
typedef enum mf_type {
    MF_TYPE_F32 = 0,
    MF_TYPE_F16 = 1,
    MF_TYPE_Q4_0 = 2,
    MF_TYPE_Q4_1 = 3,
    MF_TYPE_Q5_0 = 6,
    MF_TYPE_Q5_1 = 7,
    MF_TYPE_Q8_0 = 8,
    MF_TYPE_Q8_1 = 9,
    MF_TYPE_Q2_K = 10,
    MF_TYPE_Q3_K = 11,
    MF_TYPE_Q4_K = 12,
    MF_TYPE_Q5_K = 13,
    MF_TYPE_Q6_K = 14,
    MF_TYPE_Q8_K = 15,
    MF_TYPE_IQ2_XXS = 16,
    MF_TYPE_IQ2_XS = 17,
    MF_TYPE_IQ3_XXS = 18,
    MF_TYPE_IQ1_S = 19,
    MF_TYPE_IQ4_NL = 20,
    MF_TYPE_IQ3_S = 21,
    MF_TYPE_IQ2_S = 22,
    MF_TYPE_IQ4_XS = 23,
    MF_TYPE_I8 = 24,
    MF_TYPE_I16 = 25,
    MF_TYPE_I32 = 26,
    MF_TYPE_I64 = 27,
    MF_TYPE_F64 = 28,
    MF_TYPE_IQ1_M = 29,
    MF_TYPE_BF16 = 30,
    MF_TYPE_TQ1_0 = 34,
    MF_TYPE_TQ2_0 = 35,
    MF_TYPE_MXFP4 = 39,
    MF_TYPE_COUNT = 40 /* one past the largest id; ids without a format have block size 0 */
} mf_type;

/* "Q4_K", or "type-N" for ids without a name. Never NULL. */
const char *mf_type_name(uint32_t type);
/* Parse a name ("q4_k", "Q4_K", "f16", case-insensitive); false if unknown. */
bool mf_type_from_name(const char *name, mf_type *out);
/* Values per block (1 for plain types); 0 for ids with no format. */
int64_t mf_type_block_size(mf_type type);
/* Bytes for a row of n values; 0 if n is not a multiple of the block size or the type is unknown. */
size_t mf_row_size(mf_type type, int64_t n);
/* Whether minfer can dequantize (read) the type, and whether it can compute with it. */
bool mf_type_readable(mf_type type);
bool mf_type_computable(mf_type type);

/* ==== System: instruction sets and devices ==== */

/* The CPU kernel level a context uses. AUTO: the best this CPU runs. */
typedef enum mf_isa { MF_ISA_AUTO = 0, MF_ISA_SCALAR, MF_ISA_AVX2, MF_ISA_AVX512, MF_ISA_NEON, MF_ISA_COUNT } mf_isa;
/* "auto", "scalar", "avx2", "avx512", "neon" (the spellings mf_isa_from_name accepts). */
const char *mf_isa_name(mf_isa isa);
mf_status mf_isa_from_name(const char *name, mf_isa *out);
/* Whether this build has kernels for isa and this CPU runs them (AUTO and SCALAR always). */
bool mf_isa_supported(mf_isa isa);
/* The level AUTO (or an unsupported request) resolves to on this machine. */
mf_isa mf_isa_resolve(mf_isa isa);
/* What the kernels of a level are called in reports: "avx512-vnni", "avx2" ("avx2-vnni" where the
 * AVX2 level runs its AVX-VNNI builds: the CPU has AVX-VNNI and MINFER_AVXVNNI is not 0; the same
 * results), "neon-dotprod", "scalar". */
const char *mf_isa_kernels_name(mf_isa isa);
/* The CPU's model name (from /proc/cpuinfo, else the CPUID brand string), on x86 followed by its
 * family and model numbers, e.g. "AMD EPYC (family 25, model 1)"; "" when unknown. */
const char *mf_cpu_name(void);

typedef struct mf_cuda_device {
    char name[256];
    int major, minor;      /* compute capability */
    size_t total_mem;      /* bytes */
    int multiprocessors;
} mf_cuda_device;
/* Whether this build contains the CUDA backend. */
bool mf_cuda_built(void);
/* Usable CUDA devices: 0 when none, the driver is missing, or in a CPU-only build (the reason is in
 * mf_last_error()). */
int mf_cuda_device_count(void);
mf_status mf_cuda_device_info(int i, mf_cuda_device *out);

/* Remove the temporary files of every file write in progress (quantize output, saved states).
 * Async-signal-safe: a program calls it from its SIGINT/SIGTERM handler, so an interrupted write
 * leaves nothing behind. */
void mf_remove_temp_files(void);

/* ==== Writing files without losing data ====
 * A file written through an mf_file_writer replaces its target only once all of it is on disk: the
 * bytes go to a temporary file beside the target, which is fsynced, renamed over it, and the
 * directory fsynced. A crash, a full disk or a failed write leaves the old file exactly as it was. A
 * target that is a symlink is followed (the link stays; the file it points to is replaced); one that
 * is a directory, a device, a FIFO or a socket is refused. New files get mode 0644, a replaced file
 * keeps its mode. mf_remove_temp_files removes the temporary files of writers still open. A writer
 * belongs to one thread. */
typedef struct mf_file_writer mf_file_writer;
/* Errors: MF_ERR_ARG (empty path), MF_ERR_IO naming the path and the reason (not a regular file,
 * no such directory, permissions), MF_ERR_NOMEM. *out is NULL on failure. */
mf_status mf_file_writer_open(const char *path, mf_file_writer **out);
/* Append data[0..n). MF_ERR_IO ("no space left on device", ...): the temporary file is gone, later
 * writes and the commit fail with the same error; end with mf_file_writer_abort. */
mf_status mf_file_writer_write(mf_file_writer *w, const void *data, size_t n);
/* Replace the target with what was written and free w, also on failure (then the target is as it
 * was and the temporary file removed). */
mf_status mf_file_writer_commit(mf_file_writer *w);
/* Drop what was written and free w; accepts NULL. */
void mf_file_writer_abort(mf_file_writer *w);
/* The whole of data[0..n) as the new content of path, in one call (open, write, commit). */
mf_status mf_file_write_all(const char *path, const void *data, size_t n);

/* ==== Engine: models, contexts, forward passes ====
 *
 * A model is loaded once (weights stay in the mapped file) and is read-only: several contexts, on
 * several threads, may use one model. A context owns a KV cache, its compute graphs and its
 * threads; it belongs to one thread at a time. Every forward pass runs a compute graph that is
 * built once per shape and reused: decoding a token allocates nothing. */
typedef struct mf_model mf_model;
typedef struct mf_context mf_context;

/* Load a GGUF model (llama, qwen2 or qwen3 architecture; part 1 of a split model loads all parts).
 * Errors: MF_ERR_IO (cannot open), MF_ERR_FORMAT (not a GGUF model, missing metadata or tensor,
 * wrong shape), MF_ERR_UNSUPPORTED (architecture or weight type). */
mf_status mf_model_load(const char *path, mf_model **out);
/* Load options. no_mmap: read the file into memory (in 2 MiB pages where the OS gives them) instead
 * of mapping it: loading takes a copy, but decoding streams the weights faster (fewer TLB misses).
 * no_repack: keep every weight in the file's layout only. Otherwise the matrices whose kernels on
 * this CPU have a layout of their own (AVX-512: Q4_0, Q4_K) are copied into it once at load, the same
 * size as in the file (mf_model_info.packed_bytes), and the mapped file's pages of those matrices
 * are released (the file stays mapped; they are read again only if something needs them). Their
 * matmuls then never transpose the file's blocks, which costs most with few tokens: decoding,
 * speculative verification, a server's short prompt chunks. The results are the same bits either
 * way. The model's vectors (norms, biases) are copied too, so that nothing maps those pages again.
 * Without memory for the copy the load warns and keeps the file's layout. The copy serves contexts
 * of the best instruction set and MF_ORDER_EXACT only: a program that runs other kernels sets
 * no_repack. */
typedef struct mf_model_load_params {
    bool no_mmap;
    bool no_repack;
} mf_model_load_params;
mf_status mf_model_load_ex(const char *path, const mf_model_load_params *params, mf_model **out);
void mf_model_free(mf_model *m);

/* Facts about a loaded model. */
typedef struct mf_model_info {
    const char *arch;          /* "llama", "qwen2", "qwen3" */
    const char *name;          /* general.name, or "" */
    int32_t n_vocab, n_ctx_train, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff;
    float rope_freq_base, norm_eps;
    int32_t rope_dims;
    bool tied_embeddings;      /* the output projection is the token embedding */
    uint64_t n_params;         /* weights of the matrices and vectors */
    uint64_t weight_bytes;     /* bytes of all weights */
    uint64_t decode_bytes;     /* weight bytes one decoded token reads (all but the embedding table,
                                  which is read one row per token, unless tied) */
    uint64_t macs_per_token;   /* multiply-adds of one token's matmuls, output projection included */
    uint64_t macs_output;      /* of which the output projection (computed once per chunk in prefill) */
    mf_type main_type;         /* the type holding most weight bytes of the matrices */
    uint64_t type_bytes[MF_TYPE_COUNT]; /* bytes of matrices per type */
    uint64_t file_size;        /* all parts of the file */
    uint32_t n_parts;
    const char *pages;         /* how the OS holds the mapped weights: "huge" (2 MiB pages),
                                  "reloaded" (read again into 2 MiB pages at load), "small", "read"
                                  (read into memory, no_mmap), "n/a" */
    uint64_t packed_bytes;     /* bytes of the matrices copied at load into the kernels' own layout */
    uint32_t n_packed;         /* how many matrices (0 with no_repack) */
} mf_model_info;
/* Fill *info; never fails for a loaded model. Strings belong to the model. */
void mf_model_get_info(const mf_model *m, mf_model_info *info);
const char *mf_model_arch(const mf_model *m); /* "llama", "qwen2", "qwen3" */
/* 32 hex digits that identify the model file (a hash of its metadata, tensor infos and samples of
 * every tensor's data); saved states are bound to it. */
const char *mf_model_fingerprint(const mf_model *m);
int32_t mf_model_n_vocab(const mf_model *m);
int32_t mf_model_n_ctx_train(const mf_model *m);
int32_t mf_model_n_layer(const mf_model *m);
uint64_t mf_model_size_bytes(const mf_model *m); /* bytes of all weights */
double mf_model_load_seconds(const mf_model *m);

/* Fusion passes a context applies (bits of mf_context_params.fusions). */
#define MF_FUSION_SWIGLU 0x1u          /* silu(gate) * up in one op */
#define MF_FUSION_QKV_ROPE_STORE 0x2u  /* Q/K/V bias, RoPE and KV store in one op */
#define MF_FUSION_ALL 0x3u

/* How the CPU kernels order float operations. EXACT: as llama.cpp's x86 kernels where minfer has
 * them (quantized logits equal llama.cpp's bit for bit where the order allows it), else the
 * kernels' own order; FAST: the fastest order minfer has for each type on this CPU, agreeing with
 * llama.cpp to about 1e-4 NMSE (on x86 today: Q8_0 at the AVX2 level in one fma chain per output,
 * 1.2-1.5x EXACT's prompt speed on AVX2-only CPUs; every other quantized type as EXACT). Either
 * way results are deterministic and batch invariant. */
typedef enum mf_float_order { MF_ORDER_EXACT = 0, MF_ORDER_FAST } mf_float_order;

/* What a context tells mf_context_params.node_callback after each node of a forward pass (the
 * graph viewer's live run). Node ids are those of mf_context_dump_graph's export for a pass of the
 * same size, so events line up with a graph export. */
typedef struct mf_node_event {
    int32_t pass;          /* forward passes of this context before this one (0 for the first) */
    int32_t id;            /* node id in the graph export */
    const char *name;      /* "attn_norm-3", ... */
    const char *op;        /* op name as in the export: "matmul", "rms_norm", ... */
    bool decode;           /* a one-token graph (a decode step); else a prefill chunk */
    int32_t n_tokens;      /* tokens of the pass */
    int32_t graph_tokens;  /* the graph's token count: n_tokens (each pass runs a graph of its own size) */
    double seconds;        /* wall time of the node (the callback's own time not counted) */
    uint64_t bytes;        /* bytes the node reads and writes: weights, sources, output, and for attention
                            * the K/V cells it reads (an estimate: n_used cells of the cache) */
    uint64_t macs;         /* multiply-accumulates of matmul and attention; 0 for the other ops */
    int64_t ne[4];         /* output shape, ne[0] fastest, as in the export */
    int64_t count;         /* output values */
    double min, max, mean, rms; /* over the finite values among them; NaN when there are none */
    int64_t n_nan, n_inf;
    const float *data;     /* the count output values (ne[0] fastest), valid during the call only; NULL
                            * for integer outputs */
} mf_node_event;
/* Runs on the thread in mf_context_decode, after the node and before the next; it must not call
 * back into the context. */
typedef void (*mf_node_callback)(const mf_node_event *ev, void *user);

typedef struct mf_context_params {
    int32_t n_ctx;      /* KV cache cells (tokens of context); 0: the model's context length */
    int32_t n_ubatch;   /* prefill chunk: longer inputs run in chunks of this many tokens (default 512) */
    int32_t n_threads;  /* CPU threads; 0: one per online CPU */
    bool kv_f32;        /* KV cache in F32 instead of F16 */
    unsigned fusions;   /* MF_FUSION_* bits (default MF_FUSION_ALL) */
    mf_isa isa;         /* kernel level (default AUTO; one the CPU lacks falls back with a warning) */
    mf_float_order order; /* default MF_ORDER_EXACT */
    /* Record per-node statistics of every forward pass into this JSON file, written when the context
     * is freed (NULL: none; see docs/graph-json.md). trace_dump_dir: also write each traced node's
     * values (real tokens only) as raw f32 files there. */
    const char *trace_path;
    const char *trace_dump_dir;
    /* Called after every executed node of every forward pass (inputs, views and the KV store have
     * no event); NULL (default): not called, and nothing is measured or computed for it. The
     * statistics cost one pass over each output; nothing is allocated per call. */
    mf_node_callback node_callback;
    void *node_callback_user;
    /* Run on the CPU threads of this context instead of starting n_threads of its own (n_threads
     * is then that context's): for a context used in turn with another, as a speculative draft
     * with its target, so that the two sets of threads do not wait for work on the same cores.
     * Either may be freed first; a decode of one waits while the other decodes. NULL (default): own
     * threads. */
    const mf_context *threads_of;
} mf_context_params;

mf_context_params mf_context_default_params(void);
/* Errors: MF_ERR_ARG for out-of-range parameters, MF_ERR_NOMEM for a KV cache that does not fit. */
mf_status mf_context_create(const mf_model *m, const mf_context_params *p, mf_context **out);
void mf_context_free(mf_context *c);
int32_t mf_context_n_ctx(const mf_context *c);
int32_t mf_context_n_threads(const mf_context *c);
int32_t mf_context_n_ubatch(const mf_context *c);
/* The kernel level and float order the context runs. */
mf_isa mf_context_isa(const mf_context *c);
mf_float_order mf_context_order(const mf_context *c);
/* The type of the KV cache's cells: MF_TYPE_F16, or MF_TYPE_F32 with kv_f32. */
mf_type mf_context_kv_type(const mf_context *c);

/* Sequence ids are 0 .. MF_MAX_SEQ - 1. */
#define MF_MAX_SEQ 64

/* A batch of tokens for one forward pass. pos NULL: each sequence continues after its largest
 * position in the cache (0 for an empty one); seq NULL: every token belongs to sequence 0; logits
 * NULL: only the last token's logits are computed, else the tokens with logits[i] != 0. Along the
 * batch, each sequence's positions must increase, and none may be in the cache for that sequence
 * already (remove a tail with mf_context_seq_rm to recompute it). A token sees the cells of its own
 * sequence at positions <= its own, the batch's included. */
typedef struct mf_batch {
    int32_t n_tokens;
    const int32_t *tokens;
    const int32_t *pos;
    const int32_t *seq;
    const int8_t *logits;
} mf_batch;

/* Run the batch: store its K/V in the cache and compute the requested logits. Batch invariant: a
 * token's logits and K/V do not depend on the other tokens of the batch, the chunk size (n_ubatch)
 * or the thread count, only on its sequence's tokens and positions (bit for bit, for a given
 * instruction set). Atomic: on failure the cache is exactly as before the call. Errors:
 * MF_ERR_ARG (token id, sequence id or position out of range or repeated, empty batch), MF_ERR_RANGE
 * (context full: the message names n_ctx), MF_ERR_NOMEM. After a failed decode that had started
 * computing, no logits are available. */
mf_status mf_context_decode(mf_context *c, const mf_batch *b);
/* The logits of the last decode: row i (in batch order of the tokens that asked for logits) of
 * n_vocab floats; NULL if i is out of range. Valid until the next decode. */
const float *mf_context_logits(const mf_context *c, int32_t i);
int32_t mf_context_n_outputs(const mf_context *c);

/* ---- sequences ----
 * A cell of the cache may belong to several sequences at once: mf_context_seq_cp shares a prefix
 * without recomputing or copying it (a request reusing a cached prompt, a draft branch). Sequence
 * ids outside [0, MF_MAX_SEQ) give MF_ERR_ARG (or 0 / -1 from the queries). */

/* Cells of sequence seq in the cache (for positions 0..n-1 without gaps: the next position). */
int32_t mf_context_seq_len(const mf_context *c, int32_t seq);
/* Smallest / largest position of seq in the cache; -1 when it has none. */
int32_t mf_context_seq_pos_min(const mf_context *c, int32_t seq);
int32_t mf_context_seq_pos_max(const mf_context *c, int32_t seq);
/* Occupied cells (of all sequences; a shared cell counts once). */
int32_t mf_context_n_used(const mf_context *c);
/* Drop seq (-1: every sequence) from the cells with position in [p0, p1) (p1 < 0: to the end). */
mf_status mf_context_seq_rm(mf_context *c, int32_t seq, int32_t p0, int32_t p1);
/* Make dst share src's cells with position in [p0, p1) (p1 < 0: to the end), after dropping dst's
 * own cells in that range. Nothing is recomputed; decoding dst afterwards gives bit for bit what it
 * would have given had dst computed those tokens itself. */
mf_status mf_context_seq_cp(mf_context *c, int32_t src, int32_t dst, int32_t p0, int32_t p1);
/* Drop every sequence but seq. */
mf_status mf_context_seq_keep(mf_context *c, int32_t seq);
/* Empty the cache. */
void mf_context_clear(mf_context *c);
/* The tokens and positions of seq in position order into tokens[0..cap) and pos[0..cap) (either
 * may be NULL); returns the number of cells of seq (which may exceed cap), -1 for a bad id. */
int32_t mf_context_seq_tokens(const mf_context *c, int32_t seq, int32_t *tokens, int32_t *pos, int32_t cap);

/* ---- saved sequences ----
 * One sequence's cells (positions, tokens, K and V) as a byte image, bound to the model file (its
 * fingerprint) and the cache layout (KV type, layers, heads, head size). Loading replaces the
 * sequence's content; it checks the whole image first (format, checksums, model, layout, room in
 * the cache) and on any error leaves the cache untouched. Decoding after a load gives bit for bit
 * what the uninterrupted sequence would have given (on the same instruction set). */
/* Bytes mf_context_seq_state_save writes for seq now. */
mf_status mf_context_seq_state_size(mf_context *c, int32_t seq, size_t *size);
/* Write the image into buf[0..cap); MF_ERR_RANGE if it does not fit. *written: its size. */
mf_status mf_context_seq_state_save(mf_context *c, int32_t seq, void *buf, size_t cap, size_t *written);
/* Replace seq's cells with the image's. Errors: MF_ERR_FORMAT (not an image, corrupted, truncated),
 * MF_ERR_UNSUPPORTED (a newer format), MF_ERR_ARG (another model or cache layout), MF_ERR_RANGE (not
 * enough free cells). */
mf_status mf_context_seq_state_load(mf_context *c, int32_t seq, const void *data, size_t size);
/* The same through a file, written atomically (a temporary file beside it, fsync, rename; a symlink
 * is followed, a directory or device refused), so a failed save never damages an earlier file. */
mf_status mf_context_seq_state_save_file(mf_context *c, int32_t seq, const char *path);
mf_status mf_context_seq_state_load_file(mf_context *c, int32_t seq, const char *path);

/* Write the graph the context would run for n_tokens tokens with n_outputs logits rows, after
 * scheduling and fusion, as Graphviz DOT (format "dot") or JSON ("json", see docs/graph-json.md). */
mf_status mf_context_dump_graph(mf_context *c, int32_t n_tokens, int32_t n_outputs, const char *format,
                                const char *path);
#ifdef __cplusplus
}
#endif

#include "minfer/gguf.h"
#include "minfer/tokenizer.h"
#include "minfer/chat.h"
#include "minfer/sample.h"
#include "minfer/quantize.h"
#include "minfer/spec.h"

#endif /* MINFER_H */
