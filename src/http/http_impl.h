/* http_impl.h: what the files of src/http share and nobody else sees: the server, request and
 * route records, the request-target parser, and the live-answer record that streams and deferred
 * answers are built on (http_live.c), with the hooks the MHD callbacks call. */
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

typedef struct mf_http_live mf_http_live;

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

    /* lock guards what follows, and is taken before any live record's lock (never the other way). */
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled when a record leaves the live list */
    bool running, stopping;
    mf_http_live *live; /* streams and deferred answers whose request is not over, by next_live */
    size_t n_live;
    uint64_t next_live_id;

    /* The disconnect watcher: one thread polling the live records' sockets for a hang-up. */
    pthread_t watcher;
    bool watcher_started, watcher_quit;
    int wake_fd; /* eventfd: a record joined, or quit */
    struct pollfd *pfds;
    uint64_t *pfd_ids;
    size_t pfd_cap;
};

typedef struct mf_http_resp_header {
    char *name, *value;
} mf_http_resp_header;

/* Per connection: the request between on_uri and on_completed. libmicrohttpd 0.9.75 closes some
 * connections that fail twice while reading a request (a second error response) without calling
 * the completion callback; the connection's close notification frees what is still pending. */
typedef struct mf_http_conn {
    struct mf_http_request *pending;
} mf_http_conn;

struct mf_http_request {
    mf_http_server *srv;
    struct MHD_Connection *conn;
    mf_http_conn *owner; /* the connection's record, or NULL */
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

    mf_http_live *live;         /* the stream or deferred answer this request made (one reference) */
    mf_http_deferred *deferred; /* the same record when it is a deferred answer */
};

/* Queue an MHD response for r with the CORS and the handler's headers added; takes the response. */
mf_status mf_http_queue(mf_http_request *r, int status, struct MHD_Response *resp);
/* MF_ERR_ARG for a header name that is no token or a value with CR or LF. */
mf_status mf_http_header_check(const char *name, const char *value);
/* The body of an error answer in the OpenAI shape, for the caller to free; NULL when out of memory. */
char *mf_http_error_textv(int status, const char *param, const char *code, const char *fmt, va_list ap);

/* Deferred answers (http_defer.c): the access handler's call for a deferred request, right after
 * its handler and again whenever its connection is resumed. Queues the answer (or the 503 or 500
 * that stands in for one) or, with nothing to send yet, suspends the connection; false: drop the
 * connection (the client left, or nothing could be queued). */
bool mf_http_deferred_run(mf_http_request *r);

/* ---- Live answers (http_live.c) ----
 * A stream and a deferred answer outlive the handler that made them. Until MHD says their request
 * is over they are live: on the server's live list, their socket polled by the disconnect watcher
 * (a suspended connection sees no hang-up), waited for by mf_http_server_stop. This record, the
 * first member of both, holds what they share: the references (the owner's, the request's until
 * on_completed, and a stream's MHD response's), the close reason, and the owner's close callback,
 * called once. Locks: the server's before a record's, never the other way; callbacks run with
 * neither. */

typedef struct mf_http_live_ops {
    /* With l->lock and the server's lock held: close for `why` (the watcher saw the client go:
     * CLIENT_GONE; the grace is over: SHUTDOWN). Sets l->reason if it closes. */
    void (*close_locked)(mf_http_live *l, mf_http_close_reason why);
    /* Call the owner's close callback, with neither lock held; l->reason is final. */
    void (*notify)(mf_http_live *l);
    /* The last reference went: free the record (its lock and cond are already destroyed). */
    void (*destroy)(mf_http_live *l);
    /* With l->lock and the server's lock held, about once a second while the server sends SSE
     * pings (mf_http_params.sse_ping_s): a stream idle that long sends one. NULL: nothing to do. */
    void (*tick_locked)(mf_http_live *l, double now);
} mf_http_live_ops;

struct mf_http_live {
    const mf_http_live_ops *ops;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled when the close callback returns */
    int refs;            /* guarded by lock */

    /* Set once; the list links and hup_seen guarded by the server's lock. */
    mf_http_server *srv;
    int fd; /* the connection's socket, polled by the watcher and never closed by us */
    uint64_t id;
    mf_http_live *next_live, *prev_live;
    bool attached, hup_seen;

    /* Guarded by lock. */
    struct MHD_Connection *conn; /* NULL once the request is over */
    bool suspended;              /* conn is off MHD's loop; mf_http_live_wake_locked resumes it */
    bool finished;               /* the owner gave its whole answer (stream ended, deferred answered) */
    mf_http_close_reason reason; /* NONE while open; the first reason stays */
    bool has_callback, owner_gone, notified, cb_running;
    pthread_t cb_thread;
    mf_http_live *next_cb; /* chain of records whose callback is due (watcher, shutdown) */
};

/* A record for the request r with one reference, the owner's; not live yet. */
void mf_http_live_init(mf_http_live *l, const mf_http_live_ops *ops, mf_http_request *r, bool has_callback);
/* Make l live with the request's reference (r->live; on_completed drops it) and tell the watcher.
 * false (nothing done) when the server is stopping. */
bool mf_http_live_attach(mf_http_live *l, mf_http_request *r);
void mf_http_live_unref(mf_http_live *l);
/* With l->lock held: let a suspended connection run again. */
void mf_http_live_wake_locked(mf_http_live *l);
/* With l->lock held: the owner lets go, so no callback starts from now on; one running on
 * another thread is waited for (the owner's data may go once this returns). The caller finishes
 * under the lock, unlocks, and drops the owner's reference. */
void mf_http_live_disown_locked(mf_http_live *l);
/* MHD is done with the request (on_completed). */
void mf_http_live_conn_done(mf_http_live *l, enum MHD_RequestTerminationCode toe);
/* The grace is over: close every live record (SHUTDOWN) and run the callbacks that are due. */
void mf_http_live_shutdown(mf_http_server *s);
mf_status mf_http_watcher_start(mf_http_server *s);
void mf_http_watcher_stop(mf_http_server *s);

#endif /* MF_HTTP_IMPL_H */
