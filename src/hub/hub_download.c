/* hub_download.c: one blob from a server to its final name, resumable at any byte.
 *
 * The file is cut into chunks (size / (4 x connections), at least 1 MiB; one chunk for one
 * connection) and up to `connections` range requests fetch them at once over libcurl's multi
 * interface, on the calling thread. Bytes go with pwrite into FINAL.minfer-part, preallocated to
 * the whole size (a full disk fails at once, before anything is fetched); FINAL.minfer-state says
 * how many bytes of each chunk are on disk, and is replaced ten times a second (durably at the end
 * of a run), so a run that is killed resumes from its last tenth of a second. A server that answers a
 * range request with 200 gets one transfer of the whole file from byte 0; a truncated answer is
 * resumed from its last byte. The digest is computed as the prefix on disk grows (the front transfer's
 * bytes as they arrive, the others' read back once they join it), checked after the last byte, and
 * only then is the file fsynced and renamed to its final name. A file lock around all of it makes a second
 * process wait and then take the finished file. */
#include "hub/hub_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define MAX_CONN 16
#define MAX_CHUNKS 4096
#define MIN_CHUNK ((uint64_t)1 << 20)
#define MAX_FAILS 5 /* attempts on one chunk without a byte of progress */

typedef struct dl dl;

typedef struct xfer {
    dl *d;
    CURL *e;
    struct curl_slist *list;
    hub_headers hd;
    char errbuf[CURL_ERROR_SIZE];
    uint32_t chunk;
    uint64_t start, pos, end; /* asked for [start, end); pos: the next byte to write */
    bool used_direct;         /* asked at the redirect's target, not the original URL */
    bool checked;             /* the answer's status was looked at (first body byte) */
    bool whole;               /* a 200 answer: the whole file from byte 0 */
    bool error_answer;        /* a 3xx/4xx/5xx answer; its body is dropped */
    bool dropped;             /* cancelled because another transfer took the whole file */
} xfer;

struct dl {
    mf_hub *h;
    const hub_blob *b;
    int fd;
    char *partial, *state;
    uint64_t size, chunk_size;
    uint32_t n_chunks;
    uint64_t *done;      /* bytes of each chunk on disk, from its start */
    uint8_t *busy;       /* a transfer works on the chunk */
    int *fails;          /* failed attempts without progress */
    double *not_before;  /* earliest time of the next attempt */
    bool ranges_ok;      /* a 206 was seen: several transfers may run */
    bool whole_mode;     /* a transfer of the whole file runs */
    char *direct_url;    /* where the first answer came from, after redirects */
    CURLM *m;
    xfer *x[MAX_CONN];
    int n_x, max_conn;
    mf_status err;       /* the first fatal failure (message recorded) */
    uint64_t fetched;
    uint64_t best_done;  /* the most bytes ever on disk in this run: progress is going past it */
    hub_digest dg;       /* of bytes [0, hashed): the prefix on disk, hashed as it grows */
    uint64_t hashed;
    uint8_t *buf;        /* for reading back what other transfers wrote */
    double t0, t_progress, t_checkpoint;
};

static uint64_t chunk_start(const dl *d, uint32_t c) { return (uint64_t)c * d->chunk_size; }
static uint64_t chunk_len(const dl *d, uint32_t c) {
    const uint64_t s = chunk_start(d, c);
    return MF_MIN(d->chunk_size, d->size - s);
}
static uint64_t bytes_done(const dl *d) {
    uint64_t t = 0;
    for (uint32_t c = 0; c < d->n_chunks; c++) t += d->done[c];
    return t;
}

char *hub_partial_path(const char *final_path) { return hub_fmt("%s.minfer-part", final_path); }

/* ---- the state file ---- */

/* Write the state file. Often (durable false): a new file renamed over the old one, no fsync, so a
 * killed process leaves a state that matches the data in the page cache; after a power loss the two
 * may disagree, which the digest check at the end catches. At the end of a run (durable): the data
 * fdatasynced first, then the state through an atomic, fsynced replace. */
