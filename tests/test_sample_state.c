/* test_sample_state.c: what a saved conversation needs from the library beyond the KV cache: the
 * sampler's state image (a restored sampler draws exactly what the original draws next, with
 * penalties, DRY and Mirostat; every damaged or foreign image is refused and leaves the sampler as it
 * was), forgetting the history alone, mf_gen_restart, and the settings' JSON form read back to the
 * same settings. */
#include "test.h"

#include "minfer.h"


#define NV 48

static const char *piece(void *user, int32_t id, size_t *len) {
    static char buf[16];
    (void)user;
    snprintf(buf, sizeof buf, id % 7 == 0 ? ":" : "t%d", (int)id);
    *len = strlen(buf);
    return buf;
}

static mf_sampler *make(const mf_sampler_params *p) {
    mf_sampler_vocab v = {.n_vocab = NV, .n_ctx = 256, .piece = piece};
    mf_sampler *s = NULL;
    CHECKF(mf_sampler_create(p, &v, &s) == MF_OK, "create: %s", mf_last_error());
    return s;
}

/* Deterministic pseudo-random logits for step i. */
static void logits(int i, float *out) {
    uint32_t x = 2654435761u * (uint32_t)(i + 1);
    for (int t = 0; t < NV; t++) {
        x = x * 1664525u + 1013904223u;
        out[t] = (float)(x >> 8) / (float)(1u << 24) * 4.0f;
    }
}

/* Draw n tokens (accepting each) into out. */
static void draw(mf_sampler *s, int from, int n, int32_t *out) {
    float l[NV];
    for (int i = 0; i < n; i++) {
        logits(from + i, l);
        CHECK(mf_sampler_sample(s, l, &out[i]) == MF_OK);
        CHECK(mf_sampler_accept(s, out[i]) == MF_OK);
    }
}

static mf_sampler_params params_variant(int v) {
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 1234 + (uint32_t)v;
    p.temp = 1.3f;
    p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
    if (v == 0) p.penalty_repeat = 1.5f, p.penalty_freq = 0.2f, p.penalty_last_n = 16;
    if (v == 1) p.dry_multiplier = 0.8f, p.dry_penalty_last_n = 32, p.penalty_repeat = 1.2f, p.penalty_last_n = -1;
    if (v == 2) p.mirostat = 2, p.mirostat_tau = 3.0f;
    if (v == 3) p.xtc_probability = 0.5f, p.xtc_threshold = 0.05f;
    return p;
}

static void test_state_roundtrip(void) {
    for (int v = 0; v < 4; v++) {
        mf_sampler_params p = params_variant(v);
        mf_sampler *a = make(&p), *b = make(&p);
        int32_t hist[40], ta[30], tb[30];
        for (int i = 0; i < 40; i++) hist[i] = (i * 5) % NV;
        for (int i = 0; i < 40; i++) CHECK(mf_sampler_accept(a, hist[i]) == MF_OK);
        draw(a, 0, 10, ta);
        uint8_t img[4096];
        size_t n = 0;
        CHECK(mf_sampler_state_size(a) <= sizeof img);
        CHECK(mf_sampler_state_save(a, img, 10, &n) == MF_ERR_RANGE && n == 0);
        CHECKF(mf_sampler_state_save(a, img, sizeof img, &n) == MF_OK && n == mf_sampler_state_size(a), "%s",
               mf_last_error());
        /* b drew nothing and has another seed's stream: after the load it continues as a does */
        draw(b, 100, 3, tb);
        CHECKF(mf_sampler_state_load(b, img, n) == MF_OK, "variant %d: %s", v, mf_last_error());
        CHECK(mf_sampler_seed(b) == mf_sampler_seed(a));
        draw(a, 10, 30, ta);
        draw(b, 10, 30, tb);
        CHECKF(!memcmp(ta, tb, sizeof ta), "variant %d: the restored sampler draws differently", v);

        /* damaged images: refused, and b is unchanged (it still draws as a) */
        CHECK(mf_sampler_state_save(a, img, sizeof img, &n) == MF_OK);
        CHECK(mf_sampler_state_save(b, img + 2048, 2048, &n) == MF_OK);
        uint8_t bad[4096];
        struct {
            size_t off;
            uint8_t val;
            size_t size;
            mf_status want;
        } cases[] = {
            {0, 'X', n, MF_ERR_FORMAT},                  /* magic */
            {8, 9, n, MF_ERR_UNSUPPORTED},               /* newer version */
            {8, 0, n, MF_ERR_FORMAT},                    /* version 0 */
            {12, NV + 1, n, MF_ERR_ARG},                 /* another vocabulary */
            {20, 200, n, MF_ERR_FORMAT},                 /* counts disagree with the size */
            {0, 0, n - 1, MF_ERR_FORMAT},                /* truncated */
            {0, 0, 63, MF_ERR_FORMAT},                   /* shorter than the header */
            {31, 0x7f, n, MF_ERR_FORMAT},                /* mu: 0x7f8... is inf or NaN when the next byte is high */
            {64, 0xff, n, MF_ERR_FORMAT},                /* a window token past the vocabulary (if windows exist) */
        };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            memcpy(bad, img, n);
            bad[cases[c].off] = cases[c].val;
            if (cases[c].off == 31) bad[30] = 0xff;
            if (cases[c].off == 64 && n == 64) continue;
            if (cases[c].off == 64) bad[65] = bad[66] = bad[67] = 0;
            mf_status st = mf_sampler_state_load(b, bad, cases[c].size);
            CHECKF(st == cases[c].want, "variant %d case %zu: %s (%s)", v, c, mf_status_str(st), mf_last_error());
            CHECK(mf_last_error()[0] != 0);
        }
        memset(bad, 0, sizeof bad);
        memcpy(bad, img, 32);
        CHECK(mf_sampler_state_load(b, bad, 64 + 4 * ((size_t)bad[20] + bad[24])) == MF_ERR_FORMAT); /* rng all zero */
        draw(a, 40, 20, ta);
        draw(b, 40, 20, tb);
        CHECKF(!memcmp(ta, tb, 20 * sizeof *ta), "variant %d: a refused image changed the sampler", v);
        mf_sampler_free(a);
        mf_sampler_free(b);
    }
}

