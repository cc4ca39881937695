/* sampler.c: the sampler object: parameters and their checks, creation, the chain driver, the
 * seeded draw, history and stage names. The stages live in sampler_stages.c and
 * sampler_history.c. */
#include "sample/sampler_internal.h"

#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

const char *const mf_sampler_default_breakers[4] = {"\n", ":", "\"", "*"};

static const struct {
    const char *name;
    char letter;
} stage_names[MF_STAGE_COUNT] = {
    [MF_STAGE_PENALTIES] = {"penalties", 'e'}, [MF_STAGE_DRY] = {"dry", 'd'},
    [MF_STAGE_TOP_N_SIGMA] = {"top_n_sigma", 's'}, [MF_STAGE_TOP_K] = {"top_k", 'k'},
    [MF_STAGE_TYPICAL] = {"typ_p", 'y'}, [MF_STAGE_TOP_P] = {"top_p", 'p'},
    [MF_STAGE_MIN_P] = {"min_p", 'm'}, [MF_STAGE_XTC] = {"xtc", 'x'},
    [MF_STAGE_TEMPERATURE] = {"temperature", 't'},
};

static const struct {
    const char *name;
    mf_sampler_stage st;
} stage_alt_names[] = {
    {"top-k", MF_STAGE_TOP_K},     {"top-p", MF_STAGE_TOP_P},         {"nucleus", MF_STAGE_TOP_P},
    {"top-n-sigma", MF_STAGE_TOP_N_SIGMA}, {"typical-p", MF_STAGE_TYPICAL}, {"typical", MF_STAGE_TYPICAL},
    {"typ-p", MF_STAGE_TYPICAL},   {"typ", MF_STAGE_TYPICAL},         {"min-p", MF_STAGE_MIN_P},
    {"temp", MF_STAGE_TEMPERATURE},
};

const char *mf_sampler_stage_name(mf_sampler_stage st) {
    return (unsigned)st < MF_STAGE_COUNT ? stage_names[st].name : "?";
}

char mf_sampler_stage_char(mf_sampler_stage st) { return (unsigned)st < MF_STAGE_COUNT ? stage_names[st].letter : '?'; }

mf_sampler_stage mf_sampler_stage_from_name(const char *name, size_t len) {
    for (int i = 0; i < MF_STAGE_COUNT; i++)
        if (strlen(stage_names[i].name) == len && !memcmp(stage_names[i].name, name, len)) return (mf_sampler_stage)i;
    for (size_t i = 0; i < MF_ARRAY_LEN(stage_alt_names); i++)
        if (strlen(stage_alt_names[i].name) == len && !memcmp(stage_alt_names[i].name, name, len))
            return stage_alt_names[i].st;
    return MF_STAGE_COUNT;
}

mf_sampler_stage mf_sampler_stage_from_char(char c) {
    for (int i = 0; i < MF_STAGE_COUNT; i++)
        if (stage_names[i].letter == c) return (mf_sampler_stage)i;
    return MF_STAGE_COUNT;
}

mf_status mf_sampler_parse_stages(mf_sampler_params *p, const char *names) {
    mf_sampler_stage st[MF_SAMPLER_MAX_STAGES];
    size_t n = 0;
    for (const char *s = names; *s;) {
        size_t len = strcspn(s, ";,");
        if (len > 0) {
            mf_sampler_stage x = mf_sampler_stage_from_name(s, len);
            if (x == MF_STAGE_COUNT)
                return mf_fail(MF_ERR_ARG,
                               "unknown sampler '%.*s' (valid: penalties, dry, top_n_sigma, top_k, typ_p, top_p, "
                               "min_p, xtc, temperature)",
                               (int)len, s);
            if (n == MF_SAMPLER_MAX_STAGES)
                return mf_fail(MF_ERR_ARG, "too many samplers in '%s' (at most %d)", names, MF_SAMPLER_MAX_STAGES);
            st[n++] = x;
        }
        s += len;
        if (*s) s++;
    }
    memcpy(p->stages, st, n * sizeof *st);
    p->n_stages = n;
    return MF_OK;
}

