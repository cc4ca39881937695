/* test_spec.c: speculative decoding (src/spec) against plain decoding on the fixture models: greedy
 * output byte for byte the same for every draft source and draft lengths 1..16 (and the caches left
 * the same), the context filling up mid-draft, an end-of-generation token and a stop string inside
 * the drafted tokens, the same seed giving the same text, the rejection rule reproducing the
 * target's distribution (chi-square), and the errors of a bad setup. */
#include "minfer.h"
#include "test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TEXT 16384

typedef struct {
    char text[MAX_TEXT];
    size_t len;
    mf_stop_reason reason;
    bool full;
    int32_t cells[1024], n_cells; /* the sequence's tokens in the cache afterwards */
    mf_spec_stats st;
} gen_out;

static const mf_model *target, *draft_q4, *draft_self, *draft_other;

static void put(gen_out *o, const char *t, size_t n) {
    if (o->len + n > MAX_TEXT) n = MAX_TEXT - o->len;
    memcpy(o->text + o->len, t, n);
    o->len += n;
}

/* One generation by tgt after prompt[0..np) in a fresh context of n_ctx cells, as `minfer run` does
 * it (kv_limit n_ctx - 1), or with untimed as a server drives speculation (mf_spec_draft, a decode of
 * its tokens, mf_spec_accept: depths from the cost model alone, no timing); plain when sp is NULL.
 * eog >= 0: that token ends the generation. */
static mf_status generate_by(const mf_model *tgt, bool untimed, const mf_spec_params *sp,
                             const mf_sampler_params *smp, const int32_t *prompt, int32_t np, int32_t n_ctx,
                             int64_t n_predict, const char *stop, int32_t eog, gen_out *o) {
    memset(o, 0, sizeof *o);
    mf_context_params cp = test_context_params();
    cp.n_ctx = n_ctx;
    cp.n_threads = 1;
    mf_context *c = NULL;
    mf_gen *g = NULL;
    mf_spec *s = NULL;
    mf_status st = mf_context_create(tgt, &cp, &c);
    if (st) return st;
    mf_sampler_vocab v = mf_sampler_vocab_from_tokenizer(mf_model_tokenizer(tgt), mf_model_n_vocab(tgt), n_ctx);
    if (eog >= 0) v.eog = &eog, v.n_eog = 1;
    const char *stops[1] = {stop};
    if ((st = mf_gen_create(smp, stops, stop ? 1 : 0, n_predict, &v, &g))) goto done;
    if ((st = mf_gen_prompt(g, prompt, (size_t)np))) goto done;
    if (sp && (st = mf_spec_create(tgt, c, 0, smp, sp, &s))) goto done;
    mf_batch b = {.n_tokens = np, .tokens = prompt};
    if ((st = mf_context_decode(c, &b))) goto done;
    if (s && (st = mf_spec_begin(s, g, n_ctx - 1))) goto done;
    const char *t;
    size_t n;
    int32_t pos = np;
    for (;;) {
        if (s && untimed) {
            const int32_t *toks;
            int32_t k;
            if ((st = mf_spec_draft(s, &toks, &k))) goto done;
            CHECKF(k <= sp->draft_max + 1, "a round of %d tokens past draft_max %d", k, sp->draft_max);
            int8_t want[MF_SPEC_MAX_DRAFT + 1];
            memset(want, 1, sizeof want);
            if (k > 0) {
                b = (mf_batch){.n_tokens = k, .tokens = toks, .logits = want};
                if ((st = mf_context_decode(c, &b))) goto done;
            }
            mf_spec_round r;
            if ((st = mf_spec_accept(s, k > 0 ? 0 : mf_context_n_outputs(c) - 1, &r))) goto done;
            put(o, r.text, r.len);
            o->reason = r.reason, o->full = r.context_full;
        } else if (s) {
            if ((st = mf_spec_next(s, &t, &n, &o->reason, &o->full))) goto done;
            put(o, t, n);
        } else {
            int32_t tok;
            if ((st = mf_gen_next(g, mf_context_logits(c, 0), &tok, &t, &n, &o->reason))) goto done;
            put(o, t, n);
            o->full = o->reason == MF_STOP_NONE && pos + 1 >= n_ctx;
            if (o->reason == MF_STOP_NONE && !o->full) {
                b = (mf_batch){.n_tokens = 1, .tokens = &tok};
                if ((st = mf_context_decode(c, &b))) goto done;
                pos++;
            }
        }
        if (o->reason != MF_STOP_NONE) break;
        if (o->full) {
            if ((st = mf_gen_finish(g, &t, &n))) goto done;
            put(o, t, n);
            break;
        }
    }
    o->n_cells = mf_context_seq_tokens(c, 0, o->cells, NULL, 1024);
    if (s) mf_spec_get_stats(s, &o->st);
done:
    mf_spec_free(s);
    mf_gen_free(g);
    mf_context_free(c);
    return st;
}

