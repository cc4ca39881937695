/* serve_api.c: the server's endpoints. A completion request's life on its HTTP thread: parse (the
 * JSON layer of http.h) -> validate (every field's type and range; 400 naming it) -> render and
 * tokenize the prompt -> reserve a place in the queue (503 with Retry-After when full) -> open the
 * answer (an SSE stream, or a deferred answer that holds no thread) -> hand the task to the engine,
 * which runs it and answers (serve_engine.c). Also the answer shapes the engine sends, as the
 * official OpenAI clients parse them, and the small endpoints. */
#include "serve_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- answer shapes ---- */

/* A JSON string of bytes that may not be valid UTF-8 (a token piece can end inside a character):
 * invalid sequences become U+FFFD. */
static json_t *lossy_string(const uint8_t *b, size_t n) {
    json_t *v = json_stringn((const char *)b, n);
    if (v) return v;
    char *out = malloc(n * 3 + 1);
    size_t k = 0;
    for (size_t i = 0; out && i < n;) {
        const uint8_t c = b[i];
        const size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        json_t *piece = len && i + len <= n ? json_stringn((const char *)b + i, len) : NULL;
        if (piece) {
            memcpy(out + k, b + i, len);
            k += len, i += len;
            json_decref(piece);
        } else {
            memcpy(out + k, "\xEF\xBF\xBD", 3);
            k += 3, i++;
        }
    }
    v = out ? json_stringn(out, k) : NULL;
    free(out);
    return v;
}

static json_t *bytes_array(const uint8_t *b, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) json_array_append_new(a, json_integer(b[i]));
    return a;
}

json_t *serve_logprob(const serve *s, const float *logits, int32_t token, int top, task_kind kind) {
    const int32_t V = s->n_vocab;
    float mx = -INFINITY;
    for (int32_t i = 0; i < V; i++) mx = logits[i] > mx ? logits[i] : mx;
    double sum = 0.0;
    for (int32_t i = 0; i < V; i++) sum += exp((double)logits[i] - mx);
    const double lse = (double)mx + log(sum);
    /* the top alternatives, by logit (ties: the lower id) */
    int32_t best[20];
    int nb = 0;
    top = MF_SERVE_MIN(top, 20);
    for (int32_t i = 0; i < V && top > 0; i++) {
        if (nb == top && !(logits[i] > logits[best[nb - 1]])) continue;
        int j = nb < top ? nb++ : nb - 1;
        while (j > 0 && logits[i] > logits[best[j - 1]]) best[j] = best[j - 1], j--;
        best[j] = i;
    }
    const uint8_t *b;
    size_t n;
    if (mf_tokenizer_token_to_bytes(s->tok, token, MF_TOK_DECODE_SPECIAL, &b, &n)) b = (const uint8_t *)"", n = 0;
    json_t *e = json_pack("{s:o,s:f}", "token", lossy_string(b, n), "logprob", (double)logits[token] - lse);
    if (!e) return NULL;
    if (kind == TASK_CHAT) {
        json_object_set_new(e, "bytes", bytes_array(b, n));
        json_t *alts = json_array();
        for (int k = 0; k < nb; k++) {
            const uint8_t *ab;
            size_t an;
            if (mf_tokenizer_token_to_bytes(s->tok, best[k], MF_TOK_DECODE_SPECIAL, &ab, &an)) ab = (const uint8_t *)"", an = 0;
            json_array_append_new(alts, json_pack("{s:o,s:f,s:o}", "token", lossy_string(ab, an), "logprob",
                                                  (double)logits[best[k]] - lse, "bytes", bytes_array(ab, an)));
        }
        json_object_set_new(e, "top_logprobs", alts);
    } else { /* the legacy shape: {piece: logprob} */
        json_t *alts = json_object();
        for (int k = 0; k < nb; k++) {
            const uint8_t *ab;
            size_t an;
            if (mf_tokenizer_token_to_bytes(s->tok, best[k], MF_TOK_DECODE_SPECIAL, &ab, &an)) continue;
            json_t *key = lossy_string(ab, an);
            if (key) json_object_set_new(alts, json_string_value(key), json_real((double)logits[best[k]] - lse));
            json_decref(key);
        }
        json_object_set_new(e, "top", alts);
    }
    return e;
}

static json_t *head(const serve *s, const serve_task *t, const char *object) {
    return json_pack("{s:s,s:s,s:I,s:s,s:s}", "id", t->id, "object", object, "created", (json_int_t)t->created, "model",
                     s->model_name, "system_fingerprint", s->fingerprint);
}

