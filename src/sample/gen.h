/* gen.h: one generation's token-by-token bookkeeping, shared by `minfer run` and the server: draw
 * the next token with the sampler, add it to the history, decide whether generation ends (an
 * end-of-generation token, a stop string in the text, the token limit) and return the text that is
 * safe to show. The model stays with the caller; so does the tokenizer, reached through the
 * mf_sampler_vocab callbacks, so this module does not depend on it.
 *
 *   mf_gen *g;  mf_gen_create(&params, stops, n_stops, n_predict, &vocab, &g);
 *   mf_gen_prompt(g, prompt_ids, n_prompt);          // penalties and DRY see the prompt
 *   logits = eval(prompt);
 *   for (;;) {
 *       mf_gen_next(g, logits, &tok, &text, &len, &reason);  show text[0..len)
 *       if (reason != MF_STOP_NONE) break;              // tok is not to be evaluated
 *       if (context full) { mf_gen_finish(g, &text, &len); show; reason = MF_STOP_LENGTH; break; }
 *       logits = eval(tok);
 *   }
 */
#ifndef MF_GEN_H
#define MF_GEN_H

#include "sample/sampler.h"
#include "sample/stop.h"

typedef struct mf_gen mf_gen;

/* stops: n_stop strings (copied); n_predict: the most tokens to generate, -1 for no limit. The vocab's
 * piece callback gives each token's text (it and v->user must outlive the mf_gen); v->eog lists the
 * tokens that end generation (ignored for stopping when params->ignore_eos, which bans them).
 * Errors as mf_sampler_create and mf_stop_create, and MF_ERR_ARG without a piece callback. */
mf_status mf_gen_create(const mf_sampler_params *params, const char *const *stops, size_t n_stop, int64_t n_predict,
                        const mf_sampler_vocab *v, mf_gen **out);
void mf_gen_free(mf_gen *g);
/* Start a new generation with the same settings: empty history, the seed's stream from the start. */
void mf_gen_reset(mf_gen *g);

/* Add prompt tokens to the sampler's history. MF_ERR_RANGE for an id outside the vocabulary. */
mf_status mf_gen_prompt(mf_gen *g, const int32_t *ids, size_t n);

/* Sample the next token from logits[n_vocab] and account for it. *text / *len: the text now safe to
 * show (valid until the next call on g; an end-of-generation token contributes no text, a stop
 * string and what follows it never appear). *reason: MF_STOP_NONE to continue (evaluate *token
 * next), else why generation ended. After an end, further calls fail with MF_ERR_ARG until
 * mf_gen_reset. Sampling errors as mf_sampler_sample. */
mf_status mf_gen_next(mf_gen *g, const float *logits, int32_t *token, const char **text, size_t *len,
                      mf_stop_reason *reason);

/* End the generation from outside (context full, interrupted): the held-back text, as mf_stop_flush. */
mf_status mf_gen_finish(mf_gen *g, const char **text, size_t *len);

mf_sampler *mf_gen_sampler(mf_gen *g);
/* Tokens generated since creation or reset. */
int64_t mf_gen_n_generated(const mf_gen *g);

#endif /* MF_GEN_H */
