/* http_stream.c: server-sent-event streams. A stream is a byte ring with a hard size, filled by
 * any thread (push never waits) and drained by MHD's content reader on the connection's worker.
 * A reader that finds the ring empty suspends the connection, so no worker waits or spins; a
 * push resumes it. Its references, close callback and the watcher that sees a suspended
 * client hang up are the live record's (http_live.c); the MHD response holds a third reference
 * (until MHD frees it).
 *
 * Locks: the server's before a stream's, never the other way; callbacks run with neither. */
#include "http/http_impl.h"

#include <stdlib.h>

#define MF_HTTP_STREAM_BLOCK (16u << 10) /* most bytes MHD asks the reader for at once */

struct mf_http_stream {
    mf_http_live l; /* first: the live record (lock, references, reason, callback; finished = ended) */

    /* Guarded by l.lock. */
    bool kill; /* the reader ends the answer with an error (connection dropped) */
    mf_http_stream_close_fn on_close;
    void *user;

    /* The ring: len bytes from head, wrapping at cap. */
    char *ring;
    size_t cap, head, len;
    double t_push; /* when the last event (or the answer's head) went into the ring */
};

const char *mf_http_push_name(mf_http_push p) {
    static const char *const names[] = {"ok", "closed", "client too slow"};
    return (unsigned)p < MF_ARRAY_LEN(names) ? names[p] : "?";
}

/* ---- closing ---- */

/* With st->l.lock held: record why the stream closed (the first reason stays); kill drops the
 * connection instead of ending the answer properly. */
static void close_locked(mf_http_stream *st, mf_http_close_reason why, bool kill) {
    if (st->l.reason == MF_HTTP_CLOSE_NONE) st->l.reason = why;
    if (kill && !st->kill && st->l.conn) {
        st->kill = true;
        /* A worker blocked on a full socket would not call the reader again before the timeout:
         * shutting the socket down makes its write fail now. The socket is still open: MHD
         * closes it only after on_completed, which takes this lock first (conn is then NULL). */
        if (!st->l.suspended && st->l.fd >= 0) shutdown(st->l.fd, SHUT_RDWR);
    }
    mf_http_live_wake_locked(&st->l);
}

static void live_close_locked(mf_http_live *l, mf_http_close_reason why) {
    close_locked((mf_http_stream *)l, why, true);
}

static void live_notify(mf_http_live *l) {
    mf_http_stream *st = (mf_http_stream *)l;
    st->on_close(st, l->reason, st->user);
}

static void live_destroy(mf_http_live *l) {
    mf_http_stream *st = (mf_http_stream *)l;
    free(st->ring);
    free(st);
}

static void live_tick_locked(mf_http_live *l, double now);
static const mf_http_live_ops stream_ops = {live_close_locked, live_notify, live_destroy, live_tick_locked};

/* ---- MHD's side: the content reader ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    mf_http_stream *st = cls;
    pthread_mutex_lock(&st->l.lock);
    ssize_t ret;
    if (st->kill || !st->l.conn) {
        ret = MHD_CONTENT_READER_END_WITH_ERROR;
    } else if (st->len) {
        size_t n = MF_MIN(max, st->len), first = MF_MIN(n, st->cap - st->head);
        memcpy(buf, st->ring + st->head, first);
        memcpy(buf + first, st->ring, n - first);
        st->head = (st->head + n) % st->cap;
        st->len -= n;
        ret = (ssize_t)n;
    } else if (st->l.finished) {
        ret = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        /* Nothing to send: take the connection off MHD's loop until a push or a close. */
        st->l.suspended = true;
        MHD_suspend_connection(st->l.conn);
        ret = 0;
    }
    pthread_mutex_unlock(&st->l.lock);
    return ret;
}

static void stream_response_freed(void *cls) {
    mf_http_live_unref(cls);
}