json_t *serve_usage(int32_t n_prompt, int64_t n_gen, int32_t n_cached) {
    return json_pack("{s:i,s:I,s:I,s:{s:i}}", "prompt_tokens", (int)n_prompt, "completion_tokens", (json_int_t)n_gen,
                     "total_tokens", (json_int_t)(n_prompt + n_gen), "prompt_tokens_details", "cached_tokens",
                     (int)n_cached);
}

json_t *serve_chunk(const serve *s, const serve_task *t, const char *text, size_t len, json_t *logprobs,
                    const char *finish_reason, bool first) {
    const bool chat = t->kind == TASK_CHAT;
    json_t *c = head(s, t, chat ? "chat.completion.chunk" : "text_completion");
    json_t *choice = json_pack("{s:i,s:o,s:o}", "index", 0, "logprobs", logprobs ? logprobs : json_null(),
                               "finish_reason", finish_reason ? json_string(finish_reason) : json_null());
    if (!c || !choice) {
        json_decref(c), json_decref(choice);
        return NULL;
    }
    json_t *txt = text ? json_stringn(text, len) : NULL;
    if (chat) {
        json_t *delta = json_object();
        if (first) json_object_set_new(delta, "role", json_string("assistant"));
        if (txt) json_object_set(delta, "content", txt);
        json_object_set_new(choice, "delta", delta);
    } else {
        json_object_set_new(choice, "text", txt ? json_incref(txt) : json_string(""));
    }
    json_decref(txt);
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    if (t->include_usage) json_object_set_new(c, "usage", json_null());
    return c;
}

json_t *serve_final(const serve *s, const serve_task *t, const char *text, size_t len, json_t *logprobs,
                    const char *finish_reason, int32_t n_cached, int64_t n_gen) {
    const bool chat = t->kind == TASK_CHAT;
    json_t *c = head(s, t, chat ? "chat.completion" : "text_completion");
    if (!c) return NULL;
    json_t *lp = json_null();
    if (logprobs && chat) lp = json_pack("{s:O,s:n}", "content", logprobs, "refusal");
    if (logprobs && !chat) lp = json_incref(logprobs);
    json_t *choice = json_pack("{s:i,s:o,s:s}", "index", 0, "logprobs", lp, "finish_reason", finish_reason);
    json_t *txt = json_stringn(text, len);
    if (chat)
        json_object_set_new(choice, "message",
                            json_pack("{s:s,s:o,s:n}", "role", "assistant", "content", txt ? txt : json_string(""), "refusal"));
    else
        json_object_set_new(choice, "text", txt ? txt : json_string(""));
    json_object_set_new(c, "choices", json_pack("[o]", choice));
    json_object_set_new(c, "usage", serve_usage(t->n_prompt, n_gen, n_cached));
    return c;
}

/* ---- request fields ---- */

typedef struct {
    serve_refusal *why;
    bool answered;
} req_ctx;

static bool bad(req_ctx *rc, const char *param, const char *code, const char *fmt, ...) MF_HTTP_PRINTF(4, 5);
static bool bad(req_ctx *rc, const char *param, const char *code, const char *fmt, ...) {
    serve_refusal *w = rc->why;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->status = 400;
    snprintf(w->param, sizeof w->param, "%s", param ? param : "");
    snprintf(w->code, sizeof w->code, "%s", code ? code : "");
    rc->answered = true;
    return false;
}

/* A library's message about a request field ("request field 'top_k' must be ..."): 400 with that
 * field as the error's param. */
static bool bad_field(req_ctx *rc, const char *msg) {
    static const char lead[] = "request field '";
    char param[64] = "";
    if (!strncmp(msg, lead, sizeof lead - 1)) {
        const char *f = msg + sizeof lead - 1, *e = strchr(f, '\'');
        if (e && (size_t)(e - f) < sizeof param) snprintf(param, sizeof param, "%.*s", (int)(e - f), f);
    }
    return bad(rc, param[0] ? param : NULL, NULL, "%s", msg);
}

/* logit_bias values (OpenAI: -100 .. 100; false, minfer's "never", too). */
static bool logit_bias_in_range(req_ctx *rc, const json_t *lb) {
    const json_t *v;
    if (json_is_object(lb)) {
        const char *k;
        json_object_foreach((json_t *)lb, k, v) {
            if (json_is_number(v) && !(fabs(json_number_value(v)) <= 100))
                return bad(rc, "logit_bias", NULL, "logit_bias['%.40s'] = %g: biases must be between -100 and 100", k,
                           json_number_value(v));
        }
    } else if (json_is_array(lb)) {
        size_t i;
        json_array_foreach(lb, i, v) {
            const json_t *b = json_array_get(v, 1);
            if (json_is_number(b) && !(fabs(json_number_value(b)) <= 100))
                return bad(rc, "logit_bias", NULL, "logit_bias[%zu] = %g: biases must be between -100 and 100", i,
                           json_number_value(b));
        }
    }
    return true;
}

