/* settings.h: everything a user sets for one generation's sampling and stopping (the sampler
 * parameters, stop strings, token limit) together with the storage its lists live in, filled by the
 * command-line flags (src/cli/sample_args.c) or by a server request's JSON fields
 * (mf_sample_settings_from_json), so both front ends share one set of parameters and defaults. */
#ifndef MF_SAMPLE_SETTINGS_H
#define MF_SAMPLE_SETTINGS_H

#include "sample/sampler.h"

#include <jansson.h>

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

/* Append a stop string (copied). MF_ERR_ARG for an empty one. */
mf_status mf_sample_settings_add_stop(mf_sample_settings *s, const char *str);
/* Append a logit bias for a token id, or for the token(s) whose text is `text` when not NULL. */
mf_status mf_sample_settings_add_bias(mf_sample_settings *s, int32_t token, const char *text, float bias);
/* Append a DRY sequence breaker; the first one added replaces the defaults. Empty strings are
 * skipped as llama.cpp does. */
mf_status mf_sample_settings_add_breaker(mf_sample_settings *s, const char *str);
/* No DRY sequence breakers at all. */
void mf_sample_settings_clear_breakers(mf_sample_settings *s);

/* Apply a request object's fields, with llama.cpp server's names (OpenAI's where they differ are
 * accepted too): temperature, dynatemp_range, dynatemp_exponent, top_k, top_p, min_p, typical_p,
 * top_n_sigma, xtc_probability, xtc_threshold, min_keep, repeat_last_n, repeat_penalty,
 * frequency_penalty, presence_penalty, dry_multiplier, dry_base, dry_allowed_length,
 * dry_penalty_last_n, dry_sequence_breakers (array), mirostat, mirostat_tau, mirostat_eta, seed
 * (-1 = random), n_predict / max_tokens / max_completion_tokens, stop (string or array),
 * logit_bias (OpenAI's {"id": bias} object or llama.cpp's [[id or text, bias or false], ...]),
 * samplers (array of names, or a string of letters), ignore_eos. Other fields are ignored. Fails
 * with MF_ERR_ARG naming the field and what it should be, then with the range check of
 * mf_sampler_params_check; s may be partly updated on failure. */
mf_status mf_sample_settings_from_json(mf_sample_settings *s, const json_t *req);

#endif /* MF_SAMPLE_SETTINGS_H */
