/* file.c: atomic file replacement, whole-file reads and the streaming hash (file.h). */
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The file a path names once symlinks are followed; the path itself when it does not exist yet.
 * A dangling symlink resolves to its target's path, so the link keeps pointing there. */
static char *resolve_target(const char *path) {
    char cur[PATH_MAX], link[PATH_MAX], next[PATH_MAX];
    if ((size_t)snprintf(cur, sizeof cur, "%s", path) >= sizeof cur) return NULL;
    for (int depth = 0; depth < 40; depth++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return mf_strdup(cur);
        const ssize_t n = readlink(cur, link, sizeof link - 1);
        if (n < 0) return mf_strdup(cur);
        link[n] = 0;
        const char *slash = strrchr(cur, '/');
        int len = link[0] == '/' || !slash ? snprintf(next, sizeof next, "%s", link)
                                           : snprintf(next, sizeof next, "%.*s/%s", (int)(slash - cur), cur, link);
        if (len < 0 || (size_t)len >= sizeof next) return NULL;
        memcpy(cur, next, (size_t)len + 1);
    }
    return NULL; /* a symlink loop */
}

/* Temporary files being written, for mf_remove_temp_files from a signal handler: slots claimed and
 * released with atomic operations, so any thread may write files at the same time. */
#define MAX_TEMP 32
static char *volatile temp_files[MAX_TEMP];

static void track_temp(char *p, bool on) {
    for (int i = 0; i < MAX_TEMP; i++) {
        char *expected = on ? NULL : p;
        if (__atomic_compare_exchange_n(&temp_files[i], &expected, on ? p : NULL, false, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST))
            return;
    }
}

void mf_remove_temp_files(void) {
    for (int i = 0; i < MAX_TEMP; i++) {
        char *p = __atomic_load_n(&temp_files[i], __ATOMIC_SEQ_CST);
        if (p) unlink(p);
    }
}

mf_status mf_atomic_begin(mf_atomic_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!path || !*path) return mf_fail(MF_ERR_ARG, "empty file name");
    f->path = resolve_target(path);
    if (!f->path) return mf_fail(MF_ERR_IO, "'%s': too many levels of symbolic links, or too long a path", path);
    struct stat st;
    if (stat(f->path, &st) == 0 && !S_ISREG(st.st_mode)) {
        const char *what = S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                           : S_ISFIFO(st.st_mode) ? "a FIFO" : "not a regular file";
        mf_status s = mf_fail(MF_ERR_IO, "'%s' is %s: refusing to replace it", path, what);
        mf_atomic_abort(f);
        return s;
    }
    const char *slash = strrchr(f->path, '/');
    const size_t dir_len = slash ? (size_t)(slash - f->path) + 1 : 0, n = strlen(f->path) + 32;
    if (!(f->tmp = mf_malloc(n))) {
        mf_atomic_abort(f);
        return MF_ERR_NOMEM;
    }
    snprintf(f->tmp, n, "%.*s.%s.tmp-XXXXXX", (int)dir_len, f->path, f->path + dir_len);
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0) {
        mf_status s = mf_fail(MF_ERR_IO, "cannot create a temporary file beside '%s': %s", path, strerror(errno));
        free(f->tmp);
        f->tmp = NULL;
        mf_atomic_abort(f);
        return s;
    }
    track_temp(f->tmp, true);
    /* keep the mode of the file being replaced; new files get 0644 */
    fchmod(f->fd, stat(f->path, &st) == 0 ? st.st_mode & 07777 : 0644);
    return MF_OK;
}

mf_status mf_atomic_write(mf_atomic_file *f, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n > 0) {
        ssize_t w = write(f->fd, p, n > (1u << 30) ? (1u << 30) : n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            mf_status s = mf_fail(MF_ERR_IO, "writing '%s': %s", f->path, w < 0 ? strerror(errno) : "no progress");
            mf_atomic_abort(f);
            return s;
        }
        p += w, n -= (size_t)w;
    }
    return MF_OK;
}

mf_status mf_atomic_commit(mf_atomic_file *f) {
    mf_status s = MF_OK;
    if (fsync(f->fd) != 0) s = mf_fail(MF_ERR_IO, "syncing '%s': %s", f->path, strerror(errno));
    if (!s && close(f->fd) != 0) s = mf_fail(MF_ERR_IO, "closing '%s': %s", f->path, strerror(errno));
    if (!s) f->fd = -1;
    if (!s && rename(f->tmp, f->path) != 0) s = mf_fail(MF_ERR_IO, "renaming '%s' to '%s': %s", f->tmp, f->path, strerror(errno));
    if (!s) track_temp(f->tmp, false);
    if (s) {
        mf_atomic_abort(f);
        return s;
    }
    /* make the rename durable; a failure here leaves a complete file, so it is not an error */
    const char *slash = strrchr(f->path, '/');
    char *dir = slash ? mf_strndup(f->path, (size_t)(slash - f->path) + 1) : mf_strdup(".");
    int dfd = dir ? open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
    free(f->tmp);
    f->tmp = NULL;
    mf_atomic_abort(f);
    return MF_OK;
}

