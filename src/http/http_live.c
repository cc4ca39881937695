/* http_live.c: what streams and deferred answers share (http_impl.h, "Live answers"): their
 * references, the close callback run exactly once and never after the owner let go, the live
 * list that mf_http_server_stop waits on, and the disconnect watcher, one thread polling the live
 * records' sockets for a hang-up, which a suspended connection never reports to MHD (and, with SSE
 * pings, ticking each record once a second: a silent stream sends a ping).
 *
 * Locks: the server's before a record's, never the other way; callbacks run with neither. */
#include "http/http_impl.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

const char *mf_http_close_reason_name(mf_http_close_reason why) {
    static const char *const names[] = {"open", "done", "client gone", "too slow", "timeout", "shutdown", "aborted"};
    return (unsigned)why < MF_ARRAY_LEN(names) ? names[why] : "?";
}

/* ---- references ---- */

void mf_http_live_init(mf_http_live *l, const mf_http_live_ops *ops, mf_http_request *r, bool has_callback) {
    pthread_mutex_init(&l->lock, NULL);
    pthread_cond_init(&l->cond, NULL);
    l->ops = ops;
    l->refs = 1;
    l->srv = r->srv;
    l->conn = r->conn;
    l->has_callback = has_callback;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    l->fd = ci ? ci->connect_fd : -1;
}

void mf_http_live_unref(mf_http_live *l) {
    pthread_mutex_lock(&l->lock);
    bool last = --l->refs == 0;
    pthread_mutex_unlock(&l->lock);
    if (!last) return;
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->lock);
    l->ops->destroy(l);
}

static void wake_watcher(mf_http_server *s) {
    uint64_t one = 1;
    if (write(s->wake_fd, &one, sizeof one) < 0 && errno != EAGAIN)
        mf_log(MF_LOG_WARN, "http: cannot wake the disconnect watcher: %s", strerror(errno));
}

bool mf_http_live_attach(mf_http_live *l, mf_http_request *r) {
    mf_http_server *s = l->srv;
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        return false;
    }
    l->refs++; /* the request's, dropped by mf_http_live_conn_done; nobody else sees l yet */
    l->id = ++s->next_live_id;
    l->next_live = s->live;
    if (s->live) s->live->prev_live = l;
    s->live = l;
    l->attached = true;
    s->n_live++;
    pthread_mutex_unlock(&s->lock);
    r->live = l; /* from here on_completed detaches it, whatever happens */
    wake_watcher(s);
    return true;
}

void mf_http_live_wake_locked(mf_http_live *l) {
    if (l->suspended) {
        l->suspended = false;
        MHD_resume_connection(l->conn);
    }
}

/* ---- the close callback, once ---- */

/* With l->lock held: is the callback to run now (due, and nobody ran it yet)? Then it is marked
 * running on this thread. */
static bool take_callback_locked(mf_http_live *l) {
    if (l->reason == MF_HTTP_CLOSE_NONE || l->notified || l->owner_gone || !l->has_callback) return false;
    l->notified = true;
    l->cb_running = true;
    l->cb_thread = pthread_self();
    return true;
}

static void run_callback(mf_http_live *l) {
    l->ops->notify(l);
    pthread_mutex_lock(&l->lock);
    l->cb_running = false;
    pthread_cond_broadcast(&l->cond);
    pthread_mutex_unlock(&l->lock);
}

void mf_http_live_disown_locked(mf_http_live *l) {
    l->owner_gone = true;
    /* The callback may release from inside itself; on another thread it finishes first. */
    while (l->cb_running && !pthread_equal(l->cb_thread, pthread_self())) pthread_cond_wait(&l->cond, &l->lock);
}

/* MHD is done with the request (on_completed): the record leaves the live list, learns why if
 * nobody said yet, tells its owner, and drops the request's reference. */