mf_status mf_sampler_parse_stage_chars(mf_sampler_params *p, const char *chars) {
    size_t n = strlen(chars);
    if (n > MF_SAMPLER_MAX_STAGES)
        return mf_fail(MF_ERR_ARG, "sampler sequence '%s' is too long (at most %d letters)", chars, MF_SAMPLER_MAX_STAGES);
    mf_sampler_stage st[MF_SAMPLER_MAX_STAGES];
    for (size_t i = 0; i < n; i++) {
        st[i] = mf_sampler_stage_from_char(chars[i]);
        if (st[i] == MF_STAGE_COUNT)
            return mf_fail(MF_ERR_ARG, "unknown sampler letter '%c' in '%s' (valid: e d s k y p m x t)", chars[i], chars);
    }
    memcpy(p->stages, st, n * sizeof *st);
    p->n_stages = n;
    return MF_OK;
}

mf_sampler_params mf_sampler_default_params(void) {
    mf_sampler_params p = {
        .seed = MF_SAMPLER_SEED_RANDOM,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .typ_p = 1.0f,
        .top_n_sigma = -1.0f,
        .temp = 0.8f,
        .dynatemp_range = 0.0f,
        .dynatemp_exponent = 1.0f,
        .xtc_probability = 0.0f,
        .xtc_threshold = 0.1f,
        .min_keep = 0,
        .penalty_last_n = 64,
        .penalty_repeat = 1.0f,
        .penalty_freq = 0.0f,
        .penalty_present = 0.0f,
        .dry_multiplier = 0.0f,
        .dry_base = 1.75f,
        .dry_allowed_length = 2,
        .dry_penalty_last_n = -1,
        .dry_breakers = mf_sampler_default_breakers,
        .n_dry_breakers = 4,
        .mirostat = 0,
        .mirostat_tau = 5.0f,
        .mirostat_eta = 0.1f,
    };
    static const mf_sampler_stage order[] = {MF_STAGE_PENALTIES, MF_STAGE_DRY,   MF_STAGE_TOP_N_SIGMA,
                                             MF_STAGE_TOP_K,     MF_STAGE_TYPICAL, MF_STAGE_TOP_P,
                                             MF_STAGE_MIN_P,     MF_STAGE_XTC,   MF_STAGE_TEMPERATURE};
    memcpy(p.stages, order, sizeof order);
    p.n_stages = MF_ARRAY_LEN(order);
    return p;
}

#define MF_MAX_WINDOW (1 << 20) /* longest penalty / DRY window, in tokens */

static mf_status check_float(const char *name, float v, float lo, float hi) {
    if (!(v >= lo && v <= hi)) return mf_fail(MF_ERR_ARG, "%s = %g is outside [%g, %g]", name, v, lo, hi);
    return MF_OK;
}

static mf_status check_int(const char *name, long v, long lo, long hi) {
    if (v < lo || v > hi) return mf_fail(MF_ERR_ARG, "%s = %ld is outside [%ld, %ld]", name, v, lo, hi);
    return MF_OK;
}

