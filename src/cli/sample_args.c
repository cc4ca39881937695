/* sample_args.c: parsing of the sampling and stop flags for minfer's commands (see sample_args.h).
 * Self-contained (prints its own "minfer: ..." errors) so tests can compile it directly. */
#include "sample_args.h"
#include "cli.h"


#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void mf_cli_sample_opts_init(mf_cli_sample_opts *o) { mf_sample_settings_init(o); }
void mf_cli_sample_opts_free(mf_cli_sample_opts *o) { mf_sample_settings_free(o); }

/* Backslash escapes as a shell user would type them: \n \t \r \\ \" \' \xHH. */
static char *unescape(const char *s) {
    char *out = malloc(strlen(s) + 1), *w = out;
    if (!out) return NULL;
    for (; *s; s++) {
        if (*s != '\\' || !s[1]) {
            *w++ = *s;
            continue;
        }
        s++;
        switch (*s) {
        case 'n': *w++ = '\n'; break;
        case 't': *w++ = '\t'; break;
        case 'r': *w++ = '\r'; break;
        case '\\': *w++ = '\\'; break;
        case '"': *w++ = '"'; break;
        case '\'': *w++ = '\''; break;
        case 'x':
            if (isxdigit((unsigned char)s[1]) && isxdigit((unsigned char)s[2])) {
                char hex[3] = {s[1], s[2], 0};
                *w++ = (char)strtol(hex, NULL, 16);
                s += 2;
            } else {
                *w++ = '\\', *w++ = *s; /* not an escape: keep it */
            }
            break;
        default: *w++ = '\\', *w++ = *s; break;
        }
    }
    *w = 0;
    return out;
}

/* cli_parse_float into a float field. */
static bool parse_f(const char *flag, const char *s, double lo, double hi, float *out) {
    double v;
    if (!cli_parse_float(flag, s, lo, hi, &v)) return false;
    *out = (float)v;
    return true;
}

enum { K_FLOAT, K_INT };
static const struct {
    const char *name, *alias;
    int kind;
    size_t off;
    double lo, hi;
} num_flags[] = {
    {"--temp", "--temperature", K_FLOAT, offsetof(mf_sampler_params, temp), -1e6, 1e6},
    {"--dynatemp-range", NULL, K_FLOAT, offsetof(mf_sampler_params, dynatemp_range), 0, 1e6},
    {"--dynatemp-exp", NULL, K_FLOAT, offsetof(mf_sampler_params, dynatemp_exponent), 0, 1e6},
    {"--top-k", NULL, K_INT, offsetof(mf_sampler_params, top_k), -2147483647.0, 2147483647.0},
    {"--top-p", NULL, K_FLOAT, offsetof(mf_sampler_params, top_p), 0, 1},
    {"--min-p", NULL, K_FLOAT, offsetof(mf_sampler_params, min_p), 0, 1},
    {"--typical", "--typical-p", K_FLOAT, offsetof(mf_sampler_params, typ_p), 0, 1},
    {"--top-n-sigma", "--top-nsigma", K_FLOAT, offsetof(mf_sampler_params, top_n_sigma), -1e6, 1e6},
    {"--xtc-probability", NULL, K_FLOAT, offsetof(mf_sampler_params, xtc_probability), 0, 1},
    {"--xtc-threshold", NULL, K_FLOAT, offsetof(mf_sampler_params, xtc_threshold), 0, 1},
    {"--min-keep", NULL, K_INT, offsetof(mf_sampler_params, min_keep), 0, 2147483647.0},
    {"--repeat-last-n", NULL, K_INT, offsetof(mf_sampler_params, penalty_last_n), -1, 1 << 20},
    {"--repeat-penalty", NULL, K_FLOAT, offsetof(mf_sampler_params, penalty_repeat), 1e-6, 1e6},
    {"--frequency-penalty", NULL, K_FLOAT, offsetof(mf_sampler_params, penalty_freq), -1e6, 1e6},
    {"--presence-penalty", NULL, K_FLOAT, offsetof(mf_sampler_params, penalty_present), -1e6, 1e6},
    {"--dry-multiplier", NULL, K_FLOAT, offsetof(mf_sampler_params, dry_multiplier), 0, 1e6},
    {"--dry-base", NULL, K_FLOAT, offsetof(mf_sampler_params, dry_base), 0, 1e6},
    {"--dry-allowed-length", NULL, K_INT, offsetof(mf_sampler_params, dry_allowed_length), 0, 1 << 20},
    {"--dry-penalty-last-n", NULL, K_INT, offsetof(mf_sampler_params, dry_penalty_last_n), -1, 1 << 20},
    {"--mirostat", NULL, K_INT, offsetof(mf_sampler_params, mirostat), 0, 2},
    {"--mirostat-lr", NULL, K_FLOAT, offsetof(mf_sampler_params, mirostat_eta), 0, 1e6},
    {"--mirostat-ent", NULL, K_FLOAT, offsetof(mf_sampler_params, mirostat_tau), 0, 1e6},
};

