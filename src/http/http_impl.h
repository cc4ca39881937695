/* http_impl.h: what the files of src/http share and nobody else sees: the server, request and
 * route records, the request-target parser, and the stream hooks the MHD callbacks call. */
#ifndef MF_HTTP_IMPL_H
#define MF_HTTP_IMPL_H

#include "http/http.h"
#include "core/core.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>

#define MF_HTTP_MAX_QUERY 256       /* query parameters per request */
#define MF_HTTP_MAX_RESP_HEADERS 16 /* mf_http_set_header per request */
#define MF_HTTP_MSG_MAX 1024        /* bytes of an error message sent to a client */

/* A request target ("/v1/models/x?a=1&b") split and percent-decoded: path and query pairs point
 * into one allocation. */
typedef struct mf_http_target {
    char *path;
    size_t n_query;
    char **keys, **vals;
    void *block;
} mf_http_target;

/* Parse a raw origin-form target: it must start with '/'; %00, a bad escape, or a control byte in
 * the path, and %00 or a bad escape in the query, are MF_ERR_FORMAT with a message saying which. */
mf_status mf_http_target_parse(const char *raw, size_t len, mf_http_target *t);
void mf_http_target_free(mf_http_target *t);

/* A character of an HTTP token (RFC 9110 tchar): header names, parameter names. */
bool mf_http_tchar(unsigned char c);

/* Copy src to dst (cap > 0) with invalid UTF-8 bytes replaced by '?', cut at a character boundary
 * so it fits in cap - 1 bytes plus the NUL. Returns the length written. */
size_t mf_http_utf8_sanitize(char *dst, size_t cap, const char *src);

typedef struct mf_http_route_rec {
    unsigned methods;
    bool prefix;
    char *path;
    size_t len;
    mf_http_handler fn;
    void *user;
} mf_http_route_rec;

struct mf_http_server {
    /* Settings (strings owned). */
    mf_http_params p;
    char *host, *api_key, *cors_origin;
    char **exempt;
    size_t n_exempt;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    bool v6, dual_stack;

    mf_http_route_rec *routes;
    size_t n_routes;

    struct MHD_Daemon *daemon;
    uint16_t port;

    /* lock guards what follows, and is taken before any stream's lock (never the other way). */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled when a stream leaves the live list */
    bool running, stopping;
    mf_http_stream *live; /* streams whose connection is still open, linked by next_live */
    size_t n_live;
    uint64_t next_stream_id;

    /* The disconnect watcher: one thread polling the live streams' sockets for a hang-up. */
    pthread_t watcher;
    bool watcher_started, watcher_quit;
    int wake_fd; /* eventfd: a stream joined, or quit */
    struct pollfd *pfds;
    uint64_t *pfd_ids;
    size_t pfd_cap;
};

typedef struct mf_http_resp_header {
    char *name, *value;
} mf_http_resp_header;

struct mf_http_request {
    mf_http_server *srv;
    struct MHD_Connection *conn;
    /* The raw target, copied when MHD logs it (before it decodes in place), and where it was. */
    char *raw_uri;
    const char *raw_uri_at;
    size_t raw_uri_len;

    bool headers_done, answered;
    unsigned method;
    const char *method_name;
    mf_http_target target;
    bool target_ok;
    const char *path_rest;
    const mf_http_route_rec *route;

    char *body;
    size_t body_len, body_cap;
    uint64_t discarded; /* bytes dropped after the limit was passed */
    bool too_large;

    mf_http_resp_header headers[MF_HTTP_MAX_RESP_HEADERS];
    size_t n_headers;
    char client[64];

    mf_http_stream *stream; /* the stream this request answered with (one reference) */
};

/* Queue an MHD response for r with the CORS and the handler's headers added; takes the response. */
mf_status mf_http_queue(mf_http_request *r, int status, struct MHD_Response *resp);

/* Stream hooks (http_stream.c). */
void mf_http_stream_conn_done(mf_http_stream *st, enum MHD_RequestTerminationCode toe);
void mf_http_streams_shutdown(mf_http_server *s); /* close every live stream: grace is over */
mf_status mf_http_watcher_start(mf_http_server *s);
void mf_http_watcher_stop(mf_http_server *s);

#endif /* MF_HTTP_IMPL_H */
