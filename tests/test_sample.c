/* test_sample.c: each sampler stage on constructed logits with the surviving tokens and their
 * probabilities worked out independently, the default chain against a full-sort reference on a
 * 151,936-entry vocabulary, the draw against its distribution (chi-square over 100,000 draws),
 * seed reproducibility, and parameter errors. Penalties and DRY are in test_sample_history.c. */
#include "sample/rng.h"
#include "sample/sampler.h"
#include "sample/sampler_internal.h"
#include "test.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static mf_sampler_params one_stage(mf_sampler_stage st) {
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 1234;
    p.stages[0] = st;
    p.n_stages = 1;
    return p;
}

static mf_sampler *make(const mf_sampler_params *p, int32_t n_vocab) {
    mf_sampler_vocab v = {.n_vocab = n_vocab, .n_ctx = 4096};
    mf_sampler *s = NULL;
    mf_status st = mf_sampler_create(p, &v, &s);
    CHECKF(st == MF_OK, "create: %s", mf_last_error());
    return s;
}

/* Expected: ids in order, with probabilities proportional to weights. */
static void expect(mf_sampler *s, const float *logits, const int32_t *ids, const double *w, size_t n, const char *what) {
    const mf_sampler_candidate *c;
    size_t nc = 0;
    mf_status st = mf_sampler_dist(s, logits, &c, &nc);
    CHECKF(st == MF_OK, "%s: %s", what, mf_last_error());
    CHECKF(nc == n, "%s: %zu survivors, expected %zu", what, nc, n);
    if (st || nc != n) return;
    double tot = 0;
    for (size_t i = 0; i < n; i++) tot += w[i];
    for (size_t i = 0; i < n; i++) {
        CHECKF(c[i].id == ids[i], "%s: survivor %zu is token %d, expected %d", what, i, c[i].id, ids[i]);
        CHECKF(fabs(c[i].p - w[i] / tot) < 1e-5, "%s: token %d p %g, expected %g", what, c[i].id, c[i].p, w[i] / tot);
    }
}

/* log-probabilities of 0.5, 0.2, 0.15, 0.1, 0.05 placed at tokens 3, 0, 4, 1, 2. */
static const double P5[5] = {0.2, 0.1, 0.05, 0.5, 0.15};
static void logits_p5(float *l) {
    for (int i = 0; i < 5; i++) l[i] = (float)log(P5[i]);
}

static void test_top_k(void) {
    float l[6] = {1, 5, 3, 5, 2, 0};
    mf_sampler_params p = one_stage(MF_STAGE_TOP_K);
    p.top_k = 3;
    mf_sampler *s = make(&p, 6);
    /* Ties by lower id first: 1 and 3 (logit 5), then 2 (logit 3). */
    expect(s, l, (int32_t[]){1, 3, 2}, (double[]){1, 1, exp(-2.0)}, 3, "top_k 3");
    mf_sampler_free(s);
    p.top_k = 0; /* disabled: everything survives in id order */
    s = make(&p, 6);
    expect(s, l, (int32_t[]){0, 1, 2, 3, 4, 5}, (double[]){exp(1), exp(5), exp(3), exp(5), exp(2), 1}, 6, "top_k 0");
    mf_sampler_free(s);
}

static int cmp_desc(const void *a, const void *b) {
    const mf_sampler_candidate *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return x->id - y->id;
}

/* Heap (k <= 1024) and quickselect (larger k) paths against a full sort, with many ties. */
static void test_top_k_large(void) {
    const int32_t n = 20000;
    float *l = malloc(n * sizeof *l);
    mf_sampler_candidate *ref = malloc(n * sizeof *ref);
    mf_rng r;
    mf_rng_seed(&r, 7);
    for (int32_t i = 0; i < n; i++) {
        l[i] = (float)(mf_rng_next(&r) % 5000) * 0.01f; /* about 4 tokens per value */
        ref[i] = (mf_sampler_candidate){i, l[i], 0};
    }
    qsort(ref, n, sizeof *ref, cmp_desc);
    int32_t ks[] = {1, 40, 1024, 1025, 5000, n, n + 5};
    for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
        mf_sampler_params p = one_stage(MF_STAGE_TOP_K);
        p.top_k = ks[j];
        mf_sampler *s = make(&p, n);
        const mf_sampler_candidate *c;
        size_t nc;
        CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK);
        size_t want = (size_t)(ks[j] < n ? ks[j] : n);
        CHECKF(nc == want, "k %d: %zu survivors", ks[j], nc);
        size_t bad = 0;
        for (size_t i = 0; i < nc && i < want; i++) bad += c[i].id != ref[i].id;
        CHECKF(bad == 0, "k %d: %zu positions differ from the full sort", ks[j], bad);
        mf_sampler_free(s);
    }
    free(l);
    free(ref);
}

