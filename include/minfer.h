/* minfer.h: the public C API of libminfer, a local LLM inference engine for GGUF models.
 *
 * Conventions for every call in this header:
 * - Functions that can fail return an mf_status; MF_OK is 0. On failure, mf_last_error() returns a
 *   message for the calling thread that names the thing, the bad value and, where known, the fix.
 * - Handles are opaque. Each open or create call has a free call that accepts NULL.
 * - Nothing here calls exit() or aborts on bad input; only broken internal invariants abort
 *   (MF_ASSERT, on in release builds too).
 * - Thread safety: a loaded model is read-only and may be shared by threads; everything else
 *   (contexts, samplers, tokenizer streams) belongs to one thread at a time.
 */
#ifndef MINFER_H
#define MINFER_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MINFER_VERSION "0.1.0"

/* Status codes. Append-only: values are stable. */
typedef enum mf_status {
    MF_OK = 0,
    MF_ERR_IO,          /* open/read/write/mmap/rename failed (errno text in the message) */
    MF_ERR_FORMAT,      /* input file or data is malformed (GGUF, JSON, session file, ...) */
    MF_ERR_UNSUPPORTED, /* valid input that minfer does not handle (architecture, type, ...) */
    MF_ERR_NOT_FOUND,   /* a key, tensor, token or file that was asked for is absent */
    MF_ERR_TYPE,        /* a value exists but has another type than the caller asked for */
    MF_ERR_ARG,         /* a caller passed an invalid argument */
    MF_ERR_NOMEM,       /* an allocation failed */
    MF_ERR_RANGE,       /* a value is outside its valid range (context full, index too big) */
    MF_ERR_INTERNAL,    /* an internal limit or state problem that is not the caller's fault */
    MF_STATUS_COUNT
} mf_status;

/* Name of a status ("ok", "io error", ...). Never NULL. */
const char *mf_status_str(mf_status s);

/* The message of the last failure on this thread; "" when none. Valid until the next failing call
 * on this thread. */
const char *mf_last_error(void);

#ifdef __cplusplus
}
#endif
#endif /* MINFER_H */
