/* minfer/sample.h: choosing tokens and deciding when generation ends. Part of the public API
 * (include minfer.h). Four parts:
 * - the sampler chain (mf_sampler): llama.cpp's stages, names, semantics and defaults;
 * - stop strings (mf_stop): which decoded text may be shown, and when a stop string ends the text;
 * - the generation loop (mf_gen): sample, account, stop, text to show, for one sequence;
 * - sample settings (mf_sample_settings): one generation's parameters as a program's flags or a
 *   server request's JSON fill them, with one set of defaults.
 */
#ifndef MINFER_SAMPLE_H
#define MINFER_SAMPLE_H

#include "minfer.h"
#include "minfer/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ==== The sampler chain ====
 * A chain of stages with llama.cpp's names, semantics and defaults
 * (logit bias, repetition/frequency/presence penalties, DRY, top-n-sigma, top-k, locally typical,
 * top-p, min-p, XTC, temperature or dynamic temperature, Mirostat v1/v2) followed by a seeded draw.
 *
 * One mf_sampler belongs to one sequence (one request, one `minfer run`): it holds the
 * token history the penalties and DRY look at, Mirostat's running target and the random generator.
 * It is not thread-safe; give each thread or request its own. Every buffer is allocated by
 * mf_sampler_create, so sampling a token allocates nothing.
 *
 * Use:
 *   mf_sampler_params p = mf_sampler_default_params();   // then change fields
 *   mf_sampler_vocab v = {.n_vocab = n, .n_ctx = ctx, .piece = fn, .user = tok, .eog = ids, .n_eog = k};
 *   mf_sampler *s;  if (mf_sampler_create(&p, &v, &s)) -> error in mf_last_error()
 *   for each prompt token t: mf_sampler_accept(s, t);      // penalties and DRY see the prompt tail
 *   loop: mf_sampler_sample(s, logits, &tok); mf_sampler_accept(s, tok); ...
 *   mf_sampler_free(s);
 *
 * Where minfer differs from llama.cpp, on purpose: the random stream is xoshiro256** (rng.h), so a
 * seed reproduces minfer's tokens everywhere but not llama.cpp's; ties are broken by the lower token
 * id, so results never depend on sort stability; tokens whose logit is -inf leave the candidate set
 * (llama.cpp keeps them with p = 0); a DRY breaker that spans tokens is matched on the tokens' text
 * (llama.cpp matches one tokenization of it); min_p above 1 is rejected. The stages never sort the
 * whole vocabulary when a truncation stage has run first (heap or quickselect, a histogram for
 * top-p), and the softmax uses its own exponential (no libm expf). llama.cpp's own sampler test
 * vectors pass (tests/test_sample_reference.c).
 */

/* The stages that --samplers can order. Append-only. Logit bias is not listed: it always runs first,
 * as in llama.cpp. With Mirostat on, the chain is fixed, as in llama.cpp: logit bias, temperature,
 * Mirostat (no penalties, DRY or truncation stages). */
typedef enum mf_sampler_stage {
    MF_STAGE_PENALTIES,   /* "penalties", letter 'e' */
    MF_STAGE_DRY,         /* "dry", 'd' */
    MF_STAGE_TOP_N_SIGMA, /* "top_n_sigma", 's' */
    MF_STAGE_TOP_K,       /* "top_k", 'k' */
    MF_STAGE_TYPICAL,     /* "typ_p", 'y' */
    MF_STAGE_TOP_P,       /* "top_p", 'p' */
    MF_STAGE_MIN_P,       /* "min_p", 'm' */
    MF_STAGE_XTC,         /* "xtc", 'x' */
    MF_STAGE_TEMPERATURE, /* "temperature", 't' */
    MF_STAGE_COUNT
} mf_sampler_stage;

#define MF_SAMPLER_MAX_STAGES 32
/* seed value that asks for a random seed (llama.cpp's LLAMA_DEFAULT_SEED); see mf_sampler_seed. */
#define MF_SAMPLER_SEED_RANDOM 0xFFFFFFFFu
/* The default DRY sequence breakers: "\n", ":", "\"", "*". */
extern const char *const mf_sampler_default_breakers[4];

