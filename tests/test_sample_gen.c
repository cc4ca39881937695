/* test_sample_gen.c: the per-token generation loop (mf_gen) on a toy vocabulary with scripted
 * logits: each stop reason (end-of-generation token, stop string across tokens, token limit), the
 * text shown at each step, UTF-8 held across tokens, ignore_eos, reset, and errors. */
#include "sample/gen.h"
#include "test.h"

#include <math.h>
#include <string.h>

enum { NV = 8, EOS = 7 };
static const char *texts[NV] = {"Hel", "lo", " wor", "ld", "\xC3", "\xA9", "<", ""};

static const char *piece(void *user, int32_t id, size_t *len) {
    (void)user;
    *len = strlen(texts[id]);
    return texts[id];
}

/* Logits that make token t the greedy choice. */
static const float *want(int32_t t) {
    static float l[NV];
    for (int i = 0; i < NV; i++) l[i] = i == t ? 10.0f : 0.0f;
    return l;
}

/* Run a script of tokens greedily; collect the text; return the reason and the step it ended. */
static mf_stop_reason script(mf_gen *g, const int32_t *toks, int n, char *out, int *steps) {
    size_t used = 0;
    mf_stop_reason r = MF_STOP_NONE;
    *steps = 0;
    for (int i = 0; i < n && r == MF_STOP_NONE; i++) {
        int32_t t;
        const char *text;
        size_t len;
        CHECK(mf_gen_next(g, want(toks[i]), &t, &text, &len, &r) == MF_OK);
        CHECK(t == toks[i]);
        memcpy(out + used, text, len), used += len;
        (*steps)++;
    }
    out[used] = 0;
    return r;
}

static mf_gen *make(const char *const *stops, size_t n_stop, int64_t n_predict, bool ignore_eos) {
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 1, p.temp = 0, p.ignore_eos = ignore_eos;
    int32_t eog[1] = {EOS};
    mf_sampler_vocab v = {.n_vocab = NV, .n_ctx = 64, .piece = piece, .eog = eog, .n_eog = 1};
    mf_gen *g = NULL;
    CHECKF(mf_gen_create(&p, stops, n_stop, n_predict, &v, &g) == MF_OK, "%s", mf_last_error());
    return g;
}

int main(void) {
    char out[256];
    int steps;
    const char *stops[] = {"lo wo"};

    mf_gen *g = make(stops, 1, -1, false);
    /* "Hel" "lo" " wor": the stop string spans three tokens; "Hel" is shown, "lo" is held. */
    CHECK(script(g, (int32_t[]){0, 1, 2, 3}, 4, out, &steps) == MF_STOP_STRING && steps == 3);
    CHECK(strcmp(out, "Hel") == 0);
    int32_t t;
    const char *text;
    size_t len;
    mf_stop_reason r;
    CHECK(mf_gen_next(g, want(0), &t, &text, &len, &r) == MF_ERR_ARG); /* ended */
    CHECK(mf_gen_n_generated(g) == 3);

    mf_gen_reset(g);
    /* "Hel" "lo" "ld": not the stop string after all; then EOS flushes the held text. */
    CHECK(script(g, (int32_t[]){0, 1, 3, EOS}, 4, out, &steps) == MF_STOP_EOG && steps == 4);
    CHECK(strcmp(out, "Hellold") == 0);
    mf_gen_free(g);

    /* A limit of 3 tokens; the "\xC3" + "\xA9" character is held whole, then flushed at the end. */
    g = make(NULL, 0, 3, false);
    CHECK(script(g, (int32_t[]){0, 4, 5, 1}, 4, out, &steps) == MF_STOP_LENGTH && steps == 3);
    CHECK(strcmp(out, "Hel\xC3\xA9") == 0);
    mf_gen_free(g);
    g = make(NULL, 0, 2, false);
    CHECK(script(g, (int32_t[]){0, 4}, 2, out, &steps) == MF_STOP_LENGTH && strcmp(out, "Hel\xEF\xBF\xBD") == 0); /* the cut character shows as U+FFFD */
    mf_gen_free(g);

    /* Outside end (context full): mf_gen_finish returns the held "<". */
    const char *lt[] = {"<|"};
    g = make(lt, 1, -1, false);
    CHECK(script(g, (int32_t[]){0, 6}, 2, out, &steps) == MF_STOP_NONE && strcmp(out, "Hel") == 0);
    CHECK(mf_gen_finish(g, &text, &len) == MF_OK);
    CHECK(len == 1 && text[0] == '<');
    mf_gen_free(g);

    /* ignore_eos: EOS is banned, so the best other token comes out and nothing stops. */
    g = make(NULL, 0, -1, true);
    float l[NV] = {0};
    l[EOS] = 20, l[2] = 5;
    CHECK(mf_gen_next(g, l, &t, &text, &len, &r) == MF_OK && t == 2 && r == MF_STOP_NONE);
    CHECK(len == 4 && !memcmp(text, " wor", 4));
    mf_gen_free(g);

    /* n_predict 0 ends at once; bad arguments fail cleanly. */
    g = make(NULL, 0, 0, false);
    CHECK(mf_gen_next(g, want(0), &t, &text, &len, &r) == MF_OK && r == MF_STOP_LENGTH && len == 0);
    CHECK(mf_gen_prompt(g, (int32_t[]){1, 2}, 2) == MF_OK);
    CHECK(mf_gen_prompt(g, (int32_t[]){1, 99}, 2) == MF_ERR_RANGE);
    mf_gen_free(g);
    mf_sampler_params p = mf_sampler_default_params();
    mf_sampler_vocab nopiece = {.n_vocab = NV, .n_ctx = 8};
    CHECK(mf_gen_create(&p, NULL, 0, -1, &nopiece, &g) == MF_ERR_ARG && g == NULL);
    mf_sampler_vocab v = {.n_vocab = NV, .n_ctx = 8, .piece = piece};
    CHECK(mf_gen_create(&p, NULL, 0, -2, &v, &g) == MF_ERR_ARG && g == NULL);
    const char *empty[] = {""};
    CHECK(mf_gen_create(&p, empty, 1, -1, &v, &g) == MF_ERR_ARG && g == NULL);
    mf_gen_free(NULL);
    return test_summary("test_sample_gen");
}
