/* http.c: the server over libmicrohttpd. A request's life is one path through this file:
 * on_uri (copy the raw target) -> on_access, first call (method, target, headers, auth, route,
 * declared length: anything refused is answered here, before the body is read) -> body calls
 * (bounded accumulation) -> last call (the route's handler answers) -> on_completed (free). */
#include "http/http_impl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* After a stop's grace, how long the answers that stand in for deferred ones may take to go out. */
#define MF_HTTP_FLUSH_S 1.0

/* Beyond the body limit the rest of a chunked upload is read and dropped (MHD lets no answer go
 * out in the middle of a body) up to this much; past it the connection is closed. */
#define MF_HTTP_DISCARD_MAX (8u << 20)

mf_http_params mf_http_default_params(void) {
    return (mf_http_params){
        .host = "127.0.0.1",
        .port = 8080,
        .n_threads = 4,
        .max_connections = 256,
        .connection_timeout_s = 60,
        .connection_memory = 64u << 10,
        .max_body_bytes = 8u << 20,
        .json_max_depth = 64,
        .stream_max_bytes = 1u << 20,
        .sse_ping_s = 15,
    };
}

/* ---- MHD's log: kept per thread so a failed start can say why ---- */

static _Thread_local char mhd_last_msg[256];

static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
    (void)cls;
    vsnprintf(mhd_last_msg, sizeof mhd_last_msg, fmt, ap);
    size_t n = strlen(mhd_last_msg);
    while (n && (mhd_last_msg[n - 1] == '\n' || mhd_last_msg[n - 1] == '.')) mhd_last_msg[--n] = '\0';
    mf_log(MF_LOG_DEBUG, "http: %s", mhd_last_msg);
}

/* ---- creation and routes ---- */

static mf_status parse_host(mf_http_server *s, const char *host) {
    memset(&s->addr, 0, sizeof s->addr);
    struct sockaddr_in *a4 = (struct sockaddr_in *)&s->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&s->addr;
    if (strcmp(host, "localhost") == 0) host = "127.0.0.1";
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons(s->p.port);
        s->addr_len = sizeof *a4;
        return MF_OK;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons(s->p.port);
        s->addr_len = sizeof *a6;
        s->v6 = true;
        s->dual_stack = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
        return MF_OK;
    }
    return mf_fail(MF_ERR_ARG, "http: host '%s' is not an IPv4 or IPv6 address literal (e.g. 127.0.0.1, ::1, 0.0.0.0)",
                   host);
}

mf_status mf_http_server_create(const mf_http_params *p, mf_http_server **out) {
    *out = NULL;
    mf_http_params d = mf_http_default_params();
    if (!p) p = &d;
    if (p->n_threads < 1 || p->n_threads > 256)
        return mf_fail(MF_ERR_ARG, "http: n_threads %d outside [1, 256]", p->n_threads);
    if (!p->max_connections || !p->connection_memory || !p->max_body_bytes || !p->stream_max_bytes)
        return mf_fail(MF_ERR_ARG, "http: max_connections, connection_memory, max_body_bytes and stream_max_bytes "
                                   "must be > 0");
    if (p->max_connections < (unsigned)p->n_threads) /* MHD splits the limit among its threads */
        return mf_fail(MF_ERR_ARG, "http: max_connections %u below n_threads %d", p->max_connections, p->n_threads);
    if (p->json_max_depth < 1) return mf_fail(MF_ERR_ARG, "http: json_max_depth %d must be >= 1", p->json_max_depth);
    if (p->connection_memory < 4096)
        return mf_fail(MF_ERR_ARG, "http: connection_memory %zu below 4096 bytes", p->connection_memory);
    mf_http_server *s = mf_calloc(1, sizeof *s);
    if (!s) return MF_ERR_NOMEM;
    s->p = *p;
    s->wake_fd = -1;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    mf_status st = MF_ERR_NOMEM;
    if (!(s->host = mf_strdup(p->host ? p->host : "127.0.0.1"))) goto fail;
    if (p->api_key && p->api_key[0] && !(s->api_key = mf_strdup(p->api_key))) goto fail;
    if (p->cors_origin && !(s->cors_origin = mf_strdup(p->cors_origin))) goto fail;
    if (s->cors_origin && strpbrk(s->cors_origin, "\r\n")) {
        st = mf_fail(MF_ERR_ARG, "http: cors_origin holds a line break");
        goto fail;
    }
    for (size_t n = 0; p->auth_exempt_paths && p->auth_exempt_paths[n]; n++) {
        char **e = mf_realloc(s->exempt, (s->n_exempt + 1) * sizeof *e);
        if (!e) goto fail;
        s->exempt = e;
        if (!(s->exempt[s->n_exempt] = mf_strdup(p->auth_exempt_paths[n]))) goto fail;
        s->n_exempt++;
    }
    s->p.host = s->host;
    s->p.api_key = s->api_key;
    s->p.cors_origin = s->cors_origin;
    s->p.auth_exempt_paths = NULL;
    if ((st = parse_host(s, s->host))) goto fail;
    *out = s;
    return MF_OK;
fail:
    mf_http_server_free(s);
    return st;
}