static mf_status save_state(dl *d, bool durable) {
    if (durable && d->fd >= 0 && fdatasync(d->fd) != 0 && errno != EINVAL)
        return mf_fail(MF_ERR_IO, "writing '%s': %s", d->partial, strerror(errno));
    size_t cap = 160 + 21 * (size_t)d->n_chunks, n;
    char *s = mf_malloc(cap);
    if (!s) return MF_ERR_NOMEM;
    n = (size_t)snprintf(s, cap, "minfer-partial 1\nsize %llu\ndigest %s\nchunk %llu\ndone", (unsigned long long)d->size,
                         d->b->digest, (unsigned long long)d->chunk_size);
    for (uint32_t c = 0; c < d->n_chunks; c++) n += (size_t)snprintf(s + n, cap - n, " %llu", (unsigned long long)d->done[c]);
    n += (size_t)snprintf(s + n, cap - n, "\n");
    mf_status st = MF_OK;
    if (durable) {
        st = hub_write_atomic(d->state, s, n);
    } else {
        char *tmp = hub_fmt("%s.tmp", d->state);
        const int fd = tmp ? open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644) : -1;
        const bool ok = fd >= 0 && write(fd, s, n) == (ssize_t)n;
        if (fd >= 0) close(fd);
        if (!ok || rename(tmp, d->state) != 0) {
            st = mf_fail(MF_ERR_IO, "writing '%s': %s", d->state, strerror(errno));
            if (tmp) unlink(tmp);
        }
        free(tmp);
    }
    free(s);
    return st;
}

bool hub_parse_state(char *s, size_t len, uint64_t size, const char *digest, uint64_t *chunk_out, uint64_t *done,
                     uint32_t *n_chunks) {
    char dg[80];
    unsigned long long sz, chunk;
    int used = 0;
    if (len == 0 || s[len - 1] != '\n' || memchr(s, 0, len)) return false;
    s[len - 1] = 0;
    if (sscanf(s, "minfer-partial 1\nsize %llu\ndigest %79s\nchunk %llu\ndone%n", &sz, dg, &chunk, &used) != 3 || !used)
        return false;
    if (sz != size || strcasecmp(dg, digest) || chunk < 1 || chunk > MF_MAX(size, 1)) return false;
    const uint64_t n = size ? (size + chunk - 1) / chunk : 0;
    if (n > MAX_CHUNKS) return false;
    const char *p = s + used;
    for (uint64_t c = 0; c < n; c++) {
        char *end;
        errno = 0;
        if (*p != ' ' || p[1] < '0' || p[1] > '9') return false;
        const unsigned long long v = strtoull(p + 1, &end, 10);
        if (errno || v > MF_MIN(chunk, size - c * chunk)) return false;
        done[c] = v;
        p = end;
    }
    if (*p) return false;
    *chunk_out = chunk;
    *n_chunks = (uint32_t)n;
    return true;
}

/* Read the state of an earlier run; false (start over) unless it is for this very file and every
 * number fits. */
static bool load_state(dl *d) {
    uint8_t *data;
    size_t len;
    if (mf_read_file(d->state, 1 << 20, &data, &len) != MF_OK) return false;
    const bool ok = hub_parse_state((char *)data, len, d->size, d->b->digest, &d->chunk_size, d->done, &d->n_chunks);
    free(data);
    return ok;
}

/* A new partial file: truncated, then the whole size reserved (fallocate, where the file system
 * has it), so that a disk too small fails now with a clear message. */
static mf_status fresh_partial(dl *d) {
    memset(d->done, 0, sizeof *d->done * d->n_chunks);
    if (ftruncate(d->fd, 0) != 0) return mf_fail(MF_ERR_IO, "cannot truncate '%s': %s", d->partial, strerror(errno));
    if (d->size == 0) return MF_OK;
    int rc = fallocate(d->fd, 0, 0, (off_t)d->size);
    if (rc != 0 && (errno == EOPNOTSUPP || errno == ENOSYS)) rc = ftruncate(d->fd, (off_t)d->size);
    if (rc != 0) {
        const int e = errno;
        struct statvfs vs;
        char need[32], avail[32] = "?";
        if (fstatvfs(d->fd, &vs) == 0) hub_bytes_str((uint64_t)vs.f_bavail * vs.f_frsize, avail, sizeof avail);
        mf_status s = mf_fail(MF_ERR_IO, "%s: cannot reserve %s for '%s': %s (%s free there): free some space, or point %s elsewhere",
                              d->b->what, hub_bytes_str(d->size, need, sizeof need), d->partial, strerror(e), avail,
                              d->b->site == HUB_SITE_HF ? "HF_HUB_CACHE" : "OLLAMA_MODELS");
        if (ftruncate(d->fd, 0) != 0) { /* keep nothing that holds space */
        }
        return s;
    }
    return MF_OK;
}

