/* test_http_defer.c: deferred answers of src/http over real sockets: answered later from another
 * thread (JSON, errors, bad statuses, headers), 32 waiting at once on 2 workers answered in
 * reverse, clients that close, reset or half-close while waiting, release without an answer
 * (500) and inside the callback, HEAD, keep-alive, answers given before the handler returns, a
 * stop whose grace delivers one answer and turns the other into 503, and a race of answers,
 * releases and disconnects. Checks run on the test thread only: the callbacks and helper threads
 * record what they saw. */
#include "http_fixture.h"

/* ---- deferred requests handed to the test ---- */

/* One deferred request: what its close callback saw, for the test to wait on and check. */
typedef struct drec {
    pthread_mutex_t m;
    pthread_cond_t c;
    mf_http_deferred *d;
    int i;              /* the request's ?i= */
    bool release_in_cb; /* ?rcb=1: the callback releases the owner's reference */
    int calls;
    mf_http_close_reason why, reason_in_cb;
    double at;
    bool closed_in_cb, cb_on_test_thread;
    mf_http_answer answer_in_cb; /* an answer tried inside the callback */
} drec;

#define N_RECS 1024
static drec drecs[N_RECS];
static atomic_int n_drecs;
static pthread_t test_thread;

static struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    drec *q[N_RECS];
    int n, taken;
} dbox = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, 0, 0};

static void on_deferred_closed(mf_http_deferred *d, mf_http_close_reason why, void *user) {
    drec *c = user;
    bool closed = mf_http_deferred_closed(d);
    mf_http_close_reason now = mf_http_deferred_close_reason(d);
    mf_http_answer a = mf_http_deferred_respond(d, 200, "text/plain", "late", 4);
    pthread_mutex_lock(&c->m);
    c->calls++;
    c->why = why;
    c->reason_in_cb = now;
    c->at = mf_time_s();
    c->closed_in_cb = closed;
    c->answer_in_cb = a;
    c->cb_on_test_thread = pthread_equal(pthread_self(), test_thread);
    bool release = c->release_in_cb;
    pthread_cond_broadcast(&c->c);
    pthread_mutex_unlock(&c->m);
    if (release) mf_http_deferred_release(d);
}

/* GET and POST /defer?i=N[&rcb=1]: a header set on r first, then deferred to the test. */
static void h_defer(mf_http_request *r, void *u) {
    (void)u;
    int k = atomic_fetch_add(&n_drecs, 1);
    if (k >= N_RECS) {
        mf_http_respond_error(r, 500, NULL, NULL, "test: out of records");
        return;
    }
    drec *c = &drecs[k];
    const char *i = mf_http_request_query(r, "i"), *rcb = mf_http_request_query(r, "rcb");
    c->i = i ? atoi(i) : -1;
    c->release_in_cb = rcb && strcmp(rcb, "1") == 0;
    mf_http_set_header(r, "X-Before", "1");
    mf_http_deferred *d = mf_http_defer(r, &(mf_http_deferred_params){on_deferred_closed, c});
    if (!d) return; /* answered (503 while stopping) */
    pthread_mutex_lock(&dbox.m);
    c->d = d;
    dbox.q[dbox.n++] = c;
    pthread_cond_broadcast(&dbox.c);
    pthread_mutex_unlock(&dbox.m);
}

/* The next deferred request (waits up to 10 s). */
static drec *take_deferred(void) {
    pthread_mutex_lock(&dbox.m);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    while (dbox.taken == dbox.n && pthread_cond_timedwait(&dbox.c, &dbox.m, &dl) == 0) {}
    drec *c = dbox.taken < dbox.n ? dbox.q[dbox.taken++] : NULL;
    pthread_mutex_unlock(&dbox.m);
    return c;
}

/* Wait up to secs for the close callback; returns the number of calls so far. */
static int wait_calls(drec *c, double secs) {
    pthread_mutex_lock(&c->m);
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)secs;
    while (!c->calls && pthread_cond_timedwait(&c->c, &c->m, &dl) == 0) {}
    int n = c->calls;
    pthread_mutex_unlock(&c->m);
    return n;
}

