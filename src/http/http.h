/* http.h: a small HTTP/1.1 server over libmicrohttpd (MHD), shared by the OpenAI-compatible server
 * and the graph viewer: routes, request bodies with hard limits, JSON answers in the OpenAI error
 * shape, an optional API key, CORS, and server-sent-event streams fed from other threads. It knows
 * nothing of models.
 *
 * Threads. MHD runs a pool of worker threads; every route handler runs on one of them, once per
 * request, after the whole body has arrived, and must answer before it returns with exactly one
 * mf_http_respond_* call (a handler that answers nothing gets a 500), or hand the answer to
 * another thread with mf_http_defer. The request and everything read from it are valid only during
 * the handler call. A stream (mf_http_respond_stream) and a deferred answer are the things that
 * outlive the handler: any thread may push to the one or answer the other, and the worker threads
 * never wait for that thread, nor it for them.
 *
 * Limits. Every buffer is bounded: headers and request line by MHD's per-connection memory
 * (431/414 from MHD past it), bodies by max_body_bytes (413), JSON nesting by json_max_depth (400),
 * each stream's queue by stream_max_bytes (the push fails instead of waiting), connections by
 * max_connections (past it MHD stops accepting: new ones wait in the kernel's listen queue; open
 * streams and deferred requests count), idle connections by connection_timeout_s (a deferred
 * request waiting for its answer is not idle: its owner answers or releases it). */
#ifndef MF_HTTP_H
#define MF_HTTP_H

#include "minfer.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define MF_HTTP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define MF_HTTP_PRINTF(f, a)
#endif

typedef struct mf_http_server mf_http_server;
typedef struct mf_http_request mf_http_request;
typedef struct mf_http_stream mf_http_stream;

/* ==== Server ==== */

typedef struct mf_http_params {
    /* Address to listen on: an IPv4 or IPv6 literal ("127.0.0.1", "::1", "0.0.0.0" for every IPv4
     * address, "::" for every IPv6 one and, where the system allows, IPv4 too), or "localhost".
     * Default "127.0.0.1": nothing outside the machine reaches the server unless asked to. */
    const char *host;
    uint16_t port;                  /* 0: any free port (mf_http_server_port tells which); default 8080 */
    int n_threads;                  /* MHD worker threads (epoll where the system has it); default 4 */
    unsigned max_connections;       /* open connections, streams included; default 256; MHD splits
                                     * it evenly among the threads, so it must be >= n_threads */
    unsigned max_connections_per_ip; /* 0: no per-address limit (default) */
    unsigned connection_timeout_s;  /* an idle connection (no byte either way) is closed; default 60 */
    size_t connection_memory;       /* MHD's buffer per connection: headers, request line, send
                                     * buffer; default 64 KiB (a larger header block gets 431) */
    size_t max_body_bytes;          /* request body; default 8 MiB; more -> 413, the rest unread */
    int json_max_depth;             /* arrays/objects inside each other in a JSON body; default 64 */
    size_t stream_max_bytes;        /* queued, unsent bytes per stream; default 1 MiB */
    /* Bearer token every request must carry ("Authorization: Bearer <key>"), compared in constant
     * time; NULL or "" for none (default). Missing or wrong -> 401 with "WWW-Authenticate: Bearer".
     * OPTIONS (preflight) requests never need it. */
    const char *api_key;
    /* Paths (exact, decoded) that need no key, e.g. {"/health", NULL}; NULL-terminated; may be NULL. */
    const char *const *auth_exempt_paths;
    /* Value of Access-Control-Allow-Origin on every answer and preflight ("*" or one origin);
     * NULL (default): no CORS headers, so browsers on other origins cannot read the answers. */
    const char *cors_origin;
    /* A stream that has sent nothing for this many seconds gets a ": ping" comment, which SSE
     * clients skip: a proxy or client with a read timeout then keeps a stream that waits for a slot
     * or a long prompt; 0: none. Default 15. */
    unsigned sse_ping_s;
} mf_http_params;

mf_http_params mf_http_default_params(void);

/* Create a server (not yet listening). The strings and the exempt list are copied. Errors:
 * MF_ERR_ARG (a host that is no address literal, a zero limit), MF_ERR_NOMEM. */
mf_status mf_http_server_create(const mf_http_params *p, mf_http_server **out);

