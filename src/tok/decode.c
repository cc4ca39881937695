/* decode.c: token ids back to bytes, and the streaming decoder that turns generated tokens into
 * displayable text: complete UTF-8 characters only, holding back a possible stop-string prefix. */
#include "tok/tok_impl.h"

#include <stdlib.h>

static bool shown(const mf_tokenizer *t, int32_t id, unsigned flags) {
    uint8_t ty = t->type[id];
    if (ty == MF_TOKEN_CONTROL || ty == MF_TOKEN_UNUSED || ty == MF_TOKEN_UNKNOWN) return flags & MF_TOK_DECODE_SPECIAL;
    return true;
}

mf_status mf_tokenizer_token_to_bytes(const mf_tokenizer *t, int32_t id, unsigned flags, const uint8_t **bytes,
                                      size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *bytes = (const uint8_t *)"";
        *len = 0;
        return mf_fail(MF_ERR_RANGE, "token id %d is out of the vocabulary (valid range 0..%d)", id, t->n_vocab - 1);
    }
    *bytes = t->bytes_blob + t->bytes_off[id];
    *len = shown(t, id, flags) ? t->bytes_off[id + 1] - t->bytes_off[id] : 0;
    return MF_OK;
}

mf_status mf_tokenizer_decode(const mf_tokenizer *t, const int32_t *ids, size_t n, unsigned flags, char **out,
                              size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *b;
        size_t l;
        mf_status s = mf_tokenizer_token_to_bytes(t, ids[i], flags, &b, &l);
        if (s) return mf_fail_context(s, "decoding id %zu of %zu", i, n);
        total += l;
    }
    char *buf = mf_malloc(total + 1);
    if (!buf) return MF_ERR_NOMEM;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *b;
        size_t l;
        mf_tokenizer_token_to_bytes(t, ids[i], flags, &b, &l);
        memcpy(buf + o, b, l);
        o += l;
    }
    buf[o] = 0;
    *out = buf;
    *out_len = o;
    return MF_OK;
}

/* ---- streaming ---- */

struct mf_tok_stream {
    const mf_tokenizer *tok;
    unsigned flags;
    uint8_t partial[4]; /* bytes of an incomplete UTF-8 character */
    size_t n_partial;
    char *text; /* complete characters not yet returned (held back for stop strings) */
    size_t text_len, text_cap;
    char *out; /* what the last call returned */
    size_t out_cap;
    char **stops;
    size_t n_stops;
    int stopped;
};

static mf_status reserve(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return MF_OK;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    char *q = mf_realloc(*p, c);
    if (!q) return MF_ERR_NOMEM;
    *p = q;
    *cap = c;
    return MF_OK;
}

mf_status mf_tok_stream_create(const mf_tokenizer *tok, unsigned decode_flags, mf_tok_stream **out) {
    *out = NULL;
    mf_tok_stream *s = mf_calloc(1, sizeof *s);
    if (!s) return MF_ERR_NOMEM;
    s->tok = tok;
    s->flags = decode_flags;
    s->stopped = -1;
    if (reserve(&s->text, &s->text_cap, 256) || reserve(&s->out, &s->out_cap, 256)) {
        mf_tok_stream_free(s);
        return MF_ERR_NOMEM;
    }
    *out = s;
    return MF_OK;
}

static void free_stops(mf_tok_stream *s) {
    for (size_t i = 0; i < s->n_stops; i++) free(s->stops[i]);
    free(s->stops);
    s->stops = NULL;
    s->n_stops = 0;
}

void mf_tok_stream_free(mf_tok_stream *s) {
    if (!s) return;
    free_stops(s);
    free(s->text);
    free(s->out);
    free(s);
}

void mf_tok_stream_reset(mf_tok_stream *s) {
    s->n_partial = 0;
    s->text_len = 0;
    s->stopped = -1;
}

mf_status mf_tok_stream_set_stops(mf_tok_stream *s, const char *const *stops, size_t n) {
    free_stops(s);
    if (n == 0) return MF_OK;
    s->stops = mf_calloc(n, sizeof *s->stops);
    if (!s->stops) return MF_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (!stops[i] || !stops[i][0]) continue;
        s->stops[s->n_stops] = mf_strdup(stops[i]);
        if (!s->stops[s->n_stops]) return MF_ERR_NOMEM;
        s->n_stops++;
    }
    return MF_OK;
}

