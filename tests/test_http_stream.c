/* test_http_stream.c: server-sent-event streams of src/http over real sockets: events pushed from
 * another thread and read as they come, a client leaving an idle stream (the owner hears within
 * milliseconds), a client that reads and one that does not (the push says "too slow" without
 * waiting), an owner releasing first, 32 concurrent clients beside 8 open streams, and a stop with
 * one stream finishing in the grace and one cut at its end. */
#include "http_fixture.h"

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
        printf("test_http_stream: disconnect seen by the owner after %.2f ms\n", ms);
        CHECK(mf_http_stream_closed(st));
        CHECK(mf_http_stream_push_data(st, "more", 4) == MF_HTTP_PUSH_CLOSED);
        mf_http_stream_release(st);
    }
    if (c->rd.fd >= 0) close(c->rd.fd);
    free(c);
}

/* An event every millisecond. A client that reads keeps up with 4 KiB events and the default
 * 1 MiB queue (a quarter second of slack for a loaded machine); one that does not read fills the
 * kernel's buffers with 16 KiB events and then its 64 KiB queue, and the push says so at once. */
static void test_stream_slow(uint16_t port, bool reads) {
    sse_client *c = calloc(1, sizeof *c);
    CHECK(sse_open(c, port, reads ? 0 : 4096, reads ? "/stream" : "/stream?max=65536") && c->head.status == 200);
    closed_rec *rec = NULL;
    mf_http_stream *st = take_stream(&rec);
    CHECK(st != NULL);
    if (!st) goto out;
    static char ev[16384];
    memset(ev, 'e', sizeof ev);
    mf_http_push res = MF_HTTP_PUSH_OK;
    double worst = 0, t_end = mf_time_s() + 20;
    size_t pushed = 0, limit = reads ? 500 : 100000, got = 0, ev_len = reads ? 4096 : sizeof ev;
    while (res == MF_HTTP_PUSH_OK && pushed < limit && mf_time_s() < t_end) {
        double t0 = mf_time_s();
        res = mf_http_stream_push_data(st, ev, ev_len);
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
        CHECKF(got >= pushed * ev_len, "read %zu of %zu bytes", got, pushed * ev_len);
        CHECK(wait_closed(rec, 5) == 1 && rec->why == MF_HTTP_CLOSE_DONE);
    } else {
        CHECKF(res == MF_HTTP_PUSH_TOO_SLOW, "a client that never reads: %s after %zu pushes", mf_http_push_name(res),
               pushed);
        printf("test_http_stream: a client that never reads was dropped after %zu pushes of 16 KiB\n", pushed);
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

int main(void) {
    mf_log_set_level(MF_LOG_ERROR);
    timed("test_http_stream", "streams", test_streams);
    timed("test_http_stream", "concurrency", test_concurrency);
    timed("test_http_stream", "stop", test_stop);
    return test_summary("test_http_stream");
}