static void test_top_p(void) {
    float l[5];
    logits_p5(l);
    mf_sampler_params p = one_stage(MF_STAGE_TOP_P);
    p.top_p = 0.8f; /* 0.5 + 0.2 = 0.7 < 0.8, + 0.15 = 0.85: the crossing token stays */
    mf_sampler *s = make(&p, 5);
    expect(s, l, (int32_t[]){3, 0, 4}, (double[]){0.5, 0.2, 0.15}, 3, "top_p 0.8");
    mf_sampler_free(s);
    p.top_p = 0.4f;
    s = make(&p, 5);
    expect(s, l, (int32_t[]){3}, (double[]){1}, 1, "top_p 0.4");
    mf_sampler_free(s);
    p.min_keep = 4;
    s = make(&p, 5);
    expect(s, l, (int32_t[]){3, 0, 4, 1}, (double[]){0.5, 0.2, 0.15, 0.1}, 4, "top_p 0.4 min_keep 4");
    mf_sampler_free(s);
    p.min_keep = 0;
    p.top_p = 1.0f;
    s = make(&p, 5);
    expect(s, l, (int32_t[]){0, 1, 2, 3, 4}, P5, 5, "top_p 1 (off)");
    mf_sampler_free(s);
}

/* top-p over a whole vocabulary: on a flat distribution (scale 0.5) it keeps thousands of tokens, on
 * a steep one (scale 12) a few dozen; both must be the top of the full sort. */
static void test_top_p_wide(double scale) {
    const int32_t n = 10000;
    float *l = malloc(n * sizeof *l);
    mf_sampler_candidate *ref = malloc(n * sizeof *ref);
    mf_rng r;
    mf_rng_seed(&r, 9);
    double sum = 0;
    for (int32_t i = 0; i < n; i++) {
        l[i] = (float)(mf_rng_uniform(&r) * scale);
        ref[i] = (mf_sampler_candidate){i, l[i], 0};
        sum += exp(l[i]);
    }
    qsort(ref, n, sizeof *ref, cmp_desc);
    size_t want = 0;
    double cum = 0;
    while (want < (size_t)n && cum < 0.9 * sum) cum += exp(ref[want++].logit);
    mf_sampler_params p = one_stage(MF_STAGE_TOP_P);
    p.top_p = 0.9f;
    mf_sampler *s = make(&p, n);
    const mf_sampler_candidate *c;
    size_t nc;
    CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK);
    CHECKF(nc + 1 >= want && nc <= want + 1, "top_p wide: %zu survivors, reference %zu", nc, want);
    /* A large kept set is left unsorted: compare it as a set. */
    mf_sampler_candidate *got = malloc(nc * sizeof *got);
    memcpy(got, c, nc * sizeof *got);
    qsort(got, nc, sizeof *got, cmp_desc);
    size_t bad = 0;
    for (size_t i = 0; i < nc && i < want; i++) bad += got[i].id != ref[i].id;
    CHECKF(bad == 0, "top_p wide: %zu positions differ from the full sort", bad);
    free(got);
    mf_sampler_free(s);
    free(l);
    free(ref);
}

static void test_min_p(void) {
    float l[5];
    logits_p5(l);
    mf_sampler_params p = one_stage(MF_STAGE_MIN_P);
    p.min_p = 0.25f; /* p >= 0.125: 0.5, 0.2, 0.15 in id order */
    mf_sampler *s = make(&p, 5);
    expect(s, l, (int32_t[]){0, 3, 4}, (double[]){0.2, 0.5, 0.15}, 3, "min_p 0.25");
    mf_sampler_free(s);
    p.min_keep = 4; /* too few pass: the 4 best, sorted */
    s = make(&p, 5);
    expect(s, l, (int32_t[]){3, 0, 4, 1}, (double[]){0.5, 0.2, 0.15, 0.1}, 4, "min_p 0.25 min_keep 4");
    mf_sampler_free(s);
    /* After top-k (sparse and sorted) the same rule applies. */
    p = mf_sampler_default_params();
    p.seed = 1;
    p.stages[0] = MF_STAGE_TOP_K, p.stages[1] = MF_STAGE_MIN_P, p.n_stages = 2;
    p.top_k = 4, p.min_p = 0.35f; /* p >= 0.175: 0.5, 0.2 */
    s = make(&p, 5);
    expect(s, l, (int32_t[]){3, 0}, (double[]){0.5, 0.2}, 2, "top_k then min_p");
    mf_sampler_free(s);
}