/* Bind and start the worker threads. Errors: MF_ERR_IO (the address is in use or cannot be bound:
 * the message says which), MF_ERR_ARG (already started), MF_ERR_INTERNAL or MF_ERR_NOMEM (no thread
 * or memory for the stream watcher). Call from the thread that owns the server. */
mf_status mf_http_server_start(mf_http_server *s);

/* The port actually bound (the one asked for, or the one the system chose for port 0); 0 before
 * start. */
uint16_t mf_http_server_port(const mf_http_server *s);

/* Stop: stop accepting at once (new connections are refused), let open streams finish and
 * deferred requests be answered (and their answers sent) for up to grace_s seconds, then close
 * them (their owners hear MF_HTTP_CLOSE_SHUTDOWN; a deferred request still waiting gets 503 with
 * Connection: close, given up to a second more to go out) and every other connection, and join
 * the worker threads. New streams and deferrals during the grace get 503. Idempotent; call from
 * the owning thread, never from a handler or a close callback. */
void mf_http_server_stop(mf_http_server *s, double grace_s);

/* Stop (no grace) if running, and free. NULL is fine. Streams and deferred answers that owners
 * still hold stay valid (closed) until released. */
void mf_http_server_free(mf_http_server *s);

/* ==== Routes ==== */

/* Methods, as bits so one route can take several. HEAD is answered by GET routes (the body is
 * dropped on the way out) and OPTIONS by the server itself (Allow, CORS preflight). */
typedef enum mf_http_method {
    MF_HTTP_GET = 1 << 0,
    MF_HTTP_POST = 1 << 1,
    MF_HTTP_PUT = 1 << 2,
    MF_HTTP_DELETE = 1 << 3,
    MF_HTTP_PATCH = 1 << 4,
    MF_HTTP_HEAD = 1 << 5,
    MF_HTTP_OPTIONS = 1 << 6,
    MF_HTTP_OTHER = 1 << 7, /* any other token; never routed */
} mf_http_method;

typedef void (*mf_http_handler)(mf_http_request *r, void *user);

/* Add a route before mf_http_server_start (MF_ERR_ARG after it): `methods` is a set of
 * MF_HTTP_GET..MF_HTTP_PATCH. mf_http_route matches the decoded path exactly ("/v1/models");
 * mf_http_route_prefix matches paths that start with `prefix` and go on ("/v1/models/" takes
 * "/v1/models/org/m", and mf_http_request_path_rest says "org/m"; "/v1/models/" alone does not
 * match). The longest matching prefix wins; exact routes win over prefixes. A path that matches a
 * route but no method of it gets 405 with Allow; one that matches none gets 404. The same path
 * may be given several times with disjoint methods. */
mf_status mf_http_route(mf_http_server *s, unsigned methods, const char *path, mf_http_handler fn, void *user);
mf_status mf_http_route_prefix(mf_http_server *s, unsigned methods, const char *prefix, mf_http_handler fn,
                               void *user);

/* ==== Requests (valid during the handler call only) ==== */

mf_http_method mf_http_request_method(const mf_http_request *r); /* MF_HTTP_HEAD for HEAD */
const char *mf_http_request_method_name(const mf_http_request *r);  /* as sent: "GET", "HEAD", ... */
const char *mf_http_request_path(const mf_http_request *r);         /* decoded, without the query */
const char *mf_http_request_path_rest(const mf_http_request *r);    /* after a prefix route's prefix; "" */
/* The first value of query parameter `name` (decoded; "" for "?a" or "?a="), NULL if absent. */
const char *mf_http_request_query(const mf_http_request *r, const char *name);
/* A request header, name compared without case; NULL if absent. */
const char *mf_http_request_header(const mf_http_request *r, const char *name);
/* The client's address, numeric ("127.0.0.1", "::1"); IPv4 clients of a dual-stack socket show as IPv4. */
const char *mf_http_request_client(const mf_http_request *r);
/* The body, with a NUL after it (not counted in *len); "" with *len 0 when there was none. */
const char *mf_http_request_body(const mf_http_request *r, size_t *len);

/* The body as JSON, for handlers of JSON APIs: checks that Content-Type is application/json
 * (parameters such as charset=utf-8 tolerated) and parses with the server's depth limit and
 * duplicate keys refused. Returns the value (the caller owns it: json_decref), or NULL after having
 * answered the request itself: 415 for another Content-Type, 400 naming the line and column of
 * the problem. */