static bool is(const char *a, const char *name) { return name && !strcmp(a, name); }

/* TOKEN(+|-)BIAS, where TOKEN is an id or a token's text: the split is at the first '+' or '-'
 * after the first character whose remainder is a whole number ("-inf" bans the token). */
static int parse_logit_bias(const char *flag, const char *v, mf_cli_sample_opts *o) {
    size_t len = strlen(v), k = 0;
    float bias = 0;
    for (size_t j = 1; j < len && !k; j++) {
        if (v[j] != '+' && v[j] != '-') continue;
        char *end;
        errno = 0;
        float b = strtof(v + j, &end);
        if (end != v + j && !*end && !errno && !isnan(b)) k = j, bias = b;
    }
    if (!k) {
        cli_error("%s: '%s' is not TOKEN(+|-)BIAS, e.g. 15043+1, 15043-inf or Hello-2.5", flag, v);
        return -1;
    }
    bool digits = true;
    for (size_t j = 0; j < k; j++) digits &= isdigit((unsigned char)v[j]) != 0;
    if (digits && k < 16) {
        char idbuf[16];
        memcpy(idbuf, v, k), idbuf[k] = 0;
        long long id;
        if (!cli_parse_int(flag, idbuf, 0, 2147483647LL, &id)) return -1;
        return mf_sample_settings_add_bias(o, (int32_t)id, NULL, bias) ? -1 : 1;
    }
    char *key = strndup(v, k);
    char *text = key ? unescape(key) : NULL;
    mf_status st = text ? mf_sample_settings_add_bias(o, 0, text, bias) : MF_ERR_NOMEM;
    free(key);
    free(text);
    return st ? -1 : 1;
}

/* llama.cpp's rule: the first --dry-sequence-breaker replaces the defaults; "none" clears all. */
static int add_breaker(const char *v, mf_cli_sample_opts *o) {
    if (!strcmp(v, "none")) {
        mf_sample_settings_clear_breakers(o);
        return 1;
    }
    char *b = unescape(v);
    mf_status st = b ? mf_sample_settings_add_breaker(o, b) : MF_ERR_NOMEM;
    free(b);
    return st ? -1 : 1;
}

int mf_cli_sample_arg(int argc, char **argv, int *i, mf_cli_sample_opts *o) {
    const char *a = argv[*i];
    if (!strcmp(a, "--ignore-eos")) {
        o->params.ignore_eos = true;
        return 1;
    }
    static const char *const valued[] = {"-s", "--seed", "-n", "--n-predict", "--predict", "-l", "--logit-bias",
                                         "--samplers", "--sampling-seq", "--sampler-seq", "--dry-sequence-breaker",
                                         "--stop"};
    bool known = false;
    for (size_t j = 0; j < CLI_ARRAY_LEN(valued); j++) known |= !strcmp(a, valued[j]);
    for (size_t j = 0; j < CLI_ARRAY_LEN(num_flags); j++) known |= is(a, num_flags[j].name) || is(a, num_flags[j].alias);
    if (!known) return 0;
    if (*i + 1 >= argc) {
        cli_error("%s needs a value", a);
        return -1;
    }
    const char *v = argv[++*i];

    for (size_t j = 0; j < CLI_ARRAY_LEN(num_flags); j++) {
        if (!is(a, num_flags[j].name) && !is(a, num_flags[j].alias)) continue;
        char *field = (char *)&o->params + num_flags[j].off;
        if (num_flags[j].kind == K_FLOAT) {
            float f;
            if (!parse_f(a, v, num_flags[j].lo, num_flags[j].hi, &f)) return -1;
            memcpy(field, &f, sizeof f);
        } else {
            long long x;
            if (!cli_parse_int(a, v, (long long)num_flags[j].lo, (long long)num_flags[j].hi, &x)) return -1;
            int32_t x32 = (int32_t)x;
            memcpy(field, &x32, sizeof x32);
        }
        return 1;
    }
    if (is(a, "-s") || is(a, "--seed")) {
        long long x;
        if (!cli_parse_int(a, v, -1, 4294967294LL, &x)) return -1;
        o->params.seed = x < 0 ? MF_SAMPLER_SEED_RANDOM : (uint32_t)x;
        o->seed_given = x >= 0;
        return 1;
    }
    if (is(a, "-n") || is(a, "--n-predict") || is(a, "--predict"))
        return cli_parse_int(a, v, -1, 1LL << 40, &o->n_predict) ? 1 : -1;
    if (is(a, "-l") || is(a, "--logit-bias")) return parse_logit_bias(a, v, o);
    if (is(a, "--samplers")) {
        if (mf_sampler_parse_stages(&o->params, v)) {
            cli_error("%s: %s", a, mf_last_error());
            return -1;
        }
        return 1;
    }
    if (is(a, "--sampling-seq") || is(a, "--sampler-seq")) {
        if (mf_sampler_parse_stage_chars(&o->params, v)) {
            cli_error("%s: %s", a, mf_last_error());
            return -1;
        }
        return 1;
    }
    if (is(a, "--dry-sequence-breaker")) return add_breaker(v, o);
    /* --stop */
    char *s = unescape(v);
    if (s && !s[0]) {
        free(s);
        cli_error("%s: the stop string is empty", a);
        return -1;
    }
    mf_status st = s ? mf_sample_settings_add_stop(o, s) : MF_ERR_NOMEM;
    free(s);
    return st ? -1 : 1;
}