static void test_typical(void) {
    /* H = 1.3331 nats; |-ln p - H| = 0.640 (0.5), 0.276 (0.2), 0.564 (0.15), 0.969 (0.1), 1.663 (0.05).
     * In that order 0.2 + 0.15 + 0.5 = 0.85 is the first sum above 0.5. */
    float l[5];
    logits_p5(l);
    mf_sampler_params p = one_stage(MF_STAGE_TYPICAL);
    p.typ_p = 0.5f;
    mf_sampler *s = make(&p, 5);
    expect(s, l, (int32_t[]){0, 4, 3}, (double[]){0.2, 0.15, 0.5}, 3, "typical 0.5");
    mf_sampler_free(s);
    p.typ_p = 0.1f;
    s = make(&p, 5);
    expect(s, l, (int32_t[]){0}, (double[]){1}, 1, "typical 0.1");
    mf_sampler_free(s);
}

static void test_top_n_sigma(void) {
    float l[4] = {0, 0, 0, 10}; /* mean 2.5, std 4.33 */
    mf_sampler_params p = one_stage(MF_STAGE_TOP_N_SIGMA);
    p.top_n_sigma = 1.0f; /* keep logits >= 5.67 */
    mf_sampler *s = make(&p, 4);
    expect(s, l, (int32_t[]){3}, (double[]){1}, 1, "top_n_sigma 1");
    mf_sampler_free(s);
    p.top_n_sigma = 3.0f; /* >= -2.99: all */
    s = make(&p, 4);
    expect(s, l, (int32_t[]){0, 1, 2, 3}, (double[]){1, 1, 1, exp(10.0)}, 4, "top_n_sigma 3");
    mf_sampler_free(s);
}

static void test_xtc(void) {
    float l[4] = {(float)log(0.4), (float)log(0.3), (float)log(0.2), (float)log(0.1)};
    mf_sampler_params p = one_stage(MF_STAGE_XTC);
    p.xtc_probability = 1.0f;
    p.xtc_threshold = 0.15f; /* 0.4, 0.3, 0.2 pass: drop all but the least likely of them */
    mf_sampler *s = make(&p, 4);
    expect(s, l, (int32_t[]){2, 3}, (double[]){0.2, 0.1}, 2, "xtc 0.15");
    mf_sampler_free(s);
    p.xtc_threshold = 0.35f; /* only one passes: nothing to exclude */
    s = make(&p, 4);
    expect(s, l, (int32_t[]){0, 1, 2, 3}, (double[]){0.4, 0.3, 0.2, 0.1}, 4, "xtc 0.35");
    mf_sampler_free(s);
    p.xtc_threshold = 0.15f, p.min_keep = 3; /* would leave 2 < min_keep */
    s = make(&p, 4);
    expect(s, l, (int32_t[]){0, 1, 2, 3}, (double[]){0.4, 0.3, 0.2, 0.1}, 4, "xtc min_keep");
    mf_sampler_free(s);
    p.min_keep = 0, p.xtc_probability = 0.5f; /* about half the time */
    s = make(&p, 4);
    int cut = 0;
    for (int i = 0; i < 1000; i++) {
        const mf_sampler_candidate *c;
        size_t nc;
        CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK);
        cut += nc == 2;
    }
    CHECKF(cut > 420 && cut < 580, "xtc probability 0.5 applied %d times in 1000", cut);
    mf_sampler_free(s);
}

static void test_temperature(void) {
    float l[3] = {1, 2, 3};
    mf_sampler_params p = one_stage(MF_STAGE_TEMPERATURE);
    p.temp = 0.5f;
    mf_sampler *s = make(&p, 3);
    expect(s, l, (int32_t[]){0, 1, 2}, (double[]){exp(2.0), exp(4.0), exp(6.0)}, 3, "temp 0.5");
    mf_sampler_free(s);
    float t[3] = {3, 1, 3};
    p.temp = 0.0f; /* greedy: the first maximum */
    s = make(&p, 3);
    expect(s, t, (int32_t[]){0}, (double[]){1}, 1, "temp 0");
    int32_t tok = -1;
    CHECK(mf_sampler_sample(s, t, &tok) == MF_OK && tok == 0);
    mf_sampler_free(s);
    p.temp = -1.0f;
    s = make(&p, 3);
    CHECK(mf_sampler_sample(s, l, &tok) == MF_OK && tok == 2);
    mf_sampler_free(s);
}

