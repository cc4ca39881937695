/* gguf_write.c: the streaming GGUF v3 writer. Metadata values are encoded to their on-disk bytes as
 * they are set (so the caller's strings and arrays may go away at once); tensor infos are declared,
 * then begin() writes header, metadata and infos to a temporary file beside the output, each
 * tensor's data follows in declaration order at offsets padded to general.alignment, and finish()
 * fsyncs and renames the file over the output. Any failure removes the temporary file. */
#include "gguf/gguf_internal.h"
#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes of 2 MiB at 2 MiB offsets: the page cache then holds the new file in 2 MiB folios, which
 * a model mapping can use as huge pages right away (see gguf_pages.c). */
#define WRITE_BUF (2u << 20)

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static mf_status wput(wbuf *b, const void *src, size_t n) {
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) {
            if (!mf_mul_size(cap, 2, &cap)) return mf_fail(MF_ERR_NOMEM, "GGUF writer: value too large");
        }
        uint8_t *p = mf_realloc(b->p, cap);
        if (!p) return MF_ERR_NOMEM;
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, src, n);
    b->n += n;
    return MF_OK;
}

typedef struct wkv {
    char *key;
    mf_gguf_vtype type;
    wbuf val; /* the encoded value, without the type */
} wkv;

typedef struct wtensor {
    char *name;
    mf_type type;
    uint32_t n_dims;
    int64_t ne[MF_GGUF_MAX_DIMS];
    uint64_t nbytes, offset;
} wtensor;

typedef enum { W_COLLECT, W_WRITING, W_DONE, W_FAILED } wstate;

struct mf_gguf_writer {
    wkv *kvs;
    int64_t n_kv, cap_kv;
    wtensor *tensors;
    int64_t n_tensors, cap_tensors;
    wstate state;
    uint32_t alignment;
    char *path;
    mf_atomic_file out; /* the temporary file beside path (core/file.h) */
    int fd;             /* out.fd while writing */
    int64_t next_tensor;
    uint64_t pos; /* bytes written to the file (through buf) */
    wbuf buf;     /* pending bytes, flushed at WRITE_BUF */
};

/* ---- value encoding ---- */

static mf_status encode_str(wbuf *b, const char *p, uint64_t len) {
    mf_status s = wput(b, &len, 8);
    if (s == MF_OK && len > SIZE_MAX) return mf_fail(MF_ERR_ARG, "GGUF writer: string of %llu bytes", (unsigned long long)len);
    return s == MF_OK ? wput(b, p, (size_t)len) : s;
}

static mf_status encode_array(wbuf *b, const mf_gguf_value *v, int depth);

static mf_status encode_value(wbuf *b, const mf_gguf_value *v, int depth) {
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    float f32;
    switch (v->type) {
    case MF_GGUF_UINT8: case MF_GGUF_INT8: u8 = (uint8_t)v->u64; return wput(b, &u8, 1);
    case MF_GGUF_UINT16: case MF_GGUF_INT16: u16 = (uint16_t)v->u64; return wput(b, &u16, 2);
    case MF_GGUF_UINT32: case MF_GGUF_INT32: u32 = (uint32_t)v->u64; return wput(b, &u32, 4);
    case MF_GGUF_UINT64: case MF_GGUF_INT64: return wput(b, &v->u64, 8);
    case MF_GGUF_FLOAT32: f32 = (float)v->f64; return wput(b, &f32, 4);
    case MF_GGUF_FLOAT64: return wput(b, &v->f64, 8);
    case MF_GGUF_BOOL: u8 = v->b ? 1 : 0; return wput(b, &u8, 1);
    case MF_GGUF_STRING: return encode_str(b, v->str.ptr, v->str.len);
    case MF_GGUF_ARRAY: return encode_array(b, v, depth);
    default: return mf_fail(MF_ERR_ARG, "GGUF writer: value type id %d is not a GGUF value type (0..%d)", (int)v->type,
                            MF_GGUF_VTYPE_COUNT - 1);
    }
}

