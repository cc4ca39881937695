/* tokenizer.c: loading the BPE tokenizer from GGUF metadata (vocabulary, token types, merges, special
 * ids and flags, pre-tokenizer choice, end-of-generation set) and the read-only queries on it. */
#include "tok/tok_impl.h"
#include "tok/unicode.h"

#include <stdlib.h>

/* GPT-2 byte-level alphabet: printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
 * themselves; the other 68 bytes map, in byte order, to U+0100 onwards. */
static void byte_level_tables(uint32_t byte_to_cp[256], int16_t cp_to_byte[324]) {
    uint32_t next = 256;
    for (int i = 0; i < 324; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        bool self = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_cp[b] = self ? (uint32_t)b : next++;
        cp_to_byte[byte_to_cp[b]] = (int16_t)b;
    }
}

static size_t table_size_for(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

static const char *token_text(const mf_tokenizer *t, int32_t id, size_t *len) {
    *len = t->text_off[id + 1] - t->text_off[id] - 1;
    return t->text_blob + t->text_off[id];
}

static int32_t find_text(const mf_tokenizer *t, const char *s, size_t n) {
    size_t i = (size_t)mf_tok_hash((const uint8_t *)s, n) & t->text_mask;
    for (;;) {
        int32_t id = t->text_hash[i];
        if (id < 0) return MF_TOKEN_NULL;
        size_t len;
        const char *p = token_text(t, id, &len);
        if (len == n && memcmp(p, s, n) == 0) return id;
        i = (i + 1) & t->text_mask;
    }
}

int32_t mf_tok_find_bytes(const mf_tokenizer *t, const uint8_t *p, size_t n) {
    size_t i = (size_t)mf_tok_hash(p, n) & t->bytes_mask;
    for (;;) {
        int32_t id = t->bytes_hash[i];
        if (id < 0) return MF_TOKEN_NULL;
        if (t->bytes_off[id + 1] - t->bytes_off[id] == n && memcmp(t->bytes_blob + t->bytes_off[id], p, n) == 0)
            return id;
        i = (i + 1) & t->bytes_mask;
    }
}

/* Vocabulary: copy token texts, decode their bytes, index both. */
static mf_status load_vocab(mf_tokenizer *t, const mf_gguf *g) {
    const mf_gguf_value *tokens, *types = NULL;
    mf_status s = mf_gguf_get_arr(g, "tokenizer.ggml.tokens", MF_GGUF_STRING, &tokens);
    if (s) return mf_fail_context(s, "tokenizer");
    uint64_t n = tokens->arr.n;
    if (n == 0 || n > INT32_MAX / 2)
        return mf_fail(MF_ERR_FORMAT, "tokenizer.ggml.tokens: %llu tokens, valid range 1..%d", (unsigned long long)n,
                       INT32_MAX / 2);
    t->n_vocab = (int32_t)n;
    if (mf_gguf_find_kv(g, "tokenizer.ggml.token_type")) {
        s = mf_gguf_get_arr(g, "tokenizer.ggml.token_type", MF_GGUF_INT32, &types);
        if (s) return mf_fail_context(s, "tokenizer");
        if (types->arr.n != n)
            return mf_fail(MF_ERR_FORMAT, "tokenizer.ggml.token_type has %llu entries, tokenizer.ggml.tokens %llu",
                           (unsigned long long)types->arr.n, (unsigned long long)n);
    }
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) total += tokens->arr.strs[i].len + 1;
    if (total >= UINT32_MAX) return mf_fail(MF_ERR_FORMAT, "tokenizer.ggml.tokens: %llu bytes of text, over 4 GiB",
                                            (unsigned long long)total);
    t->text_blob = mf_malloc(total);
    t->bytes_blob = mf_malloc(total); /* byte-level decoding never grows a token */
    t->text_off = mf_malloc((n + 1) * sizeof *t->text_off);
    t->bytes_off = mf_malloc((n + 1) * sizeof *t->bytes_off);
    t->type = mf_malloc(n);
    t->eog = mf_calloc(n, 1);
    t->text_mask = table_size_for(n) - 1;
    t->text_hash = mf_malloc((t->text_mask + 1) * sizeof *t->text_hash);
    t->bytes_mask = t->text_mask;
    t->bytes_hash = mf_malloc((t->bytes_mask + 1) * sizeof *t->bytes_hash);
    if (!t->text_blob || !t->bytes_blob || !t->text_off || !t->bytes_off || !t->type || !t->eog || !t->text_hash ||
        !t->bytes_hash)
        return MF_ERR_NOMEM;
    memset(t->text_hash, 0xFF, (t->text_mask + 1) * sizeof *t->text_hash);
    memset(t->bytes_hash, 0xFF, (t->bytes_mask + 1) * sizeof *t->bytes_hash);

    uint32_t byte_to_cp[256];
    int16_t cp_to_byte[324];
    byte_level_tables(byte_to_cp, cp_to_byte);
    uint32_t to = 0, bo = 0;
    for (uint64_t i = 0; i < n; i++) {
        const mf_str *str = &tokens->arr.strs[i];
        int32_t ty = MF_TOKEN_NORMAL;
        if (types) {
            memcpy(&ty, (const uint8_t *)types->arr.data + 4 * i, 4);
            if (ty < MF_TOKEN_UNDEFINED || ty > MF_TOKEN_BYTE)
                return mf_fail(MF_ERR_FORMAT, "tokenizer.ggml.token_type[%llu] = %d, valid range 0..6",
                               (unsigned long long)i, ty);
        }
        t->type[i] = (uint8_t)ty;
        t->text_off[i] = to;
        memcpy(t->text_blob + to, str->ptr, str->len);
        t->text_blob[to + str->len] = 0;
        to += (uint32_t)str->len + 1;
        t->bytes_off[i] = bo;
        const uint8_t *p = (const uint8_t *)str->ptr;
        if (ty == MF_TOKEN_NORMAL || ty == MF_TOKEN_BYTE || ty == MF_TOKEN_UNDEFINED) {
            /* Byte-level characters back to bytes; a character outside the alphabet stays as it is. */
            for (size_t k = 0; k < str->len;) {
                uint32_t cp;
                size_t l = mf_utf8_decode(p + k, str->len - k, &cp);
                if (cp < 324 && cp_to_byte[cp] >= 0) t->bytes_blob[bo++] = (uint8_t)cp_to_byte[cp];
                else {
                    memcpy(t->bytes_blob + bo, p + k, l);
                    bo += (uint32_t)l;
                }
                k += l;
            }
        } else {
            memcpy(t->bytes_blob + bo, p, str->len);
            bo += (uint32_t)str->len;
        }
        if (str->len == 0) continue; /* an empty token can never be produced or matched */
        size_t h = (size_t)mf_tok_hash(p, str->len) & t->text_mask;
        while (t->text_hash[h] >= 0) {
            size_t len;
            const char *q = token_text(t, t->text_hash[h], &len);
            if (len == str->len && memcmp(q, p, len) == 0)
                return mf_fail(MF_ERR_FORMAT, "tokenizer.ggml.tokens: token %llu '%.*s' duplicates token %d",
                               (unsigned long long)i, (int)MF_MIN(str->len, 64), str->ptr, t->text_hash[h]);
            h = (h + 1) & t->text_mask;
        }
        t->text_hash[h] = (int32_t)i;
        if (ty == MF_TOKEN_NORMAL || ty == MF_TOKEN_BYTE) {
            size_t blen = bo - t->bytes_off[i];
            if (mf_tok_find_bytes(t, t->bytes_blob + t->bytes_off[i], blen) == MF_TOKEN_NULL) {
                h = (size_t)mf_tok_hash(t->bytes_blob + t->bytes_off[i], blen) & t->bytes_mask;
                while (t->bytes_hash[h] >= 0) h = (h + 1) & t->bytes_mask;
                t->bytes_hash[h] = (int32_t)i;
            }
        }
    }
    t->text_off[n] = to;
    t->bytes_off[n] = bo;

    int missing = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t u[4];
        size_t l = mf_utf8_encode(byte_to_cp[b], u);
        t->byte_tok[b] = find_text(t, (const char *)u, l);
        missing += t->byte_tok[b] < 0;
    }
    /* Some vocabularies (SmolLM2) lack a few bytes never seen in training; those bytes encode to
     * nothing. A vocabulary without most of them is not byte-level BPE at all. */
    if (missing > 128)
        return mf_fail(MF_ERR_FORMAT, "tokenizer: the vocabulary has tokens for only %d of the 256 bytes; "
                       "this is not a byte-level BPE vocabulary", 256 - missing);
    if (missing) mf_log(MF_LOG_INFO, "tokenizer: %d bytes have no token and will be skipped in input", missing);
    return MF_OK;
}