int mf_tok_stream_stopped(const mf_tok_stream *s) { return s->stopped; }

/* Length of the UTF-8 character that b[0..n) starts: its full length when n covers it, 0 when it
 * is a valid but incomplete prefix, -1 when b[0..n) can never be a valid character. */
static int utf8_state(const uint8_t *b, size_t n) {
    uint8_t c = b[0];
    int len;
    uint8_t lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else return -1;
    for (size_t i = 1; i < n && i < (size_t)len; i++) {
        uint8_t x = b[i];
        if (i == 1 ? (x < lo || x > hi) : (x & 0xC0) != 0x80) return -1;
    }
    return n >= (size_t)len ? len : 0;
}

static const char REPLACEMENT[] = "\xEF\xBF\xBD";

static mf_status text_append(mf_tok_stream *s, const void *p, size_t n) {
    if (reserve(&s->text, &s->text_cap, s->text_len + n)) return MF_ERR_NOMEM;
    memcpy(s->text + s->text_len, p, n);
    s->text_len += n;
    return MF_OK;
}

/* Feed bytes through the UTF-8 assembler into s->text. */
static mf_status feed(mf_tok_stream *s, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        s->partial[s->n_partial++] = b[i];
        while (s->n_partial) {
            int st = utf8_state(s->partial, s->n_partial);
            if (st == 0) break; /* wait for more bytes */
            mf_status e;
            size_t used = st > 0 ? (size_t)st : 1;
            e = st > 0 ? text_append(s, s->partial, used) : text_append(s, REPLACEMENT, 3);
            if (e) return e;
            /* An invalid lead byte is replaced; the bytes after it are examined again. */
            memmove(s->partial, s->partial + used, s->n_partial - used);
            s->n_partial -= used;
        }
    }
    return MF_OK;
}

/* Move the text that is safe to show into s->out. With stop strings: cut at the first complete
 * stop string, otherwise keep back the longest tail that is a prefix of some stop string. */
static mf_status release(mf_tok_stream *s, bool final, const char **text, size_t *len) {
    size_t safe = s->text_len;
    if (s->n_stops) {
        size_t first = SIZE_MAX;
        int which = -1;
        for (size_t k = 0; k < s->n_stops; k++) {
            const char *hit = memmem(s->text, s->text_len, s->stops[k], strlen(s->stops[k]));
            if (hit && (size_t)(hit - s->text) < first) {
                first = (size_t)(hit - s->text);
                which = (int)k;
            }
        }
        if (which >= 0) {
            s->stopped = which;
            safe = first;
        } else if (!final) {
            for (size_t k = 0; k < s->n_stops; k++) {
                size_t sl = strlen(s->stops[k]);
                size_t from = s->text_len >= sl ? s->text_len - sl + 1 : 0;
                for (size_t p = from; p < safe; p++)
                    if (memcmp(s->text + p, s->stops[k], s->text_len - p) == 0) {
                        safe = p;
                        break;
                    }
            }
        }
    }
    if (reserve(&s->out, &s->out_cap, safe + 1)) return MF_ERR_NOMEM;
    memcpy(s->out, s->text, safe);
    s->out[safe] = 0;
    if (s->stopped >= 0) s->text_len = 0;
    else {
        memmove(s->text, s->text + safe, s->text_len - safe);
        s->text_len -= safe;
    }
    *text = s->out;
    *len = safe;
    return MF_OK;
}

mf_status mf_tok_stream_push(mf_tok_stream *s, int32_t id, const char **text, size_t *len) {
    *text = "";
    *len = 0;
    if (s->stopped >= 0) return MF_OK;
    const uint8_t *b;
    size_t n;
    mf_status st = mf_tokenizer_token_to_bytes(s->tok, id, s->flags, &b, &n);
    if (st) return st;
    if ((st = feed(s, b, n))) return st;
    return release(s, false, text, len);
}

mf_status mf_tok_stream_flush(mf_tok_stream *s, const char **text, size_t *len) {
    *text = "";
    *len = 0;
    if (s->stopped >= 0) return MF_OK;
    if (s->n_partial) {
        s->n_partial = 0;
        if (text_append(s, REPLACEMENT, 3)) return MF_ERR_NOMEM;
    }
    return release(s, true, text, len);
}
