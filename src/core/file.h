/* file.h: writing a file so that nothing the user had is lost: the data goes to a temporary file
 * beside the target, is fsynced, and only then renamed over it (and the directory fsynced), so a
 * crash, a full disk or an interrupted write leaves either the old file or the new one. A target
 * that is a symlink is followed (the link stays, its target is replaced); one that is a directory, a
 * device, a FIFO or a socket is refused. Also: reading a whole small file, and a streaming hash. */
#ifndef MF_FILE_H
#define MF_FILE_H

#include "core/core.h"

typedef struct mf_atomic_file {
    int fd;      /* of the temporary file; -1 when none */
    char *path;  /* the file to replace (symlinks resolved) */
    char *tmp;   /* the temporary file beside it */
} mf_atomic_file;

/* Start writing path. MF_ERR_IO names the path and the reason (not a regular file, no directory,
 * permissions). */
mf_status mf_atomic_begin(mf_atomic_file *f, const char *path);
/* Append n bytes (retries short writes; a full disk is MF_ERR_IO "no space left ..."). */
mf_status mf_atomic_write(mf_atomic_file *f, const void *data, size_t n);
/* fsync, rename over the target, fsync the directory. On failure the temporary file is removed. */
mf_status mf_atomic_commit(mf_atomic_file *f);
/* Drop the temporary file (after a failure, or to cancel); accepts a finished or zeroed file. */
void mf_atomic_abort(mf_atomic_file *f);

/* Read a whole regular file of at most max bytes into a new buffer (caller frees). MF_ERR_IO when it
 * cannot be read, MF_ERR_RANGE when it is larger than max. */
mf_status mf_read_file(const char *path, size_t max, uint8_t **data, size_t *size);

/* A 64-bit hash of a byte stream (four multiply-xorshift lanes over 32-byte steps, then a final
 * mix); the same bytes give the same value however they are split between updates. Not
 * cryptographic: it detects corruption and tells files apart. */
typedef struct mf_hash {
    uint64_t lane[4];
    uint8_t buf[32];
    size_t n_buf;
    uint64_t total;
} mf_hash;
void mf_hash_init(mf_hash *h, uint64_t seed);
void mf_hash_update(mf_hash *h, const void *data, size_t n);
uint64_t mf_hash_final(const mf_hash *h);
uint64_t mf_hash_bytes(const void *data, size_t n, uint64_t seed);

#endif /* MF_FILE_H */
