/* fuzz_viz.c: libFuzzer target for what `minfer viz` takes from clients (src/viz/viz_req.c). Each
 * input is a request target, split and percent-decoded as the HTTP layer does
 * (mf_http_target_parse), whose query is checked as GET /api/run's (prompt, n, temp, chat) and as
 * GET /api/graph's (stage, n); an accepted run's prompt is then tokenized as the run thread does,
 * through a real chat template (Qwen2.5's, from the fixtures' vocabulary file) when chat=1. The
 * raw input is also checked as a POST /api/layout body. A refusal must name its problem; an
 * accepted request must hold values in their ranges, its tokens in the vocabulary. Built with
 * -DMF_FUZZ_CORPUS_MAIN instead, the file writes its seed targets into the directory named by its
 * argument. */
#include "http/http_impl.h"
#include "viz/viz_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#ifndef MF_FUZZ_CORPUS_MAIN

#define MAX_TOKENS 64

static mf_gguf *vocab;
static mf_tokenizer *tok;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    mf_log_set_level(MF_LOG_ERROR);
    if (mf_gguf_open(MF_FUZZ_VOCAB, &vocab) || mf_tokenizer_load(vocab, &tok)) {
        fprintf(stderr, "fuzz_viz: cannot load %s: %s\n", MF_FUZZ_VOCAB, mf_last_error());
        abort();
    }
    return 0;
}

static const char *query(const mf_http_target *t, const char *name) {
    for (size_t i = 0; i < t->n_query; i++)
        if (!strcmp(t->keys[i], name)) return t->vals[i];
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    viz_refusal why;
    char *body = malloc(size + 1);
    if (!body) return 0;
    memcpy(body, data, size);
    body[size] = 0;
    why.msg[0] = 0;
    if (!viz_check_layout_body(body, size, &why) && !why.msg[0]) abort();
    free(body);

    mf_http_target t;
    if (mf_http_target_parse((const char *)data, size, &t)) return 0;
    viz_run_req q;
    why.msg[0] = 0;
    if (viz_parse_run(query(&t, "prompt"), query(&t, "n"), query(&t, "temp"), query(&t, "chat"), MAX_TOKENS, &q, &why)) {
        if (!q.prompt || !*q.prompt || strlen(q.prompt) >= VIZ_PROMPT_MAX || q.n < 1 || q.n > MAX_TOKENS ||
            !(q.temp >= 0 && q.temp <= 10))
            abort();
        int32_t *ids;
        size_t n_ids;
        if (!viz_prompt_tokens(vocab, tok, q.prompt, q.chat, &ids, &n_ids)) {
            for (size_t i = 0; i < n_ids; i++)
                if (ids[i] < 0 || ids[i] >= mf_tokenizer_n_vocab(tok)) abort();
            free(ids);
        } else if (!*mf_last_error()) {
            abort();
        }
    } else if (!why.msg[0]) {
        abort();
    }
    int32_t n_tokens;
    why.msg[0] = 0;
    if (viz_parse_graph(query(&t, "stage"), query(&t, "n"), &n_tokens, &why)) {
        if (n_tokens != 1 && (n_tokens < 2 || n_tokens > 512)) abort();
    } else if (!why.msg[0] || !why.param) {
        abort();
    }
    mf_http_target_free(&t);
    return 0;
}

#else

static const char *const seeds[] = {
    "/api/run?prompt=The%20capital%20of%20France%20is&n=4",
    "/api/run?prompt=hi&n=64&temp=0.7&chat=1",
    "/api/run?prompt=%3C%7Cim_start%7C%3Euser%0Ahi&chat=1&temp=10",
    "/api/run?prompt=x&n=0&temp=-1&chat=2",
    "/api/run?prompt=&n=99999999999999999999",
    "/api/run?n=3&prompt=a+b&prompt=second&temp=1e-3",
    "/api/graph?stage=prefill&n=512",
    "/api/graph?stage=decode",
    "/api/graph?stage=middle&n=1",
    "/api/graph?n=-5",
    "/api/run?prompt=%E2%82%AC%F0%9F%98%80%FF&temp=nan",
};

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    if (mkdir(argv[1], 0755) && errno != EEXIST) {
        perror(argv[1]);
        return 1;
    }
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/seed-%02zu.txt", argv[1], i);
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(seeds[i], 1, strlen(seeds[i]), f) != strlen(seeds[i]) || fclose(f)) {
            perror(path);
            return 1;
        }
    }
    printf("%zu seeds in %s\n", sizeof seeds / sizeof *seeds, argv[1]);
    return 0;
}

#endif
