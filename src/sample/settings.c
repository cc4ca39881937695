/* settings.c: sampling and stopping settings with owned lists, and their JSON request form (see
 * settings.h). */
#include "sample/settings.h"

#include "core/core.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void mf_sample_settings_init(mf_sample_settings *s) {
    memset(s, 0, sizeof *s);
    s->params = mf_sampler_default_params();
    s->n_predict = -1;
}

void mf_sample_settings_free(mf_sample_settings *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n_stop; i++) free((char *)s->stop[i]);
    free(s->stop);
    for (size_t i = 0; i < s->n_bias; i++) free((char *)s->bias[i].text);
    free(s->bias);
    for (size_t i = 0; i < s->n_breakers; i++) free(s->breakers[i]);
    free(s->breakers);
    memset(s, 0, sizeof *s);
}

mf_status mf_sample_settings_copy(mf_sample_settings *dst, const mf_sample_settings *src) {
    mf_sample_settings_init(dst);
    dst->params = src->params;
    dst->params.logit_bias = NULL, dst->params.n_logit_bias = 0;
    dst->n_predict = src->n_predict;
    dst->seed_given = src->seed_given;
    mf_status st = MF_OK;
    for (size_t i = 0; i < src->n_stop && !st; i++) st = mf_sample_settings_add_stop(dst, src->stop[i]);
    for (size_t i = 0; i < src->n_bias && !st; i++)
        st = mf_sample_settings_add_bias(dst, src->bias[i].token, src->bias[i].text, src->bias[i].bias);
    if (!st && src->params.dry_breakers != mf_sampler_default_breakers) {
        mf_sample_settings_clear_breakers(dst);
        for (size_t i = 0; i < src->params.n_dry_breakers && !st; i++) {
            char *copy = mf_strdup(src->params.dry_breakers[i]);
            char **nb = copy ? mf_realloc(dst->breakers, (dst->n_breakers + 1) * sizeof *nb) : NULL;
            if (!nb) {
                free(copy);
                st = MF_ERR_NOMEM;
                break;
            }
            nb[dst->n_breakers++] = copy;
            dst->breakers = nb;
        }
        dst->params.dry_breakers = (const char *const *)dst->breakers;
        dst->params.n_dry_breakers = dst->n_breakers;
    }
    if (st) mf_sample_settings_free(dst);
    return st;
}

mf_status mf_sample_settings_add_stop(mf_sample_settings *s, const char *str) {
    if (!str || !str[0]) return mf_fail(MF_ERR_ARG, "stop string %zu is empty", s->n_stop);
    char *copy = mf_strdup(str);
    const char **ns = copy ? mf_realloc((void *)s->stop, (s->n_stop + 1) * sizeof *ns) : NULL;
    if (!ns) {
        free(copy);
        return MF_ERR_NOMEM;
    }
    ns[s->n_stop++] = copy;
    s->stop = ns;
    return MF_OK;
}

mf_status mf_sample_settings_add_bias(mf_sample_settings *s, int32_t token, const char *text, float bias) {
    char *copy = NULL;
    if (text && !(copy = mf_strdup(text))) return MF_ERR_NOMEM;
    mf_logit_bias *nb = mf_realloc(s->bias, (s->n_bias + 1) * sizeof *nb);
    if (!nb) {
        free(copy);
        return MF_ERR_NOMEM;
    }
    nb[s->n_bias++] = (mf_logit_bias){.token = token, .bias = bias, .text = copy};
    s->bias = nb;
    s->params.logit_bias = s->bias;
    s->params.n_logit_bias = s->n_bias;
    return MF_OK;
}

void mf_sample_settings_clear_breakers(mf_sample_settings *s) {
    for (size_t i = 0; i < s->n_breakers; i++) free(s->breakers[i]);
    s->n_breakers = 0;
    s->params.dry_breakers = (const char *const *)s->breakers;
    s->params.n_dry_breakers = 0;
}

