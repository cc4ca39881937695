/* decode.c: token ids back to bytes, and the streaming decoder that turns generated tokens into
 * displayable text: complete UTF-8 characters only, holding back a possible stop-string prefix. */
#include "tok/tok_impl.h"
#include "sample/stop.h"

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

/* The stream is the token-to-bytes step in front of the shared text matcher (sample/stop.h), which
 * assembles whole UTF-8 characters and holds back possible stop-string prefixes. */
struct mf_tok_stream {
    const mf_tokenizer *tok;
    unsigned flags;
    mf_stop *stop;
    int stopped;
};

mf_status mf_tok_stream_create(const mf_tokenizer *tok, unsigned decode_flags, mf_tok_stream **out) {
    *out = NULL;
    mf_tok_stream *s = mf_calloc(1, sizeof *s);
    if (!s) return MF_ERR_NOMEM;
    s->tok = tok;
    s->flags = decode_flags;
    s->stopped = -1;
    mf_status st = mf_stop_create(NULL, 0, &s->stop);
    if (st) {
        free(s);
        return st;
    }
    *out = s;
    return MF_OK;
}

void mf_tok_stream_free(mf_tok_stream *s) {
    if (!s) return;
    mf_stop_free(s->stop);
    free(s);
}

void mf_tok_stream_reset(mf_tok_stream *s) {
    mf_stop_reset(s->stop);
    s->stopped = -1;
}

mf_status mf_tok_stream_set_stops(mf_tok_stream *s, const char *const *stops, size_t n) {
    /* Empty strings are ignored here; the matcher refuses them. */
    const char **keep = n ? mf_calloc(n, sizeof *keep) : NULL;
    if (n && !keep) return MF_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (stops[i] && stops[i][0]) keep[k++] = stops[i];
    mf_stop *m;
    mf_status st = mf_stop_create(keep, k, &m);
    free(keep);
    if (st) return st;
    mf_stop_free(s->stop);
    s->stop = m;
    s->stopped = -1;
    return MF_OK;
}

int mf_tok_stream_stopped(const mf_tok_stream *s) { return s->stopped; }

mf_status mf_tok_stream_push(mf_tok_stream *s, int32_t id, const char **text, size_t *len) {
    *text = "";
    *len = 0;
    if (s->stopped >= 0) return MF_OK;
    const uint8_t *b;
    size_t n;
    mf_status st = mf_tokenizer_token_to_bytes(s->tok, id, s->flags, &b, &n);
    if (st) return st;
    int hit = -1;
    if ((st = mf_stop_feed(s->stop, (const char *)b, n, text, len, &hit))) return st;
    if (hit >= 0) s->stopped = hit;
    return MF_OK;
}

mf_status mf_tok_stream_flush(mf_tok_stream *s, const char **text, size_t *len) {
    *text = "";
    *len = 0;
    if (s->stopped >= 0) return MF_OK;
    return mf_stop_flush(s->stop, text, len);
}