static void test_dynatemp(void) {
    /* p = 0.1, 0.2, 0.3, 0.4: H / ln 4 = 0.9233, so t = 0.5 + (1.5 - 0.5) * 0.9233^2 with exponent 2 */
    float l[4] = {(float)log(1.0), (float)log(2.0), (float)log(3.0), (float)log(4.0)};
    double h = 0;
    for (int i = 1; i <= 4; i++) h -= i / 10.0 * log(i / 10.0);
    double t = 0.5 + 1.0 * pow(h / log(4.0), 2.0);
    mf_sampler_params p = one_stage(MF_STAGE_TEMPERATURE);
    p.temp = 1.0f, p.dynatemp_range = 0.5f, p.dynatemp_exponent = 2.0f;
    mf_sampler *s = make(&p, 4);
    expect(s, l, (int32_t[]){0, 1, 2, 3}, (double[]){1, pow(2, 1 / t), pow(3, 1 / t), pow(4, 1 / t)}, 4, "dynatemp");
    mf_sampler_free(s);
    /* range wider than temp: the low end is 0 and a one-hot distribution (H = 0) becomes greedy */
    float one[4] = {0, 200, 0, 0}; /* exp(-200) underflows: H = 0 exactly */
    p.temp = 0.3f, p.dynatemp_range = 1.0f, p.dynatemp_exponent = 1.0f;
    s = make(&p, 4);
    expect(s, one, (int32_t[]){1}, (double[]){1}, 1, "dynatemp greedy end");
    mf_sampler_free(s);
}

static const char *vocab4_piece(void *user, int32_t id, size_t *len) {
    static const char *t[4] = {"a", "b", "Hello", "c"};
    (void)user;
    *len = strlen(t[id]);
    return t[id];
}

static void test_logit_bias(void) {
    float l[4] = {0, 0, 0, 0};
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 3;
    p.n_stages = 0;
    mf_logit_bias b[2] = {{.token = 2, .bias = (float)log(3.0)}, {.token = 0, .bias = -INFINITY}};
    p.logit_bias = b, p.n_logit_bias = 2;
    mf_sampler *s = make(&p, 4);
    expect(s, l, (int32_t[]){1, 2, 3}, (double[]){1, 3, 1}, 3, "logit bias by id");
    mf_sampler_free(s);

    mf_logit_bias bt = {.text = "Hello", .bias = -INFINITY};
    p.logit_bias = &bt, p.n_logit_bias = 1;
    mf_sampler_vocab v = {.n_vocab = 4, .n_ctx = 16, .piece = vocab4_piece};
    CHECK(mf_sampler_create(&p, &v, &s) == MF_OK);
    expect(s, l, (int32_t[]){0, 1, 3}, (double[]){1, 1, 1}, 3, "logit bias by text");
    mf_sampler_free(s);
    bt.text = "Goodbye";
    CHECK(mf_sampler_create(&p, &v, &s) == MF_ERR_NOT_FOUND && s == NULL);
    CHECK(strstr(mf_last_error(), "Goodbye") != NULL);
    mf_logit_bias bad = {.token = 4, .bias = 1};
    p.logit_bias = &bad;
    CHECK(mf_sampler_create(&p, &v, &s) == MF_ERR_RANGE && s == NULL);

    /* ignore_eos bans the end-of-generation tokens; all banned is an error, not a crash. */
    int32_t eog[2] = {1, 3};
    mf_sampler_vocab ve = {.n_vocab = 4, .n_ctx = 16, .eog = eog, .n_eog = 2};
    p.n_logit_bias = 0, p.ignore_eos = true;
    CHECK(mf_sampler_create(&p, &ve, &s) == MF_OK);
    expect(s, l, (int32_t[]){0, 2}, (double[]){1, 1}, 2, "ignore_eos");
    float all_banned[4] = {-INFINITY, 0, NAN, 0};
    int32_t tok;
    CHECK(mf_sampler_sample(s, all_banned, &tok) == MF_ERR_RANGE);
    mf_sampler_free(s);
}