mf_status mf_sample_settings_add_breaker(mf_sample_settings *s, const char *str) {
    if (s->params.dry_breakers == mf_sampler_default_breakers) mf_sample_settings_clear_breakers(s);
    if (!str || !str[0]) return MF_OK;
    char *copy = mf_strdup(str);
    char **nb = copy ? mf_realloc(s->breakers, (s->n_breakers + 1) * sizeof *nb) : NULL;
    if (!nb) {
        free(copy);
        return MF_ERR_NOMEM;
    }
    nb[s->n_breakers++] = copy;
    s->breakers = nb;
    s->params.dry_breakers = (const char *const *)s->breakers;
    s->params.n_dry_breakers = s->n_breakers;
    return MF_OK;
}

/* JSON field helpers: absent or null leaves the value as is. */

static mf_status get_float(const json_t *req, const char *key, float *out) {
    const json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return MF_OK;
    const double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(fabs(d) <= FLT_MAX)) return mf_fail(MF_ERR_ARG, "request field '%s' must be a finite number", key);
    *out = (float)d;
    return MF_OK;
}

static mf_status get_int(const json_t *req, const char *key, long long lo, long long hi, long long *out) {
    const json_t *v = json_object_get(req, key);
    if (!v || json_is_null(v)) return MF_OK;
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (!(d == floor(d)) || d < (double)lo || d > (double)hi)
        return mf_fail(MF_ERR_ARG, "request field '%s' must be an integer in [%lld, %lld]", key, lo, hi);
    *out = json_is_integer(v) ? (long long)json_integer_value(v) : (long long)d;
    return MF_OK;
}

static mf_status get_i32(const json_t *req, const char *key, long long lo, long long hi, int32_t *out) {
    long long x = *out;
    mf_status st = get_int(req, key, lo, hi, &x);
    *out = (int32_t)x;
    return st;
}

/* One logit bias entry: key a token id (integer or decimal string) or a token's text; value a
 * number, or false for "never" (-inf) as llama.cpp's server allows. */
static mf_status add_json_bias(mf_sample_settings *s, const json_t *key, const char *key_str, const json_t *val) {
    float bias;
    if (json_is_false(val)) bias = -INFINITY;
    else if (json_is_number(val)) bias = (float)json_number_value(val);
    else return mf_fail(MF_ERR_ARG, "request field 'logit_bias': each bias must be a number or false");
    if (key && json_is_integer(key)) {
        json_int_t id = json_integer_value(key);
        if (id < 0 || id > INT32_MAX) return mf_fail(MF_ERR_ARG, "request field 'logit_bias': token %lld is negative or too large", (long long)id);
        return mf_sample_settings_add_bias(s, (int32_t)id, NULL, bias);
    }
    if (key) key_str = json_string_value(key);
    if (!key_str || !key_str[0]) return mf_fail(MF_ERR_ARG, "request field 'logit_bias': each key must be a token id or a non-empty text");
    char *end;
    errno = 0;
    long long id = strtoll(key_str, &end, 10);
    if (!*end && !errno && id >= 0 && id <= INT32_MAX && key_str[0] >= '0' && key_str[0] <= '9')
        return mf_sample_settings_add_bias(s, (int32_t)id, NULL, bias);
    return mf_sample_settings_add_bias(s, 0, key_str, bias);
}

static mf_status json_bias(mf_sample_settings *s, const json_t *lb) {
    mf_status st = MF_OK;
    if (json_is_object(lb)) {
        const char *k;
        const json_t *v;
        json_object_foreach((json_t *)lb, k, v) {
            if ((st = add_json_bias(s, NULL, k, v))) return st;
        }
        return MF_OK;
    }
    if (!json_is_array(lb)) return mf_fail(MF_ERR_ARG, "request field 'logit_bias' must be an object or an array of [token, bias]");
    size_t i;
    const json_t *e;
    json_array_foreach(lb, i, e) {
        if (!json_is_array(e) || json_array_size(e) != 2)
            return mf_fail(MF_ERR_ARG, "request field 'logit_bias'[%zu] must be a [token, bias] pair", i);
        if ((st = add_json_bias(s, json_array_get(e, 0), NULL, json_array_get(e, 1)))) return st;
    }
    return MF_OK;
}

