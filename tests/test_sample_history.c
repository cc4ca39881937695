/* test_sample_history.c: the stages that read the token history, on constructed repetitive
 * histories: repetition/frequency/presence penalties (window, counts, dense and sparse paths) and
 * DRY (repeat lengths, allowed length, single- and multi-token sequence breakers, window). */
#include "sample/sampler.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NV 20

/* Token texts: "t<id>", except 5 = "xa" and 6 = "b" (together they spell the breaker "ab") and
 * 11 = ":" (a default breaker). */
static const char *piece(void *user, int32_t id, size_t *len) {
    static char buf[16];
    (void)user;
    if (id == 5) snprintf(buf, sizeof buf, "xa");
    else if (id == 6) snprintf(buf, sizeof buf, "b");
    else if (id == 11) snprintf(buf, sizeof buf, ":");
    else snprintf(buf, sizeof buf, "t%d", (int)id);
    *len = strlen(buf);
    return buf;
}

static mf_sampler *make(const mf_sampler_params *p) {
    mf_sampler_vocab v = {.n_vocab = NV, .n_ctx = 64, .piece = piece};
    mf_sampler *s = NULL;
    CHECKF(mf_sampler_create(p, &v, &s) == MF_OK, "create: %s", mf_last_error());
    return s;
}

static void accept_all(mf_sampler *s, const int32_t *t, size_t n) {
    for (size_t i = 0; i < n; i++) CHECK(mf_sampler_accept(s, t[i]) == MF_OK);
}

/* The logit each token has after the chain (-INFINITY when it did not survive). */
static void logits_after(mf_sampler *s, const float *in, float *out) {
    for (int i = 0; i < NV; i++) out[i] = -INFINITY;
    const mf_sampler_candidate *c;
    size_t n;
    CHECK(mf_sampler_dist(s, in, &c, &n) == MF_OK);
    for (size_t i = 0; i < n; i++) out[c[i].id] = c[i].logit;
}

static void test_penalties(void) {
    float in[NV] = {0}, out[NV];
    in[0] = 2, in[1] = 2, in[2] = -2, in[3] = 1;
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 1;
    p.stages[0] = MF_STAGE_PENALTIES, p.n_stages = 1;
    p.penalty_repeat = 2.0f, p.penalty_freq = 0.5f, p.penalty_present = 0.25f, p.penalty_last_n = 64;
    mf_sampler *s = make(&p);
    accept_all(s, (int32_t[]){1, 1, 2}, 3);
    logits_after(s, in, out);
    /* token 1 (count 2): 2 / 2 - (2 * 0.5 + 0.25) = -0.25; token 2 (count 1): -2 * 2 - 0.75 = -4.75 */
    CHECK_NEAR(out[1], -0.25, 1e-6);
    CHECK_NEAR(out[2], -4.75, 1e-6);
    CHECK(out[0] == 2 && out[3] == 1 && out[4] == 0);
    mf_sampler_free(s);

    /* A window of 2 sees only [1, 2]: token 1 has count 1. */
    p.penalty_last_n = 2;
    s = make(&p);
    accept_all(s, (int32_t[]){1, 1, 2}, 3);
    logits_after(s, in, out);
    CHECK_NEAR(out[1], 0.25, 1e-6);
    CHECK_NEAR(out[2], -4.75, 1e-6);
    /* Sliding on: [2, 3] then [3, 3]. */
    accept_all(s, (int32_t[]){3, 3}, 2);
    logits_after(s, in, out);
    CHECK(out[1] == 2 && out[2] == -2);
    CHECK_NEAR(out[3], 1.0 / 2 - (2 * 0.5 + 0.25), 1e-6);
    mf_sampler_reset(s);
    logits_after(s, in, out);
    CHECK(out[3] == 1);
    mf_sampler_free(s);

    /* After top-k the same penalties apply to the surviving candidates (sparse path). */
    p.penalty_last_n = 64;
    p.stages[0] = MF_STAGE_TOP_K, p.stages[1] = MF_STAGE_PENALTIES, p.n_stages = 2, p.top_k = 3;
    s = make(&p);
    accept_all(s, (int32_t[]){1, 1, 2}, 3);
    logits_after(s, in, out);
    CHECK_NEAR(out[1], -0.25, 1e-6);
    CHECK(out[0] == 2 && out[3] == 1 && out[2] == -INFINITY);
    mf_sampler_free(s);

    /* Neutral penalties or a window of 0 change nothing. */
    p = mf_sampler_default_params();
    p.seed = 1, p.stages[0] = MF_STAGE_PENALTIES, p.n_stages = 1, p.penalty_last_n = 0, p.penalty_repeat = 3;
    s = make(&p);
    accept_all(s, (int32_t[]){1, 1, 2}, 3);
    logits_after(s, in, out);
    CHECK(out[1] == 2 && out[2] == -2);
    mf_sampler_free(s);

    /* Penalized greedy decoding escapes a loop that plain greedy repeats. */
    p = mf_sampler_default_params();
    p.seed = 1, p.temp = 0, p.penalty_repeat = 1.5f;
    s = make(&p);
    float loop[NV] = {0};
    loop[7] = 3, loop[8] = 2.5f;
    int32_t t;
    CHECK(mf_sampler_sample(s, loop, &t) == MF_OK && t == 7);
    accept_all(s, &t, 1);
    CHECK(mf_sampler_sample(s, loop, &t) == MF_OK && t == 8); /* 3 / 1.5 = 2 < 2.5 */
    mf_sampler_free(s);
}

