/* test_cpu_order8.c: the eight-row ordered dots (mf_cpu_ordered_dots.dot8, llama.cpp's repacked Q4_0
 * order with eight weight rows interleaved in registers) give bit for bit the one-row ordered dot's
 * result for every row, for odd and even block counts, extreme weights and activations included,
 * and the matmul that uses them (one token, and several) equals one ordered dot per output. */
#include "test.h"

#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"

#include <stdint.h>

#if defined(__x86_64__)
static uint32_t rng = 777;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

/* 8 rows of n values against one activation row; extreme = weights and activations at full range
 * with mixed signs (nibbles 0 and 15, activations +-127). */
static void check_rows(int64_t n, int variant, bool extreme) {
    const mf_type t = MF_TYPE_Q4_0;
    const mf_type_traits *tr = mf_type_get_traits(t);
    enum { NR = 8 };
    const size_t rb = mf_row_size(t, n), ab = mf_row_size(tr->vec_dot_type, n);
    float *x = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * NR * sizeof(float));
    uint8_t *w = malloc(rb * NR), *a = malloc(ab);
    for (int64_t i = 0; i < n; i++) x[i] = extreme ? (i % 3 ? 4.0f : -4.0f) : frand() * 3.0f;
    for (int64_t i = 0; i < n * NR; i++)
        wf[i] = extreme ? ((i / 5) % 2 ? 1.0f : -1.0f) * (1.0f + (float)(i % 7)) : frand();
    for (int r = 0; r < NR; r++) tr->quantize(wf + r * n, w + r * rb, n);
    mf_simd_quantize_row(tr->vec_dot_type)(x, a, n);
    const mf_cpu_ordered_dots d = mf_cpu_ordered_dots_avx2(t, variant);
    CHECKF(d.dot && d.dot8, "Q4_0 variant %d: no eight-row dot", variant);
    if (d.dot && d.dot8) {
        float eight[NR];
        d.dot8(n, w, rb, a, eight);
        for (int r = 0; r < NR; r++) {
            const float one = d.dot(n, w + r * rb, a);
            const double ref = tr->vec_dot(n, w + r * rb, a);
            CHECKF(memcmp(&one, &eight[r], sizeof(float)) == 0, "n=%lld row %d: eight-row %.9g vs one-row %.9g",
                   (long long)n, r, eight[r], one);
            CHECKF(fabs(eight[r] - ref) <= 1e-4 * (1.0 + fabs(ref)), "n=%lld row %d: eight-row %g, reference %g",
                   (long long)n, r, eight[r], ref);
        }
    }
    free(x), free(wf), free(w), free(a);
}

/* A 40 x n Q4_0 matmul through the backend (rows split over threads, eight-row groups plus a
 * remainder within each thread's range) against one ordered dot per (output, token). */
static void check_matmul(int64_t n, int64_t nt) {
    const int64_t N = 40;
    const size_t rb = mf_row_size(MF_TYPE_Q4_0, n);
    float *wf = malloc((size_t)(n * N) * sizeof(float)), *x = malloc((size_t)(n * nt) * sizeof(float));
    float *y = malloc((size_t)(N * nt) * sizeof(float));
    uint8_t *wq = malloc(rb * (size_t)N);
    for (int64_t i = 0; i < n * N; i++) wf[i] = frand();
    for (int64_t i = 0; i < n * nt; i++) x[i] = frand() * 2.0f;
    for (int64_t o = 0; o < N; o++) mf_type_get_traits(MF_TYPE_Q4_0)->quantize(wf + o * n, wq + o * rb, n);
    mf_weight w = {.type = MF_TYPE_Q4_0, .ne = {n, N}, .data = wq, .row_bytes = rb};
    void *work = malloc(mf_cpu_matmul_work_size(&w, nt, 4));
    mf_pool *pool = NULL;
    CHECK(mf_pool_create(2, &pool) == MF_OK);
    mf_cpu_matmul(pool, &w, NULL, x, y, nt, work);
    const mf_cpu_ordered_dots gemv = mf_cpu_ordered_dots_for(&w, false), gemm = mf_cpu_ordered_dots_for(&w, true);
    CHECK(gemv.dot && gemm.dot);
    uint8_t *a = malloc(mf_row_size(MF_TYPE_Q8_0, n));
    for (int64_t t = 0; gemv.dot && gemm.dot && t < nt; t++) {
        mf_simd_quantize_row(MF_TYPE_Q8_0)(x + t * n, a, n);
        const mf_cpu_ordered_dots d = nt > 3 && t < nt - nt % 4 ? gemm : gemv;
        for (int64_t o = 0; o < N; o++) {
            const float v = d.dot(n, wq + o * rb, a);
            CHECKF(memcmp(&v, &y[t * N + o], sizeof(float)) == 0, "matmul n=%lld nt=%lld [%lld,%lld]: %.9g vs %.9g",
                   (long long)n, (long long)nt, (long long)t, (long long)o, y[t * N + o], v);
        }
    }
    mf_pool_free(pool);
    free(wf), free(x), free(y), free(wq), free(work), free(a);
}
#endif

int main(void) {
#if defined(__x86_64__)
    if (!mf_cpu_ordered_float()) {
        printf("ordered kernels not in use on this CPU; nothing to check\n");
        return test_summary("test_cpu_order8");
    }
    const int64_t ns[] = {32, 96, 896, 4864};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (int v = MF_ORDER_REPACKED_GEMV; v <= MF_ORDER_REPACKED_GEMM; v++) {
            check_rows(ns[i], v, false);
            check_rows(ns[i], v, true);
        }
    check_matmul(896, 1);
    check_matmul(96, 7);
#endif
    return test_summary("test_cpu_order8");
}