/* A bias added to one token's logit. When text is not NULL the bias applies to every token whose
 * piece text (mf_sampler_vocab.piece) equals it byte for byte, and token is ignored. */
typedef struct mf_logit_bias {
    int32_t token;
    float bias; /* -INFINITY bans the token */
    const char *text;
} mf_logit_bias;

typedef struct mf_sampler_params {
    uint32_t seed; /* MF_SAMPLER_SEED_RANDOM: pick one at creation (read it with mf_sampler_seed) */
    int32_t top_k;       /* 40; <= 0 disables */
    float top_p;         /* 0.95; >= 1 disables */
    float min_p;         /* 0.05; <= 0 disables */
    float typ_p;         /* 1.0 = disabled */
    float top_n_sigma;   /* -1; <= 0 disables */
    float temp;          /* 0.8; <= 0 keeps only the most likely token (greedy) */
    float dynatemp_range;    /* 0 = off; else the temperature is temp +- range, by the entropy */
    float dynatemp_exponent; /* 1.0 */
    float xtc_probability; /* 0 = disabled */
    float xtc_threshold;   /* 0.1; > 0.5 disables */
    int32_t min_keep;      /* 0; top-p, min-p, typical and XTC keep at least this many tokens */
    int32_t penalty_last_n; /* 64; 0 disables, -1 = context size (mf_sampler_vocab.n_ctx) */
    float penalty_repeat;   /* 1.0 = disabled */
    float penalty_freq;     /* 0.0 = disabled */
    float penalty_present;  /* 0.0 = disabled */
    float dry_multiplier;   /* 0.0 = disabled */
    float dry_base;         /* 1.75; < 1 disables */
    int32_t dry_allowed_length; /* 2 */
    int32_t dry_penalty_last_n; /* -1 = context size; 0 disables */
    const char *const *dry_breakers; /* default: mf_sampler_default_breakers; copied at creation */
    size_t n_dry_breakers;
    int32_t mirostat;     /* 0 = off, 1 = Mirostat, 2 = Mirostat 2.0 */
    float mirostat_tau;   /* 5.0, target surprise (entropy) in bits */
    float mirostat_eta;   /* 0.1, learning rate */
    bool ignore_eos;      /* ban every end-of-generation token (mf_sampler_vocab.eog) */
    const mf_logit_bias *logit_bias; /* copied at creation */
    size_t n_logit_bias;
    mf_sampler_stage stages[MF_SAMPLER_MAX_STAGES]; /* the chain order after logit bias */
    size_t n_stages;
} mf_sampler_params;

/* What the sampler needs to know about the model. piece may be NULL when neither DRY nor logit
 * bias by text is used; it returns the bytes of one token as the detokenizer prints it (special
 * tokens with their text), valid until the next call, and sets *len, or NULL for an id it does not
 * know. piece and user must stay valid while the sampler lives: DRY calls it while sampling to follow
 * a sequence breaker that spans tokens. */
typedef struct mf_sampler_vocab {
    int32_t n_vocab; /* number of logits per token */
    int32_t n_ctx;   /* context size, resolves penalty_last_n = -1 and dry_penalty_last_n = -1 */
    const char *(*piece)(void *user, int32_t token, size_t *len);
    /* The text a generation shows for a token, as piece but with control tokens empty (mf_gen
     * only); NULL: use piece. */
    const char *(*show)(void *user, int32_t token, size_t *len);
    void *user;
    const int32_t *eog; /* end-of-generation tokens, for ignore_eos; may be NULL */
    size_t n_eog;
} mf_sampler_vocab;

/* One surviving token: its logit after every stage and its final probability. */
typedef struct mf_sampler_candidate {
    int32_t id;
    float logit;
    float p;
} mf_sampler_candidate;

typedef struct mf_sampler mf_sampler;

/* llama.cpp's defaults: top-k 40, top-p 0.95, min-p 0.05, temperature 0.8, penalties neutral over
 * the last 64 tokens, DRY off (base 1.75, allowed length 2, last n -1, the default breakers), XTC
 * off (threshold 0.1), Mirostat off (tau 5, eta 0.1), random seed, and the order
 * penalties, dry, top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature. */