static mf_status load_merges(mf_tokenizer *t, const mf_gguf *g) {
    const mf_gguf_value *merges;
    mf_status s = mf_gguf_get_arr(g, "tokenizer.ggml.merges", MF_GGUF_STRING, &merges);
    if (s) return mf_fail_context(s, "tokenizer");
    uint64_t n = merges->arr.n;
    if (n > INT32_MAX / 4) return mf_fail(MF_ERR_FORMAT, "tokenizer.ggml.merges: %llu merges, over the limit %d",
                                          (unsigned long long)n, INT32_MAX / 4);
    t->pair_mask = table_size_for(n) - 1;
    t->pair_key = mf_calloc(t->pair_mask + 1, sizeof *t->pair_key);
    t->pair_val = mf_malloc((t->pair_mask + 1) * sizeof *t->pair_val);
    if (!t->pair_key || !t->pair_val) return MF_ERR_NOMEM;
    char *buf = NULL;
    size_t buf_cap = 0;
    size_t skipped = 0;
    for (uint64_t r = 0; r < n; r++) {
        const mf_str *m = &merges->arr.strs[r];
        /* "A B": split at the first space after the first byte. */
        const char *sp = m->len > 1 ? memchr(m->ptr + 1, ' ', m->len - 1) : NULL;
        if (!sp) {
            free(buf);
            return mf_fail(MF_ERR_FORMAT, "tokenizer.ggml.merges[%llu] = '%.*s': expected two tokens separated by a "
                           "space", (unsigned long long)r, (int)MF_MIN(m->len, 64), m->ptr);
        }
        size_t la = (size_t)(sp - m->ptr), lb = m->len - la - 1;
        if (la + lb > buf_cap) {
            buf_cap = (la + lb) * 2;
            char *nb = mf_realloc(buf, buf_cap);
            if (!nb) {
                free(buf);
                return MF_ERR_NOMEM;
            }
            buf = nb;
        }
        memcpy(buf, m->ptr, la);
        memcpy(buf + la, sp + 1, lb);
        int32_t a = find_text(t, m->ptr, la), b = find_text(t, sp + 1, lb), ab = find_text(t, buf, la + lb);
        if (a < 0 || b < 0 || ab < 0) {
            skipped++;
            continue;
        }
        uint64_t key = mf_tok_pair_key(a, b);
        size_t i = (size_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & t->pair_mask;
        while (t->pair_key[i] && t->pair_key[i] != key) i = (i + 1) & t->pair_mask;
        if (t->pair_key[i]) continue; /* a repeated pair keeps its first (best) rank */
        t->pair_key[i] = key;
        t->pair_val[i] = (uint64_t)r << 32 | (uint32_t)ab;
    }
    free(buf);
    if (skipped) mf_log(MF_LOG_WARN, "tokenizer: %zu merges name tokens missing from the vocabulary; ignored", skipped);
    return MF_OK;
}

static mf_status read_id(const mf_gguf *g, const mf_tokenizer *t, const char *key, int32_t *id) {
    if (!mf_gguf_find_kv(g, key)) return MF_OK;
    int64_t v;
    mf_status s = mf_gguf_get_i64(g, key, &v);
    if (s) return mf_fail_context(s, "tokenizer");
    if (v < 0) return MF_OK; /* some converters write -1 for "none" */
    if (v >= t->n_vocab)
        return mf_fail(MF_ERR_FORMAT, "%s = %lld is out of the vocabulary (valid range 0..%d)", key, (long long)v,
                       t->n_vocab - 1);
    *id = (int32_t)v;
    return MF_OK;
}

/* First token (in list order) whose text is one of names. */
static int32_t find_any(const mf_tokenizer *t, const char *const *names) {
    for (; *names; names++) {
        int32_t id = find_text(t, *names, strlen(*names));
        if (id >= 0) return id;
    }
    return MF_TOKEN_NULL;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_added(const void *a, const void *b) {
    const mf_tok_added *x = a, *y = b;
    if (x->text[0] != y->text[0]) return x->text[0] < y->text[0] ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Special ids, flags, the end-of-generation set (derived as llama.cpp does) and added tokens. */
static mf_status load_specials(mf_tokenizer *t, const mf_gguf *g) {
    static const char *const eot_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|end_of_text|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>", NULL};
    static const char *const eom_names[] = {"<|eom_id|>", NULL};
    static const char *const fim_pad_names[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", NULL};
    static const char *const fim_rep_names[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL};
    static const char *const fim_sep_names[] = {"<|file_sep|>", NULL};
    static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                            "<|eom_id|>", "<EOT>", "_<EOT>", "<|end_of_text|>",
                                            "<｜end▁of▁sentence｜>", NULL};
    int32_t fim_pad = MF_TOKEN_NULL, fim_rep = MF_TOKEN_NULL, fim_sep = MF_TOKEN_NULL;
    t->bos = t->eos = t->eot = t->eom = t->pad = MF_TOKEN_NULL;
    mf_status s;
    if ((s = read_id(g, t, "tokenizer.ggml.bos_token_id", &t->bos)) ||
        (s = read_id(g, t, "tokenizer.ggml.eos_token_id", &t->eos)) ||
        (s = read_id(g, t, "tokenizer.ggml.eot_token_id", &t->eot)) ||
        (s = read_id(g, t, "tokenizer.ggml.eom_token_id", &t->eom)) ||
        (s = read_id(g, t, "tokenizer.ggml.padding_token_id", &t->pad)) ||
        (s = read_id(g, t, "tokenizer.ggml.fim_pad_token_id", &fim_pad)) ||
        (s = read_id(g, t, "tokenizer.ggml.fim_rep_token_id", &fim_rep)) ||
        (s = read_id(g, t, "tokenizer.ggml.fim_sep_token_id", &fim_sep)))
        return s;
    if ((s = mf_gguf_find_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, t->add_bos)) ||
        (s = mf_gguf_find_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, t->add_eos)))
        return mf_fail_context(s, "tokenizer");
    if (t->add_bos && t->bos < 0)
        return mf_fail(MF_ERR_FORMAT, "tokenizer: add_bos_token is true but tokenizer.ggml.bos_token_id is not set");
    if (t->add_eos && t->eos < 0)
        return mf_fail(MF_ERR_FORMAT, "tokenizer: add_eos_token is true but tokenizer.ggml.eos_token_id is not set");
    if (t->eot < 0) t->eot = find_any(t, eot_names);
    if (t->eom < 0) t->eom = find_any(t, eom_names);
    if (fim_pad < 0) fim_pad = find_any(t, fim_pad_names);
    if (fim_rep < 0) fim_rep = find_any(t, fim_rep_names);
    if (fim_sep < 0) fim_sep = find_any(t, fim_sep_names);

    int32_t marks[] = {fim_pad, fim_rep, fim_sep, t->eos, t->eot, t->eom};
    for (size_t i = 0; i < MF_ARRAY_LEN(marks); i++)
        if (marks[i] >= 0) t->eog[marks[i]] = 1;
    for (const char *const *nm = eog_names; *nm; nm++) {
        int32_t id = find_text(t, *nm, strlen(*nm));
        if (id >= 0) t->eog[id] = 1;
    }
    for (int32_t i = 0; i < t->n_vocab; i++) t->n_eog += t->eog[i];
    t->eog_ids = mf_malloc((t->n_eog ? t->n_eog : 1) * sizeof *t->eog_ids);
    if (!t->eog_ids) return MF_ERR_NOMEM;
    size_t k = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->eog[i]) t->eog_ids[k++] = i;
    qsort(t->eog_ids, t->n_eog, sizeof *t->eog_ids, cmp_i32);

    size_t n_added = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->type[i];
        if ((ty == MF_TOKEN_CONTROL || ty == MF_TOKEN_USER_DEFINED || ty == MF_TOKEN_UNKNOWN) &&
            t->text_off[i + 1] - t->text_off[i] > 1)
            n_added++;
    }
    t->added = mf_malloc((n_added ? n_added : 1) * sizeof *t->added);
    if (!t->added) return MF_ERR_NOMEM;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->type[i];
        size_t len;
        const char *p = token_text(t, i, &len);
        if (!(ty == MF_TOKEN_CONTROL || ty == MF_TOKEN_USER_DEFINED || ty == MF_TOKEN_UNKNOWN) || len == 0) continue;
        mf_tok_added *a = &t->added[t->n_added++];
        a->text = (const uint8_t *)p;
        a->len = (uint32_t)len;
        a->id = i;
        a->control = ty != MF_TOKEN_USER_DEFINED;
        t->added_first[a->text[0]] |= (uint8_t)(a->control ? 1 : 3);
    }
    qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
    for (size_t i = 0, b = 0; b <= 256; b++) {
        while (i < t->n_added && t->added[i].text[0] < b) i++;
        t->added_start[b] = (uint32_t)i;
    }
    return MF_OK;
}

