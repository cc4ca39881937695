/* gguf_util.c: the reader's storage helpers: a bump arena (keys, tensor names and string-array views
 * live in a few large blocks, so a 151,936-token vocabulary costs one allocation, not 151,936) and
 * the open-addressing name index used for metadata keys and tensor names. */
#include "gguf/gguf_internal.h"

#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>

#define ARENA_BLOCK (256u * 1024u)

struct mf_gguf_arena_block {
    mf_gguf_arena_block *next;
    size_t used, cap;
    alignas(16) unsigned char data[];
};

void *mf_gguf_arena_alloc(mf_gguf_arena *a, size_t n) {
    size_t need;
    if (!mf_add_size(n, 15, &need)) {
        mf_fail(MF_ERR_NOMEM, "arena allocation of %zu bytes overflows", n);
        return NULL;
    }
    need &= ~(size_t)15;
    mf_gguf_arena_block *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > ARENA_BLOCK ? need : ARENA_BLOCK, total;
        if (!mf_add_size(cap, sizeof *b, &total)) {
            mf_fail(MF_ERR_NOMEM, "arena allocation of %zu bytes overflows", n);
            return NULL;
        }
        b = mf_malloc(total);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        /* A block made for one big request goes behind the head, so the head's free room stays usable. */
        if (a->head && need > ARENA_BLOCK) {
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    void *p = b->data + b->used;
    b->used += need;
    return p;
}

char *mf_gguf_arena_strndup(mf_gguf_arena *a, const char *s, size_t n) {
    char *p = mf_gguf_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void mf_gguf_arena_free(mf_gguf_arena *a) {
    mf_gguf_arena_block *b = a->head;
    while (b) {
        mf_gguf_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
}

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
