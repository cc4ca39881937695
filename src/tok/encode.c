/* encode.c: text to token ids. Pipeline: cut added tokens out of the raw text (leftmost, longest
 * first) -> NFC each segment between them (when the model normalizes) -> pre-tokenize -> BPE each
 * piece. BPE works on token ids, not strings: a piece starts as one byte token per byte, and the
 * adjacent pair with the lowest merge rank (leftmost on ties) is merged until no pair merges, the
 * same result as Hugging Face's and llama.cpp's BPE. Short pieces use an array scan; long ones a
 * binary heap over a linked list, so a megabyte-long word costs O(n log n). Repeated pieces come
 * from a per-call cache, which is what makes large inputs fast. */
#include "tok/tok_impl.h"
#include "tok/unicode.h"

#include <stdlib.h>

#define SMALL_PIECE 48        /* pieces up to this many bytes merge by array scan */
#define CACHE_MIN_TEXT 2048   /* texts shorter than this skip the piece cache */
#define CACHE_MAX_PIECE 64    /* longer pieces are not cached */
#define CACHE_MAX_SLOTS (1u << 17)

typedef struct {
    uint64_t h;
    uint32_t word_off, ids_off;
    uint16_t word_len, n_ids; /* word_len 0: empty slot */
} cache_slot;

typedef struct {
    const mf_tokenizer *t;
    int32_t *ids;
    size_t n, cap;
    /* BPE scratch for one piece */
    int32_t *sym, *merged, *prev, *next;
    uint32_t *rank;
    uint64_t *heap; /* entries: rank << 32 | left index (leftmost wins ties) */
    size_t scratch_cap;
    /* piece cache */
    cache_slot *slots;
    size_t slot_mask, n_slots;
    uint8_t *words;
    size_t words_len, words_cap;
    int32_t *cids;
    size_t cids_len, cids_cap;
    mf_pretok_buf pb;
    uint8_t *norm;
    size_t norm_cap;
} enc;

/* Grow the array whose pointer is at pp (any object pointer type) to hold need elements. */
static mf_status grow(void *pp, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return MF_OK;
    size_t ncap = *cap ? *cap : 64;
    while (ncap < need) ncap *= 2;
    void *p;
    memcpy(&p, pp, sizeof p);
    void *q = mf_realloc(p, ncap * elem);
    if (!q) return MF_ERR_NOMEM;
    memcpy(pp, &q, sizeof q);
    *cap = ncap;
    return MF_OK;
}

static mf_status emit(enc *e, int32_t id) {
    if (e->n == e->cap) {
        mf_status s = grow(&e->ids, &e->cap, e->n + 1, sizeof *e->ids);
        if (s) return s;
    }
    e->ids[e->n++] = id;
    return MF_OK;
}

static mf_status scratch(enc *e, size_t n) {
    if (n <= e->scratch_cap) return MF_OK;
    size_t cap = n < 64 ? 64 : n;
    int32_t **a[] = {&e->sym, &e->merged, &e->prev, &e->next};
    for (size_t i = 0; i < MF_ARRAY_LEN(a); i++) {
        int32_t *p = mf_realloc(*a[i], cap * sizeof **a[i]);
        if (!p) return MF_ERR_NOMEM;
        *a[i] = p;
    }
    uint32_t *r = mf_realloc(e->rank, cap * sizeof *r);
    if (!r) return MF_ERR_NOMEM;
    e->rank = r;
    uint64_t *h = mf_realloc(e->heap, 3 * cap * sizeof *h); /* n initial pairs + 2 per merge */
    if (!h) return MF_ERR_NOMEM;
    e->heap = h;
    e->scratch_cap = cap;
    return MF_OK;
}

/* Merge sym[0..n) in place by array scan; returns the final count. */
static size_t bpe_scan(const mf_tokenizer *t, int32_t *sym, int32_t *merged, uint32_t *rank, size_t n) {
    for (size_t i = 0; i + 1 < n; i++)
        if (!mf_tok_pair_lookup(t, sym[i], sym[i + 1], &rank[i], &merged[i])) rank[i] = UINT32_MAX;
    while (n > 1) {
        size_t best = 0;
        for (size_t i = 1; i + 1 < n; i++)
            if (rank[i] < rank[best]) best = i;
        if (rank[best] == UINT32_MAX) break;
        sym[best] = merged[best];
        size_t tail = n - best - 2;
        memmove(sym + best + 1, sym + best + 2, tail * sizeof *sym);
        memmove(rank + best + 1, rank + best + 2, (tail ? tail - 1 : 0) * sizeof *rank);
        memmove(merged + best + 1, merged + best + 2, (tail ? tail - 1 : 0) * sizeof *merged);
        n--;
        if (best > 0 && !mf_tok_pair_lookup(t, sym[best - 1], sym[best], &rank[best - 1], &merged[best - 1]))
            rank[best - 1] = UINT32_MAX;
        if (best + 1 < n && !mf_tok_pair_lookup(t, sym[best], sym[best + 1], &rank[best], &merged[best]))
            rank[best] = UINT32_MAX;
    }
    return n;
}