static mf_status encode_array(wbuf *b, const mf_gguf_value *v, int depth) {
    uint32_t et = (uint32_t)v->arr.type;
    uint64_t n = v->arr.n;
    if (et >= MF_GGUF_VTYPE_COUNT)
        return mf_fail(MF_ERR_ARG, "GGUF writer: array element type id %u is not a GGUF value type (0..%d)", et,
                       MF_GGUF_VTYPE_COUNT - 1);
    if (et == MF_GGUF_ARRAY && depth >= MF_GGUF_MAX_NESTING)
        return mf_fail(MF_ERR_ARG, "GGUF writer: arrays nested more than %d deep", MF_GGUF_MAX_NESTING);
    mf_status s = wput(b, &et, 4);
    if (s == MF_OK) s = wput(b, &n, 8);
    if (et == MF_GGUF_STRING) {
        for (uint64_t i = 0; s == MF_OK && i < n; i++) s = encode_str(b, v->arr.strs[i].ptr, v->arr.strs[i].len);
    } else if (et == MF_GGUF_ARRAY) {
        for (uint64_t i = 0; s == MF_OK && i < n; i++) {
            if (v->arr.items[i].type != MF_GGUF_ARRAY)
                return mf_fail(MF_ERR_ARG, "GGUF writer: element %llu of an array of arrays has type %s",
                               (unsigned long long)i, mf_gguf_vtype_name(v->arr.items[i].type));
            s = encode_array(b, &v->arr.items[i], depth + 1);
        }
    } else if (s == MF_OK) {
        uint64_t bytes;
        if (!mf_mul_u64(n, mf_gguf_vtype_size((mf_gguf_vtype)et), &bytes) || bytes > SIZE_MAX)
            return mf_fail(MF_ERR_ARG, "GGUF writer: array of %llu elements is too large", (unsigned long long)n);
        s = wput(b, v->arr.data, (size_t)bytes); /* packed little-endian, as the reader gives it */
    }
    return s;
}

/* ---- metadata ---- */

mf_status mf_gguf_writer_create(mf_gguf_writer **out) {
    *out = mf_calloc(1, sizeof **out);
    if (!*out) return MF_ERR_NOMEM;
    (*out)->fd = -1;
    (*out)->out.fd = -1;
    return MF_OK;
}

static mf_status check_collecting(const mf_gguf_writer *w, const char *what) {
    if (w->state == W_COLLECT) return MF_OK;
    return mf_fail(MF_ERR_ARG, "GGUF writer: %s after mf_gguf_writer_begin", what);
}

static mf_status check_name(const char *what, const char *name, size_t max) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > max)
        return mf_fail(MF_ERR_ARG, "GGUF writer: %s '%s' must be 1..%zu bytes long", what, name ? name : "(null)", max);
    return MF_OK;
}

mf_status mf_gguf_writer_set_value(mf_gguf_writer *w, const char *key, const mf_gguf_value *v) {
    mf_status s = check_collecting(w, "setting metadata");
    if (s == MF_OK) s = check_name("key", key, MF_GGUF_MAX_KEY);
    if (s != MF_OK) return s;
    wbuf enc = {0};
    if ((s = encode_value(&enc, v, 0)) != MF_OK) {
        free(enc.p);
        return mf_fail_context(s, "key '%s'", key);
    }
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kvs[i].key, key)) { /* replace in place, keeping the order */
            free(w->kvs[i].val.p);
            w->kvs[i].val = enc;
            w->kvs[i].type = v->type;
            return MF_OK;
        }
    }
    if (w->n_kv == w->cap_kv) {
        int64_t cap = w->cap_kv ? w->cap_kv * 2 : 16;
        wkv *kvs = mf_realloc(w->kvs, (size_t)cap * sizeof *kvs);
        if (!kvs) {
            free(enc.p);
            return MF_ERR_NOMEM;
        }
        w->kvs = kvs;
        w->cap_kv = cap;
    }
    char *k = mf_strdup(key);
    if (!k) {
        free(enc.p);
        return MF_ERR_NOMEM;
    }
    w->kvs[w->n_kv++] = (wkv){k, v->type, enc};
    return MF_OK;
}

mf_status mf_gguf_writer_set_u32(mf_gguf_writer *w, const char *key, uint32_t v) {
    mf_gguf_value val = {.type = MF_GGUF_UINT32, .u64 = v};
    return mf_gguf_writer_set_value(w, key, &val);
}

