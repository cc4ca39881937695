/* sampler_history.c: the stages that look at the token history: repetition/frequency/presence
 * penalties over the last N tokens, and DRY ("don't repeat yourself"), which penalizes a token by
 * how long a repeated sequence it would extend, with sequence breakers given as text. */
#include "sample/sampler_internal.h"

#include "core/core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DRY_MAX_BREAKER_BYTES 40 /* longer breakers are truncated, as llama.cpp does */
#define DRY_MAX_TAIL_TOKENS 20   /* a breaker continues over at most this many following tokens */

static bool stage_in_chain(const mf_sampler *s, mf_sampler_stage st) {
    for (size_t i = 0; i < s->n_stages; i++)
        if (s->stages[i] == st) return true;
    return false;
}

static void ring_push(mf_ring *r, int32_t t) {
    r->data[r->head] = t;
    r->head = (r->head + 1) % r->cap;
    if (r->len < r->cap) r->len++;
}

static mf_status window_size(int32_t last_n, int32_t n_ctx, const char *name, size_t *out) {
    if (last_n == -1) {
        if (n_ctx <= 0)
            return mf_fail(MF_ERR_ARG, "%s = -1 means the context size, but the vocab's n_ctx is %d; pass n_ctx > 0",
                           name, (int)n_ctx);
        last_n = n_ctx;
    }
    *out = (size_t)last_n;
    return MF_OK;
}

static mf_status add_head(mf_sampler *s, size_t *cap, int32_t token, size_t breaker, size_t len) {
    if (s->n_dry_heads == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        mf_dry_head *nh = mf_realloc(s->dry_heads, ncap * sizeof *nh);
        if (!nh) return MF_ERR_NOMEM;
        s->dry_heads = nh, *cap = ncap;
    }
    s->dry_heads[s->n_dry_heads++] = (mf_dry_head){token, (uint16_t)breaker, (uint16_t)len};
    return MF_OK;
}

/* Classify every token against every breaker: its text contains the breaker (a breaker on its
 * own), or ends with a proper prefix of it (the breaker may go on in the next tokens). Heads come
 * out sorted by token because tokens are scanned in order. */
static mf_status dry_init_breakers(mf_sampler *s, const mf_sampler_params *p, const mf_sampler_vocab *v) {
    size_t nb = 0;
    for (size_t i = 0; i < p->n_dry_breakers; i++) nb += p->dry_breakers[i] && p->dry_breakers[i][0];
    if (nb == 0) return MF_OK;
    if (!v->piece)
        return mf_fail(MF_ERR_ARG, "DRY sequence breakers need the vocabulary's token texts (mf_sampler_vocab.piece is NULL)");
    s->breakers = mf_calloc(nb, sizeof *s->breakers);
    s->breaker_len = mf_calloc(nb, sizeof *s->breaker_len);
    if (!s->breakers || !s->breaker_len) return MF_ERR_NOMEM;
    for (size_t i = 0; i < p->n_dry_breakers; i++) {
        const char *b = p->dry_breakers[i];
        if (!b || !b[0]) continue;
        size_t len = MF_MIN(strlen(b), (size_t)DRY_MAX_BREAKER_BYTES);
        if (!(s->breakers[s->n_breakers] = mf_strndup(b, len))) return MF_ERR_NOMEM;
        s->breaker_len[s->n_breakers++] = len;
    }
    size_t cap = 0;
    for (int32_t t = 0; t < s->n_vocab; t++) {
        size_t tl = 0;
        const char *text = v->piece(v->user, t, &tl);
        if (!text || tl == 0) continue;
        for (size_t b = 0; b < s->n_breakers; b++) {
            const char *bs = s->breakers[b];
            size_t bl = s->breaker_len[b];
            if (tl >= bl && memmem(text, tl, bs, bl)) {
                s->dry_full[t] = 1;
                continue;
            }
            for (size_t l = MF_MIN(bl - 1, tl); l >= 1; l--)
                if (memcmp(text + tl - l, bs, l) == 0 && add_head(s, &cap, t, b, l)) return MF_ERR_NOMEM;
        }
    }
    return MF_OK;
}

