/* vocab.c: the sampler's view of a model's tokenizer (mf_sampler_vocab_from_tokenizer, sample.h):
 * token texts for DRY and logit bias by text, the shown text, and the end-of-generation ids. */
#include "minfer.h"

static const char *tok_piece(void *user, int32_t id, size_t *len) {
    const uint8_t *b = NULL;
    if (mf_tokenizer_token_to_bytes(user, id, MF_TOK_DECODE_SPECIAL, &b, len) != MF_OK) return NULL;
    return (const char *)b;
}

static const char *tok_show(void *user, int32_t id, size_t *len) {
    const uint8_t *b = NULL;
    if (mf_tokenizer_token_to_bytes(user, id, 0, &b, len) != MF_OK) return NULL;
    return (const char *)b;
}

mf_sampler_vocab mf_sampler_vocab_from_tokenizer(const mf_tokenizer *tok, int32_t n_vocab, int32_t n_ctx) {
    size_t n_eog = 0;
    const int32_t *eog = mf_tokenizer_eog_ids(tok, &n_eog);
    return (mf_sampler_vocab){.n_vocab = n_vocab, .n_ctx = n_ctx, .piece = tok_piece, .show = tok_show,
                              .user = (void *)tok, .eog = eog, .n_eog = n_eog};
}
