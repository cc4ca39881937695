/* test_sample_vocab.c: the sampler with a real vocabulary (Qwen2.5's 151,936 tokens from
 * vocab-qwen2.5.gguf) through the tokenizer's byte pieces: logit bias by token text, DRY's default
 * breakers found among real tokens, ignore_eos with the tokenizer's end-of-generation set, and a
 * generation loop where a stop string spans tokens. */
#include "gguf/gguf.h"
#include "sample/sampler.h"
#include "sample/stop.h"
#include "tok/tokenizer.h"
#include "test.h"

#include <stdlib.h>
#include <string.h>

/* The piece callback: the bytes a token prints as (special tokens with their text). */
static const char *piece(void *user, int32_t id, size_t *len) {
    const uint8_t *b = NULL;
    if (mf_tokenizer_token_to_bytes(user, id, MF_TOK_DECODE_SPECIAL, &b, len)) return NULL;
    return (const char *)b;
}

static int32_t single_token(const mf_tokenizer *tok, const char *text) {
    int32_t ids[8];
    size_t n = 0;
    if (mf_tokenizer_encode_into(tok, text, strlen(text), MF_TOK_PARSE_SPECIAL, ids, 8, &n) || n != 1) return -1;
    return ids[0];
}

int main(void) {
    mf_gguf *g = NULL;
    mf_tokenizer *tok = NULL;
    if (mf_gguf_open(fixture("models/vocab-qwen2.5.gguf"), &g) || mf_tokenizer_load(g, &tok)) {
        CHECKF(0, "loading the vocabulary: %s", mf_last_error());
        return test_summary("test_sample_vocab");
    }
    int32_t nv = mf_tokenizer_n_vocab(tok);
    size_t n_eog = 0;
    const int32_t *eog = mf_tokenizer_eog_ids(tok, &n_eog);
    mf_sampler_vocab v = {.n_vocab = nv, .n_ctx = 4096, .piece = piece, .user = tok, .eog = eog, .n_eog = n_eog};
    float *l = calloc((size_t)nv, sizeof *l);

    /* Logit bias by text resolves to the token that encodes " Hello" on its own. */
    int32_t hello = single_token(tok, " Hello");
    CHECK(hello >= 0);
    mf_sampler_params p = mf_sampler_default_params();
    p.seed = 1, p.temp = 0;
    mf_logit_bias b = {.text = " Hello", .bias = 5.0f};
    p.logit_bias = &b, p.n_logit_bias = 1;
    mf_sampler *s = NULL;
    CHECKF(mf_sampler_create(&p, &v, &s) == MF_OK, "%s", mf_last_error());
    int32_t t = -1;
    CHECK(s && mf_sampler_sample(s, l, &t) == MF_OK && t == hello);
    mf_sampler_free(s);

    /* ignore_eos: with <|im_end|> and <|endoftext|> far ahead, greedy still avoids every EOG token. */
    int32_t im_end = single_token(tok, "<|im_end|>"), eot = single_token(tok, "<|endoftext|>");
    CHECK(im_end >= 0 && eot >= 0 && mf_tokenizer_is_eog(tok, im_end) && mf_tokenizer_is_eog(tok, eot));
    CHECK(mf_stop_is_eog_text("<|im_end|>", 10));
    l[im_end] = 50, l[eot] = 40, l[hello] = 1;
    p = mf_sampler_default_params();
    p.seed = 1, p.temp = 0, p.ignore_eos = true;
    CHECK(mf_sampler_create(&p, &v, &s) == MF_OK);
    CHECK(s && mf_sampler_sample(s, l, &t) == MF_OK && t == hello);
    mf_sampler_free(s);
    l[im_end] = l[eot] = l[hello] = 0;

    /* DRY over real token texts: in "\n apple pie tart\n apple pie" the suffix "\n apple pie"
     * occurred before, followed by " tart" (repeat length 3: 1.75^(3-2)). With the default breakers
     * the newline token is one, so the repeat may only reach back over " apple pie" (length 2:
     * 1.75^0). */
    int32_t a = single_token(tok, " apple"), c = single_token(tok, " pie"), d = single_token(tok, " tart"),
            nl = single_token(tok, "\n");
    CHECK(a >= 0 && c >= 0 && d >= 0 && nl >= 0);
    const int32_t hist[] = {nl, a, c, d, nl, a, c};
    for (int pass = 0; pass < 2; pass++) {
        p = mf_sampler_default_params();
        p.seed = 1, p.dry_multiplier = 1.0f, p.stages[0] = MF_STAGE_DRY, p.n_stages = 1;
        if (pass == 0) p.n_dry_breakers = 0;
        CHECK(mf_sampler_create(&p, &v, &s) == MF_OK);
        for (int i = 0; i < 7; i++) mf_sampler_accept(s, hist[i]);
        const mf_sampler_candidate *cd;
        size_t n;
        CHECK(mf_sampler_dist(s, l, &cd, &n) == MF_OK && n == (size_t)nv);
        float got = 0;
        for (size_t i = 0; i < n; i++)
            if (cd[i].id == d) got = cd[i].logit;
        CHECK_NEAR(got, pass == 0 ? -1.75 : -1.0, 1e-5);
        mf_sampler_free(s);
    }

    /* A generation loop: tokens decoded to bytes, fed to the stop matcher; the stop string
     * "apple pie" spans two tokens and never reaches the output. */
    const char *stops[] = {"apple pie"};
    mf_stop *m;
    CHECK(mf_stop_create(stops, 1, &m) == MF_OK);
    int32_t hi = single_token(tok, "Hi");
    const int32_t gen[] = {hi, a, c, d};
    char out[64] = {0};
    size_t len = 0;
    int hit = -1;
    for (int i = 0; i < 4 && hit < 0; i++) {
        const uint8_t *bytes;
        size_t bl;
        CHECK(mf_tokenizer_token_to_bytes(tok, gen[i], 0, &bytes, &bl) == MF_OK);
        const char *o;
        size_t ol;
        CHECK(mf_stop_feed(m, (const char *)bytes, bl, &o, &ol, &hit) == MF_OK);
        memcpy(out + len, o, ol), len += ol;
    }
    CHECK(hit == 0 && strcmp(out, "Hi ") == 0);
    mf_stop_free(m);

    free(l);
    mf_tokenizer_free(tok);
    mf_gguf_free(g);
    return test_summary("test_sample_vocab");
}
