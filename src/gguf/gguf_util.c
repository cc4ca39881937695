/* gguf_util.c: the open-addressing name index used for metadata keys and tensor names. */
#include "gguf/gguf_internal.h"

#include <stddef.h>
#include <stdlib.h>

static const uint8_t vtype_sizes[MF_GGUF_VTYPE_COUNT] = {
    [MF_GGUF_UINT8] = 1, [MF_GGUF_INT8] = 1,    [MF_GGUF_UINT16] = 2, [MF_GGUF_INT16] = 2,
    [MF_GGUF_UINT32] = 4, [MF_GGUF_INT32] = 4,  [MF_GGUF_FLOAT32] = 4, [MF_GGUF_BOOL] = 1,
    [MF_GGUF_UINT64] = 8, [MF_GGUF_INT64] = 8,  [MF_GGUF_FLOAT64] = 8,
};

size_t mf_gguf_vtype_size(mf_gguf_vtype t) { return (unsigned)t < MF_GGUF_VTYPE_COUNT ? vtype_sizes[t] : 0; }

/* FNV-1a, 64-bit. */
uint64_t mf_gguf_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

mf_status mf_gguf_index_init(mf_gguf_index *ix, uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2; /* callers bound n far below 2^62 */
    ix->slots = mf_calloc(cap, sizeof *ix->slots);
    if (!ix->slots) return MF_ERR_NOMEM;
    ix->mask = cap - 1;
    return MF_OK;
}

void mf_gguf_index_free(mf_gguf_index *ix) {
    free(ix->slots);
    ix->slots = NULL;
    ix->mask = 0;
}

static const char *item_name(const void *items, size_t stride, uint64_t i) {
    const char *const *p = (const char *const *)((const char *)items + i * stride);
    return *p;
}

_Static_assert(offsetof(mf_gguf_kv, key) == 0, "index reads the key as the first member");
_Static_assert(offsetof(mf_gguf_tensor, name) == 0, "index reads the name as the first member");

int64_t mf_gguf_index_find(const mf_gguf_index *ix, const void *items, size_t stride, const char *name) {
    if (!ix->slots) return -1;
    for (uint64_t h = mf_gguf_hash(name) & ix->mask;; h = (h + 1) & ix->mask) {
        uint32_t s = ix->slots[h];
        if (!s) return -1;
        if (!strcmp(item_name(items, stride, s - 1), name)) return s - 1;
    }
}

int64_t mf_gguf_index_insert(mf_gguf_index *ix, const void *items, size_t stride, uint32_t i) {
    const char *name = item_name(items, stride, i);
    for (uint64_t h = mf_gguf_hash(name) & ix->mask;; h = (h + 1) & ix->mask) {
        uint32_t s = ix->slots[h];
        if (!s) {
            ix->slots[h] = i + 1;
            return -1;
        }
        if (!strcmp(item_name(items, stride, s - 1), name)) return s - 1;
    }
}
