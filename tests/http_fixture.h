/* http_fixture.h: the test server of the src/http tests: handlers of every kind (JSON, prefix,
 * text, metrics, busy, silent, stream), a mailbox through which stream handlers hand their streams
 * to the test, close-callback records to wait on, and the OpenAI error-shape check. */
#ifndef MF_HTTP_FIXTURE_H
#define MF_HTTP_FIXTURE_H

#include "http/http_impl.h"
#include "http_client.h"
#include "test.h"

#include <errno.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

/* The error object of an answer: status, type and message checked against what is expected. */
static inline void check_error(const resp *r, int status, const char *type, const char *in_message) {
    CHECKF(r->status == status, "status %d, expected %d (%s)", r->status, status, r->body);
    json_error_t e;
    json_t *j = json_loadb(r->body, r->body_len, 0, &e);
    json_t *o = json_object_get(j, "error");
    CHECKF(o && json_object_size(o) == 4, "error shape: %s", r->body);
    const char *t = json_string_value(json_object_get(o, "type"));
    const char *m = json_string_value(json_object_get(o, "message"));
    CHECKF(t && strcmp(t, type) == 0, "type %s, expected %s", t ? t : "(none)", type);
    CHECKF(m && strstr(m, in_message), "message '%s' lacks '%s'", m ? m : "(none)", in_message);
    CHECK(json_object_get(o, "param") && json_object_get(o, "code"));
    json_decref(j);
}

/* ---- handlers ---- */

static void h_models(mf_http_request *r, void *u) {
    (void)u;
    const char *i = mf_http_request_query(r, "i");
    json_t *j = json_pack("{s:s, s:[], s:s?}", "object", "list", "data", "i", i);
    mf_http_respond_json(r, 200, j);
    json_decref(j);
}

static void h_model_id(mf_http_request *r, void *u) {
    (void)u;
    json_t *j = json_pack("{s:s, s:s}", "id", mf_http_request_path_rest(r), "client", mf_http_request_client(r));
    mf_http_respond_json(r, 200, j);
    json_decref(j);
}

static void h_chat(mf_http_request *r, void *u) {
    (void)u;
    json_t *body = mf_http_request_json(r);
    if (!body) return;
    json_t *j = json_pack("{s:b, s:I}", "ok", 1, "keys", (json_int_t)json_object_size(body));
    mf_http_respond_json(r, 200, j);
    json_decref(j);
    json_decref(body);
}

static void h_health(mf_http_request *r, void *u) {
    (void)u;
    mf_http_respond_text(r, 200, "ok");
}

static void h_metrics(mf_http_request *r, void *u) {
    (void)u;
    mf_http_respond_metrics(r, "minfer_requests_total 1\n");
}

static void h_busy(mf_http_request *r, void *u) {
    (void)u;
    mf_http_respond_busy(r, 503, 2, "all %d slots are busy", 4);
}

static void h_silent(mf_http_request *r, void *u) { (void)r, (void)u; }

/* Streams go to the test through a mailbox; each carries a record of its close callback. */
typedef struct closed_rec {
    pthread_mutex_t m;
    pthread_cond_t c;
    int calls;
    mf_http_close_reason why;
    double at;
} closed_rec;

static closed_rec recs[64];
static atomic_int n_recs;

static struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    mf_http_stream *st[64];
    closed_rec *rec[64];
    int n, taken;
} box = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, {0}, 0, 0};

static void on_closed(mf_http_stream *st, mf_http_close_reason why, void *user) {
    closed_rec *c = user;
    CHECK(mf_http_stream_closed(st));
    CHECK(mf_http_stream_push_data(st, "x", 1) == MF_HTTP_PUSH_CLOSED);
    pthread_mutex_lock(&c->m);
    c->calls++;
    c->why = why;
    c->at = mf_time_s();
    pthread_cond_broadcast(&c->c);
    pthread_mutex_unlock(&c->m);
}

static void h_stream(mf_http_request *r, void *u) {
    (void)u;
    const char *qb = mf_http_request_query(r, "max");
    int i = atomic_fetch_add(&n_recs, 1);
    closed_rec *c = &recs[i];
    pthread_mutex_init(&c->m, NULL);
    pthread_cond_init(&c->c, NULL);
    mf_http_stream_params sp = {qb ? strtoul(qb, NULL, 10) : 0, on_closed, c};
    mf_http_stream *st = mf_http_respond_stream(r, &sp);
    if (!st) return;
    pthread_mutex_lock(&box.m);
    box.st[box.n] = st;
    box.rec[box.n++] = c;
    pthread_cond_broadcast(&box.c);
    pthread_mutex_unlock(&box.m);
}

/* The next stream a handler made (waits up to 5 s). */
static inline mf_http_stream *take_stream(closed_rec **rec) {
    pthread_mutex_lock(&box.m);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 5;
    while (box.taken == box.n && pthread_cond_timedwait(&box.c, &box.m, &dl) == 0) {}
    mf_http_stream *st = NULL;
    if (box.taken < box.n) {
        *rec = box.rec[box.taken];
        st = box.st[box.taken++];
    }
    pthread_mutex_unlock(&box.m);
    return st;
}

/* Wait up to `secs` for a stream's close callback; returns the number of calls so far. */
static inline int wait_closed(closed_rec *c, double secs) {
    pthread_mutex_lock(&c->m);
    double end = mf_time_s() + secs;
    while (!c->calls && mf_time_s() < end) {
        pthread_mutex_unlock(&c->m);
        usleep(1000);
        pthread_mutex_lock(&c->m);
    }
    int n = c->calls;
    pthread_mutex_unlock(&c->m);
    return n;
}

static inline mf_http_server *start_server(mf_http_params p) {
    p.port = 0;
    mf_http_server *s = NULL;
    mf_status st = mf_http_server_create(&p, &s);
    CHECKF(st == MF_OK, "create: %s", mf_last_error());
    if (st) return NULL;
    CHECK(mf_http_route(s, MF_HTTP_GET, "/v1/models", h_models, NULL) == MF_OK);
    CHECK(mf_http_route_prefix(s, MF_HTTP_GET, "/v1/models/", h_model_id, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_POST, "/v1/chat/completions", h_chat, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_GET, "/health", h_health, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_GET, "/metrics", h_metrics, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_GET, "/busy", h_busy, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_GET, "/silent", h_silent, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_POST | MF_HTTP_GET, "/stream", h_stream, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_GET, "/v1/models", h_models, NULL) == MF_ERR_ARG); /* taken */
    st = mf_http_server_start(s);
    CHECKF(st == MF_OK, "start: %s", mf_last_error());
    CHECK(mf_http_server_port(s) != 0);
    CHECK(mf_http_route(s, MF_HTTP_GET, "/late", h_health, NULL) == MF_ERR_ARG);
    if (st) {
        mf_http_server_free(s);
        return NULL;
    }
    return s;
}

static inline void timed(const char *prog, const char *name, void (*fn)(void)) {
    double t0 = mf_time_s();
    fn();
    printf("%s: %s %.2f s\n", prog, name, mf_time_s() - t0);
}

#endif /* MF_HTTP_FIXTURE_H */
