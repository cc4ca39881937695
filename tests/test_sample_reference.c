/* test_sample_reference.c: the expected outcomes of llama.cpp's own sampler tests
 * (tests/test-sampling.cpp: temperature, top-k, top-p, min-p, XTC, typical, penalties, DRY,
 * top-n-sigma on 4- and 5-token distributions), checked through minfer's sampler, as evidence that
 * each stage means the same thing. Expected values are per token id; 0 means removed (or
 * negligible). llama.cpp's XTC and typical tests read the probabilities before renormalization, so
 * for those only the surviving set is compared. */
#include "sample/sampler.h"
#include "test.h"

#include <math.h>
#include <string.h>

#define P4 {0.1f, 0.2f, 0.3f, 0.4f}

static mf_sampler_params base(mf_sampler_stage st) {
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 0;
    p.stages[0] = st;
    p.n_stages = 1;
    return p;
}

/* Texts for DRY breakers: token 3 is "|", the others letters. */
static const char *piece(void *user, int32_t id, size_t *len) {
    static const char *t[5] = {"a", "b", "c", "|", "e"};
    (void)user;
    *len = 1;
    return t[id];
}

/* Run params on probs (as log-probabilities) after accepting hist; compare the final distribution
 * with want[] per id (set_only: compare which tokens survive). */
static void run(const char *name, const mf_sampler_params *p, const float *probs, int n, const int32_t *hist, int nh,
                const float *want, bool set_only) {
    float l[8];
    for (int i = 0; i < n; i++) l[i] = logf(probs[i]);
    mf_sampler_vocab v = {.n_vocab = n, .n_ctx = 64, .piece = piece};
    mf_sampler *s = NULL;
    if (mf_sampler_create(p, &v, &s) != MF_OK) {
        CHECKF(0, "%s: %s", name, mf_last_error());
        return;
    }
    for (int i = 0; i < nh; i++) mf_sampler_accept(s, hist[i]);
    const mf_sampler_candidate *c;
    size_t nc;
    CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK);
    float got[8] = {0};
    for (size_t i = 0; i < nc; i++) got[c[i].id] = c[i].p;
    for (int i = 0; i < n; i++) {
        if (set_only) CHECKF((got[i] > 0) == (want[i] > 0), "%s: token %d survives: %d, expected %d", name, i, got[i] > 0, want[i] > 0);
        else CHECKF(fabsf(got[i] - want[i]) < 1e-5f, "%s: token %d p %f, expected %f", name, i, got[i], want[i]);
    }
    mf_sampler_free(s);
}

#define RUN(name, p, probs, hist, want, set_only)                                                                    \
    do {                                                                                                             \
        const float pr_[] = probs, w_[] = want;                                                                      \
        const int32_t h_[] = hist;                                                                                   \
        run(name, &(p), pr_, (int)(sizeof pr_ / sizeof pr_[0]), h_, (int)(sizeof h_ / sizeof h_[0]) - 1, w_, set_only); \
    } while (0)
/* Brace lists as macro arguments; hist lists end with a -1 sentinel so an empty history is {-1}. */
#define W(...) {__VA_ARGS__}
#define H(...) {__VA_ARGS__, -1}
#define NOH {-1}