mf_sampler_params mf_sampler_default_params(void);

/* Check every field; MF_ERR_ARG naming the field, the bad value and the valid range. */
mf_status mf_sampler_params_check(const mf_sampler_params *p);

/* Create a sampler; *out is NULL on failure. Fails with MF_ERR_ARG for bad parameters,
 * MF_ERR_NOT_FOUND for a logit-bias text that no token has, MF_ERR_RANGE for a token id outside the
 * vocabulary, MF_ERR_NOMEM. The params' arrays are copied; eog is read during creation only. */
mf_status mf_sampler_create(const mf_sampler_params *p, const mf_sampler_vocab *v, mf_sampler **out);
void mf_sampler_free(mf_sampler *s);

/* Run the chain on logits[n_vocab] (not modified) and draw a token. Does not accept the token: call
 * mf_sampler_accept with what the sequence really continues with. Fails with MF_ERR_RANGE when no
 * token has a finite logit after the chain (all -inf or NaN; NaN logits count as -inf). */
mf_status mf_sampler_sample(mf_sampler *s, const float *logits, int32_t *token);

/* The most likely token of logits[0..n) (the lowest id on ties; NaN logits count as -inf) and, in *p
 * (NULL to skip), its probability under a softmax at temperature 1 over all n, with the sampler's
 * exponential, one pass and no allocation: a speculative decoder's confidence in its draft token.
 * -1 and p = 0 for n < 1. Without a finite logit: the lowest id of the largest (NaN below -inf), with
 * p = 1 over the count of +inf logits, or p = 0 when every logit is -inf or NaN. */
int32_t mf_logits_top(const float *logits, int32_t n, float *p);

/* Run the chain without drawing and return the final distribution: the surviving tokens with their
 * logits and probabilities (summing to 1), valid until the next call on s. Mirostat's truncation is
 * included, its update is not. For tests, reporting probabilities (logprobs) and inspection. An XTC stage
 * still consumes its random number. */
mf_status mf_sampler_dist(mf_sampler *s, const float *logits, const mf_sampler_candidate **cands,
                          size_t *n);

/* Draw a token from the distribution the last mf_sampler_dist call returned (and update Mirostat),
 * so a caller can read the probabilities (logprobs) and sample from the same chain
 * run: mf_sampler_dist + mf_sampler_draw = mf_sampler_sample. MF_ERR_ARG when no mf_sampler_dist
 * result is pending (each result is drawn from at most once). */
mf_status mf_sampler_draw(mf_sampler *s, int32_t *token);

/* Add a token to the history (prompt tokens first, then each generated token). MF_ERR_RANGE for an
 * id outside [0, n_vocab). */
mf_status mf_sampler_accept(mf_sampler *s, int32_t token);

/* Forget the history, restore Mirostat's mu = 2*tau and restart the random stream from the seed. */
void mf_sampler_reset(mf_sampler *s);

/* The seed in use: the given one, or the one picked for MF_SAMPLER_SEED_RANDOM. */
uint32_t mf_sampler_seed(const mf_sampler *s);

/* Forget the token history only (the penalty and DRY windows); the random stream and Mirostat's mu
 * go on. A conversation refills the history with the tokens now in context before each reply. */
void mf_sampler_clear_history(mf_sampler *s);

/* The sampler's state as a byte image, so that a saved conversation draws what it would have drawn
 * uninterrupted: the random stream's position, Mirostat's running mu, the seed, and the tokens in
 * the penalty and DRY windows (oldest first). It holds no settings: load it into a sampler created
 * with the same parameters. Format (little-endian), version 1: "MFSMPL\0\0", u32 version, u32
 * n_vocab, u32 seed, u32 n_penalty_tokens, u32 n_dry_tokens, f32 mu, u64 rng[4], then the int32
 * penalty tokens and the int32 DRY tokens; 64 + 4 * (tokens) bytes. It carries no checksum: the file
 * that holds it (a session file) does. */
