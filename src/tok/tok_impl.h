/* tok_impl.h: the tokenizer's internal state, shared by tokenizer.c (loading, queries), encode.c and
 * decode.c. Not part of the API. */
#ifndef MF_TOK_IMPL_H
#define MF_TOK_IMPL_H

#include "tok/pretok.h"
#include "tok/tokenizer.h"

/* An added token recognised in raw text. */
typedef struct {
    const uint8_t *text; /* into text_blob */
    uint32_t len;
    int32_t id;
    bool control; /* needs MF_TOK_PARSE_SPECIAL (CONTROL or UNKNOWN type) */
} mf_tok_added;

struct mf_tokenizer {
    int32_t n_vocab;
    char *pre;
    mf_pretok_kind pretok;
    bool nfc;           /* normalize text segments to NFC before pre-tokenizing */
    bool ignore_merges; /* a piece that is itself a token is emitted whole (Llama 3) */
    bool add_bos, add_eos;
    int32_t bos, eos, eot, eom, pad;

    /* Token i: stored text at text_blob + text_off[i] (NUL-terminated, length text_off[i+1]-text_off[i]-1);
     * decoded bytes at bytes_blob + bytes_off[i] (length bytes_off[i+1]-bytes_off[i]). */
    char *text_blob;
    uint32_t *text_off;
    uint8_t *bytes_blob;
    uint32_t *bytes_off;
    uint8_t *type; /* mf_token_type */
    uint8_t *eog;  /* 1 if end of generation */

    /* Open-addressing hash tables (power-of-two sizes, linear probing, empty slot = -1 / key 0):
     * stored text -> id; decoded bytes of normal tokens -> id (for ignore_merges). */
    int32_t *text_hash;
    size_t text_mask;
    int32_t *bytes_hash;
    size_t bytes_mask;

    /* BPE merges: key = (uint64)left << 32 | right (ids; key 0 unused since id pair (0,0) is stored
     * as key with bit 63 set), value = (uint64)rank << 32 | merged id. */
    uint64_t *pair_key;
    uint64_t *pair_val;
    size_t pair_mask;

    int32_t byte_tok[256]; /* token of each single byte (byte-level character) */

    mf_tok_added *added; /* sorted by first byte, then longest first */
    size_t n_added;
    uint32_t added_start[257]; /* tokens starting with byte b: added[added_start[b] .. added_start[b + 1]) */
    uint8_t added_first[256]; /* bit 0: some added token starts with this byte; bit 1: a non-control one */

    int32_t *eog_ids;
    size_t n_eog;
};

/* 64-bit hash of a byte string (fast for short strings). */
static inline uint64_t mf_tok_hash(const uint8_t *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    h = (h ^ v) * 0x94d049bb133111ebull;
    h ^= h >> 31;
    return h;
}

static inline uint64_t mf_tok_pair_key(int32_t a, int32_t b) {
    return (1ull << 63) | (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
}

/* Merge rank and result of the pair (a, b): returns false if they do not merge. */
static inline bool mf_tok_pair_lookup(const mf_tokenizer *t, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
    uint64_t key = mf_tok_pair_key(a, b);
    size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & t->pair_mask;
    for (;;) {
        uint64_t k = t->pair_key[i];
        if (k == key) {
            uint64_t v = t->pair_val[i];
            *rank = (uint32_t)(v >> 32);
            *merged = (int32_t)(uint32_t)v;
            return true;
        }
        if (k == 0) return false;
        i = (i + 1) & t->pair_mask;
    }
}

/* Id of a normal token whose decoded bytes are p[0..n), or MF_TOKEN_NULL. */
int32_t mf_tok_find_bytes(const mf_tokenizer *t, const uint8_t *p, size_t n);

#endif /* MF_TOK_IMPL_H */