static void test_mirostat(void) {
    /* v2: mu starts at 2 * tau = 3.2 bits, so tokens with -log2 p <= 3.2 stay: p 0.5, 0.25, 0.125. */
    float l[5] = {(float)log(0.5), (float)log(0.25), (float)log(0.125), (float)log(0.0625), (float)log(0.0625)};
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 11, p.mirostat = 2, p.mirostat_tau = 1.6f, p.mirostat_eta = 2.0f, p.temp = 1.0f;
    mf_sampler *s = make(&p, 5);
    expect(s, l, (int32_t[]){0, 1, 2}, (double[]){0.5, 0.25, 0.125}, 3, "mirostat v2");
    /* After drawing token t (p renormalized over 0.875), mu -= eta * (-log2 p - tau):
     * t=0: mu 4.79 keeps all 5; t=1: mu 2.79 keeps 2; t=2: mu 0.79 keeps only the best. */
    int32_t tok;
    CHECK(mf_sampler_sample(s, l, &tok) == MF_OK);
    const mf_sampler_candidate *c;
    size_t nc;
    CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK);
    size_t want = tok == 0 ? 5 : tok == 1 ? 2 : 1;
    CHECKF(nc == want, "mirostat v2 after token %d: %zu survivors, expected %zu", tok, nc, want);
    mf_sampler_reset(s); /* mu back to 3.2 */
    CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK && nc == 3);
    mf_sampler_free(s);

    /* v1 on a Zipf distribution p_i ~ 1/(i+1)^2: s_hat = 2 exactly, and with mu = 10, N = 1000,
     * k = (2^10 / (1 - 1/1000))^(1/2) = 32.02, so the 32 most likely tokens stay. */
    enum { N = 1000 };
    static float z[N];
    for (int i = 0; i < N; i++) z[(i * 7) % N] = (float)(-2.0 * log(i + 1.0)); /* scattered ids */
    p.mirostat = 1, p.mirostat_tau = 5.0f, p.mirostat_eta = 0.1f;
    s = make(&p, N);
    CHECK(mf_sampler_dist(s, z, &c, &nc) == MF_OK);
    CHECKF(nc == 32, "mirostat v1 kept %zu tokens, expected 32", nc);
    bool order = true;
    for (size_t i = 0; i < nc && i < 32; i++) order &= c[i].id == (int32_t)((i * 7) % N);
    CHECK(order);
    mf_sampler_free(s);
}

/* The default chain (top-k 40, top-p 0.95, min-p 0.05, temperature 0.8) on a Qwen-sized vocabulary,
 * against the same rules applied after a full sort. */
static void test_default_chain_reference(void) {
    const int32_t n = 151936;
    float *l = malloc(n * sizeof *l);
    mf_sampler_candidate *ref = malloc(n * sizeof *ref);
    mf_rng r;
    mf_rng_seed(&r, 42);
    for (int32_t i = 0; i < n; i++) {
        /* Sum of uniforms ~ normal, scaled like real logits, with a few strong tokens. */
        double g = mf_rng_uniform(&r) + mf_rng_uniform(&r) + mf_rng_uniform(&r) - 1.5;
        l[i] = (float)(g * 3.0 + (i % 9973 == 0 ? 8.0 : 0.0));
        ref[i] = (mf_sampler_candidate){i, l[i], 0};
    }
    qsort(ref, n, sizeof *ref, cmp_desc);
    size_t k = 40; /* top-k */
    double z = 0, cum = 0;
    for (size_t i = 0; i < k; i++) z += exp((double)ref[i].logit - ref[0].logit);
    size_t np = k; /* top-p 0.95 */
    for (size_t i = 0; i < k; i++) {
        cum += exp((double)ref[i].logit - ref[0].logit) / z;
        if (cum >= 0.95) {
            np = i + 1;
            break;
        }
    }
    size_t nm = 0; /* min-p 0.05 */
    while (nm < np && ref[nm].logit >= ref[0].logit + logf(0.05f)) nm++;
    double zt = 0;
    for (size_t i = 0; i < nm; i++) zt += exp(((double)ref[i].logit - ref[0].logit) / 0.8);

    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 5;
    mf_sampler *s = make(&p, n);
    const mf_sampler_candidate *c;
    size_t nc;
    CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK);
    CHECKF(nc == nm, "default chain: %zu survivors, reference %zu", nc, nm);
    for (size_t i = 0; i < nc && i < nm; i++) {
        CHECKF(c[i].id == ref[i].id, "default chain survivor %zu: %d vs %d", i, c[i].id, ref[i].id);
        double want = exp(((double)ref[i].logit - ref[0].logit) / 0.8) / zt;
        CHECK_NEAR(c[i].p, want, 1e-5);
    }
    CHECKF(nm > 3, "the reference keeps %zu tokens; the test needs several", nm);
    mf_sampler_free(s);
    free(l);
    free(ref);
}

/* Wilson-Hilferty approximation of the chi-square quantile at p = 0.999 for dof degrees. */
static double chi2_crit(int dof) {
    double a = 2.0 / (9.0 * dof);
    double x = 1.0 - a + 3.090 * sqrt(a);
    return dof * x * x * x;
}

