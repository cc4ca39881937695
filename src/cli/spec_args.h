/* spec_args.h: the speculative-decoding flags `minfer run` and `minfer chat` share (llama.cpp's
 * names: -md/--model-draft, --draft-max/--draft, --draft-min, --draft-p-min, -td/--threads-draft,
 * and --lookup for n-gram lookup), loading the draft model and the final speed line. */
#ifndef MF_CLI_SPEC_ARGS_H
#define MF_CLI_SPEC_ARGS_H

#include "minfer.h"

#include <stdio.h>

typedef struct cli_spec_opts {
    const char *draft_path; /* -md FILE */
    mf_spec_params p;
    bool on;                /* -md or --lookup given */
    mf_model *draft;        /* loaded by cli_spec_create */
    mf_spec *spec;
    mf_spec_stats reported; /* the counters at the last summary */
    const char *tuning;     /* the first draft tuning flag given (--draft-max, ...), or NULL */
} cli_spec_opts;

void cli_spec_opts_init(cli_spec_opts *o);
/* If argv[*i] is one of the flags, take it (and its value): 1; 0 when it is not; -1 after an error. */
int cli_spec_arg(int argc, char **argv, int *i, cli_spec_opts *o);
/* Load the draft model (checking its vocabulary) and create the decoder for seq of ctx. false after
 * printing the error. Does nothing (true) when no flag asked for speculation. */
bool cli_spec_create(cli_spec_opts *o, const mf_model *target, mf_context *ctx, int32_t seq,
                     const mf_sampler_params *sampling);
/* " | draft: N drafted, M accepted (R %), P passes of T ms, drafting S s" for the speed line, counting
 * since the last summary (a chat turn's, a run's); "" when off. */
void cli_spec_summary(cli_spec_opts *o, char *buf, size_t size);
void cli_spec_opts_free(cli_spec_opts *o);
/* A tuning flag without a draft source does nothing: say so on stderr (the programs call it once
 * their flags are read). */
void cli_spec_warn_unused(const cli_spec_opts *o);
void cli_spec_usage(FILE *f);

#endif /* MF_CLI_SPEC_ARGS_H */
