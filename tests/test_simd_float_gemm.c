/* test_simd_float_gemm.c: the float multi-row entry (mf_simd_gemm_at for F32, F16, BF16) at every
 * level this CPU runs, on the shapes the matmul gives it and every tail around them: weight rows
 * 1..40 (one and several tiles), activation rows 1..130 (full and partial tiles and 64-row
 * chunks), lengths across the 16-value chunks and the 1,024-value segments, padded strides and odd
 * addresses; and the AVX2 tile's wide build (mf_simd_gemm_avx2_wide) where the CPU has one. Each
 * result within a float summation bound of the exact dot (in double) of the same rounded values;
 * nothing outside the nr x nc block of out is written. (That each result equals the level's dot bit
 * for bit is test_simd_invariance's.) */
#include "test.h"
#include "simd/simd.h"
#include "core/core.h"

#include <stdint.h>

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float rndf(void) { return (float)rnd() / 2147483648.0f - 1.0f; } /* [-1, 1) */

/* A random magnitude per 32 values (1e-3 .. 1e2), some all-zero stretches. */
static void random_floats(float *x, int64_t n) {
    float scale = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        if (i % 32 == 0) scale = (rnd() % 16 == 0) ? 0.0f : powf(10.0f, 5.0f * (float)(rnd() % 1000) / 1000.0f - 3.0f);
        x[i] = rndf() * scale;
    }
}

/* rows rows of n values of type t at stride bytes, from random floats; x gets the rounded values
 * (what the kernel sees), row-major with n per row */
static void fill_rows(mf_type t, uint8_t *dst, size_t stride, int rows, int64_t n, float *x) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    for (int r = 0; r < rows; r++) {
        float *xr = x + (size_t)r * (size_t)n;
        random_floats(xr, n);
        uint8_t *d = dst + (size_t)r * stride;
        if (t == MF_TYPE_F32) memcpy(d, xr, (size_t)n * sizeof(float));
        else tr->quantize(xr, d, n);
        tr->dequantize(d, xr, n);
    }
}

static const float SENTINEL = -12345.0f;

/* worst |got - exact| / sum |w a| seen, per type, for the summary line */
static double worst_ratio[3];

static void test_shape(const char *lv_name, mf_gemm_fn gemm, int ti, mf_type t, int64_t n, int nr, int nc, uint8_t *wbuf,
                       uint8_t *abuf, float *xw, float *xa, float *out) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    const size_t es = mf_row_size(t, 1);
    /* padded strides, and rows that start off 64-byte alignment */
    const size_t ws = mf_row_size(t, n) + es * (size_t)(1 + (nr + nc) % 5);
    const size_t as = mf_row_size(t, n) + es * (size_t)(3 + nc % 4);
    uint8_t *w = wbuf + es * (size_t)(nr % 3), *a = abuf + es * (size_t)(1 + nc % 2);
    fill_rows(t, w, ws, nr, n, xw);
    fill_rows(t, a, as, nc, n, xa);
    const size_t os = (size_t)nr + 3;
    const size_t out_len = os * (size_t)(nc + 1);
    for (size_t i = 0; i < out_len; i++) out[i] = SENTINEL;
    gemm(n, nr, nc, w, ws, a, as, out, os);
    int bad = 0, outside = 0;
    for (int c = 0; c <= nc; c++)
        for (size_t r = 0; r < os; r++) {
            const float got = out[(size_t)c * os + r];
            if (c == nc || r >= (size_t)nr) {
                outside += got != SENTINEL;
                continue;
            }
            const float *wr = xw + r * (size_t)n, *ac = xa + (size_t)c * (size_t)n;
            double exact = 0, mag = 0;
            for (int64_t i = 0; i < n; i++) {
                exact += (double)wr[i] * (double)ac[i];
                mag += fabs((double)wr[i] * (double)ac[i]);
            }
            /* AVX-512: chains of at most 16 products per lane and segment, a few adds per
             * segment; AVX2: one chain of n / 8 products per lane (up to 609 here). 4e-6 * sum |w a|
             * is far above the rounding seen with random signs (3e-7), far below any wrong index
             * or lane */
            const double err = fabs((double)got - exact);
            if (mag > 0 && err / mag > worst_ratio[ti]) worst_ratio[ti] = err / mag;
            if (!(err <= 4e-6 * mag + 1e-30) && bad++ < 3)
                fprintf(stderr, "  r=%zu c=%d: %.9g vs exact %.9g (sum|wa| %.4g)\n", r, c, got, exact, mag);
        }
    CHECKF(bad == 0 && outside == 0, "%s %s n=%lld nr=%d nc=%d: %d wrong, %d written outside", lv_name,
           tr->name, (long long)n, nr, nc, bad, outside);
}

