/* stop.c: the stop-string matcher over decoded bytes (see stop.h for the contract).
 *
 * Invariant: every byte already returned is followed, in the full text, by no stop string that
 * starts at or before it. So a future match can only start inside the held bytes, and the held
 * bytes are at most the longest stop string minus one plus an incomplete UTF-8 character. */
#include "sample/stop.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

struct mf_stop {
    char **str;
    size_t *len;
    size_t n, max_len;
    char *buf; /* buf[0..emitted) was returned last call; buf[emitted..used) is held */
    size_t cap, used, emitted;
    bool done;
    unsigned char partial[4]; /* the bytes of an incomplete UTF-8 character, not yet in buf */
    size_t n_partial;
};

const char *mf_stop_reason_str(mf_stop_reason r) {
    switch (r) {
    case MF_STOP_NONE: return "none";
    case MF_STOP_EOG: return "eog";
    case MF_STOP_STRING: return "stop";
    case MF_STOP_LENGTH: return "length";
    }
    return "?";
}

mf_status mf_stop_create(const char *const *strings, size_t n, mf_stop **out) {
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (!strings || !strings[i] || !strings[i][0])
            return mf_fail(MF_ERR_ARG, "stop string %zu is empty; a stop string needs at least one byte", i);
    mf_stop *m = mf_calloc(1, sizeof *m);
    if (!m) return MF_ERR_NOMEM;
    if (n) {
        m->str = mf_calloc(n, sizeof *m->str);
        m->len = mf_calloc(n, sizeof *m->len);
        if (!m->str || !m->len) goto nomem;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(m->str[i] = mf_strdup(strings[i]))) goto nomem;
        m->n = i + 1;
        m->len[i] = strlen(strings[i]);
        m->max_len = MF_MAX(m->max_len, m->len[i]);
    }
    m->cap = m->max_len + 64;
    if (!(m->buf = mf_malloc(m->cap))) goto nomem;
    *out = m;
    return MF_OK;
nomem:
    mf_stop_free(m);
    return MF_ERR_NOMEM;
}

void mf_stop_free(mf_stop *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n; i++) free(m->str[i]);
    free(m->str);
    free(m->len);
    free(m->buf);
    free(m);
}

void mf_stop_reset(mf_stop *m) { m->used = m->emitted = m->n_partial = 0, m->done = false; }

/* Length of the UTF-8 character that b[0..n) starts: its full length when n covers it, 0 when it
 * is a valid but incomplete prefix, -1 when b[0..n) can never be a valid character (overlong
 * forms, surrogates and code points past U+10FFFF included). */
static int utf8_state(const unsigned char *b, size_t n) {
    unsigned c = b[0];
    int len;
    unsigned lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
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
        unsigned x = b[i];
        if (i == 1 ? (x < lo || x > hi) : (x & 0xC0) != 0x80) return -1;
    }
    return n >= (size_t)len ? len : 0;
}

static const char REPLACEMENT[] = "\xEF\xBF\xBD"; /* U+FFFD */

static mf_status buf_put(mf_stop *m, const void *p, size_t n) {
    size_t need;
    if (!mf_add_size(m->used, n, &need)) return mf_fail(MF_ERR_NOMEM, "stop matcher: %zu bytes overflow", n);
    if (need > m->cap) {
        size_t ncap = MF_MAX(need, m->cap * 2);
        char *nb = mf_realloc(m->buf, ncap);
        if (!nb) return MF_ERR_NOMEM;
        m->buf = nb, m->cap = ncap;
    }
    memcpy(m->buf + m->used, p, n);
    m->used += n;
    return MF_OK;
}

/* Append bytes to buf as whole, valid UTF-8 characters: an incomplete character waits in
 * m->partial, a sequence that can never be valid becomes U+FFFD and its next byte is examined again. */
static mf_status put_utf8(mf_stop *m, const unsigned char *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        m->partial[m->n_partial++] = b[i];
        while (m->n_partial) {
            int st = utf8_state(m->partial, m->n_partial);
            if (st == 0) break;
            size_t used = st > 0 ? (size_t)st : 1;
            mf_status e = st > 0 ? buf_put(m, m->partial, used) : buf_put(m, REPLACEMENT, 3);
            if (e) return e;
            memmove(m->partial, m->partial + used, m->n_partial - used);
            m->n_partial -= used;
        }
    }
    return MF_OK;
}

mf_status mf_stop_feed(mf_stop *m, const char *bytes, size_t n, const char **out, size_t *out_len, int *matched) {
    *matched = -1;
    *out = m->buf;
    *out_len = 0;
    if (m->done) return MF_OK;
    memmove(m->buf, m->buf + m->emitted, m->used - m->emitted);
    m->used -= m->emitted;
    m->emitted = 0;
    mf_status st = put_utf8(m, (const unsigned char *)bytes, n);
    *out = m->buf;
    if (st) return st;

    /* The first stop string to be completed wins, whatever the split into feeds; among those ending
     * at the same byte, the one starting earliest, then the first given. */
    const char *b = m->buf;
    size_t used = m->used;
    for (size_t end = 1; end <= used; end++) {
        int best = -1;
        for (size_t i = 0; i < m->n; i++) {
            size_t l = m->len[i];
            if (l <= end && (best < 0 || l > m->len[best]) && !memcmp(b + end - l, m->str[i], l)) best = (int)i;
        }
        if (best >= 0) {
            *matched = best;
            *out_len = end - m->len[best];
            m->emitted = m->used = m->n_partial = 0;
            m->done = true;
            return MF_OK;
        }
    }
    /* Hold the longest tail that is a proper prefix of some stop string. */
    size_t hold = 0;
    for (size_t h = MF_MIN(used, m->max_len ? m->max_len - 1 : 0); h >= 1 && !hold; h--)
        for (size_t i = 0; i < m->n; i++)
            if (m->len[i] > h && !memcmp(b + used - h, m->str[i], h)) {
                hold = h;
                break;
            }
    m->emitted = used - hold;
    *out_len = used - hold;
    return MF_OK;
}

mf_status mf_stop_flush(mf_stop *m, const char **out, size_t *out_len) {
    *out = m->buf;
    *out_len = 0;
    if (m->done) return MF_OK;
    memmove(m->buf, m->buf + m->emitted, m->used - m->emitted);
    m->used -= m->emitted;
    m->emitted = 0;
    /* A character cut off by the end of generation shows as U+FFFD, never as half a character. */
    if (m->n_partial) {
        m->n_partial = 0;
        mf_status st = buf_put(m, REPLACEMENT, 3);
        *out = m->buf;
        if (st) return st;
    }
    *out_len = m->used;
    m->used = 0;
    return MF_OK;
}

bool mf_stop_is_eog_text(const char *text, size_t len) {
    static const char *const eog[] = {
        "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "<|return|>", "<|call|>", "<end_of_utterance>", "</s>",
        /* DeepSeek's <｜end▁of▁sentence｜>, split where a hex escape ends (the parentheses tell clang so) */
        ("<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"),
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(eog); i++)
        if (strlen(eog[i]) == len && !memcmp(eog[i], text, len)) return true;
    return false;
}
