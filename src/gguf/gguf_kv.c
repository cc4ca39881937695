/* gguf_kv.c: read access to a parsed GGUF: metadata lookup through the key index, typed accessors
 * (get_*: absent is an error; find_*: absent gives the default), tensors by index or name. */
#include "gguf/gguf_internal.h"
#include "core/file.h"

#include <stdio.h>
#include <stdlib.h>

static const char *const vtype_names[MF_GGUF_VTYPE_COUNT] = {
    [MF_GGUF_UINT8] = "uint8",     [MF_GGUF_INT8] = "int8",   [MF_GGUF_UINT16] = "uint16",
    [MF_GGUF_INT16] = "int16",     [MF_GGUF_UINT32] = "uint32", [MF_GGUF_INT32] = "int32",
    [MF_GGUF_FLOAT32] = "float32", [MF_GGUF_BOOL] = "bool",   [MF_GGUF_STRING] = "string",
    [MF_GGUF_ARRAY] = "array",     [MF_GGUF_UINT64] = "uint64", [MF_GGUF_INT64] = "int64",
    [MF_GGUF_FLOAT64] = "float64",
};

const char *mf_gguf_vtype_name(mf_gguf_vtype t) {
    return (unsigned)t < MF_GGUF_VTYPE_COUNT ? vtype_names[t] : "unknown";
}

bool mf_gguf_vtype_is_unsigned(mf_gguf_vtype t) {
    return t == MF_GGUF_UINT8 || t == MF_GGUF_UINT16 || t == MF_GGUF_UINT32 || t == MF_GGUF_UINT64;
}

bool mf_gguf_vtype_is_signed(mf_gguf_vtype t) {
    return t == MF_GGUF_INT8 || t == MF_GGUF_INT16 || t == MF_GGUF_INT32 || t == MF_GGUF_INT64;
}

bool mf_gguf_value_as_u64(const mf_gguf_value *v, uint64_t *out) {
    if (mf_gguf_vtype_is_unsigned(v->type)) return *out = v->u64, true;
    if (mf_gguf_vtype_is_signed(v->type) && v->i64 >= 0) return *out = (uint64_t)v->i64, true;
    return false;
}

bool mf_gguf_value_as_i64(const mf_gguf_value *v, int64_t *out) {
    if (mf_gguf_vtype_is_signed(v->type)) return *out = v->i64, true;
    if (mf_gguf_vtype_is_unsigned(v->type) && v->u64 <= (uint64_t)INT64_MAX) return *out = (int64_t)v->u64, true;
    return false;
}

bool mf_gguf_value_equal(const mf_gguf_value *a, const mf_gguf_value *b) {
    if (a->type != b->type) return false;
    switch (a->type) {
    case MF_GGUF_STRING: return a->str.len == b->str.len && !memcmp(a->str.ptr, b->str.ptr, a->str.len);
    case MF_GGUF_BOOL: return a->b == b->b;
    case MF_GGUF_FLOAT32: case MF_GGUF_FLOAT64: return !memcmp(&a->f64, &b->f64, sizeof a->f64);
    case MF_GGUF_ARRAY:
        if (a->arr.type != b->arr.type || a->arr.n != b->arr.n) return false;
        for (uint64_t i = 0; i < a->arr.n; i++) {
            if (a->arr.type == MF_GGUF_STRING) {
                const mf_str *x = &a->arr.strs[i], *y = &b->arr.strs[i];
                if (x->len != y->len || memcmp(x->ptr, y->ptr, x->len)) return false;
            } else if (a->arr.type == MF_GGUF_ARRAY) {
                if (!mf_gguf_value_equal(&a->arr.items[i], &b->arr.items[i])) return false;
            }
        }
        if (a->arr.type == MF_GGUF_STRING || a->arr.type == MF_GGUF_ARRAY || a->arr.n == 0) return true;
        return !memcmp(a->arr.data, b->arr.data, a->arr.n * mf_gguf_vtype_size(a->arr.type));
    default: return a->u64 == b->u64; /* integers: u64 and i64 share the bits */
    }
}

