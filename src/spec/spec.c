/* spec.c: speculative decoding over the public API (see minfer/spec.h): drafting (a draft model or
 * n-gram lookup), one batched verification pass of the target, greedy or rejection-sampling
 * acceptance, cache rollback, and the adaptive draft length. */
#include "minfer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Candidates kept of a sampling draft's distribution q (its top tokens at the target's temperature). */
#define SPEC_Q_MAX 64
/* Bins of a draft model's confidence (its top token's probability) in the calibration of its drafts. */
#define SPEC_CAL 10

typedef struct {
    int32_t n;
    int32_t id[SPEC_Q_MAX];
    float p[SPEC_Q_MAX]; /* sums to 1 over id[0..n) */
} spec_q;

struct mf_spec {
    mf_spec_params p;
    mf_context *ctx, *dctx; /* target context (not owned), draft context (NULL for lookup) */
    bool own_dctx;
    int32_t seq, dseq, n_vocab, n_ctx;
    bool greedy;
    int32_t q_top;  /* candidates of q (sampling with a draft model) */
    float temp;
    mf_gen *gen;
    int32_t kv_limit;
    /* hist[0..n_hist): the sequence's tokens; when pending, the last one is drawn but not decoded */
    int32_t *hist, n_hist;
    bool pending;
    int32_t n_dkv; /* tokens of hist[0..n_dkv) in the draft's cache */
    int32_t *dtok;    /* [draft_max] the drafted tokens */
    float *dconf;     /* [draft_max] the draft model's confidence in each (its top probability) */
    spec_q *q;        /* [draft_max] the draft's distributions (sampling with a draft model) */
    int32_t *btok;    /* [draft_max + 1] the verification batch */
    int32_t *bseq;
    int8_t *bout;
    int32_t *dbseq;   /* [n_ctx] draft_seq for every token of a draft batch */
    /* the round drafted and not yet accepted: its batch size (0: none), depth, drafts, draft decodes */
    int32_t r_n, r_k, r_draft, r_ddec;
    /* its draft model's work: the catch-up decode (tokens, seconds), then the generating decodes */
    int32_t r_ncatch;
    double r_tcatch, r_tgen;
    bool timed;       /* driven by mf_spec_next, which measures its passes */
    int32_t *rtok;    /* [draft_max + 1] the round's drawn tokens */
    size_t *rend;     /* [draft_max + 1] where each one's text ends */
    float *dsoft;     /* [n_vocab] scratch for the draft's softmax */
    uint64_t rng;     /* splitmix64 state: acceptance tests and residual draws */
    /* adaptive depth: per-token acceptance as decayed successes / failures; costs in units of a
     * one-token decode of the target: verify_cost per extra token of a pass, td per draft token */
    double acc_s, acc_f, td;
    /* and per position j of a draft: the acceptance of drafted token j given that those before it were
     * kept, as decayed successes / failures where it was tested (lookup's drafts are bursty: once a
     * copy is running, its later tokens are kept more often than its first) */
    double pos_s[MF_SPEC_MAX_DRAFT], pos_f[MF_SPEC_MAX_DRAFT];
    /* greedy only (where the depth cannot change the text): measured seconds of a one-token pass, of
     * an extra verified token and of a draft token, decayed; they replace the model once known */
    double m_t1, m_slope, m_td;
    double m_tc; /* and of a draft model's catch-up decode (a round's fixed price: 1-2 tokens mostly) */
    double m_v[MF_SPEC_MAX_DRAFT + 2]; /* and of a pass of n tokens (a cliff where a kernel changes) */
    int32_t v_n[MF_SPEC_MAX_DRAFT + 2]; /* the passes of n tokens timed (m_v[n] holds all but the first) */
    /* each size of pass, and the draft's steps, are timed from their second on: the first builds its
     * graph and finds the caches cold (a 3-token pass of SmolLM2-135M F16 took 13.1 ms the first
     * time, 11.7 after; its Q4_0 draft's step 5.7 against 4.3 ms) */
    bool td_seen, tc_seen;
    /* a draft model's calibration: how often a drafted token was kept, by the draft's confidence in
     * it (SPEC_CAL bins of its top probability), as decayed successes / failures; the modelled gain
     * of its recent rounds (tokens per one-token pass, decayed), and whether it is backed off */
    double cal_s[SPEC_CAL], cal_f[SPEC_CAL];
    double d_tok, d_cost; /* decayed sums of its rounds' tokens and modelled costs */
    int32_t d_rounds; /* its rounds since generation began or a probe ended a back-off */
    bool backed;
    int32_t plain_run; /* plain rounds since the last draft (or draft model probe) */
    int32_t n_round;   /* tokens drawn in this round so far */
    int32_t probe_fail; /* a draft model's probes in a row that did not pay for their catching up */
    bool r_probe;      /* the round drafted is a backed-off source's probe */
    char *text;
    size_t text_len, text_cap;
    mf_spec_stats st;
};

static void prior_acceptance(mf_spec *s);
static double verify_cost(const mf_spec *s, int32_t j);
static double draft_cost(const mf_spec *s);
static double catch_cost(const mf_spec *s);

mf_spec_params mf_spec_default_params(void) {
    return (mf_spec_params){
        .draft_min = 0, .draft_max = 16, .p_min = 0.0f, .ngram_min = 2, .ngram_max = 4, .verify_cost = 0.2f};
}