static mf_status json_strings(const json_t *v, const char *key, mf_sample_settings *s,
                              mf_status (*add)(mf_sample_settings *, const char *)) {
    if (json_is_string(v)) return json_string_value(v)[0] ? add(s, json_string_value(v)) : MF_OK;
    if (!json_is_array(v)) return mf_fail(MF_ERR_ARG, "request field '%s' must be a string or an array of strings", key);
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        if (!json_is_string(e)) return mf_fail(MF_ERR_ARG, "request field '%s'[%zu] must be a string", key, i);
        mf_status st = json_string_value(e)[0] ? add(s, json_string_value(e)) : MF_OK;
        if (st) return st;
    }
    return MF_OK;
}

static mf_status json_samplers(mf_sample_settings *s, const json_t *v) {
    if (json_is_string(v)) return mf_sampler_parse_stage_chars(&s->params, json_string_value(v));
    if (!json_is_array(v)) return mf_fail(MF_ERR_ARG, "request field 'samplers' must be an array of names or a string of letters");
    mf_sampler_params p = s->params;
    p.n_stages = 0;
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        const char *name = json_string_value(e);
        mf_sampler_stage st = name ? mf_sampler_stage_from_name(name, strlen(name)) : MF_STAGE_COUNT;
        if (st == MF_STAGE_COUNT)
            return mf_fail(MF_ERR_ARG, "request field 'samplers'[%zu]: unknown sampler (valid: penalties, dry, "
                                       "top_n_sigma, top_k, typ_p, top_p, min_p, xtc, temperature)", i);
        if (p.n_stages == MF_SAMPLER_MAX_STAGES) return mf_fail(MF_ERR_ARG, "request field 'samplers': more than %d", MF_SAMPLER_MAX_STAGES);
        p.stages[p.n_stages++] = st;
    }
    s->params.n_stages = p.n_stages;
    memcpy(s->params.stages, p.stages, sizeof p.stages);
    return MF_OK;
}

