/* hub_fs.c: the file-system side of the caches: paths, folders, file locks (flock, the kind
 * huggingface_hub's filelock takes, so the two wait for each other), atomic small files and
 * symlinks, digests of whole files (OpenSSL), and the checks on names that come from servers. */
#include "hub/hub_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

char *hub_fmt(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    const int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) {
        mf_fail(MF_ERR_NOMEM, "out of memory formatting a path");
        return NULL;
    }
    return s;
}

mf_status hub_mkdirs(const char *dir) {
    char *p = mf_strdup(dir);
    if (!p) return MF_ERR_NOMEM;
    for (char *s = p + 1;; s++) {
        const char c = *s;
        if (c != '/' && c != 0) continue;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            mf_status st = mf_fail(MF_ERR_IO, "cannot create the folder '%s': %s", p, strerror(errno));
            free(p);
            return st;
        }
        *s = c;
        if (!c) break;
    }
    free(p);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return mf_fail(MF_ERR_IO, "'%s' is not a folder", dir);
    return MF_OK;
}

mf_status hub_mkdirs_parent(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return MF_OK;
    char *d = mf_strndup(path, (size_t)(slash - path));
    if (!d) return MF_ERR_NOMEM;
    mf_status s = hub_mkdirs(d);
    free(d);
    return s;
}

bool hub_file_size(const char *path, uint64_t *size) {
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return false;
    if (size) *size = (uint64_t)st.st_size;
    return true;
}

mf_status hub_lock(mf_hub *h, const char *path, const char *what, int *fd) {
    *fd = -1;
    mf_status s = hub_mkdirs_parent(path);
    if (s != MF_OK) return s;
    const int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0) return mf_fail(MF_ERR_IO, "cannot open the lock file '%s': %s", path, strerror(errno));
    if (flock(f, LOCK_EX | LOCK_NB) != 0) {
        if (errno != EWOULDBLOCK) {
            s = mf_fail(MF_ERR_IO, "cannot lock '%s': %s", path, strerror(errno));
            close(f);
            return s;
        }
        hub_note(h, "waiting for another download of %s to finish (lock %s)", what, path);
        while (flock(f, LOCK_EX) != 0) {
            if (errno == EINTR) continue;
            s = mf_fail(MF_ERR_IO, "cannot lock '%s': %s", path, strerror(errno));
            close(f);
            return s;
        }
    }
    *fd = f;
    return MF_OK;
}

void hub_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing drops the flock */
}

mf_status hub_write_atomic(const char *path, const void *data, size_t n) {
    mf_status s = hub_mkdirs_parent(path);
    if (s != MF_OK) return s;
    mf_atomic_file f;
    if ((s = mf_atomic_begin(&f, path)) != MF_OK) return s;
    if ((s = mf_atomic_write(&f, data, n)) != MF_OK) {
        mf_atomic_abort(&f);
        return s;
    }
    return mf_atomic_commit(&f);
}

mf_status hub_symlink_atomic(const char *target, const char *link) {
    mf_status s = hub_mkdirs_parent(link);
    if (s != MF_OK) return s;
    char *tmp = hub_fmt("%s.tmp-link-%ld", link, (long)getpid());
    if (!tmp) return MF_ERR_NOMEM;
    unlink(tmp);
    if (symlink(target, tmp) != 0 || rename(tmp, link) != 0) {
        s = mf_fail(MF_ERR_IO, "cannot create the link '%s' -> '%s': %s", link, target, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return s;
}

mf_status hub_digest_begin(hub_digest *g, size_t hex_len, uint64_t size) {
    g->ctx = NULL;
    g->hex_len = hex_len;
    if (hex_len != 64 && hex_len != 40) return mf_fail(MF_ERR_ARG, "a digest of %zu hex digits", hex_len);
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx || !EVP_DigestInit_ex(ctx, hex_len == 64 ? EVP_sha256() : EVP_sha1(), NULL)) {
        EVP_MD_CTX_free(ctx);
        return mf_fail(MF_ERR_INTERNAL, "OpenSSL cannot start a %s digest", hex_len == 64 ? "SHA-256" : "SHA-1");
    }
    if (hex_len == 40) { /* git's blob object: "blob <size>\0" then the content */
        char head[32];
        const int n = snprintf(head, sizeof head, "blob %llu", (unsigned long long)size);
        EVP_DigestUpdate(ctx, head, (size_t)n + 1);
    }
    g->ctx = ctx;
    return MF_OK;
}

void hub_digest_update(hub_digest *g, const void *data, size_t n) {
    if (g->ctx) EVP_DigestUpdate(g->ctx, data, n);
}

void hub_digest_end(hub_digest *g, char *out) {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned md_len = 0;
    out[0] = 0;
    if (g->ctx) EVP_DigestFinal_ex(g->ctx, md, &md_len);
    for (unsigned i = 0; i < md_len; i++) snprintf(out + 2 * i, 3, "%02x", md[i]);
    hub_digest_free(g);
}

void hub_digest_free(hub_digest *g) {
    EVP_MD_CTX_free(g->ctx);
    g->ctx = NULL;
}

bool hub_is_hex(const char *s, size_t n) {
    if (!s || strlen(s) != n) return false;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) return false;
    }
    return true;
}

bool hub_safe_relpath(const char *p) {
    const size_t n = p ? strlen(p) : 0;
    if (n == 0 || n > 1024 || p[0] == '/') return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == '\\') return false;
    for (const char *c = p; *c;) { /* each component */
        const char *e = strchr(c, '/');
        const size_t len = e ? (size_t)(e - c) : strlen(c);
        if (len == 0 || (len == 1 && c[0] == '.') || (len == 2 && c[0] == '.' && c[1] == '.')) return false;
        if (!e) break;
        c = e + 1;
        if (!*c) return false; /* a trailing slash */
    }
    return true;
}

const char *hub_bytes_str(uint64_t n, char *buf, size_t size) {
    if (n < 1000) snprintf(buf, size, "%llu B", (unsigned long long)n);
    else if (n < 1000000) snprintf(buf, size, "%.1f kB", n / 1e3);
    else if (n < 1000000000) snprintf(buf, size, "%.1f MB", n / 1e6);
    else snprintf(buf, size, "%.2f GB", n / 1e9);
    return buf;
}

void hub_note(mf_hub *h, const char *fmt, ...) {
    if (!h->progress) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mf_hub_progress p = {.event = MF_HUB_NOTE, .message = msg};
    h->progress(&p, h->progress_user);
}