static mf_status generate(const mf_spec_params *sp, const mf_sampler_params *smp, const int32_t *prompt, int32_t np,
                          int32_t n_ctx, int64_t n_predict, const char *stop, int32_t eog, gen_out *o) {
    return generate_by(target, false, sp, smp, prompt, np, n_ctx, n_predict, stop, eog, o);
}

static bool same(const gen_out *a, const gen_out *b) {
    return a->len == b->len && !memcmp(a->text, b->text, a->len) && a->reason == b->reason && a->full == b->full &&
           a->n_cells == b->n_cells && !memcmp(a->cells, b->cells, (size_t)a->n_cells * sizeof *a->cells);
}

static mf_sampler_params greedy_params(void) {
    mf_sampler_params p = mf_sampler_default_params();
    p.temp = 0;
    p.seed = 1;
    return p;
}

static mf_spec_params fixed(const mf_model *draft, int32_t k) {
    mf_spec_params p = mf_spec_default_params();
    p.draft = draft;
    p.lookup = !draft;
    p.draft_min = p.draft_max = k;
    p.p_min = 0;
    p.ngram_min = 1; /* the random models' text seldom repeats two tokens */
    return p;
}

/* The prompt: the fixture's ids, then its first 20 again (text that repeats, for lookup). */
static int32_t prompt[128], n_prompt;

static void load_prompt(void) {
    FILE *f = fopen(fixture("models/prompt.ids"), "r");
    CHECK(f != NULL);
    if (!f) return;
    int v;
    while (n_prompt < 60 && fscanf(f, "%d", &v) == 1) prompt[n_prompt++] = v;
    fclose(f);
    for (int i = 0; i < 20 && n_prompt < 128; i++) prompt[n_prompt++] = prompt[i];
}

static void test_greedy_identical(void) {
    mf_sampler_params smp = greedy_params();
    gen_out *plain = malloc(sizeof *plain), *sp = malloc(sizeof *sp);
    CHECK(generate(NULL, &smp, prompt, n_prompt, 512, 32, NULL, -1, plain) == MF_OK);
    CHECK(plain->reason == MF_STOP_LENGTH && plain->len > 0);
    const struct {
        const char *name;
        const mf_model *draft;
    } src[] = {{"lookup", NULL}, {"Q4_0 draft", draft_q4}, {"self draft", draft_self}, {"qwen3 draft", draft_other}};
    for (size_t d = 0; d < sizeof src / sizeof *src; d++) {
        int64_t drafted = 0, accepted = 0;
        for (int32_t k = 1; k <= 16; k++) {
            mf_spec_params p = fixed(src[d].draft, k);
            mf_status st = generate(&p, &smp, prompt, n_prompt, 512, 32, NULL, -1, sp);
            CHECKF(st == MF_OK, "%s k=%d: %s", src[d].name, k, mf_last_error());
            CHECKF(same(plain, sp), "%s k=%d: output differs from plain decoding", src[d].name, k);
            drafted += sp->st.drafted, accepted += sp->st.accepted;
            if (src[d].draft == draft_self) /* all kept, but for drafts past the token limit */
                CHECKF(sp->st.accepted + k >= sp->st.drafted, "self draft k=%d: %lld of %lld kept", k,
                       (long long)sp->st.accepted, (long long)sp->st.drafted);
        }
        double rate = drafted ? (double)accepted / (double)drafted : 0;
        printf("  %s: %lld drafted, %lld accepted (%.1f %%)\n", src[d].name, (long long)drafted, (long long)accepted,
               100 * rate);
        CHECKF(drafted > 0, "%s drafted nothing", src[d].name);
        if (src[d].draft == draft_other) CHECKF(rate < 0.2, "an unrelated draft kept %.2f", rate);
        if (src[d].draft == draft_q4) CHECKF(accepted > 0, "the Q4_0 sibling never agreed");
    }
    /* adaptive depth gives the same text too */
    for (size_t d = 0; d < sizeof src / sizeof *src; d++) {
        mf_spec_params p = mf_spec_default_params();
        p.draft = src[d].draft, p.lookup = !src[d].draft, p.ngram_min = 1;
        CHECK(generate(&p, &smp, prompt, n_prompt, 512, 32, NULL, -1, sp) == MF_OK);
        CHECKF(same(plain, sp), "%s adaptive: output differs", src[d].name);
    }
    free(plain);
    free(sp);
}

