/* test_http.c: src/http against real sockets (servers on port 0, the plain POSIX client of
 * http_client.h): routing (200/404/405, prefixes, HEAD, OPTIONS), addresses, body and JSON limits,
 * Content-Type, the API key, CORS, NULs and control bytes, connection limits and timeouts; first
 * the pure helpers. Streams are in test_http_stream.c. */
#include "http_fixture.h"

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
                   "Access-Control-Request-Headers: authorization, content-type, x-stainless-os\r\n", NULL, r));
    CHECK(r->status == 204 && resp_header(r, "Access-Control-Allow-Origin"));
    CHECK(resp_header(r, "Access-Control-Allow-Methods") && strstr(resp_header(r, "Access-Control-Allow-Methods"), "POST"));
    /* the headers asked for (a browser client's own, such as the OpenAI SDK's X-Stainless-*) */
    CHECK(resp_header(r, "Access-Control-Allow-Headers") &&
          strcmp(resp_header(r, "Access-Control-Allow-Headers"), "authorization, content-type, x-stainless-os") == 0);
    CHECK(http_req(port, "OPTIONS", "/v1/chat/completions",
                   "Origin: http://page.example\r\nAccess-Control-Request-Method: POST\r\n"
                   "Access-Control-Request-Headers: x-a;b=\"c\"\r\n", NULL, r));
    CHECK(r->status == 204 && resp_header(r, "Access-Control-Allow-Headers") &&
          strcmp(resp_header(r, "Access-Control-Allow-Headers"), "Authorization, Content-Type") == 0);
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
    const char *two = "POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer sekrit\r\n"
                      "Content-Length: 2\r\nContent-Length: 5\r\n\r\n{}abc";
    CHECK(http_raw(port, two, strlen(two), r));
    check_error(r, 400, "invalid_request_error", "conflicting Content-Length");
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

int main(void) {
    mf_log_set_level(MF_LOG_ERROR);
    timed("test_http", "helpers", test_helpers);
    timed("test_http", "routing", test_routing);
    timed("test_http", "bodies", test_bodies);
    timed("test_http", "guards", test_guards);
    timed("test_http", "limits", test_limits);
    return test_summary("test_http");
}