static void chi_square(mf_sampler *s, const float *l, int32_t n_vocab, const char *what) {
    const mf_sampler_candidate *c;
    size_t nc;
    CHECK(mf_sampler_dist(s, l, &c, &nc) == MF_OK);
    double *pid = calloc((size_t)n_vocab, sizeof *pid);
    long *cnt = calloc((size_t)n_vocab, sizeof *cnt);
    for (size_t i = 0; i < nc; i++) pid[c[i].id] = c[i].p;
    const int draws = 100000;
    long outside = 0;
    for (int d = 0; d < draws; d++) {
        int32_t t = -1;
        if (mf_sampler_sample(s, l, &t) != MF_OK || t < 0 || t >= n_vocab) {
            outside++;
            continue;
        }
        if (pid[t] == 0) outside++;
        cnt[t]++;
    }
    CHECKF(outside == 0, "%s: %ld draws outside the distribution", what, outside);
    /* Bins with expected count >= 5 on their own; the rest pooled into one bin. */
    double chi = 0, pool_e = 0, pool_o = 0;
    int bins = 0;
    for (int32_t t = 0; t < n_vocab; t++) {
        double e = pid[t] * draws;
        if (e == 0) continue;
        if (e < 5) {
            pool_e += e, pool_o += (double)cnt[t];
            continue;
        }
        chi += (cnt[t] - e) * (cnt[t] - e) / e;
        bins++;
    }
    if (pool_e > 0) chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e, bins++;
    double crit = chi2_crit(bins - 1);
    CHECKF(bins >= 5 && chi < crit, "%s: chi-square %.1f over %d bins, critical %.1f", what, chi, bins, crit);
    printf("%s: chi-square %.1f, %d bins, critical value (p=0.001) %.1f\n", what, chi, bins, crit);
    free(pid);
    free(cnt);
}

static void test_draw_distribution(void) {
    enum { N = 2000 };
    static float l[N];
    mf_rng r;
    mf_rng_seed(&r, 99);
    for (int i = 0; i < N; i++) l[i] = (float)(mf_rng_uniform(&r) * 6.0);
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 2024, p.temp = 1.5f, p.min_p = 0.02f; /* a wide tail inside the top 40 */
    mf_sampler *s = make(&p, N);
    chi_square(s, l, N, "default chain draw");
    mf_sampler_free(s);
    /* No truncation: the draw runs over the dense logits. */
    enum { M = 60 };
    p = one_stage(MF_STAGE_TEMPERATURE);
    p.temp = 2.0f;
    s = make(&p, M);
    chi_square(s, l, M, "dense draw");
    mf_sampler_free(s);
}

static void draw_seq(mf_sampler *s, const float *l, int32_t *out, int n) {
    for (int i = 0; i < n; i++) {
        CHECK(mf_sampler_sample(s, l, &out[i]) == MF_OK);
        CHECK(mf_sampler_accept(s, out[i]) == MF_OK);
    }
}

static void test_seed(void) {
    enum { N = 500, T = 200 };
    static float l[N];
    for (int i = 0; i < N; i++) l[i] = (float)sin(i * 0.37) * 3.0f;
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 777, p.temp = 1.2f, p.penalty_repeat = 1.3f, p.xtc_probability = 0.3f, p.top_p = 0.99f;
    int32_t a[T], b[T], c[T], d[T];
    mf_sampler *s1 = make(&p, N), *s2 = make(&p, N);
    draw_seq(s1, l, a, T);
    draw_seq(s2, l, b, T);
    CHECK(memcmp(a, b, sizeof a) == 0);
    mf_sampler_reset(s1);
    draw_seq(s1, l, c, T);
    CHECK(memcmp(a, c, sizeof a) == 0);
    /* dist + draw is sample: the same tokens from the same seed. */
    mf_sampler *s5 = make(&p, N);
    int32_t e[T];
    for (int i = 0; i < T; i++) {
        const mf_sampler_candidate *cd;
        size_t nc;
        CHECK(mf_sampler_dist(s5, l, &cd, &nc) == MF_OK && mf_sampler_draw(s5, &e[i]) == MF_OK);
        CHECK(mf_sampler_accept(s5, e[i]) == MF_OK);
    }
    CHECK(memcmp(a, e, sizeof a) == 0);
    CHECK(mf_sampler_draw(s5, &e[0]) == MF_ERR_ARG); /* nothing pending */
    mf_sampler_free(s5);
    p.seed = 778;
    mf_sampler *s3 = make(&p, N);
    draw_seq(s3, l, d, T);
    CHECK(memcmp(a, d, sizeof a) != 0);
    CHECK(mf_sampler_seed(s3) == 778);
    p.seed = MF_SAMPLER_SEED_RANDOM;
    mf_sampler *s4 = make(&p, N);
    CHECK(mf_sampler_seed(s4) != MF_SAMPLER_SEED_RANDOM);
    char desc[512];
    mf_sampler_describe(s1, desc, sizeof desc);
    CHECKF(strstr(desc, "top_k(40)") && strstr(desc, "dist(seed 777)"), "describe: %s", desc);
    mf_sampler_free(s1);
    mf_sampler_free(s2);
    mf_sampler_free(s3);
    mf_sampler_free(s4);
    /* The generator itself: splitmix64 of seed 0 is a published constant. */
    uint64_t x = 0;
    CHECK(mf_rng_splitmix64(&x) == 0xE220A8397B1DCDAFull);
}