mf_status mf_tokenizer_load(const mf_gguf *g, mf_tokenizer **out) {
    *out = NULL;
    mf_str model, pre = {"", 0};
    mf_status s = mf_gguf_get_str(g, "tokenizer.ggml.model", &model);
    if (s) return mf_fail_context(s, "tokenizer");
    if (model.len != 4 || memcmp(model.ptr, "gpt2", 4) != 0)
        return mf_fail(MF_ERR_UNSUPPORTED, "tokenizer.ggml.model '%.*s' is not supported (minfer reads byte-level "
                       "BPE vocabularies, tokenizer.ggml.model = 'gpt2')", (int)MF_MIN(model.len, 64), model.ptr);
    if (mf_gguf_find_kv(g, "tokenizer.ggml.pre") && (s = mf_gguf_get_str(g, "tokenizer.ggml.pre", &pre)))
        return mf_fail_context(s, "tokenizer");

    mf_tokenizer *t = mf_calloc(1, sizeof *t);
    if (!t) return MF_ERR_NOMEM;
    t->pre = mf_strndup(pre.ptr, (size_t)pre.len);
    if (!t->pre) {
        mf_tokenizer_free(t);
        return MF_ERR_NOMEM;
    }
    const char *p = t->pre;
    if (!strcmp(p, "qwen2") || !strcmp(p, "deepseek-r1-qwen")) {
        t->pretok = MF_PRETOK_QWEN2;
        t->nfc = true; /* their tokenizer.json has an NFC normalizer */
    } else if (!strcmp(p, "llama-bpe") || !strcmp(p, "llama3") || !strcmp(p, "llama-v3")) {
        t->pretok = MF_PRETOK_LLAMA3;
        t->ignore_merges = true;
        t->add_bos = true;
    } else if (!strcmp(p, "smollm")) {
        t->pretok = MF_PRETOK_SMOLLM;
    } else if (!strcmp(p, "gpt2") || !strcmp(p, "gpt-2")) {
        t->pretok = MF_PRETOK_GPT2;
    } else {
        mf_status e = mf_fail(MF_ERR_UNSUPPORTED, "tokenizer.ggml.pre '%s' is not supported (supported: qwen2, "
                              "deepseek-r1-qwen, llama-bpe, smollm, gpt2)", pre.len ? p : "(missing)");
        mf_tokenizer_free(t);
        return e;
    }
    if ((s = load_vocab(t, g)) || (s = load_merges(t, g)) || (s = load_specials(t, g))) {
        mf_tokenizer_free(t);
        return s;
    }
    *out = t;
    return MF_OK;
}

