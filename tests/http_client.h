/* http_client.h: a tiny blocking HTTP/1.1 client over POSIX sockets for the tests of src/http:
 * connect to loopback, send raw bytes, read an answer (by length, chunks or close) or a stream of
 * chunks as they come. Header-only, one static copy per test program. */
#ifndef MF_HTTP_CLIENT_H
#define MF_HTTP_CLIENT_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MF_MIN_C(a, b) ((a) < (b) ? (a) : (b))

static int dial_at(int family, uint16_t port, int rcvbuf) {
    int fd = socket(family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (rcvbuf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons(port);
        a->sin6_addr = in6addr_loopback;
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons(port);
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        len = sizeof *a;
    }
    if (connect(fd, (struct sockaddr *)&ss, len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}
static int dial(uint16_t port) { return dial_at(AF_INET, port, 0); }

static bool send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        c += w;
        n -= (size_t)w;
    }
    return true;
}

typedef struct resp {
    int status;
    char head[16384];
    char body[1 << 16];
    size_t body_len;
} resp;

/* Value of a response header (a copy in a static buffer), NULL if absent. */
static const char *resp_header(const resp *r, const char *name) {
    static _Thread_local char v[512]; /* client threads of one test read answers at once */
    size_t n = strlen(name);
    for (const char *l = strstr(r->head, "\r\n"); l && l[2]; l = strstr(l + 2, "\r\n")) {
        if (strncasecmp(l + 2, name, n) == 0 && l[2 + n] == ':') {
            const char *s = l + 3 + n, *e = strstr(s, "\r\n");
            while (*s == ' ') s++;
            snprintf(v, sizeof v, "%.*s", (int)(e - s), s);
            return v;
        }
    }
    return NULL;
}

/* Incremental reader of an HTTP/1.1 answer: headers, then a body by length, chunks or close. */
typedef struct reader {
    int fd;
    char buf[1 << 16];
    size_t len;
    bool eof;
} reader;

static bool fill(reader *rd) {
    if (rd->len == sizeof rd->buf) return false;
    ssize_t n = recv(rd->fd, rd->buf + rd->len, sizeof rd->buf - rd->len, 0);
    if (n <= 0) {
        rd->eof = true;
        return false;
    }
    rd->len += (size_t)n;
    return true;
}

static void consume(reader *rd, size_t n) {
    memmove(rd->buf, rd->buf + n, rd->len - n);
    rd->len -= n;
}

/* A line ending in CRLF (copied without it into out); false at EOF. */
static bool read_line(reader *rd, char *out, size_t cap) {
    for (;;) {
        char *e = memmem(rd->buf, rd->len, "\r\n", 2);
        if (e) {
            size_t n = (size_t)(e - rd->buf);
            snprintf(out, cap, "%.*s", (int)n, rd->buf);
            consume(rd, n + 2);
            return true;
        }
        if (!fill(rd)) return false;
    }
}

static bool read_head(reader *rd, resp *r) {
    for (;;) {
        char *e = memmem(rd->buf, rd->len, "\r\n\r\n", 4);
        if (e) {
            size_t n = (size_t)(e - rd->buf) + 4;
            snprintf(r->head, sizeof r->head, "%.*s", (int)n, rd->buf);
            consume(rd, n);
            return sscanf(r->head, "HTTP/1.%*d %d", &r->status) == 1;
        }
        if (!fill(rd)) return false;
    }
}

/* The next chunk of a chunked body appended to out (cap bytes); 0 at the last chunk, -1 on error. */
static long read_chunk(reader *rd, char *out, size_t cap) {
    char line[64];
    if (!read_line(rd, line, sizeof line)) return -1;
    long n = strtol(line, NULL, 16);
    if (n < 0 || (size_t)n >= cap) return -1;
    while (rd->len < (size_t)n + 2)
        if (!fill(rd)) return -1;
    memcpy(out, rd->buf, (size_t)n);
    out[n] = '\0';
    consume(rd, (size_t)n + 2);
    return n;
}

static bool read_response(reader *rd, resp *r, bool head_only) {
    r->body_len = 0;
    r->body[0] = '\0';
    if (!read_head(rd, r)) return false;
    if (head_only || r->status == 204 || r->status == 304) return true;
    const char *te = resp_header(r, "Transfer-Encoding");
    if (te && strcmp(te, "chunked") == 0) {
        long n;
        while ((n = read_chunk(rd, r->body + r->body_len, sizeof r->body - r->body_len)) > 0) r->body_len += (size_t)n;
        return n == 0;
    }
    const char *cl = resp_header(r, "Content-Length");
    size_t want = cl ? strtoul(cl, NULL, 10) : sizeof r->body - 1;
    while (rd->len < want && fill(rd)) {}
    if (cl && rd->len < want) return false;
    r->body_len = MF_MIN_C(rd->len, want);
    memcpy(r->body, rd->buf, r->body_len);
    r->body[r->body_len] = '\0';
    consume(rd, r->body_len);
    return true;
}

/* One request on a fresh connection; the answer in *r. */
static bool http_raw(uint16_t port, const char *req, size_t len, resp *r) {
    static _Thread_local reader rd;
    memset(r, 0, sizeof *r);
    r->status = -1;
    rd.fd = dial(port);
    rd.len = 0;
    rd.eof = false;
    if (rd.fd < 0) return false;
    bool ok = send_all(rd.fd, req, len) && read_response(&rd, r, strncmp(req, "HEAD ", 5) == 0);
    close(rd.fd);
    return ok;
}

static bool http_req(uint16_t port, const char *method, const char *target, const char *headers, const char *body,
                     resp *r) {
    char req[1 << 15];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s", method, target,
                     headers ? headers : "");
    if (body) n += snprintf(req + n, sizeof req - (size_t)n, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    else n += snprintf(req + n, sizeof req - (size_t)n, "\r\n");
    return http_raw(port, req, (size_t)n, r);
}

#endif /* MF_HTTP_CLIENT_H */
