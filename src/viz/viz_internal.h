/* viz_internal.h: the viewer's state, shared by the server (viz.c) and the run thread (viz_run.c). */
#ifndef MF_VIZ_INTERNAL_H
#define MF_VIZ_INTERNAL_H

#include "viz.h"
#include "http.h"

#include <pthread.h>
#include <stdbool.h>

#define VIZ_EVENT_CAP 16384 /* one node event's JSON text */
#define VIZ_PROMPT_MAX 16384 /* bytes of a run's prompt */

typedef struct viz {
    mf_viz_params p;
    char model_name[256];
    mf_model *model;
    const mf_tokenizer *tok;
    mf_context *live_ctx;   /* the run thread's */
    mf_context *export_ctx; /* graph exports for the HTTP threads, under export_lock */
    pthread_mutex_t export_lock;
    void *gvc;              /* Graphviz context (GVC_t), under export_lock */
    mf_http_server *http;

    /* the run thread and the one job it may hold, under lock */
    pthread_t thread;
    bool thread_started, stopping, busy;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    mf_http_stream *job_stream;
    char job_prompt[VIZ_PROMPT_MAX];
    int32_t job_n;
    float job_temp;
    bool job_chat;

    /* the running run (run thread only) */
    mf_http_stream *stream;
    int32_t last_pass;      /* the pass of the last node event (a new one starts a "pass" event) */
    char event[VIZ_EVENT_CAP];
} viz;

/* ---- what clients send (viz_req.c): pure checks, fuzzed by tests/fuzz_viz.c ---- */
typedef struct viz_refusal {
    const char *param; /* the query parameter at fault, or NULL */
    char msg[256];
} viz_refusal;
typedef struct viz_run_req {
    const char *prompt; /* the query's string */
    int32_t n;          /* tokens to generate, [1, max_tokens]; default 8 */
    float temp;         /* [0, 10]; default 0 (greedy) */
    bool chat;          /* wrap the prompt in the model's chat template */
} viz_run_req;
/* GET /api/run's parameters (NULL: absent). false with why set (a 400) for a missing or oversized
 * prompt, n outside [1, max_tokens] or not a plain decimal, temp outside [0, 10], chat not 0 or 1. */
bool viz_parse_run(const char *prompt, const char *n, const char *temp, const char *chat, int32_t max_tokens,
                   viz_run_req *out, viz_refusal *why);
/* GET /api/graph's: stage prefill (default) or decode; a prefill graph's n in [2, 512] (default 8). */
bool viz_parse_graph(const char *stage, const char *n, int32_t *n_tokens, viz_refusal *why);
/* POST /api/layout's body before Graphviz reads it: non-empty text without NUL. */
bool viz_check_layout_body(const char *body, size_t len, viz_refusal *why);
/* The prompt's token ids (*ids: malloc'd, the caller frees), through g's chat template as one user
 * message when chat. Errors: the template's, the tokenizer's. */
mf_status viz_prompt_tokens(const mf_gguf *g, const mf_tokenizer *tok, const char *prompt, bool chat, int32_t **ids,
                            size_t *n_ids);

char *viz_export(viz *v, int32_t n_tokens, const char *format, size_t *len);
void viz_on_node(const mf_node_event *ev, void *user);
void viz_h_run(mf_http_request *r, void *user);
mf_status viz_run_start(viz *v);
void viz_run_stop(viz *v);

#endif /* MF_VIZ_INTERNAL_H */
