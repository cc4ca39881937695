/* test_sample_settings.c: sampling settings from a server request's JSON (llama.cpp server and OpenAI
 * field names), their owned lists, and the errors for badly typed or out-of-range fields. */
#include "sample/settings.h"
#include "test.h"

#include <math.h>
#include <string.h>

static mf_status from(mf_sample_settings *s, const char *text) {
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    CHECKF(j != NULL, "bad test JSON: %s", err.text);
    mf_status st = j ? mf_sample_settings_apply_json(s, j) : MF_ERR_ARG;
    json_decref(j);
    return st;
}

static void test_fields(void) {
    mf_sample_settings s;
    mf_sample_settings_init(&s);
    CHECK(from(&s, "{\"temperature\": 0.5, \"top_k\": 7, \"top_p\": 0.9, \"min_p\": 0.1, \"typical_p\": 0.8,"
                   " \"top_n_sigma\": 1.5, \"xtc_probability\": 0.3, \"xtc_threshold\": 0.2, \"min_keep\": 2,"
                   " \"repeat_last_n\": -1, \"repeat_penalty\": 1.1, \"frequency_penalty\": 0.5,"
                   " \"presence_penalty\": -0.5, \"dry_multiplier\": 0.8, \"dry_base\": 2, \"dry_allowed_length\": 3,"
                   " \"dry_penalty_last_n\": 256, \"dry_sequence_breakers\": [\"\\n\\n\", \"###\"], \"mirostat\": 2,"
                   " \"mirostat_tau\": 4, \"mirostat_eta\": 0.2, \"seed\": 42, \"max_tokens\": 16,"
                   " \"stop\": [\"</s>\", \"\\nUser:\"], \"dynatemp_range\": 0.25, \"dynatemp_exponent\": 2,"
                   " \"ignore_eos\": true, \"samplers\": [\"top_k\", \"temperature\"], \"model\": \"x\"}") == MF_OK);
    const mf_sampler_params *p = &s.params;
    CHECK(p->temp == 0.5f && p->top_k == 7 && p->top_p == 0.9f && p->min_p == 0.1f && p->typ_p == 0.8f);
    CHECK(p->top_n_sigma == 1.5f && p->xtc_probability == 0.3f && p->xtc_threshold == 0.2f && p->min_keep == 2);
    CHECK(p->penalty_last_n == -1 && p->penalty_repeat == 1.1f && p->penalty_freq == 0.5f && p->penalty_present == -0.5f);
    CHECK(p->dry_multiplier == 0.8f && p->dry_base == 2.0f && p->dry_allowed_length == 3 && p->dry_penalty_last_n == 256);
    CHECK(p->n_dry_breakers == 2 && !strcmp(p->dry_breakers[0], "\n\n") && !strcmp(p->dry_breakers[1], "###"));
    CHECK(p->mirostat == 2 && p->mirostat_tau == 4.0f && p->mirostat_eta == 0.2f);
    CHECK(p->seed == 42 && s.seed_given && s.n_predict == 16 && p->ignore_eos);
    CHECK(p->dynatemp_range == 0.25f && p->dynatemp_exponent == 2.0f);
    CHECK(s.n_stop == 2 && !strcmp(s.stop[0], "</s>") && !strcmp(s.stop[1], "\nUser:"));
    CHECK(p->n_stages == 2 && p->stages[0] == MF_STAGE_TOP_K && p->stages[1] == MF_STAGE_TEMPERATURE);
    mf_sample_settings_free(&s);

    /* Absent fields keep the defaults; a single stop string; the letter form of samplers; n_predict. */
    mf_sample_settings_init(&s);
    CHECK(from(&s, "{\"stop\": \"END\", \"samplers\": \"kpt\", \"n_predict\": 5, \"seed\": -1, \"top_p\": null}") == MF_OK);
    CHECK(s.params.top_k == 40 && s.params.top_p == 0.95f && s.params.n_dry_breakers == 4);
    CHECK(s.n_stop == 1 && !strcmp(s.stop[0], "END") && s.n_predict == 5 && !s.seed_given);
    CHECK(s.params.n_stages == 3 && s.params.stages[1] == MF_STAGE_TOP_P && s.params.seed == MF_SAMPLER_SEED_RANDOM);
    CHECK(from(&s, "{\"dry_sequence_breakers\": []}") == MF_OK && s.params.n_dry_breakers == 0);
    mf_sample_settings_free(&s);

    /* OpenAI's seed is any int64: outside the sampler's 32 bits it is folded, reproducibly, never to
     * the random seed; 4294967295 is llama.cpp's "random" */
    static const struct { const char *json; uint32_t seed; bool given; } seeds[] = {
        {"{\"seed\": 0}", 0, true},
        {"{\"seed\": 4294967294}", 4294967294u, true},
        {"{\"seed\": 4294967295}", MF_SAMPLER_SEED_RANDOM, false},
        {"{\"seed\": 1099511627776}", 256u, true},                /* 2^40: halves 0x100 ^ 0 */
        {"{\"seed\": -7}", 0xFFFFFFF9u ^ 0xFFFFFFFFu, true},       /* halves XORed: 6 */
        {"{\"seed\": 9223372036854775807}", 0x7FFFFFFFu ^ 0xFFFFFFFFu, true},
        {"{\"seed\": -4294967296}", 0xFFFFFFFEu, true}, /* folds to the random seed: moved off it */
    };
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        mf_sample_settings_init(&s);
        CHECKF(from(&s, seeds[i].json) == MF_OK && s.params.seed == seeds[i].seed && s.seed_given == seeds[i].given,
               "%s: seed %u given %d", seeds[i].json, s.params.seed, (int)s.seed_given);
        mf_sample_settings_free(&s);
    }
}