static mf_status add_route(mf_http_server *s, unsigned methods, const char *path, bool prefix, mf_http_handler fn,
                           void *user) {
    const unsigned allowed = MF_HTTP_GET | MF_HTTP_POST | MF_HTTP_PUT | MF_HTTP_DELETE | MF_HTTP_PATCH;
    if (!s || !path || path[0] != '/' || !fn || !methods || (methods & ~allowed))
        return mf_fail(MF_ERR_ARG, "http: route '%s': path must start with '/', methods be GET..PATCH, handler set",
                       path ? path : "(null)");
    if (s->daemon) return mf_fail(MF_ERR_ARG, "http: route '%s' added after the server started", path);
    for (size_t i = 0; i < s->n_routes; i++)
        if (s->routes[i].prefix == prefix && strcmp(s->routes[i].path, path) == 0 && (s->routes[i].methods & methods))
            return mf_fail(MF_ERR_ARG, "http: route '%s' is already taken for one of these methods", path);
    mf_http_route_rec *r = mf_realloc(s->routes, (s->n_routes + 1) * sizeof *r);
    if (!r) return MF_ERR_NOMEM;
    s->routes = r;
    char *copy = mf_strdup(path);
    if (!copy) return MF_ERR_NOMEM;
    s->routes[s->n_routes++] = (mf_http_route_rec){methods, prefix, copy, strlen(path), fn, user};
    return MF_OK;
}

mf_status mf_http_route(mf_http_server *s, unsigned methods, const char *path, mf_http_handler fn, void *user) {
    return add_route(s, methods, path, false, fn, user);
}

mf_status mf_http_route_prefix(mf_http_server *s, unsigned methods, const char *prefix, mf_http_handler fn,
                               void *user) {
    return add_route(s, methods, prefix, true, fn, user);
}

/* The routes for a path: the exact ones, else those of the longest matching prefix. *allow gets
 * the union of their methods; the one taking `method` (HEAD counts as GET) is returned. */
static const mf_http_route_rec *find_route(const mf_http_server *s, const char *path, unsigned method,
                                           unsigned *allow, const char **rest) {
    const mf_http_route_rec *hit = NULL;
    if (method == MF_HTTP_HEAD) method = MF_HTTP_GET;
    *allow = 0;
    *rest = "";
    for (size_t i = 0; i < s->n_routes; i++) {
        const mf_http_route_rec *r = &s->routes[i];
        if (r->prefix || strcmp(path, r->path) != 0) continue;
        *allow |= r->methods;
        if (r->methods & method) hit = r;
    }
    if (*allow) return hit;
    size_t n = strlen(path), best = 0;
    for (size_t i = 0; i < s->n_routes; i++) {
        const mf_http_route_rec *r = &s->routes[i];
        if (!r->prefix || n <= r->len || r->len < best || memcmp(path, r->path, r->len) != 0) continue;
        if (r->len > best) {
            best = r->len;
            *allow = 0;
            hit = NULL;
        }
        *allow |= r->methods;
        if (r->methods & method) hit = r;
    }
    if (hit) *rest = path + hit->len;
    return hit;
}

