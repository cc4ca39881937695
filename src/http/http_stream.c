/* http_stream.c: server-sent-event streams. A stream is a byte ring with a hard size, filled by
 * any thread (push never waits) and drained by MHD's content reader on the connection's worker.
 * A reader that finds the ring empty suspends the connection, so no worker waits or spins; a
 * push resumes it. A suspended connection sees no hang-up, so one watcher thread polls the open
 * streams' sockets for it. Three references keep a stream alive: the owner's, the request's
 * (until MHD says the request is over) and the MHD response's (until MHD frees it).
 *
 * Locks: the server's before a stream's, never the other way; callbacks run with neither. */
#include "http/http_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define MF_HTTP_STREAM_BLOCK (16u << 10) /* most bytes MHD asks the reader for at once */

struct mf_http_stream {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled when the close callback returns */
    int refs;
    uint64_t id;

    /* Guarded by the server's lock: the live list and what the watcher saw. */
    mf_http_server *srv;
    mf_http_stream *next_live, *prev_live;
    bool attached, hup_seen;
    int fd;

    /* Guarded by lock. */
    struct MHD_Connection *conn; /* NULL once the request is over */
    bool suspended;              /* the reader suspended conn; only a push or a close resumes it */
    bool ended;                  /* the owner sent its last event */
    bool kill;                   /* the reader ends the answer with an error (connection dropped) */
    mf_http_close_reason reason; /* NONE while open */
    bool owner_gone, notified;
    bool cb_running;
    pthread_t cb_thread;
    mf_http_stream_close_fn on_close;
    void *user;
    mf_http_stream *next_cb; /* chain of streams whose callback is due (watcher, shutdown) */

    /* The ring: len bytes from head, wrapping at cap. */
    char *ring;
    size_t cap, head, len;
};

const char *mf_http_close_reason_name(mf_http_close_reason why) {
    static const char *const names[] = {"open", "done", "client gone", "too slow", "timeout", "shutdown", "aborted"};
    return (unsigned)why < MF_ARRAY_LEN(names) ? names[why] : "?";
}

const char *mf_http_push_name(mf_http_push p) {
    static const char *const names[] = {"ok", "closed", "client too slow"};
    return (unsigned)p < MF_ARRAY_LEN(names) ? names[p] : "?";
}

/* ---- references and closing ---- */

static void stream_unref(mf_http_stream *st) {
    pthread_mutex_lock(&st->lock);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->lock);
    if (!last) return;
    free(st->ring);
    pthread_cond_destroy(&st->cond);
    pthread_mutex_destroy(&st->lock);
    free(st);
}

/* With st->lock held: let the connection run again (the reader then sends or ends). */
static void wake_locked(mf_http_stream *st) {
    if (st->suspended) {
        st->suspended = false;
        MHD_resume_connection(st->conn);
    }
}

/* With st->lock held: record why the stream closed (the first reason stays); kill drops the
 * connection instead of ending the answer properly. */
static void close_locked(mf_http_stream *st, mf_http_close_reason why, bool kill) {
    if (st->reason == MF_HTTP_CLOSE_NONE) st->reason = why;
    if (kill && !st->kill && st->conn) {
        st->kill = true;
        /* A worker blocked on a full socket would not call the reader again before the timeout:
         * shutting the socket down makes its write fail now. The socket is still open: MHD
         * closes it only after on_completed, which takes this lock first (conn is then NULL). */
        if (!st->suspended && st->fd >= 0) shutdown(st->fd, SHUT_RDWR);
    }
    wake_locked(st);
}

/* With st->lock held: the callback to run now, if it is due and nobody ran it yet. */
static mf_http_stream_close_fn take_callback_locked(mf_http_stream *st) {
    if (st->reason == MF_HTTP_CLOSE_NONE || st->notified || st->owner_gone || !st->on_close) return NULL;
    st->notified = true;
    st->cb_running = true;
    st->cb_thread = pthread_self();
    return st->on_close;
}

static void run_callback(mf_http_stream *st, mf_http_stream_close_fn fn) {
    if (!fn) return;
    fn(st, st->reason, st->user); /* reason is final once notified */
    pthread_mutex_lock(&st->lock);
    st->cb_running = false;
    pthread_cond_broadcast(&st->cond);
    pthread_mutex_unlock(&st->lock);
}

