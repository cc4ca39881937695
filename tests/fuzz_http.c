/* fuzz_http.c: libFuzzer target for the HTTP layer. Each input goes two ways: through the pure
 * parsers (request target, Content-Type, JSON with the depth limit), and as raw bytes of one
 * connection to a server running on a loopback port with routes of every kind (JSON, prefix,
 * stream, deferred and answered by another thread, a key, CORS), whose answer is read to the end
 * (the half-close after the input makes most deferred requests end as a client gone, racing the
 * answer); every 64 inputs the server must still
 * answer a plain request. Built with -DMF_FUZZ_CORPUS_MAIN instead, the file writes seed requests
 * into the directory named by its argument. */
#include "http/http_impl.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

static const char *const seeds[] = {
    "GET /health HTTP/1.1\r\nHost: a\r\n\r\n",
    "GET /v1/models?i=1&b=x%20y+z HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n",
    "HEAD /v1/models HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n",
    "GET /v1/models/org%2Fname HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n",
    "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n"
    "Content-Type: application/json; charset=utf-8\r\nContent-Length: 44\r\n\r\n"
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\"}]}",
    "POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n"
    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"a\":\r\n2\r\n1}\r\n0\r\n\r\n",
    "POST /stream HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\nContent-Length: 0\r\n\r\n",
    "POST /defer HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\n"
    "Content-Length: 7\r\n\r\n{\"a\":1}POST /defer HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n"
    "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n[]",
    "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: a\r\nOrigin: http://x\r\n"
    "Access-Control-Request-Method: POST\r\n\r\n",
    "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n",
    "DELETE /v1/models HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n",
    "GET /health HTTP/1.1\r\nHost: a\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer k\r\n\r\n",
    "GET /a%00b HTTP/1.0\r\n\r\n",
    "[[[[{\"a\":[1,2,{\"b\":null}]}]]]]",
};

#ifndef MF_FUZZ_CORPUS_MAIN

static mf_http_server *srv;
static uint16_t port;

static void h_json(mf_http_request *r, void *u) {
    (void)u;
    json_t *v = mf_http_request_json(r);
    if (!v) return;
    mf_http_respond_json(r, 200, v);
    json_decref(v);
}

static void h_echo(mf_http_request *r, void *u) {
    (void)u;
    json_t *j = json_pack("{s:s, s:s, s:s?, s:s?}", "path", mf_http_request_path(r), "rest",
                          mf_http_request_path_rest(r), "i", mf_http_request_query(r, "i"), "ct",
                          mf_http_request_header(r, "content-type"));
    if (j) mf_http_respond_json(r, 200, j);
    else mf_http_respond_error(r, 400, NULL, NULL, "not UTF-8");
    json_decref(j);
}

/* A stream whose events are pushed and ended before the handler returns: the reader, the ring
 * and the close path all run. */
static void h_stream(mf_http_request *r, void *u) {
    (void)u;
    mf_http_stream *st = mf_http_respond_stream(r, NULL);
    if (!st) return;
    mf_http_stream_push_data(st, "a\nb", 3);
    mf_http_stream_push_comment(st, "ping");
    mf_http_stream_end(st);
    mf_http_stream_release(st);
}

static void h_health(mf_http_request *r, void *u) {
    (void)u;
    mf_http_respond_text(r, 200, "ok");
}

/* Deferred requests go to one answering thread with their JSON body, through a bounded queue
 * (full: answered in the handler, before the connection is ever suspended). */
static struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    mf_http_deferred *d[16];
    json_t *v[16];
    size_t head, n;
} defq = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, {0}, 0, 0};

static void answer_deferred(mf_http_deferred *d, json_t *v) {
    if (!mf_http_deferred_closed(d)) mf_http_deferred_respond_json(d, 200, v);
    json_decref(v);
    mf_http_deferred_release(d);
}

static void *answerer_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&defq.m);
    for (;;) {
        while (!defq.n) pthread_cond_wait(&defq.c, &defq.m);
        mf_http_deferred *d = defq.d[defq.head];
        json_t *v = defq.v[defq.head];
        defq.head = (defq.head + 1) % MF_ARRAY_LEN(defq.d);
        defq.n--;
        pthread_mutex_unlock(&defq.m);
        answer_deferred(d, v);
        pthread_mutex_lock(&defq.m);
    }
    return NULL;
}

static void h_defer(mf_http_request *r, void *u) {
    (void)u;
    json_t *v = mf_http_request_json(r);
    if (!v) return;
    mf_http_deferred *d = mf_http_defer(r, NULL);
    if (!d) {
        json_decref(v);
        return;
    }
    pthread_mutex_lock(&defq.m);
    bool queued = defq.n < MF_ARRAY_LEN(defq.d);
    if (queued) {
        size_t at = (defq.head + defq.n++) % MF_ARRAY_LEN(defq.d);
        defq.d[at] = d;
        defq.v[at] = v;
        pthread_cond_signal(&defq.c);
    }
    pthread_mutex_unlock(&defq.m);
    if (!queued) answer_deferred(d, v);
}

/* Send the bytes, half-close, read the answer until the server closes or nothing came for
 * wait_ms (MHD keeps a half-closed connection with an unfinished request until its timeout, so
 * fuzz inputs get a short wait). Returns the bytes read; *status gets the first status, or 0. */
static char answer[4096];