mf_status mf_spec_check_vocab(const mf_model *target, const mf_model *draft) {
    const mf_tokenizer *a = mf_model_tokenizer(target), *b = mf_model_tokenizer(draft);
    if (!a || !b) return mf_set_error(MF_ERR_ARG, "the %s model has no tokenizer", a ? "draft" : "target");
    int32_t na = mf_tokenizer_n_vocab(a), nb = mf_tokenizer_n_vocab(b);
    if (na != nb || mf_model_n_vocab(target) != mf_model_n_vocab(draft))
        return mf_set_error(MF_ERR_ARG,
                            "the draft model's vocabulary has %d tokens (%d logits), the target's %d (%d logits): a "
                            "draft must share the target's tokenizer (use a smaller model of the same family)",
                            nb, mf_model_n_vocab(draft), na, mf_model_n_vocab(target));
    for (int32_t i = 0; i < na; i++) {
        const char *x = mf_tokenizer_piece(a, i), *y = mf_tokenizer_piece(b, i);
        if (strcmp(x ? x : "", y ? y : ""))
            return mf_set_error(MF_ERR_ARG,
                                "the draft model's vocabulary differs from the target's at token %d ('%.40s' in the "
                                "draft, '%.40s' in the target): a draft must share the target's tokenizer",
                                i, y ? y : "", x ? x : "");
    }
    return MF_OK;
}

void mf_spec_free(mf_spec *s) {
    if (!s) return;
    if (s->own_dctx) mf_context_free(s->dctx);
    free(s->hist);
    free(s->dbseq);
    free(s->rtok);
    free(s->rend);
    free(s->dtok);
    free(s->dconf);
    free(s->q);
    free(s->btok);
    free(s->bseq);
    free(s->bout);
    free(s->dsoft);
    free(s->text);
    free(s);
}

mf_status mf_spec_create(const mf_model *target, mf_context *ctx, int32_t seq, const mf_sampler_params *sampling,
                         const mf_spec_params *p, mf_spec **out) {
    *out = NULL;
    if (!!p->draft == !!p->lookup)
        return mf_set_error(MF_ERR_ARG, "speculative decoding needs one draft source: a draft model or lookup%s",
                            p->draft ? " (both were given)" : "");
    if (p->draft_max < 1 || p->draft_max > MF_SPEC_MAX_DRAFT)
        return mf_set_error(MF_ERR_ARG, "draft_max = %d: use 1 .. %d", p->draft_max, MF_SPEC_MAX_DRAFT);
    if (p->draft_min < 0 || p->draft_min > p->draft_max)
        return mf_set_error(MF_ERR_ARG, "draft_min = %d: use 0 .. draft_max (%d)", p->draft_min, p->draft_max);
    if (!(p->p_min >= 0.0f && p->p_min <= 1.0f))
        return mf_set_error(MF_ERR_ARG, "p_min = %g: use 0 .. 1", p->p_min);
    if (p->ngram_min < 1 || p->ngram_max < p->ngram_min || p->ngram_max > 64)
        return mf_set_error(MF_ERR_ARG, "n-gram lengths %d .. %d: use 1 <= min <= max <= 64", p->ngram_min,
                            p->ngram_max);
    if (!(p->verify_cost >= 0.0f && p->verify_cost <= 1.0f))
        return mf_set_error(MF_ERR_ARG, "verify_cost = %g: use 0 .. 1", p->verify_cost);
    if (p->draft_ctx && !p->draft)
        return mf_set_error(MF_ERR_ARG, "a draft context was given without its draft model");
    if (p->draft_seq < 0 || p->draft_seq >= MF_MAX_SEQ || (!p->draft_ctx && p->draft_seq))
        return mf_set_error(MF_ERR_ARG, "draft sequence %d: use 0 .. %d with a draft context of the caller, else 0",
                            p->draft_seq, MF_MAX_SEQ - 1);
    if (p->draft_threads < 0) return mf_set_error(MF_ERR_ARG, "draft threads = %d: use 0 or more", p->draft_threads);
    if (seq < 0 || seq >= MF_MAX_SEQ) return mf_set_error(MF_ERR_ARG, "sequence %d: use 0 .. %d", seq, MF_MAX_SEQ - 1);
    mf_status st;
    mf_spec tmp = {0};
    if ((st = mf_spec_set_sampling(&tmp, sampling))) return st;
    if (p->draft && (st = mf_spec_check_vocab(target, p->draft))) return st;
    mf_spec *s = calloc(1, sizeof *s);
    if (!s) return MF_ERR_NOMEM;
    s->p = *p;
    s->ctx = ctx, s->seq = seq;
    s->n_vocab = mf_model_n_vocab(target);
    s->n_ctx = mf_context_n_ctx(ctx);
    mf_spec_set_sampling(s, sampling);
    const size_t k = (size_t)p->draft_max;
    s->hist = malloc(((size_t)s->n_ctx + 1) * sizeof *s->hist);
    s->dtok = malloc(k * sizeof *s->dtok);
    s->dconf = malloc(k * sizeof *s->dconf);
    s->q = p->draft ? malloc(k * sizeof *s->q) : NULL;
    s->btok = malloc((k + 1) * sizeof *s->btok);
    s->bseq = malloc((k + 1) * sizeof *s->bseq);
    s->bout = malloc(k + 1);
    s->dsoft = p->draft ? malloc((size_t)s->n_vocab * sizeof *s->dsoft) : NULL;
    s->dbseq = p->draft ? malloc(((size_t)s->n_ctx + 1) * sizeof *s->dbseq) : NULL;
    s->rtok = malloc((k + 1) * sizeof *s->rtok);
    s->rend = malloc((k + 1) * sizeof *s->rend);
    if (!s->hist || !s->dtok || !s->dconf || (p->draft && (!s->q || !s->dsoft || !s->dbseq)) || !s->btok ||
        !s->bseq || !s->bout || !s->rtok || !s->rend) {
        mf_spec_free(s);
        return MF_ERR_NOMEM;
    }
    for (size_t i = 0; i <= k; i++) s->bseq[i] = seq, s->bout[i] = 1;
    s->dseq = p->draft_seq;
    for (int32_t i = 0; s->dbseq && i <= s->n_ctx; i++) s->dbseq[i] = s->dseq;
    if (p->draft_ctx) {
        s->dctx = p->draft_ctx;
    } else if (p->draft) {
        mf_context_params cp = mf_context_default_params();
        cp.n_ctx = s->n_ctx;
        cp.n_threads = p->draft_threads ? p->draft_threads : mf_context_n_threads(ctx);
        /* the target's own threads where as many are asked for: two sets would wait for work on the
         * same cores while the other model runs */
        if (cp.n_threads == mf_context_n_threads(ctx)) cp.threads_of = ctx;
        cp.isa = mf_context_isa(ctx);
        cp.order = mf_context_order(ctx);
        if ((st = mf_context_create(p->draft, &cp, &s->dctx))) {
            mf_spec_free(s);
            return st;
        }
        s->own_dctx = true;
    }
    prior_acceptance(s);
    if (p->draft) { /* decoding is bound by the weight bytes it reads */
        mf_model_info ti, di;
        mf_model_get_info(target, &ti);
        mf_model_get_info(p->draft, &di);
        s->td = ti.decode_bytes ? (double)di.decode_bytes / (double)ti.decode_bytes : 1.0;
        if (s->td < 0.02) s->td = 0.02;
    }
    *out = s;
    return MF_OK;
}