void mf_tokenizer_free(mf_tokenizer *t) {
    if (!t) return;
    free(t->pre);
    free(t->text_blob);
    free(t->text_off);
    free(t->bytes_blob);
    free(t->bytes_off);
    free(t->type);
    free(t->eog);
    free(t->text_hash);
    free(t->bytes_hash);
    free(t->pair_key);
    free(t->pair_val);
    free(t->added);
    free(t->eog_ids);
    free(t);
}

int32_t mf_tokenizer_n_vocab(const mf_tokenizer *t) { return t->n_vocab; }
const char *mf_tokenizer_pre(const mf_tokenizer *t) { return t->pre; }

const char *mf_tokenizer_piece(const mf_tokenizer *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    return t->text_blob + t->text_off[id];
}

int32_t mf_tokenizer_find(const mf_tokenizer *t, const char *piece, size_t len) {
    return len ? find_text(t, piece, len) : MF_TOKEN_NULL;
}

mf_token_type mf_tokenizer_token_type(const mf_tokenizer *t, int32_t id) {
    return id < 0 || id >= t->n_vocab ? MF_TOKEN_UNDEFINED : (mf_token_type)t->type[id];
}

bool mf_tokenizer_is_control(const mf_tokenizer *t, int32_t id) {
    return mf_tokenizer_token_type(t, id) == MF_TOKEN_CONTROL;
}

bool mf_tokenizer_is_eog(const mf_tokenizer *t, int32_t id) { return id >= 0 && id < t->n_vocab && t->eog[id]; }

const int32_t *mf_tokenizer_eog_ids(const mf_tokenizer *t, size_t *n) {
    *n = t->n_eog;
    return t->eog_ids;
}

int32_t mf_tokenizer_bos(const mf_tokenizer *t) { return t->bos; }
int32_t mf_tokenizer_eos(const mf_tokenizer *t) { return t->eos; }
int32_t mf_tokenizer_eot(const mf_tokenizer *t) { return t->eot; }
int32_t mf_tokenizer_pad(const mf_tokenizer *t) { return t->pad; }
bool mf_tokenizer_add_bos(const mf_tokenizer *t) { return t->add_bos; }
bool mf_tokenizer_add_eos(const mf_tokenizer *t) { return t->add_eos; }
