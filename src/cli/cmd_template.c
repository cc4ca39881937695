/* cmd_template.c: `minfer template MODEL --messages FILE`: render a conversation with the model's
 * chat template and print exactly the rendered text (no trailing newline added). Works on
 * vocabulary-only GGUF files; --chat-template-file replaces the model's template. */
#include "cli.h"

#include <jansson.h>
#include <stdlib.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: minfer template [MODEL] --messages FILE [--chat-template-file FILE] [--now SECONDS]\n"
            "  --messages FILE            a chat request as JSON (\"-\" reads stdin): an object with\n"
            "                             messages, optional tools, documents, add_generation_prompt\n"
            "                             (default true), enable_thinking, chat_template_kwargs; or a\n"
            "                             bare array of messages\n"
            "  --chat-template-file FILE  use this Jinja template instead of the model's (MODEL may then\n"
            "                             be omitted: bos_token and eos_token render empty)\n"
            "  --now SECONDS              the time strftime_now formats (seconds since the epoch, UTC)\n");
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (cap - n < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

/* The template context from a chat request: the variables HF's apply_chat_template passes. */
static json_t *make_context(json_t *req) {
    json_t *ctx = json_object();
    if (json_is_array(req)) {
        json_object_set(ctx, "messages", req);
    } else {
        static const char *const keys[] = {"messages", "tools", "documents", "add_generation_prompt", "enable_thinking"};
        for (size_t i = 0; i < CLI_ARRAY_LEN(keys); i++) {
            json_t *v = json_object_get(req, keys[i]);
            if (v) json_object_set(ctx, keys[i], v);
        }
        json_t *kw = json_object_get(req, "chat_template_kwargs");
        if (json_is_object(kw)) json_object_update(ctx, kw);
    }
    if (!json_object_get(ctx, "add_generation_prompt")) json_object_set_new(ctx, "add_generation_prompt", json_true());
    return ctx;
}

int cmd_template(int argc, char **argv) {
    const char *model = NULL, *messages = NULL, *tmpl_file = NULL, *now_s = NULL;
    for (int i = 1; i < argc; i++) {
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if ((r = cli_take_value(argc, argv, &i, "--messages", &messages)) != 0) { if (r < 0) return 2; continue; }
        if ((r = cli_take_value(argc, argv, &i, "--chat-template-file", &tmpl_file)) != 0) { if (r < 0) return 2; continue; }
        if ((r = cli_take_value(argc, argv, &i, "--now", &now_s)) != 0) { if (r < 0) return 2; continue; }
        if (argv[i][0] == '-' && argv[i][1]) {
            cli_error("template: unknown option '%s'", argv[i]);
            usage(stderr);
            return 2;
        }
        if (model) {
            cli_error("template: more than one MODEL given ('%s' and '%s')", model, argv[i]);
            return 2;
        }
        model = argv[i];
    }
    if (!messages || (!model && !tmpl_file)) {
        cli_error("template: %s", !messages ? "--messages FILE is required" : "MODEL or --chat-template-file is required");
        usage(stderr);
        return 2;
    }
    mf_chat_render_params params = mf_chat_render_default_params();
    if (now_s) {
        long long v;
        if (!cli_parse_int("--now", now_s, 1, 253402300799LL, &v)) return 2;
        params.now = v;
    }

    json_error_t jerr;
    json_t *req = !strcmp(messages, "-") ? json_loadf(stdin, 0, &jerr) : json_load_file(messages, 0, &jerr);
    if (!req) {
        cli_error("template: %s: %s (line %d, column %d)", messages, jerr.text, jerr.line, jerr.column);
        return 1;
    }
    if (!json_is_array(req) && !json_is_object(req)) {
        cli_error("template: %s: expected a JSON object with \"messages\" or an array of messages", messages);
        json_decref(req);
        return 1;
    }
    char *src = NULL;
    if (tmpl_file && !(src = read_file(tmpl_file))) {
        cli_error("template: cannot read %s", tmpl_file);
        json_decref(req);
        return 1;
    }

    int rc = 1;
    mf_gguf *g = NULL;
    mf_chat_template *t = NULL;
    json_t *ctx = NULL;
    char *out = NULL;
    size_t len = 0;
    mf_status st;
    if (model) {
        if (!(model = cli_model(model))) goto done;
        if ((st = mf_gguf_open(model, &g)) != MF_OK) { cli_error_status(st, model); goto done; }
        st = mf_chat_template_from_gguf(g, src, &t);
    } else st = mf_chat_template_create(src, &t);
    if (st != MF_OK) { cli_error_status(st, tmpl_file ? tmpl_file : model); goto done; }
    ctx = make_context(req);
    char *ctx_text = ctx ? json_dumps(ctx, JSON_COMPACT) : NULL;
    st = ctx_text ? mf_chat_template_render_json(t, ctx_text, &params, &out, &len) : MF_ERR_NOMEM;
    free(ctx_text);
    if (st != MF_OK) { cli_error_status(st, "template"); goto done; }
    if (fwrite(out, 1, len, stdout) != len || fflush(stdout) != 0) { cli_error("template: writing the output failed"); goto done; }
    rc = 0;
done:
    free(out);
    json_decref(ctx);
    mf_chat_template_free(t);
    mf_gguf_free(g);
    free(src);
    json_decref(req);
    return rc;
}