static void allow_header(unsigned allow, char *buf, size_t cap) {
    static const struct { unsigned m; const char *name; } names[] = {
        {MF_HTTP_GET, "GET, HEAD"}, {MF_HTTP_POST, "POST"}, {MF_HTTP_PUT, "PUT"},
        {MF_HTTP_DELETE, "DELETE"}, {MF_HTTP_PATCH, "PATCH"},
    };
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < MF_ARRAY_LEN(names); i++)
        if (allow & names[i].m) o += (size_t)snprintf(buf + o, cap - o, "%s, ", names[i].name);
    snprintf(buf + o, cap - o, "OPTIONS");
}

/* ---- MHD callbacks ---- */

static unsigned method_of(const char *m) {
    static const struct { const char *name; unsigned m; } t[] = {
        {"GET", MF_HTTP_GET}, {"POST", MF_HTTP_POST}, {"PUT", MF_HTTP_PUT}, {"DELETE", MF_HTTP_DELETE},
        {"PATCH", MF_HTTP_PATCH}, {"HEAD", MF_HTTP_HEAD}, {"OPTIONS", MF_HTTP_OPTIONS},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(t); i++)
        if (strcmp(m, t[i].name) == 0) return t[i].m;
    return MF_HTTP_OTHER;
}

/* Called by MHD with the raw target, before it splits and decodes it in place; what this returns
 * becomes the request's context, so every request has one from here to on_completed. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    mf_http_request *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->srv = cls;
    r->raw_uri_at = uri;
    r->raw_uri_len = strlen(uri);
    r->raw_uri = strndup(uri, r->raw_uri_len);
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    r->owner = ci ? ci->socket_context : NULL;
    if (r->owner) r->owner->pending = r;
    return r;
}

static void free_request(mf_http_request *r) {
    mf_http_target_free(&r->target);
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->raw_uri);
    free(r->body);
    free(r);
}

static void complete(mf_http_request *r, enum MHD_RequestTerminationCode toe) {
    if (r->owner) r->owner->pending = NULL;
    if (r->live) mf_http_live_conn_done(r->live, toe);
    free_request(r);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **ctx, enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    mf_http_request *r = *ctx;
    if (!r) return;
    complete(r, toe);
    *ctx = NULL;
}

/* A connection's record (mf_http_conn) lives from its start to its close; a request still pending
 * at the close was never completed by MHD and is completed here, as one ended with an error. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_ctx,
                          enum MHD_ConnectionNotificationCode code) {
    (void)cls;
    (void)c;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_ctx = calloc(1, sizeof(mf_http_conn)); /* NULL: requests go untracked */
        return;
    }
    mf_http_conn *cc = *socket_ctx;
    if (!cc) return;
    if (cc->pending) complete(cc->pending, MHD_REQUEST_TERMINATED_WITH_ERROR);
    free(cc);
    *socket_ctx = NULL;
}

typedef struct header_check {
    char bad[80];
    const char *length;   /* the first Content-Length's value */
    bool length_conflict; /* another Content-Length with a different value */
} header_check;

static enum MHD_Result check_header(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                    const char *value, size_t value_size) {
    (void)kind;
    header_check *hc = cls;
    bool ok = strlen(key) == key_size && (!value || strlen(value) == value_size);
    for (size_t i = 0; ok && value && i < value_size; i++) {
        unsigned char ch = (unsigned char)value[i];
        ok = ch >= 0x20 ? ch != 0x7f : ch == '\t';
    }
    if (!ok) mf_http_utf8_sanitize(hc->bad, sizeof hc->bad, key);
    if (ok && value && strcasecmp(key, "Content-Length") == 0) {
        if (hc->length && strcmp(hc->length, value)) hc->length_conflict = true;
        if (!hc->length) hc->length = value;
    }
    return ok ? MHD_YES : MHD_NO;
}

static bool path_exempt(const mf_http_server *s, const char *path) {
    for (size_t i = 0; i < s->n_exempt; i++)
        if (strcmp(s->exempt[i], path) == 0) return true;
    return false;
}

