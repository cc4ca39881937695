/* minfer/spec.h: speculative decoding. Part of the public API (include minfer.h).
 *
 * A cheap source proposes the next tokens (a small draft model of the same vocabulary, or n-gram
 * lookup in the text so far); the target model checks all of them in one batched forward pass and
 * keeps the longest prefix it agrees with, plus one token of its own. The output is the target's:
 * - greedy (temperature <= 0): byte for byte the text plain decoding gives, because the engine is
 *   batch invariant (a token's logits do not depend on the batch it was computed in);
 * - sampling: the standard rejection rule (accept a drafted token x with probability
 *   min(1, p(x) / q(x)), on rejection draw from normalize(max(0, p - q))), where p is the
 *   distribution after the whole sampler chain (mf_sampler_dist) and q the draft's, so every token
 *   has exactly the target's distribution (for n-gram lookup q is a point mass: accept with p(x)).
 * The target's cache (and the draft's) are rolled back past the first rejected token, so afterwards
 * the caches hold exactly what plain decoding would have left there.
 *
 * The draft length adapts. Lookup: from the measured acceptance a (per drafted token, decayed) it
 * picks the depth k in {0} U [draft_min, draft_max] with the most expected tokens, 1 + a + ... + a^k,
 * per cost, 1 + verify_cost k in units of a one-token decode of the target; 0 means plain decoding,
 * with a probe every 16 tokens. A draft model drafts token by token while it pays: each drafted
 * token's chance of being kept is its confidence (its top probability) calibrated by how often the
 * target kept the draft's tokens at that confidence; a token is drafted while the chance that it and
 * every one before it are kept exceeds what it adds to the verification pass, and drafting goes on
 * while the next one is expected to pay for its draft step too, up to draft_max. A draft step costs
 * the draft's weight bytes per token over the target's. When its recent rounds gained less than
 * they cost, a draft model backs off to plain decoding and probes again after 16, 32 .. 256
 * tokens; where even near-certain acceptance would gain under a fifth (a draft more than half the
 * target's bytes), it never drafts. Greedy decoding, whose text no depth can change, replaces the
 * cost model with measured times once it has them (in mf_spec_next: the draft's step, and the pass
 * of each size, which finds a pass size where a kernel changes and costs jump); sampling keeps the
 * model and starts each generation from the prior acceptance, so that its depths, and so its text,
 * depend only on the seed and the input. draft_min equal to draft_max fixes the depth. p_min, when
 * set, stops a draft model's draft at a token it is less sure of.
 *
 * Use, after the prompt is decoded into sequence seq of ctx (its last token's logits are the last
 * row of the last decode):
 *   mf_spec *sp;  mf_spec_create(model, ctx, seq, &sampler_params, &spec_params, &sp);
 *   mf_spec_begin(sp, gen, kv_limit);
 *   for (;;) {
 *       mf_spec_next(sp, &text, &len, &reason, &full);  show text[0..len)
 *       if (reason != MF_STOP_NONE) break;
 *       if (full) { mf_gen_finish(gen, ...); break; }
 *   }
 * An mf_spec belongs to one thread, as its context does.
 *
 * A caller that runs the verification pass itself (a server that verifies the drafts of several
 * sequences in one batched decode) replaces mf_spec_next with two calls per round:
 *   mf_spec_draft(sp, &toks, &n);    decode toks[0..n) into seq at positions pos .. pos + n - 1
 *                                    (pos: the sequence's length), logits for each, as consecutive
 *                                    rows r0 .. r0 + n - 1 of one decode (with other sequences'
 *                                    tokens around them if it likes)
 *   mf_spec_accept(sp, r0, &round);  the tokens drawn, their text, the end
 * Right after mf_spec_begin there is nothing to decode (n = 0): mf_spec_accept draws the first
 * token from row r0, the prompt's last. Such a decoder chooses its depths by the cost model alone
 * (the pass's time is not its own), so its text never depends on the other sequences.
 */
#ifndef MINFER_SPEC_H
#define MINFER_SPEC_H

#include "minfer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MF_SPEC_MAX_DRAFT 64

typedef struct mf_spec_params {
    const mf_model *draft; /* a draft model (it must outlive the mf_spec), or NULL */
    bool lookup;           /* n-gram lookup in the sequence's own tokens (no draft model) */
    int32_t draft_min;     /* 0: fewer drafted tokens than this are not worth a verification */
    int32_t draft_max;     /* 16, at most MF_SPEC_MAX_DRAFT */
    float p_min;           /* 0: a draft model stops where its top token's probability is lower */
    int32_t ngram_min, ngram_max; /* 2, 4: the lengths of the tail lookup matches, longest first */
    int32_t draft_threads; /* threads of the draft's context; 0: the target context's */
    float verify_cost;     /* 0.2: an extra token in a verification pass, in one-token decodes */
    /* A context of draft owned by the caller, so that several decoders share one (a server's slots,
     * each on its own draft_seq); NULL: the decoder creates its own and drafts in its sequence 0. */
    mf_context *draft_ctx;
    int32_t draft_seq;
} mf_spec_params;

