/* test_model_order.c: the CPU backend's llama.cpp-ordered kernels (src/cpu/cpu_dot_order*.c), which
 * make the fixture models' logits equal llama.cpp's (test_model_fixtures checks that end to end).
 * Here: every ordered dot is a dot (close to the reference dot in double), its one-row, four-row and
 * AVX-512 variants give bit-identical results (the four-row and AVX-512 ones only regroup work, never
 * the float steps of one output), including rows with an odd number of blocks and a K-quant row of
 * one super-block; the repacked Q4_K dot equals its plain scalar twin bit for bit; and the ordered
 * exp-based SwiGLU is close to the direct formula. */
#include "test.h"

#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

#if defined(__x86_64__)
static uint32_t rng = 12345;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static const mf_type types[] = {MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1,
                                MF_TYPE_Q8_0, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K};

/* nr weight rows of n values, quantized to t, against one activation row quantized to the dot type. */
static void check_type(mf_type t, int64_t n, int variant) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    enum { NR = 8 };
    const size_t rb = mf_row_size(t, n), ab = mf_row_size(tr->vec_dot_type, n);
    float *x = malloc((size_t)n * sizeof(float)), *wf = malloc((size_t)n * NR * sizeof(float));
    uint8_t *w = malloc(rb * NR), *a = malloc(ab);
    for (int64_t i = 0; i < n; i++) x[i] = frand() * 3.0f;
    for (int64_t i = 0; i < n * NR; i++) wf[i] = frand();
    for (int r = 0; r < NR; r++) tr->quantize(wf + r * n, w + r * rb, n);
    mf_simd_quantize_row_at(cfg.level, tr->vec_dot_type)(x, a, n);
    mf_cpu_ordered_dots d = mf_cpu_ordered_dots_avx2(t, variant);
    CHECKF(d.dot && d.dot4, "%s: no ordered dots", tr->name);
    if (!d.dot || !d.dot4) goto done;
    float one[NR], four[NR];
    for (int r = 0; r < NR; r++) {
        one[r] = d.dot(n, w + r * rb, a);
        const double ref = tr->vec_dot(n, w + r * rb, a);
        CHECKF(fabs(one[r] - ref) <= 1e-4 * (1.0 + fabs(ref)), "%s n=%lld row %d: ordered %g, reference %g", tr->name,
               (long long)n, r, one[r], ref);
    }
    /* the repacked Q4_K order has a plain scalar twin: bit for bit */
    for (int r = 0; t == MF_TYPE_Q4_K && variant == MF_ORDER_REPACKED && r < NR; r++) {
        const float twin = mf_cpu_dot_q4_K_rp_ref(n, w + r * rb, a);
        CHECKF(memcmp(&one[r], &twin, sizeof(float)) == 0, "%s n=%lld row %d: repacked %.9g vs scalar twin %.9g",
               tr->name, (long long)n, r, one[r], twin);
    }
    for (int r = 0; r < NR; r += 4) d.dot4(n, w + r * rb, rb, a, four + r);
    for (int r = 0; r < NR; r++)
        CHECKF(memcmp(&one[r], &four[r], sizeof(float)) == 0, "%s n=%lld row %d: four-row %.9g vs one-row %.9g",
               tr->name, (long long)n, r, four[r], one[r]);
    /* the AVX-512 one-row dots against the AVX2 ones */
    mf_vec_dot_fn d512 =
        variant == MF_ORDER_PLAIN && cfg.level == MF_SIMD_AVX512 ? mf_cpu_ordered_dot_avx512(t) : NULL;
    for (int r = 0; d512 && r < NR; r++) {
        float v = d512(n, w + r * rb, a);
        CHECKF(memcmp(&v, &one[r], sizeof(float)) == 0, "%s n=%lld row %d: AVX-512 %.9g vs AVX2 %.9g", tr->name,
               (long long)n, r, v, one[r]);
    }
done:
    free(x), free(wf), free(w), free(a);
}

#endif

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
#if defined(__x86_64__)
    if (!cfg.ordered) {
        printf("test_model_order: no ordered kernels on this CPU (x86 with AVX2 only); nothing to test\n");
        return test_summary("test_model_order");
    }
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const mf_type t = types[i];
        const bool k = mf_type_get_traits(t)->blck_size == 256;
        const int64_t sizes[] = {k ? 256 : 32, k ? 512 : 96, k ? 768 : 256, k ? 2048 : 576};
        for (int s = 0; s < 4; s++) {
            check_type(t, sizes[s], MF_ORDER_PLAIN);
            if (t == MF_TYPE_Q4_0 || t == MF_TYPE_Q4_K) check_type(t, sizes[s], MF_ORDER_REPACKED);
        }
    }
    /* SwiGLU with llama.cpp's exp against the direct formula, over a wide range and the edges. */
    enum { N = 4096 };
    float *g = malloc(N * sizeof(float)), *u = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
    for (int i = 0; i < N; i++) g[i] = (float)(i - N / 2) / 20.0f, u[i] = frand();
    g[0] = -200.0f, g[1] = 200.0f, g[2] = 0.0f;
    mf_cpu_swiglu(&cfg, g, u, y, N);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        const double ref = (double)g[i] / (1.0 + exp(-(double)g[i])) * u[i];
        if (!(fabs(y[i] - ref) <= 1e-6 * (1.0 + fabs(ref)))) bad++;
    }
    CHECKF(bad == 0, "%d SwiGLU values off", bad);
    free(g), free(u), free(y);
#else
    printf("test_model_order: the ordered kernels are x86-only; nothing to test\n");
#endif
    return test_summary("test_model_order");
}
