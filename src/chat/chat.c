/* chat.c: the chat template API: compile once (AST in the template's arena), render per request
 * (values in a per-render arena freed at the end), and the GGUF loader for a model's template and
 * BOS/EOS texts with the ChatML fallback. */
#include "chat/chat.h"
#include "chat/jinja.h"

#include <stdio.h>
#include <stdlib.h>

const char mf_chat_template_chatml_source[] =
    "{%- for message in messages -%}\n"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}\n"
    "{%- if message['content'] is string -%}{{- message['content'] -}}\n"
    "{%- elif message['content'] is iterable -%}\n"
    "{%- for part in message['content'] if part['type'] == 'text' -%}{{- part['text'] -}}{%- endfor -%}\n"
    "{%- endif -%}\n"
    "{{- '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}\n";

const char *mf_chat_template_chatml(void) { return mf_chat_template_chatml_source; }

struct mf_chat_template {
    jarena arena; /* AST and constants */
    jnodes body;
    char *source, *bos, *eos;
    bool fallback;
};

/* Byte offset of the first invalid UTF-8 sequence, or len when valid. */
static size_t utf8_invalid_at(const unsigned char *s, size_t len) {
    for (size_t i = 0; i < len;) {
        unsigned char c = s[i];
        size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!n || i + n > len) return i;
        uint32_t cp = n == 1 ? c : (uint32_t)(c & (0x7F >> n));
        for (size_t k = 1; k < n; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
        i += n;
    }
    return len;
}

mf_status mf_chat_template_create(const char *source, mf_chat_template **out) {
    *out = NULL;
    if (!source) return mf_fail(MF_ERR_ARG, "chat template source is NULL");
    size_t len = strlen(source);
    size_t bad = utf8_invalid_at((const unsigned char *)source, len);
    if (bad != len) return mf_fail(MF_ERR_FORMAT, "chat template: invalid UTF-8 at byte %zu", bad);
    mf_chat_template *t = mf_calloc(1, sizeof *t);
    if (!t) return MF_ERR_NOMEM;
    t->source = mf_strdup(source);
    if (!t->source) {
        free(t);
        return MF_ERR_NOMEM;
    }
    jparse_result *res = mf_malloc(sizeof *res);
    if (!res) {
        mf_chat_template_free(t);
        return MF_ERR_NOMEM;
    }
    mf_status st = jinja_parse(&t->arena, t->source, len, res);
    if (st != MF_OK) {
        mf_fail(st, "chat template %s", res->err);
        free(res);
        mf_chat_template_free(t);
        return st;
    }
    t->body = res->body;
    free(res);
    *out = t;
    return MF_OK;
}

void mf_chat_template_free(mf_chat_template *t) {
    if (!t) return;
    jarena_free(&t->arena);
    free(t->source);
    free(t->bos);
    free(t->eos);
    free(t);
}

mf_status mf_chat_template_set_tokens(mf_chat_template *t, const char *bos, const char *eos) {
    char *b = mf_strdup(bos ? bos : ""), *e = mf_strdup(eos ? eos : "");
    if (!b || !e) {
        free(b);
        free(e);
        return MF_ERR_NOMEM;
    }
    free(t->bos);
    free(t->eos);
    t->bos = b;
    t->eos = e;
    return MF_OK;
}

const char *mf_chat_template_bos(const mf_chat_template *t) { return t->bos ? t->bos : ""; }
const char *mf_chat_template_eos(const mf_chat_template *t) { return t->eos ? t->eos : ""; }
const char *mf_chat_template_source(const mf_chat_template *t) { return t->source; }
bool mf_chat_template_is_fallback(const mf_chat_template *t) { return t->fallback; }

mf_chat_render_params mf_chat_render_default_params(void) {
    return (mf_chat_render_params){
        .now = 0, .max_output = 64u << 20, .max_memory = (size_t)1 << 30, .max_steps = 50000000};
}

