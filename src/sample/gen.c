/* gen.c: the per-token loop of a generation: sample, accept, end-of-generation and stop-string
 * checks, token limit (see gen.h). */
#include "sample/gen.h"

#include "core/core.h"

#include <stdlib.h>
#include <string.h>

struct mf_gen {
    mf_sampler *smp;
    mf_stop *stop;
    const char *(*piece)(void *user, int32_t token, size_t *len);
    void *user;
    uint8_t *eog; /* [n_vocab] 1 for an end-of-generation token */
    int32_t n_vocab;
    int64_t n_predict, n_gen;
    bool ended;
    char *out; /* the text returned by mf_gen_next: matcher output, then flushed bytes */
    size_t out_cap;
};

mf_status mf_gen_create(const mf_sampler_params *params, const char *const *stops, size_t n_stop, int64_t n_predict,
                        const mf_sampler_vocab *v, mf_gen **out) {
    *out = NULL;
    if (!v || !v->piece) return mf_fail(MF_ERR_ARG, "generation needs the vocabulary's token texts (piece is NULL)");
    if (n_predict < -1) return mf_fail(MF_ERR_ARG, "n_predict = %lld: use -1 (no limit) or a count >= 0", (long long)n_predict);
    mf_gen *g = mf_calloc(1, sizeof *g);
    if (!g) return MF_ERR_NOMEM;
    mf_status st = mf_sampler_create(params, v, &g->smp);
    if (!st) st = mf_stop_create(stops, n_stop, &g->stop);
    if (!st && !(g->eog = mf_calloc((size_t)v->n_vocab, 1))) st = MF_ERR_NOMEM;
    if (st) {
        mf_gen_free(g);
        return st;
    }
    /* With ignore_eos the sampler bans these tokens, so they never end the generation. */
    for (size_t i = 0; i < v->n_eog && !params->ignore_eos; i++)
        if (v->eog[i] >= 0 && v->eog[i] < v->n_vocab) g->eog[v->eog[i]] = 1;
    g->piece = v->show ? v->show : v->piece;
    g->user = v->user;
    g->n_vocab = v->n_vocab;
    g->n_predict = n_predict;
    *out = g;
    return MF_OK;
}

void mf_gen_free(mf_gen *g) {
    if (!g) return;
    mf_sampler_free(g->smp);
    mf_stop_free(g->stop);
    free(g->eog);
    free(g->out);
    free(g);
}

void mf_gen_reset(mf_gen *g) {
    mf_sampler_reset(g->smp);
    mf_stop_reset(g->stop);
    g->n_gen = 0;
    g->ended = false;
}

void mf_gen_restart(mf_gen *g) {
    mf_stop_reset(g->stop);
    g->n_gen = 0;
    g->ended = false;
}

mf_status mf_gen_prompt(mf_gen *g, const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        mf_status st = mf_sampler_accept(g->smp, ids[i]);
        if (st) return mf_fail_context(st, "prompt token %zu", i);
    }
    return MF_OK;
}

/* Append to g->out, growing it (rarely: only past the longest text seen so far). */
static mf_status out_put(mf_gen *g, size_t *used, const char *b, size_t n) {
    if (*used + n > g->out_cap) {
        size_t cap = MF_MAX(*used + n, g->out_cap * 2 + 64);
        char *nb = mf_realloc(g->out, cap);
        if (!nb) return MF_ERR_NOMEM;
        g->out = nb, g->out_cap = cap;
    }
    if (n) memcpy(g->out + *used, b, n);
    *used += n;
    return MF_OK;
}

mf_status mf_gen_next(mf_gen *g, const float *logits, int32_t *token, const char **text, size_t *len,
                      mf_stop_reason *reason) {
    *text = "", *len = 0, *reason = MF_STOP_NONE;
    if (g->ended) return mf_fail(MF_ERR_ARG, "mf_gen_next: the generation has ended; call mf_gen_reset");
    if (g->n_predict == 0) {
        g->ended = true;
        *reason = MF_STOP_LENGTH;
        return MF_OK;
    }
    mf_status st = mf_sampler_sample(g->smp, logits, token);
    if (st) return st;
    return mf_gen_push(g, *token, text, len, reason);
}

mf_status mf_gen_push(mf_gen *g, int32_t token, const char **text, size_t *len, mf_stop_reason *reason) {
    *text = "", *len = 0, *reason = MF_STOP_NONE;
    if (g->ended) return mf_fail(MF_ERR_ARG, "mf_gen_push: the generation has ended; call mf_gen_reset");
    if (g->n_predict == 0) {
        g->ended = true;
        *reason = MF_STOP_LENGTH;
        return MF_OK;
    }
    if (token < 0 || token >= g->n_vocab)
        return mf_fail(MF_ERR_RANGE, "mf_gen_push: token %d is outside the vocabulary [0, %d)", token, g->n_vocab);
    mf_status st = mf_sampler_accept(g->smp, token);
    if (st) return st;
    g->n_gen++;
    size_t used = 0;
    const char *o;
    size_t ol;
    if (g->eog[token]) {
        *reason = MF_STOP_EOG;
    } else {
        size_t tl = 0;
        const char *t = g->piece(g->user, token, &tl);
        int hit = -1;
        if ((st = mf_stop_feed(g->stop, t ? t : "", t ? tl : 0, &o, &ol, &hit))) return st;
        if ((st = out_put(g, &used, o, ol))) return st;
        if (hit >= 0) *reason = MF_STOP_STRING;
        else if (g->n_predict > 0 && g->n_gen >= g->n_predict) *reason = MF_STOP_LENGTH;
    }
    if (*reason == MF_STOP_EOG || *reason == MF_STOP_LENGTH) {
        if ((st = mf_stop_flush(g->stop, &o, &ol)) || (st = out_put(g, &used, o, ol))) return st;
    }
    if (*reason != MF_STOP_NONE) g->ended = true;
    *text = g->out ? g->out : "";
    *len = used;
    return MF_OK;
}

mf_status mf_gen_finish(mf_gen *g, const char **text, size_t *len) {
    g->ended = true;
    return mf_stop_flush(g->stop, text, len);
}

mf_sampler *mf_gen_sampler(mf_gen *g) { return g->smp; }
int64_t mf_gen_n_generated(const mf_gen *g) { return g->n_gen; }
int64_t mf_gen_n_left(const mf_gen *g) { return g->n_predict < 0 ? -1 : MF_MAX(g->n_predict - g->n_gen, 0); }
bool mf_gen_is_eog(const mf_gen *g, int32_t token) { return token >= 0 && token < g->n_vocab && g->eog[token]; }