bool mf_gguf_arr_get_i64(const mf_gguf_value *arr, uint64_t i, int64_t *out) {
    if (arr->type != MF_GGUF_ARRAY || i >= arr->arr.n) return false;
    mf_gguf_vtype t = arr->arr.type;
    if (!mf_gguf_vtype_is_signed(t) && !mf_gguf_vtype_is_unsigned(t) && t != MF_GGUF_BOOL) return false;
    size_t es = mf_gguf_vtype_size(t);
    const uint8_t *p = (const uint8_t *)arr->arr.data + i * es;
    uint64_t u = 0;
    memcpy(&u, p, es); /* little-endian host: the low bytes */
    if (mf_gguf_vtype_is_signed(t) && es < 8) {
        unsigned shift = (unsigned)(64 - 8 * es);
        *out = (int64_t)(u << shift) >> shift; /* sign-extend (arithmetic shift, as gcc and clang do) */
    } else {
        *out = (int64_t)u; /* UINT64 above INT64_MAX wraps: callers of huge ids check the range */
    }
    return true;
}

bool mf_gguf_arr_get_f64(const mf_gguf_value *arr, uint64_t i, double *out) {
    if (arr->type != MF_GGUF_ARRAY || i >= arr->arr.n) return false;
    const uint8_t *p = arr->arr.data;
    if (arr->arr.type == MF_GGUF_FLOAT32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        *out = f;
    } else if (arr->arr.type == MF_GGUF_FLOAT64) {
        memcpy(out, p + 8 * i, 8);
    } else {
        return false;
    }
    return true;
}

uint32_t mf_gguf_version(const mf_gguf *g) { return g->version; }
uint32_t mf_gguf_alignment(const mf_gguf *g) { return g->parts[0].alignment; }
uint32_t mf_gguf_n_parts(const mf_gguf *g) { return g->n_parts; }
const char *mf_gguf_part_path(const mf_gguf *g, uint32_t part) { return part < g->n_parts ? g->parts[part].path : NULL; }

void mf_gguf_fingerprint(const mf_gguf *g, char out[33]) {
    /* every part's header (metadata and tensor infos), then the first and last 4 KiB of every
     * tensor's data: cheap to read, and a different file of the same layout differs there */
    mf_hash h[2];
    mf_hash_init(&h[0], 0x6D696E666572ull);
    mf_hash_init(&h[1], 0x66696E6765727072ull);
    for (uint32_t p = 0; p < g->n_parts; p++)
        for (int k = 0; k < 2; k++) mf_hash_update(&h[k], g->parts[p].base, (size_t)g->parts[p].data_offset);
    for (int64_t i = 0; i < g->n_tensors; i++) {
        const mf_gguf_tensor *t = &g->tensors[i];
        const size_t n = (size_t)MF_MIN(t->nbytes, 4096);
        for (int k = 0; k < 2; k++) {
            mf_hash_update(&h[k], t->data, n);
            mf_hash_update(&h[k], (const uint8_t *)t->data + t->nbytes - n, n);
        }
    }
    snprintf(out, 33, "%016llx%016llx", (unsigned long long)mf_hash_final(&h[0]), (unsigned long long)mf_hash_final(&h[1]));
}

uint64_t mf_gguf_file_size(const mf_gguf *g) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < g->n_parts; i++) n += g->parts[i].size;
    return n;
}

int64_t mf_gguf_n_kv(const mf_gguf *g) { return g->n_kv; }
const mf_gguf_kv *mf_gguf_kv_at(const mf_gguf *g, int64_t i) { return i >= 0 && i < g->n_kv ? &g->kvs[i] : NULL; }

const mf_gguf_kv *mf_gguf_find_kv(const mf_gguf *g, const char *key) {
    int64_t i = mf_gguf_index_find(&g->kv_index, g->kvs, sizeof *g->kvs, key);
    return i >= 0 ? &g->kvs[i] : NULL;
}