mf_http_stream *mf_http_respond_stream(mf_http_request *r, const mf_http_stream_params *p) {
    if (r->answered || r->live) {
        mf_fail(MF_ERR_ARG, "http: stream on a request already answered");
        return NULL;
    }
    mf_http_set_header(r, "Cache-Control", "no-cache");
    if (r->method == MF_HTTP_HEAD) {
        mf_http_respond(r, 200, "text/event-stream", NULL, 0);
        return NULL;
    }
    mf_http_stream *st = calloc(1, sizeof *st);
    size_t cap = p && p->max_bytes ? p->max_bytes : r->srv->p.stream_max_bytes;
    if (st) st->ring = malloc(cap);
    if (!st || !st->ring) {
        free(st);
        mf_http_respond_error(r, 500, NULL, NULL, "out of memory for a %zu-byte stream queue", cap);
        return NULL;
    }
    /* One reference, the owner's; the response and the request take theirs below. */
    mf_http_live_init(&st->l, &stream_ops, r, p && p->on_close);
    st->cap = cap;
    st->t_push = mf_time_s();
    st->on_close = p ? p->on_close : NULL;
    st->user = p ? p->user : NULL;

    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, MF_HTTP_STREAM_BLOCK, stream_read,
                                                                  st, stream_response_freed);
    if (resp) st->l.refs++;
    if (!resp || MHD_add_response_header(resp, "Content-Type", "text/event-stream") != MHD_YES ||
        MHD_add_response_header(resp, "X-Accel-Buffering", "no") != MHD_YES) {
        if (resp) MHD_destroy_response(resp); /* drops the response's reference */
        mf_http_live_unref(&st->l);           /* and the owner's, the last: no thread saw the stream */
        mf_http_respond_error(r, 500, NULL, NULL, "out of memory for a stream answer");
        return NULL;
    }
    if (!mf_http_live_attach(&st->l, r)) {
        MHD_destroy_response(resp);
        mf_http_live_unref(&st->l);
        mf_http_respond_busy(r, 503, 1, "the server is shutting down");
        return NULL;
    }
    if (mf_http_queue(r, 200, resp) != MF_OK) {
        mf_http_stream_release(st);
        return NULL;
    }
    return st;
}

/* ---- the owner's side ---- */

/* Tentative writes into the ring: *tl counts the bytes of the event so far, after the st->len
 * committed ones; nothing is visible to the reader until the caller sets st->len = *tl. */
static bool ring_put(mf_http_stream *st, size_t *tl, const char *p, size_t n) {
    if (n > st->cap - *tl) return false;
    size_t at = (st->head + *tl) % st->cap, first = MF_MIN(n, st->cap - at);
    memcpy(st->ring + at, p, first);
    memcpy(st->ring, p + first, n - first);
    *tl += n;
    return true;
}

static mf_http_push push_open(mf_http_stream *st) {
    pthread_mutex_lock(&st->l.lock);
    if (st->l.reason != MF_HTTP_CLOSE_NONE || st->l.finished || !st->l.conn) {
        pthread_mutex_unlock(&st->l.lock);
        return MF_HTTP_PUSH_CLOSED;
    }
    return MF_HTTP_PUSH_OK;
}

/* Commit the event (ok) or drop the stream as too slow; unlocks. */
static mf_http_push push_close(mf_http_stream *st, bool ok, size_t tl) {
    mf_http_push ret = MF_HTTP_PUSH_OK;
    if (ok) {
        st->len = tl;
        st->t_push = mf_time_s();
        mf_http_live_wake_locked(&st->l);
    } else {
        close_locked(st, MF_HTTP_CLOSE_TOO_SLOW, true);
        ret = MF_HTTP_PUSH_TOO_SLOW;
    }
    pthread_mutex_unlock(&st->l.lock);
    return ret;
}

mf_http_push mf_http_stream_push_data(mf_http_stream *st, const char *data, size_t len) {
    mf_http_push ret = push_open(st);
    if (ret) return ret;
    size_t tl = st->len;
    bool ok = ring_put(st, &tl, "data: ", 6);
    /* Each CR, LF or CRLF inside starts a new data line; the client joins them with LF. */
    for (size_t i = 0, run = 0; ok && i <= len; i++) {
        if (i < len && data[i] != '\r' && data[i] != '\n') continue;
        ok = ring_put(st, &tl, data + run, i - run);
        if (ok && i < len) {
            if (data[i] == '\r' && i + 1 < len && data[i + 1] == '\n') i++;
            ok = ring_put(st, &tl, "\ndata: ", 7);
        }
        run = i + 1;
    }
    ok = ok && ring_put(st, &tl, "\n\n", 2);
    return push_close(st, ok, tl);
}