/* Binary min-heap of pair candidates, key = rank << 32 | left symbol index, so the lowest rank pops
 * first and the leftmost wins ties. An entry goes stale when a neighbouring merge changes its
 * symbols; since a rank names exactly one pair, the entry is current iff the pair now at its left
 * index still has its rank. */
static void sift_down(uint64_t *heap, size_t n, size_t i) {
    uint64_t key = heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap[c + 1] < heap[c]) c++;
        if (key <= heap[c]) break;
        heap[i] = heap[c];
        i = c;
    }
    heap[i] = key;
}

static void heap_push(uint64_t *heap, size_t *hn, uint64_t key) {
    size_t i = (*hn)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (heap[p] <= key) break;
        heap[i] = heap[p];
        i = p;
    }
    heap[i] = key;
}

/* Rank of the pair starting at symbol left, or UINT32_MAX. */
static uint32_t pair_rank(const enc *e, int32_t left, int32_t *merged) {
    if (left < 0 || e->next[left] < 0) return UINT32_MAX;
    uint32_t rank;
    return mf_tok_pair_lookup(e->t, e->sym[left], e->sym[e->next[left]], &rank, merged) ? rank : UINT32_MAX;
}

/* Merge sym[0..n) with the heap; compacts the survivors to the front and returns their count. */
static size_t bpe_heap(enc *e, size_t n) {
    uint64_t *heap = e->heap;
    size_t hn = 0;
    int32_t m;
    for (size_t i = 0; i < n; i++) {
        e->prev[i] = (int32_t)i - 1;
        e->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = pair_rank(e, (int32_t)i, &m);
        if (r != UINT32_MAX) heap[hn++] = (uint64_t)r << 32 | i;
    }
    for (size_t i = hn / 2; i-- > 0;) sift_down(heap, hn, i);
    while (hn) {
        uint64_t top = heap[0];
        heap[0] = heap[--hn];
        if (hn) sift_down(heap, hn, 0);
        int32_t left = (int32_t)(uint32_t)top;
        if (e->sym[left] < 0 || pair_rank(e, left, &m) != (uint32_t)(top >> 32)) continue; /* stale */
        int32_t right = e->next[left];
        e->sym[left] = m;
        e->sym[right] = MF_TOKEN_NULL;
        e->next[left] = e->next[right];
        if (e->next[right] >= 0) e->prev[e->next[right]] = left;
        uint32_t r = pair_rank(e, e->prev[left], &m);
        if (r != UINT32_MAX) heap_push(heap, &hn, (uint64_t)r << 32 | (uint32_t)e->prev[left]);
        r = pair_rank(e, left, &m);
        if (r != UINT32_MAX) heap_push(heap, &hn, (uint64_t)r << 32 | (uint32_t)left);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = e->next[i]) e->sym[k++] = e->sym[i];
    return k;
}

static mf_status cache_init(enc *e, size_t text_len) {
    size_t slots = 256;
    while (slots < text_len / 4 && slots < CACHE_MAX_SLOTS) slots *= 2;
    e->slots = mf_calloc(slots, sizeof *e->slots);
    if (!e->slots) return MF_ERR_NOMEM;
    e->slot_mask = slots - 1;
    return MF_OK;
}

static cache_slot *cache_find(enc *e, const uint8_t *p, size_t n, uint64_t h) {
    size_t i = (size_t)h & e->slot_mask;
    for (;;) {
        cache_slot *s = &e->slots[i];
        if (!s->word_len) return s;
        if (s->h == h && s->word_len == n && memcmp(e->words + s->word_off, p, n) == 0) return s;
        i = (i + 1) & e->slot_mask;
    }
}

static mf_status cache_put(enc *e, cache_slot *s, const uint8_t *p, size_t n, uint64_t h, const int32_t *ids, size_t k) {
    if (e->n_slots * 2 >= e->slot_mask + 1) return MF_OK; /* full enough: stop caching */
    if (grow(&e->words, &e->words_cap, e->words_len + n, 1) ||
        grow(&e->cids, &e->cids_cap, e->cids_len + k, sizeof *e->cids))
        return MF_ERR_NOMEM;
    memcpy(e->words + e->words_len, p, n);
    memcpy(e->cids + e->cids_len, ids, k * sizeof *ids);
    s->h = h;
    s->word_off = (uint32_t)e->words_len;
    s->word_len = (uint16_t)n;
    s->ids_off = (uint32_t)e->cids_len;
    s->n_ids = (uint16_t)k;
    e->words_len += n;
    e->cids_len += k;
    e->n_slots++;
    return MF_OK;
}

