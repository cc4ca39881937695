/* serve.h: `minfer serve`, an OpenAI-compatible HTTP server on one model: /v1/chat/completions and
 * /v1/completions (streaming and not), /v1/models, /health, /metrics, /tokenize, /detokenize,
 * /slots. One engine thread owns the model's context and runs continuous batching over the slots
 * (one sequence each); HTTP threads parse and validate requests and hand them over through a
 * bounded queue (docs/server.md). A client of the public API (minfer.h) and the HTTP layer
 * (http.h) only. */
#ifndef MF_SERVE_H
#define MF_SERVE_H

#include "minfer.h"

typedef struct mf_serve_params {
    const char *model;        /* GGUF path */
    const char *alias;        /* the model's name in answers and /v1/models; NULL: the file name */
    const char *host;         /* default 127.0.0.1 */
    uint16_t port;            /* default 8080; 0: any free port (printed) */
    int32_t n_parallel;       /* slots (sequences decoded together); default 4 */
    int32_t n_ctx;            /* KV cells of all slots together; 0: 4096 per slot, at most the model's
                                 context length per slot */
    int32_t n_threads;        /* CPU threads; 0: every online CPU */
    int32_t n_http_threads;   /* HTTP worker threads; 0: n_parallel + 4 */
    int32_t n_batch;          /* most tokens one step decodes (default 512) */
    int32_t max_queue;        /* requests waiting for a slot; more get 503 (default 4 x n_parallel) */
    const char *api_key;      /* Bearer key every API request must carry; NULL: none */
    int32_t timeout_s;        /* idle connection timeout (default 600) */
    double shutdown_grace_s;  /* on SIGINT/SIGTERM, how long running requests may finish (default 3) */
    int32_t sse_ping_s;       /* a stream silent this long (queued, or its prompt still running) gets
                                 a ": ping" comment; 0: none (default 15) */
    bool kv_f32;              /* KV cache in F32 */
    mf_context_params ctx;    /* isa, order, trace: from the environment, as for other commands */
    mf_sample_settings defaults; /* sampling defaults (flags); requests override per field */
    bool no_mmap;
    bool no_repack;           /* mf_model_load_params.no_repack, for the model and the draft */
    const char *cors_origin;  /* Access-Control-Allow-Origin, or NULL */
    /* Speculative decoding in every slot (docs/spec.md): spec.lookup for n-gram lookup in each slot's
     * own tokens, or draft_model, a GGUF of the same vocabulary (its context holds one sequence per
     * slot); draft_min, draft_max (at most --batch-size / --parallel - 1, lowered to that with a
     * warning), p_min and draft_threads as for `minfer run`. spec.draft and spec.draft_ctx are set
     * by the server. */
    const char *draft_model;
    mf_spec_params spec;
    /* Called once the server listens and the model is loaded, with its URL (tests and the program
     * print it); may be NULL. */
    void (*on_ready)(const char *url, void *user);
    void *user;
} mf_serve_params;

/* Defaults as listed above; defaults is initialised (mf_sample_settings_init). */
void mf_serve_default_params(mf_serve_params *p);

/* Run until SIGINT or SIGTERM (the handlers are installed here), then stop accepting, let running
 * requests finish for shutdown_grace_s, and return MF_OK. Errors (the message says which): the
 * model does not load, the address cannot be bound, bad parameters. */
mf_status mf_serve_run(const mf_serve_params *p);

/* Ask a running server to stop as a signal would (async-signal-safe; for tests and embedders). */
void mf_serve_request_stop(void);

#endif /* MF_SERVE_H */