/* POST /defer_now: deferred and answered before the handler returns (the connection is never
 * suspended). POST /defer_thread: answered by a thread started in the handler, racing the
 * suspension. POST /defer_misuse: a second defer and a stream on a deferred request are refused. */
static void h_defer_now(mf_http_request *r, void *u) {
    (void)u;
    mf_http_deferred *d = mf_http_defer(r, NULL);
    if (!d) return;
    json_t *j = json_pack("{s:b}", "now", 1);
    mf_http_deferred_respond_json(d, 201, j);
    json_decref(j);
    mf_http_deferred_release(d);
}

static struct {
    pthread_mutex_t m;
    pthread_t t[64];
    int n;
} answerers = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

static void *answer_main(void *arg) {
    mf_http_deferred *d = arg;
    mf_http_deferred_respond(d, 202, "text/plain; charset=utf-8", "from a thread", 13);
    mf_http_deferred_release(d);
    return NULL;
}

static void h_defer_thread(mf_http_request *r, void *u) {
    (void)u;
    mf_http_deferred *d = mf_http_defer(r, NULL);
    if (!d) return;
    pthread_mutex_lock(&answerers.m);
    if (answerers.n < 64 && pthread_create(&answerers.t[answerers.n], NULL, answer_main, d) == 0) answerers.n++;
    else answer_main(d);
    pthread_mutex_unlock(&answerers.m);
}

static atomic_int misuse_refused;

static void h_defer_misuse(mf_http_request *r, void *u) {
    (void)u;
    mf_http_deferred *d = mf_http_defer(r, NULL);
    if (!d) return;
    if (!mf_http_defer(r, NULL) && strstr(mf_last_error(), "already")) atomic_fetch_add(&misuse_refused, 1);
    if (!mf_http_respond_stream(r, NULL)) atomic_fetch_add(&misuse_refused, 1);
    mf_http_deferred_respond(d, 200, "text/plain", "once", 4);
    mf_http_deferred_release(d);
}

static mf_http_server *defer_server(mf_http_params p) {
    p.port = 0;
    mf_http_server *s = NULL;
    mf_status st = mf_http_server_create(&p, &s);
    CHECKF(st == MF_OK, "create: %s", mf_last_error());
    if (st) return NULL;
    CHECK(mf_http_route(s, MF_HTTP_GET | MF_HTTP_POST, "/defer", h_defer, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_POST, "/defer_now", h_defer_now, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_POST, "/defer_thread", h_defer_thread, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_POST, "/defer_misuse", h_defer_misuse, NULL) == MF_OK);
    CHECK(mf_http_route(s, MF_HTTP_GET, "/health", h_health, NULL) == MF_OK);
    st = mf_http_server_start(s);
    CHECKF(st == MF_OK, "start: %s", mf_last_error());
    if (st) {
        mf_http_server_free(s);
        return NULL;
    }
    return s;
}

/* ---- a client that sends now and reads later ---- */

typedef struct client {
    reader rd;
    resp r;
} client;

static client *client_open(uint16_t port) {
    client *c = calloc(1, sizeof *c);
    c->rd.fd = dial(port);
    return c;
}

static bool client_send(client *c, const char *method, const char *target, const char *body, bool keep_alive) {
    char req[1024];
    int n = snprintf(req, sizeof req,
                     "%s %s HTTP/1.1\r\nHost: t\r\n%sContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, target, keep_alive ? "" : "Connection: close\r\n", body ? strlen(body) : 0,
                     body ? body : "");
    return c->rd.fd >= 0 && send_all(c->rd.fd, req, (size_t)n);
}

static bool client_read(client *c, bool head_only) { return read_response(&c->rd, &c->r, head_only); }

static void client_close(client *c) {
    if (c && c->rd.fd >= 0) close(c->rd.fd);
    free(c);
}