/* Does the request carry the API key? A missing key and a wrong one get different messages. */
static bool authorized(mf_http_request *r, const char **why) {
    const char *h = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Authorization");
    *why = "missing API key: send 'Authorization: Bearer <key>'";
    if (!h) return false;
    while (*h == ' ') h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) {
        *why = "the Authorization header must use the Bearer scheme";
        return false;
    }
    h += 6;
    while (*h == ' ' || *h == '\t') h++;
    size_t n = strlen(h);
    while (n && (h[n - 1] == ' ' || h[n - 1] == '\t')) n--;
    *why = "invalid API key";
    return mf_http_secret_equal(r->srv->api_key, h, n);
}

static void client_address(mf_http_request *r) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    snprintf(r->client, sizeof r->client, "?");
    if (!ci || !ci->client_addr) return;
    const struct sockaddr *sa = ci->client_addr;
    if (sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, r->client, sizeof r->client);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) inet_ntop(AF_INET, &a->s6_addr[12], r->client, sizeof r->client);
        else inet_ntop(AF_INET6, a, r->client, sizeof r->client);
    }
}

static void answer_options(mf_http_request *r, unsigned allow) {
    char methods[96];
    allow_header(allow, methods, sizeof methods);
    mf_http_set_header(r, "Allow", methods);
    const char *origin = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Origin");
    if (r->srv->cors_origin && origin &&
        MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
        mf_http_set_header(r, "Access-Control-Allow-Methods", methods);
        /* The headers the preflight asks for (the browser clients send their own, such as the
         * OpenAI SDK's X-Stainless-*, and a preflight that lists one not allowed fails the
         * request), where they are a plain list of header names; else the ones this server reads. */
        const char *asked = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Access-Control-Request-Headers");
        const bool plain = asked && asked[0] && strlen(asked) <= 1024 &&
                           strspn(asked, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_, ") ==
                               strlen(asked);
        mf_http_set_header(r, "Access-Control-Allow-Headers", plain ? asked : "Authorization, Content-Type");
        mf_http_set_header(r, "Access-Control-Max-Age", "600");
    }
    mf_http_respond(r, 204, NULL, NULL, 0);
}

/* First call: the request line and headers are in. Whatever is refused is answered now, so MHD
 * never reads the body; returns false when the connection is to be dropped. */
static bool begin(mf_http_request *r, const char *method, const char *version) {
    mf_http_server *s = r->srv;
    r->method_name = method;
    r->method = method_of(method);
    client_address(r);
    if (!r->raw_uri) return false;
    /* MHD hands the target as a C string: a raw NUL inside cuts it short without a word. The
     * request line is one buffer ("<target>\0<version>"), so a target that ends before the byte
     * in front of the version had a NUL in it. */
    if (version && version[0] && (uintptr_t)r->raw_uri_at < (uintptr_t)version &&
        (uintptr_t)(r->raw_uri_at + r->raw_uri_len + 1) < (uintptr_t)version)
        return mf_http_respond_error(r, 400, NULL, NULL, "the request line holds a NUL byte") == MF_OK;
    if (r->method == MF_HTTP_OPTIONS && strcmp(r->raw_uri, "*") == 0) {
        answer_options(r, MF_HTTP_GET | MF_HTTP_POST | MF_HTTP_PUT | MF_HTTP_DELETE | MF_HTTP_PATCH);
        return r->answered;
    }
    if (mf_http_target_parse(r->raw_uri, r->raw_uri_len, &r->target) != MF_OK) {
        mf_status st = mf_http_respond_error(r, 400, NULL, NULL, "bad request target: %s", mf_last_error());
        return st == MF_OK;
    }
    r->target_ok = true;
    header_check hc = {.bad = {0}};
    if (MHD_get_connection_values_n(r->conn, MHD_HEADER_KIND, check_header, &hc) < 0 || hc.bad[0])
        return mf_http_respond_error(r, 400, NULL, NULL, "header '%s' holds a control byte", hc.bad) == MF_OK;
    /* two lengths for one body: which one frames it is ambiguous (a request-smuggling shape) */
    if (hc.length_conflict)
        return mf_http_respond_error(r, 400, NULL, NULL, "conflicting Content-Length headers") == MF_OK;
    unsigned allow;
    const char *path = r->target.path;
    r->route = find_route(s, path, r->method, &allow, &r->path_rest);
    if (r->method == MF_HTTP_OPTIONS) {
        if (!allow) return mf_http_respond_error(r, 404, NULL, NULL, "no route for %s", path) == MF_OK;
        answer_options(r, allow);
        return r->answered;
    }
    if (s->api_key && !path_exempt(s, path)) {
        const char *why;
        if (!authorized(r, &why)) {
            mf_http_set_header(r, "WWW-Authenticate", "Bearer");
            return mf_http_respond_error(r, 401, NULL, "invalid_api_key", "%s", why) == MF_OK;
        }
    }
    if (!allow) return mf_http_respond_error(r, 404, NULL, NULL, "no route for %s %s", method, path) == MF_OK;
    if (!r->route) {
        char methods[96];
        allow_header(allow, methods, sizeof methods);
        mf_http_set_header(r, "Allow", methods);
        return mf_http_respond_error(r, 405, NULL, NULL, "%s is not allowed on %s (allowed: %s)", method, path,
                                     methods) == MF_OK;
    }
    const char *cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "Content-Length");
    if (cl) {
        errno = 0;
        char *end;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end == cl || *end)
            return mf_http_respond_error(r, 400, NULL, NULL, "Content-Length '%s' is not a number", cl) == MF_OK;
        if (errno || n > s->p.max_body_bytes)
            return mf_http_respond_error(r, 413, NULL, NULL, "request body of %s bytes is over the limit of %zu bytes",
                                         cl, s->p.max_body_bytes) == MF_OK;
        r->body_cap = (size_t)n + 1;
    }
    return true;
}

