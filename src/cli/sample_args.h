/* sample_args.h: the sampling and stopping flags every generating command takes, with llama.cpp's
 * names and defaults (--temp, --top-k, --top-p, --min-p, --typical,
 * --repeat-penalty, --dry-*, --xtc-*, --mirostat*, --logit-bias, --samplers, --seed, --stop, -n, ...).
 *
 * A command's option loop calls mf_cli_sample_arg for each argument first:
 *   mf_cli_sample_opts so;  mf_cli_sample_opts_init(&so);
 *   for (int i = 1; i < argc; i++) {
 *       int r = mf_cli_sample_arg(argc, argv, &i, &so);
 *       if (r < 0) { mf_cli_sample_opts_free(&so); return 2; }   // message already printed
 *       if (r > 0) continue;                                        // a sampling flag, consumed
 *       ... the command's own flags ...
 *   }
 *   then: vocab = mf_sampler_vocab_from_tokenizer(tok, n_logits, n_ctx);
 *         mf_gen_create(&so.params, so.stop, so.n_stop, so.n_predict, &vocab, &gen);  (minfer/sample.h)
 *         mf_cli_sample_report(stderr, mf_gen_sampler(gen));
 *   mf_cli_sample_opts_free(&so) once the generator exists (it copies what it needs).
 */
#ifndef MF_CLI_SAMPLE_ARGS_H
#define MF_CLI_SAMPLE_ARGS_H


#include "minfer.h"

#include <stdbool.h>
#include <stdio.h>

/* The settings the flags fill (minfer/sample.h): params, stop, n_stop, n_predict, seed_given. */
typedef mf_sample_settings mf_cli_sample_opts;

/* mf_sample_settings_init / mf_sample_settings_free under the names the commands use. */
void mf_cli_sample_opts_init(mf_cli_sample_opts *o);
void mf_cli_sample_opts_free(mf_cli_sample_opts *o);

/* If argv[*i] is a sampling or stop flag, parse it (and its value, advancing *i) into o and return 1;
 * return 0 when it is not one of these flags; print "minfer: <flag>: <problem>" and return -1 on a
 * bad or missing value. */
int mf_cli_sample_arg(int argc, char **argv, int *i, mf_cli_sample_opts *o);

/* The usage text block for these flags, with defaults. */
void mf_cli_sample_usage(FILE *f);

/* Print the chain and the seed to f, e.g. "sampler: logits -> top_k(40) -> ... -> dist(seed 42)"
 * and "seed: 42": a run without --seed can be repeated with the printed seed. */
void mf_cli_sample_report(FILE *f, const mf_sampler *s);

#endif /* MF_CLI_SAMPLE_ARGS_H */
