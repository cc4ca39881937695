/* fuzz_chat.c: libFuzzer target for chat templates: the input is template source, compiled and,
 * when it compiles, rendered against a conversation with a system prompt, tool calls, tool results,
 * content parts and tools, under small limits. Any input must end in MF_OK or an error status with
 * a message, never a crash, a hang or a leak. Built with -DMF_FUZZ_CORPUS_MAIN instead, the same file
 * is the seed generator: every *.jinja file (fixtures/templates) and every "template" string inside a
 * *.json file (the interpreter's cases in tests/data/templates) becomes one seed file. */
#include "chat/chat.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef MF_FUZZ_CORPUS_MAIN

static const char conversation[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
    " {\"role\": \"user\", \"content\": \"Weather in Paris?\"},"
    " {\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", \"id\": \"call12345\","
    "   \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2.5, true, null]}}}]},"
    " {\"role\": \"tool\", \"tool_call_id\": \"call12345\", \"content\": \"{\\\"temp\\\": 21}\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"th\\u00e4nks\"}, {\"type\": \"image\"}]}],"
    " \"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\","
    "   \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}],"
    " \"add_generation_prompt\": true, \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static json_t *ctx;
    if (!ctx) ctx = json_loads(conversation, 0, NULL);
    char *src = malloc(size + 1);
    if (!src) return 0;
    memcpy(src, data, size);
    src[size] = 0;
    mf_chat_template *t = NULL;
    if (mf_chat_template_create(src, &t) == MF_OK) {
        MF_ASSERT(mf_chat_template_set_tokens(t, "<s>", "</s>") == MF_OK);
        mf_chat_render_params p = mf_chat_render_default_params();
        p.now = 1795953600;
        p.max_output = 1 << 20;
        p.max_memory = 64 << 20;
        p.max_steps = 200000;
        char *out = NULL;
        size_t len = 0;
        mf_status st = mf_chat_template_render(t, ctx, &p, &out, &len);
        MF_ASSERT(st == MF_OK ? out != NULL && strlen(out) <= len : out == NULL && mf_last_error()[0]);
        free(out);
    } else {
        MF_ASSERT(t == NULL && mf_last_error()[0]);
    }
    mf_chat_template_free(t);
    free(src);
    return 0;
}

#else /* MF_FUZZ_CORPUS_MAIN: fuzz_chat_corpus OUT_DIR DIR... */

#include <dirent.h>

static int n_seeds;

static int write_seed(const char *out_dir, const char *name, const char *text, size_t len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", out_dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, len, f) != len || fclose(f)) {
        fprintf(stderr, "fuzz_chat_corpus: cannot write %s\n", path);
        if (f) fclose(f);
        return 1;
    }
    n_seeds++;
    return 0;
}

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static int copy_seed(const char *in, const char *out_dir, const char *name) {
    FILE *f = fopen(in, "rb");
    char *text = NULL;
    long n = -1;
    if (f && !fseek(f, 0, SEEK_END) && (n = ftell(f)) >= 0 && !fseek(f, 0, SEEK_SET)) text = malloc((size_t)n + 1);
    const bool ok = text && fread(text, 1, (size_t)n, f) == (size_t)n;
    if (f) fclose(f);
    int rc = ok ? write_seed(out_dir, name, text, (size_t)n) : 1;
    if (!ok) fprintf(stderr, "fuzz_chat_corpus: cannot read %s\n", in);
    free(text);
    return rc;
}

/* Every string under a "template" key, at any depth of v, as OUT_DIR/<stem>-<i>.jinja. */
static int json_templates(const json_t *v, const char *out_dir, const char *stem) {
    int rc = 0;
    if (json_is_array(v)) {
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) rc |= json_templates(e, out_dir, stem);
    } else if (json_is_object(v)) {
        const char *key;
        json_t *e;
        json_object_foreach((json_t *)v, key, e) {
            if (!strcmp(key, "template") && json_is_string(e)) {
                char name[512];
                snprintf(name, sizeof name, "%s-%d.jinja", stem, n_seeds);
                rc |= write_seed(out_dir, name, json_string_value(e), json_string_length(e));
            } else {
                rc |= json_templates(e, out_dir, stem);
            }
        }
    }
    return rc;
}

static int seeds_from(const char *dir, const char *out_dir) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_chat_corpus: cannot open %s\n", dir);
        return 1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char in[4096];
        snprintf(in, sizeof in, "%s/%s", dir, e->d_name);
        if (has_suffix(e->d_name, ".jinja")) {
            rc |= copy_seed(in, out_dir, e->d_name);
        } else if (has_suffix(e->d_name, ".json")) {
            json_error_t err;
            json_t *j = json_load_file(in, 0, &err);
            if (!j) {
                fprintf(stderr, "fuzz_chat_corpus: %s:%d: %s\n", in, err.line, err.text);
                rc = 1;
                continue;
            }
            char stem[256];
            snprintf(stem, sizeof stem, "%.*s", (int)(strlen(e->d_name) - 5), e->d_name);
            rc |= json_templates(j, out_dir, stem);
            json_decref(j);
        }
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fuzz_chat_corpus OUT_DIR DIR...\n");
        return 2;
    }
    int rc = 0;
    for (int i = 2; i < argc; i++) rc |= seeds_from(argv[i], argv[1]);
    printf("fuzz_chat_corpus: %d seeds in %s\n", n_seeds, argv[1]);
    return rc;
}

#endif
