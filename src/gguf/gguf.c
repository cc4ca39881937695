/* gguf.c: the GGUF reader: maps a file (and every part of a split model) read-only and validates the
 * header, metadata, tensor infos and data section against the file size before any use.
 *
 * GGUF v2/v3 layout, all little-endian: "GGUF", u32 version, u64 n_tensors, u64 n_kv;
 * n_kv x {string key, u32 vtype, value}; n_tensors x {string name, u32 n_dims, u64 ne[n_dims],
 * u32 type, u64 offset}; zero padding to general.alignment; the data section, where each tensor's
 * bytes start at data_start + offset. A string is u64 length + bytes (no NUL); an array value is
 * u32 element vtype, u64 count, then the elements (an ARRAY element is again vtype + count + data). */
#include "gguf/gguf_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

#define HEADER_SIZE 24
#define MIN_KV_SIZE 14     /* u64 key length, 1 key byte, u32 vtype, 1 value byte */
#define MIN_TENSOR_SIZE 33 /* u64 name length, 1 name byte, u32 n_dims, one u64 ne, u32 type, u64 offset */
#define MAX_COUNT ((uint64_t)INT32_MAX)

typedef struct reader {
    mf_gguf *g;
    const uint8_t *base;
    uint64_t size, pos;
    const char *path;
    char ctx[MF_GGUF_MAX_NAME + 96]; /* what is being read, for messages: "key 'x' (at byte N)" */
} reader;

static mf_status fail(const reader *r, mf_status s, const char *fmt, ...) MF_PRINTF(3, 4);
static mf_status fail(const reader *r, mf_status s, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mf_fail(s, "%s: %s", r->path, msg);
}

/* Checks that n more bytes exist at the cursor. */
static mf_status need(const reader *r, uint64_t n, const char *what) {
    if (n <= r->size - r->pos) return MF_OK;
    return fail(r, MF_ERR_FORMAT, "%s: %s needs %llu bytes at byte %llu but the file ends at byte %llu (truncated?)",
                r->ctx, what, (unsigned long long)n, (unsigned long long)r->pos, (unsigned long long)r->size);
}

static uint32_t take_u32(reader *r) {
    uint32_t v;
    memcpy(&v, r->base + r->pos, 4);
    r->pos += 4;
    return v;
}

static uint64_t take_u64(reader *r) {
    uint64_t v;
    memcpy(&v, r->base + r->pos, 8);
    r->pos += 8;
    return v;
}

static mf_status read_u32(reader *r, const char *what, uint32_t *out) {
    mf_status s = need(r, 4, what);
    if (s == MF_OK) *out = take_u32(r);
    return s;
}

static mf_status read_u64(reader *r, const char *what, uint64_t *out) {
    mf_status s = need(r, 8, what);
    if (s == MF_OK) *out = take_u64(r);
    return s;
}

static mf_status read_str(reader *r, const char *what, mf_str *out) {
    uint64_t len;
    mf_status s = read_u64(r, what, &len);
    if (s != MF_OK) return s;
    if ((s = need(r, len, what)) != MF_OK) return s;
    out->ptr = (const char *)r->base + r->pos;
    out->len = len;
    r->pos += len;
    return MF_OK;
}

/* A key or tensor name: non-empty, at most max bytes, no NUL inside; copied NUL-terminated. */
static mf_status read_name(reader *r, const char *what, uint64_t max, const char **out) {
    mf_str str;
    uint64_t at = r->pos;
    mf_status s = read_str(r, what, &str);
    if (s != MF_OK) return s;
    if (str.len == 0) return fail(r, MF_ERR_FORMAT, "%s: %s at byte %llu is empty", r->ctx, what, (unsigned long long)at);
    if (str.len > max)
        return fail(r, MF_ERR_FORMAT, "%s: %s at byte %llu is %llu bytes long (limit %llu)", r->ctx, what,
                    (unsigned long long)at, (unsigned long long)str.len, (unsigned long long)max);
    if (memchr(str.ptr, 0, str.len))
        return fail(r, MF_ERR_FORMAT, "%s: %s at byte %llu contains a NUL byte", r->ctx, what, (unsigned long long)at);
    *out = mf_arena_strndup(&r->g->arena, str.ptr, str.len);
    return *out ? MF_OK : MF_ERR_NOMEM;
}

static mf_status read_value(reader *r, mf_gguf_vtype type, mf_gguf_value *v, int depth);