mf_status mf_history_init(mf_sampler *s, const mf_sampler_params *p, const mf_sampler_vocab *v) {
    size_t nv = (size_t)s->n_vocab;
    bool pen_neutral = p->penalty_repeat == 1.0f && p->penalty_freq == 0.0f && p->penalty_present == 0.0f;
    s->pen_on = p->mirostat == 0 && stage_in_chain(s, MF_STAGE_PENALTIES) && p->penalty_last_n != 0 && !pen_neutral;
    if (s->pen_on) {
        size_t w = 0;
        mf_status st = window_size(p->penalty_last_n, v->n_ctx, "penalty_last_n (--repeat-last-n)", &w);
        if (st) return st;
        s->pen.cap = w;
        s->pen.data = mf_malloc(w * sizeof *s->pen.data);
        s->pen_count = mf_calloc(nv, sizeof *s->pen_count);
        s->pen_pos = mf_malloc(nv * sizeof *s->pen_pos);
        s->pen_distinct = mf_malloc(MF_MIN(w, nv) * sizeof *s->pen_distinct);
        if (!s->pen.data || !s->pen_count || !s->pen_pos || !s->pen_distinct) return MF_ERR_NOMEM;
    }
    s->dry_on = p->mirostat == 0 && stage_in_chain(s, MF_STAGE_DRY) && p->dry_multiplier != 0.0f && p->dry_base >= 1.0f &&
                p->dry_penalty_last_n != 0;
    if (s->dry_on) {
        size_t w = 0;
        mf_status st = window_size(p->dry_penalty_last_n, v->n_ctx, "dry_penalty_last_n (--dry-penalty-last-n)", &w);
        if (st) return st;
        s->dry.cap = w;
        s->dry.data = mf_malloc(w * sizeof *s->dry.data);
        s->dry_rev = mf_malloc(w * sizeof *s->dry_rev);
        s->dry_z = mf_malloc(w * sizeof *s->dry_z);
        s->dry_touched = mf_malloc(w * sizeof *s->dry_touched);
        s->dry_maxrep = mf_calloc(nv, sizeof *s->dry_maxrep);
        s->dry_full = mf_calloc(nv, 1);
        if (!s->dry.data || !s->dry_rev || !s->dry_z || !s->dry_touched || !s->dry_maxrep || !s->dry_full)
            return MF_ERR_NOMEM;
        mf_status bs = dry_init_breakers(s, p, v);
        if (bs) return bs;
        s->piece = v->piece;
        s->piece_user = v->user;
    }
    return MF_OK;
}

void mf_history_free(mf_sampler *s) {
    free(s->pen.data);
    free(s->pen_count);
    free(s->pen_pos);
    free(s->pen_distinct);
    free(s->dry.data);
    free(s->dry_rev);
    free(s->dry_z);
    free(s->dry_touched);
    free(s->dry_maxrep);
    free(s->dry_full);
    free(s->dry_heads);
    for (size_t i = 0; i < s->n_breakers; i++) free(s->breakers[i]);
    free(s->breakers);
    free(s->breaker_len);
}

static void pen_accept(mf_sampler *s, int32_t token) {
    mf_ring *r = &s->pen;
    if (r->len == r->cap) {
        int32_t old = r->data[r->head]; /* the oldest entry, about to be overwritten */
        if (--s->pen_count[old] == 0) {
            int32_t last = s->pen_distinct[--s->n_distinct];
            s->pen_distinct[s->pen_pos[old]] = last;
            s->pen_pos[last] = s->pen_pos[old];
        }
    }
    ring_push(r, token);
    if (s->pen_count[token]++ == 0) {
        s->pen_pos[token] = (int32_t)s->n_distinct;
        s->pen_distinct[s->n_distinct++] = token;
    }
}

void mf_history_accept(mf_sampler *s, int32_t token) {
    if (s->pen_on) pen_accept(s, token);
    if (s->dry_on) ring_push(&s->dry, token);
}

void mf_history_restore(mf_sampler *s, const int32_t *pen, size_t n_pen, const int32_t *dry, size_t n_dry) {
    mf_history_reset(s);
    for (size_t i = n_pen > s->pen.cap ? n_pen - s->pen.cap : 0; s->pen_on && i < n_pen; i++) pen_accept(s, pen[i]);
    for (size_t i = n_dry > s->dry.cap ? n_dry - s->dry.cap : 0; s->dry_on && i < n_dry; i++) ring_push(&s->dry, dry[i]);
}

void mf_history_reset(mf_sampler *s) {
    for (size_t i = 0; i < s->n_distinct; i++) s->pen_count[s->pen_distinct[i]] = 0;
    s->n_distinct = 0;
    s->pen.len = s->pen.head = 0;
    s->dry.len = s->dry.head = 0;
}

/* The repeat penalty divides positive logits and multiplies the others (so it always lowers them);
 * then count * frequency + presence is subtracted. Same arithmetic as llama.cpp. */
static inline float penalize(float l, int32_t c, const mf_sampler_params *p) {
    if (l <= 0.0f) l *= p->penalty_repeat;
    else l /= p->penalty_repeat;
    return l - ((float)c * p->penalty_freq + p->penalty_present);
}

void mf_stage_penalties(mf_sampler *s) {
    if (!s->pen_on || s->n_distinct == 0) return;
    if (s->dense) {
        for (size_t i = 0; i < s->n_distinct; i++) {
            int32_t t = s->pen_distinct[i];
            s->wl[t] = penalize(s->wl[t], s->pen_count[t], &s->p);
        }
        return;
    }
    for (size_t i = 0; i < s->n_cand; i++) {
        int32_t c = s->pen_count[s->cand[i].id];
        if (c > 0) s->cand[i].logit = penalize(s->cand[i].logit, c, &s->p);
    }
    s->sorted = false;
}

