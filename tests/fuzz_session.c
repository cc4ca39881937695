/* fuzz_session.c: libFuzzer target for the session loader (src/conv/session.c): any input is parsed
 * as a session image and, when its messages are readable, loaded into a conversation on a fixture
 * model (the KV cells through the engine's state loader, the sampler state, the token ids, the
 * settings), after which the conversation must still be consistent and able to take a turn. The
 * first input byte chooses: bit 0 recomputes every checksum first (so mutations reach the parsers
 * behind them), bit 1 runs a one-token turn after the load. Built with -DMF_FUZZ_CORPUS_MAIN instead,
 * the same file writes the seeds: sessions of short conversations saved at several points. */
#include "conv.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#ifndef MF_FUZZ_MODEL
#define MF_FUZZ_MODEL "../shared/fixtures/models/mini-qwen2.Q8_0.gguf"
#endif

static mf_model *model;
static mf_context *ctx;
static mf_chat_template *tmpl;
static mf_conv *conv;

static void setup(void) {
    if (mf_model_load(MF_FUZZ_MODEL, &model)) {
        fprintf(stderr, "fuzz_session: %s\n", mf_last_error());
        abort();
    }
    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 96, cp.n_threads = 1;
    mf_sample_settings s;
    mf_sample_settings_init(&s);
    s.params.seed = 1, s.n_predict = 1;
    MF_ASSERT(!mf_context_create(model, &cp, &ctx) && !mf_chat_template_from_gguf(mf_model_gguf(model), NULL, &tmpl) &&
              !mf_conv_create(model, ctx, tmpl, &s, NULL, &conv));
    mf_sample_settings_free(&s);
}

#ifndef MF_FUZZ_CORPUS_MAIN

static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Make the header's and each reachable section's checksum right (the format of docs/chat.md). */
static void fix_checksums(uint8_t *p, size_t n) {
    if (n < 32) return;
    put64(p + 24, XXH3_64bits(p, 24));
    for (uint64_t off = 32; n - off >= 24;) {
        const uint64_t len = get64(p + off + 8);
        if (len > n - off - 24) break;
        put64(p + off + 16, XXH3_64bits_withSeed(p + off + 24, (size_t)len, XXH3_64bits(p + off, 16)));
        off += 24 + len;
    }
}

static mf_status ignore(void *user, const char *text, size_t len) {
    (void)user, (void)text, (void)len;
    return MF_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!conv) setup();
    if (size < 1) return 0;
    const uint8_t mode = data[0];
    uint8_t *img = malloc(size);
    memcpy(img, data + 1, size - 1);
    if (mode & 1) fix_checksums(img, size - 1);
    mf_conv_session *s = NULL;
    mf_status st = mf_conv_session_parse(img, size - 1, &s);
    free(img);
    if (st) {
        MF_ASSERT(!s && mf_last_error()[0]);
        return 0;
    }
    mf_conv_load_report rep;
    const size_t n = mf_conv_session_n_messages(s);
    if (mf_conv_load(conv, s, &rep) == MF_OK) {
        MF_ASSERT(mf_conv_n_messages(conv) == n);
        MF_ASSERT(mf_conv_n_cached(conv) <= mf_context_n_ctx(ctx));
        MF_ASSERT(!rep.cache_restored || rep.n_recomputed == 0);
        for (size_t i = 0; i < n; i++) MF_ASSERT(mf_conv_message_at(conv, i)->content);
        if (mode & 2) mf_conv_say(conv, "hi", ignore, NULL, NULL); /* may be refused: it must not break */
    }
    mf_conv_session_free(s);
    mf_conv_clear(conv);
    mf_conv_set_system(conv, NULL);
    return 0;
}

#else /* the seed generator: fuzz_session_corpus OUT_DIR [SOURCE...] */

static mf_status ignore(void *user, const char *text, size_t len) {
    (void)user, (void)text, (void)len;
    return MF_OK;
}

static void seed(const char *dir, int k, uint8_t mode) {
    char tmp[4096], path[4096];
    snprintf(tmp, sizeof tmp, "%s/session-%d.tmp", dir, k);
    snprintf(path, sizeof path, "%s/session-%d", dir, k);
    MF_ASSERT(mf_conv_save(conv, tmp) == MF_OK);
    FILE *in = fopen(tmp, "rb"), *out = fopen(path, "wb");
    MF_ASSERT(in && out);
    fputc(mode, out);
    for (int c; (c = fgetc(in)) != EOF;) fputc(c, out);
    fclose(in), fclose(out);
    remove(tmp);
}

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: fuzz_session_corpus OUT_DIR [SOURCE...]\n"), 2;
    setup();
    int k = 0;
    seed(argv[1], k++, 3); /* empty */
    mf_conv_set_system(conv, "Be brief.");
    MF_ASSERT(mf_conv_say(conv, "Hello", ignore, NULL, NULL) == MF_OK);
    seed(argv[1], k++, 1);
    MF_ASSERT(mf_conv_say(conv, "Tell me <think>more</think> \"quoted\"", ignore, NULL, NULL) == MF_OK);
    seed(argv[1], k++, 3);
    seed(argv[1], k++, 0);
    printf("fuzz_session_corpus: %d seeds in %s\n", k, argv[1]);
    mf_conv_free(conv), mf_chat_template_free(tmpl), mf_context_free(ctx), mf_model_free(model);
    return 0;
}

#endif