void mf_cli_sample_usage(FILE *f) {
    fputs("sampling (llama.cpp's flags and defaults):\n"
          "  -s, --seed N              random seed, -1 = random (printed) (default: -1)\n"
          "  --temp N                  temperature, <= 0 = greedy (default: 0.8)\n"
          "  --dynatemp-range N        dynamic temperature: temp +- N by the entropy, 0 = off (default: 0)\n"
          "  --dynatemp-exp N          dynamic temperature exponent (default: 1.0)\n"
          "  --top-k N                 top-k, <= 0 = off (default: 40)\n"
          "  --top-p N                 top-p (nucleus), 1.0 = off (default: 0.95)\n"
          "  --min-p N                 min-p, 0.0 = off (default: 0.05)\n"
          "  --typical N               locally typical sampling, 1.0 = off (default: 1.0)\n"
          "  --top-n-sigma N           top-n-sigma, -1 = off (default: -1)\n"
          "  --xtc-probability N       XTC probability, 0.0 = off (default: 0.0)\n"
          "  --xtc-threshold N         XTC threshold, > 0.5 = off (default: 0.1)\n"
          "  --min-keep N              top-p, min-p, typical and XTC keep at least N tokens (default: 0)\n"
          "  --repeat-last-n N         penalty window, 0 = off, -1 = context size (default: 64)\n"
          "  --repeat-penalty N        repetition penalty, 1.0 = off (default: 1.0)\n"
          "  --frequency-penalty N     frequency penalty, 0.0 = off (default: 0.0)\n"
          "  --presence-penalty N      presence penalty, 0.0 = off (default: 0.0)\n"
          "  --dry-multiplier N        DRY multiplier, 0.0 = off (default: 0.0)\n"
          "  --dry-base N              DRY base (default: 1.75)\n"
          "  --dry-allowed-length N    DRY allowed repeat length (default: 2)\n"
          "  --dry-penalty-last-n N    DRY window, 0 = off, -1 = context size (default: -1)\n"
          "  --dry-sequence-breaker S  DRY sequence breaker (repeatable; replaces the defaults\n"
          "                            '\\n' ':' '\"' '*'; 'none' = no breakers)\n"
          "  --mirostat N              Mirostat 1 or 2, replacing the chain (default: 0 = off)\n"
          "  --mirostat-lr N           Mirostat learning rate eta (default: 0.1)\n"
          "  --mirostat-ent N          Mirostat target entropy tau (default: 5.0)\n"
          "  -l, --logit-bias T(+|-)B  add B to token T's logit; T is an id or a token's text\n"
          "                            (e.g. 15043+1, 15043-inf, Hello-2.5); repeatable\n"
          "  --ignore-eos              never end at an end-of-generation token\n"
          "  --samplers LIST           stage order, ';'-separated (default:\n"
          "                            penalties;dry;top_n_sigma;top_k;typ_p;top_p;min_p;xtc;temperature)\n"
          "  --sampling-seq LETTERS    the same as letters (default: edskypmxt)\n"
          "stopping:\n"
          "  -n, --n-predict N         tokens to generate, -1 = until end of generation (default: -1)\n"
          "  --stop S                  stop when S appears in the output, S not shown (repeatable;\n"
          "                            \\n \\t \\xHH escapes)\n",
          f);
}

void mf_cli_sample_report(FILE *f, const mf_sampler *s) {
    char desc[512];
    mf_sampler_describe(s, desc, sizeof desc);
    fprintf(f, "sampler: %s\nseed: %u\n", desc, (unsigned)mf_sampler_seed(s));
}
