/* fuzz_serve.c: libFuzzer target for the server's request checks (serve_parse): each input is a
 * request body, parsed as the HTTP layer does (depth limit, duplicate keys refused) and checked
 * as a chat and as a legacy completion request with a real tokenizer and chat template (Qwen2.5's,
 * from the fixtures' vocabulary file): message and content shapes, the template, tokenizing,
 * every sampling field, the generator. A refusal must be a 400 with a message (500 only when out
 * of memory); an accepted request must have a prompt that fits a slot. Built with
 * -DMF_FUZZ_CORPUS_MAIN instead, the file writes its seed requests into the directory named by
 * its argument. */
#include "serve_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


#ifndef MF_FUZZ_CORPUS_MAIN

static serve srv;
static mf_serve_params params;
static mf_tokenizer *tok;
static mf_gguf *vocab;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    mf_log_set_level(MF_LOG_ERROR);
    if (mf_gguf_open(MF_FUZZ_VOCAB, &vocab) || mf_tokenizer_load(vocab, &tok) ||
        mf_chat_template_from_gguf(vocab, NULL, &srv.tmpl)) {
        fprintf(stderr, "fuzz_serve: cannot load %s: %s\n", MF_FUZZ_VOCAB, mf_last_error());
        abort();
    }
    mf_serve_default_params(&params);
    srv.p = &params;
    srv.tok = tok;
    srv.n_vocab = mf_tokenizer_n_vocab(tok);
    srv.n_ctx_slot = 256;
    snprintf(srv.model_name, sizeof srv.model_name, "fuzz");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char msg[256];
    json_t *req = mf_http_json_parse((const char *)data, size, 64, msg, sizeof msg);
    if (!req) return 0;
    for (int k = 0; k < 2; k++) {
        serve_refusal why;
        serve_task *t = serve_parse(&srv, k ? TASK_COMPLETION : TASK_CHAT, req, &why);
        if (t) {
            if (t->n_prompt <= 0 || t->n_prompt >= srv.n_ctx_slot || !t->gen) abort();
            for (int32_t i = 0; i < t->n_prompt; i++)
                if (t->prompt[i] < 0 || t->prompt[i] >= srv.n_vocab) abort();
            serve_task_free(t);
        } else if (!(why.status == 400 || why.status == 500) || !why.msg[0]) {
            abort();
        }
    }
    json_decref(req);
    return 0;
}

#else

static const char *const seeds[] = {
    "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}]}",
    "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\","
    "\"text\":\"a\"},{\"type\":\"text\",\"text\":\"b\"}]}],\"temperature\":0.7,\"top_p\":0.9,\"top_k\":20,\"min_p\":0.1,"
    "\"seed\":42,\"max_tokens\":16,\"stop\":[\"\\n\",\"END\"],\"presence_penalty\":0.5,\"frequency_penalty\":0.2,"
    "\"repeat_penalty\":1.1,\"logit_bias\":{\"13\":-100,\"hello\":2},\"logprobs\":true,\"top_logprobs\":3,"
    "\"stream\":true,\"stream_options\":{\"include_usage\":true}}",
    "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,\"tool_calls\":"
    "[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"x\\\":1}\"}}]},"
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"42\"}],\"tool_choice\":\"none\",\"tools\":[]}",
    "{\"messages\":[{\"role\":\"developer\",\"content\":\"x\"},{\"role\":\"user\",\"content\":\"<|im_start|>y\"}],"
    "\"chat_template_kwargs\":{\"enable_thinking\":false},\"n\":1,\"max_completion_tokens\":5}",
    "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"logprobs\":2,\"echo\":false,\"best_of\":1}",
    "{\"prompt\":[1,2,3,4,5],\"samplers\":[\"top_k\",\"temperature\"],\"mirostat\":2,\"dry_multiplier\":0.8,"
    "\"dry_sequence_breakers\":[\"\\n\"],\"xtc_probability\":0.5,\"typical_p\":0.9,\"ignore_eos\":true}",
    "{\"prompt\":[\"one prompt\"],\"response_format\":{\"type\":\"text\"},\"logit_bias\":[[5,false],[\"a\",1.5]]}",
    "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\",\"image_url\":{\"url\":\"x\"}}]}]}",
    "{\"messages\":[],\"n\":2,\"temperature\":\"hot\",\"max_tokens\":-1}",
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
        snprintf(path, sizeof path, "%s/seed-%02zu.json", argv[1], i);
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
