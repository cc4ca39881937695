/* test_chat.c: chat templates end to end through the library API: every template in
 * fixtures/templates and the templates inside the fixture vocabulary GGUFs render every
 * conversation of render_templates.py byte-identically to Hugging Face transformers
 * (tests/data/templates/renders.json, made by /work/shared/tools/render_templates.py), BOS/EOS
 * texts come from GGUF metadata, and a model without a template falls back to ChatML. */
#include "chat/chat.h"
#include "test.h"

#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#define FIXED_NOW 1795953600 /* 2026-11-29 12:00 UTC, render_templates.py's strftime_now clock */

static json_t *g_renders;

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

/* Render every conversation with t and compare with the reference renders of template `name`. */
static int check_all_conversations(const mf_chat_template *t, const char *name) {
    json_t *convs = json_object_get(g_renders, "conversations"), *want = json_object_get(json_object_get(g_renders, "renders"), name);
    CHECKF(want != NULL, "no reference renders for %s", name);
    if (!want) return 0;
    mf_chat_render_params p = mf_chat_render_default_params();
    p.now = FIXED_NOW;
    const char *cname;
    json_t *conv;
    int n = 0;
    json_object_foreach(convs, cname, conv) {
        json_t *exp = json_object_get(want, cname);
        char *out = NULL;
        mf_status st = mf_chat_template_render(t, conv, &p, &out, NULL);
        if (json_is_true(json_object_get(exp, "ok"))) {
            const char *text = json_string_value(json_object_get(exp, "text"));
            CHECKF(st == MF_OK && !strcmp(out, text), "%s / %s: %s\n--- want\n%s\n--- got\n%s", name, cname,
                   st == MF_OK ? "differs" : mf_last_error(), text, out ? out : "");
        } else {
            /* the template itself rejects this conversation (raise_exception): same message */
            const char *msg = json_string_value(json_object_get(exp, "error"));
            CHECKF(st == MF_ERR_ARG && strstr(mf_last_error(), msg), "%s / %s: want failure '%s', got %s", name, cname,
                   msg, st == MF_OK ? "success" : mf_last_error());
        }
        free(out);
        n++;
    }
    return n;
}

static void test_fixture_templates(void) {
    const char *name;
    json_t *v;
    int templates = 0, renders = 0;
    json_object_foreach(json_object_get(g_renders, "renders"), name, v) {
        char rel[512];
        snprintf(rel, sizeof rel, "templates/%s.jinja", name);
        char *src = slurp(fixture(rel));
        CHECKF(src != NULL, "cannot read %s", fixture(rel));
        if (!src) continue;
        mf_chat_template *t = NULL;
        mf_status st = mf_chat_template_create(src, &t);
        CHECKF(st == MF_OK, "%s: %s", name, mf_last_error());
        if (t) {
            CHECK(mf_chat_template_set_tokens(t, "<|endoftext|>", "<|im_end|>") == MF_OK);
            renders += check_all_conversations(t, name);
            templates++;
        }
        mf_chat_template_free(t);
        free(src);
    }
    CHECKF(templates >= 10 && renders >= 50, "%d templates, %d renders", templates, renders);
}

static void test_vocab_gguf(const char *file, const char *ref_name) {
    mf_gguf *g = NULL;
    mf_status st = mf_gguf_open(fixture(file), &g);
    CHECKF(st == MF_OK, "%s: %s", file, mf_last_error());
    if (st != MF_OK) return;
    mf_chat_template *t = NULL;
    st = mf_chat_template_from_gguf(g, NULL, &t);
    CHECKF(st == MF_OK, "%s: %s", file, mf_last_error());
    if (t) {
        CHECK(!strcmp(mf_chat_template_bos(t), "<|endoftext|>"));
        CHECK(!strcmp(mf_chat_template_eos(t), "<|im_end|>"));
        CHECK(!mf_chat_template_is_fallback(t));
        check_all_conversations(t, ref_name);
        mf_chat_template_free(t);
    }
    /* an override replaces the model's template but keeps its BOS/EOS texts */
    CHECK(mf_chat_template_from_gguf(g, "{{ bos_token }}+{{ eos_token }}", &t) == MF_OK);
    char *out = NULL;
    CHECK(t && mf_chat_template_render(t, NULL, NULL, &out, NULL) == MF_OK && !strcmp(out, "<|endoftext|>+<|im_end|>"));
    free(out);
    mf_chat_template_free(t);
    /* a broken override reports the syntax error */
    CHECK(mf_chat_template_from_gguf(g, "{% if %}", &t) == MF_ERR_FORMAT && t == NULL);
    mf_gguf_free(g);
}