/* Close with a reset (SO_LINGER 0) instead of a FIN. */
static void client_reset(client *c) {
    struct linger lg = {1, 0};
    setsockopt(c->rd.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    client_close(c);
}

static bool header_is(const resp *r, const char *name, const char *want) {
    const char *v = resp_header(r, name);
    return v && strcmp(v, want) == 0;
}

/* A deferred request of c (sent here), taken from the handler. */
static drec *defer_one(client *c, const char *method, const char *target) {
    CHECK(client_send(c, method, target, strcmp(method, "POST") == 0 ? "{\"q\":1}" : NULL, false));
    drec *rec = take_deferred();
    CHECK(rec != NULL);
    /* Give the worker time to suspend the connection, so the answer below resumes it (the other
     * order, an answer before the suspension, is the fast path checked elsewhere). */
    if (rec) usleep(50000);
    return rec;
}

/* ---- answers ---- */

static void test_answer_json(uint16_t port) {
    client *c = client_open(port);
    drec *rec = defer_one(c, "POST", "/defer?i=1");
    if (!rec) goto out;
    mf_http_deferred *d = rec->d;
    CHECK(!mf_http_deferred_closed(d) && mf_http_deferred_close_reason(d) == MF_HTTP_CLOSE_NONE);
    CHECK(mf_http_deferred_set_header(d, "X-After", "2") == MF_OK);
    CHECK(mf_http_deferred_set_header(d, "Bad Name", "x") == MF_ERR_ARG);
    CHECK(mf_http_deferred_set_header(d, "X-Evil", "a\r\nSet-Cookie: x=1") == MF_ERR_ARG);
    json_t *j = json_pack("{s:s, s:i}", "id", "chatcmpl-1", "i", 1);
    CHECK(mf_http_deferred_respond_json(d, 200, j) == MF_HTTP_ANSWER_OK);
    CHECK(mf_http_deferred_respond_json(d, 500, j) == MF_HTTP_ANSWER_DUPLICATE);
    CHECK(mf_http_deferred_respond_error(d, 400, NULL, NULL, "x") == MF_HTTP_ANSWER_DUPLICATE);
    json_decref(j);
    CHECK(mf_http_deferred_closed(d));
    CHECK(mf_http_deferred_set_header(d, "X-Late", "3") == MF_ERR_ARG);
    CHECK(client_read(c, false));
    CHECKF(c->r.status == 200, "status %d: %s", c->r.status, c->r.body);
    json_t *got = json_loadb(c->r.body, c->r.body_len, 0, NULL);
    CHECKF(got && strcmp(json_string_value(json_object_get(got, "id")), "chatcmpl-1") == 0 &&
               json_integer_value(json_object_get(got, "i")) == 1,
           "body %s", c->r.body);
    json_decref(got);
    CHECK(header_is(&c->r, "Content-Type", "application/json"));
    CHECK(header_is(&c->r, "X-Before", "1") && header_is(&c->r, "X-After", "2") && !resp_header(&c->r, "X-Late"));
    CHECK(wait_calls(rec, 10) == 1);
    CHECKF(rec->why == MF_HTTP_CLOSE_DONE, "reason %s", mf_http_close_reason_name(rec->why));
    CHECK(rec->closed_in_cb && rec->answer_in_cb == MF_HTTP_ANSWER_DUPLICATE && !rec->cb_on_test_thread);
    CHECK(mf_http_deferred_close_reason(d) == MF_HTTP_CLOSE_DONE);
    mf_http_deferred_release(d);
out:
    client_close(c);
}

static void test_answer_error(uint16_t port) {
    client *c = client_open(port);
    drec *rec = defer_one(c, "POST", "/defer?i=2");
    if (rec) {
        CHECK(mf_http_deferred_respond_error(rec->d, 429, "model", "rate_limited", "slow down: %d waiting", 3) ==
              MF_HTTP_ANSWER_OK);
        CHECK(client_read(c, false));
        check_error(&c->r, 429, "rate_limit_error", "slow down: 3 waiting");
        CHECK(strstr(c->r.body, "\"param\":\"model\"") && strstr(c->r.body, "\"code\":\"rate_limited\""));
        CHECK(wait_calls(rec, 10) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
        mf_http_deferred_release(rec->d);
    }
    client_close(c);
}

/* A status no HTTP answer has, and a content type with a line break: the client gets a 500 that
 * says what went wrong, not a broken answer. */
static void test_answer_bad(uint16_t port) {
    for (int k = 0; k < 2; k++) {
        client *c = client_open(port);
        drec *rec = defer_one(c, "POST", "/defer");
        if (rec) {
            mf_http_answer a = k == 0 ? mf_http_deferred_respond(rec->d, 42, "text/plain", "x", 1)
                                      : mf_http_deferred_respond(rec->d, 200, "text/plain\r\nX-Evil: 1", "x", 1);
            CHECK(a == MF_HTTP_ANSWER_OK);
            CHECK(client_read(c, false));
            check_error(&c->r, 500, "server_error", "could not be sent");
            CHECK(!resp_header(&c->r, "X-Evil"));
            CHECK(wait_calls(rec, 10) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
            mf_http_deferred_release(rec->d);
        }
        client_close(c);
    }
}

/* Headers: 16 per answer, those set before deferring included. */
static void test_headers(uint16_t port) {
    client *c = client_open(port);
    drec *rec = defer_one(c, "GET", "/defer");
    if (rec) {
        char name[16];
        for (int k = 2; k <= 16; k++) {
            snprintf(name, sizeof name, "X-H%d", k);
            CHECKF(mf_http_deferred_set_header(rec->d, name, "v") == MF_OK, "header %d", k);
        }
        CHECK(mf_http_deferred_set_header(rec->d, "X-H17", "v") == MF_ERR_ARG);
        CHECK(mf_http_deferred_respond(rec->d, 204, NULL, NULL, 0) == MF_HTTP_ANSWER_OK);
        CHECK(client_read(c, false) && c->r.status == 204);
        CHECK(header_is(&c->r, "X-Before", "1") && header_is(&c->r, "X-H16", "v") && !resp_header(&c->r, "X-H17"));
        CHECK(wait_calls(rec, 10) == 1);
        mf_http_deferred_release(rec->d);
    }
    client_close(c);
}

/* HEAD is answered by the GET route: the deferred answer's headers, no body. */
static void test_head(uint16_t port) {
    client *c = client_open(port);
    drec *rec = defer_one(c, "HEAD", "/defer?i=7");
    if (rec) {
        CHECK(mf_http_deferred_respond(rec->d, 200, "application/json", "{\"i\":7}", 7) == MF_HTTP_ANSWER_OK);
        CHECK(client_read(c, true) && c->r.status == 200);
        CHECK(header_is(&c->r, "Content-Type", "application/json") && header_is(&c->r, "X-Before", "1"));
        while (fill(&c->rd)) {}
        CHECKF(c->rd.len == 0, "%zu body bytes after a HEAD answer", c->rd.len);
        CHECK(wait_calls(rec, 10) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
        mf_http_deferred_release(rec->d);
    }
    client_close(c);
}

/* Two deferred requests and a plain one, one after the other on one connection. */
static void test_keepalive(uint16_t port) {
    client *c = client_open(port);
    for (int k = 1; k <= 2; k++) {
        char target[32], want[32];
        snprintf(target, sizeof target, "/defer?i=%d", k);
        snprintf(want, sizeof want, "{\"i\":%d}", k);
        CHECK(client_send(c, "POST", target, "{}", true));
        drec *rec = take_deferred();
        CHECK(rec != NULL);
        if (!rec) break;
        usleep(20000);
        CHECK(mf_http_deferred_respond(rec->d, 200, "application/json", want, strlen(want)) == MF_HTTP_ANSWER_OK);
        CHECKF(client_read(c, false) && c->r.status == 200 && strcmp(c->r.body, want) == 0, "answer %d: %d %s", k,
               c->r.status, c->r.body);
        CHECK(!resp_header(&c->r, "Connection") || strcasecmp(resp_header(&c->r, "Connection"), "close") != 0);
        CHECK(wait_calls(rec, 10) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
        mf_http_deferred_release(rec->d);
    }
    const char *q = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK(send_all(c->rd.fd, q, strlen(q)) && client_read(c, false) && c->r.status == 200 &&
          strcmp(c->r.body, "ok") == 0);
    /* Pipelined: the next request is already sent while the deferred one waits; it is neither a
     * hang-up nor answered first. */
    const char *two = "POST /defer?i=3 HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n"
                      "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
    CHECK(send_all(c->rd.fd, two, strlen(two)));
    drec *rec = take_deferred();
    CHECK(rec != NULL);
    if (rec) {
        usleep(50000);
        CHECK(!mf_http_deferred_closed(rec->d));
        CHECK(mf_http_deferred_respond(rec->d, 200, "text/plain", "third", 5) == MF_HTTP_ANSWER_OK);
        CHECK(client_read(c, false) && c->r.status == 200 && strcmp(c->r.body, "third") == 0);
        CHECK(client_read(c, false) && c->r.status == 200 && strcmp(c->r.body, "ok") == 0);
        CHECK(wait_calls(rec, 10) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
        mf_http_deferred_release(rec->d);
    }
    client_close(c);
}

/* Answers given before the handler returned, or racing its return. */
static void test_fast(uint16_t port) {
    resp *r = calloc(1, sizeof *r);
    CHECK(http_req(port, "POST", "/defer_now", NULL, "{}", r) && r->status == 201 &&
          strcmp(r->body, "{\"now\":true}") == 0);
    for (int k = 0; k < 20; k++)
        CHECKF(http_req(port, "POST", "/defer_thread", NULL, "{}", r) && r->status == 202 &&
                   strcmp(r->body, "from a thread") == 0,
               "%d: %d %s", k, r->status, r->body);
    CHECK(http_req(port, "POST", "/defer_misuse", NULL, "{}", r) && r->status == 200 && strcmp(r->body, "once") == 0);
    CHECK(atomic_load(&misuse_refused) == 2);
    pthread_mutex_lock(&answerers.m);
    for (int k = 0; k < answerers.n; k++) pthread_join(answerers.t[k], NULL);
    answerers.n = 0;
    pthread_mutex_unlock(&answerers.m);
    free(r);
}

/* ---- the client leaves, the owner lets go ---- */

enum leave { LEAVE_CLOSE, LEAVE_RESET, LEAVE_HALF_CLOSE };

static void test_client_leaves(uint16_t port, enum leave how) {
    static const char *const names[] = {"close", "reset", "half-close"};
    client *c = client_open(port);
    drec *rec = defer_one(c, "POST", "/defer");
    if (!rec) {
        client_close(c);
        return;
    }
    mf_http_deferred *d = rec->d;
    double t0 = mf_time_s();
    if (how == LEAVE_HALF_CLOSE) shutdown(c->rd.fd, SHUT_WR);
    else if (how == LEAVE_RESET) client_reset(c), c = NULL;
    else client_close(c), c = NULL;
    CHECK(wait_calls(rec, 10) == 1);
    double ms = (rec->at - t0) * 1e3;
    CHECKF(rec->why == MF_HTTP_CLOSE_CLIENT_GONE, "%s: reason %s", names[how], mf_http_close_reason_name(rec->why));
    CHECKF(ms < 2000, "%s: the owner heard after %.1f ms", names[how], ms);
    printf("test_http_defer: %s seen by the owner after %.2f ms\n", names[how], ms);
    CHECK(rec->closed_in_cb && rec->reason_in_cb == MF_HTTP_CLOSE_CLIENT_GONE);
    CHECK(rec->answer_in_cb == MF_HTTP_ANSWER_CLOSED && !rec->cb_on_test_thread);
    CHECK(mf_http_deferred_closed(d) && mf_http_deferred_close_reason(d) == MF_HTTP_CLOSE_CLIENT_GONE);
    CHECK(mf_http_deferred_set_header(d, "X-Dropped", "1") == MF_OK);
    CHECK(mf_http_deferred_respond_error(d, 500, NULL, NULL, "too late") == MF_HTTP_ANSWER_CLOSED);
    mf_http_deferred_release(d);
    if (c) { /* half-closed: the server drops the connection without an answer */
        CHECK(!client_read(c, false) && c->rd.eof && c->rd.len == 0);
        client_close(c);
    }
}

static void test_release_unanswered(uint16_t port) {
    client *c = client_open(port);
    drec *rec = defer_one(c, "POST", "/defer");
    if (rec) {
        mf_http_deferred_release(rec->d); /* no callback after this */
        CHECK(client_read(c, false));
        check_error(&c->r, 500, "server_error", "without an answer");
        CHECK(header_is(&c->r, "X-Before", "1"));
        usleep(100000);
        pthread_mutex_lock(&rec->m);
        CHECKF(rec->calls == 0, "%d callbacks after the release", rec->calls);
        pthread_mutex_unlock(&rec->m);
    }
    client_close(c);
}

/* The callback releases the owner's reference: after an answer, and after the client left. */
static void test_release_in_callback(uint16_t port) {
    client *c = client_open(port);
    drec *rec = defer_one(c, "POST", "/defer?rcb=1");
    if (rec) {
        CHECK(mf_http_deferred_respond(rec->d, 200, "text/plain", "bye", 3) == MF_HTTP_ANSWER_OK);
        CHECK(client_read(c, false) && c->r.status == 200 && strcmp(c->r.body, "bye") == 0);
        CHECK(wait_calls(rec, 10) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
    }
    client_close(c);
    c = client_open(port);
    rec = defer_one(c, "POST", "/defer?rcb=1");
    client_close(c);
    if (rec) CHECK(wait_calls(rec, 10) == 1 && rec->why == MF_HTTP_CLOSE_CLIENT_GONE);
}

/* ---- many at once ---- */

static void test_concurrent(void) {
    mf_http_params p = mf_http_default_params();
    p.n_threads = 2;
    mf_http_server *s = defer_server(p);
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    enum { N = 32 };
    client *c[N];
    drec *rec[N] = {0};
    for (int k = 0; k < N; k++) {
        char target[32];
        snprintf(target, sizeof target, "/defer?i=%d", k);
        c[k] = client_open(port);
        CHECK(client_send(c[k], "POST", target, "{}", false));
    }
    int got = 0;
    for (int k = 0; k < N && (rec[k] = take_deferred()); k++) got++;
    CHECKF(got == N, "%d of %d requests deferred", got, N);
    /* All of them wait, yet both workers are free. */
    resp *r = calloc(1, sizeof *r);
    CHECK(http_req(port, "GET", "/health", NULL, NULL, r) && r->status == 200);
    free(r);
    for (int k = got - 1; k >= 0; k--) {
        char body[32];
        snprintf(body, sizeof body, "{\"i\":%d}", rec[k]->i);
        CHECK(mf_http_deferred_respond(rec[k]->d, 200, "application/json", body, strlen(body)) == MF_HTTP_ANSWER_OK);
    }
    int ok = 0;
    for (int k = 0; k < N; k++) {
        char want[32];
        snprintf(want, sizeof want, "{\"i\":%d}", k);
        ok += client_read(c[k], false) && c[k]->r.status == 200 && strcmp(c[k]->r.body, want) == 0;
        client_close(c[k]);
    }
    CHECKF(ok == N, "%d of %d clients got their own answer", ok, N);
    for (int k = 0; k < got; k++) {
        CHECK(wait_calls(rec[k], 10) == 1 && rec[k]->why == MF_HTTP_CLOSE_DONE);
        mf_http_deferred_release(rec[k]->d);
    }
    mf_http_server_free(s);
}

/* ---- stop ---- */

typedef struct stop_arg {
    drec *a;
    client *late; /* a kept-alive connection that asks for a deferral during the grace */
    bool late_503;
} stop_arg;

static void *stopper_main(void *arg) {
    stop_arg *a = arg;
    usleep(200000);
    a->late_503 = client_send(a->late, "POST", "/defer", "{}", true) && client_read(a->late, false) &&
                  a->late->r.status == 503 && resp_header(&a->late->r, "Retry-After");
    usleep(100000);
    mf_http_deferred_respond(a->a->d, 200, "text/plain", "in time", 7);
    return NULL;
}

static void test_stop(void) {
    mf_http_server *s = defer_server(mf_http_default_params());
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    client *ca = client_open(port), *cb = client_open(port);
    drec *a = defer_one(ca, "POST", "/defer?i=1");
    drec *b = defer_one(cb, "POST", "/defer?i=2");
    stop_arg sa = {a, client_open(port), false};
    CHECK(client_send(sa.late, "GET", "/health", NULL, true) && client_read(sa.late, false) &&
          sa.late->r.status == 200);
    if (!a || !b) return;
    pthread_t t;
    pthread_create(&t, NULL, stopper_main, &sa);
    double t0 = mf_time_s();
    mf_http_server_stop(s, 1.0);
    double took = mf_time_s() - t0;
    pthread_join(t, NULL);
    CHECKF(took >= 0.9 && took < 4, "stop took %.2f s for a grace of 1 s", took);
    CHECK(sa.late_503);
    /* a was answered within the grace: delivered. */
    CHECK(client_read(ca, false) && ca->r.status == 200 && strcmp(ca->r.body, "in time") == 0);
    CHECK(wait_calls(a, 5) == 1 && a->why == MF_HTTP_CLOSE_DONE);
    /* b was not: 503 at the end of the grace, its owner told. */
    CHECK(wait_calls(b, 5) == 1);
    CHECKF(b->why == MF_HTTP_CLOSE_SHUTDOWN, "reason %s", mf_http_close_reason_name(b->why));
    CHECK(b->answer_in_cb == MF_HTTP_ANSWER_CLOSED);
    CHECK(client_read(cb, false));
    check_error(&cb->r, 503, "unavailable_error", "shutting down");
    CHECK(header_is(&cb->r, "Connection", "close") && header_is(&cb->r, "X-Before", "1"));
    CHECK(mf_http_deferred_respond(b->d, 200, "text/plain", "x", 1) == MF_HTTP_ANSWER_CLOSED);
    mf_http_deferred_release(a->d);
    mf_http_deferred_release(b->d);
    mf_http_server_free(s);
    client_close(ca);
    client_close(cb);
    client_close(sa.late);
}

/* Freed (no grace) with a request still waiting: the owner's reference outlives the server. */
static void test_free_waiting(void) {
    mf_http_server *s = defer_server(mf_http_default_params());
    if (!s) return;
    client *c = client_open(mf_http_server_port(s));
    drec *rec = defer_one(c, "POST", "/defer");
    mf_http_server_free(s);
    if (rec) {
        CHECK(wait_calls(rec, 5) == 1 && rec->why == MF_HTTP_CLOSE_SHUTDOWN);
        CHECK(mf_http_deferred_closed(rec->d) && mf_http_deferred_close_reason(rec->d) == MF_HTTP_CLOSE_SHUTDOWN);
        CHECK(mf_http_deferred_respond(rec->d, 200, NULL, "x", 1) == MF_HTTP_ANSWER_CLOSED);
        CHECK(mf_http_deferred_set_header(rec->d, "X-A", "1") == MF_OK);
        mf_http_deferred_release(rec->d);
        CHECK(client_read(c, false) && c->r.status == 503);
    }
    client_close(c);
}

/* ---- answers, releases and disconnects racing ---- */

typedef struct race {
    drec *rec;
    int mode; /* 0: answer, wait for the callback, release; 1: answer and release; 2: release */
    unsigned delay_us;
    mf_http_answer got;
} race;

static void *race_owner(void *arg) {
    race *a = arg;
    mf_http_deferred *d = a->rec->d;
    usleep(a->delay_us);
    if (a->mode != 2) a->got = mf_http_deferred_respond(d, 200, "text/plain", "ok", 2);
    if (a->mode == 0) wait_calls(a->rec, 10);
    mf_http_deferred_release(d);
    return NULL;
}

static void test_races(void) {
    mf_http_server *s = defer_server(mf_http_default_params());
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    enum { N = 200 };
    static int calls_at_release[N];
    static drec *raced[N];
    unsigned seed = 12345;
    int done = 0, gone = 0;
    for (int k = 0; k < N; k++) {
        client *c = client_open(port);
        CHECK(client_send(c, "POST", "/defer", "{}", false));
        drec *rec = raced[k] = take_deferred();
        CHECK(rec != NULL);
        if (!rec) {
            client_close(c);
            break;
        }
        seed = seed * 1103515245u + 12345u;
        race a = {rec, k % 3, (seed >> 8) % 400, MF_HTTP_ANSWER_NOMEM};
        pthread_t t;
        pthread_create(&t, NULL, race_owner, &a);
        seed = seed * 1103515245u + 12345u;
        usleep((seed >> 8) % 400);
        if (k & 4) client_reset(c);
        else client_close(c);
        pthread_join(t, NULL);
        pthread_mutex_lock(&rec->m);
        int calls = calls_at_release[k] = rec->calls;
        mf_http_close_reason why = rec->why;
        pthread_mutex_unlock(&rec->m);
        if (a.mode != 2)
            CHECKF(a.got == MF_HTTP_ANSWER_OK || a.got == MF_HTTP_ANSWER_CLOSED, "%d: answer %d", k, a.got);
        CHECKF(calls <= 1, "%d: %d callbacks", k, calls);
        if (a.mode == 0) {
            CHECKF(calls == 1, "%d: no callback", k);
            CHECKF(why == MF_HTTP_CLOSE_DONE || why == MF_HTTP_CLOSE_CLIENT_GONE, "%d: reason %s", k,
                   mf_http_close_reason_name(why));
            CHECKF(a.got == MF_HTTP_ANSWER_OK || why == MF_HTTP_CLOSE_CLIENT_GONE, "%d: closed yet %s", k,
                   mf_http_close_reason_name(why));
            done += why == MF_HTTP_CLOSE_DONE;
            gone += why == MF_HTTP_CLOSE_CLIENT_GONE;
        }
    }
    printf("test_http_defer: %d races: the answer won %d, the disconnect %d (of those waited for)\n", N, done, gone);
    /* Every request is over (the live list is empty) and the server answers as before. */
    double end = mf_time_s() + 10;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        size_t n = s->n_live;
        pthread_mutex_unlock(&s->lock);
        if (n == 0 || mf_time_s() > end) {
            CHECKF(n == 0, "%zu requests still live", n);
            break;
        }
        usleep(10000);
    }
    resp *r = calloc(1, sizeof *r);
    CHECK(http_req(port, "GET", "/health", NULL, NULL, r) && r->status == 200);
    free(r);
    mf_http_server_free(s);
    for (int k = 0; k < N && raced[k]; k++) {
        pthread_mutex_lock(&raced[k]->m);
        CHECKF(raced[k]->calls == calls_at_release[k], "%d: a callback after the release", k);
        pthread_mutex_unlock(&raced[k]->m);
    }
}

static void test_basics(void) {
    mf_http_server *s = defer_server(mf_http_default_params());
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    test_answer_json(port);
    test_answer_error(port);
    test_answer_bad(port);
    test_headers(port);
    test_head(port);
    test_keepalive(port);
    test_fast(port);
    test_client_leaves(port, LEAVE_CLOSE);
    test_client_leaves(port, LEAVE_RESET);
    test_client_leaves(port, LEAVE_HALF_CLOSE);
    test_release_unanswered(port);
    test_release_in_callback(port);
    mf_http_server_free(s);
}

int main(void) {
    mf_log_set_level(MF_LOG_ERROR);
    test_thread = pthread_self();
    for (int k = 0; k < N_RECS; k++) {
        pthread_mutex_init(&drecs[k].m, NULL);
        pthread_cond_init(&drecs[k].c, NULL);
    }
    timed("test_http_defer", "basics", test_basics);
    timed("test_http_defer", "concurrent", test_concurrent);
    timed("test_http_defer", "stop", test_stop);
    timed("test_http_defer", "free while waiting", test_free_waiting);
    timed("test_http_defer", "races", test_races);
    return test_summary("test_http_defer");
}