mf_status mf_chat_template_render(const mf_chat_template *t, const json_t *context, const mf_chat_render_params *params,
                                  char **out, size_t *out_len) {
    *out = NULL;
    if (out_len) *out_len = 0;
    if (context && !json_is_object(context)) return mf_fail(MF_ERR_ARG, "chat template context must be a JSON object");
    mf_chat_render_params p = params ? *params : mf_chat_render_default_params();
    mf_chat_render_params d = mf_chat_render_default_params();
    if (!p.max_output) p.max_output = d.max_output;
    if (!p.max_memory) p.max_memory = d.max_memory;
    if (!p.max_steps) p.max_steps = d.max_steps;

    /* on the heap: its fields change between setjmp and a longjmp */
    jctx *c = mf_calloc(1, sizeof *c);
    if (!c) return MF_ERR_NOMEM;
    c->arena.mem.limit = p.max_memory;
    c->arena.on_fail = &c->fail;
    c->arena.errbuf = c->err;
    c->arena.errcap = sizeof c->err;
    c->max_output = p.max_output;
    c->max_steps = p.max_steps;
    c->max_depth = 500;
    c->now = p.now;
    if (setjmp(c->fail)) {
        mf_status st = c->status != MF_OK ? c->status : c->arena.fail_status ? c->arena.fail_status : MF_ERR_NOMEM;
        mf_fail(st, "chat template %s", c->err);
        free(c->out);
        jarena_free(&c->arena);
        free(c);
        return st;
    }
    jscope *root = jscope_new(c, NULL);
    jscope_set(c, root, "bos_token", jv_cstr(mf_chat_template_bos(t)));
    jscope_set(c, root, "eos_token", jv_cstr(mf_chat_template_eos(t)));
    if (context) {
        jv ctx = jv_from_json(c, context, 0);
        for (size_t i = 0; i < ctx.d->n; i++) jv_dict_set(c, &root->vars, ctx.d->k[i], ctx.d->v[i]);
    }
    jinja_exec(c, root, t->body);
    /* room for the terminating NUL (an empty render has no buffer yet) */
    char *res = c->out_len < c->out_cap ? c->out : realloc(c->out, c->out_len + 1);
    if (!res) jinja_error(c, MF_ERR_NOMEM, "out of memory finishing the output");
    res[c->out_len] = 0;
    *out = res;
    if (out_len) *out_len = c->out_len;
    jarena_free(&c->arena);
    free(c);
    return MF_OK;
}

/* Text of token `key_id` (e.g. tokenizer.ggml.bos_token_id) or NULL when the model has none. */
static mf_status token_text(const mf_gguf *g, const char *key_id, char **out) {
    *out = NULL;
    if (!mf_gguf_find_kv(g, key_id)) return MF_OK;
    uint32_t id;
    mf_status st = mf_gguf_get_u32(g, key_id, &id);
    if (st != MF_OK) return st;
    const mf_gguf_value *tokens;
    st = mf_gguf_get_arr(g, "tokenizer.ggml.tokens", MF_GGUF_STRING, &tokens);
    if (st != MF_OK) return st;
    if (id >= tokens->arr.n)
        return mf_fail(MF_ERR_FORMAT, "%s = %u is past the vocabulary (%llu tokens)", key_id, id, (unsigned long long)tokens->arr.n);
    *out = mf_strndup(tokens->arr.strs[id].ptr, (size_t)tokens->arr.strs[id].len);
    return *out ? MF_OK : MF_ERR_NOMEM;
}

mf_status mf_chat_template_from_gguf(const mf_gguf *g, const char *override_source, mf_chat_template **out) {
    *out = NULL;
    char *src = NULL, *bos = NULL, *eos = NULL;
    mf_status st = MF_OK;
    bool fallback = false;
    if (!override_source) {
        st = mf_gguf_find_str_dup(g, "tokenizer.chat_template", &src);
        if (st != MF_OK) return st;
        if (!src) {
            mf_log(MF_LOG_WARN, "the model has no tokenizer.chat_template; using ChatML");
            fallback = true;
        }
    }
    if ((st = token_text(g, "tokenizer.ggml.bos_token_id", &bos)) != MF_OK) goto done;
    if ((st = token_text(g, "tokenizer.ggml.eos_token_id", &eos)) != MF_OK) goto done;
    st = mf_chat_template_create(override_source ? override_source : src ? src : mf_chat_template_chatml_source, out);
    if (st != MF_OK) goto done;
    if ((st = mf_chat_template_set_tokens(*out, bos, eos)) != MF_OK) {
        mf_chat_template_free(*out);
        *out = NULL;
        goto done;
    }
    (*out)->fallback = fallback;
done:
    free(src);
    free(bos);
    free(eos);
    return st;
}

/* ---- rendering from JSON text and from structs ---- */

static json_t *parse_json(const char *text, const char *what, mf_status *st) {
    json_error_t err;
    json_t *v = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (!v) *st = mf_fail(MF_ERR_FORMAT, "%s: invalid JSON at line %d, column %d: %s", what, err.line, err.column, err.text);
    return v;
}