/* ---- transfers ---- */

/* The bytes [pos, pos + n) are on disk: count them in their chunks (writes within a chunk are in
 * order from its start, so the count only grows). */
static void account(dl *d, uint64_t pos, uint64_t n) {
    for (uint32_t c = (uint32_t)(pos / d->chunk_size); c < d->n_chunks && n; c++) {
        const uint64_t s = chunk_start(d, c), e = s + chunk_len(d, c), upto = MF_MIN(e, pos + n);
        if (upto > s + d->done[c]) d->done[c] = upto - s;
        if (pos + n <= e) break;
    }
}

bool hub_parse_content_range(const char *v, uint64_t *a, uint64_t *b, uint64_t *total) {
    unsigned long long x, y, t;
    int used = 0;
    /* the unit is case-insensitive (RFC 9110 14.1) */
    if (strncasecmp(v, "bytes ", 6) || v[6] < '0' || v[6] > '9' || strchr(v + 6, ' ') || strchr(v + 6, '+')) return false;
    if (sscanf(v + 6, "%llu-%llu/%llu%n", &x, &y, &t, &used) != 3 || v[6 + used] || x > y || y >= t) return false;
    const char *dash = strchr(v + 6, '-'), *slash = strchr(v + 6, '/');
    if (!dash || !slash || dash[1] < '0' || dash[1] > '9' || slash[1] < '0' || slash[1] > '9') return false;
    *a = x, *b = y, *total = t;
    return true;
}

/* The first body byte of an answer: decide what it is. False stops the transfer. */
static bool check_answer(xfer *x) {
    dl *d = x->d;
    long status = 0;
    curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &status);
    x->checked = true;
    if (status != 200 && status != 206) {
        x->error_answer = true;
        return true;
    }
    /* X-Linked-Etag (the Hub's own answer before its redirect) or the ETag of an answer that was not
     * redirected names the content; when it looks like a digest it must be the one listed. */
    const char *tag = x->hd.linked_etag[0] ? x->hd.linked_etag : x->hd.n_responses <= 1 ? x->hd.etag : "";
    const size_t tl = strlen(tag);
    if ((tl == 64 || tl == 40) && hub_is_hex(tag, tl) && strlen(d->b->digest) == tl && strcasecmp(tag, d->b->digest)) {
        d->err = mf_fail(MF_ERR_FORMAT, "%s: the server's ETag %s is not the digest %s its listing gave: refusing the file",
                         d->b->what, tag, d->b->digest);
        return false;
    }
    if (!d->direct_url && x->hd.n_responses > 1) {
        char *eff = NULL;
        if (curl_easy_getinfo(x->e, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff) d->direct_url = mf_strdup(eff);
    }
    if (status == 206) {
        uint64_t a, b, total;
        if (!hub_parse_content_range(x->hd.content_range, &a, &b, &total) || a != x->pos || total != d->size) {
            d->err = mf_fail(MF_ERR_FORMAT, "%s: asked for bytes %llu-%llu of %llu, the server sent the range '%s'", d->b->what,
                             (unsigned long long)x->pos, (unsigned long long)x->end - 1, (unsigned long long)d->size,
                             x->hd.content_range);
            return false;
        }
        if (b + 1 < x->end) x->end = b + 1; /* a shorter range: the rest is asked for again */
        d->ranges_ok = true;
        return true;
    }
    /* 200: the whole file, whatever was asked. Start over cleanly from byte 0 in this transfer alone. */
    if (x->hd.content_length >= 0 && (uint64_t)x->hd.content_length != d->size) {
        d->err = mf_fail(MF_ERR_FORMAT, "%s: the server sends %lld bytes, its listing said %llu", d->b->what,
                         (long long)x->hd.content_length, (unsigned long long)d->size);
        return false;
    }
    if (x->pos != 0 || d->n_x > 1 || bytes_done(d) > 0)
        hub_note(d->h, "%s: the server ignored the range request; starting over from byte 0", d->b->name);
    d->ranges_ok = false;
    d->whole_mode = true;
    x->whole = true;
    for (int i = 0; i < d->n_x; i++)
        if (d->x[i] != x) d->x[i]->dropped = true;
    memset(d->done, 0, sizeof *d->done * d->n_chunks);
    hub_digest_free(&d->dg);
    if ((d->err = hub_digest_begin(&d->dg, strlen(d->b->digest), d->size)) != MF_OK) return false;
    d->hashed = 0;
    x->start = x->pos = 0;
    x->end = d->size;
    return true;
}