json_t *mf_http_request_json(mf_http_request *r);

/* ==== Answers (from the handler, once per request) ==== */

/* Add a header to the answer about to be given (up to 16 per request). MF_ERR_ARG for a name that
 * is no token or a value with CR or LF (no header injection), or once answered. */
mf_status mf_http_set_header(mf_http_request *r, const char *name, const char *value);

/* `body` is copied; content_type NULL means none. Errors: MF_ERR_ARG (answered twice, status not
 * 100..999), MF_ERR_NOMEM, MF_ERR_INTERNAL (MHD refused; the connection is then closed). */
mf_status mf_http_respond(mf_http_request *r, int status, const char *content_type, const void *body, size_t len);
mf_status mf_http_respond_json(mf_http_request *r, int status, const json_t *body); /* compact; not stolen */
mf_status mf_http_respond_json_text(mf_http_request *r, int status, const char *json); /* already JSON */
mf_status mf_http_respond_text(mf_http_request *r, int status, const char *text);   /* text/plain; charset=utf-8 */
/* Prometheus text exposition: Content-Type "text/plain; version=0.0.4; charset=utf-8". */
mf_status mf_http_respond_metrics(mf_http_request *r, const char *text);

/* An error in the OpenAI shape {"error":{"message","type","param","code"}} with the type that
 * mf_http_error_type gives for the status; param and code may be NULL (JSON null). */
mf_status mf_http_respond_error(mf_http_request *r, int status, const char *param, const char *code,
                                const char *fmt, ...) MF_HTTP_PRINTF(5, 6);
/* 429 or 503 ("busy, try later") with Retry-After: retry_after_s when it is > 0. */
mf_status mf_http_respond_busy(mf_http_request *r, int status, unsigned retry_after_s, const char *fmt, ...)
    MF_HTTP_PRINTF(4, 5);

/* The OpenAI error type for an HTTP status: 400, 405, 413, 415 and other 4xx invalid_request_error,
 * 401 authentication_error, 403 permission_error, 404 not_found_error, 429 rate_limit_error,
 * 501 not_supported_error, 503 unavailable_error, 500 and other 5xx server_error. */
const char *mf_http_error_type(int status);
/* The whole error body, {"error": {"message", "type", "param", "code"}}: an error response's, and
 * the event an error sends inside a stream (which the OpenAI clients read as data["error"]); the
 * message is cut to 1 KiB and invalid UTF-8 in it replaced. NULL only when out of memory. */
json_t *mf_http_error_json(int status, const char *message, const char *param, const char *code);

/* ==== Streams (server-sent events) ==== */

/* Why a stream ended, as its owner hears it. */
typedef enum mf_http_close_reason {
    MF_HTTP_CLOSE_NONE = 0,    /* still open */
    MF_HTTP_CLOSE_DONE,        /* mf_http_stream_end was called and everything was sent */
    MF_HTTP_CLOSE_CLIENT_GONE, /* the client closed or reset the connection, or a write failed */
    MF_HTTP_CLOSE_TOO_SLOW,    /* a push did not fit in the stream's queue: the client reads too slowly */
    MF_HTTP_CLOSE_TIMEOUT,     /* the client read nothing for connection_timeout_s */
    MF_HTTP_CLOSE_SHUTDOWN,    /* mf_http_server_stop's grace ran out */
    MF_HTTP_CLOSE_ABORTED,     /* the owner called mf_http_stream_abort or released without ending */
} mf_http_close_reason;
const char *mf_http_close_reason_name(mf_http_close_reason why);

/* Called once, from an HTTP thread (a worker, the disconnect watcher, or the thread in
 * mf_http_server_stop) and never from inside an mf_http_stream_* call, when the stream closes for
 * any reason; within milliseconds for a client that goes away (or half-closes its side). It
 * must not block; it may push (which then fails), read mf_http_stream_closed, and release the
 * owner's reference. It is not called once the owner's mf_http_stream_release has returned (a
 * release on another thread waits for a callback in progress). */
typedef void (*mf_http_stream_close_fn)(mf_http_stream *st, mf_http_close_reason why, void *user);