static mf_status check_vtype(const reader *r, uint32_t t, uint64_t at, const char *what) {
    if (t < MF_GGUF_VTYPE_COUNT) return MF_OK;
    return fail(r, MF_ERR_FORMAT, "%s: %s id %u at byte %llu is not a GGUF value type (0..%d)", r->ctx, what, t,
                (unsigned long long)at, MF_GGUF_VTYPE_COUNT - 1);
}

static mf_status read_array(reader *r, mf_gguf_value *v, int depth) {
    uint64_t at = r->pos, n, min_bytes;
    uint32_t et;
    mf_status s;
    if ((s = read_u32(r, "array element type", &et)) != MF_OK) return s;
    if ((s = check_vtype(r, et, at, "array element type")) != MF_OK) return s;
    if ((s = read_u64(r, "array length", &n)) != MF_OK) return s;
    if (et == MF_GGUF_ARRAY && depth >= MF_GGUF_MAX_NESTING)
        return fail(r, MF_ERR_FORMAT, "%s: arrays nested more than %d deep at byte %llu", r->ctx, MF_GGUF_MAX_NESTING,
                    (unsigned long long)at);
    /* Every element takes at least this many bytes, so n is bounded by the file before allocating. */
    uint64_t min_elem = et == MF_GGUF_STRING ? 8 : et == MF_GGUF_ARRAY ? 12 : mf_gguf_vtype_size((mf_gguf_vtype)et);
    if (!mf_mul_u64(n, min_elem, &min_bytes) || min_bytes > r->size - r->pos)
        return fail(r, MF_ERR_FORMAT, "%s: array of %llu %s elements at byte %llu does not fit in the file (%llu bytes left)",
                    r->ctx, (unsigned long long)n, mf_gguf_vtype_name((mf_gguf_vtype)et), (unsigned long long)at,
                    (unsigned long long)(r->size - r->pos));
    v->type = MF_GGUF_ARRAY;
    v->arr.type = (mf_gguf_vtype)et;
    v->arr.n = n;
    v->arr.data = r->base + r->pos;
    v->arr.strs = NULL;
    v->arr.items = NULL;
    if (et == MF_GGUF_STRING) {
        mf_str *strs = n ? mf_arena_alloc(&r->g->arena, n * sizeof *strs) : NULL;
        if (n && !strs) return MF_ERR_NOMEM;
        for (uint64_t i = 0; i < n; i++)
            if ((s = read_str(r, "array string", &strs[i])) != MF_OK) return s;
        v->arr.strs = strs;
    } else if (et == MF_GGUF_ARRAY) {
        mf_gguf_value *items = n ? mf_arena_alloc(&r->g->arena, n * sizeof *items) : NULL;
        if (n && !items) return MF_ERR_NOMEM;
        for (uint64_t i = 0; i < n; i++)
            if ((s = read_array(r, &items[i], depth + 1)) != MF_OK) return s;
        v->arr.items = items;
    } else {
        if (et == MF_GGUF_BOOL) {
            const uint8_t *b = r->base + r->pos;
            for (uint64_t i = 0; i < n; i++)
                if (b[i] > 1)
                    return fail(r, MF_ERR_FORMAT, "%s: bool array element %llu at byte %llu is %u (must be 0 or 1)",
                                r->ctx, (unsigned long long)i, (unsigned long long)(r->pos + i), b[i]);
        }
        r->pos += min_bytes;
    }
    return MF_OK;
}

static mf_status read_value(reader *r, mf_gguf_vtype type, mf_gguf_value *v, int depth) {
    mf_status s;
    v->type = type;
    if (type == MF_GGUF_STRING) return read_str(r, "string value", &v->str);
    if (type == MF_GGUF_ARRAY) return read_array(r, v, depth);
    if ((s = need(r, mf_gguf_vtype_size(type), "value")) != MF_OK) return s;
    const uint8_t *p = r->base + r->pos;
    uint8_t u8;
    int8_t i8;
    uint16_t u16;
    int16_t i16;
    uint32_t u32;
    int32_t i32;
    float f32;
    switch (type) {
    case MF_GGUF_UINT8: memcpy(&u8, p, 1); v->u64 = u8; break;
    case MF_GGUF_INT8: memcpy(&i8, p, 1); v->i64 = i8; break;
    case MF_GGUF_UINT16: memcpy(&u16, p, 2); v->u64 = u16; break;
    case MF_GGUF_INT16: memcpy(&i16, p, 2); v->i64 = i16; break;
    case MF_GGUF_UINT32: memcpy(&u32, p, 4); v->u64 = u32; break;
    case MF_GGUF_INT32: memcpy(&i32, p, 4); v->i64 = i32; break;
    case MF_GGUF_FLOAT32: memcpy(&f32, p, 4); v->f64 = f32; break;
    case MF_GGUF_UINT64: memcpy(&v->u64, p, 8); break;
    case MF_GGUF_INT64: memcpy(&v->i64, p, 8); break;
    case MF_GGUF_FLOAT64: memcpy(&v->f64, p, 8); break;
    case MF_GGUF_BOOL:
        if (*p > 1)
            return fail(r, MF_ERR_FORMAT, "%s: bool value at byte %llu is %u (must be 0 or 1)", r->ctx,
                        (unsigned long long)r->pos, *p);
        v->b = *p;
        break;
    default: MF_ASSERT(!"unreachable value type");
    }
    r->pos += mf_gguf_vtype_size(type);
    return MF_OK;
}