static size_t on_data(char *p, size_t size, size_t nm, void *user) {
    xfer *x = user;
    dl *d = x->d;
    const size_t n = size * nm;
    if (x->dropped || d->err != MF_OK) return 0;
    if (!x->checked && !check_answer(x)) return 0;
    if (x->error_answer) return n;
    if (x->pos + n > x->end) {
        d->err = mf_fail(MF_ERR_FORMAT, "%s: the server sent more bytes than asked for (%llu-%llu)", d->b->what,
                         (unsigned long long)x->start, (unsigned long long)x->end - 1);
        return 0;
    }
    for (size_t off = 0; off < n;) {
        const ssize_t w = pwrite(d->fd, p + off, n - off, (off_t)(x->pos + off));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            const int e = w < 0 ? errno : ENOSPC;
            d->err = mf_fail(MF_ERR_IO, "%s: writing '%s': %s (the partial download is kept: free some space and run again to resume)",
                             d->b->what, d->partial, strerror(e));
            return 0;
        }
        off += (size_t)w;
    }
    account(d, x->pos, n);
    if (x->pos == d->hashed) { /* the front of the file: hashed as it arrives, never read back */
        hub_digest_update(&d->dg, p, n);
        d->hashed += n;
    }
    x->pos += n;
    d->fetched += n;
    return n;
}