/* The context fills up while tokens are drafted; an end-of-generation token and a stop string fall
 * inside a draft. */
static void test_edges(void) {
    mf_sampler_params smp = greedy_params();
    gen_out *plain = malloc(sizeof *plain), *sp = malloc(sizeof *sp), *ref = malloc(sizeof *ref);
    const int32_t n_ctx = n_prompt + 21;
    CHECK(generate(NULL, &smp, prompt, n_prompt, n_ctx, -1, NULL, -1, plain) == MF_OK);
    CHECK(plain->full && plain->n_cells == n_ctx - 1);
    for (int32_t k = 1; k <= 16; k += 3) {
        mf_spec_params p = fixed(draft_self, k);
        CHECK(generate(&p, &smp, prompt, n_prompt, n_ctx, -1, NULL, -1, sp) == MF_OK);
        CHECKF(same(plain, sp), "context full, self draft k=%d differs", k);
        p = fixed(NULL, k);
        CHECK(generate(&p, &smp, prompt, n_prompt, n_ctx, -1, NULL, -1, sp) == MF_OK);
        CHECKF(same(plain, sp), "context full, lookup k=%d differs", k);
    }
    /* the 10th generated token ends the generation: it is the cache's 10th token after the prompt */
    CHECK(generate(NULL, &smp, prompt, n_prompt, 512, 40, NULL, -1, ref) == MF_OK);
    const int32_t eog = ref->cells[n_prompt + 9];
    CHECK(generate(NULL, &smp, prompt, n_prompt, 512, 40, NULL, eog, plain) == MF_OK);
    CHECK(plain->reason == MF_STOP_EOG && plain->n_cells < ref->n_cells);
    for (int32_t k = 1; k <= 16; k += 5) {
        mf_spec_params p = fixed(draft_self, k);
        CHECK(generate(&p, &smp, prompt, n_prompt, 512, 40, NULL, eog, sp) == MF_OK);
        CHECKF(same(plain, sp), "end of generation inside the draft, k=%d differs", k);
    }
    /* nothing is drafted past the end of generation or the token limit: the file as its own draft
     * keeps every token it drafts, so a drafted token that went unused would show here */
    {
        mf_spec_params p = fixed(draft_self, 16);
        CHECK(generate(&p, &smp, prompt, n_prompt, 512, 40, NULL, eog, sp) == MF_OK);
        CHECKF(sp->reason == MF_STOP_EOG && sp->st.drafted == sp->st.accepted,
               "end of generation: %lld drafted, %lld kept", (long long)sp->st.drafted, (long long)sp->st.accepted);
        CHECK(generate(&p, &smp, prompt, n_prompt, 512, 23, NULL, -1, sp) == MF_OK);
        CHECKF(sp->reason == MF_STOP_LENGTH && sp->st.generated == 23 && sp->st.drafted == sp->st.accepted,
               "limit of 23: %lld generated, %lld drafted, %lld kept", (long long)sp->st.generated,
               (long long)sp->st.drafted, (long long)sp->st.accepted);
    }
    /* a stop string: a piece of the text that the 12th token starts */
    char stop[8] = {0};
    size_t at = ref->len / 2;
    memcpy(stop, ref->text + at, 3);
    if (strlen(stop) == 3) {
        CHECK(generate(NULL, &smp, prompt, n_prompt, 512, 40, stop, -1, plain) == MF_OK);
        CHECK(plain->reason == MF_STOP_STRING);
        for (int32_t k = 1; k <= 16; k += 5) {
            mf_spec_params p = fixed(draft_self, k);
            CHECK(generate(&p, &smp, prompt, n_prompt, 512, 40, stop, -1, sp) == MF_OK);
            CHECKF(same(plain, sp), "stop string inside the draft, k=%d differs", k);
            p = fixed(draft_q4, k);
            CHECK(generate(&p, &smp, prompt, n_prompt, 512, 40, stop, -1, sp) == MF_OK);
            CHECKF(same(plain, sp), "stop string, Q4_0 draft k=%d differs", k);
        }
    }
    /* lookup that backs off (verifying a token costs as much as a pass) probes again after 16 plain
     * rounds: never deeper than draft_max, here 1 (it probed at 2, past the draft buffer) */
    {
        mf_spec_params p = mf_spec_default_params();
        p.lookup = true, p.draft_min = 0, p.draft_max = 1, p.ngram_min = 1, p.verify_cost = 1.0f;
        CHECK(generate(NULL, &smp, prompt, n_prompt, 512, 100, NULL, -1, plain) == MF_OK);
        CHECK(generate_by(target, true, &p, &smp, prompt, n_prompt, 512, 100, NULL, -1, sp) == MF_OK);
        CHECKF(same(plain, sp), "lookup, draft_max 1, backing off: differs");
    }
    free(plain);
    free(sp);
    free(ref);
}