/* Body bytes: kept up to the limit; past it dropped (and, far past it, the connection closed). */
static bool take_body(mf_http_request *r, const char *data, size_t n) {
    size_t limit = r->srv->p.max_body_bytes;
    if (r->too_large || n > limit - r->body_len) {
        if (!r->too_large) r->discarded = r->body_len;
        r->too_large = true;
        free(r->body);
        r->body = NULL;
        r->body_len = 0;
        r->discarded += n;
        return r->discarded <= (uint64_t)limit + MF_HTTP_DISCARD_MAX;
    }
    size_t need = r->body_len + n + 1; /* <= limit + 1 */
    if (need > r->body_cap || !r->body) {
        /* Grow by doubling from what Content-Length announced, but at most 64 KiB ahead of the
         * bytes that came: an announcement alone allocates nothing large. */
        size_t cap = r->body ? MF_MIN(2 * r->body_cap, limit + 1) : MF_MIN(r->body_cap ? r->body_cap : 4096, 65536);
        if (cap < need) cap = need;
        char *b = realloc(r->body, cap);
        if (!b) return false;
        r->body = b;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
    r->body[r->body_len] = '\0';
    return true;
}

static void dispatch(mf_http_request *r) {
    if (r->too_large) {
        mf_http_respond_error(r, 413, NULL, NULL, "request body of %llu bytes or more is over the limit of %zu bytes",
                              (unsigned long long)r->discarded, r->srv->p.max_body_bytes);
        return;
    }
    r->route->fn(r, r->route->user);
    if (!r->answered && !r->deferred) {
        mf_log(MF_LOG_WARN, "http: the handler of %s %s gave no answer", r->method_name, r->target.path);
        mf_http_respond_error(r, 500, NULL, NULL, "the handler of %s gave no answer", r->target.path);
    }
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **ctx) {
    (void)cls;
    (void)url;
    mf_http_request *r = *ctx;
    if (!r) return MHD_NO; /* on_uri had no memory */
    if (!r->headers_done) {
        r->headers_done = true;
        r->conn = c;
        return begin(r, method, version) ? MHD_YES : MHD_NO;
    }
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        if (r->answered) return MHD_YES;
        return take_body(r, upload, n) ? MHD_YES : MHD_NO;
    }
    if (!r->answered && !r->deferred) dispatch(r);
    /* A deferred request comes here right after its handler and again each time it is resumed. */
    if (r->deferred && !r->answered) return mf_http_deferred_run(r) ? MHD_YES : MHD_NO;
    return r->answered ? MHD_YES : MHD_NO;
}