static mf_status bpe_piece(void *ctx, const uint8_t *p, size_t n) {
    enc *e = ctx;
    const mf_tokenizer *t = e->t;
    if (n == 1) return t->byte_tok[p[0]] >= 0 ? emit(e, t->byte_tok[p[0]]) : MF_OK;
    if (t->ignore_merges) {
        int32_t id = mf_tok_find_bytes(t, p, n);
        if (id >= 0) return emit(e, id);
    }
    cache_slot *slot = NULL;
    uint64_t h = 0;
    if (e->slots && n <= CACHE_MAX_PIECE) {
        h = mf_tok_hash(p, n);
        slot = cache_find(e, p, n, h);
        if (slot->word_len) {
            mf_status s = grow(&e->ids, &e->cap, e->n + slot->n_ids, sizeof *e->ids);
            if (s) return s;
            memcpy(e->ids + e->n, e->cids + slot->ids_off, slot->n_ids * sizeof *e->ids);
            e->n += slot->n_ids;
            return MF_OK;
        }
    }
    mf_status s = scratch(e, n);
    if (s) return s;
    /* A byte without a token (some vocabularies lack rare control bytes) is skipped, and its
     * neighbours may merge across it, as Hugging Face's BPE does without an unknown token. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (t->byte_tok[p[i]] >= 0) e->sym[m++] = t->byte_tok[p[i]];
    size_t k = m <= SMALL_PIECE ? bpe_scan(t, e->sym, e->merged, e->rank, m) : bpe_heap(e, m);
    if ((s = grow(&e->ids, &e->cap, e->n + k, sizeof *e->ids))) return s;
    memcpy(e->ids + e->n, e->sym, k * sizeof *e->ids);
    e->n += k;
    return slot ? cache_put(e, slot, p, n, h, e->sym, k) : MF_OK;
}

/* Text between added tokens: normalize, pre-tokenize, BPE. */
static mf_status encode_segment(enc *e, const uint8_t *s, size_t n) {
    if (n == 0) return MF_OK;
    if (e->t->nfc && !mf_nfc_is_stable(s, n)) {
        size_t len;
        mf_status st = mf_nfc(s, n, &e->norm, &e->norm_cap, &len);
        if (st) return st;
        s = e->norm;
        n = len;
    }
    return mf_pretok_split(e->t->pretok, s, n, &e->pb, bpe_piece, e);
}

/* The longest added token allowed by flags at s[0..n), or NULL. */
static const mf_tok_added *match_added(const mf_tokenizer *t, const uint8_t *s, size_t n, bool parse_special) {
    for (size_t i = t->added_start[s[0]]; i < t->added_start[s[0] + 1]; i++) {
        const mf_tok_added *a = &t->added[i];
        if (a->len <= n && (parse_special || !a->control) && memcmp(a->text, s, a->len) == 0)
            return a;
    }
    return NULL;
}

static mf_status encode_all(enc *e, const uint8_t *s, size_t n, unsigned flags) {
    const mf_tokenizer *t = e->t;
    bool parse_special = flags & MF_TOK_PARSE_SPECIAL;
    uint8_t mask = parse_special ? 1 : 2;
    mf_status st = MF_OK;
    if ((flags & MF_TOK_ADD_SPECIAL) && t->add_bos && (st = emit(e, t->bos))) return st;
    if (n >= CACHE_MIN_TEXT && (st = cache_init(e, n))) return st;
    size_t seg = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(t->added_first[s[i]] & mask)) continue;
        const mf_tok_added *a = match_added(t, s + i, n - i, parse_special);
        if (!a) continue;
        if ((st = encode_segment(e, s + seg, i - seg)) || (st = emit(e, a->id))) return st;
        i += a->len - 1;
        seg = i + 1;
    }
    if ((st = encode_segment(e, s + seg, n - seg))) return st;
    if ((flags & MF_TOK_ADD_SPECIAL) && t->add_eos) st = emit(e, t->eos);
    return st;
}

static void enc_free_scratch(enc *e) {
    free(e->sym);
    free(e->merged);
    free(e->prev);
    free(e->next);
    free(e->rank);
    free(e->heap);
    free(e->slots);
    free(e->words);
    free(e->cids);
    free(e->norm);
    mf_pretok_buf_free(&e->pb);
}

mf_status mf_tokenizer_encode(const mf_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t **ids,
                              size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) return mf_fail(MF_ERR_ARG, "mf_tokenizer_encode: text is NULL with length %zu", len);
    enc e = {.t = t};
    mf_status st = encode_all(&e, (const uint8_t *)text, len, flags);
    enc_free_scratch(&e);
    if (st) {
        free(e.ids);
        return st == MF_ERR_NOMEM ? mf_fail(st, "tokenizer: out of memory encoding %zu bytes", len) : st;
    }
    if (e.n == 0) {
        free(e.ids);
        e.ids = NULL;
    }
    *ids = e.ids;
    *n_ids = e.n;
    return MF_OK;
}

mf_status mf_tokenizer_encode_into(const mf_tokenizer *t, const char *text, size_t len, unsigned flags, int32_t *ids,
                                   size_t cap, size_t *n_ids) {
    int32_t *all;
    size_t n;
    mf_status st = mf_tokenizer_encode(t, text, len, flags, &all, &n);
    *n_ids = n;
    if (st) return st;
    if (n) memcpy(ids, all, MF_MIN(n, cap) * sizeof *ids);
    free(all);
    if (n > cap)
        return mf_fail(MF_ERR_RANGE, "tokenizer: the text has %zu tokens, the buffer room for %zu", n, cap);
    return MF_OK;
}