mf_spec_params mf_spec_default_params(void);

/* Whether draft can draft for target: the same number of tokens, each with the same text. MF_ERR_ARG
 * naming the first difference otherwise. */
mf_status mf_spec_check_vocab(const mf_model *target, const mf_model *draft);

typedef struct mf_spec mf_spec;

/* A speculative decoder for sequence seq of ctx (a context of target). With a draft model and no
 * draft_ctx it creates the draft's context (the target's n_ctx, kernel level and float order). Exactly one source: a
 * draft model or lookup. sampling: the generation's sampler parameters (greedy or not, top-k).
 * Errors: MF_ERR_ARG (no source or both, bad ranges, another vocabulary), MF_ERR_UNSUPPORTED
 * (Mirostat, whose running target follows every drawn token), the draft context's errors,
 * MF_ERR_NOMEM. *out is NULL on failure. */
mf_status mf_spec_create(const mf_model *target, mf_context *ctx, int32_t seq, const mf_sampler_params *sampling,
                         const mf_spec_params *p, mf_spec **out);
void mf_spec_free(mf_spec *s);
/* New sampler parameters for the next generations (a conversation's changed settings). Any
 * parameters keep the output exact; these choose greedy matching or the rejection rule and the
 * draft's q. MF_ERR_UNSUPPORTED for Mirostat (s unchanged). */
mf_status mf_spec_set_sampling(mf_spec *s, const mf_sampler_params *sampling);

/* Start a generation through g (created with the same sampling parameters), after the sequence's
 * tokens are in the cache and the last decode computed the logits after the last of them.
 * kv_limit: the most cells the sequence may hold; a token drawn when it holds that many is not
 * decoded (the generation ends with "context full"). The tokens are read from the cache
 * (mf_context_seq_tokens), for lookup and for the draft's own cache, which keeps what it shares
 * and prefills the rest here (all but the last token: the first draft computes that one). */
mf_status mf_spec_begin(mf_spec *s, mf_gen *g, int32_t kv_limit);

/* One step: one or more tokens. *text / *len: the text to show (valid until the next call);
 * *reason: as mf_gen_next (MF_STOP_NONE: go on); *context_full: the sequence reached kv_limit (the
 * caller ends the generation with mf_gen_finish). Errors of decoding and sampling; after one, the
 * generation cannot go on. */
mf_status mf_spec_next(mf_spec *s, const char **text, size_t *len, mf_stop_reason *reason, bool *context_full);

/* One round of mf_spec_accept. Token i came from the logits of row r0 + i. */
typedef struct mf_spec_round {
    int32_t n_tokens;          /* tokens drawn: the accepted drafted ones and one of the target's */
    const int32_t *tokens;     /* [n_tokens] */
    const char *text;          /* their text (as mf_gen gave it), valid until the next round */
    size_t len;
    const size_t *text_end;    /* [n_tokens] token i's text is text[text_end[i - 1] (0 for i = 0) .. text_end[i]) */
    mf_stop_reason reason;     /* as mf_gen_next; MF_STOP_NONE: go on */
    bool context_full;         /* the sequence reached kv_limit (end the generation with mf_gen_finish) */
    int32_t n_drafted, n_accepted; /* this round's */
} mf_spec_round;

/* The tokens to decode for the next round (see above): *tokens (valid until the next call) holds the
 * last drawn token and the drafted ones, *n of them (0 right after mf_spec_begin). Errors of the
 * draft model's decodes; MF_ERR_ARG before mf_spec_begin. */
mf_status mf_spec_draft(mf_spec *s, const int32_t **tokens, int32_t *n);
/* The round's outcome after the caller decoded mf_spec_draft's tokens with logits at rows r0 ...
 * The cache of seq (and the draft's) is rolled back past the first rejected token: seq then holds
 * pos + 1 + (accepted drafted tokens) cells. Errors of sampling; MF_ERR_ARG when no round was
 * drafted or a row is missing. After an error the generation cannot go on. */
mf_status mf_spec_accept(mf_spec *s, int32_t r0, mf_spec_round *out);

typedef struct mf_spec_stats {
    int64_t rounds;    /* verification passes (plain single-token decodes included) */
    int64_t drafted;   /* drafted tokens sent to verification */
    int64_t accepted;  /* of which the target kept */
    int64_t generated; /* tokens emitted */
    double draft_s, verify_s; /* seconds drafting (draft model decodes, lookup) and in target decodes */
    int32_t depth;     /* the draft length chosen last */
} mf_spec_stats;
/* Counters since mf_spec_create. */
void mf_spec_get_stats(const mf_spec *s, mf_spec_stats *out);

#ifdef __cplusplus
}
#endif
#endif /* MINFER_SPEC_H */