static mf_status read_header(reader *r, uint32_t *version, uint64_t *n_tensors, uint64_t *n_kv) {
    mf_status s;
    snprintf(r->ctx, sizeof r->ctx, "header");
    if ((s = need(r, 4, "magic")) != MF_OK) return s;
    if (memcmp(r->base, "GGUF", 4) != 0) {
        const uint8_t *m = r->base;
        return fail(r, MF_ERR_FORMAT, "not a GGUF file: magic at byte 0 is %02x %02x %02x %02x, expected 'GGUF' (47 47 55 46)",
                    m[0], m[1], m[2], m[3]);
    }
    r->pos = 4;
    if ((s = read_u32(r, "version", version)) != MF_OK) return s;
    uint32_t swapped = __builtin_bswap32(*version);
    if ((*version & 0xffff) == 0 && swapped >= 1 && swapped <= 3)
        return fail(r, MF_ERR_UNSUPPORTED, "big-endian GGUF file (version field at byte 4 reads %u byte-swapped); "
                    "minfer reads little-endian files only", swapped);
    if (*version < 2 || *version > 3)
        return fail(r, MF_ERR_UNSUPPORTED, "GGUF version %u at byte 4 is not supported (minfer reads versions 2 and 3)%s",
                    *version, *version == 1 ? "; convert the model again with a current converter" : "");
    if ((s = read_u64(r, "tensor count", n_tensors)) != MF_OK) return s;
    if ((s = read_u64(r, "metadata count", n_kv)) != MF_OK) return s;
    uint64_t a, b, total;
    if (*n_tensors > MAX_COUNT || *n_kv > MAX_COUNT || !mf_mul_u64(*n_tensors, MIN_TENSOR_SIZE, &a) ||
        !mf_mul_u64(*n_kv, MIN_KV_SIZE, &b) || !mf_add_u64(a, b, &total) || total > r->size - r->pos)
        return fail(r, MF_ERR_FORMAT, "header at byte 8 claims %llu tensors and %llu metadata entries, more than the "
                    "%llu bytes after the header can hold", (unsigned long long)*n_tensors, (unsigned long long)*n_kv,
                    (unsigned long long)(r->size - r->pos));
    return MF_OK;
}

typedef struct parsed {
    uint32_t version, alignment;
    uint64_t data_offset;
    mf_gguf_kv *kvs;
    int64_t n_kv;
    mf_gguf_index kv_index;
    mf_gguf_tensor *tensors;
    int64_t n_tensors;
} parsed;