/* ---- start and stop ---- */

mf_status mf_http_server_start(mf_http_server *s) {
    if (!s) return mf_fail(MF_ERR_ARG, "http: no server");
    if (s->daemon || s->running) return mf_fail(MF_ERR_ARG, "http: server already started");
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    /* poll, not epoll: with epoll, MHD takes the listening socket out of its epoll set while the
     * connection limit is reached, and MHD_quiesce_daemon (mf_http_server_stop) then aborts the
     * process ("Failed to remove listen FD from epoll set", libmicrohttpd 0.9.75). */
    flags |= MHD_USE_POLL;
    if (s->v6) flags |= s->dual_stack ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    struct MHD_OptionItem opts[8];
    size_t n = 0;
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_LIMIT, (intptr_t)s->p.max_connections, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)s->p.connection_timeout_s, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)s->p.connection_memory, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_STRICT_FOR_CLIENT, 1, NULL};
    if (s->p.max_connections_per_ip)
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_PER_IP_CONNECTION_LIMIT, (intptr_t)s->p.max_connections_per_ip,
                                            NULL};
    if (s->p.n_threads > 1)
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)s->p.n_threads, NULL};
    opts[n++] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
    mf_status st = mf_http_watcher_start(s);
    if (st) return st;
    pthread_mutex_lock(&s->lock);
    s->running = true;
    s->stopping = false;
    pthread_mutex_unlock(&s->lock);
    mhd_last_msg[0] = '\0';
    errno = 0;
    s->daemon = MHD_start_daemon(flags, s->p.port, NULL, NULL, on_access, s, MHD_OPTION_SOCK_ADDR,
                                 (struct sockaddr *)&s->addr, MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                                 MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log,
                                 s, MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    if (!s->daemon) {
        int e = errno;
        mf_http_watcher_stop(s);
        s->running = false;
        return mf_fail(MF_ERR_IO, "http: cannot listen on %s port %u: %s", s->host, (unsigned)s->p.port,
                       mhd_last_msg[0] ? mhd_last_msg : e ? strerror(e) : "libmicrohttpd refused to start");
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->p.port;
    return MF_OK;
}

uint16_t mf_http_server_port(const mf_http_server *s) {
    return s && s->daemon ? s->port : 0;
}

/* Wait up to secs for the live list to empty (every stream and deferred request over). */
static void wait_live(mf_http_server *s, double secs) {
    if (!(secs > 0)) return;
    secs = MF_MIN(secs, 1e6); /* a grace past any use would overflow the deadline */
    struct timespec dl;
    clock_gettime(CLOCK_MONOTONIC, &dl);
    double whole = (double)(long)secs;
    dl.tv_sec += (time_t)whole;
    dl.tv_nsec += (long)((secs - whole) * 1e9);
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&s->lock);
    while (s->n_live > 0 && pthread_cond_timedwait(&s->cond, &s->lock, &dl) != ETIMEDOUT) {}
    pthread_mutex_unlock(&s->lock);
}

void mf_http_server_stop(mf_http_server *s, double grace_s) {
    if (!s || !s->daemon) return;
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_mutex_unlock(&s->lock);
    /* Stop accepting: MHD leaves the socket to us; shut down, it refuses new connections at once
     * (closing must wait until MHD's threads are gone). */
    MHD_socket lfd = MHD_quiesce_daemon(s->daemon);
    if (lfd != MHD_INVALID_SOCKET) shutdown(lfd, SHUT_RDWR);
    wait_live(s, grace_s);
    /* Close what is left. That resumes every suspended connection too, which MHD_stop_daemon
     * requires. The 503s of deferred requests are small and wait behind nothing: they get a
     * moment to go out rather than be cut with their connections. */
    mf_http_live_shutdown(s);
    wait_live(s, MF_HTTP_FLUSH_S);
    MHD_stop_daemon(s->daemon);
    s->daemon = NULL;
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    mf_http_watcher_stop(s);
    pthread_mutex_lock(&s->lock);
    s->running = false;
    pthread_mutex_unlock(&s->lock);
}