mf_status mf_sample_settings_apply_json(mf_sample_settings *s, const json_t *req) {
    if (!json_is_object(req)) return mf_fail(MF_ERR_ARG, "the request must be a JSON object");
    mf_sampler_params *p = &s->params;
    const long long W = 1 << 20;
    mf_status st;
    if ((st = get_float(req, "temperature", &p->temp)) || (st = get_float(req, "dynatemp_range", &p->dynatemp_range)) ||
        (st = get_float(req, "dynatemp_exponent", &p->dynatemp_exponent)) ||
        (st = get_i32(req, "top_k", INT32_MIN, INT32_MAX, &p->top_k)) || (st = get_float(req, "top_p", &p->top_p)) ||
        (st = get_float(req, "min_p", &p->min_p)) || (st = get_float(req, "typical_p", &p->typ_p)) ||
        (st = get_float(req, "top_n_sigma", &p->top_n_sigma)) ||
        (st = get_float(req, "xtc_probability", &p->xtc_probability)) ||
        (st = get_float(req, "xtc_threshold", &p->xtc_threshold)) ||
        (st = get_i32(req, "min_keep", 0, INT32_MAX, &p->min_keep)) ||
        (st = get_i32(req, "repeat_last_n", -1, W, &p->penalty_last_n)) ||
        (st = get_float(req, "repeat_penalty", &p->penalty_repeat)) ||
        (st = get_float(req, "frequency_penalty", &p->penalty_freq)) ||
        (st = get_float(req, "presence_penalty", &p->penalty_present)) ||
        (st = get_float(req, "dry_multiplier", &p->dry_multiplier)) || (st = get_float(req, "dry_base", &p->dry_base)) ||
        (st = get_i32(req, "dry_allowed_length", 0, W, &p->dry_allowed_length)) ||
        (st = get_i32(req, "dry_penalty_last_n", -1, W, &p->dry_penalty_last_n)) ||
        (st = get_i32(req, "mirostat", 0, 2, &p->mirostat)) || (st = get_float(req, "mirostat_tau", &p->mirostat_tau)) ||
        (st = get_float(req, "mirostat_eta", &p->mirostat_eta)))
        return st;
    /* seed: OpenAI's is any int64, the sampler's 32 bits: -1 (and 4294967295) draw a random one;
     * 0 .. 4294967294 are taken as they are; any other integer is folded (its two halves XORed,
     * then moved off the random seed) so that every seed is reproducible and distinct seeds mostly
     * stay distinct */
    const json_t *sv = json_object_get(req, "seed");
    if (sv && !json_is_null(sv)) {
        const double d = json_is_number(sv) ? json_number_value(sv) : NAN;
        if (!(d == floor(d)) || !(fabs(d) <= 9223372036854775807.0))
            return mf_fail(MF_ERR_ARG, "request field 'seed' must be an integer (64 bits)");
        const long long seed = json_is_integer(sv) ? (long long)json_integer_value(sv) : (long long)d;
        s->seed_given = seed != -1 && seed != (long long)MF_SAMPLER_SEED_RANDOM;
        if (!s->seed_given) {
            p->seed = MF_SAMPLER_SEED_RANDOM;
        } else if (seed >= 0 && seed < (long long)MF_SAMPLER_SEED_RANDOM) {
            p->seed = (uint32_t)seed;
        } else {
            const uint64_t u = (uint64_t)seed;
            const uint32_t f = (uint32_t)(u ^ (u >> 32));
            p->seed = f == MF_SAMPLER_SEED_RANDOM ? f - 1 : f;
        }
    }
    static const char *const n_keys[] = {"n_predict", "max_tokens", "max_completion_tokens"};
    for (size_t i = 0; i < MF_ARRAY_LEN(n_keys); i++)
        if ((st = get_int(req, n_keys[i], -1, 1LL << 40, &s->n_predict))) return st;
    const json_t *v;
    if ((v = json_object_get(req, "ignore_eos")) && !json_is_null(v)) {
        if (!json_is_boolean(v)) return mf_fail(MF_ERR_ARG, "request field 'ignore_eos' must be true or false");
        p->ignore_eos = json_is_true(v);
    }
    if ((v = json_object_get(req, "stop")) && !json_is_null(v) &&
        (st = json_strings(v, "stop", s, mf_sample_settings_add_stop)))
        return st;
    if ((v = json_object_get(req, "dry_sequence_breakers")) && !json_is_null(v)) {
        mf_sample_settings_clear_breakers(s);
        if ((st = json_strings(v, "dry_sequence_breakers", s, mf_sample_settings_add_breaker))) return st;
    }
    if ((v = json_object_get(req, "logit_bias")) && !json_is_null(v) && (st = json_bias(s, v))) return st;
    if ((v = json_object_get(req, "samplers")) && !json_is_null(v) && (st = json_samplers(s, v))) return st;
    return mf_sampler_params_check(p);
}

mf_status mf_sample_settings_from_json(mf_sample_settings *s, const char *json) {
    if (!json) return mf_fail(MF_ERR_ARG, "sample settings: JSON text is NULL");
    json_error_t err;
    json_t *req = json_loads(json, JSON_DECODE_ANY, &err);
    if (!req) return mf_fail(MF_ERR_FORMAT, "sample settings: invalid JSON at line %d, column %d: %s", err.line, err.column, err.text);
    mf_status st = json_is_object(req) ? mf_sample_settings_apply_json(s, req)
                                       : mf_fail(MF_ERR_FORMAT, "sample settings: the JSON must be an object");
    json_decref(req);
    return st;
}

/* ---- the JSON form of settings, read back by mf_sample_settings_from_json ---- */

static int put_real(json_t *o, const char *key, float v) {
    return isfinite(v) ? json_object_set_new(o, key, json_real((double)v)) : -1;
}