static void test_same_seed(void) {
    mf_sampler_params smp = mf_sampler_default_params();
    smp.seed = 42;
    smp.temp = 1.0f;
    gen_out *a = malloc(sizeof *a), *b = malloc(sizeof *b);
    const mf_model *drafts[] = {NULL, draft_q4};
    for (int d = 0; d < 2; d++) {
        mf_spec_params p = mf_spec_default_params();
        p.draft = drafts[d], p.lookup = !drafts[d], p.p_min = 0, p.ngram_min = 1;
        /* this draft reads over half its target's bytes: adaptive depth never drafts with it (nor
         * probes), so its depth is fixed here; lookup's stays adaptive */
        if (drafts[d]) p.draft_min = p.draft_max = 4;
        CHECK(generate(&p, &smp, prompt, n_prompt, 512, 40, NULL, -1, a) == MF_OK);
        CHECK(generate(&p, &smp, prompt, n_prompt, 512, 40, NULL, -1, b) == MF_OK);
        CHECKF(same(a, b), "same seed, different text (%s)", drafts[d] ? "draft" : "lookup");
        CHECK(a->st.drafted > 0);
    }
    free(a);
    free(b);
}

/* The rejection rule: the first two generated tokens (t1, t2) must be drawn from the target's
 * p(t1) p(t2 | t1), where t2 goes through verification (draft length 1): a chi-square against the
 * exact joint from the target's own sampler chain. */
