/* test_sample_args.c: the sampling and stop flags of the command line (src/cli/sample_args.c, compiled
 * in here since the CLI sources are not part of the library): values, aliases, logit bias by id and
 * by text, DRY breakers, sampler order, escapes, and rejected values. */
#include "cli/cli_util.c"
#include "cli/sample_args.c"

#include "test.h"

/* Parse one command line; returns the last mf_cli_sample_arg result (1, 0 or -1). */
static int parse(mf_cli_sample_opts *o, int argc, char **argv) {
    int r = 0;
    for (int i = 0; i < argc; i++) {
        r = mf_cli_sample_arg(argc, argv, &i, o);
        if (r <= 0) return r;
    }
    return r;
}

#define ARGV(...) ((char *[]){__VA_ARGS__})
#define NARGS(...) ((int)(sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, ...) parse(o, NARGS(__VA_ARGS__), ARGV(__VA_ARGS__))

static void test_values(void) {
    mf_cli_sample_opts o;
    mf_cli_sample_opts_init(&o);
    CHECK(o.params.top_k == 40 && o.n_predict == -1 && !o.seed_given && o.params.seed == MF_SAMPLER_SEED_RANDOM);
    CHECK(PARSE(&o, "--temp", "0.5", "--top-k", "7", "--top-p", "0.9", "--min-p", "0.1", "--typical", "0.8",
                "--repeat-penalty", "1.1", "--repeat-last-n", "-1", "--frequency-penalty", "0.2",
                "--presence-penalty", "-0.3", "--dry-multiplier", "0.8", "--dry-base", "2",
                "--dry-allowed-length", "3", "--dry-penalty-last-n", "128", "--xtc-probability", "0.5",
                "--xtc-threshold", "0.2", "--mirostat", "2", "--mirostat-lr", "0.2", "--mirostat-ent", "4",
                "-s", "42", "-n", "16", "--top-n-sigma", "1.5", "--min-keep", "2", "--ignore-eos") == 1);
    const mf_sampler_params *p = &o.params;
    CHECK(p->temp == 0.5f && p->top_k == 7 && p->top_p == 0.9f && p->min_p == 0.1f && p->typ_p == 0.8f);
    CHECK(p->penalty_repeat == 1.1f && p->penalty_last_n == -1 && p->penalty_freq == 0.2f && p->penalty_present == -0.3f);
    CHECK(p->dry_multiplier == 0.8f && p->dry_base == 2.0f && p->dry_allowed_length == 3 && p->dry_penalty_last_n == 128);
    CHECK(p->xtc_probability == 0.5f && p->xtc_threshold == 0.2f);
    CHECK(p->mirostat == 2 && p->mirostat_eta == 0.2f && p->mirostat_tau == 4.0f);
    CHECK(p->seed == 42 && o.seed_given && o.n_predict == 16 && p->top_n_sigma == 1.5f && p->min_keep == 2);
    CHECK(p->ignore_eos);
    CHECK(mf_sampler_params_check(p) == MF_OK);
    CHECK(PARSE(&o, "--seed", "-1", "--temperature", "0") == 1);
    CHECK(o.params.seed == MF_SAMPLER_SEED_RANDOM && !o.seed_given && o.params.temp == 0.0f);
    mf_cli_sample_opts_free(&o);
}

static void test_lists(void) {
    mf_cli_sample_opts o;
    mf_cli_sample_opts_init(&o);
    CHECK(PARSE(&o, "-l", "15043+1", "--logit-bias", "7-inf", "-l", "Hello-2.5", "-l", "a-b+1e-1") == 1);
    CHECK(o.params.n_logit_bias == 4 && o.params.logit_bias == o.bias);
    CHECK(o.bias[0].token == 15043 && o.bias[0].bias == 1.0f && !o.bias[0].text);
    CHECK(o.bias[1].token == 7 && isinf(o.bias[1].bias) && o.bias[1].bias < 0);
    CHECK(o.bias[2].text && !strcmp(o.bias[2].text, "Hello") && o.bias[2].bias == -2.5f);
    CHECK(o.bias[3].text && !strcmp(o.bias[3].text, "a-b") && o.bias[3].bias == 0.1f);

    CHECK(o.params.n_dry_breakers == 4 && o.params.dry_breakers == mf_sampler_default_breakers);
    CHECK(PARSE(&o, "--dry-sequence-breaker", "\\n\\n", "--dry-sequence-breaker", "###") == 1);
    CHECK(o.params.n_dry_breakers == 2 && !strcmp(o.params.dry_breakers[0], "\n\n") &&
          !strcmp(o.params.dry_breakers[1], "###"));
    CHECK(PARSE(&o, "--dry-sequence-breaker", "none") == 1 && o.params.n_dry_breakers == 0);

    CHECK(PARSE(&o, "--stop", "</s>", "--stop", "\\nUser:", "--stop", "\\x41") == 1);
    CHECK(o.n_stop == 3 && !strcmp(o.stop[0], "</s>") && !strcmp(o.stop[1], "\nUser:") && !strcmp(o.stop[2], "A"));

    CHECK(PARSE(&o, "--samplers", "top_k;temperature") == 1);
    CHECK(o.params.n_stages == 2 && o.params.stages[1] == MF_STAGE_TEMPERATURE);
    CHECK(PARSE(&o, "--sampling-seq", "kpt") == 1);
    CHECK(o.params.n_stages == 3 && o.params.stages[1] == MF_STAGE_TOP_P);
    mf_cli_sample_opts_free(&o);
}

