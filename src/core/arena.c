/* arena.c: the bump allocator (see arena.h). */
#include "core/arena.h"

#include <stdalign.h>
#include <stdlib.h>

struct mf_arena_block {
    mf_arena_block *next;
    size_t used, cap;
    alignas(16) unsigned char data[];
};

static _Thread_local mf_status last_status;

mf_status mf_arena_last_status(void) { return last_status; }

static void *fail(mf_status s) {
    last_status = s;
    return NULL;
}

void *mf_arena_alloc(mf_arena *a, size_t n) {
    size_t need, total;
    const size_t block = a->block_size ? a->block_size : 64 * 1024;
    if (!mf_add_size(n ? n : 1, 15, &need))
        return fail(mf_fail(MF_ERR_NOMEM, "arena allocation of %zu bytes overflows", n));
    need &= ~(size_t)15;
    mf_arena_block *b = a->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > block ? need : block;
        if (a->limit && (cap > a->limit || a->reserved > a->limit - cap))
            return fail(mf_fail(MF_ERR_RANGE, "allocation of %zu bytes passes the memory limit of %zu bytes", n, a->limit));
        if (!mf_add_size(cap, sizeof *b, &total) || !(b = malloc(total)))
            return fail(mf_fail(MF_ERR_NOMEM, "out of memory allocating %zu bytes", cap));
        b->cap = cap;
        b->used = 0;
        a->reserved += cap;
        /* A block made for one big request goes behind the head, so the head's free room stays usable. */
        if (a->head && need > block) {
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

char *mf_arena_strndup(mf_arena *a, const char *s, size_t n) {
    char *p = mf_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void mf_arena_free(mf_arena *a) {
    mf_arena_block *b = a->head;
    while (b) {
        mf_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->reserved = 0;
}