static void test_distribution(const mf_model *draft, const char *name) {
    enum { K = 4, RUNS = 1200 };
    mf_sampler_params smp = mf_sampler_default_params();
    smp.temp = 1.0f, smp.top_k = K, smp.top_p = 1.0f, smp.min_p = 0.0f;
    mf_context_params cp = test_context_params();
    cp.n_ctx = 256;
    cp.n_threads = 1;
    mf_context *c = NULL;
    CHECK(mf_context_create(target, &cp, &c) == MF_OK);
    mf_sampler_vocab v = mf_sampler_vocab_from_tokenizer(mf_model_tokenizer(target), mf_model_n_vocab(target), 256);
    int32_t id1[K], id2[K][K];
    double pj[K][K];
    mf_sampler *smpl = NULL;
    CHECK(mf_sampler_create(&smp, &v, &smpl) == MF_OK);
    mf_batch b = {.n_tokens = n_prompt, .tokens = prompt};
    CHECK(mf_context_decode(c, &b) == MF_OK);
    const mf_sampler_candidate *cand;
    size_t nc;
    CHECK(mf_sampler_dist(smpl, mf_context_logits(c, 0), &cand, &nc) == MF_OK && nc == K);
    double p1[K];
    for (int i = 0; i < K; i++) id1[i] = cand[i].id, p1[i] = cand[i].p;
    for (int i = 0; i < K; i++) {
        b = (mf_batch){.n_tokens = 1, .tokens = &id1[i]};
        CHECK(mf_context_decode(c, &b) == MF_OK);
        CHECK(mf_sampler_dist(smpl, mf_context_logits(c, 0), &cand, &nc) == MF_OK && nc == K);
        for (int j = 0; j < K; j++) id2[i][j] = cand[j].id, pj[i][j] = p1[i] * cand[j].p;
        CHECK(mf_context_seq_rm(c, 0, n_prompt, -1) == MF_OK);
    }
    mf_sampler_free(smpl);
    long count[K][K] = {{0}}, outside = 0;
    mf_spec_params sp = fixed(draft, 1);
    mf_spec *s = NULL;
    CHECK(mf_spec_create(target, c, 0, &smp, &sp, &s) == MF_OK);
    for (int r = 0; r < RUNS && s; r++) {
        smp.seed = (uint32_t)(1000 + r);
        mf_gen *g = NULL;
        CHECK(mf_gen_create(&smp, NULL, 0, 3, &v, &g) == MF_OK);
        CHECK(mf_gen_prompt(g, prompt, (size_t)n_prompt) == MF_OK);
        /* the prompt's last token again, for its logits */
        CHECK(mf_context_seq_rm(c, 0, n_prompt - 1, -1) == MF_OK);
        b = (mf_batch){.n_tokens = 1, .tokens = &prompt[n_prompt - 1]};
        CHECK(mf_context_decode(c, &b) == MF_OK);
        CHECK(mf_spec_begin(s, g, 255) == MF_OK);
        const char *t;
        size_t n;
        mf_stop_reason reason = MF_STOP_NONE;
        bool full = false;
        while (reason == MF_STOP_NONE && !full)
            if (mf_spec_next(s, &t, &n, &reason, &full)) break;
        /* three tokens: the cache holds t1 and t2 after the prompt (t3 ended it) */
        int32_t seq[300];
        CHECK(mf_context_seq_tokens(c, 0, seq, NULL, 300) == n_prompt + 2);
        int hit = 0;
        for (int i = 0; i < K; i++)
            for (int j = 0; j < K; j++)
                if (seq[n_prompt] == id1[i] && seq[n_prompt + 1] == id2[i][j]) count[i][j]++, hit = 1;
        outside += !hit;
        mf_gen_free(g);
    }
    mf_spec_stats st = {0};
    if (s) mf_spec_get_stats(s, &st);
    /* chi-square, cells with fewer than 5 expected draws pooled */
    double chi = 0, pool_e = 0, pool_o = 0;
    int cells = 0;
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++) {
            double e = RUNS * pj[i][j];
            if (e < 5) {
                pool_e += e, pool_o += (double)count[i][j];
                continue;
            }
            chi += (count[i][j] - e) * (count[i][j] - e) / e, cells++;
        }
    if (pool_e > 0) chi += (pool_o - pool_e) * (pool_o - pool_e) / pool_e, cells++;
    /* 99.9 % quantiles of chi-square with 1 .. 15 degrees of freedom */
    static const double q999[16] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59,
                                    31.26, 32.91, 34.53, 36.12, 37.70};
    int df = cells - 1 < 1 ? 1 : cells - 1 > 15 ? 15 : cells - 1;
    printf("  rejection rule (%s): chi-square %.2f with %d degrees of freedom (limit %.2f), %lld drafted, %lld kept\n",
           name, chi, df, q999[df], (long long)st.drafted, (long long)st.accepted);
    CHECKF(outside == 0, "%s: %ld draws outside the target's support", name, outside);
    CHECKF(chi < q999[df], "%s: the distribution differs from the target's (chi-square %.2f)", name, chi);
    CHECKF(st.drafted > RUNS / 2 && st.accepted < st.drafted, "%s: %lld drafted, %lld kept: the rule was not exercised",
           name, (long long)st.drafted, (long long)st.accepted);
    mf_spec_free(s);
    mf_context_free(c);
}

static void test_errors(void) {
    mf_context_params cp = test_context_params();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    mf_context *c = NULL;
    CHECK(mf_context_create(target, &cp, &c) == MF_OK);
    mf_sampler_params smp = greedy_params();
    mf_spec *s = (mf_spec *)1;
    mf_spec_params p = mf_spec_default_params();
    CHECK(mf_spec_create(target, c, 0, &smp, &p, &s) == MF_ERR_ARG && s == NULL); /* no source */
    p.lookup = true, p.draft = draft_q4;
    CHECK(mf_spec_create(target, c, 0, &smp, &p, &s) == MF_ERR_ARG); /* two */
    p.draft = NULL, p.draft_max = 0;
    CHECK(mf_spec_create(target, c, 0, &smp, &p, &s) == MF_ERR_ARG);
    p.draft_max = 4, p.draft_min = 5;
    CHECK(mf_spec_create(target, c, 0, &smp, &p, &s) == MF_ERR_ARG);
    p.draft_min = 0;
    smp.mirostat = 2;
    CHECK(mf_spec_create(target, c, 0, &smp, &p, &s) == MF_ERR_UNSUPPORTED);
    CHECK(strstr(mf_last_error(), "Mirostat") != NULL);
    smp.mirostat = 0;
    CHECK(mf_spec_create(target, c, 0, &smp, &p, &s) == MF_OK);
    mf_sampler_vocab v = mf_sampler_vocab_from_tokenizer(mf_model_tokenizer(target), mf_model_n_vocab(target), 64);
    mf_gen *g = NULL;
    CHECK(mf_gen_create(&smp, NULL, 0, 4, &v, &g) == MF_OK);
    CHECK(mf_spec_begin(s, g, 64) == MF_ERR_ARG); /* nothing in the cache yet */
    mf_gen_free(g);
    mf_spec_free(s);
    mf_context_free(c);
}

