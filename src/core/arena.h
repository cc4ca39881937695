/* arena.h: a bump allocator for data that lives and dies together (a file's parsed names and
 * string views, a template's AST and values): memory comes in large blocks, so many small objects
 * cost a few mallocs, and everything is freed at once. */
#ifndef MF_ARENA_H
#define MF_ARENA_H

#include "core/core.h"

typedef struct mf_arena_block mf_arena_block;

typedef struct mf_arena {
    mf_arena_block *head;
    size_t reserved;   /* bytes of all blocks (what counts against limit) */
    size_t limit;      /* 0: no limit */
    size_t block_size; /* 0: 64 KiB */
} mf_arena;

/* n bytes, 16-byte aligned, valid until mf_arena_free. NULL on failure: MF_ERR_RANGE past the
 * limit, MF_ERR_NOMEM otherwise (with a message). */
void *mf_arena_alloc(mf_arena *a, size_t n);
char *mf_arena_strndup(mf_arena *a, const char *s, size_t n); /* NUL-terminated copy */
/* Frees every block; the arena can be used again (limit and block_size are kept). */
void mf_arena_free(mf_arena *a);
/* The status of the last failed mf_arena_alloc on this arena's thread: MF_ERR_RANGE or MF_ERR_NOMEM. */
mf_status mf_arena_last_status(void);

#endif /* MF_ARENA_H */