/* A smaller window takes the most recent tokens; a sampler without penalties ignores them. */
static void test_state_windows(void) {
    mf_sampler_params p = params_variant(0), small = p, none = p;
    small.penalty_last_n = 4;
    none.penalty_repeat = 1.0f, none.penalty_freq = 0.0f;
    mf_sampler *a = make(&p), *s = make(&small), *ref = make(&small), *n = make(&none);
    for (int i = 0; i < 12; i++) CHECK(mf_sampler_accept(a, i) == MF_OK);
    for (int i = 8; i < 12; i++) CHECK(mf_sampler_accept(ref, i) == MF_OK);
    uint8_t img[1024];
    size_t len;
    CHECK(mf_sampler_state_save(a, img, sizeof img, &len) == MF_OK && len == 64 + 4 * 12);
    CHECK(mf_sampler_state_load(s, img, len) == MF_OK);
    CHECK(mf_sampler_state_load(ref, img, 64) == MF_ERR_FORMAT); /* counts say 12 tokens */
    uint8_t img2[1024];
    size_t len2;
    CHECK(mf_sampler_state_save(s, img2, sizeof img2, &len2) == MF_OK && len2 == 64 + 16);
    CHECK(!memcmp(img2 + 64, img + 64 + 32, 16)); /* tokens 8..11 */
    CHECK(mf_sampler_state_load(n, img, len) == MF_OK && mf_sampler_state_size(n) == 64);
    mf_sampler_free(a), mf_sampler_free(s), mf_sampler_free(ref), mf_sampler_free(n);
}

static void test_clear_history_and_restart(void) {
    mf_sampler_params p = params_variant(0);
    mf_sampler *a = make(&p), *b = make(&p);
    int32_t ta[8], tb[8];
    for (int i = 0; i < 10; i++) CHECK(mf_sampler_accept(a, 3) == MF_OK);
    draw(b, 0, 1, tb); /* b's stream moves one draw ahead, then a catches up */
    draw(a, 0, 1, ta);
    mf_sampler_clear_history(a);
    mf_sampler_clear_history(b);
    CHECK(mf_sampler_state_size(a) == 64 && mf_sampler_state_size(b) == 64);
    draw(a, 1, 8, ta);
    draw(b, 1, 8, tb);
    CHECK(!memcmp(ta, tb, sizeof ta)); /* the same stream position and (empty) history */
    mf_sampler_free(a), mf_sampler_free(b);

    /* mf_gen_restart keeps the stream (the next reply differs from a fresh one); mf_gen_reset does not */
    mf_sampler_vocab v = {.n_vocab = NV, .n_ctx = 256, .piece = piece};
    mf_gen *g1, *g2;
    CHECK(mf_gen_create(&p, NULL, 0, 6, &v, &g1) == MF_OK && mf_gen_create(&p, NULL, 0, 6, &v, &g2) == MF_OK);
    int32_t r1[6], r2[6], r3[6];
    float l[NV];
    const char *text;
    size_t tl;
    mf_stop_reason why;
    for (int k = 0; k < 3; k++) {
        int32_t *out = k == 0 ? r1 : k == 1 ? r2 : r3;
        mf_gen *g = k == 2 ? g2 : g1;
        if (k == 1) mf_gen_restart(g1);
        why = MF_STOP_NONE;
        for (int i = 0; i < 6 && why == MF_STOP_NONE; i++) {
            logits(i, l);
            CHECK(mf_gen_next(g, l, &out[i], &text, &tl, &why) == MF_OK);
        }
        CHECK(why == MF_STOP_LENGTH && mf_gen_n_generated(g) == 6);
    }
    CHECK(memcmp(r1, r2, sizeof r1) != 0); /* the restarted generation drew new numbers */
    CHECK(!memcmp(r1, r3, sizeof r1));
    mf_gen_reset(g1);
    for (int i = 0; i < 6; i++) {
        logits(i, l);
        CHECK(mf_gen_next(g1, l, &r2[i], &text, &tl, &why) == MF_OK);
    }
    CHECK(!memcmp(r1, r2, sizeof r1));
    mf_gen_free(g1), mf_gen_free(g2);
}