/* A draft model's adaptive depth with the default parameters against the F32 file, as a server
 * drives it (the cost model alone, so the same depths run after run): its Q8_0 copy (a quarter of
 * its bytes; this random model's copy is never 75 % sure of a token, yet right three times in
 * four) drafts through most of the text; the unrelated qwen3 draft backs off within a few
 * rounds; the text is plain decoding's either way. */
static void test_adaptive_model(const mf_model *f32, const mf_model *q8) {
    gen_out *plain = malloc(sizeof *plain), *sp = malloc(sizeof *sp), *again = malloc(sizeof *again);
    const mf_sampler_params smp = greedy_params();
    CHECK(generate_by(f32, true, NULL, &smp, prompt, n_prompt, 512, 96, NULL, -1, plain) == MF_OK);
    const struct {
        const char *name;
        const mf_model *draft;
    } d[] = {{"Q8_0", q8}, {"Q4_0", draft_q4}, {"qwen3", draft_other}};
    for (size_t i = 0; i < sizeof d / sizeof *d; i++) {
        mf_spec_params p = mf_spec_default_params();
        p.draft = d[i].draft;
        CHECK(generate_by(f32, true, &p, &smp, prompt, n_prompt, 512, 96, NULL, -1, sp) == MF_OK);
        CHECK(generate_by(f32, true, &p, &smp, prompt, n_prompt, 512, 96, NULL, -1, again) == MF_OK);
        const mf_spec_stats *st = &sp->st;
        printf("  adaptive, %s draft for the F32 file: %lld drafted, %lld kept, %lld tokens in %lld passes\n",
               d[i].name, (long long)st->drafted, (long long)st->accepted, (long long)st->generated,
               (long long)st->rounds);
        CHECKF(same(plain, sp), "adaptive %s draft: output differs", d[i].name);
        CHECKF(st->drafted == again->st.drafted && st->accepted == again->st.accepted &&
                   st->rounds == again->st.rounds,
               "adaptive %s draft: other depths the second time", d[i].name);
        if (d[i].draft == q8)
            CHECKF(st->drafted >= st->generated / 2 && st->rounds <= st->generated / 2,
                   "the Q8_0 copy drafted %lld tokens, %lld passes for %lld", (long long)st->drafted,
                   (long long)st->rounds, (long long)st->generated);
        if (d[i].draft == draft_other)
            CHECKF(st->drafted <= 16, "the unrelated draft did not back off: %lld drafted", (long long)st->drafted);
    }
    free(plain);
    free(sp);
    free(again);
}

int main(void) {
    mf_model *m[4] = {0};
    const char *files[4] = {"models/mini-qwen2.Q8_0.gguf", "models/mini-qwen2.Q4_0.gguf", "models/mini-qwen2.Q8_0.gguf",
                            "models/mini-qwen3.Q8_0.gguf"};
    for (int i = 0; i < 4; i++) CHECKF(mf_model_load(fixture(files[i]), &m[i]) == MF_OK, "%s: %s", files[i], mf_last_error());
    if (m[0] && m[1] && m[2] && m[3]) {
        target = m[0], draft_q4 = m[1], draft_self = m[2], draft_other = m[3];
        load_prompt();
        test_greedy_identical();
        test_edges();
        test_same_seed();
        test_distribution(draft_q4, "Q4_0 draft");
        test_distribution(draft_other, "qwen3 draft");
        test_errors();
        mf_model *f32 = NULL;
        CHECK(mf_model_load(fixture("models/mini-qwen2.F32.gguf"), &f32) == MF_OK);
        if (f32) test_adaptive_model(f32, m[0]);
        mf_model_free(f32);
    }
    for (int i = 0; i < 4; i++) mf_model_free(m[i]);
    return test_summary("test_spec");
}