size_t mf_sampler_state_size(const mf_sampler *s);
/* Write the image into buf[0..cap); MF_ERR_RANGE if it does not fit. *written: its size. */
mf_status mf_sampler_state_save(const mf_sampler *s, void *buf, size_t cap, size_t *written);
/* Restore an image. The windows are refilled from its tokens (the most recent ones, when this
 * sampler's window is smaller; none for a stage that is off). Checks the whole image first and on
 * error leaves s as it was: MF_ERR_FORMAT (not an image, wrong size, a token outside the
 * vocabulary, mu not finite), MF_ERR_UNSUPPORTED (a newer version), MF_ERR_ARG (another vocabulary
 * size). */
mf_status mf_sampler_state_load(mf_sampler *s, const void *data, size_t size);

/* Stage names for --samplers: canonical "top_k" and llama.cpp's alternates ("top-k", "nucleus",
 * "typical", "temp", ...). Returns MF_STAGE_COUNT when unknown. */
mf_sampler_stage mf_sampler_stage_from_name(const char *name, size_t len);
const char *mf_sampler_stage_name(mf_sampler_stage st);
/* One-letter form ("edskypmxt"); MF_STAGE_COUNT when unknown. */
mf_sampler_stage mf_sampler_stage_from_char(char c);
char mf_sampler_stage_char(mf_sampler_stage st);

/* Parse "penalties;dry;top_k" (separators ';' or ',') into p->stages. MF_ERR_ARG names an unknown
 * stage and lists the valid names; p is unchanged on failure. */
mf_status mf_sampler_parse_stages(mf_sampler_params *p, const char *names);
/* Parse llama.cpp's letter form "edskypmxt". */
mf_status mf_sampler_parse_stage_chars(mf_sampler_params *p, const char *chars);

/* Describe the chain in one line, e.g. "logits -> top_k(40) -> top_p(0.95) -> ... -> dist", for
 * the run command's log. Writes at most size bytes (NUL-terminated). */
void mf_sampler_describe(const mf_sampler *s, char *buf, size_t size);

/* The sampler's view of a model's tokenizer: n_vocab (the width of the logits, which may exceed the
 * tokenizer's count), n_ctx (resolves the -1 windows), token texts with special tokens shown (for
 * DRY breakers and logit bias by text), the shown text (control tokens empty), and the
 * end-of-generation ids. The tokenizer must outlive every sampler and generator made with it. */
mf_sampler_vocab mf_sampler_vocab_from_tokenizer(const mf_tokenizer *tok, int32_t n_vocab, int32_t n_ctx);

/* ==== Stop strings ====
 * Deciding when generation ends and what text may be shown: the stop-string matcher over
 * the decoded byte stream, the reasons a generation stops, and the well-known end-of-generation
 * token texts.
 *
 * The matcher sees the decoded bytes as they come (any split: a stop string may span several
 * tokens, a token may end inside a UTF-8 character). It returns only valid UTF-8 that can no
 * longer be part of a stop string; it holds back the rest until the next bytes decide. A byte
 * sequence that can never be valid UTF-8 becomes U+FFFD. So a stop string never appears in the
 * output, and neither does half a character. It may sit behind the tokenizer's streaming decoder
 * or take raw token bytes; both work.
 *
 * Generation loop (one matcher per sequence):
 *   mf_stop_feed(m, piece, len, &out, &n, &hit);  print out[0..n);
 *   if (hit >= 0) reason = MF_STOP_STRING -> stop;
 *   on an end-of-generation token or the -n limit: mf_stop_flush(m, &out, &n), print, stop.
 */

typedef enum mf_stop_reason {
    MF_STOP_NONE,   /* still generating */
    MF_STOP_EOG,    /* an end-of-generation token (EOS, EOT, <|im_end|>, ...) was sampled */
    MF_STOP_STRING, /* a --stop string appeared in the text */
    MF_STOP_LENGTH, /* the -n limit (or the context) was reached */
} mf_stop_reason;

/* "none", "eog", "stop", "length": short names for logs and API finish reasons. */
const char *mf_stop_reason_str(mf_stop_reason r);