/* A field that must be absent, null or of the given kind. */
static bool opt_bool(req_ctx *rc, const json_t *o, const char *key, bool *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_boolean(v)) return bad(rc, key, NULL, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return true;
}

static bool opt_int(req_ctx *rc, const json_t *o, const char *key, long long lo, long long hi, long long *out) {
    const json_t *v = json_object_get(o, key);
    if (!v || json_is_null(v)) return true;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return bad(rc, key, NULL, "'%s' must be an integer in [%lld, %lld]", key, lo, hi);
    *out = json_integer_value(v);
    return true;
}

/* Text of a message's content: a string, or a list of {"type":"text","text":...} parts (joined);
 * other parts (images, audio, files) are refused, not dropped. */
static bool content_text(req_ctx *rc, const json_t *content, size_t i, json_t **out) {
    *out = NULL;
    if (!content || json_is_null(content)) return true;
    if (json_is_string(content)) {
        *out = json_incref((json_t *)content);
        return true;
    }
    if (!json_is_array(content)) return bad(rc, "messages", NULL, "messages[%zu].content must be a string or a list of parts", i);
    size_t cap = 256, n = 0, k;
    char *buf = malloc(cap);
    const json_t *part;
    json_array_foreach(content, k, part) {
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *text = json_object_get(part, "text");
        if (!type || strcmp(type, "text") || !json_is_string(text)) {
            free(buf);
            if (type && !strcmp(type, "text"))
                return bad(rc, "messages", NULL, "messages[%zu].content[%zu]: a text part needs a string 'text'", i, k);
            return bad(rc, "messages", NULL, "messages[%zu].content[%zu]: only text parts are supported (got %s)", i, k,
                       type ? type : "a part without a type");
        }
        const size_t len = json_string_length(text);
        if (n + len + 1 > cap) {
            cap = (n + len + 1) * 2;
            char *nb = buf ? realloc(buf, cap) : NULL;
            if (!nb) free(buf);
            buf = nb;
        }
        if (!buf) return bad(rc, "messages", NULL, "out of memory");
        memcpy(buf + n, json_string_value(text), len);
        n += len;
    }
    *out = json_stringn(buf ? buf : "", n);
    free(buf);
    return true;
}

/* The messages as the chat template expects them: roles checked (developer as system), content as
 * a string, tool calls with their arguments as objects. */
static bool chat_messages(req_ctx *rc, const json_t *req, json_t **out) {
    *out = NULL;
    const json_t *msgs = json_object_get(req, "messages");
    if (!json_is_array(msgs)) return bad(rc, "messages", NULL, "'messages' must be an array of messages");
    if (json_array_size(msgs) == 0) return bad(rc, "messages", NULL, "'messages' must not be empty");
    json_t *res = json_array();
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role) {
            json_decref(res);
            return bad(rc, "messages", NULL, "messages[%zu] needs a string 'role'", i);
        }
        static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};
        bool known = false;
        for (size_t k = 0; k < 5; k++) known |= !strcmp(role, roles[k]);
        if (!known) {
            json_decref(res);
            return bad(rc, "messages", NULL, "messages[%zu].role '%s': use system, developer, user, assistant or tool", i, role);
        }
        /* content is required but for an assistant turn (which may only call tools) */
        const json_t *content = json_object_get(m, "content");
        if ((!content || json_is_null(content)) && strcmp(role, "assistant")) {
            json_decref(res);
            return bad(rc, "messages", NULL, "messages[%zu] (%s) has no 'content'", i, role);
        }
        json_t *text;
        if (!content_text(rc, content, i, &text)) {
            json_decref(res);
            return false;
        }
        /* null content (an assistant turn that only calls tools) as "": many templates concatenate
         * the content unchecked, and "" reads as absent to those that test it */
        json_t *nm = json_pack("{s:s,s:o}", "role", !strcmp(role, "developer") ? "system" : role, "content",
                               text ? text : json_string(""));
        const json_t *calls = json_object_get(m, "tool_calls");
        if (json_is_array(calls)) {
            json_t *c = json_deep_copy(calls);
            size_t k;
            json_t *call;
            json_array_foreach(c, k, call) {
                json_t *fn = json_object_get(call, "function"), *args = fn ? json_object_get(fn, "arguments") : NULL;
                json_t *obj = json_is_string(args) ? json_loads(json_string_value(args), 0, NULL) : NULL;
                if (json_is_object(obj)) json_object_set_new(fn, "arguments", obj);
                else json_decref(obj);
            }
            json_object_set_new(nm, "tool_calls", c);
        }
        static const char *const keep[] = {"name", "tool_call_id", "reasoning_content"};
        for (size_t k = 0; k < 3; k++)
            if (json_is_string(json_object_get(m, keep[k]))) json_object_set(nm, keep[k], json_object_get(m, keep[k]));
        json_array_append_new(res, nm);
    }
    *out = res;
    return true;
}

