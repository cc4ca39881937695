/* gguf_internal.h: what the GGUF reader's files share: the handle's layout, a bump arena for the
 * parsed keys, names and string views (one allocation per block, not per string), and the hash
 * index used for keys and tensor names. Not part of the API. */
#ifndef MF_GGUF_INTERNAL_H
#define MF_GGUF_INTERNAL_H

#include "core/arena.h"
#include "gguf/gguf.h"

#define MF_GGUF_MAX_KEY 1024         /* bytes in a metadata key */
#define MF_GGUF_MAX_NAME 256         /* bytes in a tensor name */
#define MF_GGUF_MAX_NESTING 8        /* arrays of arrays, levels deep */
#define MF_GGUF_MAX_PARTS 9999       /* split parts, as -NNNNN-of-NNNNN allows with room */

/* Keys, tensor names and string-array views live in an arena of 256 KiB blocks, so a 151,936-token
 * vocabulary costs a few allocations, not 151,936. */
#define MF_GGUF_ARENA_BLOCK (256u * 1024u)

/* Open-addressing hash set of names: slots hold index + 1 (0 = empty); capacity is a power of two
 * at least twice the entry count, so probes stay short. */
typedef struct mf_gguf_index {
    uint32_t *slots;
    uint64_t mask;
} mf_gguf_index;

uint64_t mf_gguf_hash(const char *s);
mf_status mf_gguf_index_init(mf_gguf_index *ix, uint64_t n);
void mf_gguf_index_free(mf_gguf_index *ix);
/* items: an array of structs (mf_gguf_kv or mf_gguf_tensor) whose first member is the name, stride
 * bytes apart. find: the index of name or -1. insert: adds item i (at most half the capacity) and
 * returns -1, or, when the name is already present, the index of the item holding it. */
int64_t mf_gguf_index_find(const mf_gguf_index *ix, const void *items, size_t stride, const char *name);
int64_t mf_gguf_index_insert(mf_gguf_index *ix, const void *items, size_t stride, uint32_t i);

#define MF_GGUF_HUGE_PAGE ((size_t)2 << 20)

typedef struct mf_gguf_part {
    char *path;
    const uint8_t *base;   /* the mapping (or the caller's memory) */
    uint64_t size;
    bool mapped;           /* base came from mmap and is unmapped on free */
    size_t map_len;        /* bytes to unmap (the file's size, or its huge-page-rounded copy) */
    uint64_t data_offset;  /* start of the data section */
    uint32_t alignment;
    uint64_t dev, ino;     /* the file's identity when it was opened (0 for memory images) */
} mf_gguf_part;

struct mf_gguf {
    uint32_t version;
    uint32_t n_parts;
    mf_gguf_part *parts;
    mf_gguf_kv *kvs; /* part 0's metadata */
    int64_t n_kv;
    mf_gguf_tensor *tensors; /* all parts, part 0's first, each part in file order */
    int64_t n_tensors;
    mf_gguf_index kv_index, tensor_index;
    mf_arena arena;
    bool read_into_memory; /* MF_GGUF_OPEN_READ: parts are read into anonymous huge-page memory */
};

/* An integer value (any of the 8 integer types) as u64 / i64; false if not an integer or out of range. */
bool mf_gguf_value_as_u64(const mf_gguf_value *v, uint64_t *out);
bool mf_gguf_value_as_i64(const mf_gguf_value *v, int64_t *out);
bool mf_gguf_vtype_is_signed(mf_gguf_vtype t);
/* Bytes of one scalar value on disk; 0 for STRING, ARRAY and unknown ids. */
size_t mf_gguf_vtype_size(mf_gguf_vtype t);
bool mf_gguf_vtype_is_unsigned(mf_gguf_vtype t);

#endif /* MF_GGUF_INTERNAL_H */