void mf_http_server_free(mf_http_server *s) {
    if (!s) return;
    mf_http_server_stop(s, 0);
    for (size_t i = 0; i < s->n_routes; i++) free(s->routes[i].path);
    free(s->routes);
    for (size_t i = 0; i < s->n_exempt; i++) free(s->exempt[i]);
    free(s->exempt);
    free(s->host);
    free(s->api_key);
    free(s->cors_origin);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* ---- requests ---- */

mf_http_method mf_http_request_method(const mf_http_request *r) { return (mf_http_method)r->method; }
const char *mf_http_request_method_name(const mf_http_request *r) { return r->method_name; }
const char *mf_http_request_path(const mf_http_request *r) { return r->target_ok ? r->target.path : ""; }
const char *mf_http_request_path_rest(const mf_http_request *r) { return r->path_rest ? r->path_rest : ""; }
const char *mf_http_request_client(const mf_http_request *r) { return r->client; }

const char *mf_http_request_query(const mf_http_request *r, const char *name) {
    for (size_t i = 0; i < r->target.n_query; i++)
        if (strcmp(r->target.keys[i], name) == 0) return r->target.vals[i];
    return NULL;
}

const char *mf_http_request_header(const mf_http_request *r, const char *name) {
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *mf_http_request_body(const mf_http_request *r, size_t *len) {
    if (len) *len = r->body_len;
    return r->body ? r->body : "";
}

json_t *mf_http_request_json(mf_http_request *r) {
    const char *ct = mf_http_request_header(r, "Content-Type");
    if (!mf_http_content_type_is(ct, "application/json")) {
        char shown[128];
        mf_http_utf8_sanitize(shown, sizeof shown, ct ? ct : "(none)");
        mf_http_respond_error(r, 415, NULL, NULL, "Content-Type must be application/json, not %s", shown);
        return NULL;
    }
    char msg[256];
    json_t *v = mf_http_json_parse(r->body ? r->body : "", r->body_len, r->srv->p.json_max_depth, msg, sizeof msg);
    if (!v) mf_http_respond_error(r, 400, NULL, NULL, "%s", msg);
    return v;
}

/* ---- answers ---- */

mf_status mf_http_header_check(const char *name, const char *value) {
    if (!name[0]) return mf_fail(MF_ERR_ARG, "http: empty header name");
    for (const char *c = name; *c; c++)
        if (!mf_http_tchar((unsigned char)*c)) return mf_fail(MF_ERR_ARG, "http: header name '%s' is no token", name);
    if (strpbrk(value, "\r\n")) return mf_fail(MF_ERR_ARG, "http: header '%s' value holds a line break", name);
    return MF_OK;
}

mf_status mf_http_set_header(mf_http_request *r, const char *name, const char *value) {
    if (r->answered) return mf_fail(MF_ERR_ARG, "http: header '%s' set after the answer", name);
    if (r->n_headers == MF_HTTP_MAX_RESP_HEADERS)
        return mf_fail(MF_ERR_ARG, "http: more than %d headers on one answer", MF_HTTP_MAX_RESP_HEADERS);
    mf_status st = mf_http_header_check(name, value);
    if (st) return st;
    char *n = mf_strdup(name), *v = mf_strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return MF_ERR_NOMEM;
    }
    r->headers[r->n_headers++] = (mf_http_resp_header){n, v};
    return MF_OK;
}

mf_status mf_http_queue(mf_http_request *r, int status, struct MHD_Response *resp) {
    if (r->answered) {
        MHD_destroy_response(resp);
        return mf_fail(MF_ERR_ARG, "http: %s answered twice", r->raw_uri ? r->raw_uri : "request");
    }
    r->answered = true;
    mf_http_server *s = r->srv;
    bool ok = true;
    if (s->cors_origin) {
        ok &= MHD_add_response_header(resp, "Access-Control-Allow-Origin", s->cors_origin) == MHD_YES;
        if (strcmp(s->cors_origin, "*") != 0) ok &= MHD_add_response_header(resp, "Vary", "Origin") == MHD_YES;
    }
    for (size_t i = 0; i < r->n_headers; i++)
        ok &= MHD_add_response_header(resp, r->headers[i].name, r->headers[i].value) == MHD_YES;
    /* A client that half-closed after its request wants no more: MHD 0.9.75 (epoll) may have
     * read that FIN with the request and keep the connection open until the timeout. */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    struct pollfd pf = {.fd = ci ? ci->connect_fd : -1, .events = POLLRDHUP};
    if (pf.fd >= 0 && poll(&pf, 1, 0) == 1 && (pf.revents & (POLLRDHUP | POLLHUP)))
        ok &= MHD_add_response_header(resp, "Connection", "close") == MHD_YES;
    ok = ok && MHD_queue_response(r->conn, (unsigned)status, resp) == MHD_YES;
    MHD_destroy_response(resp);
    if (!ok) {
        r->answered = false; /* the access callback then closes the connection */
        return mf_fail(MF_ERR_INTERNAL, "http: libmicrohttpd refused the %d answer", status);
    }
    return MF_OK;
}

mf_status mf_http_respond(mf_http_request *r, int status, const char *content_type, const void *body, size_t len) {
    if (r->answered) return mf_fail(MF_ERR_ARG, "http: request answered twice");
    if (status < 100 || status > 999) return mf_fail(MF_ERR_ARG, "http: status %d outside 100..999", status);
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, (void *)(len ? body : ""), MHD_RESPMEM_MUST_COPY);
    if (!resp) return mf_fail(MF_ERR_NOMEM, "http: no memory for a %zu-byte answer", len);
    if (content_type && MHD_add_response_header(resp, "Content-Type", content_type) != MHD_YES) {
        MHD_destroy_response(resp);
        return mf_fail(MF_ERR_NOMEM, "http: no memory for a header");
    }
    return mf_http_queue(r, status, resp);
}

