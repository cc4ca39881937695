/* conv_impl.h: the conversation's state, shared by conv.c (turns) and session.c (files). Not for
 * other modules. */
#ifndef MF_CONV_IMPL_H
#define MF_CONV_IMPL_H

#include "conv.h"

typedef struct conv_msg {
    char *role, *content;
    bool interrupted;
} conv_msg;

struct mf_conv {
    const mf_model *model;
    mf_context *ctx;
    const mf_chat_template *tmpl;
    const mf_tokenizer *tok;
    mf_conv_params p;
    int32_t n_ctx, n_vocab;

    conv_msg *msgs; /* msgs[0] is the system prompt when there is one */
    size_t n_msgs, cap_msgs;

    mf_sample_settings settings; /* seed resolved: never MF_SAMPLER_SEED_RANDOM */
    mf_sampler_vocab vocab;
    mf_gen *gen;

    mf_conv_stats last;
    int32_t *toks; /* scratch: the cached tokens [n_ctx] */
    mf_spec *spec; /* speculative decoding of the replies, or NULL (not owned) */
};

/* Replace the messages with msgs[0..n) (taken over, the old ones freed). */
void mf_conv_take_messages(mf_conv *cv, conv_msg *msgs, size_t n);
void mf_conv_msg_free(conv_msg *m);
/* A generator for settings s (seed resolved), with the random stream of `from` when not NULL. */
mf_status mf_conv_make_gen(mf_conv *cv, const mf_sample_settings *s, mf_gen **out);
/* Prefill toks[0..n) into the sequence after cutting it back to the longest common prefix (at least
 * the last token is computed, so its logits are fresh). *reused: tokens kept. */
mf_status mf_conv_sync_cache(mf_conv *cv, const int32_t *toks, int32_t n, int32_t *reused);

#endif /* MF_CONV_IMPL_H */