/* Tokens of a text prompt; special-token text is honoured (the template writes them). */
static bool tokenize(req_ctx *rc, const serve *s, const char *text, size_t len, unsigned flags, serve_task *t) {
    size_t n = 0;
    if (mf_tokenizer_encode(s->tok, text, len, flags, &t->prompt, &n))
        return bad(rc, "prompt", NULL, "the prompt cannot be tokenized: %s", mf_last_error());
    t->n_prompt = (int32_t)MF_SERVE_MIN(n, (size_t)INT32_MAX);
    return true;
}

/* The parts common to both completion endpoints; t->prompt is set. */
static bool task_options(req_ctx *rc, const serve *s, const json_t *req, serve_task *t) {
    long long n = 1;
    if (!opt_int(rc, req, "n", 1, 1, &n)) return false;
    const json_t *model = json_object_get(req, "model"); /* any name serves (there is one model) */
    if (model && !json_is_null(model) && !json_is_string(model)) return bad(rc, "model", NULL, "'model' must be a string");
    if (!opt_bool(rc, req, "stream", &t->stream)) return false;
    const json_t *so = json_object_get(req, "stream_options");
    if (so && !json_is_null(so) && !json_is_object(so)) return bad(rc, "stream_options", NULL, "'stream_options' must be an object");
    if (so && !opt_bool(rc, so, "include_usage", &t->include_usage)) return false;
    if (!t->stream) t->include_usage = false;
    long long top = 0;
    if (t->kind == TASK_CHAT) {
        if (!opt_bool(rc, req, "logprobs", &t->logprobs) || !opt_int(rc, req, "top_logprobs", 0, 20, &top)) return false;
        if (json_object_get(req, "top_logprobs") && !json_is_null(json_object_get(req, "top_logprobs")) && !t->logprobs)
            return bad(rc, "top_logprobs", NULL, "'top_logprobs' requires 'logprobs' to be true");
    } else {
        long long lp = -1;
        if (!opt_int(rc, req, "logprobs", 0, 20, &lp)) return false;
        t->logprobs = lp >= 0;
        top = lp > 0 ? lp : 0;
        static const char *const unsupported[] = {"echo", "suffix", "best_of"};
        for (int k = 0; k < 3; k++) {
            const json_t *v = json_object_get(req, unsupported[k]);
            if (v && !json_is_null(v) && !json_is_false(v) && !(k == 2 && json_is_integer(v) && json_integer_value(v) == 1))
                return bad(rc, unsupported[k], NULL, "'%s' is not supported", unsupported[k]);
        }
    }
    t->top_logprobs = (int)top;
    const json_t *rf = json_object_get(req, "response_format");
    const char *rft = json_string_value(json_object_get(rf, "type"));
    if (rf && !json_is_null(rf) && (!rft || strcmp(rft, "text")))
        return bad(rc, "response_format", NULL, "response_format '%s' is not supported yet (only 'text')", rft ? rft : "?");
    const json_t *tools = json_object_get(req, "tools");
    const char *choice = json_string_value(json_object_get(req, "tool_choice"));
    if (json_is_array(tools) && json_array_size(tools) && !(choice && !strcmp(choice, "none")))
        return bad(rc, "tools", NULL, "tool calls are not supported yet (send no 'tools', or tool_choice 'none')");
    /* OpenAI's ranges for the fields it defines (the sampler takes wider ones: the server's own
     * defaults may use them) */
    static const struct {
        const char *key;
        double lo, hi;
    } ranges[] = {{"temperature", 0, 2}, {"presence_penalty", -2, 2}, {"frequency_penalty", -2, 2}};
    for (size_t i = 0; i < sizeof ranges / sizeof ranges[0]; i++) {
        const json_t *v = json_object_get(req, ranges[i].key);
        if (json_is_number(v) && !(json_number_value(v) >= ranges[i].lo && json_number_value(v) <= ranges[i].hi))
            return bad(rc, ranges[i].key, NULL, "'%s' must be between %g and %g", ranges[i].key, ranges[i].lo,
                       ranges[i].hi);
    }
    if (!logit_bias_in_range(rc, json_object_get(req, "logit_bias"))) return false;
    /* sampling: the server's defaults, then the request's fields */
    if (mf_sample_settings_copy(&t->settings, &s->p->defaults)) return bad(rc, NULL, NULL, "out of memory");
    char *text = json_dumps(req, JSON_COMPACT);
    mf_status st = text ? mf_sample_settings_from_json(&t->settings, text) : MF_ERR_NOMEM;
    free(text);
    if (st) return bad_field(rc, mf_last_error());
    long long mt = -1, mct = -1; /* both given: the smaller one */
    if (!opt_int(rc, req, "max_tokens", 0, 1LL << 40, &mt) || !opt_int(rc, req, "max_completion_tokens", 0, 1LL << 40, &mct))
        return false;
    if (mt >= 0 && mct >= 0) t->settings.n_predict = MF_SERVE_MIN(mt, mct);
    if (t->n_prompt == 0) return bad(rc, t->kind == TASK_CHAT ? "messages" : "prompt", NULL, "the prompt is empty");
    if (t->n_prompt >= s->n_ctx_slot)
        return bad(rc, t->kind == TASK_CHAT ? "messages" : "prompt", "context_length_exceeded",
                   "the prompt is %d tokens; a slot's context holds %d (prompt and answer together)", (int)t->n_prompt,
                   (int)s->n_ctx_slot);
    /* the generator, here: a setting it refuses (a logit bias for a token that does not exist, ...)
     * is the client's error, answered before the request waits for a slot */
    const int64_t room = s->n_ctx_slot - t->n_prompt;
    int64_t n_predict = t->settings.n_predict;
    if (n_predict < 0 || n_predict > room) n_predict = room;
    mf_sampler_vocab v = mf_sampler_vocab_from_tokenizer(s->tok, s->n_vocab, s->n_ctx_slot);
    st = mf_gen_create(&t->settings.params, t->settings.stop, t->settings.n_stop, n_predict, &v, &t->gen);
    if (!st) st = mf_gen_prompt(t->gen, t->prompt, (size_t)t->n_prompt);
    if (st == MF_ERR_NOMEM) return bad(rc, NULL, NULL, "out of memory");
    if (st) return bad(rc, NULL, NULL, "%s", mf_last_error());
    return true;
}