mf_status mf_gguf_writer_set_i32(mf_gguf_writer *w, const char *key, int32_t v) {
    mf_gguf_value val = {.type = MF_GGUF_INT32, .i64 = v};
    return mf_gguf_writer_set_value(w, key, &val);
}

mf_status mf_gguf_writer_set_u64(mf_gguf_writer *w, const char *key, uint64_t v) {
    mf_gguf_value val = {.type = MF_GGUF_UINT64, .u64 = v};
    return mf_gguf_writer_set_value(w, key, &val);
}

mf_status mf_gguf_writer_set_f32(mf_gguf_writer *w, const char *key, float v) {
    mf_gguf_value val = {.type = MF_GGUF_FLOAT32, .f64 = v};
    return mf_gguf_writer_set_value(w, key, &val);
}

mf_status mf_gguf_writer_set_bool(mf_gguf_writer *w, const char *key, bool v) {
    mf_gguf_value val = {.type = MF_GGUF_BOOL, .b = v};
    return mf_gguf_writer_set_value(w, key, &val);
}

mf_status mf_gguf_writer_set_str(mf_gguf_writer *w, const char *key, const char *v) {
    if (!v) return mf_fail(MF_ERR_ARG, "GGUF writer: key '%s': string is NULL", key ? key : "(null)");
    mf_gguf_value val = {.type = MF_GGUF_STRING, .str = {v, strlen(v)}};
    return mf_gguf_writer_set_value(w, key, &val);
}

mf_status mf_gguf_writer_remove(mf_gguf_writer *w, const char *key) {
    mf_status s = check_collecting(w, "removing metadata");
    if (s != MF_OK) return s;
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (!strcmp(w->kvs[i].key, key)) {
            free(w->kvs[i].key);
            free(w->kvs[i].val.p);
            memmove(&w->kvs[i], &w->kvs[i + 1], (size_t)(w->n_kv - i - 1) * sizeof *w->kvs);
            w->n_kv--;
            return MF_OK;
        }
    }
    return mf_fail(MF_ERR_NOT_FOUND, "GGUF writer: key '%s' is not set", key);
}

mf_status mf_gguf_writer_add_tensor(mf_gguf_writer *w, const char *name, mf_type type, uint32_t n_dims, const int64_t *ne) {
    mf_status s = check_collecting(w, "adding a tensor");
    if (s == MF_OK) s = check_name("tensor name", name, MF_GGUF_MAX_NAME);
    if (s != MF_OK) return s;
    const mf_type_traits *tr = mf_type_get_traits(type);
    if (!tr->blck_size) return mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s': type id %u is not a known GGML type", name, type);
    if (n_dims < 1 || n_dims > MF_GGUF_MAX_DIMS || !ne)
        return mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s': n_dims %u outside 1..%d", name, n_dims, MF_GGUF_MAX_DIMS);
    wtensor t = {.type = type, .n_dims = n_dims, .ne = {1, 1, 1, 1}};
    uint64_t rows = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 1) return mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s': ne[%u] = %lld must be >= 1", name, d, (long long)ne[d]);
        t.ne[d] = ne[d];
        if (d > 0 && !mf_mul_u64(rows, (uint64_t)ne[d], &rows))
            return mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s': shape overflows", name);
    }
    if (t.ne[0] % tr->blck_size)
        return mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s': row length %lld is not a multiple of %s's block size %lld", name,
                       (long long)t.ne[0], tr->name, (long long)tr->blck_size);
    uint64_t row;
    if (!mf_mul_u64((uint64_t)(t.ne[0] / tr->blck_size), tr->type_size, &row) || !mf_mul_u64(row, rows, &t.nbytes) ||
        t.nbytes > (uint64_t)INT64_MAX)
        return mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s': byte size overflows", name);
    for (int64_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name)) return mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s' declared twice", name);
    if (w->n_tensors == w->cap_tensors) {
        int64_t cap = w->cap_tensors ? w->cap_tensors * 2 : 64;
        wtensor *ts = mf_realloc(w->tensors, (size_t)cap * sizeof *ts);
        if (!ts) return MF_ERR_NOMEM;
        w->tensors = ts;
        w->cap_tensors = cap;
    }
    if (!(t.name = mf_strdup(name))) return MF_ERR_NOMEM;
    w->tensors[w->n_tensors++] = t;
    return MF_OK;
}