mf_status mf_http_respond_json_text(mf_http_request *r, int status, const char *json) {
    return mf_http_respond(r, status, "application/json", json, strlen(json));
}

mf_status mf_http_respond_json(mf_http_request *r, int status, const json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (!text) return mf_http_respond_error(r, 500, NULL, NULL, "the answer could not be encoded as JSON");
    mf_status st = mf_http_respond_json_text(r, status, text);
    free(text);
    return st;
}

mf_status mf_http_respond_text(mf_http_request *r, int status, const char *text) {
    return mf_http_respond(r, status, "text/plain; charset=utf-8", text, strlen(text));
}

mf_status mf_http_respond_metrics(mf_http_request *r, const char *text) {
    return mf_http_respond(r, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text));
}

char *mf_http_error_textv(int status, const char *param, const char *code, const char *fmt, va_list ap) {
    char msg[MF_HTTP_MSG_MAX + 1];
    vsnprintf(msg, sizeof msg, fmt, ap);
    json_t *e = mf_http_error_json(status, msg, param, code);
    char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
    json_decref(e);
    return text;
}

static mf_status respond_errorv(mf_http_request *r, int status, const char *param, const char *code,
                                const char *fmt, va_list ap) {
    char *text = mf_http_error_textv(status, param, code, fmt, ap);
    /* Out of memory: still an answer in the right shape. */
    static const char oom[] =
        "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}";
    mf_status st = mf_http_respond(r, text ? status : 500, "application/json", text ? text : oom,
                                   text ? strlen(text) : sizeof oom - 1);
    free(text);
    return st;
}

mf_status mf_http_respond_error(mf_http_request *r, int status, const char *param, const char *code,
                                const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mf_status st = respond_errorv(r, status, param, code, fmt, ap);
    va_end(ap);
    return st;
}

mf_status mf_http_respond_busy(mf_http_request *r, int status, unsigned retry_after_s, const char *fmt, ...) {
    if (retry_after_s) {
        char v[16];
        snprintf(v, sizeof v, "%u", retry_after_s);
        mf_http_set_header(r, "Retry-After", v);
    }
    va_list ap;
    va_start(ap, fmt);
    mf_status st = respond_errorv(r, status, NULL, NULL, fmt, ap);
    va_end(ap);
    return st;
}