typedef struct mf_stop mf_stop;

/* A matcher for n stop strings (copied). n may be 0: then it only holds back incomplete UTF-8.
 * MF_ERR_ARG for a NULL or empty string. */
mf_status mf_stop_create(const char *const *strings, size_t n, mf_stop **out);
void mf_stop_free(mf_stop *m);
/* Forget held bytes and a past match, for a new generation with the same strings. */
void mf_stop_reset(mf_stop *m);

/* Take the next decoded bytes. *out / *out_len: the bytes now safe to show, valid until the next
 * call on m. *matched: the index of the stop string found, or -1: the first one to be completed in
 * the text (on a tie the one starting earliest, then the first given), so the result does not
 * depend on how the text was split. After a match the output ends just before the stop string, the
 * rest is dropped, and later feeds return nothing. MF_ERR_NOMEM only. */
mf_status mf_stop_feed(mf_stop *m, const char *bytes, size_t n, const char **out, size_t *out_len, int *matched);

/* Generation ended another way: return everything held back; an incomplete UTF-8 character at the
 * end becomes U+FFFD. MF_ERR_NOMEM only. */
mf_status mf_stop_flush(mf_stop *m, const char **out, size_t *out_len);

/* Whether a special token's text is one of the usual end-of-generation markers ("<|im_end|>",
 * "<|endoftext|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", ...): with the EOS and EOT ids from the
 * GGUF metadata this gives the set of tokens that end a generation. Only meaningful for control
 * tokens; a normal token that happens to spell such text should not stop generation. */
bool mf_stop_is_eog_text(const char *text, size_t len);

/* ==== The generation loop ====
 * One generation's token-by-token bookkeeping, shared by every program that generates: draw
 * the next token with the sampler, add it to the history, decide whether generation ends (an
 * end-of-generation token, a stop string in the text, the token limit) and return the text that is
 * safe to show. The model stays with the caller; so does the tokenizer, reached through the
 * mf_sampler_vocab callbacks.
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
/* Start the next generation of the same sequence (a conversation's next reply): the stop-string
 * matcher and the token count start over, the sampler keeps its history and random stream. */
void mf_gen_restart(mf_gen *g);

/* Add prompt tokens to the sampler's history. MF_ERR_RANGE for an id outside the vocabulary. */
mf_status mf_gen_prompt(mf_gen *g, const int32_t *ids, size_t n);

/* Sample the next token from logits[n_vocab] and account for it. *text / *len: the text now safe to
 * show (valid until the next call on g; an end-of-generation token contributes no text, a stop
 * string and what follows it never appear). *reason: MF_STOP_NONE to continue (evaluate *token
 * next), else why generation ended. After an end, further calls fail with MF_ERR_ARG until
 * mf_gen_reset. Sampling errors as mf_sampler_sample. */
mf_status mf_gen_next(mf_gen *g, const float *logits, int32_t *token, const char **text, size_t *len,
                      mf_stop_reason *reason);

/* Account for a token chosen outside the sampler (speculative decoding's accepted draft tokens):
 * everything mf_gen_next does after its draw (history, end-of-generation, stop strings, limit,
 * text). mf_gen_next = mf_sampler_sample + mf_gen_push. MF_ERR_RANGE for an id outside the
 * vocabulary; after an end MF_ERR_ARG, as mf_gen_next. */
mf_status mf_gen_push(mf_gen *g, int32_t token, const char **text, size_t *len, mf_stop_reason *reason);

/* End the generation from outside (context full, interrupted): the held-back text, as mf_stop_flush. */
mf_status mf_gen_finish(mf_gen *g, const char **text, size_t *len);

mf_sampler *mf_gen_sampler(mf_gen *g);
/* Tokens generated since creation or reset. */
int64_t mf_gen_n_generated(const mf_gen *g);
/* Tokens this generation may still draw before its limit (n_predict), -1 without a limit. */
int64_t mf_gen_n_left(const mf_gen *g);
/* Whether drawing token ends the generation as an end-of-generation token (false for every token
 * with ignore_eos, and for ids outside the vocabulary). A speculative decoder drafts nothing past one. */