static mf_status read_kvs(reader *r, parsed *out, uint64_t n_kv) {
    mf_status s;
    out->kvs = mf_arena_alloc(&r->g->arena, (n_kv ? n_kv : 1) * sizeof *out->kvs);
    if (!out->kvs) return MF_ERR_NOMEM;
    if ((s = mf_gguf_index_init(&out->kv_index, n_kv)) != MF_OK) return s;
    for (uint64_t i = 0; i < n_kv; i++) {
        mf_gguf_kv *kv = &out->kvs[i];
        kv->file_offset = r->pos;
        snprintf(r->ctx, sizeof r->ctx, "metadata entry %llu (at byte %llu)", (unsigned long long)i,
                 (unsigned long long)kv->file_offset);
        if ((s = read_name(r, "key", MF_GGUF_MAX_KEY, &kv->key)) != MF_OK) return s;
        snprintf(r->ctx, sizeof r->ctx, "key '%.*s' (at byte %llu)", MF_GGUF_MAX_NAME, kv->key,
                 (unsigned long long)kv->file_offset);
        uint32_t t;
        uint64_t at = r->pos;
        if ((s = read_u32(r, "value type", &t)) != MF_OK) return s;
        if ((s = check_vtype(r, t, at, "value type")) != MF_OK) return s;
        if ((s = read_value(r, (mf_gguf_vtype)t, &kv->value, 0)) != MF_OK) return s;
        int64_t dup = mf_gguf_index_insert(&out->kv_index, out->kvs, sizeof *out->kvs, (uint32_t)i);
        if (dup >= 0)
            return fail(r, MF_ERR_FORMAT, "%s repeats the key of the entry at byte %llu", r->ctx,
                        (unsigned long long)out->kvs[dup].file_offset);
        out->n_kv = (int64_t)i + 1;
    }
    out->alignment = MF_GGUF_DEFAULT_ALIGNMENT;
    int64_t ai = mf_gguf_index_find(&out->kv_index, out->kvs, sizeof *out->kvs, "general.alignment");
    if (ai >= 0) {
        const mf_gguf_kv *kv = &out->kvs[ai];
        if (kv->value.type != MF_GGUF_UINT32)
            return fail(r, MF_ERR_FORMAT, "key 'general.alignment' (at byte %llu) has type %s, expected uint32",
                        (unsigned long long)kv->file_offset, mf_gguf_vtype_name(kv->value.type));
        uint64_t a = kv->value.u64;
        if (a == 0 || (a & (a - 1)))
            return fail(r, MF_ERR_FORMAT, "key 'general.alignment' (at byte %llu) is %llu; it must be a power of two",
                        (unsigned long long)kv->file_offset, (unsigned long long)a);
        out->alignment = (uint32_t)a;
    }
    return MF_OK;
}

static mf_status read_tensor_info(reader *r, mf_gguf_tensor *t, uint32_t part) {
    mf_status s;
    uint32_t n_dims, type;
    memset(t, 0, sizeof *t);
    t->part = part;
    t->info_offset = r->pos;
    if ((s = read_name(r, "tensor name", MF_GGUF_MAX_NAME, &t->name)) != MF_OK) return s;
    snprintf(r->ctx, sizeof r->ctx, "tensor '%s' (info at byte %llu)", t->name, (unsigned long long)t->info_offset);
    if ((s = read_u32(r, "n_dims", &n_dims)) != MF_OK) return s;
    if (n_dims < 1 || n_dims > MF_GGUF_MAX_DIMS)
        return fail(r, MF_ERR_FORMAT, "%s: n_dims is %u, outside 1..%d", r->ctx, n_dims, MF_GGUF_MAX_DIMS);
    t->n_dims = n_dims;
    uint64_t n_elem = 1;
    for (int d = 0; d < MF_GGUF_MAX_DIMS; d++) {
        uint64_t ne = 1;
        if ((uint32_t)d < n_dims && (s = read_u64(r, "dimension", &ne)) != MF_OK) return s;
        if (ne < 1 || ne > (uint64_t)INT64_MAX)
            return fail(r, MF_ERR_FORMAT, "%s: dimension ne[%d] is %lld; every dimension must be at least 1", r->ctx, d,
                        (long long)ne);
        if (!mf_mul_u64(n_elem, ne, &n_elem) || n_elem > (uint64_t)INT64_MAX)
            return fail(r, MF_ERR_FORMAT, "%s: the element count overflows 64 bits at dimension ne[%d] = %lld", r->ctx, d,
                        (long long)ne);
        t->ne[d] = (int64_t)ne;
    }
    uint64_t at = r->pos;
    if ((s = read_u32(r, "type", &type)) != MF_OK) return s;
    const mf_type_traits *tr = mf_type_get_traits(type);
    if (!tr->blck_size)
        return fail(r, MF_ERR_FORMAT, "%s: type id %u at byte %llu is not a known GGML type", r->ctx, type,
                    (unsigned long long)at);
    t->type = (mf_type)type;
    if (t->ne[0] % tr->blck_size)
        return fail(r, MF_ERR_FORMAT, "%s: row length ne[0] = %lld is not a multiple of %s's block size %lld", r->ctx,
                    (long long)t->ne[0], tr->name, (long long)tr->blck_size);
    uint64_t row;
    if (!mf_mul_u64((uint64_t)(t->ne[0] / tr->blck_size), tr->type_size, &row) ||
        !mf_mul_u64(row, (uint64_t)(t->ne[1] * t->ne[2] * t->ne[3]), &t->nbytes))
        return fail(r, MF_ERR_FORMAT, "%s: the byte size of %lld x %lld x %lld x %lld %s values overflows 64 bits", r->ctx,
                    (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2], (long long)t->ne[3], tr->name);
    return read_u64(r, "data offset", &t->offset);
}