static void test_logit_bias(void) {
    mf_sample_settings s;
    mf_sample_settings_init(&s);
    /* OpenAI: an object of decimal token ids. */
    CHECK(from(&s, "{\"logit_bias\": {\"15043\": -100, \"7\": 5.5}}") == MF_OK);
    CHECK(s.params.n_logit_bias == 2 && s.params.logit_bias == s.bias);
    bool seen15043 = false, seen7 = false;
    for (size_t i = 0; i < s.n_bias; i++) {
        seen15043 |= s.bias[i].token == 15043 && s.bias[i].bias == -100.0f && !s.bias[i].text;
        seen7 |= s.bias[i].token == 7 && s.bias[i].bias == 5.5f;
    }
    CHECK(seen15043 && seen7);
    /* llama.cpp: pairs of id or text and a number or false (never). */
    CHECK(from(&s, "{\"logit_bias\": [[12, false], [\" Hello\", 2], [\"3x\", -1]]}") == MF_OK);
    CHECK(s.n_bias == 5);
    CHECK(s.bias[2].token == 12 && isinf(s.bias[2].bias) && s.bias[2].bias < 0);
    CHECK(s.bias[3].text && !strcmp(s.bias[3].text, " Hello") && s.bias[3].bias == 2.0f);
    CHECK(s.bias[4].text && !strcmp(s.bias[4].text, "3x"));
    mf_sample_settings_free(&s);
}

static void test_errors(void) {
    static const char *const bad[] = {
        "[1, 2]",
        "{\"temperature\": \"hot\"}",
        "{\"top_k\": 2.5}",
        "{\"top_p\": 1.5}",
        "{\"mirostat\": 3}",
        "{\"seed\": 1.5}",
        "{\"seed\": \"7\"}",
        "{\"seed\": 1e30}",
        "{\"max_tokens\": -3}",
        "{\"stop\": 5}",
        "{\"stop\": [\"a\", 1]}",
        "{\"logit_bias\": {\"12\": \"high\"}}",
        "{\"logit_bias\": [[12]]}",
        "{\"logit_bias\": [[-4, 1]]}",
        "{\"samplers\": [\"top_k\", \"warp\"]}",
        "{\"samplers\": \"kq\"}",
        "{\"ignore_eos\": 1}",
        "{\"repeat_last_n\": -2}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        mf_sample_settings s;
        mf_sample_settings_init(&s);
        mf_status st = from(&s, bad[i]);
        CHECKF(st == MF_ERR_ARG && mf_last_error()[0], "%s: status %d", bad[i], (int)st);
        mf_sample_settings_free(&s);
    }
    mf_sample_settings s;
    mf_sample_settings_init(&s);
    CHECK(from(&s, "{\"top_k\": \"many\"}") == MF_ERR_ARG && strstr(mf_last_error(), "top_k"));
    CHECK(mf_sample_settings_add_stop(&s, "") == MF_ERR_ARG);
    mf_sample_settings_free(&s);
    mf_sample_settings_free(NULL);
}

int main(void) {
    test_fields();
    test_logit_bias();
    test_errors();
    return test_summary("test_sample_settings");
}
