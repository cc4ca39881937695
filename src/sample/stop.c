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

void mf_stop_reset(mf_stop *m) { m->used = m->emitted = 0, m->done = false; }

/* Move cut back to the start of a UTF-8 sequence that is not complete within b[0..cut). Invalid
 * bytes (stray continuation bytes, 0xF8..0xFF) pass as single bytes. */
static size_t utf8_cut(const unsigned char *b, size_t cut) {
    for (size_t k = 1; k <= 4 && k <= cut; k++) {
        unsigned c = b[cut - k];
        if ((c & 0xC0) == 0x80) continue;
        size_t need = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
        return need > k ? cut - k : cut;
    }
    return cut;
}

mf_status mf_stop_feed(mf_stop *m, const char *bytes, size_t n, const char **out, size_t *out_len, int *matched) {
    *matched = -1;
    *out = m->buf;
    *out_len = 0;
    if (m->done) return MF_OK;
    memmove(m->buf, m->buf + m->emitted, m->used - m->emitted);
    m->used -= m->emitted;
    m->emitted = 0;
    size_t need;
    if (!mf_add_size(m->used, n, &need)) return mf_fail(MF_ERR_NOMEM, "stop matcher: %zu bytes overflow", n);
    if (need > m->cap) {
        size_t ncap = MF_MAX(need, m->cap * 2);
        char *nb = mf_realloc(m->buf, ncap);
        if (!nb) return MF_ERR_NOMEM;
        m->buf = nb, m->cap = ncap;
        *out = m->buf;
    }
    if (n) memcpy(m->buf + m->used, bytes, n);
    m->used += n;

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
            m->emitted = m->used = 0;
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
    size_t cut = utf8_cut((const unsigned char *)b, used - hold);
    m->emitted = cut;
    *out_len = cut;
    return MF_OK;
}

void mf_stop_flush(mf_stop *m, const char **out, size_t *out_len) {
    *out = m->buf;
    *out_len = 0;
    if (m->done) return;
    memmove(m->buf, m->buf + m->emitted, m->used - m->emitted);
    *out_len = m->used - m->emitted;
    m->used = m->emitted = 0;
}

bool mf_stop_is_eog_text(const char *text, size_t len) {
    static const char *const eog[] = {
        "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>", "<|end_of_text|>",
        "<EOT>", "_<EOT>", "<|return|>", "<|call|>", "<end_of_utterance>", "</s>",
        "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>", /* DeepSeek's <｜end▁of▁sentence｜> */
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(eog); i++)
        if (strlen(eog[i]) == len && !memcmp(eog[i], text, len)) return true;
    return false;
}