typedef struct dump_ctx {
    mf_http_stream *st;
    size_t tl;
} dump_ctx;

static int dump_to_ring(const char *buf, size_t n, void *data) {
    dump_ctx *d = data;
    return ring_put(d->st, &d->tl, buf, n) ? 0 : -1;
}

mf_http_push mf_http_stream_push_json(mf_http_stream *st, const json_t *value) {
    mf_http_push ret = push_open(st);
    if (ret) return ret;
    /* Compact JSON has no raw line break (strings escape them), so it is one data line. */
    dump_ctx d = {st, st->len};
    bool ok = ring_put(st, &d.tl, "data: ", 6) &&
              json_dump_callback(value, dump_to_ring, &d, JSON_COMPACT | JSON_ENCODE_ANY) == 0 &&
              ring_put(st, &d.tl, "\n\n", 2);
    return push_close(st, ok, d.tl);
}

/* With st->l.lock held and the stream open: the comment's bytes into the ring; false if they do
 * not fit. */
static bool put_comment_locked(mf_http_stream *st, const char *text, size_t *tl) {
    bool ok = ring_put(st, tl, ": ", 2);
    for (const char *c = text; ok && *c; c++) ok = ring_put(st, tl, *c == '\r' || *c == '\n' ? " " : c, 1);
    return ok && ring_put(st, tl, "\n\n", 2);
}

mf_http_push mf_http_stream_push_comment(mf_http_stream *st, const char *text) {
    mf_http_push ret = push_open(st);
    if (ret) return ret;
    if (st->len) { /* events are waiting: the connection is not idle, a ping would only add bytes */
        pthread_mutex_unlock(&st->l.lock);
        return MF_HTTP_PUSH_OK;
    }
    size_t tl = st->len;
    const bool ok = put_comment_locked(st, text, &tl);
    return push_close(st, ok, tl);
}

/* The watcher's tick: a ping once the stream has sent nothing for sse_ping_s seconds (bytes still
 * waiting in the ring count as sending: the client is reading them). */
static void live_tick_locked(mf_http_live *l, double now) {
    mf_http_stream *st = (mf_http_stream *)l;
    const unsigned every = l->srv->p.sse_ping_s;
    if (!every || st->len || now - st->t_push < (double)every) return;
    if (l->reason != MF_HTTP_CLOSE_NONE || l->finished || !l->conn) return;
    size_t tl = 0;
    if (!put_comment_locked(st, "ping", &tl)) return;
    st->len = tl;
    st->t_push = now;
    mf_http_live_wake_locked(l);
}

void mf_http_stream_end(mf_http_stream *st) {
    if (!st) return;
    pthread_mutex_lock(&st->l.lock);
    if (st->l.reason == MF_HTTP_CLOSE_NONE) {
        st->l.finished = true;
        mf_http_live_wake_locked(&st->l);
    }
    pthread_mutex_unlock(&st->l.lock);
}

void mf_http_stream_abort(mf_http_stream *st) {
    if (!st) return;
    pthread_mutex_lock(&st->l.lock);
    if (st->l.conn) close_locked(st, MF_HTTP_CLOSE_ABORTED, true);
    pthread_mutex_unlock(&st->l.lock);
}

bool mf_http_stream_closed(const mf_http_stream *st) {
    mf_http_stream *m = (mf_http_stream *)st;
    pthread_mutex_lock(&m->l.lock);
    bool closed = m->l.reason != MF_HTTP_CLOSE_NONE || m->l.finished || !m->l.conn;
    pthread_mutex_unlock(&m->l.lock);
    return closed;
}

mf_http_close_reason mf_http_stream_close_reason(const mf_http_stream *st) {
    mf_http_stream *m = (mf_http_stream *)st;
    pthread_mutex_lock(&m->l.lock);
    mf_http_close_reason why = m->l.reason;
    pthread_mutex_unlock(&m->l.lock);
    return why;
}

void mf_http_stream_release(mf_http_stream *st) {
    if (!st) return;
    pthread_mutex_lock(&st->l.lock);
    mf_http_live_disown_locked(&st->l);
    if (!st->l.finished && st->l.conn) close_locked(st, MF_HTTP_CLOSE_ABORTED, true);
    pthread_mutex_unlock(&st->l.lock);
    mf_http_live_unref(&st->l);
}
