/* test_http.c: src/http against real sockets: servers on port 0, a plain POSIX client in this
 * file. Routing (200/404/405, prefixes, HEAD, OPTIONS), body and JSON limits, Content-Type, the
 * API key, CORS, NULs and control bytes, SSE streams fed from another thread and read as they
 * come, a client leaving mid-stream, a client that does not read, 32 concurrent clients beside
 * open streams, and a stop with streams open; then the pure helpers. */
#include "http/http_impl.h"
#include "http_client.h"
#include "test.h"

#include <errno.h>
#include <stdatomic.h>
#include <unistd.h>

/* The error object of an answer: status, type and message checked against what is expected. */
static void check_error(const resp *r, int status, const char *type, const char *in_message) {
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
static mf_http_stream *take_stream(closed_rec **rec) {
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
static int wait_closed(closed_rec *c, double secs) {
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

static mf_http_server *start_server(mf_http_params p) {
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

/* ---- the pure helpers ---- */

static void test_helpers(void) {
    CHECK(mf_http_content_type_is("application/json", "application/json"));
    CHECK(mf_http_content_type_is(" Application/JSON ; charset=UTF-8", "application/json"));
    CHECK(mf_http_content_type_is("application/json;charset=\"utf-8\"", "application/json"));
    CHECK(mf_http_content_type_is("application/json;", "application/json"));
    CHECK(!mf_http_content_type_is("application/json; charset=latin1", "application/json"));
    CHECK(!mf_http_content_type_is("application/jsonx", "application/json"));
    CHECK(!mf_http_content_type_is("application/json; foo", "application/json"));
    CHECK(!mf_http_content_type_is("text/plain", "application/json"));
    CHECK(!mf_http_content_type_is(NULL, "application/json"));

    mf_http_target t;
    const char *raw = "/a%20b?x=1&y=%41+B&z&&w=";
    CHECK(mf_http_target_parse(raw, strlen(raw), &t) == MF_OK);
    CHECK(strcmp(t.path, "/a b") == 0 && t.n_query == 4);
    if (t.n_query == 4) {
        CHECK(strcmp(t.keys[0], "x") == 0 && strcmp(t.vals[0], "1") == 0);
        CHECK(strcmp(t.keys[1], "y") == 0 && strcmp(t.vals[1], "A B") == 0);
        CHECK(strcmp(t.keys[2], "z") == 0 && strcmp(t.vals[2], "") == 0);
        CHECK(strcmp(t.keys[3], "w") == 0 && strcmp(t.vals[3], "") == 0);
    }
    mf_http_target_free(&t);
    raw = "/q?k=%0A";
    CHECK(mf_http_target_parse(raw, strlen(raw), &t) == MF_OK && strcmp(t.vals[0], "\n") == 0);
    mf_http_target_free(&t);
    static const char *const bad[] = {"/a%00", "/a%zz", "/a%4", "a", "", "/a\x01", "/a\x7f", "/q?k=%00", "/q?%"};
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++)
        CHECKF(mf_http_target_parse(bad[i], strlen(bad[i]), &t) == MF_ERR_FORMAT && mf_last_error()[0], "'%s'", bad[i]);
    CHECK(mf_http_target_parse("/a\0b", 4, &t) == MF_ERR_FORMAT);

    char deep[200], msg[256];
    for (int d = 64; d <= 65; d++) {
        memset(deep, '[', (size_t)d);
        memset(deep + d, ']', (size_t)d);
        json_t *v = mf_http_json_parse(deep, 2 * (size_t)d, 64, msg, sizeof msg);
        CHECKF((v != NULL) == (d == 64), "depth %d: %s", d, msg);
        if (d == 65) CHECKF(strstr(msg, "deeper than 64") && strstr(msg, "line 1, column 65"), "%s", msg);
        json_decref(v);
    }
    CHECK(!mf_http_json_parse("{\"a\":1,\"a\":2}", 13, 64, msg, sizeof msg) && strstr(msg, "duplicate"));
    CHECK(!mf_http_json_parse("{\n  \"a\": 1,\n}", 13, 64, msg, sizeof msg) && strstr(msg, "line 3"));
    CHECK(!mf_http_json_parse("\"[\" ]", 5, 64, msg, sizeof msg) && strstr(msg, "line 1, column"));
    CHECK(!mf_http_json_parse("", 0, 64, msg, sizeof msg) && strstr(msg, "empty"));

    CHECK(mf_http_secret_equal("abc", "abc", 3));
    CHECK(!mf_http_secret_equal("abc", "abd", 3));
    CHECK(!mf_http_secret_equal("abc", "ab", 2));
    CHECK(!mf_http_secret_equal("abc", "abcd", 4));
    CHECK(mf_http_secret_equal("", "", 0));

    static const struct { int status; const char *type; } types[] = {
        {400, "invalid_request_error"}, {401, "authentication_error"}, {403, "permission_error"},
        {404, "not_found_error"}, {413, "invalid_request_error"}, {415, "invalid_request_error"},
        {429, "rate_limit_error"}, {500, "server_error"}, {501, "not_supported_error"}, {503, "unavailable_error"},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(types); i++) CHECK(strcmp(mf_http_error_type(types[i].status), types[i].type) == 0);
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = (char)0xff;
    json_t *e = mf_http_error_json(400, big, "messages", NULL);
    const char *m = json_string_value(json_object_get(json_object_get(e, "error"), "message"));
    CHECK(m && m[0] == '?' && strlen(m) <= MF_HTTP_MSG_MAX);
    CHECK(json_is_null(json_object_get(json_object_get(e, "error"), "code")));
    CHECK(strcmp(json_string_value(json_object_get(json_object_get(e, "error"), "param")), "messages") == 0);
    json_decref(e);
    CHECK(strcmp(mf_http_close_reason_name(MF_HTTP_CLOSE_TOO_SLOW), "too slow") == 0);
    CHECK(strcmp(mf_http_push_name(MF_HTTP_PUSH_TOO_SLOW), "client too slow") == 0);
}

/* ---- routing, methods, answers ---- */

static void test_routing(void) {
    mf_http_server *s = start_server(mf_http_default_params());
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    resp *r = calloc(1, sizeof *r);
    CHECK(http_req(port, "GET", "/v1/models?i=7", NULL, NULL, r) && r->status == 200);
    CHECK(strstr(r->body, "\"object\":\"list\"") && strstr(r->body, "\"i\":\"7\""));
    CHECK(strcmp(resp_header(r, "Content-Type"), "application/json") == 0);
    CHECK(!resp_header(r, "Access-Control-Allow-Origin"));
    size_t get_len = r->body_len;
    CHECK(http_req(port, "HEAD", "/v1/models?i=7", NULL, NULL, r) && r->status == 200 && r->body_len == 0);
    CHECK(resp_header(r, "Content-Length") && strtoul(resp_header(r, "Content-Length"), NULL, 10) == get_len);
    CHECK(http_req(port, "GET", "/v1/models/org%2Fm", NULL, NULL, r) && r->status == 200);
    CHECKF(strstr(r->body, "\"id\":\"org/m\"") && strstr(r->body, "\"client\":\"127.0.0.1\""), "%s", r->body);
    CHECK(http_req(port, "GET", "/v1/models/a/b", NULL, NULL, r) && strstr(r->body, "\"id\":\"a/b\""));
    CHECK(http_req(port, "GET", "/v1/models/", NULL, NULL, r));
    check_error(r, 404, "not_found_error", "/v1/models/");
    CHECK(http_req(port, "GET", "/nope", NULL, NULL, r));
    check_error(r, 404, "not_found_error", "GET /nope");
    CHECK(http_req(port, "POST", "/v1/models", NULL, "{}", r));
    check_error(r, 405, "invalid_request_error", "POST is not allowed");
    CHECK(resp_header(r, "Allow") && strcmp(resp_header(r, "Allow"), "GET, HEAD, OPTIONS") == 0);
    CHECK(http_req(port, "DELETE", "/v1/chat/completions", NULL, NULL, r));
    check_error(r, 405, "invalid_request_error", "DELETE");
    CHECK(resp_header(r, "Allow") && strcmp(resp_header(r, "Allow"), "POST, OPTIONS") == 0);
    CHECK(http_req(port, "BREW", "/v1/models", NULL, NULL, r) && r->status == 405);
    CHECK(http_req(port, "OPTIONS", "/v1/models", NULL, NULL, r) && r->status == 204);
    CHECK(resp_header(r, "Allow") && !resp_header(r, "Access-Control-Allow-Origin"));
    CHECK(http_req(port, "GET", "/health", NULL, NULL, r) && r->status == 200 && strcmp(r->body, "ok") == 0);
    CHECK(strcmp(resp_header(r, "Content-Type"), "text/plain; charset=utf-8") == 0);
    CHECK(http_req(port, "GET", "/metrics", NULL, NULL, r) && r->status == 200);
    CHECK(strcmp(resp_header(r, "Content-Type"), "text/plain; version=0.0.4; charset=utf-8") == 0);
    CHECK(http_req(port, "GET", "/busy", NULL, NULL, r));
    check_error(r, 503, "unavailable_error", "all 4 slots are busy");
    CHECK(resp_header(r, "Retry-After") && strcmp(resp_header(r, "Retry-After"), "2") == 0);
    CHECK(http_req(port, "GET", "/silent", NULL, NULL, r));
    check_error(r, 500, "server_error", "no answer");

    /* Two requests on one kept-alive connection. */
    static reader rd;
    rd.fd = dial(port);
    rd.len = 0;
    const char *two = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    for (int i = 0; i < 2; i++) CHECK(send_all(rd.fd, two, strlen(two)) && read_response(&rd, r, false) && r->status == 200);
    close(rd.fd);

    /* The same port twice: the second says why. */
    mf_http_params p = mf_http_default_params();
    p.port = port;
    mf_http_server *s2 = NULL;
    CHECK(mf_http_server_create(&p, &s2) == MF_OK);
    CHECK(mf_http_server_start(s2) == MF_ERR_IO && strstr(mf_last_error(), "cannot listen"));
    mf_http_server_free(s2);
    p.host = "example.com";
    CHECK(mf_http_server_create(&p, &s2) == MF_ERR_ARG && !s2);
    mf_http_server_free(s);

    /* IPv6 loopback, where the machine has it. */
    p = mf_http_default_params();
    p.host = "::1";
    p.port = 0;
    if (mf_http_server_create(&p, &s2) == MF_OK &&
        mf_http_route_prefix(s2, MF_HTTP_GET, "/v1/models/", h_model_id, NULL) == MF_OK &&
        mf_http_server_start(s2) == MF_OK) {
        int fd = dial_at(AF_INET6, mf_http_server_port(s2), 0);
        CHECK(fd >= 0);
        if (fd >= 0) {
            const char *q = "GET /v1/models/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
            rd.fd = fd;
            rd.len = 0;
            CHECK(send_all(fd, q, strlen(q)) && read_response(&rd, r, false) && r->status == 200);
            CHECKF(strstr(r->body, "\"client\":\"::1\""), "%s", r->body);
            close(fd);
        }
    } else {
        printf("test_http: no IPv6 loopback here (%s)\n", mf_last_error());
    }
    mf_http_server_free(s2);

    /* Every address: "0.0.0.0" takes IPv4 loopback clients, "::" IPv6 ones and (dual stack) IPv4. */
    static const struct { const char *host; int family; } any[] = {
        {"0.0.0.0", AF_INET}, {"::", AF_INET6}, {"::", AF_INET}, {"localhost", AF_INET}};
    for (size_t i = 0; i < MF_ARRAY_LEN(any); i++) {
        p = mf_http_default_params();
        p.host = any[i].host;
        p.port = 0;
        s2 = NULL;
        if (mf_http_server_create(&p, &s2) != MF_OK || mf_http_route(s2, MF_HTTP_GET, "/health", h_health, NULL) ||
            mf_http_server_start(s2) != MF_OK) {
            CHECKF(strchr(any[i].host, ':'), "%s: %s", any[i].host, mf_last_error()); /* no IPv6 here */
            mf_http_server_free(s2);
            continue;
        }
        rd.fd = dial_at(any[i].family, mf_http_server_port(s2), 0);
        rd.len = 0;
        const char *q = "GET /health HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
        CHECKF(rd.fd >= 0 && send_all(rd.fd, q, strlen(q)) && read_response(&rd, r, false) && r->status == 200,
               "%s over %s", any[i].host, any[i].family == AF_INET ? "IPv4" : "IPv6");
        if (rd.fd >= 0) close(rd.fd);
        mf_http_server_free(s2);
    }
    free(r);
}

/* ---- bodies and JSON ---- */

static void test_bodies(void) {
    mf_http_params p = mf_http_default_params();
    p.max_body_bytes = 1024;
    mf_http_server *s = start_server(p);
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    resp *r = calloc(1, sizeof *r);
    const char *json = "Content-Type: application/json\r\n";
    CHECK(http_req(port, "POST", "/v1/chat/completions", json, "{\"a\":1,\"b\":2}", r) && r->status == 200);
    CHECK(strstr(r->body, "\"keys\":2"));
    char body[1025];
    memset(body, 'x', sizeof body - 1);
    memcpy(body, "{\"a\":\"", 6);
    memcpy(body + 1022, "\"}", 2);
    body[1024] = '\0';
    CHECK(http_req(port, "POST", "/v1/chat/completions", json, body, r) && r->status == 200); /* exactly the limit */
    body[1022] = 'x';
    char big[1100];
    snprintf(big, sizeof big, "%s\"}", body);
    CHECK(http_req(port, "POST", "/v1/chat/completions", json, big, r));
    check_error(r, 413, "invalid_request_error", "over the limit of 1024 bytes");
    /* Declared too large: answered before the body is sent. */
    const char *decl = "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                       "Content-Length: 100000000\r\nExpect: 100-continue\r\n\r\n";
    CHECK(http_raw(port, decl, strlen(decl), r));
    check_error(r, 413, "invalid_request_error", "100000000 bytes");
    /* Chunked, no length: counted as it comes. */
    char chunked[4096];
    int n = snprintf(chunked, sizeof chunked,
                     "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) n += snprintf(chunked + n, sizeof chunked - (size_t)n, "200\r\n%0512d\r\n", 0);
    n += snprintf(chunked + n, sizeof chunked - (size_t)n, "0\r\n\r\n");
    CHECK(http_raw(port, chunked, (size_t)n, r));
    check_error(r, 413, "invalid_request_error", "over the limit");

    CHECK(http_req(port, "POST", "/v1/chat/completions", json, "{\"a\":1,}", r));
    check_error(r, 400, "invalid_request_error", "line 1, column 8");
    CHECK(http_req(port, "POST", "/v1/chat/completions", json, "{\"a\":1,\"a\":2}", r));
    check_error(r, 400, "invalid_request_error", "duplicate");
    char deep[300];
    for (int d = 64; d <= 65; d++) {
        int k = snprintf(deep, sizeof deep, "{\"a\":");
        for (int i = 1; i < d; i++) deep[k++] = '[';
        for (int i = 1; i < d; i++) deep[k++] = ']';
        snprintf(deep + k, sizeof deep - (size_t)k, "}");
        CHECK(http_req(port, "POST", "/v1/chat/completions", json, deep, r));
        if (d == 64) CHECKF(r->status == 200, "depth 64: %d %s", r->status, r->body);
        else check_error(r, 400, "invalid_request_error", "nested deeper than 64 levels at line 1, column 69");
    }
    CHECK(http_req(port, "POST", "/v1/chat/completions", "Content-Type: text/plain\r\n", "{}", r));
    check_error(r, 415, "invalid_request_error", "text/plain");
    CHECK(http_req(port, "POST", "/v1/chat/completions", NULL, "{}", r));
    check_error(r, 415, "invalid_request_error", "(none)");
    CHECK(http_req(port, "POST", "/v1/chat/completions", "Content-Type: application/json; charset=utf-8\r\n", "{}", r));
    CHECK(r->status == 200);
    CHECK(http_req(port, "POST", "/v1/chat/completions", "Content-Type: application/json; charset=latin1\r\n", "{}", r));
    CHECK(r->status == 415);
    mf_http_server_free(s);
    free(r);
}

/* ---- API key, CORS, hostile request lines and headers ---- */

static void test_guards(void) {
    mf_http_params p = mf_http_default_params();
    const char *exempt[] = {"/health", NULL};
    p.api_key = "sekrit";
    p.auth_exempt_paths = exempt;
    p.cors_origin = "*";
    mf_http_server *s = start_server(p);
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    resp *r = calloc(1, sizeof *r);
    CHECK(http_req(port, "GET", "/v1/models", NULL, NULL, r));
    check_error(r, 401, "authentication_error", "missing API key");
    CHECK(resp_header(r, "WWW-Authenticate") && strcmp(resp_header(r, "WWW-Authenticate"), "Bearer") == 0);
    CHECK(resp_header(r, "Access-Control-Allow-Origin") && strcmp(resp_header(r, "Access-Control-Allow-Origin"), "*") == 0);
    CHECK(http_req(port, "GET", "/v1/models", "Authorization: Bearer sekrix\r\n", NULL, r));
    check_error(r, 401, "authentication_error", "invalid API key");
    CHECK(http_req(port, "GET", "/v1/models", "Authorization: Basic c2Vrcml0\r\n", NULL, r));
    check_error(r, 401, "authentication_error", "Bearer scheme");
    CHECK(http_req(port, "GET", "/nope", NULL, NULL, r) && r->status == 401); /* routes are not revealed */
    CHECK(http_req(port, "GET", "/v1/models", "Authorization: Bearer sekrit\r\n", NULL, r) && r->status == 200);
    CHECK(resp_header(r, "Access-Control-Allow-Origin") && strcmp(resp_header(r, "Access-Control-Allow-Origin"), "*") == 0);
    CHECK(http_req(port, "GET", "/v1/models", "Authorization: bearer   sekrit  \r\n", NULL, r) && r->status == 200);
    CHECK(http_req(port, "GET", "/health", NULL, NULL, r) && r->status == 200);
    CHECK(http_req(port, "OPTIONS", "/v1/chat/completions",
                   "Origin: http://page.example\r\nAccess-Control-Request-Method: POST\r\n"
                   "Access-Control-Request-Headers: authorization, content-type\r\n", NULL, r));
    CHECK(r->status == 204 && resp_header(r, "Access-Control-Allow-Origin"));
    CHECK(resp_header(r, "Access-Control-Allow-Methods") && strstr(resp_header(r, "Access-Control-Allow-Methods"), "POST"));
    CHECK(resp_header(r, "Access-Control-Allow-Headers") && strstr(resp_header(r, "Access-Control-Allow-Headers"), "Authorization"));
    CHECK(http_req(port, "OPTIONS", "/nope", "Origin: http://page.example\r\n", NULL, r) && r->status == 404);

    /* NULs, control bytes, oversize: 400 (or MHD's 431), never a crash; the server still answers. */
    static const struct { const char *req; size_t len; const char *why; } bad[] = {
#define RAW(s, why) {s, sizeof s - 1, why}
        RAW("GET /health%00x HTTP/1.1\r\nHost: t\r\n\r\n", "NUL"),
        RAW("GET /health\0x HTTP/1.1\r\nHost: t\r\n\r\n", "NUL"),
        RAW("GET /hea\x7flth HTTP/1.1\r\nHost: t\r\n\r\n", "control byte"),
        RAW("GET /health HTTP/1.1\r\nHost: t\r\nX-A: a\x01 b\r\n\r\n", "control byte"),
        RAW("GET health HTTP/1.1\r\nHost: t\r\n\r\n", "start with '/'"),
        RAW("GET /a%zz HTTP/1.1\r\nHost: t\r\n\r\n", "hex digits"),
#undef RAW
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(bad); i++) {
        CHECKF(http_raw(port, bad[i].req, bad[i].len, r), "request %zu", i);
        check_error(r, 400, "invalid_request_error", bad[i].why);
    }
    const char *cl = "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer sekrit\r\n"
                     "Content-Length: 12x\r\n\r\n";
    CHECK(http_raw(port, cl, strlen(cl), r) && r->status == 400); /* MHD's answer or ours */
    size_t hl = 100000;
    char *huge = malloc(hl + 100);
    int k = snprintf(huge, hl + 100, "GET /health HTTP/1.1\r\nHost: t\r\nX-Big: ");
    memset(huge + k, 'a', hl);
    memcpy(huge + k + hl, "\r\n\r\n", 4);
    CHECK(http_raw(port, huge, (size_t)k + hl + 4, r) ? r->status == 431 || r->status == 400 : r->status == -1);
    free(huge);
    CHECK(http_req(port, "GET", "/health", NULL, NULL, r) && r->status == 200);
    mf_http_server_free(s);
    free(r);
}

/* ---- connection limits and timeouts ---- */

static void test_limits(void) {
    mf_http_params p = mf_http_default_params();
    p.n_threads = 2;
    p.max_connections = 4;
    p.connection_timeout_s = 1;
    mf_http_server *s = start_server(p);
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    resp *r = calloc(1, sizeof *r);
    int idle[4];
    for (int i = 0; i < 4; i++) idle[i] = dial(port);
    usleep(200000); /* let the workers accept them */
    /* A fifth waits in the listen queue (MHD stops accepting at the limit) until the idle ones are
     * closed after connection_timeout_s. */
    double t0 = mf_time_s();
    CHECK(http_req(port, "GET", "/health", NULL, NULL, r) && r->status == 200);
    double waited = mf_time_s() - t0;
    CHECKF(waited > 0.5 && waited < 4, "the fifth connection waited %.2f s for a 1 s timeout", waited);
    char b;
    for (int i = 0; i < 4; i++) {
        CHECK(idle[i] >= 0 && recv(idle[i], &b, 1, 0) == 0);
        close(idle[i]);
    }
    t0 = mf_time_s();
    CHECK(http_req(port, "GET", "/health", NULL, NULL, r) && r->status == 200 && mf_time_s() - t0 < 0.5);
    /* A target longer than the connection's memory: MHD's 414. */
    size_t n = 80000;
    char *req = malloc(n + 64);
    memcpy(req, "GET /", 5);
    memset(req + 5, 'a', n);
    snprintf(req + 5 + n, 59, " HTTP/1.1\r\nHost: t\r\n\r\n");
    CHECK(http_raw(port, req, strlen(req), r) ? r->status == 414 : r->status == -1);
    free(req);
    mf_http_server_free(s);
    p = mf_http_default_params();
    p.n_threads = 8;
    p.max_connections = 4;
    CHECK(mf_http_server_create(&p, &s) == MF_ERR_ARG);
    free(r);
}

/* ---- streams ---- */

/* A stream client: the answer's head, then the de-chunked bytes as they come. */
typedef struct sse_client {
    reader rd;
    resp head;
    char data[1 << 17];
    size_t len;
    bool ended; /* the last chunk came */
} sse_client;

static bool sse_open(sse_client *c, uint16_t port, int rcvbuf, const char *target) {
    memset(c, 0, sizeof *c);
    c->rd.fd = dial_at(AF_INET, port, rcvbuf);
    if (c->rd.fd < 0) return false;
    char req[256];
    snprintf(req, sizeof req, "POST %s HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n", target);
    return send_all(c->rd.fd, req, strlen(req)) && read_head(&c->rd, &c->head);
}

/* Read chunks until `needle` is in the data (NULL: until the last chunk); false at EOF first. */
static bool sse_until(sse_client *c, const char *needle) {
    while (!(needle ? memmem(c->data, c->len, needle, strlen(needle)) != NULL : c->ended)) {
        if (c->ended) return false;
        long n = read_chunk(&c->rd, c->data + c->len, sizeof c->data - c->len);
        if (n < 0) return false;
        if (n == 0) c->ended = true;
        c->len += (size_t)n;
    }
    return true;
}

typedef struct pusher_arg {
    mf_http_stream *st;
    atomic_int acked;
} pusher_arg;

/* The "engine": one event at a time, each once the client has read the one before. */
static void *pusher_main(void *arg) {
    pusher_arg *a = arg;
    for (int k = 0; k < 5; k++) {
        json_t *j = json_pack("{s:i}", "i", k);
        CHECK(mf_http_stream_push_json(a->st, j) == MF_HTTP_PUSH_OK);
        json_decref(j);
        double end = mf_time_s() + 5;
        while (atomic_load(&a->acked) <= k && mf_time_s() < end) usleep(500);
        CHECKF(atomic_load(&a->acked) > k, "event %d not read", k);
    }
    CHECK(mf_http_stream_push_data(a->st, "line1\nline2\r\nline3", 18) == MF_HTTP_PUSH_OK);
    CHECK(mf_http_stream_push_comment(a->st, "ping") == MF_HTTP_PUSH_OK || true);
    CHECK(mf_http_stream_push_data(a->st, "[DONE]", 6) == MF_HTTP_PUSH_OK);
    mf_http_stream_end(a->st);
    CHECK(mf_http_stream_closed(a->st));
    CHECK(mf_http_stream_push_data(a->st, "late", 4) == MF_HTTP_PUSH_CLOSED);
    return NULL;
}

static void test_stream_incremental(uint16_t port) {
    sse_client *c = calloc(1, sizeof *c);
    CHECK(sse_open(c, port, 0, "/stream"));
    CHECK(c->head.status == 200);
    CHECK(resp_header(&c->head, "Content-Type") && strcmp(resp_header(&c->head, "Content-Type"), "text/event-stream") == 0);
    CHECK(resp_header(&c->head, "Cache-Control") && strcmp(resp_header(&c->head, "Cache-Control"), "no-cache") == 0);
    CHECK(resp_header(&c->head, "Transfer-Encoding") && strcmp(resp_header(&c->head, "Transfer-Encoding"), "chunked") == 0);
    closed_rec *rec = NULL;
    pusher_arg a = {take_stream(&rec), 0};
    CHECK(a.st != NULL);
    if (!a.st) goto out;
    pthread_t t;
    pthread_create(&t, NULL, pusher_main, &a);
    for (int k = 0; k < 5; k++) {
        char ev[32];
        snprintf(ev, sizeof ev, "data: {\"i\":%d}\n\n", k);
        CHECKF(sse_until(c, ev), "event %d", k);
        CHECK(!memmem(c->data, c->len, "\"i\":5", 5));
        atomic_store(&a.acked, k + 1);
    }
    CHECK(sse_until(c, NULL));
    CHECKF(memmem(c->data, c->len, "data: line1\ndata: line2\ndata: line3\n\n", 37), "%.*s", (int)c->len, c->data);
    CHECK(memmem(c->data, c->len, "data: [DONE]\n\n", 14));
    pthread_join(t, NULL);
    CHECK(wait_closed(rec, 5) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
    CHECK(mf_http_stream_close_reason(a.st) == MF_HTTP_CLOSE_DONE);
    mf_http_stream_release(a.st);
out:
    close(c->rd.fd);
    free(c);
}

static void test_stream_disconnect(uint16_t port) {
    sse_client *c = calloc(1, sizeof *c);
    CHECK(sse_open(c, port, 0, "/stream") && c->head.status == 200);
    closed_rec *rec = NULL;
    mf_http_stream *st = take_stream(&rec);
    CHECK(st != NULL);
    if (st) {
        CHECK(mf_http_stream_push_data(st, "hello", 5) == MF_HTTP_PUSH_OK);
        CHECK(sse_until(c, "data: hello\n\n"));
        usleep(20000); /* the stream is idle now: its connection is suspended */
        double t0 = mf_time_s();
        close(c->rd.fd);
        c->rd.fd = -1;
        CHECK(wait_closed(rec, 5) == 1);
        double ms = (rec->at - t0) * 1e3;
        CHECKF(rec->why == MF_HTTP_CLOSE_CLIENT_GONE, "reason %s", mf_http_close_reason_name(rec->why));
        CHECKF(ms < 500, "the owner heard of the disconnect after %.1f ms", ms);
        printf("test_http: disconnect seen by the owner after %.2f ms\n", ms);
        CHECK(mf_http_stream_closed(st));
        CHECK(mf_http_stream_push_data(st, "more", 4) == MF_HTTP_PUSH_CLOSED);
        mf_http_stream_release(st);
    }
    if (c->rd.fd >= 0) close(c->rd.fd);
    free(c);
}

/* 16 KiB events every millisecond: a client that reads keeps up, one that does not fills the
 * kernel's buffers and then the stream's 64 KiB queue, and the push says so without waiting. */
static void test_stream_slow(uint16_t port, bool reads) {
    sse_client *c = calloc(1, sizeof *c);
    CHECK(sse_open(c, port, reads ? 0 : 4096, "/stream?max=65536") && c->head.status == 200);
    closed_rec *rec = NULL;
    mf_http_stream *st = take_stream(&rec);
    CHECK(st != NULL);
    if (!st) goto out;
    static char ev[16384];
    memset(ev, 'e', sizeof ev);
    mf_http_push res = MF_HTTP_PUSH_OK;
    double worst = 0, t_end = mf_time_s() + 20;
    size_t pushed = 0, limit = reads ? 400 : 100000, got = 0;
    while (res == MF_HTTP_PUSH_OK && pushed < limit && mf_time_s() < t_end) {
        double t0 = mf_time_s();
        res = mf_http_stream_push_data(st, ev, sizeof ev);
        worst = MF_MAX(worst, mf_time_s() - t0);
        pushed += res == MF_HTTP_PUSH_OK;
        if (reads) {
            long n; /* everything there is; the bytes are counted, not looked at */
            while ((n = recv(c->rd.fd, c->rd.buf, sizeof c->rd.buf, MSG_DONTWAIT)) > 0) got += (size_t)n;
        }
        usleep(1000);
    }
    CHECKF(worst < 0.05, "a push took %.1f ms", worst * 1e3);
    if (reads) {
        CHECKF(res == MF_HTTP_PUSH_OK && pushed == limit, "a reading client got %s after %zu pushes",
               mf_http_push_name(res), pushed);
        mf_http_stream_end(st);
        struct timeval tv = {10, 0};
        setsockopt(c->rd.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        /* Until the last chunk, which may straddle two reads: the tail of each read is kept (and
         * the CRLF ending the chunk before, read in the loop above, stands first). */
        char buf[8 + (1 << 16)] = "\r\n";
        size_t keep = 2;
        ssize_t n;
        while ((n = recv(c->rd.fd, buf + keep, sizeof buf - keep, 0)) > 0) {
            got += (size_t)n;
            size_t have = keep + (size_t)n;
            if (memmem(buf, have, "\r\n0\r\n\r\n", 7)) break;
            keep = MF_MIN(have, (size_t)8);
            memmove(buf, buf + have - keep, keep);
        }
        CHECKF(got >= pushed * sizeof ev, "read %zu of %zu bytes", got, pushed * sizeof ev);
        CHECK(wait_closed(rec, 5) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
    } else {
        CHECKF(res == MF_HTTP_PUSH_TOO_SLOW, "a client that never reads: %s after %zu pushes", mf_http_push_name(res),
               pushed);
        printf("test_http: a client that never reads was dropped after %zu pushes of 16 KiB\n", pushed);
        CHECK(mf_http_stream_closed(st) && mf_http_stream_push_data(st, "x", 1) == MF_HTTP_PUSH_CLOSED);
        CHECK(wait_closed(rec, 5) == 1 && rec->why == MF_HTTP_CLOSE_TOO_SLOW);
    }
    mf_http_stream_release(st);
out:
    close(c->rd.fd);
    free(c);
}

static void test_streams(void) {
    mf_http_server *s = start_server(mf_http_default_params());
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    test_stream_incremental(port);
    test_stream_disconnect(port);
    test_stream_slow(port, true);
    test_stream_slow(port, false);
    /* HEAD: the stream's headers and no stream. */
    resp *r = calloc(1, sizeof *r);
    int before = box.n;
    CHECK(http_req(port, "HEAD", "/stream", NULL, NULL, r) && r->status == 200 && box.n == before);
    CHECK(resp_header(r, "Content-Type") && strcmp(resp_header(r, "Content-Type"), "text/event-stream") == 0);
    /* An owner that releases without ending: the client sees a cut answer. */
    sse_client *c = calloc(1, sizeof *c);
    CHECK(sse_open(c, port, 0, "/stream"));
    closed_rec *rec = NULL;
    mf_http_stream *st = take_stream(&rec);
    if (st) {
        CHECK(mf_http_stream_push_data(st, "a", 1) == MF_HTTP_PUSH_OK);
        CHECK(sse_until(c, "data: a\n\n"));
        mf_http_stream_release(st); /* no callback after this */
        CHECK(!sse_until(c, NULL));
        CHECK(rec->calls == 0);
    }
    close(c->rd.fd);
    free(c);
    free(r);
    mf_http_server_free(s);
}

/* ---- concurrency ---- */

typedef struct client_arg {
    uint16_t port;
    int i;
    bool ok;
} client_arg;

static void *client_main(void *arg) {
    client_arg *a = arg;
    resp *r = malloc(sizeof *r);
    char target[64], want[32];
    snprintf(target, sizeof target, "/v1/models?i=%d", a->i);
    snprintf(want, sizeof want, "\"i\":\"%d\"", a->i);
    a->ok = http_req(a->port, "GET", target, NULL, NULL, r) && r->status == 200 && strstr(r->body, want);
    free(r);
    return NULL;
}

static void test_concurrency(void) {
    mf_http_params p = mf_http_default_params();
    p.n_threads = 4;
    mf_http_server *s = start_server(p);
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    /* 8 idle streams first: their connections are suspended, so they hold no worker. */
    enum { NS = 8, NC = 32 };
    sse_client *sc = calloc(NS, sizeof *sc);
    mf_http_stream *st[NS];
    closed_rec *rec[NS] = {0};
    for (int i = 0; i < NS; i++) {
        CHECK(sse_open(&sc[i], port, 0, "/stream"));
        st[i] = take_stream(&rec[i]);
        CHECK(st[i] != NULL);
    }
    pthread_t t[NC];
    client_arg a[NC];
    for (int i = 0; i < NC; i++) {
        a[i] = (client_arg){port, i, false};
        pthread_create(&t[i], NULL, client_main, &a[i]);
    }
    int ok = 0;
    for (int i = 0; i < NC; i++) {
        pthread_join(t[i], NULL);
        ok += a[i].ok;
    }
    CHECKF(ok == NC, "%d of %d concurrent clients got their answer", ok, NC);
    for (int i = 0; i < NS; i++) {
        if (!st[i]) continue;
        char ev[32];
        snprintf(ev, sizeof ev, "stream %d", i);
        CHECK(mf_http_stream_push_data(st[i], ev, strlen(ev)) == MF_HTTP_PUSH_OK);
        mf_http_stream_end(st[i]);
        CHECK(sse_until(&sc[i], ev) && sse_until(&sc[i], NULL));
        CHECK(wait_closed(rec[i], 5) == 1 && rec[i]->why == MF_HTTP_CLOSE_DONE);
        mf_http_stream_release(st[i]);
        close(sc[i].rd.fd);
    }
    free(sc);
    mf_http_server_free(s);
}

/* ---- stop with streams open ---- */

typedef struct stop_arg {
    uint16_t port;
    mf_http_stream *a;
    int late_fd; /* a kept-alive connection that asks for a stream during the grace */
    bool refused, late_503;
} stop_arg;

static void *stopper_main(void *arg) {
    stop_arg *a = arg;
    usleep(150000);
    int fd = dial(a->port);
    a->refused = fd < 0;
    if (fd >= 0) close(fd);
    static reader rd;
    static resp r;
    rd.fd = a->late_fd;
    const char *q = "POST /stream HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n";
    a->late_503 = send_all(rd.fd, q, strlen(q)) && read_response(&rd, &r, false) && r.status == 503 &&
                  resp_header(&r, "Retry-After");
    for (int k = 0; k < 3; k++) {
        CHECK(mf_http_stream_push_data(a->a, "tick", 4) == MF_HTTP_PUSH_OK);
        usleep(50000);
    }
    mf_http_stream_end(a->a);
    return NULL;
}

static void test_stop(void) {
    mf_http_server *s = start_server(mf_http_default_params());
    if (!s) return;
    uint16_t port = mf_http_server_port(s);
    sse_client *ca = calloc(1, sizeof *ca), *cb = calloc(1, sizeof *cb);
    closed_rec *ra = NULL, *rb = NULL;
    CHECK(sse_open(ca, port, 0, "/stream"));
    mf_http_stream *a = take_stream(&ra);
    CHECK(sse_open(cb, port, 0, "/stream"));
    mf_http_stream *b = take_stream(&rb);
    stop_arg sa = {port, a, dial(port), false, false};
    static reader rd;
    static resp r;
    rd.fd = sa.late_fd;
    const char *q = "GET /health HTTP/1.1\r\nHost: t\r\n\r\n";
    CHECK(send_all(rd.fd, q, strlen(q)) && read_response(&rd, &r, false) && r.status == 200);
    if (!a || !b) return;
    pthread_t t;
    pthread_create(&t, NULL, stopper_main, &sa);
    double t0 = mf_time_s();
    mf_http_server_stop(s, 1.0);
    double took = mf_time_s() - t0;
    pthread_join(t, NULL);
    CHECKF(took >= 0.9 && took < 3, "stop took %.2f s for a grace of 1 s", took);
    CHECK(sa.refused);
    CHECK(sa.late_503);
    /* a finished within the grace: every event and a proper end. */
    CHECK(sse_until(ca, NULL) && memmem(ca->data, ca->len, "data: tick\n\ndata: tick\n\ndata: tick\n\n", 36));
    CHECK(wait_closed(ra, 1) == 1 && ra->why == MF_HTTP_CLOSE_DONE);
    mf_http_stream_release(a);
    /* b did not: closed at the end of the grace, its owner told. */
    CHECK(wait_closed(rb, 1) == 1 && rb->why == MF_HTTP_CLOSE_SHUTDOWN);
    CHECK(!sse_until(cb, NULL));
    CHECK(mf_http_stream_push_data(b, "x", 1) == MF_HTTP_PUSH_CLOSED);
    mf_http_stream_release(b);
    mf_http_server_stop(s, 1.0); /* again: nothing */
    mf_http_server_free(s);
    close(ca->rd.fd);
    close(cb->rd.fd);
    close(sa.late_fd);
    free(ca);
    free(cb);
}

static void timed(const char *name, void (*fn)(void)) {
    double t0 = mf_time_s();
    fn();
    printf("test_http: %s %.2f s\n", name, mf_time_s() - t0);
}

int main(void) {
    mf_log_set_level(MF_LOG_ERROR);
    timed("helpers", test_helpers);
    timed("routing", test_routing);
    timed("bodies", test_bodies);
    timed("guards", test_guards);
    timed("limits", test_limits);
    timed("streams", test_streams);
    timed("concurrency", test_concurrency);
    timed("stop", test_stop);
    return test_summary("test_http");
}