typedef struct mf_http_stream_params {
    size_t max_bytes;             /* queue bound; 0: the server's stream_max_bytes */
    mf_http_stream_close_fn on_close; /* may be NULL */
    void *user;
} mf_http_stream_params;

/* Answer with a stream: 200, Content-Type: text/event-stream, Cache-Control: no-cache, chunked.
 * Returns the stream with one reference for the caller, to hand to the thread that produces the
 * events, which pushes and finally calls mf_http_stream_end and mf_http_stream_release. Returns
 * NULL when the request was answered otherwise instead: a HEAD request (headers only), a server
 * that is stopping (503), no memory (500). p may be NULL. */
mf_http_stream *mf_http_respond_stream(mf_http_request *r, const mf_http_stream_params *p);

/* What a push did. A push never waits for the network: it copies into the stream's queue or fails. */
typedef enum mf_http_push {
    MF_HTTP_PUSH_OK = 0,
    MF_HTTP_PUSH_CLOSED,   /* the stream is closed (client gone, ended, stopped): stop producing */
    MF_HTTP_PUSH_TOO_SLOW, /* the event did not fit in the queue; the stream is now closed with
                            * MF_HTTP_CLOSE_TOO_SLOW (a stream with a hole in it is worse than none) */
} mf_http_push;
const char *mf_http_push_name(mf_http_push p);

/* Any thread; all calls on one stream are serialised. push_data sends "data: <data>\n\n" (a line
 * break inside data becomes a new "data:" line, as SSE requires); push_json sends the value in
 * compact form; push_comment sends ": <text>\n\n", a keep-alive the client ignores, and is
 * skipped (PUSH_OK) while earlier events are still queued. An event goes in whole or not at all. */
mf_http_push mf_http_stream_push_data(mf_http_stream *st, const char *data, size_t len);
mf_http_push mf_http_stream_push_json(mf_http_stream *st, const json_t *value);
mf_http_push mf_http_stream_push_comment(mf_http_stream *st, const char *text);
/* No more events: the answer ends properly once the queue is sent. */
void mf_http_stream_end(mf_http_stream *st);
/* Drop the connection now, queued events unsent (the client sees a cut answer). */
void mf_http_stream_abort(mf_http_stream *st);
/* True once pushes fail: the client left, the stream was ended, aborted, dropped or the server
 * stopped. Cheap; poll it between steps of long work. */
bool mf_http_stream_closed(const mf_http_stream *st);
mf_http_close_reason mf_http_stream_close_reason(const mf_http_stream *st);
/* Give up the caller's reference (NULL fine). A stream not ended is aborted. The stream's memory
 * goes when the connection is done with it too, whichever comes last. */
void mf_http_stream_release(mf_http_stream *st);

/* ==== Deferred answers ====
 * A handler that cannot answer at once (the answer waits for work on another thread) defers the
 * request: the connection is suspended (no HTTP thread waits or spins), the watcher thread sees
 * the client hang up, and any thread answers it later, exactly once, with any status.
 *
 *   handler:  d = mf_http_defer(r, &(mf_http_deferred_params){on_close, job}); queue(job, d); return;
 *   engine:   if (mf_http_deferred_closed(d)) cancel; else mf_http_deferred_respond_json(d, 200, out);
 *             mf_http_deferred_release(d);
 *
 * A deferred request does not time out while it waits (MHD suspends the timeout with the
 * connection): its owner answers or releases it, or the client leaves. */

typedef struct mf_http_deferred mf_http_deferred;

/* Called once, from an HTTP thread and never from inside an mf_http_deferred_* call, when the
 * deferred request ends for any reason: MF_HTTP_CLOSE_DONE once an answer was sent, CLIENT_GONE
 * (the client closed, reset or half-closed the connection while waiting, heard within
 * milliseconds; or it left while the answer was being sent), TIMEOUT (it read nothing of the
 * answer for connection_timeout_s), SHUTDOWN (the grace of mf_http_server_stop ran out before an
 * answer, and the client gets 503, or while it was being sent), ABORTED (the request ended
 * without the owner's answer: libmicrohttpd refused to queue both it and the 500 standing in for
 * it). Releasing unanswered also closes with ABORTED (the client gets 500), but as for streams no
 * callback comes once mf_http_deferred_release has returned: the owner knows that one without
 * being told. The same rules as a stream's close callback: it must not block; it may answer
 * (which then fails), read mf_http_deferred_closed, and release the owner's reference. */
