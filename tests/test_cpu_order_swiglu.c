/* test_cpu_order_swiglu.c: the SwiGLU with the ordered vector exp, 8 lanes (AVX2) and 16 (AVX-512),
 * gives bit for bit the results of the one-lane version (mf_cpu_swiglu_ord_ref): on 16.7 million float bit
 * patterns spread over the whole range (NaNs, infinities, subnormals, both signs), on millions of
 * values where the exp under- or overflows (|x| around 87..104 and 133), on special values against
 * special gates, and for every tail length. NaN results need only both be NaN (their payloads depend
 * on the compiler's operand order). The ordered softmax's exp (8 lanes a step, one lane in the last
 * partial chunk) against the one-lane exp on the same inputs, value by value and its sum. */
#include "test.h"

#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"

#include <float.h>
#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

#if defined(__x86_64__)
static uint32_t rng = 4242;
static uint32_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static long n_bad;
typedef void (*swiglu_fn)(const float *a, const float *b, float *y, int64_t n);
static swiglu_fn vec_fns[2]; /* the vector versions this CPU runs */
static int n_vec;

/* The ordered softmax's exp of x (in place) against the one-lane exp, value by value, and the sum of
 * each 16-value chunk's float sum (_mm512_reduce_add_ps's order, as mf_cpu_softmax_exp_ord_avx2). */
static void compare_softmax(const float *x, int64_t n) {
    float *y = malloc((size_t)(n + 1) * sizeof(float));
    memcpy(y, x, (size_t)n * sizeof(float));
    const float mx = 0.25f;
    const double sum = mf_cpu_softmax_exp_ord_avx2(y, n, mx);
    double want = 0.0;
    for (int64_t c0 = 0; c0 < n; c0 += 16) {
        float v[16], t8[8], t4[4];
        for (int l = 0; l < 16; l++) v[l] = c0 + l < n ? mf_cpu_exp_ord_ref(x[c0 + l] - mx) : 0.0f;
        for (int i = 0; i < 8; i++) t8[i] = v[i + 8] + v[i];
        for (int i = 0; i < 4; i++) t4[i] = t8[i + 4] + t8[i];
        want += (double)((t4[0] + t4[2]) + (t4[1] + t4[3]));
        for (int l = 0; l < 16 && c0 + l < n; l++) {
            const float u = v[l], w = y[c0 + l];
            const bool same = memcmp(&u, &w, 4) == 0 || (isnan(u) && isnan(w));
            if (!same && n_bad++ < 10)
                CHECKF(same, "softmax exp(%a - %a): one-lane %a, vector %a", (double)x[c0 + l], (double)mx,
                       (double)u, (double)w);
        }
    }
    CHECKF(sum == want || (isnan(sum) && isnan(want)), "n=%lld: softmax sum %a, one-lane %a", (long long)n, sum,
           want);
    free(y);
}

/* Compare each vector version with the one-lane one on n inputs (the vector ones at offset off of
 * their buffers); then the softmax's exp on the same inputs. */
static void compare(const float *a, const float *b, int64_t n, int off) {
    float *y1 = malloc((size_t)n * sizeof(float)), *y2 = malloc((size_t)(n + off + 1) * sizeof(float));
    float *a2 = malloc((size_t)(n + off) * sizeof(float)), *b2 = malloc((size_t)(n + off) * sizeof(float));
    memcpy(a2 + off, a, (size_t)n * sizeof(float));
    memcpy(b2 + off, b, (size_t)n * sizeof(float));
    const float guard = 12345.0f;
    y2[off + n] = guard;
    mf_cpu_swiglu_ord_ref(a, b, y1, n);
    for (int f = 0; f < n_vec; f++) {
        vec_fns[f](a2 + off, b2 + off, y2 + off, n);
        for (int64_t i = 0; i < n; i++) {
            const float u = y1[i], v = y2[off + i];
            const bool same = memcmp(&u, &v, 4) == 0 || (isnan(u) && isnan(v));
            if (!same && n_bad++ < 10)
                CHECKF(same, "a=%a b=%a: one-lane %a, %d-lane %a", (double)a[i], (double)b[i], (double)u, 8 << f,
                       (double)v);
        }
        CHECKF(y2[off + n] == guard, "n=%lld: wrote past the end", (long long)n);
    }
    free(y1), free(y2), free(a2), free(b2);
    compare_softmax(a, n);
}
#endif

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
#if defined(__x86_64__)
    if (!cfg.ordered || cfg.level < MF_SIMD_AVX2) {
        printf("no ordered x86 kernels in this configuration (MINFER_ISA / MINFER_ORDER); nothing to check\n");
        return test_summary("test_cpu_order_swiglu");
    }
    vec_fns[n_vec++] = mf_cpu_swiglu_ord_avx2;
    if (cfg.level == MF_SIMD_AVX512) vec_fns[n_vec++] = mf_cpu_swiglu_ord_avx512;
    printf("checking the 8-lane (AVX2)%s\n", n_vec > 1 ? " and 16-lane (AVX-512) versions" : " version");
    enum { CHUNK = 1 << 20 };
    float *a = malloc(CHUNK * sizeof(float)), *b = malloc(CHUNK * sizeof(float));
    /* bit patterns i * 256 + (varying low byte) over the whole 32-bit range; gates 1 or random */
    int64_t k = 0;
    for (uint64_t u = 0; u < (1ull << 32); u += 256) {
        a[k] = from_bits((uint32_t)u | (next() & 0xFF));
        b[k] = k % 3 ? 1.0f : from_bits(next());
        if (++k == CHUNK) compare(a, b, k, 0), k = 0;
    }
    if (k) compare(a, b, k, 0);
    /* where exp(-a) leaves the normal range or |n| crosses 192: a in +-[80, 140], dense */
    for (int rep = 0; rep < 4; rep++) {
        for (int64_t i = 0; i < CHUNK; i++) {
            const float m = 80.0f + 60.0f * (float)(next() >> 8) / 16777216.0f;
            a[i] = next() & 1 ? m : -m;
            b[i] = 1.0f + (float)(next() >> 16) / 65536.0f;
        }
        compare(a, b, CHUNK, 0);
    }
    /* special values against special gates, every pair */
    const float sp[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                        1e-45f, -1e-45f, 1.0f, -1.0f, 88.7f, -88.7f, 103.9f, -103.9f, 133.08f, -133.08f,
                        133.1f, -133.1f, 192.0f, -192.0f, 1e30f, -1e30f, from_bits(0x7FA00001u),
                        from_bits(0xFFC12345u)};
    const int ns = (int)(sizeof sp / sizeof sp[0]);
    k = 0;
    for (int i = 0; i < ns; i++)
        for (int j = 0; j < ns; j++) a[k] = sp[i], b[k] = sp[j], k++;
    compare(a, b, k, 0);
    /* every tail length, unaligned */
    for (int64_t n = 0; n <= 40; n++) {
        for (int64_t i = 0; i < n; i++) a[i] = (float)(int32_t)next() / 1e8f, b[i] = (float)(int32_t)next() / 1e9f;
        compare(a, b, n, (int)(n % 5));
    }
    CHECKF(n_bad == 0, "%ld differing results", n_bad);
    free(a), free(b);
#endif
    return test_summary("test_cpu_order_swiglu");
}
