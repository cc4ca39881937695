/* test_cpu_order_swiglu.c: the AVX-512 SwiGLU with the ordered vector exp (16 lanes) gives bit for
 * bit the results of the one-lane version (mf_cpu_swiglu_ord_avx2): on 16.7 million float bit
 * patterns spread over the whole range (NaNs, infinities, subnormals, both signs), on millions of
 * values where the exp under- or overflows (|x| around 87..104 and 133), on special values against
 * special gates, and for every tail length. NaN results need only both be NaN (their payloads depend
 * on the compiler's operand order). */
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

/* Compare the two versions on n inputs (the AVX-512 one at offset off of its buffers). */
static void compare(const float *a, const float *b, int64_t n, int off) {
    float *y1 = malloc((size_t)n * sizeof(float)), *y2 = malloc((size_t)(n + off + 1) * sizeof(float));
    float *a2 = malloc((size_t)(n + off) * sizeof(float)), *b2 = malloc((size_t)(n + off) * sizeof(float));
    memcpy(a2 + off, a, (size_t)n * sizeof(float));
    memcpy(b2 + off, b, (size_t)n * sizeof(float));
    const float guard = 12345.0f;
    y2[off + n] = guard;
    mf_cpu_swiglu_ord_avx2(a, b, y1, n);
    mf_cpu_swiglu_ord_avx512(a2 + off, b2 + off, y2 + off, n);
    for (int64_t i = 0; i < n; i++) {
        const float u = y1[i], v = y2[off + i];
        const bool same = memcmp(&u, &v, 4) == 0 || (isnan(u) && isnan(v));
        if (!same && n_bad++ < 10)
            CHECKF(same, "a=%a b=%a: one-lane %a, 16-lane %a", (double)a[i], (double)b[i], (double)u, (double)v);
    }
    CHECKF(y2[off + n] == guard, "n=%lld: wrote past the end", (long long)n);
    free(y1), free(y2), free(a2), free(b2);
}
#endif

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
#if defined(__x86_64__)
    if (!cfg.ordered || cfg.level != MF_SIMD_AVX512) {
        printf("no AVX-512 ordered kernels on this CPU; nothing to check\n");
        return test_summary("test_cpu_order_swiglu");
    }
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