mf_status mf_spec_set_sampling(mf_spec *s, const mf_sampler_params *sampling) {
    if (sampling->mirostat)
        return mf_set_error(MF_ERR_UNSUPPORTED, "speculative decoding does not work with Mirostat (its running "
                                                "target follows every drawn token); turn one of them off");
    s->greedy = sampling->temp <= 0.0f && sampling->dynatemp_range <= 0.0f;
    s->temp = sampling->temp > 0.0f ? sampling->temp : 1.0f;
    s->q_top = sampling->top_k > 0 && sampling->top_k < SPEC_Q_MAX ? sampling->top_k : SPEC_Q_MAX;
    return MF_OK;
}

void mf_spec_get_stats(const mf_spec *s, mf_spec_stats *out) { *out = s->st; }

/* A prior acceptance worth four tokens: 0.75 for a draft model, 0.5 for lookup. */
static void prior_acceptance(mf_spec *s) {
    s->acc_s = s->p.draft ? 3.0 : 2.0, s->acc_f = s->p.draft ? 1.0 : 2.0;
    memset(s->pos_s, 0, sizeof s->pos_s);
    memset(s->pos_f, 0, sizeof s->pos_f);
    memset(s->cal_s, 0, sizeof s->cal_s);
    memset(s->cal_f, 0, sizeof s->cal_f);
    s->d_tok = 1.65, s->d_cost = 1.5, s->backed = false; /* a round's worth of a small gain */
    s->d_rounds = 0;
    s->plain_run = 0;
}