static mf_status start_xfer(dl *d, uint32_t c) {
    xfer *x = mf_calloc(1, sizeof *x);
    if (!x) return MF_ERR_NOMEM;
    x->d = d;
    x->chunk = c;
    x->start = x->pos = chunk_start(d, c) + d->done[c];
    x->end = chunk_start(d, c) + chunk_len(d, c);
    x->used_direct = d->direct_url != NULL;
    x->e = hub_curl_new(d->h, d->b->site, x->used_direct ? d->direct_url : d->b->url, x->errbuf, &x->hd, &x->list, NULL);
    if (!x->e) {
        free(x);
        return mf_fail(MF_ERR_NOMEM, "cannot start an HTTP transfer");
    }
    char range[64];
    snprintf(range, sizeof range, "%llu-%llu", (unsigned long long)x->start, (unsigned long long)x->end - 1);
    curl_easy_setopt(x->e, CURLOPT_RANGE, range);
    curl_easy_setopt(x->e, CURLOPT_BUFFERSIZE, 256L << 10); /* fewer, larger writes */
    curl_easy_setopt(x->e, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(x->e, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(x->e, CURLOPT_PRIVATE, x);
    curl_multi_add_handle(d->m, x->e);
    d->busy[c] = 1;
    d->x[d->n_x++] = x;
    return MF_OK;
}

/* Start transfers for chunks that need bytes, up to the connection limit (one until the server has
 * shown that it answers ranges). */
static mf_status launch(dl *d, double now) {
    const int limit = d->ranges_ok ? d->max_conn : 1;
    for (uint32_t c = 0; c < d->n_chunks && d->n_x < limit && !d->whole_mode; c++) {
        if (d->busy[c] || d->done[c] == chunk_len(d, c) || now < d->not_before[c]) continue;
        mf_status s = start_xfer(d, c);
        if (s != MF_OK) return s;
    }
    return MF_OK;
}

/* A transfer ended: keep its bytes; retry what is missing, or fail for good. */
static void finish_xfer(dl *d, xfer *x, CURLcode rc, double now) {
    long status = 0;
    curl_easy_getinfo(x->e, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(d->m, x->e);
    curl_easy_cleanup(x->e);
    curl_slist_free_all(x->list);
    for (int i = 0; i < d->n_x; i++)
        if (d->x[i] == x) d->x[i] = d->x[--d->n_x];
    d->busy[x->chunk] = 0;
    if (x->whole) d->whole_mode = false;
    if (!x->checked && status >= 300) x->error_answer = true; /* an error answer without a body */
    const uint64_t now_done = bytes_done(d);
    const bool progress = now_done > d->best_done, complete = rc == CURLE_OK && x->checked && !x->error_answer && x->pos == x->end;
    if (progress) d->best_done = now_done;
    if (d->err != MF_OK || x->dropped || complete) {
        free(x);
        return;
    }
    const uint32_t c = x->whole ? (uint32_t)MF_MIN(x->pos / d->chunk_size, d->n_chunks - 1) : x->chunk;
    char why[CURL_ERROR_SIZE + 64];
    if (rc == CURLE_TOO_MANY_REDIRECTS) {
        d->err = mf_fail(MF_ERR_IO, "%s: %s redirects in a loop (more than 10 redirects): the server or a proxy is misconfigured",
                         d->b->what, d->b->url);
    } else if (x->error_answer && x->used_direct && (status == 401 || status == 403 || status == 404 || status == 410)) {
        free(d->direct_url); /* an expired signed URL: ask the original one again */
        d->direct_url = NULL;
        d->fails[c]++;
    } else if (x->error_answer && status == 416) { /* we only ask for bytes below the listed size */
        d->err = mf_fail(MF_ERR_FORMAT, "%s: the server has no bytes from %llu on (416), but its listing gave the size %llu: "
                         "a broken mirror or a file changed on the server; nothing was kept under the final name",
                         d->b->what, (unsigned long long)x->pos, (unsigned long long)d->size);
    } else if (x->error_answer && !hub_retryable(status)) {
        d->err = hub_http_error(d->h, d->b->site, d->b->what, &x->hd, 1);
    } else {
        if (x->error_answer) snprintf(why, sizeof why, "the server answered %ld", status);
        else if (rc != CURLE_OK) snprintf(why, sizeof why, "%s", x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
        else snprintf(why, sizeof why, "the answer ended at byte %llu of %llu", (unsigned long long)x->pos, (unsigned long long)x->end);
        d->fails[c] = progress ? 0 : d->fails[c] + 1;
        if (d->fails[c] >= MAX_FAILS) {
            d->err = x->error_answer ? hub_http_error(d->h, d->b->site, d->b->what, &x->hd, MAX_FAILS)
                                     : mf_fail(MF_ERR_IO, "%s: %s, %d times in a row: run again to resume from byte %llu",
                                               d->b->what, why, MAX_FAILS, (unsigned long long)bytes_done(d));
        } else if (!progress) {
            double s = d->h->retry_delay_s;
            for (int i = 1; i < d->fails[c]; i++) s *= 2;
            if (x->hd.retry_after_s >= 0) s = MF_MIN((double)x->hd.retry_after_s, 60.0);
            d->not_before[c] = now + s;
            hub_note(d->h, "%s: %s; trying again in %.1f s (%d of %d)", d->b->name, why, s, d->fails[c] + 1, MAX_FAILS);
        }
    }
    free(x);
}

static int report(dl *d, double now) {
    if (!d->h->progress) return 0;
    mf_hub_progress p = {.event = MF_HUB_FILE_BYTES, .file = d->b->file, .n_files = d->b->n_files, .file_name = d->b->name,
                         .done = bytes_done(d), .total = d->size, .fetched = d->fetched, .seconds = now - d->t0,
                         .connections = d->n_x};
    return d->h->progress(&p, d->h->progress_user);
}

/* Hash what the other transfers wrote once it joins the prefix on disk, at most budget bytes
 * (read back from the page cache), so the digest is nearly done when the last byte arrives. */
static mf_status hash_catch_up(dl *d, uint64_t budget) {
    uint64_t prefix = 0;
    for (uint32_t c = 0; c < d->n_chunks; c++) {
        prefix += d->done[c];
        if (d->done[c] < chunk_len(d, c)) break;
    }
    while (d->hashed < prefix && budget > 0) {
        const size_t k = (size_t)MF_MIN(MF_MIN(prefix - d->hashed, budget), (uint64_t)1 << 20);
        const ssize_t r = pread(d->fd, d->buf, k, (off_t)d->hashed);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return mf_fail(MF_ERR_IO, "reading '%s': %s", d->partial, r < 0 ? strerror(errno) : "unexpected end");
        hub_digest_update(&d->dg, d->buf, (size_t)r);
        d->hashed += (uint64_t)r;
        budget -= (uint64_t)r;
    }
    return MF_OK;
}

/* Fetch the missing bytes into the open partial file. */
static mf_status run_transfers(dl *d) {
    if (!(d->m = curl_multi_init())) return mf_fail(MF_ERR_NOMEM, "cannot start HTTP transfers");
    curl_multi_setopt(d->m, CURLMOPT_MAX_HOST_CONNECTIONS, (long)d->max_conn);
    d->t0 = d->t_progress = d->t_checkpoint = mf_time_s();
    for (;;) {
        const double now = mf_time_s();
        if (d->err == MF_OK) d->err = launch(d, now);
        if (d->err != MF_OK || (d->n_x == 0 && bytes_done(d) == d->size)) break;
        int running = 0;
        curl_multi_perform(d->m, &running);
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(d->m, &left)))
            if (msg->msg == CURLMSG_DONE) {
                xfer *x = NULL;
                curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&x);
                finish_xfer(d, x, msg->data.result, mf_time_s());
            }
        if (d->err != MF_OK) break;
        if (now - d->t_progress >= 0.1) {
            d->t_progress = now;
            if (report(d, now)) d->err = mf_fail(MF_ERR_IO, "%s: cancelled", d->b->what);
        }
        if (now - d->t_checkpoint >= 0.1) {
            d->t_checkpoint = now;
            mf_status s = save_state(d, false);
            if (s != MF_OK) d->err = s;
        }
        if (d->err == MF_OK) d->err = hash_catch_up(d, 8u << 20);
        curl_multi_poll(d->m, NULL, 0, 100, NULL);
    }
    if (d->err == MF_OK) report(d, mf_time_s()); /* the last bytes and the whole time */
    while (d->n_x) { /* after a failure: stop what still runs */
        xfer *x = d->x[0];
        x->dropped = true;
        finish_xfer(d, x, CURLE_OK, mf_time_s());
    }
    curl_multi_cleanup(d->m);
    d->m = NULL;
    return d->err;
}

static mf_status download_locked(mf_hub *h, const hub_blob *b, dl *d) {
    d->fd = open(d->partial, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (d->fd < 0) return mf_fail(MF_ERR_IO, "cannot create '%s': %s", d->partial, strerror(errno));
    /* The chunking of a new download; a resumed one keeps the state's. */
    const int conn = d->max_conn;
    uint64_t chunk = conn <= 1 ? d->size : d->size / (4 * (uint64_t)conn) + 1;
    chunk = MF_MAX(chunk, MIN_CHUNK);
    chunk = (chunk + 65535) & ~(uint64_t)65535;
    if (d->size / chunk >= MAX_CHUNKS) chunk = d->size / (MAX_CHUNKS - 1) + 1;
    chunk = MF_MIN(chunk, MF_MAX(d->size, 1));
    d->chunk_size = chunk;
    d->n_chunks = d->size ? (uint32_t)((d->size + chunk - 1) / chunk) : 0;
    const uint32_t cap = MAX_CHUNKS;
    d->done = mf_calloc(cap, sizeof *d->done);
    d->busy = mf_calloc(cap, 1);
    d->fails = mf_calloc(cap, sizeof *d->fails);
    d->not_before = mf_calloc(cap, sizeof *d->not_before);
    if (!d->done || !d->busy || !d->fails || !d->not_before) return MF_ERR_NOMEM;
    struct stat st;
    mf_status s;
    const bool resume = fstat(d->fd, &st) == 0 && (uint64_t)st.st_size == d->size && load_state(d);
    if (!resume) {
        d->chunk_size = chunk;
        d->n_chunks = d->size ? (uint32_t)((d->size + chunk - 1) / chunk) : 0;
        if ((s = fresh_partial(d)) != MF_OK) {
            close(d->fd); /* nothing of it is worth keeping */
            d->fd = -1;
            unlink(d->partial);
            unlink(d->state);
            return s;
        }
        if ((s = save_state(d, false)) != MF_OK) return s;
    } else if (bytes_done(d) > 0) {
        char a[32], t[32];
        hub_note(h, "%s: resuming a partial download (%s of %s on disk)", b->name, hub_bytes_str(bytes_done(d), a, sizeof a),
                 hub_bytes_str(d->size, t, sizeof t));
    }
    d->best_done = bytes_done(d);
    if (!(d->buf = mf_malloc(1 << 20))) return MF_ERR_NOMEM;
    if ((s = hub_digest_begin(&d->dg, strlen(b->digest), d->size)) != MF_OK) return s;
    s = run_transfers(d);
    mf_status s2 = save_state(d, true);
    if (s != MF_OK) return s;
    if (s2 != MF_OK) return s2;
    char got[72] = "";
    if ((s = hash_catch_up(d, UINT64_MAX)) != MF_OK) return s;
    hub_digest_end(&d->dg, got);
    if (fsync(d->fd) != 0) return mf_fail(MF_ERR_IO, "writing '%s': %s", d->partial, strerror(errno));
    close(d->fd);
    d->fd = -1;
    if (strcasecmp(got, b->digest)) {
        unlink(d->partial);
        unlink(d->state);
        return mf_fail(MF_ERR_FORMAT,
                       "%s: the downloaded %s has %s %s, but the server announced %s: it was removed, nothing was kept; "
                       "run again (a broken proxy or mirror can do this)",
                       b->what, b->name, strlen(got) == 64 ? "SHA-256" : "git SHA-1", got, b->digest);
    }
    if (rename(d->partial, b->final_path) != 0)
        return mf_fail(MF_ERR_IO, "cannot rename '%s' to '%s': %s", d->partial, b->final_path, strerror(errno));
    unlink(d->state);
    char *dir = mf_strdup(b->final_path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) {
        *slash = 0;
        const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) fsync(dfd), close(dfd);
    }
    free(dir);
    return MF_OK;
}

mf_status hub_download(mf_hub *h, const hub_blob *b, bool *cached) {
    *cached = false;
    uint64_t have;
    int lock = -1;
    mf_status s = hub_lock(h, b->lock_path, b->name, &lock);
    if (s != MF_OK) return s;
    if (hub_file_size(b->final_path, &have) && have == b->size) { /* another process finished it */
        hub_unlock(lock);
        *cached = true;
        return MF_OK;
    }
    dl d = {.h = h, .b = b, .fd = -1, .size = b->size, .max_conn = MF_MAX(1, MF_MIN(h->connections, MAX_CONN))};
    d.partial = hub_partial_path(b->final_path);
    d.state = hub_fmt("%s.minfer-state", b->final_path);
    s = !d.partial || !d.state ? MF_ERR_NOMEM : hub_mkdirs_parent(b->final_path);
    if (s == MF_OK) s = download_locked(h, b, &d);
    if (d.fd >= 0) close(d.fd);
    free(d.partial);
    free(d.state);
    free(d.done);
    free(d.busy);
    free(d.fails);
    free(d.not_before);
    free(d.direct_url);
    free(d.buf);
    hub_digest_free(&d.dg);
    hub_unlock(lock);
    return s;
}