/* How many tokens after rev[i] (rev[i-1], rev[i-2], ...) complete breaker b, given that rev[i]'s
 * text ends with its first `done` bytes; -1 when they do not. */
static int dry_tail_match(const mf_sampler *s, size_t i, size_t b, size_t done) {
    const char *rest = s->breakers[b] + done;
    size_t left = s->breaker_len[b] - done;
    for (size_t j = 1; j <= i && j <= DRY_MAX_TAIL_TOKENS; j++) {
        size_t tl = 0;
        const char *text = s->piece(s->piece_user, s->dry_rev[i - j], &tl);
        if (!text) return -1;
        if (tl >= left) return memcmp(text, rest, left) == 0 ? (int)j : -1;
        if (memcmp(text, rest, tl) != 0) return -1;
        rest += tl, left -= tl;
    }
    return -1;
}

/* The longest repetition may not reach back past the most recent sequence breaker: returns the
 * number of tokens after it (the whole window when there is none). */
static size_t dry_rep_limit(const mf_sampler *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int32_t t = s->dry_rev[i];
        int longest = s->dry_full[t] ? 0 : -1;
        /* Binary search the first head entry of token t. */
        size_t lo = 0, hi = s->n_dry_heads;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (s->dry_heads[mid].token < t) lo = mid + 1;
            else hi = mid;
        }
        for (size_t h = lo; h < s->n_dry_heads && s->dry_heads[h].token == t; h++) {
            int j = dry_tail_match(s, i, s->dry_heads[h].breaker, s->dry_heads[h].len);
            if (j > longest) longest = j;
        }
        if (longest >= 0) return i - (size_t)longest;
    }
    return n;
}

void mf_stage_dry(mf_sampler *s) {
    if (!s->dry_on) return;
    size_t n = s->dry.len;
    size_t allowed = (size_t)s->p.dry_allowed_length;
    if (n <= allowed) return;
    int32_t *rev = s->dry_rev, *z = s->dry_z;
    for (size_t i = 0; i < n; i++) rev[i] = mf_ring_at(&s->dry, i);
    size_t limit = dry_rep_limit(s, n);
    if (limit < allowed) return;

    /* Z-function of rev (most recent token first): z[k] = length of the longest common prefix of
     * rev and rev[k..], i.e. how many of the last tokens also occur ending k tokens earlier. The
     * token that followed that earlier occurrence, rev[k-1], would extend the repetition. */
    size_t l = 0, r = 0;
    z[0] = (int32_t)n;
    for (size_t k = 1; k < n; k++) {
        size_t zk = 0;
        if (k < r) zk = MF_MIN(r - k, (size_t)z[k - l]);
        while (k + zk < n && rev[zk] == rev[k + zk]) zk++;
        z[k] = (int32_t)zk;
        if (k + zk > r) l = k, r = k + zk;
    }
    size_t n_touched = 0;
    for (size_t k = 1; k < n; k++) {
        size_t len = MF_MIN((size_t)z[k], limit);
        if (len < allowed) continue;
        int32_t t = rev[k - 1];
        if (s->dry_maxrep[t] == 0) s->dry_touched[n_touched++] = t;
        if (s->dry_maxrep[t] < (int32_t)len + 1) s->dry_maxrep[t] = (int32_t)len + 1;
    }
    if (n_touched == 0) return;

    /* penalty = multiplier * base^(len - allowed), the exponent capped so the power stays finite. */
    int max_exp = 0;
    if (s->p.dry_base > 1.000001f) max_exp = (int)(88.7228391f / logf(s->p.dry_base));
    if (s->dense) {
        for (size_t i = 0; i < n_touched; i++) {
            int32_t t = s->dry_touched[i];
            if (s->dry_full[t]) continue;
            int e = s->dry_maxrep[t] - 1 - (int)allowed;
            if (max_exp > 0 && e > max_exp) e = max_exp;
            s->wl[t] -= (float)(s->p.dry_multiplier * pow(s->p.dry_base, e));
        }
    } else {
        for (size_t i = 0; i < s->n_cand; i++) {
            int32_t t = s->cand[i].id;
            if (s->dry_maxrep[t] == 0 || s->dry_full[t]) continue;
            int e = s->dry_maxrep[t] - 1 - (int)allowed;
            if (max_exp > 0 && e > max_exp) e = max_exp;
            s->cand[i].logit -= (float)(s->p.dry_multiplier * pow(s->p.dry_base, e));
        }
        s->sorted = false;
    }
    for (size_t i = 0; i < n_touched; i++) s->dry_maxrep[s->dry_touched[i]] = 0;
}
