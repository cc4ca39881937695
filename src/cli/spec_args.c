/* spec_args.c: the speculative-decoding flags of `minfer run` and `minfer chat` (spec_args.h). */
#include "spec_args.h"

#include "cli.h"

void cli_spec_opts_init(cli_spec_opts *o) {
    memset(o, 0, sizeof *o);
    o->p = mf_spec_default_params();
}

int cli_spec_arg(int argc, char **argv, int *i, cli_spec_opts *o) {
    const char *a = argv[*i], *v;
    long long n;
    double x;
    int r;
    if (!strcmp(a, "--lookup")) {
        o->p.lookup = o->on = true;
        return 1;
    }
    if ((r = cli_take_value(argc, argv, i, "-md", &v)) || (r = cli_take_value(argc, argv, i, "--model-draft", &v))) {
        if (r > 0) o->draft_path = v, o->on = true;
        return r;
    }
    if ((r = cli_take_value(argc, argv, i, "--draft-max", &v)) || (r = cli_take_value(argc, argv, i, "--draft", &v)) ||
        (r = cli_take_value(argc, argv, i, "--draft-n", &v))) {
        if (r < 0 || !cli_parse_int(a, v, 1, MF_SPEC_MAX_DRAFT, &n)) return -1;
        o->p.draft_max = (int32_t)n;
        if (!o->tuning) o->tuning = a;
        return 1;
    }
    if ((r = cli_take_value(argc, argv, i, "--draft-min", &v))) {
        if (r < 0 || !cli_parse_int(a, v, 0, MF_SPEC_MAX_DRAFT, &n)) return -1;
        o->p.draft_min = (int32_t)n;
        if (!o->tuning) o->tuning = a;
        return 1;
    }
    if ((r = cli_take_value(argc, argv, i, "--draft-p-min", &v))) {
        if (r < 0 || !cli_parse_float(a, v, 0, 1, &x)) return -1;
        o->p.p_min = (float)x;
        if (!o->tuning) o->tuning = a;
        return 1;
    }
    if ((r = cli_take_value(argc, argv, i, "-td", &v)) || (r = cli_take_value(argc, argv, i, "--threads-draft", &v))) {
        if (r < 0 || !cli_parse_int(a, v, 1, 1 << 20, &n)) return -1;
        o->p.draft_threads = (int32_t)n;
        if (!o->tuning) o->tuning = a;
        return 1;
    }
    return 0;
}

bool cli_spec_create(cli_spec_opts *o, const mf_model *target, mf_context *ctx, int32_t seq,
                     const mf_sampler_params *sampling) {
    if (!o->on) {
        cli_spec_warn_unused(o);
        return true;
    }
    if (o->draft_path && o->p.lookup) {
        cli_error("--model-draft and --lookup are two draft sources: choose one");
        return false;
    }
    if (o->p.draft_min > o->p.draft_max) {
        cli_error("--draft-min %d is more than --draft-max %d", o->p.draft_min, o->p.draft_max);
        return false;
    }
    mf_status st;
    if (o->draft_path) {
        const char *path = cli_model(o->draft_path);
        if (!path) return false;
        const mf_model_load_params lp = cli_load_params(false, false);
        if ((st = mf_model_load_ex(path, &lp, &o->draft))) {
            cli_error("draft model %s: %s", o->draft_path, mf_last_error());
            return false;
        }
        if ((st = mf_spec_check_vocab(target, o->draft))) {
            cli_error("draft model %s: %s", o->draft_path, mf_last_error());
            return false;
        }
        o->p.draft = o->draft;
    }
    if ((st = mf_spec_create(target, ctx, seq, sampling, &o->p, &o->spec))) {
        cli_error_status(st, "speculative decoding");
        return false;
    }
    return true;
}

void cli_spec_summary(cli_spec_opts *o, char *buf, size_t size) {
    buf[0] = 0;
    if (!o->spec) return;
    mf_spec_stats now, s;
    mf_spec_get_stats(o->spec, &now);
    const mf_spec_stats *r = &o->reported;
    s = (mf_spec_stats){.rounds = now.rounds - r->rounds, .drafted = now.drafted - r->drafted,
                        .accepted = now.accepted - r->accepted, .draft_s = now.draft_s - r->draft_s,
                        .verify_s = now.verify_s - r->verify_s};
    o->reported = now;
    snprintf(buf, size, " | %s: %lld drafted, %lld accepted (%.1f %%), %lld passes of %.2f ms, drafting %.2f s",
             o->p.lookup ? "lookup" : "draft", (long long)s.drafted, (long long)s.accepted,
             s.drafted ? 100.0 * (double)s.accepted / (double)s.drafted : 0.0, (long long)s.rounds,
             s.rounds ? 1e3 * s.verify_s / (double)s.rounds : 0.0, s.draft_s);
}

void cli_spec_warn_unused(const cli_spec_opts *o) {
    if (!o->on && o->tuning)
        fprintf(stderr, "minfer: warning: %s has no effect without a draft source (-md FILE or --lookup)\n", o->tuning);
}

void cli_spec_opts_free(cli_spec_opts *o) {
    mf_spec_free(o->spec);
    mf_model_free(o->draft);
    o->spec = NULL, o->draft = NULL;
}

void cli_spec_usage(FILE *f) {
    fprintf(f, "speculative decoding (docs/spec.md; the output is the one plain decoding gives):\n"
               "  -md, --model-draft FILE  draft with this smaller model of the same vocabulary\n"
               "  --lookup               draft by n-gram lookup in the prompt and the text so far\n"
               "  --draft-max N          draft at most N tokens per pass (default 16)\n"
               "  --draft-min N          draft at least N tokens or none (default 0; = --draft-max fixes the depth)\n"
               "  --draft-p-min P        a draft model also stops below this top probability (default 0: its\n"
               "                         confidence, calibrated by what the target keeps, decides)\n"
               "  -td, --threads-draft N threads of the draft model (default: as -t)\n");
}
