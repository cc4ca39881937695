/* serve.c: the server's life: listen first (so /health answers 503 while the model loads), load the
 * model, its tokenizer and chat template, start the engine, say where it listens, then wait for
 * SIGINT/SIGTERM: stop admitting, let running requests finish within the grace, close. */
#include "serve_internal.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

void mf_serve_request_stop(void) { stop_requested = 1; }

void mf_serve_default_params(mf_serve_params *p) {
    memset(p, 0, sizeof *p);
    p->host = "127.0.0.1";
    p->port = 8080;
    p->n_parallel = 4;
    p->n_batch = 512;
    p->timeout_s = 600;
    p->shutdown_grace_s = 3.0; /* and at most 2 s to close the connections: exit within 5 s */
    p->sse_ping_s = 15;
    p->ctx = mf_context_default_params();
    mf_sample_settings_init(&p->defaults);
    p->spec = mf_spec_default_params();
}

static mf_status check_params(mf_serve_params *p) {
    if (!p->model || !*p->model) return mf_set_error(MF_ERR_ARG, "serve: no model given");
    if (p->n_parallel < 1 || p->n_parallel > MF_MAX_SEQ)
        return mf_set_error(MF_ERR_ARG, "--parallel %d: must be in [1, %d]", p->n_parallel, MF_MAX_SEQ);
    if (p->n_batch < p->n_parallel || p->n_batch > 8192)
        return mf_set_error(MF_ERR_ARG, "--batch-size %d: must be in [--parallel (%d), 8192]", p->n_batch, p->n_parallel);
    if (p->max_queue <= 0) p->max_queue = 4 * p->n_parallel;
    if (p->n_http_threads <= 0) p->n_http_threads = p->n_parallel + 4;
    if (p->timeout_s <= 0) return mf_set_error(MF_ERR_ARG, "--timeout %d: must be positive", p->timeout_s);
    if (p->n_ctx < 0) return mf_set_error(MF_ERR_ARG, "--ctx-size %d: must be >= 0", p->n_ctx);
    if (p->draft_model && p->spec.lookup)
        return mf_set_error(MF_ERR_ARG, "--model-draft and --lookup are two draft sources: choose one");
    if (p->draft_model || p->spec.lookup) {
        mf_spec_params *sp = &p->spec;
        if (sp->draft_max < 1 || sp->draft_max > MF_SPEC_MAX_DRAFT || sp->draft_min < 0 || sp->draft_min > sp->draft_max)
            return mf_set_error(MF_ERR_ARG, "--draft-min %d, --draft-max %d: use 0 <= min <= max <= %d", sp->draft_min,
                                sp->draft_max, MF_SPEC_MAX_DRAFT);
        /* every generating slot's round (its last token and its drafts) fits one step's batch */
        const int32_t most = p->n_batch / p->n_parallel - 1;
        if (most < 1)
            return mf_set_error(MF_ERR_ARG, "--batch-size %d leaves no room for drafts with %d slots: give at least %d",
                                p->n_batch, p->n_parallel, 2 * p->n_parallel);
        if (sp->draft_max > most) {
            mf_log_message(MF_LOG_WARN, "--draft-max %d lowered to %d (--batch-size %d over %d slots)", sp->draft_max,
                           most, p->n_batch, p->n_parallel);
            sp->draft_max = most;
            if (sp->draft_min > most) sp->draft_min = most;
        }
    }
    return MF_OK;
}

/* The name answers carry: the alias, else the file's name without its directory. */
static void model_name(const mf_serve_params *p, char *out, size_t cap) {
    const char *base = strrchr(p->model, '/');
    snprintf(out, cap, "%s", p->alias && *p->alias ? p->alias : base ? base + 1 : p->model);
}