typedef struct span {
    uint64_t start, end;
    int64_t i;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Offsets aligned, every tensor inside the data section, no two overlapping. */
static mf_status check_data(reader *r, parsed *out) {
    uint64_t data_size = out->data_offset <= r->size ? r->size - out->data_offset : 0;
    for (int64_t i = 0; i < out->n_tensors; i++) {
        mf_gguf_tensor *t = &out->tensors[i];
        if (t->offset % out->alignment)
            return fail(r, MF_ERR_FORMAT, "tensor '%s' (info at byte %llu): data offset %llu is not a multiple of the "
                        "alignment %u", t->name, (unsigned long long)t->info_offset, (unsigned long long)t->offset,
                        out->alignment);
        if (t->offset > data_size || t->nbytes > data_size - t->offset)
            return fail(r, MF_ERR_FORMAT, "tensor '%s' (info at byte %llu): data at offset %llu, %llu bytes, lies outside "
                        "the data section (%llu bytes from byte %llu)", t->name, (unsigned long long)t->info_offset,
                        (unsigned long long)t->offset, (unsigned long long)t->nbytes, (unsigned long long)data_size,
                        (unsigned long long)out->data_offset);
        t->data = r->base + out->data_offset + t->offset;
    }
    if (out->n_tensors < 2) return MF_OK;
    span *sp = mf_malloc((size_t)out->n_tensors * sizeof *sp);
    if (!sp) return MF_ERR_NOMEM;
    for (int64_t i = 0; i < out->n_tensors; i++)
        sp[i] = (span){out->tensors[i].offset, out->tensors[i].offset + out->tensors[i].nbytes, i};
    qsort(sp, (size_t)out->n_tensors, sizeof *sp, span_cmp);
    mf_status s = MF_OK;
    for (int64_t i = 1; i < out->n_tensors && s == MF_OK; i++) {
        if (sp[i].start < sp[i - 1].end) {
            const mf_gguf_tensor *a = &out->tensors[sp[i - 1].i], *b = &out->tensors[sp[i].i];
            s = fail(r, MF_ERR_FORMAT, "tensor '%s' (info at byte %llu): data at offset %llu overlaps tensor '%s' "
                     "(data at offset %llu, %llu bytes)", b->name, (unsigned long long)b->info_offset,
                     (unsigned long long)b->offset, a->name, (unsigned long long)a->offset,
                     (unsigned long long)a->nbytes);
        }
    }
    free(sp);
    return s;
}

/* Parses part `part` of g (its base, size and path already set). */
static mf_status parse_part(mf_gguf *g, uint32_t part, parsed *out) {
    mf_gguf_part *p = &g->parts[part];
    reader r = {.g = g, .base = p->base, .size = p->size, .path = p->path};
    uint64_t n_tensors = 0, n_kv = 0;
    mf_status s;
    memset(out, 0, sizeof *out);
    if ((s = read_header(&r, &out->version, &n_tensors, &n_kv)) != MF_OK) return s;
    if ((s = read_kvs(&r, out, n_kv)) != MF_OK) return s;
    out->tensors = mf_arena_alloc(&g->arena, (n_tensors ? n_tensors : 1) * sizeof *out->tensors);
    if (!out->tensors) return MF_ERR_NOMEM;
    for (uint64_t i = 0; i < n_tensors; i++) {
        snprintf(r.ctx, sizeof r.ctx, "tensor info %llu (at byte %llu)", (unsigned long long)i, (unsigned long long)r.pos);
        if ((s = read_tensor_info(&r, &out->tensors[i], part)) != MF_OK) return s;
        out->n_tensors = (int64_t)i + 1;
    }
    if (!mf_align_up_u64(r.pos, out->alignment, &out->data_offset) || (n_tensors && out->data_offset > r.size))
        return fail(&r, MF_ERR_FORMAT, "the data section would start at byte %llu (tensor infos end at byte %llu, aligned "
                    "to %u) but the file ends at byte %llu", (unsigned long long)out->data_offset,
                    (unsigned long long)r.pos, out->alignment, (unsigned long long)r.size);
    p->data_offset = out->data_offset;
    p->alignment = out->alignment;
    return check_data(&r, out);
}

static const uint8_t empty_file[1];

/* The whole file read into anonymous memory in 2 MiB pages where the kernel gives them (madvise;
 * weights streamed every token then cost far fewer TLB misses than in the file mapping's 4 KiB
 * pages), read-only afterwards. */
static mf_status read_file(mf_gguf_part *p, int fd, const char *path) {
    const size_t huge = (size_t)2 << 20, len = ((size_t)p->size + huge - 1) & ~(huge - 1);
    void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return mf_fail(MF_ERR_NOMEM, "cannot allocate %llu bytes to read '%s' into: %s", (unsigned long long)len, path,
                       strerror(errno));
#if defined(MADV_HUGEPAGE)
    madvise(m, len, MADV_HUGEPAGE); /* a hint: without huge pages the copy still works */
#endif
    for (size_t done = 0; done < (size_t)p->size;) {
        const ssize_t n = read(fd, (uint8_t *)m + done, MF_MIN((size_t)p->size - done, (size_t)1 << 30));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int e = n < 0 ? errno : 0;
            munmap(m, len);
            return mf_fail(MF_ERR_IO, "cannot read '%s' at byte %llu of %llu: %s", path, (unsigned long long)done,
                           (unsigned long long)p->size, e ? strerror(e) : "the file got shorter");
        }
        done += (size_t)n;
    }
    mprotect(m, len, PROT_READ);
    p->base = m;
    p->map_len = len;
    p->mapped = true;
    return MF_OK;
}

