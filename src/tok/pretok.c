/* pretok.c: the pre-tokenizer patterns of pretok.h as hand-written matchers. Each matcher tries the
 * pattern's alternatives in order at the current character, the way a backtracking engine
 * (Oniguruma in Hugging Face tokenizers) would, and returns where the match ends. Text is decoded
 * once into code points and class flags; every step is O(piece length), so the whole split is linear
 * (long runs of spaces or digits included). */
#include "tok/pretok.h"
#include "tok/unicode.h"

#include <stdlib.h>

void mf_pretok_buf_free(mf_pretok_buf *b) {
    if (!b) return;
    free(b->cp);
    free(b->fl);
    free(b->off);
    memset(b, 0, sizeof *b);
}

/* Decode s into buf; returns the number of characters or SIZE_MAX on allocation failure. */
static size_t decode_text(const uint8_t *s, size_t n, mf_pretok_buf *b) {
    if (n + 1 > b->cap) {
        size_t cap = n + 1 < 256 ? 256 : n + 1;
        uint32_t *cp = mf_realloc(b->cp, cap * sizeof *cp);
        if (cp) b->cp = cp;
        uint8_t *fl = mf_realloc(b->fl, cap);
        if (fl) b->fl = fl;
        uint32_t *off = mf_realloc(b->off, cap * sizeof *off);
        if (off) b->off = off;
        if (!cp || !fl || !off) return SIZE_MAX;
        b->cap = cap;
    }
    size_t i = 0, k = 0;
    while (i < n) {
        uint32_t c;
        size_t l = s[i] < 0x80 ? (c = s[i], 1) : mf_utf8_decode(s + i, n - i, &c);
        b->cp[k] = c;
        b->fl[k] = c == MF_UC_INVALID ? 0 : (uint8_t)mf_uc_flags(c);
        b->off[k] = (uint32_t)i;
        k++;
        i += l;
    }
    b->off[k] = (uint32_t)n;
    return k;
}

#define IS_L(f) ((f) & MF_UC_LETTER)
#define IS_N(f) ((f) & MF_UC_NUMBER)
#define IS_S(f) ((f) & MF_UC_SPACE)
/* [^\s\p{L}\p{N}] */
#define IS_OTHER(f) (!((f) & (MF_UC_LETTER | MF_UC_NUMBER | MF_UC_SPACE)))

static inline bool is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }

/* ASCII letter lowered, with the one non-ASCII character that case-folds to a letter used in the
 * contractions: U+017F LATIN SMALL LETTER LONG S folds to 's' (Oniguruma's (?i) does this). */
static inline uint32_t fold(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x17F) return 's';
    return c;
}