mf_status mf_sampler_params_check(const mf_sampler_params *p) {
    mf_status st;
    if ((st = check_float("top_p", p->top_p, 0.0f, 1.0f)) || (st = check_float("min_p", p->min_p, 0.0f, 1.0f)) ||
        (st = check_float("typ_p", p->typ_p, 0.0f, 1.0f)) ||
        (st = check_float("top_n_sigma", p->top_n_sigma, -1e30f, 1e30f)) ||
        (st = check_float("temp", p->temp, -1e30f, 1e30f)) ||
        (st = check_float("dynatemp_range", p->dynatemp_range, 0.0f, 1e30f)) ||
        (st = check_float("dynatemp_exponent", p->dynatemp_exponent, 0.0f, 1e6f)) ||
        (st = check_float("xtc_probability", p->xtc_probability, 0.0f, 1.0f)) ||
        (st = check_float("xtc_threshold", p->xtc_threshold, 0.0f, 1.0f)) ||
        (st = check_int("min_keep", p->min_keep, 0, INT32_MAX)) ||
        (st = check_int("penalty_last_n", p->penalty_last_n, -1, MF_MAX_WINDOW)) ||
        (st = check_float("penalty_repeat", p->penalty_repeat, 1e-6f, 1e6f)) ||
        (st = check_float("penalty_freq", p->penalty_freq, -1e6f, 1e6f)) ||
        (st = check_float("penalty_present", p->penalty_present, -1e6f, 1e6f)) ||
        (st = check_float("dry_multiplier", p->dry_multiplier, 0.0f, 1e6f)) ||
        (st = check_float("dry_base", p->dry_base, 0.0f, 1e6f)) ||
        (st = check_int("dry_allowed_length", p->dry_allowed_length, 0, MF_MAX_WINDOW)) ||
        (st = check_int("dry_penalty_last_n", p->dry_penalty_last_n, -1, MF_MAX_WINDOW)) ||
        (st = check_int("mirostat", p->mirostat, 0, 2)) ||
        (st = check_float("mirostat_tau", p->mirostat_tau, 0.0f, 1e6f)) ||
        (st = check_float("mirostat_eta", p->mirostat_eta, 0.0f, 1e6f)))
        return st;
    if (p->n_stages > MF_SAMPLER_MAX_STAGES)
        return mf_fail(MF_ERR_ARG, "n_stages = %zu is outside [0, %d]", p->n_stages, MF_SAMPLER_MAX_STAGES);
    for (size_t i = 0; i < p->n_stages; i++)
        if ((unsigned)p->stages[i] >= MF_STAGE_COUNT)
            return mf_fail(MF_ERR_ARG, "stages[%zu] = %d is not a stage (0..%d)", i, (int)p->stages[i], MF_STAGE_COUNT - 1);
    if (p->n_dry_breakers && !p->dry_breakers) return mf_fail(MF_ERR_ARG, "n_dry_breakers = %zu but dry_breakers is NULL", p->n_dry_breakers);
    if (p->n_logit_bias && !p->logit_bias) return mf_fail(MF_ERR_ARG, "n_logit_bias = %zu but logit_bias is NULL", p->n_logit_bias);
    for (size_t i = 0; i < p->n_logit_bias; i++)
        if (isnan(p->logit_bias[i].bias))
            return mf_fail(MF_ERR_ARG, "logit_bias[%zu]: the bias is NaN (use a number or -inf)", i);
    return MF_OK;
}

static uint32_t random_seed(void) {
    uint32_t x = 0;
    if (getrandom(&x, sizeof x, 0) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
        x = (uint32_t)mf_rng_splitmix64(&t);
    }
    return x == MF_SAMPLER_SEED_RANDOM ? 0 : x;
}

static mf_status add_bias(mf_sampler *s, size_t *cap, int32_t id, float bias) {
    if (s->n_bias == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        int32_t *ni = mf_realloc(s->bias_id, ncap * sizeof *ni);
        if (!ni) return MF_ERR_NOMEM;
        s->bias_id = ni;
        float *nb = mf_realloc(s->bias_val, ncap * sizeof *nb);
        if (!nb) return MF_ERR_NOMEM;
        s->bias_val = nb, *cap = ncap;
    }
    s->bias_id[s->n_bias] = id;
    s->bias_val[s->n_bias++] = bias;
    return MF_OK;
}