/* Maps a file read-only at a 2 MiB-aligned address, so each 2 MiB of the file can take one page
 * table entry where the page cache holds it in 2 MiB pages (see gguf_pages.c), and asks for such
 * pages when the file is read in through the mapping. MAP_FAILED (errno set) on failure. */
static void *map_aligned(int fd, size_t size) {
    const size_t huge = MF_GGUF_HUGE_PAGE, page = (size_t)sysconf(_SC_PAGESIZE), len = (size + page - 1) & ~(page - 1);
    uint8_t *r = mmap(NULL, len + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0); /* no room to align */
    uint8_t *a = (uint8_t *)(((uintptr_t)r + huge - 1) & ~(uintptr_t)(huge - 1));
    void *m = mmap(a, size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0);
    if (m == MAP_FAILED) {
        const int e = errno;
        munmap(r, len + huge);
        errno = e;
        return m;
    }
    if (a > r) munmap(r, (size_t)(a - r)); /* the reserve's unused head and tail */
    munmap(a + len, (size_t)(r + huge - a));
#if defined(MADV_HUGEPAGE)
    madvise(m, size, MADV_HUGEPAGE); /* a hint: without it the mapping works the same */
#endif
    return m;
}

static mf_status map_file(mf_gguf_part *p, const char *path, bool read_into_memory) {
    p->path = mf_strdup(path);
    if (!p->path) return MF_ERR_NOMEM;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return mf_fail(MF_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return mf_fail(MF_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return mf_fail(MF_ERR_IO, "'%s' is not a regular file", path);
    }
    p->size = (uint64_t)st.st_size;
    p->dev = (uint64_t)st.st_dev;
    p->ino = (uint64_t)st.st_ino;
    if (p->size == 0) { /* mmap refuses empty files; the parser reports the missing header */
        close(fd);
        p->base = empty_file;
        return MF_OK;
    }
    if (read_into_memory) {
        mf_status rs = read_file(p, fd, path);
        close(fd);
        return rs;
    }
    void *m = map_aligned(fd, (size_t)p->size);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED) return mf_fail(MF_ERR_IO, "cannot map '%s' (%llu bytes): %s", path, (unsigned long long)p->size, strerror(e));
    p->base = m;
    p->map_len = (size_t)p->size;
    p->mapped = true;
    return MF_OK;
}

void mf_gguf_free(mf_gguf *g) {
    if (!g) return;
    for (uint32_t i = 0; i < g->n_parts; i++) {
        if (g->parts[i].mapped) munmap((void *)g->parts[i].base, g->parts[i].map_len);
        free(g->parts[i].path);
    }
    free(g->parts);
    mf_gguf_index_free(&g->kv_index);
    mf_gguf_index_free(&g->tensor_index);
    mf_arena_free(&g->arena);
    free(g);
}

/* An integer split key of a part: *present false when absent; any other type is an error. */
static mf_status split_key(const mf_gguf_part *p, const parsed *pp, const char *key, uint64_t *out, bool *present) {
    int64_t i = mf_gguf_index_find(&pp->kv_index, pp->kvs, sizeof *pp->kvs, key);
    *present = i >= 0;
    *out = 0;
    if (i < 0) return MF_OK;
    const mf_gguf_kv *kv = &pp->kvs[i];
    if (!mf_gguf_value_as_u64(&kv->value, out))
        return mf_fail(MF_ERR_FORMAT, "%s: key '%s' (at byte %llu) must be a non-negative integer, found %s", p->path, key,
                       (unsigned long long)kv->file_offset, mf_gguf_vtype_name(kv->value.type));
    return MF_OK;
}