/* 's|'t|'re|'ve|'m|'ll|'d at i (case-insensitive when ci): the match end, or 0. */
static size_t contraction(const uint32_t *cp, size_t i, size_t n, bool ci) {
    if (cp[i] != '\'' || i + 1 >= n) return 0;
    uint32_t a = ci ? fold(cp[i + 1]) : cp[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n) return 0;
    uint32_t b = ci ? fold(cp[i + 2]) : cp[i + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
}

/* Whitespace alternatives shared by all patterns, at a white-space character i:
 *   [with_newline_rule] \s*[\r\n]+ : the run up to and including its last \r or \n;
 *   \s+(?!\S) : the whole run at the end of text, else the run minus its last character;
 *   \s+ : a single white-space character before a non-space. */
static size_t whitespace(const uint32_t *cp, const uint8_t *fl, size_t i, size_t n, bool with_newline_rule) {
    size_t e = i;
    size_t last_nl = SIZE_MAX;
    while (e < n && IS_S(fl[e])) {
        if (is_crlf(cp[e])) last_nl = e;
        e++;
    }
    if (with_newline_rule && last_nl != SIZE_MAX) return last_nl + 1;
    if (e == n || e - i >= 2) return e == n ? e : e - 1;
    return e;
}

/* Qwen2 (max_digits 1) and Llama 3 (max_digits 3). */
static size_t match_qwen2(const uint32_t *cp, const uint8_t *fl, size_t i, size_t n, size_t max_digits) {
    size_t j = contraction(cp, i, n, true);
    if (j) return j;
    uint32_t c = cp[i];
    uint8_t f = fl[i];
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    if (IS_L(f) || (!is_crlf(c) && !IS_N(f) && i + 1 < n && IS_L(fl[i + 1]))) {
        j = i + 1;
        while (j < n && IS_L(fl[j])) j++;
        return j;
    }
    /* \p{N}{1,max_digits} */
    if (IS_N(f)) {
        j = i + 1;
        while (j < n && j - i < max_digits && IS_N(fl[j])) j++;
        return j;
    }
    /*  ?[^\s\p{L}\p{N}]+[\r\n]* */
    size_t k = (c == ' ' && i + 1 < n && IS_OTHER(fl[i + 1])) ? i + 1 : i;
    if (IS_OTHER(fl[k])) {
        j = k + 1;
        while (j < n && IS_OTHER(fl[j])) j++;
        while (j < n && is_crlf(cp[j])) j++;
        return j;
    }
    return whitespace(cp, fl, i, n, true);
}

/* GPT-2. */
static size_t match_gpt2(const uint32_t *cp, const uint8_t *fl, size_t i, size_t n) {
    size_t j = contraction(cp, i, n, false);
    if (j) return j;
    /* ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class */
    size_t k = (cp[i] == ' ' && i + 1 < n && !IS_S(fl[i + 1])) ? i + 1 : i;
    uint8_t f = fl[k];
    if (!IS_S(f)) {
        uint8_t cls = IS_L(f) ? MF_UC_LETTER : IS_N(f) ? MF_UC_NUMBER : 0;
        j = k + 1;
        if (cls) {
            while (j < n && (fl[j] & cls)) j++;
        } else {
            while (j < n && IS_OTHER(fl[j])) j++;
        }
        return j;
    }
    return whitespace(cp, fl, i, n, false);
}

static mf_status split_range(mf_pretok_kind kind, const uint8_t *s, const mf_pretok_buf *b, size_t from,
                             size_t to, mf_pretok_piece_fn fn, void *ctx) {
    const uint32_t *cp = b->cp + from;
    const uint8_t *fl = b->fl + from;
    size_t n = to - from, i = 0;
    while (i < n) {
        size_t j;
        switch (kind) {
        case MF_PRETOK_QWEN2: j = match_qwen2(cp, fl, i, n, 1); break;
        case MF_PRETOK_LLAMA3: j = match_qwen2(cp, fl, i, n, 3); break;
        default: j = match_gpt2(cp, fl, i, n); break;
        }
        MF_ASSERT(j > i && j <= n);
        uint32_t a = b->off[from + i], e = b->off[from + j];
        mf_status st = fn(ctx, s + a, e - a);
        if (st) return st;
        i = j;
    }
    return MF_OK;
}

mf_status mf_pretok_split(mf_pretok_kind kind, const uint8_t *s, size_t n, mf_pretok_buf *buf,
                          mf_pretok_piece_fn fn, void *ctx) {
    if (n == 0) return MF_OK;
    if (n >= UINT32_MAX) return mf_fail(MF_ERR_RANGE, "tokenizer: text of %zu bytes is over the 4 GiB limit", n);
    size_t nc = decode_text(s, n, buf);
    if (nc == SIZE_MAX) return MF_ERR_NOMEM;
    if (kind != MF_PRETOK_SMOLLM) return split_range(kind, s, buf, 0, nc, fn, ctx);
    /* SmolLM: each \p{N} alone; the runs between split by the GPT-2 pattern on their own. */
    size_t i = 0;
    while (i < nc) {
        if (IS_N(buf->fl[i])) {
            mf_status st = fn(ctx, s + buf->off[i], buf->off[i + 1] - buf->off[i]);
            if (st) return st;
            i++;
            continue;
        }
        size_t j = i;
        while (j < nc && !IS_N(buf->fl[j])) j++;
        mf_status st = split_range(MF_PRETOK_GPT2, s, buf, i, j, fn, ctx);
        if (st) return st;
        i = j;
    }
    return MF_OK;
}