static void test_settings_json(void) {
    mf_sample_settings s, back;
    mf_sample_settings_init(&s);
    s.params.temp = 0.7f, s.params.top_k = 17, s.params.top_p = 0.93f, s.params.min_p = 0.01f;
    s.params.typ_p = 0.9f, s.params.penalty_repeat = 1.1f, s.params.penalty_last_n = -1;
    s.params.dry_multiplier = 0.3f, s.params.dry_allowed_length = 3, s.params.mirostat_eta = 0.2f;
    s.params.xtc_probability = 0.1f, s.params.ignore_eos = true, s.params.seed = 99;
    s.n_predict = 77;
    CHECK(mf_sampler_parse_stages(&s.params, "top_k;temperature;min_p") == MF_OK);
    CHECK(mf_sample_settings_add_stop(&s, "User:") == MF_OK && mf_sample_settings_add_stop(&s, "\n\n") == MF_OK);
    CHECK(mf_sample_settings_add_bias(&s, 5, NULL, -INFINITY) == MF_OK);
    CHECK(mf_sample_settings_add_bias(&s, 0, "Hello", 2.5f) == MF_OK);
    CHECK(mf_sample_settings_add_breaker(&s, "###") == MF_OK);
    char *json = NULL;
    CHECKF(mf_sample_settings_to_json(&s, &json) == MF_OK, "%s", mf_last_error());
    mf_sample_settings_init(&back);
    CHECKF(json && mf_sample_settings_from_json(&back, json) == MF_OK, "%s: %s", json, mf_last_error());
    mf_sampler_params a = s.params, b = back.params;
    CHECK(b.n_logit_bias == 2 && b.logit_bias[0].token == 5 && b.logit_bias[0].bias == -INFINITY &&
          !b.logit_bias[0].text && !strcmp(b.logit_bias[1].text, "Hello") && b.logit_bias[1].bias == 2.5f);
    CHECK(b.n_dry_breakers == 1 && !strcmp(b.dry_breakers[0], "###"));
    CHECK(back.n_stop == 2 && !strcmp(back.stop[0], "User:") && !strcmp(back.stop[1], "\n\n"));
    CHECK(back.n_predict == 77 && back.seed_given);
    a.logit_bias = b.logit_bias = NULL, a.dry_breakers = b.dry_breakers = NULL;
    CHECK(!memcmp(&a, &b, sizeof a));
    free(json);
    /* defaults round-trip too (random seed, default breakers) */
    mf_sample_settings_free(&s), mf_sample_settings_free(&back);
    mf_sample_settings_init(&s);
    mf_sample_settings_init(&back);
    CHECK(mf_sample_settings_to_json(&s, &json) == MF_OK && mf_sample_settings_from_json(&back, json) == MF_OK);
    CHECK(back.params.dry_breakers == mf_sampler_default_breakers && back.params.seed == MF_SAMPLER_SEED_RANDOM);
    a = s.params, b = back.params;
    CHECK(!memcmp(&a, &b, sizeof a));
    free(json);
    s.params.temp = NAN;
    CHECK(mf_sample_settings_to_json(&s, &json) == MF_ERR_ARG && !json && strstr(mf_last_error(), "temperature"));
    mf_sample_settings_free(&s), mf_sample_settings_free(&back);
}

int main(void) {
    test_state_roundtrip();
    test_state_windows();
    test_clear_history_and_restart();
    test_settings_json();
    return test_summary("test_sample_state");
}