/* splitmix64 as a uniform in [0, 1) with 53 bits. */
static double uniform(mf_spec *s) {
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

mf_status mf_spec_begin(mf_spec *s, mf_gen *g, int32_t kv_limit) {
    if (kv_limit < 1 || kv_limit > s->n_ctx)
        return mf_set_error(MF_ERR_ARG, "kv_limit = %d: use 1 .. n_ctx (%d)", kv_limit, s->n_ctx);
    int32_t n = mf_context_seq_tokens(s->ctx, s->seq, s->hist, NULL, s->n_ctx);
    if (n < 1 || n > s->n_ctx)
        return mf_set_error(MF_ERR_ARG, "speculative decoding starts after a prompt: sequence %d holds %d tokens",
                            s->seq, n);
    if (mf_context_seq_pos_max(s->ctx, s->seq) != n - 1)
        return mf_set_error(MF_ERR_ARG, "sequence %d has gaps in its positions (%d tokens, last position %d)", s->seq,
                            n, mf_context_seq_pos_max(s->ctx, s->seq));
    s->gen = g;
    s->kv_limit = kv_limit;
    /* the acceptance tests' stream follows the generation's seed and the length of what it
     * continues (not the sequence, which a server's scheduler picks), and a sampled generation's
     * depths start from the prior: the same seed and input, the same text; a conversation's next
     * reply, which continues a longer sequence, draws other numbers than the one before */
    s->rng = 0x9E3779B97F4A7C15ull * (1 + (uint64_t)mf_sampler_seed(mf_gen_sampler(g))) ^
             0xBF58476D1CE4E5B9ull * (uint64_t)n;
    if (!s->greedy) prior_acceptance(s);
    s->probe_fail = 0;
    s->n_hist = n;
    s->pending = false;
    s->r_n = 0;
    s->text_len = 0;
    /* the draft keeps the part of its cache that agrees with the sequence */
    s->n_dkv = 0;
    if (s->dctx) {
        int32_t dn = mf_context_seq_tokens(s->dctx, s->dseq, NULL, NULL, 0);
        int32_t *dt = dn > 0 ? malloc((size_t)dn * sizeof *dt) : NULL;
        if (dt) {
            mf_context_seq_tokens(s->dctx, s->dseq, dt, NULL, dn);
            while (s->n_dkv < dn && s->n_dkv < n && dt[s->n_dkv] == s->hist[s->n_dkv]) s->n_dkv++;
            free(dt);
        }
        mf_status st = mf_context_seq_rm(s->dctx, s->dseq, s->n_dkv, -1);
        if (st) return st;
        /* the draft's prefill belongs to the prompt's time, not to the first drafts' */
        if (s->n_dkv < n - 1) {
            mf_batch b = {.n_tokens = n - 1 - s->n_dkv, .tokens = s->hist + s->n_dkv, .seq = s->dbseq};
            if ((st = mf_context_decode(s->dctx, &b))) return st;
            s->n_dkv = n - 1;
        }
    }
    return MF_OK;
}

static mf_status text_put(mf_spec *s, const char *t, size_t n) {
    if (s->text_len + n + 1 > s->text_cap) {
        size_t cap = (s->text_len + n + 1) * 2;
        char *nt = realloc(s->text, cap);
        if (!nt) return MF_ERR_NOMEM;
        s->text = nt, s->text_cap = cap;
    }
    memcpy(s->text + s->text_len, t, n);
    s->text_len += n;
    s->text[s->text_len] = 0;
    return MF_OK;
}

/* ---- drafting ---- */

/* Up to k tokens that followed the most recent earlier occurrence of the sequence's last n tokens,
 * for n from ngram_max down to ngram_min; none past an end-of-generation token (the text is complete
 * there: verifying more would be work for nothing). */
static int32_t draft_lookup(mf_spec *s, int32_t k) {
    const int32_t *h = s->hist, len = s->n_hist;
    for (int32_t n = s->p.ngram_max; n >= s->p.ngram_min; n--) {
        if (len < n + 1) continue;
        const int32_t *key = h + len - n;
        for (int32_t j = len - n - 1; j >= 0; j--) {
            if (h[j] != key[0] || memcmp(h + j, key, (size_t)n * sizeof *h)) continue;
            int32_t m = 0;
            while (m < k && j + n + m < len && (m == 0 || !mf_gen_is_eog(s->gen, s->dtok[m - 1])))
                s->dtok[m] = h[j + n + m], m++;
            return m;
        }
    }
    return 0;
}

/* The draft's distribution q at the target's temperature over its top q_top tokens into *q, and one
 * token drawn from it. */
static int32_t draft_sample(mf_spec *s, const float *l, spec_q *q) {
    int32_t n = 0, top = s->q_top;
    for (int32_t i = 0; i < s->n_vocab; i++) { /* insertion into the sorted top list */
        float x = l[i];
        if (!(x == x) || (n == top && x <= l[q->id[n - 1]])) continue;
        int32_t j = n < top ? n++ : n - 1;
        while (j > 0 && l[q->id[j - 1]] < x) q->id[j] = q->id[j - 1], j--;
        q->id[j] = i;
    }
    q->n = n;
    if (n == 0) q->id[0] = 0; /* every logit NaN: the target decides */
    if (n == 0 || !isfinite(l[q->id[0]])) { /* no finite logit: a point mass (the target decides) */
        q->n = 1, q->p[0] = 1;
        return q->id[0];
    }
    double sum = 0;
    for (int32_t j = 0; j < n; j++) sum += (q->p[j] = expf((l[q->id[j]] - l[q->id[0]]) / s->temp));
    for (int32_t j = 0; j < n; j++) q->p[j] = (float)(q->p[j] / sum);
    double u = uniform(s), c = 0;
    for (int32_t j = 0; j < n; j++)
        if ((c += q->p[j]) > u) return q->id[j];
    return q->id[n - 1];
}

/* The calibration bin of a draft model's confidence conf. */
static int cal_bin(float conf) { return conf >= 1.0f ? SPEC_CAL - 1 : conf > 0.0f ? (int)(conf * SPEC_CAL) : 0; }

/* How often a drafted token the draft model is conf sure of is kept: its bin's record, shrunk toward
 * the pair's acceptance by two pseudo-observations. The confidence alone says little: a draft that
 * is a quantization of its target is kept far more often than it says (SmolLM2-135M's Q4_0 copy
 * drafting for its F16 file: 0.66 at 0.3-0.4, 0.88 at 0.5-0.6, all from 0.7; the mini test model's
 * Q8_0 copy is never 0.75 sure of a token and right three times in four), an unrelated draft less. */
static double calibrated(const mf_spec *s, float conf) {
    const int b = cal_bin(conf);
    return (s->cal_s[b] + 2.0 * s->acc_s / (s->acc_s + s->acc_f)) / (s->cal_s[b] + s->cal_f[b] + 2.0);
}

/* Up to k tokens from the draft model after hist. *n_decoded: drafted tokens now in the draft's cache. */
static mf_status draft_model(mf_spec *s, int32_t k, int32_t *n_out, int32_t *n_decoded) {
    *n_out = *n_decoded = 0;
    /* catch up on the tokens the draft has not seen; its logits must be those after the last one */
    if (s->n_dkv >= s->n_hist) {
        s->n_dkv = s->n_hist - 1;
        mf_status st = mf_context_seq_rm(s->dctx, s->dseq, s->n_dkv, -1);
        if (st) return st;
    }
    mf_batch b = {.n_tokens = s->n_hist - s->n_dkv, .tokens = s->hist + s->n_dkv, .seq = s->dbseq};
    const double t0 = mf_time_s();
    mf_status st = mf_context_decode(s->dctx, &b);
    if (st) return st;
    const double t1 = mf_time_s();
    s->r_ncatch = b.n_tokens, s->r_tcatch = t1 - t0;
    s->n_dkv = s->n_hist;
    int32_t m = 0;
    /* the chance that every token drafted so far is kept, the acceptance of a drafted token and the
     * cost of a draft step (one-token target passes) */
    double kept = 1;
    const double a = s->acc_s / (s->acc_s + s->acc_f), cd = draft_cost(s);
    const bool fixed = s->p.draft_min == s->p.draft_max;
    /* the round's expected tokens and cost so far (one-token target passes): its pass and its
     * catch-up, then each drafted token's chance and verification */
    double round_e = 1, round_c = 1 + catch_cost(s);
    while (m < k) {
        const float *l = mf_context_logits(s->dctx, mf_context_n_outputs(s->dctx) - 1);
        int32_t t;
        float conf;
        if (s->greedy) {
            t = mf_logits_top(l, s->n_vocab, &conf); /* at temperature 1, the lowest id on ties */
        } else {
            t = draft_sample(s, l, &s->q[m]);
            conf = s->q[m].p[0];
        }
        /* a token is verified where it is expected to be kept often enough to pay for its place in
         * the pass, and drafting goes on where the next one is expected to pay for its draft step too */
        kept *= calibrated(s, conf);
        if (conf < s->p.p_min || (!fixed && kept < verify_cost(s, m))) break;
        round_e += kept, round_c += verify_cost(s, m);
        s->dconf[m] = conf;
        s->dtok[m++] = t;
        if (m == k || mf_gen_is_eog(s->gen, t)) break; /* nothing is drawn after an end of generation */
        /* one more token pays where its chance covers its draft step and verification, and it
         * raises the round's tokens per unit of cost: a long draft of likely tokens can gain less
         * per second than a short one when a pass of many tokens costs much more (an F16 target
         * on AVX2: 17 tokens 5.8 one-token passes, 4 tokens 1.2) */
        const double p_next = kept * a, c_next = verify_cost(s, m) + cd;
        if (!fixed && (p_next < c_next || p_next * round_c < c_next * round_e)) break;
        round_c += cd; /* the draft step that drafts the next token */
        b = (mf_batch){.n_tokens = 1, .tokens = &t, .seq = s->dbseq};
        if ((st = mf_context_decode(s->dctx, &b))) return st;
        (*n_decoded)++;
    }
    *n_out = m;
    s->r_tgen = mf_time_s() - t1;
    return MF_OK;
}

/* ---- adaptive depth ---- */

/* Expected tokens per verification with depth k at per-token acceptance a: 1 + a + ... + a^k. */
static double expected_tokens(double a, int32_t k) {
    double e = 1, x = 1;
    for (int32_t i = 0; i < k; i++) e += (x *= a);
    return e;
}

/* e[k] = expected tokens per verification with depth k (k = 0 .. p.draft_max) from the per-position
 * acceptances: 1 + a_0 + a_0 a_1 + ... Each a_j is position j's record, shrunk toward a_(j-1) (a_0
 * toward the overall per-token acceptance a) by two pseudo-observations, so a position seldom
 * tested follows the one before it. */
static void expected_by_depth(const mf_spec *s, double a, double *e) {
    double prev = a, x = 1;
    e[0] = 1;
    for (int32_t j = 0; j < s->p.draft_max; j++) {
        const double aj = (s->pos_s[j] + 2.0 * prev) / (s->pos_s[j] + s->pos_f[j] + 2.0);
        e[j + 1] = e[j] + (x *= aj);
        prev = aj;
    }
}

/* The most expected tokens per unit of cost over the depths allowed, at acceptance a. */
static double best_rate(double per_token, const mf_spec_params *p, double a) {
    double best = 0;
    for (int32_t k = p->draft_min > 1 ? p->draft_min : 1; k <= p->draft_max; k++)
        best = fmax(best, expected_tokens(a, k) / (1.0 + per_token * k));
    return best;
}

/* What verifying drafted token j (0-based) adds to its pass, in one-token passes: measured (greedy,
 * by mf_spec_next: the passes of j + 1 and j + 2 tokens) where each size was timed twice or more,
 * else the slope over all passes. A float target's pass of 5 tokens can cost far more than one of 4
 * (another kernel). One slow pass of a size is not trusted alone: a size judged dear is not drafted
 * again, so its measurement would never be refreshed (a 3-token pass of SmolLM2-135M F16 timed once
 * at 14.7 ms, against 11.5 usually, had kept every later round of a reply at one drafted token). */
static double verify_cost(const mf_spec *s, int32_t j) {
    if (s->greedy && s->timed && s->m_t1 > 0) {
        if (j + 2 <= MF_SPEC_MAX_DRAFT + 1 && s->v_n[j + 1] >= 3 && s->v_n[j + 2] >= 3)
            return fmax(0.01, (s->m_v[j + 2] - s->m_v[j + 1]) / s->m_t1);
        if (s->m_slope > 0) return s->m_slope / s->m_t1;
    }
    return s->p.verify_cost;
}

/* A draft model's step in one-token target passes: measured (greedy, by mf_spec_next), else the
 * ratio of the models' bytes. */
static double draft_cost(const mf_spec *s) {
    if (s->greedy && s->timed && s->m_t1 > 0 && s->m_td > 0) return s->m_td / s->m_t1;
    return s->td;
}

/* A draft model's catch-up decode in one-token target passes: measured (greedy), else one draft step.
 * Catching up on two tokens (the last kept draft and the target's own) costs more than a step. */
static double catch_cost(const mf_spec *s) {
    if (s->greedy && s->timed && s->m_t1 > 0 && s->m_tc > 0) return s->m_tc / s->m_t1;
    return draft_cost(s);
}

/* A draft model's depth: the most it may draft (its calibrated confidence ends each draft), or 0
 * while backed off (its recent rounds gained less than they cost), probing again after 16, 32 ..
 * 256 plain rounds. */
static int32_t draft_model_depth(mf_spec *s) {
    s->r_probe = false;
    if (s->greedy && s->timed && s->m_t1 <= 0) return 0; /* measure a plain pass first */
    /* nor does a draft model draft where even near-certain acceptance would barely pay for its cost
     * (a Q4_0 draft of a Q8_0 target reads more than half the target's bytes): catching up after
     * each back-off alone costs a few steps. The models' bytes decide this, not the measured times:
     * those are refreshed only by drafting, so one slow measurement would stop a good draft for
     * good (it did, in about one run in six of SmolLM2-135M F16 with its Q4_0 draft); a draft that
     * is slower than its bytes say backs off on its rounds' gains and probes again. */
    if (best_rate(s->p.verify_cost + s->td, &s->p, 0.95) < 1.2) return 0;
    if (!s->backed) return s->p.draft_max;
    if (s->plain_run < 16 << (s->probe_fail < 4 ? s->probe_fail : 4)) return 0;
    s->r_probe = true;
    return s->p.draft_max;
}

/* The depth of the next round; 0 = decode plainly. Lookup's: the most expected tokens per unit of
 * cost over the depths allowed. */
static int32_t choose_depth(mf_spec *s) {
    const mf_spec_params *p = &s->p;
    if (p->draft_min == p->draft_max) return p->draft_max;
    if (s->dctx) return draft_model_depth(s);
    const double a = s->acc_s / (s->acc_s + s->acc_f);
    double per_token = p->verify_cost + s->td;
    if (s->greedy && s->timed) {
        if (s->m_t1 <= 0) return 0; /* measure a plain pass first */
        if (s->m_slope > 0) per_token = s->m_slope / s->m_t1;
    }
    double e[MF_SPEC_MAX_DRAFT + 1], best = 1.0;
    int32_t best_k = 0;
    expected_by_depth(s, a, e);
    for (int32_t k = p->draft_min > 1 ? p->draft_min : 1; k <= p->draft_max; k++) {
        double rate = e[k] / (1.0 + per_token * k);
        if (rate > best * 1.02) best = rate, best_k = k;
    }
    /* backed off: probe again every 16 rounds (a lookup costs next to nothing), so that a better
     * stretch of text is noticed */
    s->r_probe = false;
    if (best_k == 0 && s->plain_run >= 16) {
        best_k = p->draft_min > 1 ? p->draft_min : 2;
        if (best_k > p->draft_max) best_k = p->draft_max; /* --draft-max 1 */
        s->r_probe = true;
    }
    return best_k;
}

/* A measured time: a sample below the estimate weighs more than one above it. What disturbs a
 * timing (another process, an interrupt) only slows it, so the estimate follows the undisturbed
 * cost, and one slow sample of a size that is then seldom timed again does not stick. */
static void decay_time(double *x, double v) { *x = *x > 0 ? (v < *x ? 0.5 * *x + 0.5 * v : 0.85 * *x + 0.15 * v) : v; }

/* ---- a step ---- */

/* Account for a token drawn with `cells` cells in the cache: the text, the stop reason and whether
 * the context is full. true when the round ends here. */
static mf_status emit_token(mf_spec *s, int32_t tok, const char *t, size_t n, mf_stop_reason r, int32_t cells,
                            mf_stop_reason *reason, bool *full, bool *end) {
    mf_status st = text_put(s, t, n);
    if (st) return st;
    s->rtok[s->n_round] = tok;
    s->rend[s->n_round++] = s->text_len;
    s->st.generated++;
    *reason = r;
    *full = r == MF_STOP_NONE && cells >= s->kv_limit;
    *end = *reason != MF_STOP_NONE || *full;
    return MF_OK;
}

/* q(id): the draft's probability of id; with no q (lookup) a point mass on the drafted token d. */
static double q_of(const spec_q *q, int32_t id, int32_t d) {
    if (!q) return id == d;
    for (int32_t i = 0; i < q->n; i++)
        if (q->id[i] == id) return q->p[i];
    return 0;
}

/* Whether the target keeps drafted token d at row logits l, with probability min(1, p(d) / q(d)); on
 * rejection *out is drawn from normalize(max(0, p - q)). p is the distribution after the whole
 * sampler chain. Pushes the kept or drawn token through the generation. */
static mf_status verify_sampled(mf_spec *s, const float *l, int32_t d, const spec_q *q, int32_t *out, bool *kept,
                                const char **t, size_t *n, mf_stop_reason *r) {
    const mf_sampler_candidate *c;
    size_t nc;
    mf_status st = mf_sampler_dist(mf_gen_sampler(s->gen), l, &c, &nc);
    if (st) return st;
    double pd = 0;
    for (size_t j = 0; j < nc; j++)
        if (c[j].id == d) pd = c[j].p;
    *kept = uniform(s) * q_of(q, d, d) < pd;
    *out = d;
    if (!*kept) {
        double w = 0, acc = 0;
        for (size_t j = 0; j < nc; j++) w += fmax(0.0, c[j].p - q_of(q, c[j].id, d));
        const double u = uniform(s) * w;
        *out = -1;
        for (size_t j = 0; j < nc && *out < 0; j++) {
            double x = fmax(0.0, c[j].p - q_of(q, c[j].id, d));
            if (x > 0 && (acc += x) > u) *out = c[j].id;
        }
        for (size_t j = nc; j-- > 0 && *out < 0;) /* rounding: the last token with residual mass */
            if (c[j].p - q_of(q, c[j].id, d) > 0) *out = c[j].id;
        if (*out < 0) *out = c[0].id;
    }
    return mf_gen_push(s->gen, *out, t, n, r);
}

mf_status mf_spec_draft(mf_spec *s, const int32_t **tokens, int32_t *n) {
    *tokens = s->btok, *n = 0;
    if (!s->gen) return mf_set_error(MF_ERR_ARG, "mf_spec_draft: call mf_spec_begin first");
    if (!s->pending) return MF_OK; /* the first token comes from the prompt's logits */
    const int32_t pos = s->n_hist - 1; /* the pending token's position = cells in the cache */
    int32_t k = choose_depth(s), room = s->kv_limit - pos - 1, n_draft = 0, n_ddec = 0;
    if (k > room) k = room;
    /* a round draws its kept drafts and one more token: none is drafted past the generation's limit */
    const int64_t left = mf_gen_n_left(s->gen);
    if (left >= 0 && k > left - 1) k = left > 0 ? (int32_t)(left - 1) : 0;
    const double t0 = mf_time_s();
    if (k > 0) {
        mf_status st;
        if (s->dctx) {
            if ((st = draft_model(s, k, &n_draft, &n_ddec))) return st;
        } else {
            n_draft = draft_lookup(s, k);
        }
        if (n_draft < s->p.draft_min) n_draft = 0;
    }
    s->st.draft_s += mf_time_s() - t0;
    s->btok[0] = s->hist[pos];
    memcpy(s->btok + 1, s->dtok, (size_t)n_draft * sizeof *s->btok);
    s->r_n = *n = n_draft + 1;
    s->r_k = k, s->r_draft = n_draft, s->r_ddec = n_ddec;
    return MF_OK;
}

mf_status mf_spec_accept(mf_spec *s, int32_t r0, mf_spec_round *out) {
    memset(out, 0, sizeof *out);
    out->tokens = s->rtok, out->text_end = s->rend, out->text = "";
    if (!s->gen) return mf_set_error(MF_ERR_ARG, "mf_spec_accept: call mf_spec_begin first");
    if (s->pending && !s->r_n) return mf_set_error(MF_ERR_ARG, "mf_spec_accept: no round was drafted (mf_spec_draft)");
    s->text_len = 0, s->n_round = 0;
    if (s->text) s->text[0] = 0;
    const char *t;
    size_t n;
    mf_stop_reason r, reason = MF_STOP_NONE;
    mf_status st;
    bool end, full = false;
    int32_t tok;
    if (!s->pending) { /* the first token, from the prompt's logits */
        const float *l = mf_context_logits(s->ctx, r0);
        if (!l) return mf_set_error(MF_ERR_ARG, "mf_spec_accept: the context has no logits row %d", r0);
        if ((st = mf_gen_next(s->gen, l, &tok, &t, &n, &r))) return st;
        if ((st = emit_token(s, tok, t, n, r, s->n_hist, &reason, &full, &end))) return st;
        s->hist[s->n_hist++] = tok;
        s->pending = true;
        goto out;
    }
    const int32_t pos = s->n_hist - 1, n_draft = s->r_draft, n_ddec = s->r_ddec;
    if (!mf_context_logits(s->ctx, r0 + n_draft))
        return mf_set_error(MF_ERR_ARG, "mf_spec_accept: the context has no logits row %d (decode the round's %d "
                                        "tokens with logits first)", r0 + n_draft, n_draft + 1);
    s->r_n = 0;
    s->st.rounds++;
    s->st.drafted += n_draft;
    s->st.depth = s->r_k;
    /* a draft model's round costs its decodes even when its confidence stops it before the first
     * token: the next probe waits its rounds either way (lookup's attempts cost nothing) */
    s->plain_run = n_draft || (s->dctx && s->r_k > 0) ? 0 : s->plain_run + 1;
    int32_t i = 0, n_acc = 0;
    for (;; i++) {
        const float *l = mf_context_logits(s->ctx, r0 + i);
        bool kept = false;
        if (i == n_draft || s->greedy) {
            if ((st = mf_gen_next(s->gen, l, &tok, &t, &n, &r))) return st;
            kept = i < n_draft && tok == s->dtok[i];
        } else {
            if ((st = verify_sampled(s, l, s->dtok[i], s->dctx ? &s->q[i] : NULL, &tok, &kept, &t, &n, &r))) return st;
        }
        n_acc += kept;
        if ((st = emit_token(s, tok, t, n, r, pos + 1 + i, &reason, &full, &end))) return st;
        if (!kept || end) break;
        s->hist[pos + 1 + i] = tok;
    }
    /* the round ends at row i: the cache keeps the pending token and the i drafted tokens before row i */
    if ((st = mf_context_seq_rm(s->ctx, s->seq, pos + 1 + i, -1))) return st;
    s->hist[pos + 1 + i] = tok;
    s->n_hist = pos + 2 + i;
    if (s->dctx) { /* the draft keeps the pending token and the kept drafted tokens it decoded */
        const int32_t keep = pos + 1 + (n_ddec < i ? n_ddec : i), cells = s->n_dkv + n_ddec;
        if (cells > keep && (st = mf_context_seq_rm(s->dctx, s->dseq, keep, -1))) return st;
        s->n_dkv = cells > keep ? keep : cells;
    }
    s->st.accepted += n_acc;
    if (n_draft > 0 || (s->dctx && s->r_k > 0)) {
        /* per-token acceptance: n_acc successes, then one failure unless all were kept (lookup: also
         * when it found nothing to draft; a draft model's empty round shows in its gain below) */
        if (s->dctx) {
            /* the round's gain as modelled (tokens per one-token pass; its catching up one draft step):
             * below 1 over three rounds or more (their decayed tokens over their decayed costs, so
             * that a long failed round weighs what it cost), the draft backs off (one round says
             * little: a failed round of two tokens loses more than a kept one gains, and the first
             * rounds draft before the calibration knows what the draft's confidence is worth); a
             * probe ends the back-off where it keeps a token and gains. The modelled cost of a round
             * is its measured time within a few percent (SmolLM2-135M F16 with its Q4_0 draft). */
            double cost = 1.0 + catch_cost(s) + draft_cost(s) * n_ddec;
            for (int32_t j = 0; j < n_draft; j++) cost += verify_cost(s, j);
            const double rate = (n_acc + 1) / cost;
            if (s->r_probe) {
                const bool paid = n_acc >= 1 && rate >= 1.0;
                s->probe_fail = paid ? 0 : s->probe_fail + 1;
                s->backed = !paid;
                if (paid) s->d_tok = fmax(s->d_tok, 1.05 * s->d_cost), s->d_rounds = 0;
            } else {
                s->d_tok = 0.8 * s->d_tok + (n_acc + 1), s->d_cost = 0.8 * s->d_cost + cost;
                if (++s->d_rounds >= 3 && s->d_tok < s->d_cost) s->backed = true;
            }
            for (int32_t j = 0; j <= n_acc && j < n_draft; j++) { /* the tested tokens' calibration */
                const int b = cal_bin(s->dconf[j]);
                s->cal_s[b] = 0.97 * s->cal_s[b] + (j < n_acc);
                s->cal_f[b] = 0.97 * s->cal_f[b] + (j == n_acc);
            }
        }
        s->acc_s = 0.9 * s->acc_s + n_acc;
        s->acc_f = 0.9 * s->acc_f + (s->dctx ? n_acc < n_draft : n_acc < n_draft || n_draft == 0);
        /* lookup's positions 0 .. n_acc - 1 kept, position n_acc rejected (or nothing drafted); later
         * ones untested */
        for (int32_t j = 0; !s->dctx && j <= n_acc && j < MF_SPEC_MAX_DRAFT; j++) {
            if (j == n_acc && n_acc == n_draft && n_draft > 0) break;
            const bool ok = j < n_acc;
            s->pos_s[j] = 0.9 * s->pos_s[j] + ok;
            s->pos_f[j] = 0.9 * s->pos_f[j] + !ok;
        }
    }
    out->n_drafted = n_draft, out->n_accepted = n_acc;
out:
    out->n_tokens = s->n_round;
    out->text = s->text ? s->text : "";
    out->len = s->text_len;
    out->reason = reason;
    out->context_full = full;
    return MF_OK;
}

mf_status mf_spec_next(mf_spec *s, const char **text, size_t *len, mf_stop_reason *reason, bool *context_full) {
    *text = "", *len = 0, *reason = MF_STOP_NONE, *context_full = false;
    s->timed = true;
    const int32_t *toks;
    int32_t n;
    mf_status st = mf_spec_draft(s, &toks, &n);
    if (st) return st;
    const double t1 = mf_time_s();
    if (n > 0) { /* verification: the pending token and the draft in one pass, logits for each */
        mf_batch b = {.n_tokens = n, .tokens = toks, .seq = s->bseq, .logits = s->bout};
        if ((st = mf_context_decode(s->ctx, &b))) return st;
    }
    const double t2 = mf_time_s();
    const int32_t k = s->r_k, n_draft = n - 1;
    mf_spec_round rd;
    if ((st = mf_spec_accept(s, n > 0 ? 0 : mf_context_n_outputs(s->ctx) - 1, &rd))) return st;
    if (n > 0) {
        s->st.verify_s += t2 - t1;
        const bool sized = n <= MF_SPEC_MAX_DRAFT + 1, steady = !sized || s->v_n[n]++ > 0;
        if (steady) {
            if (sized) decay_time(&s->m_v[n], t2 - t1);
            if (n_draft == 0) decay_time(&s->m_t1, t2 - t1);
            else if (s->m_t1 > 0) {
                /* a plain mean: a pass's cost per token depends on its size (an F16 pass of 2-4 tokens
                 * costs little more than one token, one of 16 over four times as much), so a low
                 * sample is no truer than a high one */
                const double v = fmax(1e-3 * s->m_t1, (t2 - t1 - s->m_t1) / n_draft);
                s->m_slope = s->m_slope > 0 ? 0.8 * s->m_slope + 0.2 * v : v;
            }
        }
        /* a draft step's time, which one more drafted token costs: its generating decodes' (one
         * token each). Not a catch-up's: a round that drafts one token has none, and its catch-up
         * of two tokens (the kept draft and the target's token) costs more than a step, which
         * made the next round stop after one token again (the 0.5B shape's F16 target with its
         * Q4_0 file on Zen 3: catch-ups of 23 ms against steps of 15-19, rounds of one token and
         * back-offs); the catch-up is a round's fixed price, the same for any depth */
        if (k > 0 && s->dctx && s->r_ddec > 0) {
            if (s->td_seen) decay_time(&s->m_td, s->r_tgen / s->r_ddec);
            s->td_seen = true;
        }
        /* a catch-up of one token is a draft step too; one of one or two tokens (a round that ended at
         * a rejection or kept every draft) is the next rounds' fixed price, a longer one (after plain
         * rounds) a one-off */
        if (k > 0 && s->dctx && s->r_ncatch > 0 && s->r_ncatch <= 2) {
            if (s->tc_seen) decay_time(&s->m_tc, s->r_tcatch);
            if (s->tc_seen && s->td_seen && s->r_ncatch == 1) decay_time(&s->m_td, s->r_tcatch);
            s->tc_seen = true;
        }
    }
    *text = rd.text, *len = rd.len, *reason = rd.reason, *context_full = rd.context_full;
    return MF_OK;
}