static mf_status resolve_bias(mf_sampler *s, const mf_sampler_params *p, const mf_sampler_vocab *v) {
    size_t cap = 0;
    for (size_t i = 0; i < p->n_logit_bias; i++) {
        const mf_logit_bias *b = &p->logit_bias[i];
        if (!b->text) {
            if (b->token < 0 || b->token >= s->n_vocab)
                return mf_fail(MF_ERR_RANGE, "logit bias for token %d: the vocabulary has tokens 0..%d", (int)b->token,
                               (int)s->n_vocab - 1);
            if (add_bias(s, &cap, b->token, b->bias)) return MF_ERR_NOMEM;
            continue;
        }
        if (!v->piece)
            return mf_fail(MF_ERR_ARG, "logit bias for text '%s' needs the vocabulary's token texts (piece is NULL)", b->text);
        size_t want = strlen(b->text), found = 0;
        for (int32_t t = 0; t < s->n_vocab; t++) {
            size_t len = 0;
            const char *text = v->piece(v->user, t, &len);
            if (text && len == want && !memcmp(text, b->text, len)) {
                if (add_bias(s, &cap, t, b->bias)) return MF_ERR_NOMEM;
                found++;
            }
        }
        if (!found) return mf_fail(MF_ERR_NOT_FOUND, "logit bias: no token has the text '%s' (give a token id instead)", b->text);
    }
    /* An end-of-generation id past the logits can never be drawn: nothing to ban. */
    for (size_t i = 0; p->ignore_eos && i < v->n_eog; i++)
        if (v->eog[i] >= 0 && v->eog[i] < s->n_vocab && add_bias(s, &cap, v->eog[i], -INFINITY)) return MF_ERR_NOMEM;
    return MF_OK;
}

mf_status mf_sampler_create(const mf_sampler_params *p, const mf_sampler_vocab *v, mf_sampler **out) {
    *out = NULL;
    mf_status st = mf_sampler_params_check(p);
    if (st) return st;
    if (!v || v->n_vocab <= 0) return mf_fail(MF_ERR_ARG, "sampler vocabulary size %d must be positive", v ? (int)v->n_vocab : 0);
    if (v->n_eog && !v->eog) return mf_fail(MF_ERR_ARG, "n_eog = %zu but eog is NULL", v->n_eog);
    mf_sampler *s = mf_calloc(1, sizeof *s);
    if (!s) return MF_ERR_NOMEM;
    s->p = *p;
    s->p.dry_breakers = NULL, s->p.logit_bias = NULL;
    s->n_vocab = v->n_vocab;
    memcpy(s->stages, p->stages, p->n_stages * sizeof *p->stages);
    s->n_stages = p->n_stages;
    size_t nv = (size_t)v->n_vocab;
    s->wl = mf_malloc(nv * sizeof *s->wl);
    s->cand = mf_malloc(nv * sizeof *s->cand);
    if (!s->wl || !s->cand) goto nomem;
    for (size_t i = 0; i < s->n_stages; i++)
        if (s->stages[i] == MF_STAGE_TYPICAL && p->mirostat == 0 && !s->scored) {
            s->scored = mf_malloc(nv * sizeof *s->scored);
            s->tmp = mf_malloc(nv * sizeof *s->tmp);
            if (!s->scored || !s->tmp) goto nomem;
        }
    if ((st = resolve_bias(s, p, v)) || (st = mf_history_init(s, p, v))) {
        mf_sampler_free(s);
        return st;
    }
    s->seed = p->seed == MF_SAMPLER_SEED_RANDOM ? random_seed() : p->seed;
    mf_sampler_reset(s);
    *out = s;
    return MF_OK;
nomem:
    mf_sampler_free(s);
    return MF_ERR_NOMEM;
}

void mf_sampler_free(mf_sampler *s) {
    if (!s) return;
    mf_history_free(s);
    free(s->bias_id);
    free(s->bias_val);
    free(s->wl);
    free(s->cand);
    free(s->tmp);
    free(s->scored);
    free(s);
}

void mf_sampler_reset(mf_sampler *s) {
    mf_history_reset(s);
    mf_rng_seed(&s->rng, s->seed);
    s->mu = 2.0f * s->p.mirostat_tau;
}

uint32_t mf_sampler_seed(const mf_sampler *s) { return s->seed; }