int main(void) {
    const bool sanitized = getenv("MINFER_SANITIZED") != NULL;
    const int64_t ns[] = {1, 7, 16, 33, 127, 128, 129, 255, 257, 600, 4864 + 5};
    const int nrs[] = {1, 3, 16, 17, 40};
    const int ncs[] = {1, 2, 3, 4, 5, 7, 9, 16, 17, 33, 64, 70, 130};
    const mf_type types[] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_BF16};
    const int64_t max_n = 4864 + 5;
    const size_t wbytes = (size_t)40 * (size_t)(max_n + 8) * 4 + 256, abytes = (size_t)130 * (size_t)(max_n + 8) * 4 + 256;
    uint8_t *wbuf = malloc(wbytes), *abuf = malloc(abytes);
    float *xw = malloc((size_t)40 * (size_t)max_n * sizeof(float)), *xa = malloc((size_t)130 * (size_t)max_n * sizeof(float));
    float *out = malloc((size_t)43 * 131 * sizeof(float));
    CHECK(wbuf && abuf && xw && xa && out);
    if (!(wbuf && abuf && xw && xa && out)) return test_summary("test_simd_float_gemm");
    /* every level this CPU runs, then (l == MF_SIMD_LEVEL_COUNT) the AVX2 float tile's wide build */
    for (int l = 0; l <= MF_SIMD_LEVEL_COUNT; l++) {
        const bool wide = l == MF_SIMD_LEVEL_COUNT;
        const mf_simd_level lv = wide ? MF_SIMD_AVX2 : (mf_simd_level)l;
        if (wide ? !mf_simd_gemm_avx2_wide(MF_TYPE_F16) : !mf_simd_level_supported(lv)) continue;
        const char *name = wide ? "avx2 (wide build)" : mf_simd_level_name(lv);
        for (int ti = 0; ti < 3; ti++) {
            const mf_gemm_fn gemm = wide ? mf_simd_gemm_avx2_wide(types[ti]) : mf_simd_gemm_at(lv, types[ti]);
            CHECK(gemm != NULL);
            if (!gemm) continue;
            for (size_t ni = 0; ni < MF_ARRAY_LEN(ns); ni++)
                for (size_t ri = 0; ri < MF_ARRAY_LEN(nrs); ri++)
                    for (size_t ci = 0; ci < MF_ARRAY_LEN(ncs); ci++) {
                        /* the sanitized build takes the long rows with fewer shapes */
                        if (sanitized && ns[ni] > 600 && (ri + ci) % 3) continue;
                        test_shape(name, gemm, ti, types[ti], ns[ni], nrs[ri], ncs[ci], wbuf, abuf, xw, xa, out);
                    }
        }
        printf("level %s: worst |err| / sum|wa|: F32 %.3g, F16 %.3g, BF16 %.3g\n", name, worst_ratio[0],
               worst_ratio[1], worst_ratio[2]);
        worst_ratio[0] = worst_ratio[1] = worst_ratio[2] = 0;
    }
    free(wbuf), free(abuf), free(xw), free(xa), free(out);
    return test_summary("test_simd_float_gemm");
}
