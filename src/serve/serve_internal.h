/* serve_internal.h: what the server's files share: a request's life as a task (parsed and validated
 * by an HTTP thread in serve_api.c, queued, run by the engine thread in serve_engine.c, answered
 * through its stream or deferred answer), the slots, the counters behind /metrics. Not an API. */
#ifndef MF_SERVE_INTERNAL_H
#define MF_SERVE_INTERNAL_H

#include "http.h"
#include "serve.h"

#include <jansson.h>
#include <pthread.h>

#define MF_SERVE_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MF_SERVE_MAX(a, b) ((a) > (b) ? (a) : (b))

typedef enum { TASK_CHAT, TASK_COMPLETION } task_kind;

/* One request, from the HTTP thread that parsed it to the engine thread that answers it. */
typedef struct serve_task {
    task_kind kind;
    char id[48];              /* "chatcmpl-..." / "cmpl-...": the same on every chunk */
    int64_t created;          /* unix seconds */
    int32_t *prompt;          /* the tokens to continue */
    int32_t n_prompt;
    mf_sample_settings settings; /* sampling, stop strings, n_predict */
    mf_gen *gen;              /* the generator of those settings, made (and so checked) by the HTTP
                               * thread; n_predict clamped to the slot's room */
    bool stream, include_usage, logprobs;
    int top_logprobs;
    mf_http_stream *stream_h; /* stream = true */
    mf_http_deferred *deferred; /* stream = false */
    double t_queued;
    struct serve_task *next;
} serve_task;

void serve_task_free(serve_task *t);

/* The engine's counters and state for /metrics and /slots, read by HTTP threads under the lock. */
typedef struct serve_stats {
    uint64_t requests, requests_ok, requests_cancelled, requests_rejected;
    uint64_t prompt_tokens, prompt_tokens_cached, gen_tokens, n_decode;
    uint64_t draft_tokens, draft_accepted; /* speculative decoding: tokens drafted, of which kept */
    double prompt_seconds, gen_seconds;
    int32_t busy_slots, queued, kv_used;
} serve_stats;

typedef struct serve_engine serve_engine;

/* The whole server: model, tokenizer, template, engine, HTTP server. */
typedef struct serve {
    const mf_serve_params *p;
    mf_model *model;
    mf_model *draft; /* -md, or NULL */
    const mf_tokenizer *tok;
    mf_chat_template *tmpl;
    char model_name[256];
    char fingerprint[40]; /* "fp_" + 16 hex digits of the model's fingerprint */
    int64_t created;
    int32_t n_ctx_slot, n_vocab;
    mf_http_server *http;
    serve_engine *engine;
    int ready;    /* the model is loaded and the engine runs (atomic: HTTP threads read it) */
    int stopping; /* atomic */
} serve;

/* ---- engine (serve_engine.c) ---- */

mf_status serve_engine_create(serve *s, serve_engine **out);
/* Stop taking tasks (new ones are answered 503), let the accepted ones (running or queued) finish
 * for grace_s, cancel the rest, join the thread. The engine still takes (and refuses) calls until serve_engine_free. */
void serve_engine_stop(serve_engine *e, double grace_s);
void serve_engine_free(serve_engine *e); /* stops first if needed; NULL fine */
/* Reserve a place in the queue before opening a task's answer; false when the queue is full or the
 * server stops (the caller answers 503). A reservation is then either given up (unreserve) or
 * used by submit, which takes the task (the engine owns it from here, and answers it even when the
 * server began to stop in between). */
bool serve_engine_reserve(serve_engine *e);
void serve_engine_unreserve(serve_engine *e);
void serve_engine_submit(serve_engine *e, serve_task *t);
void serve_engine_stats(serve_engine *e, serve_stats *out);
/* The slots as JSON (GET /slots). */
json_t *serve_engine_slots_json(serve_engine *e);

/* ---- requests and answers (serve_api.c) ---- */

void serve_routes(serve *s);

/* Why a request is refused: the status (400, or 500 when out of memory), the field, the code. */
typedef struct serve_refusal {
    int status;
    char param[64], code[48];
    char msg[1024];
} serve_refusal;

/* Check a completion request (its JSON body) and make its task: the prompt rendered and
 * tokenized, the sampling settings and the generator; NULL with why filled when it is refused.
 * Uses s->p, s->tok, s->tmpl, s->n_vocab and s->n_ctx_slot only (the request fuzzer has no model). */
serve_task *serve_parse(const serve *s, task_kind kind, const json_t *req, serve_refusal *why);

/* Chunks and bodies in the OpenAI shapes, built by the engine thread. */
json_t *serve_chunk(const serve *s, const serve_task *t, const char *text, size_t len, json_t *logprobs,
                    const char *finish_reason, bool first);
json_t *serve_usage(int32_t n_prompt, int64_t n_gen, int32_t n_cached);
json_t *serve_final(const serve *s, const serve_task *t, const char *text, size_t len, json_t *logprobs,
                    const char *finish_reason, int32_t n_cached, int64_t n_gen);
/* The logprob entry of a sampled token: its log-probability under the model (log-softmax of the raw
 * logits) and, when top > 0, the top alternatives, in the chat or the legacy completion shape. */
json_t *serve_logprob(const serve *s, const float *logits, int32_t token, int top, task_kind kind);

#endif /* MF_SERVE_INTERNAL_H */