static size_t exchange(const uint8_t *data, size_t size, int wait_ms, int *status) {
    *status = 0;
    answer[0] = '\0';
    /* The timeouts are set after connecting: SO_SNDTIMEO bounds connect() too, and a SYN that
     * found the listen queue full is retried by the kernel only after a second, so a short
     * timeout made a busy moment look like a refused connection. Ephemeral ports held in
     * TIME_WAIT by thousands of runs a second are waited for as well; a server that stops
     * accepting still shows as a hang (libFuzzer's -timeout). */
    int fd = -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    for (int tries = 0;; tries++) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        MF_ASSERT(fd >= 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) break;
        int e = errno;
        close(fd);
        if ((e != EADDRNOTAVAIL && e != EAGAIN && e != EINTR) || tries >= 2000) {
            fprintf(stderr, "fuzz_http: connect to port %u: %s\n", (unsigned)port, strerror(e));
            MF_ASSERT(!"connect");
        }
        usleep(5000);
    }
    struct timeval tv = {wait_ms / 1000, (wait_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    for (size_t off = 0; off < size;) {
        ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);
        if (w <= 0) break; /* the server may close early (an answer given before the body) */
        off += (size_t)w;
    }
    shutdown(fd, SHUT_WR);
    char buf[4096];
    size_t total = 0;
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf - 1, 0)) > 0) {
        if (!total) {
            buf[n] = '\0';
            memcpy(answer, buf, (size_t)n + 1);
            sscanf(buf, "HTTP/1.%*d %d", status);
        }
        total += (size_t)n;
    }
    close(fd);
    return total;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    mf_log_set_level(MF_LOG_ERROR);
    mf_http_params p = mf_http_default_params();
    static const char *const exempt[] = {"/health", NULL};
    p.port = 0;
    p.n_threads = 2;
    p.connection_timeout_s = 2;
    p.connection_memory = 16u << 10;
    p.max_body_bytes = 64u << 10;
    p.stream_max_bytes = 4096;
    p.api_key = "k";
    p.auth_exempt_paths = exempt;
    p.cors_origin = "*";
    MF_ASSERT(mf_http_server_create(&p, &srv) == MF_OK);
    MF_ASSERT(mf_http_route(srv, MF_HTTP_GET, "/health", h_health, NULL) == MF_OK);
    MF_ASSERT(mf_http_route(srv, MF_HTTP_GET, "/v1/models", h_echo, NULL) == MF_OK);
    MF_ASSERT(mf_http_route_prefix(srv, MF_HTTP_GET | MF_HTTP_DELETE, "/v1/models/", h_echo, NULL) == MF_OK);
    MF_ASSERT(mf_http_route(srv, MF_HTTP_POST | MF_HTTP_PUT, "/v1/chat/completions", h_json, NULL) == MF_OK);
    MF_ASSERT(mf_http_route(srv, MF_HTTP_POST, "/stream", h_stream, NULL) == MF_OK);
    MF_ASSERT(mf_http_route(srv, MF_HTTP_POST, "/defer", h_defer, NULL) == MF_OK);
    static pthread_t answerer;
    MF_ASSERT(pthread_create(&answerer, NULL, answerer_main, NULL) == 0);
    MF_ASSERT(mf_http_server_start(srv) == MF_OK);
    port = mf_http_server_port(srv);
    for (size_t i = 0; i < MF_ARRAY_LEN(seeds); i++) {
        int status;
        exchange((const uint8_t *)seeds[i], strlen(seeds[i]), 2000, &status);
        MF_ASSERT(status == 0 || status < 500);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static unsigned long runs;
    mf_http_target t;
    if (mf_http_target_parse((const char *)data, size, &t) == MF_OK) {
        MF_ASSERT(t.path[0] == '/' && t.n_query <= MF_HTTP_MAX_QUERY);
        for (size_t i = 0; i < t.n_query; i++) MF_ASSERT(t.keys[i] && t.vals[i]);
        mf_http_target_free(&t);
    }
    char *text = malloc(size + 1);
    MF_ASSERT(text);
    memcpy(text, data, size);
    text[size] = '\0';
    (void)mf_http_content_type_is(text, "application/json");
    char clean[256];
    MF_ASSERT(mf_http_utf8_sanitize(clean, sizeof clean, text) < sizeof clean);
    free(text);
    char msg[256];
    json_t *v = mf_http_json_parse((const char *)data, size, 64, msg, sizeof msg);
    MF_ASSERT(v || msg[0]);
    json_decref(v);

    int status;
    exchange(data, size, 30, &status);
    /* No input makes the layer answer with its own server error (MHD's own pages are not JSON). */
    MF_ASSERT(!(status >= 500 && strstr(answer, "\"server_error\"")));
    if (++runs % 64 == 0) {
        static const char ping[] = "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
        exchange((const uint8_t *)ping, sizeof ping - 1, 2000, &status);
        MF_ASSERT(status == 200);
    }
    return 0;
}

#else /* MF_FUZZ_CORPUS_MAIN: write the seeds */

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s SEED_DIR\n", argv[0]);
        return 2;
    }
    mkdir(argv[1], 0755);
    for (size_t i = 0; i < MF_ARRAY_LEN(seeds); i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%02zu", argv[1], i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(seeds[i], 1, strlen(seeds[i]), f) != strlen(seeds[i]) || fclose(f) != 0) {
            fprintf(stderr, "%s: cannot write %s: %s\n", argv[0], path, strerror(errno));
            return 1;
        }
    }
    printf("%zu seeds in %s\n", MF_ARRAY_LEN(seeds), argv[1]);
    return 0;
}

#endif