/* A model with tokens but no tokenizer.chat_template renders ChatML, which is exactly what
 * Qwen2.5's template produces for a conversation that has a system message and no tools. */
static void test_fallback(void) {
    char path[] = "/tmp/minfer-test-chat-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    mf_gguf_writer *w = NULL;
    mf_str toks[3] = {{"hello", 5}, {"<|endoftext|>", 13}, {"<|im_end|>", 10}};
    mf_gguf_value arr = {.type = MF_GGUF_ARRAY};
    arr.arr.type = MF_GGUF_STRING;
    arr.arr.n = 3;
    arr.arr.strs = toks;
    CHECK(mf_gguf_writer_create(&w) == MF_OK);
    CHECK(mf_gguf_writer_set_str(w, "general.architecture", "qwen2") == MF_OK);
    CHECK(mf_gguf_writer_set_value(w, "tokenizer.ggml.tokens", &arr) == MF_OK);
    CHECK(mf_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) == MF_OK);
    CHECK(mf_gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) == MF_OK);
    CHECK(mf_gguf_writer_begin(w, path) == MF_OK);
    CHECK(mf_gguf_writer_finish(w) == MF_OK);
    mf_gguf_writer_free(w);

    mf_gguf *g = NULL;
    mf_chat_template *t = NULL;
    CHECKF(mf_gguf_open(path, &g) == MF_OK, "%s", mf_last_error());
    CHECKF(g && mf_chat_template_from_gguf(g, NULL, &t) == MF_OK, "%s", mf_last_error());
    if (t) {
        CHECK(mf_chat_template_is_fallback(t));
        CHECK(!strcmp(mf_chat_template_source(t), mf_chat_template_chatml()));
        json_t *conv = json_object_get(json_object_get(g_renders, "conversations"), "system_multi");
        const char *want = json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(g_renders, "renders"), "Qwen-Qwen2.5-7B-Instruct"), "system_multi"), "text"));
        char *out = NULL;
        CHECK(mf_chat_template_render(t, conv, NULL, &out, NULL) == MF_OK && want && !strcmp(out, want));
        free(out);
    }
    mf_chat_template_free(t);
    mf_gguf_free(g);

    /* a BOS id past the vocabulary is an error naming the key */
    CHECK(mf_gguf_writer_create(&w) == MF_OK);
    CHECK(mf_gguf_writer_set_value(w, "tokenizer.ggml.tokens", &arr) == MF_OK);
    CHECK(mf_gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 99) == MF_OK);
    CHECK(mf_gguf_writer_begin(w, path) == MF_OK && mf_gguf_writer_finish(w) == MF_OK);
    mf_gguf_writer_free(w);
    g = NULL;
    t = NULL;
    CHECK(mf_gguf_open(path, &g) == MF_OK);
    CHECK(g && mf_chat_template_from_gguf(g, NULL, &t) == MF_ERR_FORMAT && t == NULL);
    CHECKF(strstr(mf_last_error(), "bos_token_id"), "%s", mf_last_error());
    mf_gguf_free(g);
    unlink(path);
}

int main(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/templates/renders.json", getenv("MINFER_SOURCE") ? getenv("MINFER_SOURCE") : ".");
    json_error_t jerr;
    g_renders = json_load_file(path, 0, &jerr);
    CHECKF(g_renders != NULL, "%s: %s", path, jerr.text);
    if (g_renders) {
        test_fixture_templates();
        test_vocab_gguf("models/vocab-qwen2.5.gguf", "Qwen-Qwen2.5-7B-Instruct");
        test_vocab_gguf("models/vocab-qwen3.gguf", "Qwen-Qwen3-0.6B");
        test_fallback();
    }
    json_decref(g_renders);
    return test_summary("test_chat");
}
