/* http_defer.c: deferred answers. A handler whose answer waits for work on another thread defers
 * its request: the record joins the live list (the watcher sees the client hang up, stop waits
 * for it) and, once the handler has returned, the access handler suspends the connection, so no
 * worker waits. Answering stores the answer and resumes the connection; MHD calls the access
 * handler again, which queues it (mf_http_deferred_run). The client leaving, a stop's grace
 * running out and the owner releasing unanswered resume it too, to be dropped, or answered with
 * 503 or 500 there.
 *
 * Locks: the server's before a deferred's, never the other way; callbacks run with neither. */
#include "http/http_impl.h"

#include <stdlib.h>

struct mf_http_deferred {
    mf_http_live l; /* first: the live record (lock, references, reason, callback); finished: answered */

    /* Guarded by l.lock. */
    mf_http_request *req; /* valid while l.conn is set; set_header adds to its headers */
    mf_http_deferred_close_fn on_close;
    void *user;
    /* The answer, stored by the owner until the worker queues it. */
    int status;
    char *content_type; /* NULL: none */
    char *body;
    size_t len;
};

/* ---- the live record's hooks ---- */

/* With d->l.lock held: close for why (client gone, shutdown, owner released unanswered). An
 * answer already given is on its way: whether it arrives is MHD's to find out (conn_done). */
static void close_locked(mf_http_deferred *d, mf_http_close_reason why) {
    if (d->l.finished || d->l.reason != MF_HTTP_CLOSE_NONE || !d->l.conn) return;
    d->l.reason = why;
    mf_http_live_wake_locked(&d->l);
}

static void live_close_locked(mf_http_live *l, mf_http_close_reason why) {
    close_locked((mf_http_deferred *)l, why);
}

static void live_notify(mf_http_live *l) {
    mf_http_deferred *d = (mf_http_deferred *)l;
    d->on_close(d, l->reason, d->user);
}

static void live_destroy(mf_http_live *l) {
    mf_http_deferred *d = (mf_http_deferred *)l;
    free(d->content_type);
    free(d->body);
    free(d);
}

static const mf_http_live_ops deferred_ops = {live_close_locked, live_notify, live_destroy, NULL};

/* ---- the handler's side ---- */

mf_http_deferred *mf_http_defer(mf_http_request *r, const mf_http_deferred_params *p) {
    if (r->answered || r->live) {
        mf_fail(MF_ERR_ARG, "http: defer on a request already answered");
        return NULL;
    }
    mf_http_deferred *d = calloc(1, sizeof *d);
    if (!d) {
        mf_http_respond_error(r, 500, NULL, NULL, "out of memory for a deferred answer");
        return NULL;
    }
    mf_http_live_init(&d->l, &deferred_ops, r, p && p->on_close); /* the owner's reference */
    d->req = r;
    d->on_close = p ? p->on_close : NULL;
    d->user = p ? p->user : NULL;
    if (!mf_http_live_attach(&d->l, r)) {
        mf_http_live_unref(&d->l);
        mf_http_respond_busy(r, 503, 1, "the server is shutting down");
        return NULL;
    }
    r->deferred = d;
    return d;
}

/* ---- MHD's side: the worker, after the handler and after each resume ---- */

bool mf_http_deferred_run(mf_http_request *r) {
    mf_http_deferred *d = r->deferred;
    pthread_mutex_lock(&d->l.lock);
    if (!d->l.finished && d->l.reason == MF_HTTP_CLOSE_NONE) {
        /* Nothing to send yet: off MHD's loop until an answer or a close resumes it. */
        d->l.suspended = true;
        MHD_suspend_connection(r->conn);
        pthread_mutex_unlock(&d->l.lock);
        return true;
    }
    /* From here the owner neither stores nor adds headers: r is the worker's alone. */
    bool answered = d->l.finished;
    mf_http_close_reason why = d->l.reason;
    int status = d->status;
    char *ct = d->content_type, *body = d->body;
    size_t len = d->len;
    d->content_type = d->body = NULL;
    pthread_mutex_unlock(&d->l.lock);

    bool ok = false; /* the client left: nothing to send, the connection goes */
    if (answered) {
        ok = mf_http_respond(r, status, ct, body, len) == MF_OK;
        /* A status outside 100..999, or an answer MHD refuses (a line break in the type). */
        if (!ok && !r->answered)
            ok = mf_http_respond_error(r, 500, NULL, NULL, "the answer could not be sent: %s", mf_last_error()) ==
                 MF_OK;
    } else if (why == MF_HTTP_CLOSE_SHUTDOWN) {
        mf_http_set_header(r, "Connection", "close");
        ok = mf_http_respond_busy(r, 503, 1, "the server is shutting down") == MF_OK;
    } else if (why == MF_HTTP_CLOSE_ABORTED) {
        ok = mf_http_respond_error(r, 500, NULL, NULL, "the server gave up on this request without an answer") == MF_OK;
    }
    free(ct);
    free(body);
    if (!ok && answered) {
        pthread_mutex_lock(&d->l.lock);
        d->l.reason = MF_HTTP_CLOSE_ABORTED; /* the owner's answer never left */
        pthread_mutex_unlock(&d->l.lock);
    }
    return ok;
}