static void random_id(char *out, size_t cap, const char *prefix) {
    static const char digits[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint8_t r[24] = {0};
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(r, 1, sizeof r, f) != sizeof r) { /* no urandom: a time-based id is still unique enough */
        const uint64_t x = (uint64_t)(mf_time_s() * 1e9);
        memcpy(r, &x, sizeof x);
    }
    if (f) fclose(f);
    size_t k = (size_t)snprintf(out, cap, "%s", prefix);
    for (size_t i = 0; i < sizeof r && k + 1 < cap; i++) out[k++] = digits[r[i] % (sizeof digits - 1)];
    out[k] = 0;
}

/* Hand a validated task to the engine, answering through a stream or a deferred answer. */
static void submit(serve *s, mf_http_request *r, serve_task *t) {
    if (!serve_engine_reserve(s->engine)) {
        mf_http_respond_busy(r, 503, 1, "the server is busy (%d requests waiting); try again", (int)s->p->max_queue);
        serve_task_free(t);
        return;
    }
    if (t->stream)
        t->stream_h = mf_http_respond_stream(r, NULL);
    else
        t->deferred = mf_http_defer(r, NULL);
    if (!t->stream_h && !t->deferred) { /* answered already (HEAD, stopping, no memory) */
        serve_engine_unreserve(s->engine);
        serve_task_free(t);
        return;
    }
    serve_engine_submit(s->engine, t);
}

static bool ready(serve *s, mf_http_request *r) {
    if (__atomic_load_n(&s->ready, __ATOMIC_SEQ_CST) && !__atomic_load_n(&s->stopping, __ATOMIC_SEQ_CST)) return true;
    mf_http_respond_busy(r, 503, 1, s->stopping ? "the server is shutting down" : "Loading model");
    return false;
}

