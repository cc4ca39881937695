/* gguf.h: GGUF v3 reader (mmap'd, zero-copy, split files; its API is public, include/minfer/gguf.h)
 * and streaming writer.
 *
 * Reader: mf_gguf_open maps the file read-only and validates everything in it against the file size
 * before any use; a hostile file yields MF_ERR_FORMAT (or MF_ERR_UNSUPPORTED) with a message naming
 * the key or tensor and the byte offset, never a crash. Opening part 1 of a split model
 * (name-00001-of-0000N.gguf) maps every part; the result looks like the unsplit file: metadata from
 * part 1, tensors from all parts, each tensor's data pointer inside its own part's mapping.
 * A mf_gguf is read-only after open and may be shared between threads.
 *
 * Writer: collect metadata and tensor infos, then stream tensor data in order into a temporary file
 * beside the output, which is renamed over the output only when complete (atomic). */
#ifndef MF_GGUF_H
#define MF_GGUF_H

#include "core/core.h"
#include "minfer/gguf.h"
#include "quant/quant.h"

#define MF_GGUF_DEFAULT_ALIGNMENT 32

/* How the page cache holds a mapped model (gguf_pages.c): decode streams weights faster through
 * 2 MiB pages, which a mapping gets only where the cache holds the file in 2 MiB folios. */
typedef enum mf_gguf_pages {
    MF_GGUF_PAGES_NA,       /* read into memory, a memory image, under 2 MiB of data, or a system
                               without 2 MiB transparent huge pages (or not Linux) */
    MF_GGUF_PAGES_HUGE,     /* the cache already holds the file in 2 MiB pages */
    MF_GGUF_PAGES_SMALL,    /* small pages, and this kernel or file system gives the file no others */
    MF_GGUF_PAGES_RELOADED, /* it held small pages: dropped from the cache and read again in 2 MiB pages */
} mf_gguf_pages;
/* For each mapped part, looks at how the cache holds it and, where it holds small pages that 2 MiB
 * ones could replace, drops the file from the cache once and reads it back (when it fits in memory
 * twice over; otherwise the first use reads it). Returns the most telling state over the parts. */
mf_gguf_pages mf_gguf_settle_pages(mf_gguf *g);
const char *mf_gguf_pages_name(mf_gguf_pages s);

/* 32 hex digits identifying the file: a hash of every part's metadata and tensor infos and of the
 * first and last 4 KiB of each tensor's data. */
void mf_gguf_fingerprint(const mf_gguf *g, char out[33]);

/* ---- writer ---- */
typedef struct mf_gguf_writer mf_gguf_writer;

mf_status mf_gguf_writer_create(mf_gguf_writer **out);
void mf_gguf_writer_free(mf_gguf_writer *w); /* removes the temporary file of an unfinished write */

/* Metadata, in the order added; setting an existing key replaces its value in place. Values are
 * copied (string and array contents too). */
mf_status mf_gguf_writer_set_u32(mf_gguf_writer *w, const char *key, uint32_t v);
mf_status mf_gguf_writer_set_i32(mf_gguf_writer *w, const char *key, int32_t v);
mf_status mf_gguf_writer_set_u64(mf_gguf_writer *w, const char *key, uint64_t v);
mf_status mf_gguf_writer_set_f32(mf_gguf_writer *w, const char *key, float v);
mf_status mf_gguf_writer_set_bool(mf_gguf_writer *w, const char *key, bool v);
mf_status mf_gguf_writer_set_str(mf_gguf_writer *w, const char *key, const char *v);
/* Any value as read by the reader (including arrays of strings and nested arrays). */
mf_status mf_gguf_writer_set_value(mf_gguf_writer *w, const char *key, const mf_gguf_value *v);
mf_status mf_gguf_writer_remove(mf_gguf_writer *w, const char *key);

/* Declare the next tensor; data is written later with write_tensor_data in the same order. */
mf_status mf_gguf_writer_add_tensor(mf_gguf_writer *w, const char *name, mf_type type, uint32_t n_dims,
                                    const int64_t *ne);
/* Start writing to path (via a temporary file in the same directory): header, metadata, infos. */
mf_status mf_gguf_writer_begin(mf_gguf_writer *w, const char *path);
/* Data of tensor i (in declaration order, each exactly once, nbytes = its row size x rows). */
mf_status mf_gguf_writer_write_tensor_data(mf_gguf_writer *w, int64_t i, const void *data, size_t nbytes);
/* Flush, fsync and rename the temporary file over path. After any failed begin/write/finish the
 * temporary file is gone and the writer only accepts mf_gguf_writer_free. */
mf_status mf_gguf_writer_finish(mf_gguf_writer *w);

#endif /* MF_GGUF_H */