/* The softmax's exponential against libm's double exp on [-87, 0]. */
static void test_exp(void) {
    double worst = 0;
    for (int i = 0; i <= 870000; i++) {
        float x = -(float)i * 1e-4f;
        double want = exp((double)x), got = mf_exp_neg(x);
        double rel = fabs(got - want) / want;
        if (rel > worst) worst = rel;
    }
    CHECKF(worst < 3e-7, "mf_exp_neg relative error %g", worst);
    printf("mf_exp_neg: worst relative error %.3g on [-87, 0]\n", worst);
    CHECK(mf_exp_neg(0.0f) == 1.0f);
    CHECK(mf_exp_neg(-INFINITY) == 0.0f && mf_exp_neg(-100.0f) == 0.0f && mf_exp_neg(NAN) == 0.0f);
    CHECK(mf_exp_neg(INFINITY) == 1.0f);
}

/* mf_logits_top against argmax and a softmax in double: random vocabularies of every length up to a
 * few blocks' tails, ties, NaN and infinite logits. */
static void test_logits_top(void) {
    mf_rng r;
    mf_rng_seed(&r, 99);
    enum { N = 151936 };
    float *l = malloc(N * sizeof *l);
    CHECK(l != NULL);
    if (!l) return;
    const int32_t sizes[] = {1, 2, 7, 8, 9, 4095, 4096, 4097, 49152, N};
    double worst = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const int32_t n = sizes[k];
        for (int rep = 0; rep < 3; rep++) {
            const float scale = rep == 0 ? 1.0f : rep == 1 ? 4.0f : 30.0f;
            for (int32_t i = 0; i < n; i++) l[i] = scale * (2.0f * (float)mf_rng_uniform(&r) - 1.0f);
            int32_t best = 0;
            for (int32_t i = 1; i < n; i++)
                if (l[i] > l[best]) best = i;
            double sum = 0;
            for (int32_t i = 0; i < n; i++) sum += exp((double)l[i] - l[best]);
            float p = -1;
            const int32_t got = mf_logits_top(l, n, &p);
            CHECKF(got == best, "n %d: top %d, expected %d", n, got, best);
            const double rel = fabs(p - 1.0 / sum) * sum;
            if (rel > worst) worst = rel;
            CHECK(mf_logits_top(l, n, NULL) == best);
        }
    }
    CHECKF(worst < 1e-5, "mf_logits_top: probability off by %g (relative)", worst);
    float p = -1;
    CHECK(mf_logits_top(l, 0, &p) == -1 && p == 0.0f);
    float t[6] = {1.0f, 3.0f, 3.0f, 2.0f, NAN, 3.0f}; /* ties: the lowest id, p over all three */
    CHECK(mf_logits_top(t, 6, &p) == 1);
    CHECKF(fabs(p - 1.0 / (3.0 + exp(-2.0) + exp(-1.0))) < 1e-6, "ties: p %g", p);
    float u[4] = {NAN, -INFINITY, INFINITY, INFINITY}; /* +inf: uniform over them */
    CHECK(mf_logits_top(u, 4, &p) == 2 && p == 0.5f);
    float v[3] = {NAN, -INFINITY, NAN}; /* nothing finite: p = 0 */
    CHECK(mf_logits_top(v, 3, &p) == 1 && p == 0.0f);
    float w[2] = {NAN, NAN};
    CHECK(mf_logits_top(w, 2, &p) == 0 && p == 0.0f);
    free(l);
}