serve_task *serve_parse(const serve *s, task_kind kind, const json_t *req, serve_refusal *why) {
    req_ctx rc = {why, false};
    why->status = 500, why->param[0] = why->code[0] = 0;
    snprintf(why->msg, sizeof why->msg, "out of memory");
    serve_task *t = calloc(1, sizeof *t);
    json_t *msgs = NULL;
    char *text = NULL;
    bool ok = false;
    if (!t) return NULL;
    t->kind = kind;
    if (!json_is_object(req)) {
        bad(&rc, NULL, NULL, "the request must be a JSON object");
        goto done;
    }
    if (kind == TASK_CHAT) {
        if (!chat_messages(&rc, req, &msgs)) goto done;
        json_t *ctx = json_pack("{s:O,s:b}", "messages", msgs, "add_generation_prompt", 1);
        const json_t *kw = json_object_get(req, "chat_template_kwargs"); /* llama.cpp's extension: enable_thinking, ... */
        if (ctx && json_is_object(kw)) json_object_update_missing(ctx, (json_t *)kw);
        char *ctx_text = ctx ? json_dumps(ctx, JSON_COMPACT) : NULL;
        json_decref(ctx);
        size_t len = 0;
        mf_status st = ctx_text ? mf_chat_template_render_json(s->tmpl, ctx_text, NULL, &text, &len) : MF_ERR_NOMEM;
        free(ctx_text);
        if (st == MF_ERR_NOMEM) goto done;
        if (st) {
            bad(&rc, "messages", NULL, "the chat template rejects the conversation: %s", mf_last_error());
            goto done;
        }
        if (!tokenize(&rc, s, text, len, MF_TOK_PARSE_SPECIAL, t)) goto done;
    } else {
        const json_t *p = json_object_get(req, "prompt");
        if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0))) p = json_array_get(p, 0);
        if (json_is_string(p)) {
            if (!tokenize(&rc, s, json_string_value(p), json_string_length(p), MF_TOK_PARSE_SPECIAL | MF_TOK_ADD_SPECIAL, t))
                goto done;
        } else if (json_is_array(p) && json_array_size(p) && json_is_integer(json_array_get(p, 0))) {
            const size_t n = json_array_size(p);
            if (n >= (size_t)s->n_ctx_slot) {
                bad(&rc, "prompt", "context_length_exceeded",
                    "the prompt is %zu tokens; a slot's context holds %d (prompt and answer together)", n,
                    (int)s->n_ctx_slot);
                goto done;
            }
            t->n_prompt = (int32_t)n;
            if (!(t->prompt = malloc(n * sizeof *t->prompt))) goto done;
            for (size_t i = 0; i < n; i++) {
                const json_t *v = json_array_get(p, i);
                if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= s->n_vocab) {
                    bad(&rc, "prompt", NULL, "prompt[%zu] must be a token id in [0, %d)", i, (int)s->n_vocab);
                    goto done;
                }
                t->prompt[i] = (int32_t)json_integer_value(v);
            }
        } else {
            bad(&rc, "prompt", NULL, "'prompt' must be a string or a list of token ids (one prompt only)");
            goto done;
        }
    }
    if (!task_options(&rc, s, req, t)) goto done;
    random_id(t->id, sizeof t->id, kind == TASK_CHAT ? "chatcmpl-" : "cmpl-");
    t->created = (int64_t)time(NULL);
    ok = true;
done:
    json_decref(msgs);
    free(text);
    if (ok) return t;
    serve_task_free(t);
    return NULL;
}

static void respond_refusal(mf_http_request *r, const serve_refusal *why) {
    mf_http_respond_error(r, why->status, why->param[0] ? why->param : NULL, why->code[0] ? why->code : NULL, "%s",
                          why->msg);
}

static void completion_endpoint(mf_http_request *r, serve *s, task_kind kind) {
    if (!ready(s, r)) return;
    json_t *req = mf_http_request_json(r);
    if (!req) return;
    serve_refusal why;
    serve_task *t = serve_parse(s, kind, req, &why);
    json_decref(req);
    if (!t) {
        respond_refusal(r, &why);
        return;
    }
    submit(s, r, t);
}

static void chat_completions(mf_http_request *r, void *user) { completion_endpoint(r, user, TASK_CHAT); }
static void completions(mf_http_request *r, void *user) { completion_endpoint(r, user, TASK_COMPLETION); }

/* ---- the small endpoints ---- */

static json_t *model_json(const serve *s) {
    mf_model_info mi;
    mf_model_get_info(s->model, &mi);
    return json_pack("{s:s,s:s,s:I,s:s,s:{s:i,s:i,s:I,s:I,s:s}}", "id", s->model_name, "object", "model", "created",
                     (json_int_t)s->created, "owned_by", "minfer", "meta", "n_vocab", (int)mi.n_vocab, "n_ctx_train",
                     (int)mi.n_ctx_train, "n_params", (json_int_t)mi.n_params, "size", (json_int_t)mi.weight_bytes,
                     "arch", mi.arch);
}

static void models(mf_http_request *r, void *user) {
    serve *s = user;
    if (!__atomic_load_n(&s->ready, __ATOMIC_SEQ_CST)) { /* still loading: an empty list, the model is not there yet */
        json_t *l = json_pack("{s:s,s:[]}", "object", "list", "data");
        mf_http_respond_json(r, 200, l);
        json_decref(l);
        return;
    }
    json_t *l = json_pack("{s:s,s:[o]}", "object", "list", "data", model_json(s));
    mf_http_respond_json(r, 200, l);
    json_decref(l);
}

