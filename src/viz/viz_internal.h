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

char *viz_export(viz *v, int32_t n_tokens, const char *format, size_t *len);
void viz_on_node(const mf_node_event *ev, void *user);
void viz_h_run(mf_http_request *r, void *user);
mf_status viz_run_start(viz *v);
void viz_run_stop(viz *v);

#endif /* MF_VIZ_INTERNAL_H */