int64_t mf_gguf_n_tensors(const mf_gguf *g) { return g->n_tensors; }
const mf_gguf_tensor *mf_gguf_tensor_at(const mf_gguf *g, int64_t i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const mf_gguf_tensor *mf_gguf_find_tensor(const mf_gguf *g, const char *name) {
    int64_t i = mf_gguf_index_find(&g->tensor_index, g->tensors, sizeof *g->tensors, name);
    return i >= 0 ? &g->tensors[i] : NULL;
}

/* ---- typed accessors ---- */

static mf_status wrong_type(const mf_gguf_kv *kv, const char *expected) {
    const char *actual = mf_gguf_vtype_name(kv->value.type);
    if (kv->value.type == MF_GGUF_ARRAY)
        return mf_fail(MF_ERR_TYPE, "key '%s' (at byte %llu): expected %s, found array of %s", kv->key,
                       (unsigned long long)kv->file_offset, expected, mf_gguf_vtype_name(kv->value.arr.type));
    return mf_fail(MF_ERR_TYPE, "key '%s' (at byte %llu): expected %s, found %s", kv->key,
                   (unsigned long long)kv->file_offset, expected, actual);
}

/* The entry for key, or NULL: with MF_ERR_NOT_FOUND recorded when required. */
static const mf_gguf_kv *lookup(const mf_gguf *g, const char *key, const char *expected, bool required, mf_status *s) {
    const mf_gguf_kv *kv = mf_gguf_find_kv(g, key);
    *s = MF_OK;
    if (!kv && required) *s = mf_fail(MF_ERR_NOT_FOUND, "key '%s' (%s) is missing from %s", key, expected, g->parts[0].path);
    return kv;
}

static mf_status int_value(const mf_gguf_kv *kv, uint64_t max, const char *expected, uint64_t *out) {
    if (!mf_gguf_vtype_is_signed(kv->value.type) && !mf_gguf_vtype_is_unsigned(kv->value.type))
        return wrong_type(kv, expected);
    if (!mf_gguf_value_as_u64(&kv->value, out) || *out > max) {
        if (mf_gguf_vtype_is_signed(kv->value.type))
            return mf_fail(MF_ERR_RANGE, "key '%s' (at byte %llu): value %lld does not fit %s", kv->key,
                           (unsigned long long)kv->file_offset, (long long)kv->value.i64, expected);
        return mf_fail(MF_ERR_RANGE, "key '%s' (at byte %llu): value %llu does not fit %s", kv->key,
                       (unsigned long long)kv->file_offset, (unsigned long long)kv->value.u64, expected);
    }
    return MF_OK;
}

mf_status mf_gguf_get_u32(const mf_gguf *g, const char *key, uint32_t *out) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "uint32", true, &s);
    uint64_t v;
    if (kv && (s = int_value(kv, UINT32_MAX, "uint32", &v)) == MF_OK) *out = (uint32_t)v;
    return s;
}

mf_status mf_gguf_get_u64(const mf_gguf *g, const char *key, uint64_t *out) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "uint64", true, &s);
    if (kv) s = int_value(kv, UINT64_MAX, "uint64", out);
    return s;
}

mf_status mf_gguf_get_i64(const mf_gguf *g, const char *key, int64_t *out) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "int64", true, &s);
    if (!kv) return s;
    if (!mf_gguf_vtype_is_signed(kv->value.type) && !mf_gguf_vtype_is_unsigned(kv->value.type))
        return wrong_type(kv, "int64");
    if (!mf_gguf_value_as_i64(&kv->value, out))
        return mf_fail(MF_ERR_RANGE, "key '%s' (at byte %llu): value %llu does not fit int64", kv->key,
                       (unsigned long long)kv->file_offset, (unsigned long long)kv->value.u64);
    return MF_OK;
}

static mf_status f32_value(const mf_gguf_kv *kv, float *out) {
    if (kv->value.type != MF_GGUF_FLOAT32 && kv->value.type != MF_GGUF_FLOAT64) return wrong_type(kv, "float32");
    *out = (float)kv->value.f64;
    return MF_OK;
}

mf_status mf_gguf_get_f32(const mf_gguf *g, const char *key, float *out) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "float32", true, &s);
    return kv ? f32_value(kv, out) : s;
}