mf_status mf_sample_settings_to_json(const mf_sample_settings *s, char **out) {
    *out = NULL;
    const mf_sampler_params *p = &s->params;
    json_t *o = json_object();
    if (!o) return MF_ERR_NOMEM;
    const struct {
        const char *key;
        float v;
    } reals[] = {
        {"temperature", p->temp}, {"dynatemp_range", p->dynatemp_range}, {"dynatemp_exponent", p->dynatemp_exponent},
        {"top_p", p->top_p}, {"min_p", p->min_p}, {"typical_p", p->typ_p}, {"top_n_sigma", p->top_n_sigma},
        {"xtc_probability", p->xtc_probability}, {"xtc_threshold", p->xtc_threshold},
        {"repeat_penalty", p->penalty_repeat}, {"frequency_penalty", p->penalty_freq},
        {"presence_penalty", p->penalty_present}, {"dry_multiplier", p->dry_multiplier}, {"dry_base", p->dry_base},
        {"mirostat_tau", p->mirostat_tau}, {"mirostat_eta", p->mirostat_eta},
    };
    int bad = 0; /* a jansson call that failed: out of memory, or (for reals) a value JSON cannot hold */
    const char *bad_key = NULL;
    for (size_t i = 0; i < MF_ARRAY_LEN(reals); i++)
        if (put_real(o, reals[i].key, reals[i].v) && !bad_key) bad_key = reals[i].key;
    const struct {
        const char *key;
        long long v;
    } ints[] = {
        {"top_k", p->top_k}, {"min_keep", p->min_keep}, {"repeat_last_n", p->penalty_last_n},
        {"dry_allowed_length", p->dry_allowed_length}, {"dry_penalty_last_n", p->dry_penalty_last_n},
        {"mirostat", p->mirostat}, {"n_predict", s->n_predict},
        {"seed", p->seed == MF_SAMPLER_SEED_RANDOM ? -1 : (long long)p->seed},
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(ints); i++) bad |= json_object_set_new(o, ints[i].key, json_integer(ints[i].v));
    bad |= json_object_set_new(o, "ignore_eos", json_boolean(p->ignore_eos));
    json_t *stop = json_array(), *samplers = json_array(), *bias = json_array();
    bad |= json_object_set_new(o, "stop", stop) | json_object_set_new(o, "samplers", samplers) |
           json_object_set_new(o, "logit_bias", bias);
    /* json_string is NULL for text that is not UTF-8 (a stop string written with \xHH escapes) */
    for (size_t i = 0; stop && i < s->n_stop; i++)
        if (json_array_append_new(stop, json_string(s->stop[i])) && !bad_key) bad_key = "stop";
    for (size_t i = 0; samplers && i < p->n_stages; i++)
        bad |= json_array_append_new(samplers, json_string(mf_sampler_stage_name(p->stages[i])));
    for (size_t i = 0; bias && i < p->n_logit_bias; i++) {
        const mf_logit_bias *b = &p->logit_bias[i];
        if (isnan(b->bias) || b->bias == INFINITY) {
            if (!bad_key) bad_key = "logit_bias";
            continue;
        }
        json_t *key = b->text ? json_string(b->text) : json_integer(b->token);
        json_t *val = b->bias == -INFINITY ? json_false() : json_real((double)b->bias);
        if (!key) {
            json_decref(val);
            if (!bad_key) bad_key = "logit_bias";
            continue;
        }
        bad |= json_array_append_new(bias, val ? json_pack("[oo]", key, val) : NULL);
    }
    if (p->dry_breakers != mf_sampler_default_breakers) {
        json_t *br = json_array();
        bad |= json_object_set_new(o, "dry_sequence_breakers", br);
        for (size_t i = 0; br && i < p->n_dry_breakers; i++)
            if (json_array_append_new(br, json_string(p->dry_breakers[i])) && !bad_key) bad_key = "dry_sequence_breakers";
    }
    mf_status st = MF_OK;
    if (bad_key) st = mf_fail(MF_ERR_ARG, "sample settings: '%s' holds a value JSON cannot (a number that is not finite, text that is not UTF-8)", bad_key);
    else if (bad || !(*out = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII))) st = MF_ERR_NOMEM;
    json_decref(o);
    return st;
}