void mf_http_live_conn_done(mf_http_live *l, enum MHD_RequestTerminationCode toe) {
    mf_http_server *s = l->srv;
    pthread_mutex_lock(&s->lock);
    if (l->attached) {
        if (l->prev_live) l->prev_live->next_live = l->next_live;
        else s->live = l->next_live;
        if (l->next_live) l->next_live->prev_live = l->prev_live;
        l->attached = false;
        s->n_live--;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_lock(&l->lock);
    pthread_mutex_unlock(&s->lock);
    l->conn = NULL;
    l->suspended = false;
    if (l->reason == MF_HTTP_CLOSE_NONE) {
        switch (toe) {
        case MHD_REQUEST_TERMINATED_COMPLETED_OK: l->reason = l->finished ? MF_HTTP_CLOSE_DONE : MF_HTTP_CLOSE_ABORTED; break;
        case MHD_REQUEST_TERMINATED_TIMEOUT_REACHED: l->reason = MF_HTTP_CLOSE_TIMEOUT; break;
        case MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN: l->reason = MF_HTTP_CLOSE_SHUTDOWN; break;
        default: l->reason = MF_HTTP_CLOSE_CLIENT_GONE; break;
        }
    }
    bool notify = take_callback_locked(l);
    pthread_mutex_unlock(&l->lock);
    if (notify) run_callback(l);
    mf_http_live_unref(l);
}

/* With the server's lock held: close l for `why` and, if its callback is due, chain it (with a
 * reference) for the caller to run once the locks are gone. */
static void close_and_chain(mf_http_live *l, mf_http_close_reason why, mf_http_live **chain) {
    pthread_mutex_lock(&l->lock);
    l->ops->close_locked(l, why);
    if (take_callback_locked(l)) {
        l->refs++;
        l->next_cb = *chain;
        *chain = l;
    }
    pthread_mutex_unlock(&l->lock);
}

static void run_chain(mf_http_live *chain) {
    while (chain) {
        mf_http_live *l = chain;
        chain = l->next_cb;
        run_callback(l);
        mf_http_live_unref(l);
    }
}

void mf_http_live_shutdown(mf_http_server *s) {
    mf_http_live *chain = NULL;
    pthread_mutex_lock(&s->lock);
    for (mf_http_live *l = s->live; l; l = l->next_live) close_and_chain(l, MF_HTTP_CLOSE_SHUTDOWN, &chain);
    pthread_mutex_unlock(&s->lock);
    run_chain(chain);
}

/* ---- the disconnect watcher ---- */

static void *watcher_main(void *arg) {
    mf_http_server *s = arg;
    pthread_mutex_lock(&s->lock);
    while (!s->watcher_quit) {
        size_t n = 0;
        s->pfds[n] = (struct pollfd){.fd = s->wake_fd, .events = POLLIN};
        s->pfd_ids[n++] = 0;
        for (mf_http_live *l = s->live; l && n < s->pfd_cap; l = l->next_live) {
            if (l->hup_seen || l->fd < 0) continue;
            /* Only a hang-up is asked for: bytes of a pipelined next request are not our business. */
            s->pfds[n] = (struct pollfd){.fd = l->fd, .events = POLLRDHUP};
            s->pfd_ids[n++] = l->id;
        }
        pthread_mutex_unlock(&s->lock);
        /* The sockets may close while we poll; an event is matched by record id below, never by fd.
         * With SSE pings, a tick a second (below). */
        int rc = poll(s->pfds, n, s->p.sse_ping_s ? 1000 : -1);
        if (rc > 0 && s->pfds[0].revents) {
            uint64_t v;
            if (read(s->wake_fd, &v, sizeof v) < 0 && errno != EAGAIN) mf_log(MF_LOG_WARN, "http: watcher: %s", strerror(errno));
        }
        mf_http_live *chain = NULL;
        pthread_mutex_lock(&s->lock);
        for (size_t i = 1; rc > 0 && i < n; i++) {
            if (!(s->pfds[i].revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))) continue;
            for (mf_http_live *l = s->live; l; l = l->next_live) {
                if (l->id != s->pfd_ids[i]) continue;
                l->hup_seen = true;
                close_and_chain(l, MF_HTTP_CLOSE_CLIENT_GONE, &chain);
                break;
            }
        }
        if (s->p.sse_ping_s) {
            const double now = mf_time_s();
            for (mf_http_live *l = s->live; l; l = l->next_live) {
                if (!l->ops->tick_locked) continue;
                pthread_mutex_lock(&l->lock);
                l->ops->tick_locked(l, now);
                pthread_mutex_unlock(&l->lock);
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
        return mf_fail(MF_ERR_INTERNAL, "http: cannot start the disconnect watcher thread: %s", strerror(e));
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
