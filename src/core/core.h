/* core.h: what every module of minfer uses: the error channel, the always-on assert,
 * overflow-checked size arithmetic, half-precision conversion and small helpers. */
#ifndef MF_CORE_H
#define MF_CORE_H

#include "minfer.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <string.h>

#define MF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define MF_MIN(a, b) ((a) < (b) ? (a) : (b))
#define MF_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define MF_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define MF_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define MF_PRINTF(f, a)
#define MF_UNLIKELY(x) (x)
#endif

/* Record a failure message for this thread and return the status, so callers write
 *   return mf_fail(MF_ERR_FORMAT, "tensor '%s': offset %llu past end of file", ...); */
mf_status mf_fail(mf_status s, const char *fmt, ...) MF_PRINTF(2, 3);
mf_status mf_failv(mf_status s, const char *fmt, va_list ap);
/* Prefix the current message with context: "loading X: <old message>". Returns s. */
mf_status mf_fail_context(mf_status s, const char *fmt, ...) MF_PRINTF(2, 3);
void mf_clear_error(void);

/* Broken internal invariant: print and abort. Stays on in release builds. Never for bad input. */
#define MF_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (MF_UNLIKELY(!(cond))) mf_assert_fail(__FILE__, __LINE__, #cond);                        \
    } while (0)
_Noreturn void mf_assert_fail(const char *file, int line, const char *cond);

/* Overflow-checked arithmetic on sizes: return false on overflow, leaving *out unspecified. */
static inline bool mf_add_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool mf_mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return !__builtin_mul_overflow(a, b, out); }
static inline bool mf_add_size(size_t a, size_t b, size_t *out) { return !__builtin_add_overflow(a, b, out); }
static inline bool mf_mul_size(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }
/* Round x up to a multiple of align (a power of two or any nonzero value). */
static inline bool mf_align_up_u64(uint64_t x, uint64_t align, uint64_t *out) {
    uint64_t r = x % align;
    return r == 0 ? (*out = x, true) : mf_add_u64(x, align - r, out);
}

/* Allocation that records MF_ERR_NOMEM with a message on failure (returns NULL). */
void *mf_malloc(size_t n);
void *mf_calloc(size_t count, size_t size);
void *mf_realloc(void *p, size_t n);
char *mf_strdup(const char *s);
char *mf_strndup(const char *s, size_t n);
/* Aligned allocation for kernel buffers; free with mf_aligned_free. */
void *mf_aligned_alloc(size_t align, size_t n);
void mf_aligned_free(void *p);

/* IEEE half and bfloat16 <-> float, bit-exact with the usual round-to-nearest-even conversions. */
typedef uint16_t mf_fp16;
typedef uint16_t mf_bf16;
float mf_fp16_to_f32(mf_fp16 h);
mf_fp16 mf_f32_to_fp16(float f);
static inline float mf_bf16_to_f32(mf_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
mf_bf16 mf_f32_to_bf16(float f);


/* Log through the application's callback (minfer.h: mf_log_set_callback); messages above the level
 * set with mf_log_set_level are not formatted. */
void mf_log(mf_log_level level, const char *fmt, ...) MF_PRINTF(2, 3);

#endif /* MF_CORE_H */
