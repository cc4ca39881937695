/* generate.c: a whole generation through the public API: load a model, render a chat message
 * with its template, prefill, then sample and stream the reply until an end-of-generation token.
 * Build: cc generate.c -Iinclude -Lbuild -lminfer -ljansson -lm -lpthread */
#include "minfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what) {
    fprintf(stderr, "%s: %s\n", what, mf_last_error());
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 3) return fprintf(stderr, "usage: generate MODEL PROMPT [N_TOKENS]\n"), 2;
    mf_model *m;
    if (mf_model_load(argv[1], &m)) return fail("load");
    const mf_tokenizer *tok = mf_model_tokenizer(m);
    mf_chat_template *tmpl;
    if (!tok || mf_chat_template_from_gguf(mf_model_gguf(m), NULL, &tmpl)) return fail("model");
    mf_chat_message msg = {.role = "user", .content = argv[2]};
    mf_chat_options opts = mf_chat_default_options();
    char *text;
    int32_t *ids;
    size_t n_ids;
    if (mf_chat_render(tmpl, &msg, 1, &opts, &text, NULL) ||
        mf_tokenizer_encode(tok, text, strlen(text), MF_TOK_PARSE_SPECIAL, &ids, &n_ids))
        return fail("prompt");

    mf_context_params cp = mf_context_default_params();
    cp.n_ctx = 2048;
    mf_context *c;
    mf_sampler_params sp = mf_sampler_default_params();
    sp.seed = 42;
    mf_sampler_vocab voc = mf_sampler_vocab_from_tokenizer(tok, mf_model_n_vocab(m), cp.n_ctx);
    mf_gen *gen;
    const int64_t limit = argc > 3 ? atoll(argv[3]) : 128;
    if (mf_context_create(m, &cp, &c) || mf_gen_create(&sp, NULL, 0, limit, &voc, &gen) ||
        mf_gen_prompt(gen, ids, n_ids))
        return fail("setup");

    mf_batch b = {.n_tokens = (int32_t)n_ids, .tokens = ids};
    mf_stop_reason reason = MF_STOP_NONE;
    int32_t t;
    while (reason == MF_STOP_NONE) {
        const char *piece;
        size_t len;
        if (mf_context_decode(c, &b) || mf_gen_next(gen, mf_context_logits(c, 0), &t, &piece, &len, &reason))
            return fail("generate");
        fwrite(piece, 1, len, stdout);
        b = (mf_batch){.n_tokens = 1, .tokens = &t};
    }
    printf("\n[%s after %lld tokens]\n", mf_stop_reason_str(reason), (long long)mf_gen_n_generated(gen));
    mf_gen_free(gen), mf_context_free(c), mf_chat_template_free(tmpl), mf_model_free(m);
    free(text), free(ids);
    return 0;
}