static mf_sampler_params dry_params(void) {
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 1;
    p.stages[0] = MF_STAGE_DRY, p.n_stages = 1;
    p.dry_multiplier = 0.8f, p.dry_base = 1.75f, p.dry_allowed_length = 2, p.dry_penalty_last_n = -1;
    return p;
}

static void test_dry(void) {
    float in[NV] = {0}, out[NV];
    /* "10 14 12 13 10 14 12": plain tokens (11 is the breaker ":", used below). */
    const int32_t h1[] = {10, 14, 12, 13, 10, 14, 12};
    mf_sampler_params p = dry_params();
    mf_sampler *s = make(&p);
    accept_all(s, h1, 7);
    logits_after(s, in, out);
    /* The suffix 10 14 12 (length 3) occurred before, followed by 13: 0.8 * 1.75^(3-2) = 1.4. */
    CHECK_NEAR(out[13], -1.4, 1e-5);
    int others = 0;
    for (int i = 0; i < NV; i++) others += i != 13 && out[i] != 0;
    CHECK(others == 0);
    mf_sampler_free(s);

    p.dry_allowed_length = 3; /* 0.8 * 1.75^0 */
    s = make(&p);
    accept_all(s, h1, 7);
    logits_after(s, in, out);
    CHECK_NEAR(out[13], -0.8, 1e-5);
    mf_sampler_free(s);

    p.dry_allowed_length = 4; /* a repeat of 3 is allowed */
    s = make(&p);
    accept_all(s, h1, 7);
    logits_after(s, in, out);
    CHECK(out[13] == 0);
    mf_sampler_free(s);

    /* A window of 4 tokens cannot see the earlier occurrence. */
    p = dry_params();
    p.dry_penalty_last_n = 4;
    s = make(&p);
    accept_all(s, h1, 7);
    logits_after(s, in, out);
    CHECK(out[13] == 0);
    mf_sampler_free(s);

    /* A single-token breaker (':' = token 11) inside the repeat limits it to the tokens after it:
     * "10 11 12 13 10 11 12" -> after the last ':' only "12", shorter than allowed. */
    const int32_t h2[] = {10, 11, 12, 13, 10, 11, 12};
    p = dry_params();
    s = make(&p);
    accept_all(s, h2, 7);
    logits_after(s, in, out);
    CHECK(out[13] == 0);
    mf_sampler_free(s);
    /* The same history without breakers is penalized like h1. */
    p.n_dry_breakers = 0;
    s = make(&p);
    accept_all(s, h2, 7);
    logits_after(s, in, out);
    CHECK_NEAR(out[13], -1.4, 1e-5);
    mf_sampler_free(s);

    /* A breaker token itself is never penalized: "12 11 7 12 11" would extend with 7. */
    const int32_t h3[] = {3, 12, 9, 7, 3, 12, 9, 11, 8, 4, 3, 12, 9};
    p = dry_params();
    s = make(&p);
    accept_all(s, h3, 13);
    logits_after(s, in, out);
    /* "3 12 9" repeats twice before; followed by 7 and by 11. 11 is a breaker: not penalized. */
    CHECK_NEAR(out[7], -1.4, 1e-5);
    CHECK(out[11] == 0);
    mf_sampler_free(s);

    /* A breaker spelled across two tokens: "ab" = "xa" (5) + "b" (6). History
     * 5 6 1 2 3 9 5 6 1 2 3: the suffix "5 6 1 2 3" repeats (length 5), but the repeat may not reach
     * back past the breaker, which ends 3 tokens from the end: 0.8 * 1.75^(3-2) on token 9. */
    const int32_t h4[] = {5, 6, 1, 2, 3, 9, 5, 6, 1, 2, 3};
    const char *ab[] = {"ab"};
    p = dry_params();
    p.dry_breakers = ab, p.n_dry_breakers = 1;
    s = make(&p);
    accept_all(s, h4, 11);
    logits_after(s, in, out);
    CHECK_NEAR(out[9], -1.4, 1e-5);
    mf_sampler_free(s);
    p.n_dry_breakers = 0; /* no breakers: the full length 5, 0.8 * 1.75^3 */
    s = make(&p);
    accept_all(s, h4, 11);
    logits_after(s, in, out);
    CHECK_NEAR(out[9], -0.8 * pow(1.75, 3), 1e-4);
    mf_sampler_free(s);

    /* A long loop of one token: the exponent is capped so the penalty stays finite. */
    p = dry_params();
    p.dry_base = 10.0f; /* length 59 - 2 would be 10^57; capped at 10^38 */
    s = make(&p);
    for (int i = 0; i < 60; i++) accept_all(s, (int32_t[]){4}, 1);
    logits_after(s, in, out);
    CHECK(out[4] < -1e30f && isfinite(out[4]));
    mf_sampler_free(s);

    /* DRY with breakers but no token texts is a clear error. */
    mf_sampler_vocab v = {.n_vocab = NV, .n_ctx = 64};
    p = dry_params();
    CHECK(mf_sampler_create(&p, &v, &s) == MF_ERR_ARG && strstr(mf_last_error(), "piece"));
}