/* Maps and parses parts 1..count-1 of a split model whose part 0 is g->parts[0], appending their
 * tensors' parsed infos to list[1..]. Sibling names replace the "-00001-of-NNNNN.gguf" tail. */
static mf_status open_other_parts(mf_gguf *g, uint32_t count, parsed *list) {
    const char *path0 = g->parts[0].path;
    char tail[64];
    snprintf(tail, sizeof tail, "-%05u-of-%05u.gguf", 1u, count);
    size_t n = strlen(path0), nt = strlen(tail);
    if (n < nt || strcmp(path0 + n - nt, tail) != 0)
        return mf_fail(MF_ERR_FORMAT, "%s: split model with split.count = %u, but the file name does not end in '%s', so "
                       "the other parts cannot be found", path0, count, tail);
    mf_gguf_part *parts = mf_realloc(g->parts, count * sizeof *parts);
    if (!parts) return MF_ERR_NOMEM;
    g->parts = parts;
    for (uint32_t i = 1; i < count; i++) {
        mf_gguf_part *p = &g->parts[i];
        memset(p, 0, sizeof *p);
        g->n_parts = i + 1;
        char *path = mf_malloc(n + 1);
        if (!path) return MF_ERR_NOMEM;
        memcpy(path, path0, n - nt);
        snprintf(path + n - nt, nt + 1, "-%05u-of-%05u.gguf", i + 1, count);
        mf_status s = map_file(p, path, g->read_into_memory);
        free(path);
        uint64_t no = 0, cnt = 0;
        bool has_no = false, has_cnt = false;
        if (s == MF_OK) s = parse_part(g, i, &list[i]);
        if (s == MF_OK) s = split_key(p, &list[i], "split.no", &no, &has_no);
        if (s == MF_OK) s = split_key(p, &list[i], "split.count", &cnt, &has_cnt);
        mf_gguf_index_free(&list[i].kv_index); /* only part 1's metadata is kept */
        if (s != MF_OK) return s;
        if (!has_no || no != i)
            return mf_fail(MF_ERR_FORMAT, "%s: expected split.no = %u for part %u of %u, found %s%llu", p->path, i, i + 1,
                           count, has_no ? "" : "none ", (unsigned long long)no);
        if (!has_cnt || cnt != count)
            return mf_fail(MF_ERR_FORMAT, "%s: split.count is %s%llu but part 1 says %u", p->path, has_cnt ? "" : "missing ",
                           (unsigned long long)cnt, count);
    }
    return MF_OK;
}

/* Common to file and memory opening: parse part 0 (already in g->parts[0]), follow splits when
 * follow_splits, then merge every part's tensors and index them. */
