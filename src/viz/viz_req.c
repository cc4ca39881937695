/* viz_req.c: the checks of what a client of `minfer viz` sends, as pure functions (no server, no
 * model): the run's query (prompt, n, temp, chat), the graph's (stage, n), a layout body, and the
 * prompt's tokens (the model's chat template when asked for). tests/fuzz_viz.c fuzzes them. */
#include "viz_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool refuse(viz_refusal *why, const char *param, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool refuse(viz_refusal *why, const char *param, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why->msg, sizeof why->msg, fmt, ap);
    va_end(ap);
    why->param = param;
    return false;
}

/* A decimal integer in [lo, hi], nothing before or after it (no sign, no spaces). */
static bool parse_long(const char *s, long lo, long hi, long *out) {
    if (*s < '0' || *s > '9') return false;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* The value shown in a message: at most 40 bytes of it. */
#define SHOWN(s) (int)(strlen(s) > 40 ? 40 : strlen(s)), (s)

bool viz_parse_run(const char *prompt, const char *n, const char *temp, const char *chat, int32_t max_tokens,
                   viz_run_req *out, viz_refusal *why) {
    memset(out, 0, sizeof *out);
    if (!prompt || !*prompt) return refuse(why, "prompt", "run: the prompt is missing or empty");
    if (strlen(prompt) >= VIZ_PROMPT_MAX)
        return refuse(why, "prompt", "run: a prompt of %zu bytes: at most %d", strlen(prompt), VIZ_PROMPT_MAX - 1);
    long nv = 8;
    if (n && !parse_long(n, 1, max_tokens, &nv))
        return refuse(why, "n", "run: n '%.*s': tokens to generate must be in [1, %d]", SHOWN(n), (int)max_tokens);
    double t = 0.0;
    if (temp) {
        char *end;
        t = strtod(temp, &end);
        if (end == temp || *end || !(t >= 0 && t <= 10))
            return refuse(why, "temp", "run: temp '%.*s': must be in [0, 10]", SHOWN(temp));
    }
    if (chat && strcmp(chat, "0") && strcmp(chat, "1"))
        return refuse(why, "chat", "run: chat '%.*s': use 1 (the model's chat template) or 0", SHOWN(chat));
    out->prompt = prompt;
    out->n = (int32_t)nv;
    out->temp = (float)t;
    out->chat = chat && !strcmp(chat, "1");
    return true;
}

bool viz_parse_graph(const char *stage, const char *n, int32_t *n_tokens, viz_refusal *why) {
    if (stage && !strcmp(stage, "decode")) {
        *n_tokens = 1;
        return true;
    }
    if (stage && strcmp(stage, "prefill"))
        return refuse(why, "stage", "stage '%.*s': use prefill or decode", SHOWN(stage));
    long v = 8;
    if (n && !parse_long(n, 2, 512, &v))
        return refuse(why, "n", "n '%.*s': a prefill graph's token count must be in [2, 512]", SHOWN(n));
    *n_tokens = (int32_t)v;
    return true;
}

bool viz_check_layout_body(const char *body, size_t len, viz_refusal *why) {
    if (len == 0 || !body || strlen(body) != len)
        return refuse(why, NULL, "layout: the body must be DOT text (%zu bytes, NUL inside or empty)", len);
    return true;
}

mf_status viz_prompt_tokens(const mf_gguf *g, const mf_tokenizer *tok, const char *prompt, bool chat, int32_t **ids,
                            size_t *n_ids) {
    *ids = NULL;
    *n_ids = 0;
    char *text = NULL;
    if (!chat) {
        if (!(text = strdup(prompt))) return mf_set_error(MF_ERR_NOMEM, "run: out of memory");
    } else {
        mf_chat_template *t;
        mf_status st = mf_chat_template_from_gguf(g, NULL, &t);
        if (st) return st;
        mf_chat_message msg = {.role = "user", .content = prompt};
        mf_chat_options o = mf_chat_default_options();
        st = mf_chat_render(t, &msg, 1, &o, &text, NULL);
        mf_chat_template_free(t);
        if (st) return st;
    }
    mf_status st = mf_tokenizer_encode(tok, text, strlen(text), MF_TOK_ADD_SPECIAL | (chat ? MF_TOK_PARSE_SPECIAL : 0),
                                       ids, n_ids);
    free(text);
    return st;
}