mf_status mf_sampler_accept(mf_sampler *s, int32_t token) {
    if (token < 0 || token >= s->n_vocab)
        return mf_fail(MF_ERR_RANGE, "accepted token %d is outside the vocabulary 0..%d", (int)token, (int)s->n_vocab - 1);
    mf_history_accept(s, token);
    return MF_OK;
}

/* Copy the logits into the dense working set (NaN becomes -inf), add the biases, run the stages. */
static void run_chain(mf_sampler *s, const float *logits) {
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float x = logits[i];
        s->wl[i] = x != x ? -INFINITY : x;
    }
    s->dense = true, s->sorted = false, s->n_cand = 0;
    for (size_t i = 0; i < s->n_bias; i++) s->wl[s->bias_id[i]] += s->bias_val[i];
    if (s->p.mirostat) {
        mf_stage_temperature(s, s->p.temp);
        mf_stage_mirostat(s);
        return;
    }
    for (size_t i = 0; i < s->n_stages; i++) {
        switch (s->stages[i]) {
        case MF_STAGE_PENALTIES: mf_stage_penalties(s); break;
        case MF_STAGE_DRY: mf_stage_dry(s); break;
        case MF_STAGE_TOP_N_SIGMA: mf_stage_top_n_sigma(s); break;
        case MF_STAGE_TOP_K: mf_stage_top_k(s, s->p.top_k); break;
        case MF_STAGE_TYPICAL: mf_stage_typical(s); break;
        case MF_STAGE_TOP_P: mf_stage_top_p(s); break;
        case MF_STAGE_MIN_P: mf_stage_min_p(s); break;
        case MF_STAGE_XTC: mf_stage_xtc(s); break;
        case MF_STAGE_TEMPERATURE: mf_stage_dynatemp(s); break;
        case MF_STAGE_COUNT: MF_ASSERT(0);
        }
    }
}

static mf_status no_candidates(void) {
    return mf_fail(MF_ERR_RANGE, "sampling: no token has a finite logit after the sampler chain (all -inf or NaN)");
}

mf_status mf_sampler_dist(mf_sampler *s, const float *logits, const mf_sampler_candidate **cands, size_t *n) {
    run_chain(s, logits);
    mf_sampler_materialize(s);
    *cands = s->cand;
    *n = s->n_cand;
    if (s->n_cand == 0) return no_candidates();
    mf_sampler_softmax(s);
    s->dist_pending = true;
    return MF_OK;
}

/* Draw from cand by its probabilities: the first token whose running sum passes u * total, with u
 * uniform in [0, 1). A single candidate consumes no random number. */
static size_t draw_sparse(mf_sampler *s) {
    size_t n = s->n_cand;
    if (n == 1) return 0;
    double total = 0.0;
    for (size_t i = 0; i < n; i++) total += s->cand[i].p;
    double target = mf_rng_uniform(&s->rng) * total, cum = 0.0;
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (s->cand[i].p <= 0.0f) continue;
        cum += s->cand[i].p;
        last = i;
        if (cum > target) return i;
    }
    return last; /* rounding left the target just above the sum */
}

/* The same draw over the dense logits when no stage truncated, without a candidate list. */
static mf_status draw_dense(mf_sampler *s, int32_t *token) {
    float mx = -INFINITY;
    for (int32_t i = 0; i < s->n_vocab; i++) mx = s->wl[i] > mx ? s->wl[i] : mx;
    if (mx == -INFINITY) return no_candidates();
    if (mx == INFINITY) { /* overflowed logits: the candidate path handles the limit */
        mf_sampler_materialize(s);
        mf_sampler_softmax(s);
        *token = s->cand[draw_sparse(s)].id;
        return MF_OK;
    }
    /* The logits are not needed after the draw: keep the exponentials in their place. */
    double total = mf_sampler_exp_dense(s->wl, (size_t)s->n_vocab, mx);
    double target = mf_rng_uniform(&s->rng) * total, cum = 0.0;
    int32_t last = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) {
        float e = s->wl[i];
        if (e <= 0.0f) continue;
        cum += e;
        last = i;
        if (cum > target) break;
    }
    *token = last;
    return MF_OK;
}