static mf_status load(serve *s) {
    const mf_serve_params *p = s->p;
    const mf_model_load_params lp = {.no_mmap = p->no_mmap, .no_repack = p->no_repack};
    mf_status st = mf_model_load_ex(p->model, &lp, &s->model);
    if (st) return st;
    if (!(s->tok = mf_model_tokenizer(s->model))) return MF_ERR_FORMAT;
    if ((st = mf_chat_template_from_gguf(mf_model_gguf(s->model), NULL, &s->tmpl))) return st;
    s->n_vocab = mf_model_n_vocab(s->model);
    const int32_t train = mf_model_n_ctx_train(s->model);
    s->n_ctx_slot = p->n_ctx > 0 ? p->n_ctx / p->n_parallel : MF_SERVE_MIN(4096, train);
    if (s->n_ctx_slot < 16)
        return mf_set_error(MF_ERR_ARG, "--ctx-size %d for %d slots leaves %d tokens a slot; give at least %d", p->n_ctx,
                       p->n_parallel, s->n_ctx_slot, 16 * p->n_parallel);
    if (s->n_ctx_slot > train)
        mf_log_message(MF_LOG_WARN, "a slot's context of %d tokens is longer than the model's training context (%d)",
               s->n_ctx_slot, train);
    snprintf(s->fingerprint, sizeof s->fingerprint, "fp_%.16s", mf_model_fingerprint(s->model));
    if (p->draft_model) {
        if ((st = mf_model_load_ex(p->draft_model, &lp, &s->draft)) || (st = mf_spec_check_vocab(s->model, s->draft))) {
            char why[1024];
            snprintf(why, sizeof why, "%s", mf_last_error());
            return mf_set_error(st, "draft model %s: %s", p->draft_model, why);
        }
    }
    return serve_engine_create(s, &s->engine);
}

mf_status mf_serve_run(const mf_serve_params *params) {
    mf_serve_params p = *params;
    mf_status st = check_params(&p);
    if (st) return st;
    serve s = {.p = &p, .created = (int64_t)time(NULL)};
    model_name(&p, s.model_name, sizeof s.model_name);
    mf_http_params hp = mf_http_default_params();
    hp.host = p.host;
    hp.port = p.port;
    hp.n_threads = p.n_http_threads;
    hp.max_connections = (unsigned)MF_SERVE_MAX(256, 4 * p.n_http_threads);
    hp.connection_timeout_s = (unsigned)p.timeout_s;
    hp.api_key = p.api_key;
    static const char *const exempt[] = {"/health", NULL};
    hp.auth_exempt_paths = exempt;
    hp.cors_origin = p.cors_origin;
    hp.sse_ping_s = (unsigned)p.sse_ping_s;
    if ((st = mf_http_server_create(&hp, &s.http))) return st;
    serve_routes(&s);
    if ((st = mf_http_server_start(s.http))) {
        mf_http_server_free(s.http);
        return st;
    }
    stop_requested = 0;
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    signal(SIGPIPE, SIG_IGN);

    if (!(st = load(&s))) {
        __atomic_store_n(&s.ready, 1, __ATOMIC_SEQ_CST);
        char url[300];
        const bool v6 = strchr(p.host, ':') != NULL;
        snprintf(url, sizeof url, "http://%s%s%s:%u", v6 ? "[" : "", p.host, v6 ? "]" : "", (unsigned)mf_http_server_port(s.http));
        if (p.on_ready) p.on_ready(url, p.user);
        while (!stop_requested) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
    }
    char err[1024];
    snprintf(err, sizeof err, "%s", st ? mf_last_error() : ""); /* the shutdown below may log over it */
    /* stop: no new requests, the running ones finish within the grace, then the connections close */
    __atomic_store_n(&s.stopping, 1, __ATOMIC_SEQ_CST);
    if (s.engine) serve_engine_stop(s.engine, p.shutdown_grace_s);
    mf_http_server_stop(s.http, 2.0); /* after this no handler runs: the engine can go */
    mf_http_server_free(s.http);
    serve_engine_free(s.engine);
    mf_chat_template_free(s.tmpl);
    mf_model_free(s.draft);
    mf_model_free(s.model);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return st ? mf_set_error(st, "%s", err) : MF_OK;
}
