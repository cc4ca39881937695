/* core.c: error channel, assert, allocation wrappers, fp16/bf16 conversion, time and logging. */
#include "core/core.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Thread_local char tls_error[1024];

static const char *const status_names[] = {
    [MF_OK] = "ok",
    [MF_ERR_IO] = "i/o error",
    [MF_ERR_FORMAT] = "malformed input",
    [MF_ERR_UNSUPPORTED] = "unsupported",
    [MF_ERR_NOT_FOUND] = "not found",
    [MF_ERR_TYPE] = "wrong type",
    [MF_ERR_ARG] = "invalid argument",
    [MF_ERR_NOMEM] = "out of memory",
    [MF_ERR_RANGE] = "out of range",
    [MF_ERR_INTERNAL] = "internal error",
};
_Static_assert(MF_ARRAY_LEN(status_names) == MF_STATUS_COUNT, "status_names must name every status");

const char *mf_status_str(mf_status s) {
    return (unsigned)s < MF_STATUS_COUNT ? status_names[s] : "unknown status";
}

const char *mf_last_error(void) { return tls_error; }
void mf_clear_error(void) { tls_error[0] = 0; }

mf_status mf_failv(mf_status s, const char *fmt, va_list ap) {
    vsnprintf(tls_error, sizeof tls_error, fmt, ap);
    return s;
}

mf_status mf_fail(mf_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mf_failv(s, fmt, ap);
    va_end(ap);
    return s;
}

mf_status mf_fail_context(mf_status s, const char *fmt, ...) {
    char prefix[512], old[sizeof tls_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, tls_error, sizeof old);
    const char *tail = old[0] ? old : mf_status_str(s);
    size_t np = strlen(prefix), nt = strlen(tail);
    size_t cap = sizeof tls_error - 1;
    /* prefix + ": " + tail, truncated to the buffer */
    size_t n = 0;
    memcpy(tls_error, prefix, MF_MIN(np, cap));
    n = MF_MIN(np, cap);
    if (n + 2 <= cap) {
        memcpy(tls_error + n, ": ", 2);
        n += 2;
    }
    memcpy(tls_error + n, tail, MF_MIN(nt, cap - n));
    n += MF_MIN(nt, cap - n);
    tls_error[n] = 0;
    return s;
}

void mf_assert_fail(const char *file, int line, const char *cond) {
    fprintf(stderr, "minfer: internal error: assertion '%s' failed at %s:%d\n", cond, file, line);
    abort();
}

void *mf_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) mf_fail(MF_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return p;
}

void *mf_calloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) mf_fail(MF_ERR_NOMEM, "out of memory allocating %zu x %zu bytes", count, size);
    return p;
}

void *mf_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) mf_fail(MF_ERR_NOMEM, "out of memory allocating %zu bytes", n);
    return q;
}

char *mf_strndup(const char *s, size_t n) {
    char *d = mf_malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

char *mf_strdup(const char *s) { return mf_strndup(s, strlen(s)); }

void *mf_aligned_alloc(size_t align, size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, align, n ? n : align) != 0) {
        mf_fail(MF_ERR_NOMEM, "out of memory allocating %zu bytes", n);
        return NULL;
    }
    return p;
}

void mf_aligned_free(void *p) { free(p); }

float mf_fp16_to_f32(mf_fp16 h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalize */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

mf_fp16 mf_f32_to_fp16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t absu = u & 0x7fffffffu;
    if (absu > 0x7f800000u) return (mf_fp16)(sign | 0x7e00); /* NaN */
    if (absu >= 0x477ff000u) return (mf_fp16)(sign | 0x7c00); /* rounds to inf */
    if (absu < 0x38800000u) { /* result is subnormal or zero: scale so the FPU rounds to nearest even */
        float a;
        memcpy(&a, &absu, 4);
        float r = a * 0x1p24f; /* units of 2^-24, the smallest half subnormal */
        uint32_t q = (uint32_t)lrintf(r);
        return (mf_fp16)(sign | q);
    }
    uint32_t mant_odd = (absu >> 13) & 1;
    absu += 0xc8000fffu + mant_odd; /* rebias exponent (-112 << 23) and round to nearest even */
    return (mf_fp16)(sign | (absu >> 13));
}

mf_bf16 mf_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (mf_bf16)((u >> 16) | 64); /* quiet NaN */
    u += 0x7fff + ((u >> 16) & 1);
    return (mf_bf16)(u >> 16);
}

double mf_time_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static mf_log_fn log_fn;
static void *log_user;
static int log_level = MF_LOG_WARN;

void mf_log_set_callback(mf_log_fn fn, void *user) {
    __atomic_store_n(&log_user, user, __ATOMIC_SEQ_CST);
    __atomic_store_n(&log_fn, fn, __ATOMIC_SEQ_CST);
}
void mf_log_set_level(mf_log_level level) { __atomic_store_n(&log_level, (int)level, __ATOMIC_SEQ_CST); }
mf_log_level mf_log_get_level(void) { return (mf_log_level)__atomic_load_n(&log_level, __ATOMIC_SEQ_CST); }

mf_status mf_log_level_from_name(const char *name, mf_log_level *out) {
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, names[i])) return *out = (mf_log_level)i, MF_OK;
    if (name && !strcmp(name, "warning")) return *out = MF_LOG_WARN, MF_OK;
    return mf_fail(MF_ERR_ARG, "log level '%s': use error, warn, info or debug", name ? name : "(null)");
}

void mf_log(mf_log_level level, const char *fmt, ...) {
    static const char *const tags[] = {"error", "warning", "info", "debug"};
    if ((int)level > __atomic_load_n(&log_level, __ATOMIC_SEQ_CST) || (int)level < 0 || (int)level > MF_LOG_DEBUG)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mf_log_fn fn = __atomic_load_n(&log_fn, __ATOMIC_SEQ_CST);
    if (fn)
        fn(level, msg, __atomic_load_n(&log_user, __ATOMIC_SEQ_CST));
    else
        fprintf(stderr, "minfer: %s: %s\n", tags[level], msg);
}

mf_status mf_set_error(mf_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    mf_failv(s, fmt, ap);
    va_end(ap);
    return s;
}

void mf_log_message(mf_log_level level, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    mf_log(level, "%s", msg);
}