mf_status mf_chat_template_render_json(const mf_chat_template *t, const char *context_json,
                                       const mf_chat_render_params *params, char **out, size_t *out_len) {
    *out = NULL;
    if (!context_json) return mf_fail(MF_ERR_ARG, "chat template context is NULL");
    mf_status st = MF_OK;
    json_t *ctx = parse_json(context_json, "chat template context", &st);
    if (!ctx) return st;
    if (!json_is_object(ctx)) st = mf_fail(MF_ERR_FORMAT, "chat template context: must be a JSON object");
    if (!st) st = mf_chat_template_render(t, ctx, params, out, out_len);
    json_decref(ctx);
    return st;
}

mf_chat_options mf_chat_default_options(void) {
    return (mf_chat_options){.add_generation_prompt = true, .enable_thinking = -1};
}

static mf_status set_str(json_t *o, const char *key, const char *v) {
    if (!v) return MF_OK;
    json_t *s = json_string(v);
    if (!s) return mf_fail(MF_ERR_ARG, "message %s: not valid UTF-8", key);
    return json_object_set_new(o, key, s) ? MF_ERR_NOMEM : MF_OK;
}

/* Tool-call arguments given as a JSON string become objects, as templates expect (they iterate or
 * tojson them); other values stay. */
static void decode_arguments(json_t *calls) {
    size_t i;
    json_t *call;
    json_array_foreach(calls, i, call) {
        json_t *fn = json_object_get(call, "function"), *args = fn ? json_object_get(fn, "arguments") : NULL;
        if (!json_is_string(args)) continue;
        json_t *obj = json_loads(json_string_value(args), 0, NULL);
        if (json_is_object(obj)) json_object_set_new(fn, "arguments", obj);
        else json_decref(obj);
    }
}

mf_status mf_chat_render(const mf_chat_template *t, const mf_chat_message *messages, size_t n,
                         const mf_chat_options *opts, char **out, size_t *out_len) {
    *out = NULL;
    const mf_chat_options o = opts ? *opts : mf_chat_default_options();
    mf_status st = MF_OK;
    json_t *ctx = NULL;
    if (o.extra_json) {
        if (!(ctx = parse_json(o.extra_json, "chat options extra_json", &st))) return st;
        if (!json_is_object(ctx)) {
            json_decref(ctx);
            return mf_fail(MF_ERR_FORMAT, "chat options extra_json: must be a JSON object");
        }
    } else if (!(ctx = json_object())) {
        return MF_ERR_NOMEM;
    }
    json_t *msgs = json_array();
    if (!msgs || json_object_set_new(ctx, "messages", msgs)) st = MF_ERR_NOMEM;
    for (size_t i = 0; i < n && !st; i++) {
        const mf_chat_message *m = &messages[i];
        if (!m->role) {
            st = mf_fail(MF_ERR_ARG, "message %zu has no role", i);
            break;
        }
        json_t *jm = json_object();
        if (!jm || json_array_append_new(msgs, jm)) {
            st = MF_ERR_NOMEM;
            break;
        }
        if (!(st = set_str(jm, "role", m->role)) && !(st = set_str(jm, "content", m->content)) &&
            !(st = set_str(jm, "reasoning_content", m->reasoning_content)) &&
            !(st = set_str(jm, "tool_call_id", m->tool_call_id)) && !(st = set_str(jm, "name", m->name)) &&
            !m->content)
            st = json_object_set_new(jm, "content", json_null()) ? MF_ERR_NOMEM : MF_OK;
        if (!st && m->tool_calls_json) {
            json_t *calls = parse_json(m->tool_calls_json, "message tool_calls_json", &st);
            if (calls && !json_is_array(calls)) {
                json_decref(calls);
                calls = NULL;
                st = mf_fail(MF_ERR_FORMAT, "message %zu tool_calls_json: must be a JSON array", i);
            }
            if (calls) {
                decode_arguments(calls);
                json_object_set_new(jm, "tool_calls", calls);
            }
        }
    }
    if (!st && o.tools_json) {
        json_t *tools = parse_json(o.tools_json, "chat options tools_json", &st);
        if (tools && !json_is_array(tools)) {
            json_decref(tools);
            tools = NULL;
            st = mf_fail(MF_ERR_FORMAT, "chat options tools_json: must be a JSON array");
        }
        if (tools) json_object_set_new(ctx, "tools", tools);
    }
    if (!st) json_object_set_new(ctx, "add_generation_prompt", json_boolean(o.add_generation_prompt));
    if (!st && o.enable_thinking >= 0) json_object_set_new(ctx, "enable_thinking", json_boolean(o.enable_thinking));
    if (!st) st = mf_chat_template_render(t, ctx, o.params, out, out_len);
    json_decref(ctx);
    return st;
}