/* Logits that are or become +inf (a tiny temperature) give the limit distribution, not NaN. */
static void test_overflow(void) {
    float l[4] = {0, INFINITY, 1, INFINITY};
    mf_sampler_params p = one_stage(MF_STAGE_TEMPERATURE);
    p.temp = 1.0f;
    mf_sampler *s = make(&p, 4);
    expect(s, l, (int32_t[]){0, 1, 2, 3}, (double[]){0, 1, 0, 1}, 4, "+inf logits");
    int32_t t;
    CHECK(mf_sampler_sample(s, l, &t) == MF_OK && (t == 1 || t == 3));
    mf_sampler_free(s);
    float big[3] = {1e30f, 0, -1e30f};
    p.temp = 1e-10f; /* 1e30 / 1e-10 overflows */
    s = make(&p, 3);
    CHECK(mf_sampler_sample(s, big, &t) == MF_OK && t == 0);
    mf_sampler_free(s);
    p = mf_sampler_default_params();
    p.seed = 1, p.temp = 1e-10f;
    s = make(&p, 3);
    CHECK(mf_sampler_sample(s, big, &t) == MF_OK && t == 0);
    mf_sampler_free(s);
}

static void test_params(void) {
    mf_sampler_params p = mf_sampler_default_params();
    CHECK(mf_sampler_params_check(&p) == MF_OK);
    CHECK(p.n_stages == 9 && p.stages[0] == MF_STAGE_PENALTIES && p.stages[8] == MF_STAGE_TEMPERATURE);
    p.top_p = 1.5f;
    CHECK(mf_sampler_params_check(&p) == MF_ERR_ARG && strstr(mf_last_error(), "top_p"));
    p = mf_sampler_default_params();
    p.mirostat = 3;
    CHECK(mf_sampler_params_check(&p) == MF_ERR_ARG && strstr(mf_last_error(), "mirostat"));
    p = mf_sampler_default_params();
    p.penalty_last_n = -2;
    CHECK(mf_sampler_params_check(&p) == MF_ERR_ARG);
    p = mf_sampler_default_params();
    p.penalty_repeat = 1.1f, p.penalty_last_n = -1;
    mf_sampler_vocab v = {.n_vocab = 10, .n_ctx = 0};
    mf_sampler *s = NULL;
    CHECK(mf_sampler_create(&p, &v, &s) == MF_ERR_ARG && s == NULL && strstr(mf_last_error(), "n_ctx"));

    p = mf_sampler_default_params();
    CHECK(mf_sampler_parse_stages(&p, "top_k;temp;nucleus,min-p") == MF_OK);
    CHECK(p.n_stages == 4 && p.stages[0] == MF_STAGE_TOP_K && p.stages[1] == MF_STAGE_TEMPERATURE &&
          p.stages[2] == MF_STAGE_TOP_P && p.stages[3] == MF_STAGE_MIN_P);
    CHECK(mf_sampler_parse_stages(&p, "top_k;bogus") == MF_ERR_ARG && strstr(mf_last_error(), "bogus"));
    CHECK(p.n_stages == 4);
    CHECK(mf_sampler_parse_stage_chars(&p, "edskypmxt") == MF_OK && p.n_stages == 9);
    CHECK(p.stages[2] == MF_STAGE_TOP_N_SIGMA && p.stages[4] == MF_STAGE_TYPICAL);
    CHECK(mf_sampler_parse_stage_chars(&p, "kq") == MF_ERR_ARG);
    for (int i = 0; i < MF_STAGE_COUNT; i++) {
        const char *name = mf_sampler_stage_name((mf_sampler_stage)i);
        CHECK(mf_sampler_stage_from_name(name, strlen(name)) == (mf_sampler_stage)i);
        CHECK(mf_sampler_stage_from_char(mf_sampler_stage_char((mf_sampler_stage)i)) == (mf_sampler_stage)i);
    }
    int32_t tok;
    p = mf_sampler_default_params();
    p.seed = 1;
    s = make(&p, 3);
    CHECK(mf_sampler_accept(s, 3) == MF_ERR_RANGE);
    float l[3] = {NAN, NAN, NAN};
    CHECK(mf_sampler_sample(s, l, &tok) == MF_ERR_RANGE);
    mf_sampler_free(s);
    mf_sampler_free(NULL);
}

int main(void) {
    test_top_k();
    test_top_k_large();
    test_top_p();
    test_top_p_wide(0.5);
    test_top_p_wide(12.0);
    test_min_p();
    test_typical();
    test_top_n_sigma();
    test_xtc();
    test_temperature();
    test_dynatemp();
    test_logit_bias();
    test_mirostat();
    test_default_chain_reference();
    test_draw_distribution();
    test_seed();
    test_params();
    test_exp();
    test_logits_top();
    test_overflow();
    return test_summary("test_sample");
}