static void model_one(mf_http_request *r, void *user) {
    serve *s = user;
    if (!__atomic_load_n(&s->ready, __ATOMIC_SEQ_CST) || strcmp(mf_http_request_path_rest(r), s->model_name)) {
        mf_http_respond_error(r, 404, "model", "model_not_found", "the model '%s' does not exist here",
                              mf_http_request_path_rest(r));
        return;
    }
    json_t *m = model_json(s);
    mf_http_respond_json(r, 200, m);
    json_decref(m);
}

static void health(mf_http_request *r, void *user) {
    serve *s = user;
    if (!__atomic_load_n(&s->ready, __ATOMIC_SEQ_CST) || __atomic_load_n(&s->stopping, __ATOMIC_SEQ_CST)) {
        mf_http_respond_busy(r, 503, 1, s->stopping ? "the server is shutting down" : "Loading model");
        return;
    }
    mf_http_respond_json_text(r, 200, "{\"status\":\"ok\"}");
}

static void metrics(mf_http_request *r, void *user) {
    serve *s = user;
    serve_stats st = {0};
    if (__atomic_load_n(&s->ready, __ATOMIC_SEQ_CST)) serve_engine_stats(s->engine, &st);
    char buf[4096];
    int n = 0;
#define METRIC(type, name, help, fmt, value)                                                                           \
    n += snprintf(buf + n, sizeof buf - (size_t)n, "# HELP %s %s\n# TYPE %s %s\n%s " fmt "\n", name, help, name, type,    \
                  name, value)
    METRIC("counter", "llamacpp:prompt_tokens_total", "Prompt tokens processed (cached ones included).", "%llu",
           (unsigned long long)st.prompt_tokens);
    METRIC("counter", "llamacpp:prompt_seconds_total", "Prompt processing time.", "%.6f", st.prompt_seconds);
    METRIC("counter", "llamacpp:tokens_predicted_total", "Tokens generated.", "%llu", (unsigned long long)st.gen_tokens);
    METRIC("counter", "llamacpp:tokens_predicted_seconds_total", "Generation time.", "%.6f", st.gen_seconds);
    METRIC("counter", "llamacpp:n_decode_total", "Engine steps (batched decodes).", "%llu", (unsigned long long)st.n_decode);
    METRIC("gauge", "llamacpp:requests_processing", "Requests running in a slot.", "%d", (int)st.busy_slots);
    METRIC("gauge", "llamacpp:requests_deferred", "Requests waiting for a slot.", "%d", (int)st.queued);
    METRIC("gauge", "llamacpp:kv_cache_tokens", "KV cache cells in use.", "%d", (int)st.kv_used);
    METRIC("gauge", "llamacpp:kv_cache_usage_ratio", "KV cache cells in use, of all.", "%.6f",
           (double)st.kv_used / (double)MF_SERVE_MAX(1, s->n_ctx_slot * s->p->n_parallel));
    METRIC("counter", "minfer:requests_total", "Completion requests accepted.", "%llu", (unsigned long long)st.requests);
    METRIC("counter", "minfer:requests_finished_total", "Completion requests answered in full.", "%llu",
           (unsigned long long)st.requests_ok);
    METRIC("counter", "minfer:requests_cancelled_total", "Requests whose client left, or that failed.", "%llu",
           (unsigned long long)st.requests_cancelled);
    METRIC("counter", "minfer:requests_rejected_total", "Requests refused with 503 (queue full, shutting down).", "%llu",
           (unsigned long long)st.requests_rejected);
    METRIC("counter", "minfer:prompt_cache_tokens_total", "Prompt tokens taken from the prompt cache.", "%llu",
           (unsigned long long)st.prompt_tokens_cached);
    METRIC("gauge", "minfer:slots", "Slots (sequences decoded together).", "%d", (int)s->p->n_parallel);
    METRIC("counter", "minfer:draft_tokens_total", "Speculative decoding: drafted tokens sent to verification.", "%llu",
           (unsigned long long)st.draft_tokens);
    METRIC("counter", "minfer:draft_tokens_accepted_total", "Speculative decoding: drafted tokens the model kept.",
           "%llu", (unsigned long long)st.draft_accepted);
#undef METRIC
    mf_http_respond_metrics(r, buf);
}

static void slots(mf_http_request *r, void *user) {
    serve *s = user;
    if (!ready(s, r)) return;
    json_t *a = serve_engine_slots_json(s->engine);
    mf_http_respond_json(r, 200, a);
    json_decref(a);
}