/* MHD is done with the request (on_completed): the stream leaves the live list, learns why if
 * nobody said yet, tells its owner, and drops the request's reference. */
void mf_http_stream_conn_done(mf_http_stream *st, enum MHD_RequestTerminationCode toe) {
    mf_http_server *s = st->srv;
    pthread_mutex_lock(&s->lock);
    if (st->attached) {
        if (st->prev_live) st->prev_live->next_live = st->next_live;
        else s->live = st->next_live;
        if (st->next_live) st->next_live->prev_live = st->prev_live;
        st->attached = false;
        s->n_live--;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_lock(&st->lock);
    pthread_mutex_unlock(&s->lock);
    st->conn = NULL;
    st->suspended = false;
    if (st->reason == MF_HTTP_CLOSE_NONE) {
        switch (toe) {
        case MHD_REQUEST_TERMINATED_COMPLETED_OK: st->reason = st->ended ? MF_HTTP_CLOSE_DONE : MF_HTTP_CLOSE_ABORTED; break;
        case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: st->reason = MF_HTTP_CLOSE_TIMEOUT; break;
        case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: st->reason = MF_HTTP_CLOSE_SHUTDOWN; break;
        default: st->reason = MF_HTTP_CLOSE_CLIENT_GONE; break;
        }
    }
    mf_http_stream_close_fn fn = take_callback_locked(st);
    pthread_mutex_unlock(&st->lock);
    run_callback(st, fn);
    stream_unref(st);
}

/* With the server's lock held: close st with why (connection dropped) and, if its callback is
 * due, chain it (with a reference) for the caller to run once the locks are gone. */
static void close_and_chain(mf_http_stream *st, mf_http_close_reason why, mf_http_stream **chain) {
    pthread_mutex_lock(&st->lock);
    close_locked(st, why, true);
    mf_http_stream_close_fn fn = take_callback_locked(st);
    if (fn) {
        st->refs++;
        st->next_cb = *chain;
        *chain = st;
    }
    pthread_mutex_unlock(&st->lock);
}

static void run_chain(mf_http_stream *chain) {
    while (chain) {
        mf_http_stream *st = chain;
        chain = st->next_cb;
        run_callback(st, st->on_close);
        stream_unref(st);
    }
}

void mf_http_streams_shutdown(mf_http_server *s) {
    mf_http_stream *chain = NULL;
    pthread_mutex_lock(&s->lock);
    for (mf_http_stream *st = s->live; st; st = st->next_live) close_and_chain(st, MF_HTTP_CLOSE_SHUTDOWN, &chain);
    pthread_mutex_unlock(&s->lock);
    run_chain(chain);
}

/* ---- the disconnect watcher ---- */

static void wake_watcher(mf_http_server *s) {
    uint64_t one = 1;
    if (write(s->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        mf_log(MF_LOG_WARN, "http: cannot wake the stream watcher: %s", strerror(errno));
}

static void *watcher_main(void *arg) {
    mf_http_server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->watcher_quit) {
        size_t n = 0;
        s->pfds[n] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
        s->pfd_ids[n++] = 0;
        for (mf_http_stream *st = s->live; st && n < s->pfd_cap; st = st->next_live) {
            if (st->hup_seen || st->fd < 0) continue;
            /* Only a hang-up is asked for: bytes of a pipelined next request are not our business. */
            s->pfds[n] = (struct pollfd){.fd = st->fd, .events = POLLRDHUP};
            s->pfd_ids[n++] = st->id;
        }
        pthread_mutex_unlock(&s->lock);
        /* The sockets may close while we poll; an event is matched by stream id below, never by fd. */
        int rc = poll(s->pfds, n, -1);
        if (rc > 0 && s->pfds[0].revents) {
            uint64_t v;
            if (read(s->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN) mf_log(MF_LOG_WARN, "http: watcher: %s", strerror(errno));
        }
        mf_http_stream *chain = NULL;
        pthread_mutex_lock(&s->lock);
        for (size_t i = 1; rc > 0 && i < n; i++) {
            if (!(s->pfds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
            for (mf_http_stream *st = s->live; st; st = st->next_live) {
                if (st->id != s->pfd_ids[i]) continue;
                st->hup_seen = true;
                close_and_chain(st, MF_HTTP_CLOSE_CLIENT_GONE, &chain);
                break;
            }
        }
        if (chain) {
            pthread_mutex_unlock(&s->lock);
            run_chain(chain);
            pthread_mutex_lock(&s->lock);
        }
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

mf_status mf_http_watcher_start(mf_http_server *s) {
    s->pfd_cap = (size_t)s->p.max_connections + 1;
    s->pfds = mf_calloc(s->pfd_cap, sizeof *s->pfds);
    s->pfd_ids = mf_calloc(s->pfd_cap, sizeof *s->pfd_ids);
    if (!s->pfds || !s->pfd_ids) goto nomem;
    s->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (s->wake_fd < 0) {
        mf_status st = mf_fail(MF_ERR_IO, "http: eventfd: %s", strerror(errno));
        mf_http_watcher_stop(s);
        return st;
    }
    s->watcher_quit = false;
    int e = pthread_create(&s->watcher, NULL, watcher_main, s);
    if (e) {
        mf_http_watcher_stop(s);
        return mf_fail(MF_ERR_INTERNAL, "http: cannot start the stream watcher thread: %s", strerror(e));
    }
    s->watcher_started = true;
    return MF_OK;
nomem:
    mf_http_watcher_stop(s);
    return MF_ERR_NOMEM;
}

void mf_http_watcher_stop(mf_http_server *s) {
    if (s->watcher_started) {
        pthread_mutex_lock(&s->lock);
        s->watcher_quit = true;
        pthread_mutex_unlock(&s->lock);
        wake_watcher(s);
        pthread_join(s->watcher, NULL);
        s->watcher_started = false;
    }
    if (s->wake_fd >= 0) close(s->wake_fd);
    s->wake_fd = -1;
    free(s->pfds);
    free(s->pfd_ids);
    s->pfds = NULL;
    s->pfd_ids = NULL;
    s->pfd_cap = 0;
}

/* ---- MHD's side: the content reader ---- */

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    mf_http_stream *st = cls;
    pthread_mutex_lock(&st->lock);
    ssize_t ret;
    if (st->kill || !st->conn) {
        ret = MHD_CONTENT_READER_END_WITH_ERROR;
    } else if (st->len) {
        size_t n = MF_MIN(max, st->len), first = MF_MIN(n, st->cap - st->head);
        memcpy(buf, st->ring + st->head, first);
        memcpy(buf + first, st->ring, n - first);
        st->head = (st->head + n) % st->cap;
        st->len -= n;
        ret = (ssize_t)n;
    } else if (st->ended) {
        ret = MHD_CONTENT_READER_END_OF_STREAM;
    } else {
        /* Nothing to send: take the connection off MHD's loop until a push or a close. */
        st->suspended = true;
        MHD_suspend_connection(st->conn);
        ret = 0;
    }
    pthread_mutex_unlock(&st->lock);
    return ret;
}

static void stream_response_freed(void *cls) {
    stream_unref(cls);
}

mf_http_stream *mf_http_respond_stream(mf_http_request *r, const mf_http_stream_params *p) {
    mf_http_server *s = r->srv;
    if (r->answered) {
        mf_fail(MF_ERR_ARG, "http: stream on a request already answered");
        return NULL;
    }
    mf_http_set_header(r, "Cache-Control", "no-cache");
    if (r->method == MF_HTTP_HEAD) {
        mf_http_respond(r, 200, "text/event-stream", NULL, 0);
        return NULL;
    }
    mf_http_stream *st = calloc(1, sizeof *st);
    size_t cap = p && p->max_bytes ? p->max_bytes : s->p.stream_max_bytes;
    if (st) st->ring = malloc(cap);
    if (!st || !st->ring) {
        free(st);
        mf_http_respond_error(r, 500, NULL, NULL, "out of memory for a %zu-byte stream queue", cap);
        return NULL;
    }
    pthread_mutex_init(&st->lock, NULL);
    pthread_cond_init(&st->cond, NULL);
    st->cap = cap;
    st->refs = 1; /* the owner's; the response and the request take theirs below */
    st->srv = s;
    st->conn = r->conn;
    st->on_close = p ? p->on_close : NULL;
    st->user = p ? p->user : NULL;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    st->fd = ci ? ci->connect_fd : -1;

    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, MF_HTTP_STREAM_BLOCK, stream_read,
                                                                  st, stream_response_freed);
    if (resp) st->refs++;
    if (!resp || MHD_add_response_header(resp, "Content-Type", "text/event-stream") != MHD_YES ||
        MHD_add_response_header(resp, "X-Accel-Buffering", "no") != MHD_YES) {
        if (resp) MHD_destroy_response(resp); /* drops the response's reference */
        stream_unref(st);                     /* and the owner's, the last: no thread saw the stream */
        mf_http_respond_error(r, 500, NULL, NULL, "out of memory for a stream answer");
        return NULL;
    }
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        MHD_destroy_response(resp);
        stream_unref(st);
        mf_http_respond_busy(r, 503, 1, "the server is shutting down");
        return NULL;
    }
    st->refs++; /* the request's, dropped by mf_http_stream_conn_done */
    st->id = ++s->next_stream_id;
    st->next_live = s->live;
    if (s->live) s->live->prev_live = st;
    s->live = st;
    st->attached = true;
    s->n_live++;
    pthread_mutex_unlock(&s->lock);
    r->stream = st; /* from here on_completed detaches it, whatever happens */
    if (mf_http_queue(r, 200, resp) != MF_OK) {
        mf_http_stream_release(st);
        return NULL;
    }
    wake_watcher(s);
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
    pthread_mutex_lock(&st->lock);
    if (st->reason != MF_HTTP_CLOSE_NONE || st->ended || !st->conn) {
        pthread_mutex_unlock(&st->lock);
        return MF_HTTP_PUSH_CLOSED;
    }
    return MF_HTTP_PUSH_OK;
}

/* Commit the event (ok) or drop the stream as too slow; unlocks. */
static mf_http_push push_close(mf_http_stream *st, bool ok, size_t tl) {
    mf_http_push ret = MF_HTTP_PUSH_OK;
    if (ok) {
        st->len = tl;
        wake_locked(st);
    } else {
        close_locked(st, MF_HTTP_CLOSE_TOO_SLOW, true);
        ret = MF_HTTP_PUSH_TOO_SLOW;
    }
    pthread_mutex_unlock(&st->lock);
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

mf_http_push mf_http_stream_push_comment(mf_http_stream *st, const char *text) {
    mf_http_push ret = push_open(st);
    if (ret) return ret;
    if (st->len) { /* events are waiting: the connection is not idle, a ping would only add bytes */
        pthread_mutex_unlock(&st->lock);
        return MF_HTTP_PUSH_OK;
    }
    size_t tl = st->len;
    bool ok = ring_put(st, &tl, ": ", 2);
    for (const char *c = text; ok && *c; c++) ok = ring_put(st, &tl, *c == '\r' || *c == '\n' ? " " : c, 1);
    ok = ok && ring_put(st, &tl, "\n\n", 2);
    return push_close(st, ok, tl);
}

void mf_http_stream_end(mf_http_stream *st) {
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    if (st->reason == MF_HTTP_CLOSE_NONE) {
        st->ended = true;
        wake_locked(st);
    }
    pthread_mutex_unlock(&st->lock);
}

void mf_http_stream_abort(mf_http_stream *st) {
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    if (st->conn) close_locked(st, MF_HTTP_CLOSE_ABORTED, true);
    pthread_mutex_unlock(&st->lock);
}

bool mf_http_stream_closed(const mf_http_stream *st) {
    mf_http_stream *m = (mf_http_stream *)st;
    pthread_mutex_lock(&m->lock);
    bool closed = m->reason != MF_HTTP_CLOSE_NONE || m->ended || !m->conn;
    pthread_mutex_unlock(&m->lock);
    return closed;
}

mf_http_close_reason mf_http_stream_close_reason(const mf_http_stream *st) {
    mf_http_stream *m = (mf_http_stream *)st;
    pthread_mutex_lock(&m->lock);
    mf_http_close_reason why = m->reason;
    pthread_mutex_unlock(&m->lock);
    return why;
}

void mf_http_stream_release(mf_http_stream *st) {
    if (!st) return;
    pthread_mutex_lock(&st->lock);
    st->owner_gone = true;
    /* A callback running on another thread finishes before the owner's data may go. */
    while (st->cb_running && !pthread_equal(st->cb_thread, pthread_self())) pthread_cond_wait(&st->cond, &st->lock);
    if (!st->ended && st->conn) close_locked(st, MF_HTTP_CLOSE_ABORTED, true);
    pthread_mutex_unlock(&st->lock);
    stream_unref(st);
}