static mf_status bool_value(const mf_gguf_kv *kv, bool *out) {
    if (kv->value.type != MF_GGUF_BOOL) return wrong_type(kv, "bool");
    *out = kv->value.b;
    return MF_OK;
}

mf_status mf_gguf_get_bool(const mf_gguf *g, const char *key, bool *out) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "bool", true, &s);
    return kv ? bool_value(kv, out) : s;
}

mf_status mf_gguf_get_str(const mf_gguf *g, const char *key, mf_str *out) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "string", true, &s);
    if (!kv) return s;
    if (kv->value.type != MF_GGUF_STRING) return wrong_type(kv, "string");
    *out = kv->value.str;
    return MF_OK;
}

mf_status mf_gguf_get_arr(const mf_gguf *g, const char *key, mf_gguf_vtype elem, const mf_gguf_value **out) {
    char expected[48];
    snprintf(expected, sizeof expected, "array of %s", elem == MF_GGUF_VTYPE_COUNT ? "any type" : mf_gguf_vtype_name(elem));
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, expected, true, &s);
    if (!kv) return s;
    if (kv->value.type != MF_GGUF_ARRAY || (elem != MF_GGUF_VTYPE_COUNT && kv->value.arr.type != elem))
        return wrong_type(kv, expected);
    *out = &kv->value;
    return MF_OK;
}

mf_status mf_gguf_find_u32(const mf_gguf *g, const char *key, uint32_t *out, uint32_t def) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "uint32", false, &s);
    uint64_t v;
    *out = def;
    if (kv && (s = int_value(kv, UINT32_MAX, "uint32", &v)) == MF_OK) *out = (uint32_t)v;
    return s;
}

mf_status mf_gguf_find_f32(const mf_gguf *g, const char *key, float *out, float def) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "float32", false, &s);
    *out = def;
    return kv ? f32_value(kv, out) : s;
}

mf_status mf_gguf_find_bool(const mf_gguf *g, const char *key, bool *out, bool def) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "bool", false, &s);
    *out = def;
    return kv ? bool_value(kv, out) : s;
}

mf_status mf_gguf_find_str_dup(const mf_gguf *g, const char *key, char **out) {
    mf_status s;
    const mf_gguf_kv *kv = lookup(g, key, "string", false, &s);
    *out = NULL;
    if (!kv) return s;
    if (kv->value.type != MF_GGUF_STRING) return wrong_type(kv, "string");
    if (kv->value.str.len >= SIZE_MAX) return mf_fail(MF_ERR_NOMEM, "key '%s': string too long", key);
    *out = mf_strndup(kv->value.str.ptr, (size_t)kv->value.str.len);
    return *out ? MF_OK : MF_ERR_NOMEM;
}

mf_status mf_gguf_tensor_to_f32(const mf_gguf_tensor *t, int64_t row0, int64_t n_rows, float *out) {
    const mf_type_traits *tr = mf_type_get_traits(t->type);
    if (!tr->dequantize)
        return mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s' has type %s, which minfer cannot dequantize", t->name,
                       mf_type_name(t->type));
    const int64_t row = t->ne[0];
    const size_t row_bytes = mf_row_size(t->type, row);
    if (row_bytes == 0 && row != 0)
        return mf_fail(MF_ERR_FORMAT, "tensor '%s': row length %lld is not a multiple of %s's block size %lld", t->name,
                       (long long)row, tr->name, (long long)tr->blck_size);
    int64_t total = 1;
    for (uint32_t d = 1; d < MF_GGUF_MAX_DIMS; d++) total *= t->ne[d];
    if (row0 < 0 || n_rows < 0 || row0 > total || n_rows > total - row0)
        return mf_fail(MF_ERR_RANGE, "tensor '%s': rows [%lld, %lld) outside its %lld rows", t->name, (long long)row0,
                       (long long)(row0 + n_rows), (long long)total);
    for (int64_t r = 0; r < n_rows && row > 0; r++)
        tr->dequantize((const uint8_t *)t->data + (size_t)(row0 + r) * row_bytes, out + (size_t)r * (size_t)row, row);
    return MF_OK;
}