/* ---- the owner's side ---- */

/* Store the answer (body: malloc'd, taken in every case) and let the connection run. */
static mf_http_answer answer(mf_http_deferred *d, int status, const char *content_type, char *body, size_t len) {
    char *ct = content_type ? strdup(content_type) : NULL;
    if (!body || (content_type && !ct)) {
        free(ct);
        free(body);
        return MF_HTTP_ANSWER_NOMEM;
    }
    pthread_mutex_lock(&d->l.lock);
    mf_http_answer ret = d->l.finished                                    ? MF_HTTP_ANSWER_DUPLICATE
                         : d->l.reason != MF_HTTP_CLOSE_NONE || !d->l.conn ? MF_HTTP_ANSWER_CLOSED
                                                                           : MF_HTTP_ANSWER_OK;
    if (ret == MF_HTTP_ANSWER_OK) {
        d->status = status;
        d->content_type = ct;
        d->body = body;
        d->len = len;
        d->l.finished = true;
        mf_http_live_wake_locked(&d->l);
    }
    pthread_mutex_unlock(&d->l.lock);
    if (ret != MF_HTTP_ANSWER_OK) {
        free(ct);
        free(body);
    }
    return ret;
}

mf_http_answer mf_http_deferred_respond(mf_http_deferred *d, int status, const char *content_type, const void *body,
                                        size_t len) {
    char *copy = malloc(len ? len : 1);
    if (copy && len) memcpy(copy, body, len);
    return answer(d, status, content_type, copy, len);
}

mf_http_answer mf_http_deferred_respond_json(mf_http_deferred *d, int status, const json_t *body) {
    char *text = body ? json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
    if (!text) return mf_http_deferred_respond_error(d, 500, NULL, NULL, "the answer could not be encoded as JSON");
    return answer(d, status, "application/json", text, strlen(text));
}

mf_http_answer mf_http_deferred_respond_error(mf_http_deferred *d, int status, const char *param, const char *code,
                                              const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *text = mf_http_error_textv(status, param, code, fmt, ap);
    va_end(ap);
    return answer(d, status, "application/json", text, text ? strlen(text) : 0);
}

mf_status mf_http_deferred_set_header(mf_http_deferred *d, const char *name, const char *value) {
    mf_status st = mf_http_header_check(name, value);
    if (st) return st;
    pthread_mutex_lock(&d->l.lock);
    if (d->l.finished) st = mf_fail(MF_ERR_ARG, "http: header '%s' set after the deferred answer", name);
    else if (d->l.reason == MF_HTTP_CLOSE_NONE && d->l.conn) st = mf_http_set_header(d->req, name, value);
    /* else closed: nobody to send it to, and the answer will say so */
    pthread_mutex_unlock(&d->l.lock);
    return st;
}

bool mf_http_deferred_closed(const mf_http_deferred *d) {
    mf_http_deferred *m = (mf_http_deferred *)d;
    pthread_mutex_lock(&m->l.lock);
    bool closed = m->l.reason != MF_HTTP_CLOSE_NONE || m->l.finished || !m->l.conn;
    pthread_mutex_unlock(&m->l.lock);
    return closed;
}

mf_http_close_reason mf_http_deferred_close_reason(const mf_http_deferred *d) {
    mf_http_deferred *m = (mf_http_deferred *)d;
    pthread_mutex_lock(&m->l.lock);
    mf_http_close_reason why = m->l.reason;
    pthread_mutex_unlock(&m->l.lock);
    return why;
}

void mf_http_deferred_release(mf_http_deferred *d) {
    if (!d) return;
    pthread_mutex_lock(&d->l.lock);
    mf_http_live_disown_locked(&d->l);
    close_locked(d, MF_HTTP_CLOSE_ABORTED); /* unanswered: the worker sends 500 */
    pthread_mutex_unlock(&d->l.lock);
    mf_http_live_unref(&d->l);
}