/* DRY on a long history: the Z-function must agree with a direct search for every candidate. */
static void test_dry_long(void) {
    enum { H = 64 };
    int32_t h[H];
    uint32_t x = 12345;
    for (int i = 0; i < H; i++) {
        x = x * 1103515245u + 12345u;
        h[i] = (int32_t)(12 + (x >> 16) % 3); /* tokens 12, 13, 14: many repeats, no breakers */
    }
    mf_sampler_params p = dry_params();
    p.n_dry_breakers = 0;
    mf_sampler *s = make(&p);
    accept_all(s, h, H);
    float in[NV] = {0}, out[NV];
    logits_after(s, in, out);
    /* Direct: for each earlier end position e (h[e] followed by h[e+1]), the length of the common
     * suffix of h[0..e] and h[0..H-1]. */
    int best[NV] = {0};
    for (int e = 0; e + 1 < H; e++) {
        int len = 0;
        while (len <= e && h[e - len] == h[H - 1 - len]) len++;
        if (len >= 2 && len > best[h[e + 1]]) best[h[e + 1]] = len;
    }
    for (int t = 12; t <= 14; t++) {
        double want = best[t] ? -0.8 * pow(1.75, best[t] - 2) : 0.0;
        CHECKF(fabs(out[t] - want) <= 1e-4 * fmax(1.0, fabs(want)), "token %d: %g vs %g", t, out[t], want);
    }
    mf_sampler_free(s);
}

int main(void) {
    test_penalties();
    test_dry();
    test_dry_long();
    return test_summary("test_sample_history");
}