static void tokenize_ep(mf_http_request *r, void *user) {
    serve *s = user;
    if (!ready(s, r)) return;
    json_t *req = mf_http_request_json(r);
    if (!req) return;
    serve_refusal why;
    req_ctx rc = {&why, false};
    const json_t *c = json_object_get(req, "content");
    bool add_special = false, with_pieces = false, parse_special = true;
    if (!json_is_string(c)) {
        bad(&rc, "content", NULL, "'content' must be a string");
    } else if (opt_bool(&rc, req, "add_special", &add_special) && opt_bool(&rc, req, "with_pieces", &with_pieces) &&
               opt_bool(&rc, req, "parse_special", &parse_special)) {
        int32_t *ids = NULL;
        size_t n = 0;
        unsigned flags = (add_special ? MF_TOK_ADD_SPECIAL : 0) | (parse_special ? MF_TOK_PARSE_SPECIAL : 0);
        if (mf_tokenizer_encode(s->tok, json_string_value(c), json_string_length(c), flags, &ids, &n)) {
            bad(&rc, "content", NULL, "%s", mf_last_error());
        } else {
            json_t *toks = json_array();
            for (size_t i = 0; i < n; i++) {
                if (!with_pieces) {
                    json_array_append_new(toks, json_integer(ids[i]));
                    continue;
                }
                const uint8_t *b;
                size_t bl;
                if (mf_tokenizer_token_to_bytes(s->tok, ids[i], MF_TOK_DECODE_SPECIAL, &b, &bl)) b = (const uint8_t *)"", bl = 0;
                json_array_append_new(toks, json_pack("{s:i,s:o}", "id", (int)ids[i], "piece", lossy_string(b, bl)));
            }
            json_t *res = json_pack("{s:o}", "tokens", toks);
            mf_http_respond_json(r, 200, res);
            json_decref(res);
            free(ids);
        }
    }
    if (rc.answered) respond_refusal(r, &why);
    json_decref(req);
}

static void detokenize_ep(mf_http_request *r, void *user) {
    serve *s = user;
    if (!ready(s, r)) return;
    json_t *req = mf_http_request_json(r);
    if (!req) return;
    serve_refusal why;
    req_ctx rc = {&why, false};
    const json_t *toks = json_object_get(req, "tokens");
    if (!json_is_array(toks)) {
        bad(&rc, "tokens", NULL, "'tokens' must be an array of token ids");
        respond_refusal(r, &why);
        json_decref(req);
        return;
    }
    const size_t n = json_array_size(toks);
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    bool ok = ids != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        const json_t *v = json_array_get(toks, i);
        ok = json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) < s->n_vocab;
        if (!ok) bad(&rc, "tokens", NULL, "tokens[%zu] must be a token id in [0, %d)", i, (int)s->n_vocab);
        else ids[i] = (int32_t)json_integer_value(v);
    }
    char *text = NULL;
    size_t len = 0;
    if (ok && mf_tokenizer_decode(s->tok, ids, n, MF_TOK_DECODE_SPECIAL, &text, &len)) ok = bad(&rc, "tokens", NULL, "%s", mf_last_error());
    if (ok) {
        json_t *res = json_pack("{s:o}", "content", lossy_string((const uint8_t *)text, len));
        mf_http_respond_json(r, 200, res);
        json_decref(res);
    } else if (rc.answered) {
        respond_refusal(r, &why);
    } else {
        mf_http_respond_error(r, 500, NULL, NULL, "out of memory");
    }
    free(text);
    free(ids);
    json_decref(req);
}

void serve_routes(serve *s) {
    mf_http_server *h = s->http;
    mf_http_route(h, MF_HTTP_POST, "/v1/chat/completions", chat_completions, s);
    mf_http_route(h, MF_HTTP_POST, "/chat/completions", chat_completions, s);
    mf_http_route(h, MF_HTTP_POST, "/v1/completions", completions, s);
    mf_http_route(h, MF_HTTP_POST, "/completions", completions, s);
    mf_http_route(h, MF_HTTP_GET, "/v1/models", models, s);
    mf_http_route(h, MF_HTTP_GET, "/models", models, s);
    mf_http_route_prefix(h, MF_HTTP_GET, "/v1/models/", model_one, s);
    mf_http_route(h, MF_HTTP_GET, "/health", health, s);
    mf_http_route(h, MF_HTTP_GET, "/metrics", metrics, s);
    mf_http_route(h, MF_HTTP_GET, "/slots", slots, s);
    mf_http_route(h, MF_HTTP_POST, "/tokenize", tokenize_ep, s);
    mf_http_route(h, MF_HTTP_POST, "/detokenize", detokenize_ep, s);
}