static mf_status load(mf_gguf *g, bool follow_splits) {
    parsed p0, *list = &p0;
    mf_status s = parse_part(g, 0, &p0);
    g->kv_index = p0.kv_index; /* owned by g from here, even on failure */
    if (s != MF_OK) return s;
    g->version = p0.version;
    g->kvs = p0.kvs;
    g->n_kv = p0.n_kv;

    uint64_t count, no, tcount;
    bool has_count, has_no, has_tcount;
    const mf_gguf_part *part0 = &g->parts[0]; /* re-read after the parts array grows */
    if ((s = split_key(part0, &p0, "split.count", &count, &has_count)) != MF_OK) return s;
    if ((s = split_key(part0, &p0, "split.no", &no, &has_no)) != MF_OK) return s;
    if ((s = split_key(part0, &p0, "split.tensors.count", &tcount, &has_tcount)) != MF_OK) return s;
    if (!has_count) count = 1;
    if (count < 1 || count > MF_GGUF_MAX_PARTS)
        return mf_fail(MF_ERR_FORMAT, "%s: split.count is %llu, outside 1..%d", part0->path, (unsigned long long)count,
                       MF_GGUF_MAX_PARTS);
    if (no >= count)
        return mf_fail(MF_ERR_FORMAT, "%s: split.no is %llu but split.count is %llu (split.no counts from 0)", part0->path,
                       (unsigned long long)no, (unsigned long long)count);
    if (follow_splits && no != 0)
        return mf_fail(MF_ERR_ARG, "%s is part %llu of a %llu-part split model; open part 1 (the -00001-of-%05llu.gguf file)",
                       part0->path, (unsigned long long)no + 1, (unsigned long long)count, (unsigned long long)count);

    uint32_t n_parts = follow_splits ? (uint32_t)count : 1;
    if (n_parts > 1) {
        list = mf_calloc(n_parts, sizeof *list);
        if (!list) return MF_ERR_NOMEM;
        list[0] = p0;
        s = open_other_parts(g, n_parts, list);
        if (s != MF_OK) {
            free(list);
            return s;
        }
        part0 = &g->parts[0]; /* g->parts moved */
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < n_parts; i++) total += (uint64_t)list[i].n_tensors; /* each < 2^31 */
    if (total > MAX_COUNT) s = mf_fail(MF_ERR_FORMAT, "%s: %llu tensors in all parts (limit %llu)", part0->path,
                                       (unsigned long long)total, (unsigned long long)MAX_COUNT);
    else if (has_tcount && (n_parts > 1 || count == 1) && tcount != total)
        s = mf_fail(MF_ERR_FORMAT, "%s: split.tensors.count is %llu but the %u part(s) hold %llu tensors", part0->path,
                    (unsigned long long)tcount, n_parts, (unsigned long long)total);
    if (s == MF_OK && n_parts > 1) {
        g->tensors = mf_arena_alloc(&g->arena, total * sizeof *g->tensors);
        if (!g->tensors) s = MF_ERR_NOMEM;
        for (uint32_t i = 0, at = 0; s == MF_OK && i < n_parts; i++) {
            memcpy(g->tensors + at, list[i].tensors, (size_t)list[i].n_tensors * sizeof *g->tensors);
            at += (uint32_t)list[i].n_tensors;
        }
    } else {
        g->tensors = p0.tensors;
    }
    if (list != &p0) free(list);
    if (s != MF_OK) return s;
    g->n_tensors = (int64_t)total;
    if ((s = mf_gguf_index_init(&g->tensor_index, total)) != MF_OK) return s;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        int64_t dup = mf_gguf_index_insert(&g->tensor_index, g->tensors, sizeof *g->tensors, (uint32_t)i);
        if (dup >= 0) {
            const mf_gguf_tensor *a = &g->tensors[dup], *b = &g->tensors[i];
            return mf_fail(MF_ERR_FORMAT, "%s: tensor '%s' (info at byte %llu) repeats the name of the tensor at byte %llu%s%s",
                           g->parts[b->part].path, b->name, (unsigned long long)b->info_offset,
                           (unsigned long long)a->info_offset, a->part != b->part ? " of " : "",
                           a->part != b->part ? g->parts[a->part].path : "");
        }
    }
    return MF_OK;
}

/* Opening, for a file (path) or a caller's memory image (data, size, labelled name). */
static mf_status open_common(const char *path, const void *data, size_t size, const char *name, unsigned flags,
                             mf_gguf **out) {
    *out = NULL;
    mf_gguf *g = mf_calloc(1, sizeof *g);
    if (!g) return MF_ERR_NOMEM;
    g->read_into_memory = (flags & MF_GGUF_OPEN_READ) != 0;
    g->arena.block_size = MF_GGUF_ARENA_BLOCK;
    g->parts = mf_calloc(1, sizeof *g->parts);
    mf_status s = g->parts ? MF_OK : MF_ERR_NOMEM;
    if (s == MF_OK) {
        g->n_parts = 1;
        if (path) {
            s = map_file(&g->parts[0], path, g->read_into_memory);
        } else {
            g->parts[0].path = mf_strdup(name ? name : "<memory>");
            g->parts[0].base = data ? data : empty_file;
            g->parts[0].size = size;
            s = g->parts[0].path ? MF_OK : MF_ERR_NOMEM;
        }
    }
    if (s == MF_OK) s = load(g, path != NULL);
    if (s != MF_OK) {
        mf_gguf_free(g);
        return s;
    }
    *out = g;
    return MF_OK;
}

mf_status mf_gguf_open_ex(const char *path, unsigned flags, mf_gguf **out) {
    if (!path) {
        *out = NULL;
        return mf_fail(MF_ERR_ARG, "mf_gguf_open: path is NULL");
    }
    return open_common(path, NULL, 0, NULL, flags, out);
}

mf_status mf_gguf_open(const char *path, mf_gguf **out) { return mf_gguf_open_ex(path, 0, out); }

mf_status mf_gguf_open_memory(const void *data, size_t size, const char *name, mf_gguf **out) {
    if (!data && size) {
        *out = NULL;
        return mf_fail(MF_ERR_ARG, "mf_gguf_open_memory: data is NULL");
    }
    return open_common(NULL, data, size, name, 0, out);
}