static void draw_and_update(mf_sampler *s, int32_t *token) {
    size_t i = draw_sparse(s);
    *token = s->cand[i].id;
    if (s->p.mirostat) mf_mirostat_update(s, s->cand[i].p);
}

mf_status mf_sampler_sample(mf_sampler *s, const float *logits, int32_t *token) {
    s->dist_pending = false;
    run_chain(s, logits);
    if (s->dense) return draw_dense(s, token);
    if (s->n_cand == 0) return no_candidates();
    mf_sampler_softmax(s);
    draw_and_update(s, token);
    return MF_OK;
}

mf_status mf_sampler_draw(mf_sampler *s, int32_t *token) {
    if (!s->dist_pending) return mf_fail(MF_ERR_ARG, "mf_sampler_draw: call mf_sampler_dist first (once per draw)");
    s->dist_pending = false;
    draw_and_update(s, token);
    return MF_OK;
}

void mf_sampler_describe(const mf_sampler *s, char *buf, size_t size) {
    if (size == 0) return;
    size_t n = 0;
#define PUT(...) (n += (size_t)snprintf(buf + MF_MIN(n, size - 1), size - MF_MIN(n, size - 1), __VA_ARGS__))
    PUT("logits");
    if (s->n_bias) PUT(" -> logit_bias(%zu)", s->n_bias);
    if (s->p.mirostat) {
        PUT(" -> temperature(%g) -> mirostat_v%d(tau %g, eta %g)", s->p.temp, s->p.mirostat, s->p.mirostat_tau,
            s->p.mirostat_eta);
    } else {
        for (size_t i = 0; i < s->n_stages; i++) {
            const mf_sampler_params *p = &s->p;
            switch (s->stages[i]) {
            case MF_STAGE_PENALTIES:
                if (s->pen_on)
                    PUT(" -> penalties(last %zu, repeat %g, freq %g, present %g)", s->pen.cap, p->penalty_repeat,
                        p->penalty_freq, p->penalty_present);
                break;
            case MF_STAGE_DRY:
                if (s->dry_on)
                    PUT(" -> dry(mult %g, base %g, allowed %d, last %zu, %zu breakers)", p->dry_multiplier, p->dry_base,
                        (int)p->dry_allowed_length, s->dry.cap, s->n_breakers);
                break;
            case MF_STAGE_TOP_N_SIGMA: if (p->top_n_sigma > 0) PUT(" -> top_n_sigma(%g)", p->top_n_sigma); break;
            case MF_STAGE_TOP_K: if (p->top_k > 0) PUT(" -> top_k(%d)", (int)p->top_k); break;
            case MF_STAGE_TYPICAL: if (p->typ_p < 1) PUT(" -> typ_p(%g)", p->typ_p); break;
            case MF_STAGE_TOP_P: if (p->top_p < 1) PUT(" -> top_p(%g)", p->top_p); break;
            case MF_STAGE_MIN_P: if (p->min_p > 0) PUT(" -> min_p(%g)", p->min_p); break;
            case MF_STAGE_XTC:
                if (p->xtc_probability > 0 && p->xtc_threshold <= 0.5f)
                    PUT(" -> xtc(p %g, threshold %g)", p->xtc_probability, p->xtc_threshold);
                break;
            case MF_STAGE_TEMPERATURE:
                if (p->dynatemp_range > 0)
                    PUT(" -> dynatemp(%g +- %g, exponent %g)", p->temp, p->dynatemp_range, p->dynatemp_exponent);
                else if (p->temp <= 0) PUT(" -> greedy");
                else PUT(" -> temperature(%g)", p->temp);
                break;
            case MF_STAGE_COUNT: break;
            }
        }
    }
    PUT(" -> dist(seed %u)", (unsigned)s->seed);
#undef PUT
}