bool mf_gen_is_eog(const mf_gen *g, int32_t token);

/* ==== Sample settings ====
 * Everything a user sets for one generation's sampling and stopping (the sampler
 * parameters, stop strings, token limit) together with the storage its lists live in, filled by the
 * command-line flags of a program or by a server request's JSON fields
 * (mf_sample_settings_from_json), so both front ends share one set of parameters and defaults. */

typedef struct mf_sample_settings {
    mf_sampler_params params; /* logit_bias and dry_breakers point into the storage below */
    const char **stop;        /* stop strings (owned copies) */
    size_t n_stop;
    long long n_predict; /* tokens to generate, -1 = until end of generation or context */
    bool seed_given;     /* a seed was set (otherwise the chosen random seed should be shown) */
    /* storage */
    mf_logit_bias *bias;
    size_t n_bias;
    char **breakers;
    size_t n_breakers;
} mf_sample_settings;

/* Defaults: mf_sampler_default_params(), no stop strings, n_predict -1. */
void mf_sample_settings_init(mf_sample_settings *s);
/* Frees the owned lists and leaves s empty; accepts NULL. */
void mf_sample_settings_free(mf_sample_settings *s);
/* dst = a deep copy of src (dst is initialized first; on failure it is left empty). */
mf_status mf_sample_settings_copy(mf_sample_settings *dst, const mf_sample_settings *src);

/* Append a stop string (copied). MF_ERR_ARG for an empty one. */
mf_status mf_sample_settings_add_stop(mf_sample_settings *s, const char *str);
/* Append a logit bias for a token id, or for the token(s) whose text is `text` when not NULL. */
mf_status mf_sample_settings_add_bias(mf_sample_settings *s, int32_t token, const char *text, float bias);
/* Append a DRY sequence breaker; the first one added replaces the defaults. Empty strings are
 * skipped as llama.cpp does. */
mf_status mf_sample_settings_add_breaker(mf_sample_settings *s, const char *str);
/* No DRY sequence breakers at all. */
void mf_sample_settings_clear_breakers(mf_sample_settings *s);

/* Apply the fields of a JSON object given as text (an API request), with llama.cpp server's names
 * (OpenAI's where they differ are accepted too): temperature, dynatemp_range, dynatemp_exponent,
 * top_k, top_p, min_p, typical_p, top_n_sigma, xtc_probability, xtc_threshold, min_keep,
 * repeat_last_n, repeat_penalty, frequency_penalty, presence_penalty, dry_multiplier, dry_base,
 * dry_allowed_length, dry_penalty_last_n, dry_sequence_breakers (array), mirostat, mirostat_tau,
 * mirostat_eta, seed (any 64-bit integer; -1 = random; outside 0 .. 2^32 - 2 folded to 32 bits), n_predict / max_tokens / max_completion_tokens, stop (string or
 * array), logit_bias (OpenAI's {"id": bias} object or llama.cpp's [[id or text, bias or false],
 * ...]), samplers (array of names, or a string of letters), ignore_eos. Other fields are ignored.
 * Fails with MF_ERR_FORMAT for text that is not a JSON object, MF_ERR_ARG naming the field and what
 * it should be, then with the range check of mf_sampler_params_check; s may be partly updated on
 * failure. */
mf_status mf_sample_settings_from_json(mf_sample_settings *s, const char *json);
/* The settings as a JSON object with the names mf_sample_settings_from_json reads, so that reading
 * it back into default settings gives the same settings (every field is written; logit biases as
 * [[id or text, bias or false], ...], DRY breakers only when they are not the defaults, seed -1 for
 * a random one). *out: a malloc'd NUL-terminated string (caller frees). MF_ERR_ARG for a value JSON
 * cannot hold (an infinite or NaN setting), MF_ERR_NOMEM. */
mf_status mf_sample_settings_to_json(const mf_sample_settings *s, char **out);

#ifdef __cplusplus
}
#endif
#endif /* MINFER_SAMPLE_H */