void mf_atomic_abort(mf_atomic_file *f) {
    if (f->tmp) { /* only a begun file owns its descriptor */
        if (f->fd >= 0) close(f->fd);
        track_temp(f->tmp, false);
        unlink(f->tmp);
    }
    free(f->tmp);
    free(f->path);
    f->fd = -1;
    f->tmp = f->path = NULL;
}

mf_status mf_read_file(const char *path, size_t max, uint8_t **data, size_t *size) {
    *data = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mf_fail(MF_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return mf_fail(MF_ERR_IO, "'%s' is not a regular file", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)max) {
        close(fd);
        return mf_fail(MF_ERR_RANGE, "'%s' is %lld bytes, more than the %zu it can be", path, (long long)st.st_size, max);
    }
    const size_t n = (size_t)st.st_size;
    uint8_t *buf = mf_malloc(n ? n : 1);
    if (!buf) {
        close(fd);
        return MF_ERR_NOMEM;
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        free(buf);
        return mf_fail(MF_ERR_IO, "reading '%s': got %zu of %zu bytes", path, got, n);
    }
    *data = buf;
    *size = n;
    return MF_OK;
}

/* ---- hash ---- */

static const uint64_t H_MUL[4] = {0x9E3779B97F4A7C15ull, 0xC2B2AE3D27D4EB4Full, 0x165667B19E3779F9ull,
                                  0xD6E8FEB86659FD93ull};

static inline uint64_t load64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline uint64_t lane_step(uint64_t v, uint64_t w, uint64_t k) {
    v = (v ^ w) * k;
    return v ^ (v >> 29);
}

void mf_hash_init(mf_hash *h, uint64_t seed) {
    memset(h, 0, sizeof *h);
    for (int i = 0; i < 4; i++) h->lane[i] = seed + H_MUL[i] * (uint64_t)(i + 1);
}

static void block32(mf_hash *h, const uint8_t *p) {
    for (int i = 0; i < 4; i++) h->lane[i] = lane_step(h->lane[i], load64(p + 8 * i), H_MUL[i]);
}

void mf_hash_update(mf_hash *h, const void *data, size_t n) {
    const uint8_t *p = data;
    h->total += n;
    if (h->n_buf) {
        const size_t take = MF_MIN(n, 32 - h->n_buf);
        memcpy(h->buf + h->n_buf, p, take);
        h->n_buf += take, p += take, n -= take;
        if (h->n_buf < 32) return;
        block32(h, h->buf);
        h->n_buf = 0;
    }
    for (; n >= 32; p += 32, n -= 32) block32(h, p);
    memcpy(h->buf, p, n);
    h->n_buf = n;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 31;
    x *= 0x7FB5D329728EA185ull;
    x ^= x >> 27;
    x *= 0x81DADEF4BC2DD44Dull;
    return x ^ (x >> 33);
}

uint64_t mf_hash_final(const mf_hash *h) {
    mf_hash t = *h;
    uint8_t tail[32] = {0};
    memcpy(tail, t.buf, t.n_buf);
    tail[31] ^= (uint8_t)(t.n_buf + 1); /* tails of different lengths differ */
    block32(&t, tail);
    uint64_t r = t.total;
    for (int i = 0; i < 4; i++) r = mix64(r ^ t.lane[i]) + H_MUL[i];
    return mix64(r);
}

uint64_t mf_hash_bytes(const void *data, size_t n, uint64_t seed) {
    mf_hash h;
    mf_hash_init(&h, seed);
    mf_hash_update(&h, data, n);
    return mf_hash_final(&h);
}

/* ---- the public writer (minfer.h): mf_atomic_file behind an opaque handle ---- */

struct mf_file_writer {
    mf_atomic_file f;
    mf_status failed; /* the first write error, returned again by later calls */
    char *error;      /* its message */
};

mf_status mf_file_writer_open(const char *path, mf_file_writer **out) {
    *out = NULL;
    mf_file_writer *w = mf_calloc(1, sizeof *w);
    if (!w) return MF_ERR_NOMEM;
    mf_status s = mf_atomic_begin(&w->f, path);
    if (s) {
        free(w);
        return s;
    }
    *out = w;
    return MF_OK;
}

static mf_status writer_failed(const mf_file_writer *w) {
    return mf_fail(w->failed, "%s", w->error ? w->error : mf_status_str(w->failed));
}

mf_status mf_file_writer_write(mf_file_writer *w, const void *data, size_t n) {
    if (w->failed) return writer_failed(w);
    mf_status s = mf_atomic_write(&w->f, data, n);
    if (s) {
        w->failed = s;
        w->error = mf_strdup(mf_last_error());
    }
    return s;
}

mf_status mf_file_writer_commit(mf_file_writer *w) {
    mf_status s = w->failed ? writer_failed(w) : mf_atomic_commit(&w->f);
    mf_file_writer_abort(w);
    return s;
}

void mf_file_writer_abort(mf_file_writer *w) {
    if (!w) return;
    mf_atomic_abort(&w->f);
    free(w->error);
    free(w);
}

mf_status mf_file_write_all(const char *path, const void *data, size_t n) {
    mf_file_writer *w;
    mf_status s = mf_file_writer_open(path, &w);
    if (s) return s;
    if ((s = mf_file_writer_write(w, data, n))) {
        mf_file_writer_abort(w);
        return s;
    }
    return mf_file_writer_commit(w);
}