int main(void) {
    mf_sampler_params p;

    p = base(MF_STAGE_TEMPERATURE), p.temp = 1.0f;
    RUN("temp 1", p, P4, NOH, P4, false);
    p.temp = 0.0f;
    RUN("temp 0", p, P4, NOH, W(0, 0, 0, 1), false);
    p.temp = 1.0f, p.dynatemp_range = 0.0f, p.dynatemp_exponent = 1.0f;
    RUN("temp_ext 1", p, P4, NOH, P4, false);

    p = base(MF_STAGE_TOP_K);
    p.top_k = 1;
    RUN("top_k 1", p, P4, NOH, W(0, 0, 0, 1), false);
    p.top_k = 3;
    RUN("top_k 3", p, P4, NOH, W(0, 0.22222f, 0.33333f, 0.44444f), false);
    p.top_k = 4;
    RUN("top_k 4", p, P4, NOH, P4, false);
    p.top_k = 0;
    RUN("top_k 0", p, P4, NOH, P4, false);

    p = base(MF_STAGE_TOP_P);
    p.top_p = 0.0f;
    RUN("top_p 0", p, P4, NOH, W(0, 0, 0, 1), false);
    p.top_p = 0.7f;
    RUN("top_p 0.7", p, P4, NOH, W(0, 0, 0.428571f, 0.571429f), false);
    p.top_p = 0.8f;
    RUN("top_p 0.8", p, P4, NOH, W(0, 0.22222f, 0.33333f, 0.44444f), false);
    p.top_p = 1.0f;
    RUN("top_p 1", p, P4, NOH, P4, false);

    p = base(MF_STAGE_MIN_P);
    const float mp[] = {0.0f, 0.24f, 0.26f, 0.49f, 0.51f, 0.74f, 0.76f, 1.0f};
    const float mw[][4] = {P4, P4, {0, 0.2f / 0.9f, 0.3f / 0.9f, 0.4f / 0.9f}, {0, 0.2f / 0.9f, 0.3f / 0.9f, 0.4f / 0.9f},
                           {0, 0, 0.3f / 0.7f, 0.4f / 0.7f}, {0, 0, 0.3f / 0.7f, 0.4f / 0.7f}, {0, 0, 0, 1}, {0, 0, 0, 1}};
    for (int i = 0; i < 8; i++) {
        char name[32];
        snprintf(name, sizeof name, "min_p %.2f", mp[i]);
        p.min_p = mp[i];
        run(name, &p, (const float[])P4, 4, NULL, 0, mw[i], false);
    }

    /* XTC with probability 1 (llama.cpp's test: 0.99 and its seed) on 0.4, 0.3, 0.2, 0.1. */
    p = base(MF_STAGE_XTC);
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.09f;
    RUN("xtc 0.09", p, W(0.4f, 0.3f, 0.2f, 0.1f), NOH, W(0, 0, 0, 1), true);
    p.xtc_threshold = 0.19f;
    RUN("xtc 0.19", p, W(0.4f, 0.3f, 0.2f, 0.1f), NOH, W(0, 0, 1, 1), true);
    p.xtc_threshold = 0.29f;
    RUN("xtc 0.29", p, W(0.4f, 0.3f, 0.2f, 0.1f), NOH, W(0, 1, 1, 1), true);
    p.xtc_threshold = 0.39f;
    RUN("xtc 0.39", p, W(0.4f, 0.3f, 0.2f, 0.1f), NOH, W(1, 1, 1, 1), true);

    p = base(MF_STAGE_TYPICAL);
    p.typ_p = 0.5f;
    RUN("typical 1", p, W(0.97f, 0.01f, 0.01f, 0.01f), NOH, W(1, 0, 0, 0), true);
    RUN("typical 2", p, W(0.4f, 0.2f, 0.2f, 0.2f), NOH, W(0, 1, 1, 1), true);

#define P5 {0.2f, 0.2f, 0.2f, 0.2f, 0.2f}
    p = base(MF_STAGE_PENALTIES);
    p.penalty_repeat = 50.0f;
    p.penalty_last_n = 1;
    RUN("repeat 50 [0]", p, P5, H(0), W(0, 0.25f, 0.25f, 0.25f, 0.25f), false);
    p.penalty_last_n = 3;
    RUN("repeat 50 [0 1 2]", p, P5, H(0, 1, 2), W(0, 0, 0, 0.5f, 0.5f), false);
    p.penalty_last_n = 5;
    RUN("repeat 50 [0 1 2 0 0]", p, P5, H(0, 1, 2, 0, 0), W(0, 0, 0, 0.5f, 0.5f), false);
    p.penalty_repeat = 1.0f, p.penalty_freq = 5.0f, p.penalty_present = 5.0f;
    p.penalty_last_n = 1;
    RUN("freq/presence [0]", p, P5, H(0), W(0.000011f, 0.249997f, 0.249997f, 0.249997f, 0.249997f), false);
    p.penalty_last_n = 3;
    RUN("freq/presence [0 1 2]", p, P5, H(0, 1, 2), W(0.000023f, 0.000023f, 0.000023f, 0.499966f, 0.499966f),
        false);
    p.penalty_last_n = 5;
    RUN("freq/presence [0 1 2 0 0]", p, P5, H(0, 1, 2, 0, 0),
        W(0.000000f, 0.000023f, 0.000023f, 0.499977f, 0.499977f), false);

    p = base(MF_STAGE_DRY);
    p.n_dry_breakers = 0;
    p.dry_multiplier = 1.0f, p.dry_base = 1.1f, p.dry_allowed_length = 2, p.dry_penalty_last_n = 4;
    RUN("dry 1", p, W(0.25f, 0.25f, 0.25f, 0.25f), H(0, 1), W(0.25f, 0.25f, 0.25f, 0.25f), false);
    p.dry_penalty_last_n = 5;
    RUN("dry 2", p, W(0.25f, 0.25f, 0.25f, 0.25f), H(0, 1, 2, 0, 1),
        W(0.296923f, 0.296923f, 0.109232f, 0.296923f), false);
    const char *bar[] = {"|"}; /* llama.cpp's test gives the breaker as token 3 */
    p.dry_breakers = bar, p.n_dry_breakers = 1, p.dry_penalty_last_n = 6;
    RUN("dry 3", p, P5, H(0, 1, 3, 4, 0, 1), P5, false);
    p.n_dry_breakers = 0, p.dry_multiplier = 2.0f, p.dry_penalty_last_n = 5;
    RUN("dry 4", p, P5, H(0, 1, 2, 0, 1), W(0.241818f, 0.241818f, 0.032727f, 0.241818f, 0.241818f), false);
    p.dry_multiplier = 1.0f, p.dry_allowed_length = 4, p.dry_penalty_last_n = 7;
    RUN("dry 5", p, P5, H(0, 1, 2, 3, 4, 0, 1), P5, false);

    p = base(MF_STAGE_TOP_N_SIGMA);
    p.top_n_sigma = 1.0f;
    RUN("top_n_sigma 1", p, P4, NOH, W(0, 0, 0.428571f, 0.571429f), false);
    p.top_n_sigma = 0.0f;
    RUN("top_n_sigma 0", p, P4, NOH, P4, false);
    p.top_n_sigma = 3.0f;
    RUN("top_n_sigma 3", p, P4, NOH, P4, false);
    return test_summary("test_sample_reference");
}
