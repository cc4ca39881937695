/* model_args.h: the model, prompt and context flags `minfer run` and `minfer chat` share, under
 * minfer's names and llama.cpp's (-m, -p, -f, -sys, -c/--ctx-size, -t, -b/-ub, -ctk/-ctv, -ngl), the
 * prompt from an argument, a file or standard input ("-"), and the checks every prompt gets (valid
 * UTF-8) and every thread count (capped at the CPUs there are).
 *
 * A command's option loop:
 *   for (int i = 1; i < argc; i++) {
 *       if (cli_end_of_options(argv[i], &mo)) continue;               // "--"
 *       if (!mo.end_of_options) { r = mf_cli_sample_arg(...); r = cli_model_arg(argc, argv, &i, &mo); ... }
 *       else or for a positional argument: cli_model_positional(&mo, "run", argv[i])
 *   }
 *   cli_model_finish(&mo, "run", need_prompt);                         // reads -f / "-", checks
 */
#ifndef MF_CLI_MODEL_ARGS_H
#define MF_CLI_MODEL_ARGS_H

#include "minfer.h"

#include <stdbool.h>
#include <stdio.h>

typedef struct cli_model_opts {
    const char *model;       /* -m / the first positional argument */
    const char *prompt;      /* -p / the second positional argument ("-": standard input) */
    const char *prompt_file; /* -f FILE ("-": standard input) */
    const char *system;      /* -sys / --system */
    bool no_fuse, no_mmap, no_repack, kv_f32;
    const char *ctk, *ctv;   /* -ctk / -ctv as given */
    long long n_ctx, threads, ubatch;
    bool ubatch_set, end_of_options;
    char *prompt_text; /* owned: what -f or "-" read; prompt points to it */
} cli_model_opts;

void cli_model_opts_init(cli_model_opts *o);
void cli_model_opts_free(cli_model_opts *o);

/* "--" (the first time): every later argument is positional. */
bool cli_end_of_options(const char *arg, cli_model_opts *o);
/* If argv[*i] is one of these flags, take it (and its value) and return 1; 0 when it is not; -1
 * after printing an error. */
int cli_model_arg(int argc, char **argv, int *i, cli_model_opts *o);
/* A positional argument: the model, then the prompt; false (error printed) for a third one. */
bool cli_model_positional(cli_model_opts *o, const char *cmd, const char *arg);
/* After the option loop: read the prompt from -f or standard input ("-"), check that the prompt and
 * the system prompt are valid UTF-8, cap -t at the CPUs online (with a warning), and say what -ngl
 * and -ctk/-ctv mean here. false after printing an error. */
bool cli_model_finish(cli_model_opts *o, const char *cmd);
/* Read all of standard input (NULL on a read error, printed). */
char *cli_read_stdin(void);

/* Context parameters from the flags and the environment (cli_context_env). */
mf_context_params cli_model_context_params(const cli_model_opts *o);
/* The usage lines of these flags. */
void cli_model_usage(FILE *f);

#endif /* MF_CLI_MODEL_ARGS_H */