static void test_errors(void) {
    mf_cli_sample_opts o;
    mf_cli_sample_opts_init(&o);
    fprintf(stderr, "(the errors below are expected)\n");
    CHECK(PARSE(&o, "--top-p", "1.5") == -1);
    CHECK(PARSE(&o, "--top-k", "many") == -1);
    CHECK(PARSE(&o, "--mirostat", "3") == -1);
    CHECK(PARSE(&o, "--seed", "-2") == -1);
    CHECK(PARSE(&o, "--repeat-last-n", "-2") == -1);
    CHECK(PARSE(&o, "-l", "15043") == -1);
    CHECK(PARSE(&o, "-l", "15043+x") == -1);
    CHECK(PARSE(&o, "--samplers", "top_k;warp") == -1);
    CHECK(PARSE(&o, "--sampling-seq", "kq") == -1);
    CHECK(PARSE(&o, "--stop", "") == -1);
    CHECK(PARSE(&o, "--temp") == -1); /* missing value */
    CHECK(PARSE(&o, "--model-only-flag", "x") == 0);
    CHECK(PARSE(&o, "prompt") == 0);
    CHECK(o.params.top_p == 0.95f && o.params.top_k == 40 && o.params.n_stages == 9);
    mf_cli_sample_opts_free(&o);
    mf_cli_sample_opts_free(NULL);
    /* The usage text names every flag the parser accepts. */
    char buf[8192] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    mf_cli_sample_usage(f);
    fclose(f);
    for (size_t j = 0; j < CLI_ARRAY_LEN(num_flags); j++) CHECKF(strstr(buf, num_flags[j].name), "%s", num_flags[j].name);
    CHECK(strstr(buf, "--stop") && strstr(buf, "--samplers") && strstr(buf, "--logit-bias") && strstr(buf, "--seed"));
}

/* The tokenizer bridge and the report line the run command prints. */
static void test_vocab_bridge(void) {
    mf_gguf *g = NULL;
    mf_tokenizer *tok = NULL;
    if (mf_gguf_open(fixture("models/vocab-qwen2.5.gguf"), &g) || mf_tokenizer_load(g, &tok)) {
        CHECKF(0, "loading the vocabulary: %s", mf_last_error());
        mf_gguf_free(g);
        return;
    }
    int32_t nv = mf_tokenizer_n_vocab(tok);
    mf_sampler_vocab v = mf_sampler_vocab_from_tokenizer(tok, nv, 256);
    CHECK(v.n_vocab == nv && v.n_ctx == 256 && v.n_eog > 0 && v.piece);
    int32_t id = mf_tokenizer_find(tok, "\xc4\xa0Hello", 7); /* stored as "Ġ" "Hello" */
    size_t len = 0;
    const char *text = id >= 0 ? v.piece(v.user, id, &len) : NULL;
    CHECK(text && len == 6 && !memcmp(text, " Hello", 6));
    CHECK(v.piece(v.user, nv + 5, &len) == NULL);
    int32_t im_start = mf_tokenizer_find(tok, "<|im_start|>", 12);
    CHECK(im_start >= 0 && (text = v.piece(v.user, im_start, &len)) && len == 12);
    CHECK(v.show && v.show(v.user, im_start, &len) && len == 0); /* control tokens are not shown */
    mf_cli_sample_opts o;
    mf_cli_sample_opts_init(&o);
    CHECK(PARSE(&o, "--seed", "31", "-l", " Hello+2", "--dry-multiplier", "0.5") == 1);
    mf_sampler *s = NULL;
    CHECKF(mf_sampler_create(&o.params, &v, &s) == MF_OK, "%s", mf_last_error());
    char buf[1024] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    if (s) mf_cli_sample_report(f, s);
    fclose(f);
    CHECKF(strstr(buf, "seed: 31\n") && strstr(buf, "logit_bias(1)") && strstr(buf, "dry("), "report: %s", buf);
    mf_sampler_free(s);
    mf_cli_sample_opts_free(&o);
    mf_tokenizer_free(tok);
    mf_gguf_free(g);
}

int main(void) {
    test_vocab_bridge();
    test_values();
    test_lists();
    test_errors();
    return test_summary("test_sample_args");
}
