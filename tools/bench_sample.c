/* bench_sample.c: times the sampler on random logits of a Qwen-sized vocabulary (151,936) on one
 * core and prints ms/token for the default chain and a few other chains.
 * usage: bench_sample [n_vocab] [tokens] [case]   (defaults 151936, 2000, all cases; case 0 is the
 * default chain, for profiling one chain alone) */
#include "sample/rng.h"
#include "sample/sampler.h"

#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* CPU time of this thread: on a shared machine wall time also counts the waits for a core. */
static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct {
    const char *name;
    void (*set)(mf_sampler_params *p);
} bench_case;

static void set_default(mf_sampler_params *p) { (void)p; }
static void set_penalties(mf_sampler_params *p) {
    p->penalty_repeat = 1.1f, p->penalty_freq = 0.1f, p->penalty_present = 0.1f;
    p->dry_multiplier = 0.8f;
}
static void set_greedy(mf_sampler_params *p) { p->temp = 0.0f; }
static void set_no_top_k(mf_sampler_params *p) { p->top_k = 0; }
static void set_typical(mf_sampler_params *p) { p->typ_p = 0.9f, p->xtc_probability = 0.5f; }
static void set_mirostat2(mf_sampler_params *p) { p->mirostat = 2; }
static void set_temp_only(mf_sampler_params *p) {
    p->stages[0] = MF_STAGE_TEMPERATURE;
    p->n_stages = 1;
}

/* Token texts for DRY's breakers: every 1000th token is a newline, the rest are plain words. */
static const char *bench_piece(void *user, int32_t id, size_t *len) {
    static char buf[16];
    (void)user;
    *len = id % 1000 == 0 ? (size_t)snprintf(buf, sizeof buf, "\n") : (size_t)snprintf(buf, sizeof buf, "w%d", (int)id);
    return buf;
}

int main(int argc, char **argv) {
    int32_t n_vocab = argc > 1 ? atoi(argv[1]) : 151936;
    int tokens = argc > 2 ? atoi(argv[2]) : 2000;
    int only = argc > 3 ? atoi(argv[3]) : -1;
    if (n_vocab <= 0 || tokens <= 0) {
        fprintf(stderr, "usage: bench_sample [n_vocab > 0] [tokens > 0] [case]\n");
        return 2;
    }
    /* A few logit vectors, cycled, shaped like a model's: roughly normal with a handful of strong
     * tokens, so truncation keeps a realistic handful. */
    enum { NL = 8 };
    float *logits = malloc((size_t)NL * (size_t)n_vocab * sizeof *logits);
    if (!logits) return 1;
    mf_rng r;
    mf_rng_seed(&r, 1);
    for (size_t i = 0; i < (size_t)NL * (size_t)n_vocab; i++) {
        double g = mf_rng_uniform(&r) + mf_rng_uniform(&r) + mf_rng_uniform(&r) - 1.5;
        logits[i] = (float)(g * 2.5 + (mf_rng_next(&r) % 5000 == 0 ? 9.0 : 0.0));
    }
    int32_t *hist = malloc((size_t)tokens * sizeof *hist);
    static const bench_case cases[] = {
        {"default (top_k 40, top_p 0.95, min_p 0.05, temp 0.8)", set_default},
        {"default + penalties 1.1/0.1/0.1 + DRY 0.8", set_penalties},
        {"greedy (temp 0)", set_greedy},
        {"no top-k (top_p 0.95 over the whole vocabulary)", set_no_top_k},
        {"typical 0.9 + XTC 0.5", set_typical},
        {"mirostat v2", set_mirostat2},
        {"temperature only (dense draw)", set_temp_only},
    };
    printf("bench_sample: n_vocab %d, %d tokens per chain, one thread\n", (int)n_vocab, tokens);
    for (size_t c = 0; c < MF_ARRAY_LEN(cases); c++) {
        if (only >= 0 && (size_t)only != c) continue;
        mf_sampler_params p = mf_sampler_default_params();
        p.seed = 42;
        cases[c].set(&p);
        mf_sampler_vocab v = {.n_vocab = n_vocab, .n_ctx = 4096, .piece = bench_piece};
        mf_sampler *s;
        if (mf_sampler_create(&p, &v, &s)) {
            fprintf(stderr, "bench_sample: %s\n", mf_last_error());
            return 1;
        }
        int n = c == 0 ? tokens : tokens / 4 + 1;
        double t0 = mf_time_s(), c0 = cpu_s();
        for (int t = 0; t < n; t++) {
            int32_t tok;
            if (mf_sampler_sample(s, logits + (size_t)(t % NL) * (size_t)n_vocab, &tok)) {
                fprintf(stderr, "bench_sample: %s\n", mf_last_error());
                return 1;
            }
            mf_sampler_accept(s, tok);
            hist[t] = tok;
        }
        double ms = (mf_time_s() - t0) * 1e3 / n, cpu_ms = (cpu_s() - c0) * 1e3 / n;
        uint64_t h = 1469598103934665603ull; /* FNV-1a of the tokens, to compare builds in one line */
        for (int t = 0; t < n; t++) h = (h ^ (uint64_t)hist[t]) * 1099511628211ull;
        printf("  %-52s %8.4f ms/token CPU, %8.4f wall  (tokens hash %016llx)\n", cases[c].name, cpu_ms, ms,
               (unsigned long long)h);
        mf_sampler_free(s);
    }
    free(hist);
    free(logits);
    return 0;
}