typedef void (*mf_http_deferred_close_fn)(mf_http_deferred *d, mf_http_close_reason why, void *user);

typedef struct mf_http_deferred_params {
    mf_http_deferred_close_fn on_close; /* may be NULL */
    void *user;
} mf_http_deferred_params;

/* Defer the answer to r (from its handler; r must not be answered otherwise after this, nor its
 * headers set: use mf_http_deferred_set_header). Returns one reference for the caller, or NULL
 * when r was answered instead (a stopping server: 503; no memory: 500) or had been answered,
 * deferred or streamed before (MF_ERR_ARG in mf_last_error; nothing sent). Headers set on r before
 * the call are kept. r stays readable until the handler returns; the connection is suspended only
 * then, and an answer given before that goes out at once. p may be NULL. */
mf_http_deferred *mf_http_defer(mf_http_request *r, const mf_http_deferred_params *p);

/* What answering did: MF_HTTP_ANSWER_OK (the answer is on its way), _CLOSED (the client left or
 * the server stopped: nobody to answer), _DUPLICATE (answered before: the first answer stands),
 * _NOMEM (nothing was stored: the request still waits for an answer, and releasing it gives the
 * client 500). */
typedef enum mf_http_answer {
    MF_HTTP_ANSWER_OK = 0,
    MF_HTTP_ANSWER_CLOSED,
    MF_HTTP_ANSWER_DUPLICATE,
    MF_HTTP_ANSWER_NOMEM,
} mf_http_answer;

/* Any thread, at most one answer; the body is copied. A HEAD request gets the headers only. A
 * status outside 100..999, or an answer libmicrohttpd refuses to send (a content type with a
 * line break), reaches the client as a 500 error naming the problem. respond_json with a NULL
 * body answers 500, as mf_http_respond_json does; respond_error makes the OpenAI error shape of
 * mf_http_respond_error. */
mf_http_answer mf_http_deferred_respond(mf_http_deferred *d, int status, const char *content_type, const void *body,
                                        size_t len);
mf_http_answer mf_http_deferred_respond_json(mf_http_deferred *d, int status, const json_t *body); /* not stolen */
mf_http_answer mf_http_deferred_respond_error(mf_http_deferred *d, int status, const char *param, const char *code,
                                              const char *fmt, ...) MF_HTTP_PRINTF(5, 6);
/* Add a header to the coming answer (before respond), any thread; up to 16 per request with those
 * set on r before deferring. MF_ERR_ARG for a bad name or value, past 16, or once answered; once
 * closed unanswered (client gone, stopped) the header is dropped with MF_OK, and the answer that
 * follows says CLOSED. */
mf_status mf_http_deferred_set_header(mf_http_deferred *d, const char *name, const char *value);
/* True once an answer can no longer reach the client (left, server stopped) or one
 * was given. Cheap; poll it between steps of long work. */
bool mf_http_deferred_closed(const mf_http_deferred *d);
/* MF_HTTP_CLOSE_NONE while waiting and while a given answer is being sent; then what the close
 * callback hears (or heard). */
mf_http_close_reason mf_http_deferred_close_reason(const mf_http_deferred *d);
/* Give up the caller's reference (NULL fine), from any thread, the close callback included; a
 * callback running on another thread is waited for, and none starts after this returns. An
 * unanswered request gets 500 (ABORTED). The memory goes when the connection is done with it
 * too, whichever comes last. */
void mf_http_deferred_release(mf_http_deferred *d);

/* ==== Helpers on untrusted text (pure; exported for the server, the tests and the fuzzer) ==== */

/* Does a Content-Type value name `mime` (case-insensitive), with optional parameters after ';'?
 * A charset parameter must be utf-8 (quoted or not). */
bool mf_http_content_type_is(const char *value, const char *mime);

/* Parse JSON text with duplicate keys refused and at most max_depth nested arrays/objects. On
 * failure returns NULL and writes a message naming the line and column into msg. */
json_t *mf_http_json_parse(const char *text, size_t len, int max_depth, char *msg, size_t msg_cap);

/* Compare a secret with a candidate in time that depends only on the secret's length. */
bool mf_http_secret_equal(const char *secret, const char *candidate, size_t candidate_len);

#endif /* MF_HTTP_H */
