/* test_model_context.c: context behaviour on a fixture model: decode steps reuse one graph,
 * chunked prefill (small ubatch) gives the logits of one big batch, two sequences in one batch give
 * the logits of running each alone, removing a sequence's tail and replaying it reproduces it,
 * clear errors (bad token, context full, unknown architecture, missing file), graph dumps. */
#include "test.h"

#include "model/model.h"

#include <pthread.h>
#include <unistd.h>

static const int32_t prompt[] = {4065, 3840, 2540, 2780, 3646, 2350, 3152, 3387, 915, 225, 1219, 1158, 3550,
                                 3708, 21, 2031, 3337, 534, 3239, 483, 1901, 3318, 1231, 1388};
#define NP ((int32_t)(sizeof prompt / sizeof prompt[0]))

static double max_diff(const float *a, const float *b, int32_t n) {
    double m = 0;
    for (int32_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

static mf_context *make_ctx(const mf_model *m, int32_t ubatch, int32_t n_ctx) {
    mf_context_params p = test_context_params();
    p.n_ctx = n_ctx;
    p.n_ubatch = ubatch;
    p.n_threads = 2;
    p.kv_f32 = true;
    mf_context *c = NULL;
    CHECKF(mf_context_create(m, &p, &c) == MF_OK, "%s", mf_last_error());
    return c;
}

/* One model, one context per thread: each conversation runs on its own, at the same time. */
typedef struct {
    const mf_model *m;
    const float *ref;
    double diff;
    mf_status st;
} conv;

static void *conversation(void *arg) {
    conv *cv = arg;
    mf_context_params p = test_context_params();
    p.n_ctx = 64;
    p.n_threads = 1;
    p.kv_f32 = true;
    mf_context *c = NULL;
    cv->st = mf_context_create(cv->m, &p, &c);
    if (cv->st) return NULL;
    for (int rep = 0; rep < 3 && !cv->st; rep++) {
        mf_context_seq_rm(c, -1, 0, -1);
        mf_batch b = {.n_tokens = NP, .tokens = prompt};
        cv->st = mf_context_decode(c, &b);
        if (!cv->st) cv->diff = fmax(cv->diff, max_diff(mf_context_logits(c, 0), cv->ref, mf_model_n_vocab(cv->m)));
    }
    mf_context_free(c);
    return NULL;
}

int main(void) {
    mf_model *m = NULL;
    mf_status st = mf_model_load(fixture("models/mini-qwen2.Q8_0.gguf"), &m);
    CHECKF(st == MF_OK, "%s", mf_last_error());
    if (st) return test_summary("test_model_context");
    const int32_t V = mf_model_n_vocab(m);
    CHECK(!strcmp(mf_model_arch(m), "qwen2") && mf_model_n_layer(m) == 2 && mf_model_n_ctx_train(m) == 4096);

    /* Whole prompt at once, every position's logits. */
    mf_context *big = make_ctx(m, 512, 128);
    int8_t all[NP];
    memset(all, 1, sizeof all);
    mf_batch b = {.n_tokens = NP, .tokens = prompt, .logits = all};
    CHECK(mf_context_decode(big, &b) == MF_OK && mf_context_n_outputs(big) == NP);
    float *ref = malloc((size_t)NP * V * sizeof(float));
    for (int32_t r = 0; r < NP; r++) memcpy(ref + (size_t)r * V, mf_context_logits(big, r), (size_t)V * 4);
    CHECK(mf_context_logits(big, NP) == NULL && mf_context_seq_len(big, 0) == NP);

    /* Chunks of 17 and 7 give the same logits (graphs of their own sizes). */
    mf_context *small = make_ctx(m, 17, 128);
    CHECK(mf_context_decode(small, &b) == MF_OK && mf_context_n_outputs(small) == NP);
    double d = 0;
    for (int32_t r = 0; r < NP; r++) d = fmax(d, max_diff(mf_context_logits(small, r), ref + (size_t)r * V, V));
    CHECKF(d < 1e-3, "chunked prefill differs by %g", d);

    /* Token by token: every decode after the first reuses one graph. */
    mf_context_seq_rm(small, -1, 0, -1);
    CHECK(mf_context_seq_len(small, 0) == 0);
    int32_t builds = -1;
    d = 0;
    for (int32_t i = 0; i < NP; i++) {
        mf_batch one = {.n_tokens = 1, .tokens = &prompt[i]};
        CHECK(mf_context_decode(small, &one) == MF_OK);
        d = fmax(d, max_diff(mf_context_logits(small, 0), ref + (size_t)i * V, V));
        if (i == 0) builds = mf_context_n_graph_builds(small);
    }
    CHECKF(mf_context_n_graph_builds(small) == builds, "decode built %d graphs", mf_context_n_graph_builds(small) - builds);
    CHECKF(d < 1e-3, "token-by-token logits differ by %g", d);

    /* Rewind the last 4 positions and replay them: same logits. */
    mf_context_seq_rm(small, 0, NP - 4, -1);
    CHECK(mf_context_seq_len(small, 0) == NP - 4);
    mf_batch tail = {.n_tokens = 4, .tokens = prompt + NP - 4};
    CHECK(mf_context_decode(small, &tail) == MF_OK);
    CHECK(max_diff(mf_context_logits(small, 0), ref + (size_t)(NP - 1) * V, V) < 1e-3);

    /* The cached graphs share one arena. Prompts of 1..NP tokens with their last logits, then with
     * every logits row: 47 graphs, each larger than the ones before it in its series (the arena grows
     * and the kept graphs are rebound), more than the cache's 32 (the least recently used are
     * dropped). Then the last graphs of the first series run again: kept, rebound, still computing
     * the reference. */
    {
        mf_context *sh = make_ctx(m, 512, 128);
        int8_t every[NP];
        memset(every, 1, sizeof every);
        int32_t wrong = 0, rebuilt = -1;
        for (int pass = 0; pass < 3; pass++) {
            if (pass == 2) rebuilt = mf_context_n_graph_builds(sh);
            for (int32_t s = pass == 2 ? NP - 7 : 1; s <= NP; s++) {
                mf_context_seq_rm(sh, -1, 0, -1);
                mf_batch sb = {.n_tokens = s, .tokens = prompt, .logits = pass == 1 ? every : NULL};
                if (mf_context_decode(sh, &sb) != MF_OK) {
                    wrong++;
                    continue;
                }
                for (int32_t r = pass == 1 ? 0 : s - 1, o = 0; r < s; r++, o++)
                    wrong += memcmp(mf_context_logits(sh, o), ref + (size_t)r * V, (size_t)V * sizeof(float)) != 0;
            }
        }
        CHECKF(wrong == 0, "%d logits rows differ from one whole batch's", wrong);
        CHECKF(mf_context_n_graph_builds(sh) == rebuilt, "the kept graphs were built again (%d builds)",
               mf_context_n_graph_builds(sh) - rebuilt);
        mf_context_seq_rm(sh, -1, 0, -1);
        mf_batch two = {.n_tokens = 2, .tokens = prompt}; /* (2 tokens, 1 row): dropped, built again */
        CHECK(mf_context_decode(sh, &two) == MF_OK && mf_context_n_graph_builds(sh) == rebuilt + 1);
        CHECK(memcmp(mf_context_logits(sh, 0), ref + V, (size_t)V * sizeof(float)) == 0);
        mf_context_free(sh);
    }

    /* Two sequences in one batch, interleaved: seq 1 is the prompt, seq 2 its first 10 tokens. */
    mf_context *multi = make_ctx(m, 512, 128);
    int32_t toks[NP + 10], pos[NP + 10], seq[NP + 10];
    int8_t want[NP + 10] = {0};
    int32_t n = 0;
    for (int32_t i = 0; i < NP; i++) {
        toks[n] = prompt[i], pos[n] = i, seq[n] = 1, want[n] = i == NP - 1, n++;
        if (i < 10) toks[n] = prompt[i], pos[n] = i, seq[n] = 2, want[n] = i == 9, n++;
    }
    mf_batch mb = {.n_tokens = n, .tokens = toks, .pos = pos, .seq = seq, .logits = want};
    CHECK(mf_context_decode(multi, &mb) == MF_OK && mf_context_n_outputs(multi) == 2);
    /* Outputs follow batch order: seq 2's token 9 comes before seq 1's last token. */
    CHECK(max_diff(mf_context_logits(multi, 0), ref + (size_t)9 * V, V) < 1e-3);
    CHECK(max_diff(mf_context_logits(multi, 1), ref + (size_t)(NP - 1) * V, V) < 1e-3);
    CHECK(mf_context_seq_len(multi, 1) == NP && mf_context_seq_len(multi, 2) == 10);

    /* Three conversations on one model in three threads. */
    conv cv[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        cv[i] = (conv){.m = m, .ref = ref + (size_t)(NP - 1) * V};
        CHECK(pthread_create(&th[i], NULL, conversation, &cv[i]) == 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECKF(cv[i].st == MF_OK && cv[i].diff < 1e-3, "conversation %d: status %d, diff %g", i, cv[i].st, cv[i].diff);
    }

    /* Errors. */
    int32_t bad = V;
    mf_batch bb = {.n_tokens = 1, .tokens = &bad};
    CHECK(mf_context_decode(multi, &bb) == MF_ERR_ARG && strstr(mf_last_error(), "4096"));
    mf_context *tiny = make_ctx(m, 512, 16);
    CHECK(mf_context_decode(tiny, &b) == MF_ERR_RANGE && strstr(mf_last_error(), "context of 16"));
    mf_model *nm = NULL;
    CHECK(mf_model_load(fixture("models/vocab-qwen3.gguf"), &nm) != MF_OK && nm == NULL);
    CHECK(strstr(mf_last_error(), "vocab-qwen3.gguf") != NULL);
    CHECK(mf_model_load("/nonexistent/model.gguf", &nm) == MF_ERR_IO);
    mf_context_params p = test_context_params();
    p.n_threads = -1;
    mf_context *cx = NULL;
    CHECK(mf_context_create(m, &p, &cx) == MF_ERR_ARG && cx == NULL);

    /* A tensor whose name was damaged (output.weight -> outpat.weight) is refused by name, not
     * ignored in favour of the tied embedding. */
    {
        FILE *in = fopen(fixture("models/mini-qwen2.Q8_0.gguf"), "rb");
        char tmp[256];
        snprintf(tmp, sizeof tmp, "/tmp/minfer-test-damaged-%d.gguf", (int)getpid());
        FILE *out = fopen(tmp, "wb");
        CHECK(in && out);
        static char data[1 << 22];
        size_t nr = in ? fread(data, 1, sizeof data, in) : 0, hits = 0;
        static const char name[] = "\x0d\0\0\0\0\0\0\0output.weight"; /* GGUF string: u64 length, bytes */
        for (size_t i = 0; i + 21 < nr && i < 1 << 20; i++)
            if (!memcmp(data + i, name, 21)) data[i + 12] = 'a', hits++;
        CHECK(hits == 1);
        if (out) fwrite(data, 1, nr, out);
        while (in && out && (nr = fread(data, 1, sizeof data, in)) > 0) fwrite(data, 1, nr, out);
        if (in) fclose(in);
        if (out) fclose(out);
        mf_model *dm = NULL;
        CHECK(mf_model_load(tmp, &dm) == MF_ERR_FORMAT && dm == NULL);
        CHECKF(strstr(mf_last_error(), "'outpat.weight'") != NULL, "%s", mf_last_error());
        remove(tmp);
    }

    /* Graph dumps. */
    char path[256];
    snprintf(path, sizeof path, "/tmp/minfer-test-graph-%d.json", (int)getpid());
    CHECK(mf_context_dump_graph(small, 1, 1, "json", path) == MF_OK);
    FILE *f = fopen(path, "r");
    char buf[256] = {0};
    CHECK(f && fread(buf, 1, sizeof buf - 1, f) > 0);
    if (f) fclose(f);
    CHECK(strstr(buf, "minfer-graph") && strstr(buf, "decode"));
    remove(path);
    CHECK(mf_context_dump_graph(small, 1, 1, "svg", path) == MF_ERR_ARG);

    mf_context_free(tiny);
    mf_context_free(multi);
    mf_context_free(small);

    /* Two contexts on one set of threads (threads_of), used in turn: each gives the logits of a
     * context of its own, and either may be freed first. */
    for (int order = 0; order < 2; order++) {
        mf_context_params sp = test_context_params();
        sp.n_ctx = 128, sp.kv_f32 = true, sp.n_threads = 3;
        mf_context *a = NULL, *s = NULL;
        CHECK(mf_context_create(m, &sp, &a) == MF_OK);
        sp.n_threads = 1; /* ignored: the other's three */
        sp.threads_of = a;
        CHECK(mf_context_create(m, &sp, &s) == MF_OK);
        if (!a || !s) {
            mf_context_free(a), mf_context_free(s);
            break;
        }
        CHECK(mf_context_n_threads(s) == 3);
        double da = 0, ds = 0;
        for (int32_t i = 0; i < NP; i++) {
            mf_batch one = {.n_tokens = 1, .tokens = &prompt[i]};
            CHECK(mf_context_decode(a, &one) == MF_OK && mf_context_decode(s, &one) == MF_OK);
            da = fmax(da, max_diff(mf_context_logits(a, 0), ref + (size_t)i * V, V));
            ds = fmax(ds, max_diff(mf_context_logits(s, 0), mf_context_logits(a, 0), V));
        }
        CHECKF(da < 1e-3 && ds == 0, "shared threads: %g from the reference, %g between the two", da, ds);
        mf_context *first = order ? s : a, *second = order ? a : s;
        mf_context_free(first);
        mf_batch one = {.n_tokens = 1, .tokens = &prompt[0]};
        CHECK(mf_context_decode(second, &one) == MF_OK); /* its threads outlive the other */
        mf_context_free(second);
    }
    free(ref);
    mf_context_free(big);
    mf_model_free(m);
    return test_summary("test_model_context");
}
