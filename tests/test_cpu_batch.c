/* test_cpu_batch.c: batch invariance of the quantized matmuls in llama.cpp's order (Q4_K above
 * all, whose two llama.cpp orders minfer no longer mixes): a token's outputs from mf_cpu_matmul are
 * bit for bit those of the same token alone, whatever the token count (1..40 and a few past the
 * GEMMs' tiles and chunks), the token's index in the batch and the thread count; also through
 * mf_cpu_matmul_reusing with activations a previous matmul quantized. Weights with a multiple of 8
 * rows (the repacked order, the prefill GEMM) and without. Skipped without the ordered kernels.
 * Float weights are not batch invariant (their multi-token tiles and GEMM sum in other orders than
 * the one-token dot) and are not checked. */
#include "test.h"

#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

static uint32_t rng = 2024;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

enum { MAX_NT = 515, N_POOLS = 3 };

typedef struct {
    mf_weight w;
    uint8_t *q;
} weight;

static weight make_weight(mf_type t, int64_t N, int64_t K) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    const size_t rb = mf_row_size(t, K);
    weight r = {.q = malloc(rb * (size_t)N)};
    float *row = malloc((size_t)K * sizeof(float));
    for (int64_t o = 0; o < N; o++) {
        for (int64_t i = 0; i < K; i++) row[i] = frand() * (1.0f + (float)(o % 3));
        tr->quantize(row, r.q + (size_t)o * rb, K);
    }
    free(row);
    r.w = (mf_weight){.type = t, .ne = {K, N}, .data = r.q, .row_bytes = rb};
    return r;
}

/* y: the outputs of rows [t0, t0 + nt) of x through w on nth threads; each token's against its
 * result alone, bit for bit (one check). */
static void compare(const char *what, const mf_weight *w, const float *y, const float *alone, int64_t t0, int64_t nt,
                   int nth) {
    const int64_t N = w->ne[1];
    int bad = 0;
    int64_t first = -1;
    for (int64_t t = 0; t < nt; t++)
        if (memcmp(y + t * N, alone + (t0 + t) * N, (size_t)N * sizeof(float)) != 0 && bad++ == 0) first = t;
    CHECKF(bad == 0, "%s %s N=%lld K=%lld, %lld tokens, %d threads: %d differ from their results alone, first token "
           "%lld at index %lld", what, mf_type_name(w->type), (long long)N, (long long)w->ne[0], (long long)nt, nth,
           bad, (long long)(t0 + first), (long long)first);
}

/* w's packed copy (mf_cpu_pack) where the best kernels have one for it, else NULL. */
static void *pack(weight *w) {
    const size_t n = mf_cpu_packed_size(&w->w);
    if (!n) return NULL;
    void *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
    mf_cpu_pack(&w->w, p);
    return p;
}

/* packed: the weights in their packed copies, where a packed copy serves cfg (the few-token paths
 * read it directly) */
static void check_type(mf_type t, int64_t N, int64_t K, bool packed, mf_pool *pools[N_POOLS]) {
    weight w = make_weight(t, N, K), w2 = make_weight(t, N, K);
    void *pw = packed ? pack(&w) : NULL, *pw2 = packed ? pack(&w2) : NULL;
    if (packed && !pw) { /* no packed layout for this type here */
        free(w.q), free(w2.q);
        return;
    }
    float *x = malloc((size_t)(K * MAX_NT) * sizeof(float));
    float *alone = malloc((size_t)(N * MAX_NT) * sizeof(float)), *alone2 = malloc((size_t)(N * MAX_NT) * sizeof(float));
    float *y = malloc((size_t)(N * MAX_NT) * sizeof(float));
    for (int64_t i = 0; i < K * MAX_NT; i++) x[i] = frand() * 2.0f;
    void *work = malloc(mf_cpu_matmul_work_size(&cfg, &w.w, MAX_NT, N_POOLS));
    /* every token alone, on one thread */
    for (int64_t tk = 0; tk < MAX_NT; tk++) {
        mf_cpu_matmul(pools[0], &cfg, &w.w, NULL, x + tk * K, alone + tk * N, 1, work);
        mf_cpu_matmul(pools[0], &cfg, &w2.w, NULL, x + tk * K, alone2 + tk * N, 1, work);
    }
    int64_t nts[48];
    int n_nt = 0;
    for (int64_t n = 1; n <= 40; n++) nts[n_nt++] = n;
    const int64_t big[] = {64, 67, 130, 257, 300, 515};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) nts[n_nt++] = big[i];
    for (int i = 0; i < n_nt; i++)
        for (int p = 0; p < N_POOLS; p++) {
            /* tokens at other indices each time */
            const int64_t nt = nts[i], t0 = (nt * 7 + p) % (MAX_NT - nt + 1);
            const int nth = mf_pool_n_threads(pools[p]);
            mf_cpu_matmul(pools[p], &cfg, &w.w, NULL, x + t0 * K, y, nt, work);
            compare("matmul", &w.w, y, alone, t0, nt, nth);
            /* the second weight on the activations the first matmul left quantized in work */
            mf_cpu_matmul_reusing(pools[p], &cfg, &w2.w, NULL, x + t0 * K, y, nt, work, true);
            compare("matmul_reusing", &w2.w, y, alone2, t0, nt, nth);
        }
    free(w.q), free(w2.q), free(pw), free(pw2), free(x), free(alone), free(alone2), free(y), free(work);
}

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
    if (!cfg.ordered) {
        printf("test_cpu_batch: the ordered kernels are not in use here (not x86 with AVX2, or MINFER_ISA=scalar, "
               "or MINFER_ORDER=fast): no batch invariance to check\n");
        return test_summary("test_cpu_batch");
    }
    mf_pool *pools[N_POOLS] = {NULL};
    for (int i = 0; i < N_POOLS; i++) CHECK(mf_pool_create(i + 1, &pools[i]) == MF_OK);
    const mf_type types[] = {MF_TYPE_Q4_K, MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0,
                             MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q5_K, MF_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_type(types[i], 136, 1024, false, pools); /* repacked order and prefill GEMM; a 16-row panel tail */
        check_type(types[i], 44, 512, false, pools);   /* rows not a multiple of 8: the plain order */
        check_type(types[i], 136, 1024, true, pools);  /* packed: a short last panel */
        check_type(types[i], 1000, 256, true, pools);  /* packed: 63 panels among the threads */
    }
    for (int i = 0; i < N_POOLS; i++) mf_pool_free(pools[i]);
    return test_summary("test_cpu_batch");
}