/* ---- output ---- */

static void discard_tmp(mf_gguf_writer *w) {
    mf_atomic_abort(&w->out);
    w->fd = -1;
}

/* Marks the writer failed and removes the temporary file; returns s (message already recorded). */
static mf_status abandon(mf_gguf_writer *w, mf_status s) {
    discard_tmp(w);
    w->state = W_FAILED;
    return s;
}

static mf_status flush(mf_gguf_writer *w) {
    size_t done = 0;
    while (done < w->buf.n) {
        ssize_t k = write(w->fd, w->buf.p + done, w->buf.n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return mf_fail(MF_ERR_IO, "writing '%s' (for '%s') at byte %llu: %s", w->out.tmp, w->path,
                           (unsigned long long)(w->pos + done), k < 0 ? strerror(errno) : "no progress");
        done += (size_t)k;
    }
    w->pos += done;
    w->buf.n = 0;
    return MF_OK;
}

static mf_status emit(mf_gguf_writer *w, const void *p, size_t n) {
    const uint8_t *src = p;
    while (n) {
        if (w->buf.n == w->buf.cap) {
            mf_status s = flush(w);
            if (s != MF_OK) return s;
        }
        size_t k = MF_MIN(n, w->buf.cap - w->buf.n);
        memcpy(w->buf.p + w->buf.n, src, k);
        w->buf.n += k;
        src += k;
        n -= k;
    }
    return MF_OK;
}

static mf_status pad(mf_gguf_writer *w) {
    static const uint8_t zeros[256];
    uint64_t at = w->pos + w->buf.n, to;
    if (!mf_align_up_u64(at, w->alignment, &to)) return mf_fail(MF_ERR_IO, "GGUF writer: file offset overflows");
    mf_status s = MF_OK;
    while (s == MF_OK && at < to) {
        size_t k = (size_t)MF_MIN(to - at, sizeof zeros);
        s = emit(w, zeros, k);
        at += k;
    }
    return s;
}

static mf_status resolve_alignment(mf_gguf_writer *w) {
    w->alignment = MF_GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, "general.alignment")) continue;
        uint32_t a = 0;
        if (w->kvs[i].type == MF_GGUF_UINT32) memcpy(&a, w->kvs[i].val.p, 4);
        if (w->kvs[i].type != MF_GGUF_UINT32 || a == 0 || (a & (a - 1)))
            return mf_fail(MF_ERR_ARG, "GGUF writer: general.alignment must be a uint32 power of two");
        w->alignment = a;
    }
    return MF_OK;
}

mf_status mf_gguf_writer_begin(mf_gguf_writer *w, const char *path) {
    mf_status s = check_collecting(w, "begin called again");
    if (s != MF_OK) return s;
    if (!path || !*path) return mf_fail(MF_ERR_ARG, "GGUF writer: empty output path");
    if ((s = resolve_alignment(w)) != MF_OK) return s;
    uint64_t off = 0;
    for (int64_t i = 0; i < w->n_tensors; i++) {
        w->tensors[i].offset = off;
        if (!mf_add_u64(off, w->tensors[i].nbytes, &off) || !mf_align_up_u64(off, w->alignment, &off))
            return mf_fail(MF_ERR_ARG, "GGUF writer: total tensor size overflows");
    }
    free(w->path);
    if (!(w->path = mf_strdup(path))) return MF_ERR_NOMEM;
    /* a temporary file in the output's directory, renamed over it when complete (core/file.h) */
    if ((s = mf_atomic_begin(&w->out, path))) return abandon(w, s);
    w->fd = w->out.fd;
    w->state = W_WRITING;
    w->pos = 0;
    w->next_tensor = 0;
    if (!w->buf.p) {
        w->buf.p = mf_malloc(WRITE_BUF);
        if (!w->buf.p) return abandon(w, MF_ERR_NOMEM);
        w->buf.cap = WRITE_BUF;
    }
    w->buf.n = 0;

    uint32_t version = 3;
    uint64_t nt = (uint64_t)w->n_tensors, nkv = (uint64_t)w->n_kv;
    s = emit(w, "GGUF", 4);
    if (s == MF_OK) s = emit(w, &version, 4);
    if (s == MF_OK) s = emit(w, &nt, 8);
    if (s == MF_OK) s = emit(w, &nkv, 8);
    for (int64_t i = 0; s == MF_OK && i < w->n_kv; i++) {
        uint64_t len = strlen(w->kvs[i].key);
        uint32_t t = (uint32_t)w->kvs[i].type;
        s = emit(w, &len, 8);
        if (s == MF_OK) s = emit(w, w->kvs[i].key, (size_t)len);
        if (s == MF_OK) s = emit(w, &t, 4);
        if (s == MF_OK) s = emit(w, w->kvs[i].val.p, w->kvs[i].val.n);
    }
    for (int64_t i = 0; s == MF_OK && i < w->n_tensors; i++) {
        const wtensor *t = &w->tensors[i];
        uint64_t len = strlen(t->name);
        uint32_t type = (uint32_t)t->type;
        s = emit(w, &len, 8);
        if (s == MF_OK) s = emit(w, t->name, (size_t)len);
        if (s == MF_OK) s = emit(w, &t->n_dims, 4);
        if (s == MF_OK) s = emit(w, t->ne, t->n_dims * sizeof t->ne[0]);
        if (s == MF_OK) s = emit(w, &type, 4);
        if (s == MF_OK) s = emit(w, &t->offset, 8);
    }
    if (s == MF_OK) s = pad(w);
    return s == MF_OK ? MF_OK : abandon(w, s);
}

mf_status mf_gguf_writer_write_tensor_data(mf_gguf_writer *w, int64_t i, const void *data, size_t nbytes) {
    if (w->state != W_WRITING) return mf_fail(MF_ERR_ARG, "GGUF writer: tensor data written outside begin..finish");
    if (i != w->next_tensor || i >= w->n_tensors)
        return abandon(w, mf_fail(MF_ERR_ARG, "GGUF writer: tensor %lld written, expected tensor %lld of %lld (declaration order)",
                                  (long long)i, (long long)w->next_tensor, (long long)w->n_tensors));
    const wtensor *t = &w->tensors[i];
    if (!data) return abandon(w, mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s': data is NULL", t->name));
    if (nbytes != t->nbytes)
        return abandon(w, mf_fail(MF_ERR_ARG, "GGUF writer: tensor '%s' needs %llu bytes, got %zu", t->name,
                                  (unsigned long long)t->nbytes, nbytes));
    MF_ASSERT(w->pos + w->buf.n >= t->offset); /* header and earlier tensors came first */
    mf_status s = emit(w, data, nbytes);
    if (s == MF_OK) s = pad(w);
    if (s != MF_OK) return abandon(w, s);
    w->next_tensor++;
    return MF_OK;
}

mf_status mf_gguf_writer_finish(mf_gguf_writer *w) {
    if (w->state != W_WRITING) return mf_fail(MF_ERR_ARG, "GGUF writer: finish without a successful begin");
    if (w->next_tensor != w->n_tensors)
        return abandon(w, mf_fail(MF_ERR_ARG, "GGUF writer: finish after %lld of %lld tensors' data", (long long)w->next_tensor,
                                  (long long)w->n_tensors));
    mf_status s = flush(w);
    if (s == MF_OK) s = mf_atomic_commit(&w->out);
    w->fd = -1;
    if (s != MF_OK) return abandon(w, s);
    w->state = W_DONE;
    return MF_OK;
}

void mf_gguf_writer_free(mf_gguf_writer *w) {
    if (!w) return;
    discard_tmp(w);
    for (int64_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        free(w->kvs[i].val.p);
    }
    free(w->kvs);
    for (int64_t i = 0; i < w->n_tensors; i++) free(w->tensors[i].name);
    free(w->tensors);
    free(w->buf.p);
    free(w->path);
    free(w);
}
