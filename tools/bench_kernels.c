/* bench_kernels.c: single-thread speed of the matrix-vector dot kernels. For each weight type, a
 * weight matrix much larger than the last-level cache (default 256 MiB) is multiplied with one
 * activation row, at every SIMD level this CPU runs; prints the weight bytes streamed per second
 * (GB/s, the decode bottleneck), the speed-up over the scalar reference, and the active level's
 * 4-row tile rate (weight bytes per second per activation row, the prefill view; MINFER_ISA picks
 * the level).
 *   usage: bench_kernels [--mb N] [--n COLS] [--reps R] [TYPE...]      e.g. bench_kernels q4_0 q4_k */
#include "simd/simd.h"
#include "cpu/cpu.h"
#include "core/core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* The kernels measured (MINFER_ISA / MINFER_ORDER). */
static mf_cpu_cfg cfg;

static uint64_t rng = 88172645463325252ull;
static float rndf(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

/* Best-of-reps seconds for one pass of nr rows (nc = 0: single dots; else tiles of nc rows). */
static double time_pass(mf_vec_dot_fn dot, mf_gemm_fn gemm, int nc, int64_t n, int64_t nr, const uint8_t *w,
                        size_t rs, const uint8_t *a, size_t as, float *out, int reps) {
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        const double t0 = mf_time_s();
        if (nc == 0)
            for (int64_t i = 0; i < nr; i++) out[i] = dot(n, w + (size_t)i * rs, a);
        else
            gemm(n, (int)nr, nc, w, rs, a, as, out, (size_t)nr);
        const double t = mf_time_s() - t0;
        if (t < best) best = t;
    }
    return best;
}

int main(int argc, char **argv) {
    mf_isa isa = MF_ISA_AUTO; /* MINFER_ISA / MINFER_ORDER choose the kernels, as for the minfer program */
    if (getenv("MINFER_ISA") && mf_isa_from_name(getenv("MINFER_ISA"), &isa)) fprintf(stderr, "%s\n", mf_last_error());
    const char *order = getenv("MINFER_ORDER");
    cfg = mf_cpu_cfg_for(isa, order && !strcmp(order, "fast") ? MF_ORDER_FAST : MF_ORDER_EXACT);
    int64_t mb = 256, n = 4096;
    int reps = 3;
    mf_type want[MF_TYPE_COUNT];
    int nwant = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--mb") && i + 1 < argc) mb = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--n") && i + 1 < argc) n = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (nwant < MF_TYPE_COUNT && mf_type_from_name(argv[i], &want[nwant])) nwant++;
        else {
            fprintf(stderr, "usage: %s [--mb N] [--n COLS] [--reps R] [TYPE...]\n", argv[0]);
            return 2;
        }
    }
    if (n <= 0 || n % MF_QK_K || mb <= 0 || reps <= 0) {
        fprintf(stderr, "bench_kernels: --n must be a positive multiple of 256, --mb and --reps positive\n");
        return 2;
    }
    if (!nwant) {
        const mf_type all[] = {MF_TYPE_F32,  MF_TYPE_F16,  MF_TYPE_BF16, MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0,
                               MF_TYPE_Q5_1, MF_TYPE_Q8_0, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K};
        for (size_t i = 0; i < MF_ARRAY_LEN(all); i++) want[nwant++] = all[i];
    }

    printf("single thread, %lld MiB of weights per type, rows of %lld; active level %s\n", (long long)mb,
           (long long)n, mf_isa_kernels_name((mf_isa)(cfg.level + 1)));
    printf("GB/s = weight bytes read per second; tile = the active level's tile kernel, %d activation rows per\n"
           "weight pass (GB/s per activation row); speedup = best level over scalar\n",
           MF_SIMD_GEMM_NC);
    printf("%-5s %9s", "type", "scalar");
    for (int l = 1; l < MF_SIMD_LEVEL_COUNT; l++)
        if (mf_simd_level_supported((mf_simd_level)l)) printf(" %9s", mf_simd_level_name((mf_simd_level)l));
    printf(" %8s %9s %s\n", "speedup", "tile", "max|diff|/ref");

    float *x = malloc((size_t)n * sizeof *x);
    for (int64_t i = 0; i < n; i++) x[i] = rndf();
    for (int ti = 0; ti < nwant; ti++) {
        const mf_type t = want[ti];
        const mf_type_traits *tr = mf_type_get_traits(t);
        const mf_type at = tr->vec_dot_type;
        mf_quantize_fn wq = mf_quant_file_quantizer(t), aq = mf_simd_quantize_row_at(cfg.level, at);
        if (!tr->vec_dot || !wq || !aq) {
            printf("%-5s (no reference kernels)\n", tr->name ? tr->name : "?");
            continue;
        }
        const size_t rs = mf_row_size(t, n), as = mf_row_size(at, n);
        const int64_t nr = (int64_t)((size_t)mb * 1024 * 1024 / rs);
        uint8_t *w = mf_aligned_alloc(64, (size_t)nr * rs);
        uint8_t *a = mf_aligned_alloc(64, as * MF_SIMD_GEMM_NC);
        float *out = malloc((size_t)nr * MF_SIMD_GEMM_NC * sizeof *out), *want_out = malloc((size_t)nr * sizeof *out);
        if (!w || !a || !out || !want_out) {
            fprintf(stderr, "bench_kernels: out of memory\n");
            return 1;
        }
        /* 16 distinct quantized rows, repeated: what matters is the bytes streamed, not their values */
        float *row = malloc((size_t)n * sizeof *row);
        for (int64_t r = 0; r < nr; r++) {
            if (r < 16) {
                for (int64_t i = 0; i < n; i++) row[i] = rndf() * 0.05f;
                wq(row, w + (size_t)r * rs, n);
            } else {
                memcpy(w + (size_t)r * rs, w + (size_t)(r % 16) * rs, rs);
            }
        }
        free(row);
        for (int c = 0; c < MF_SIMD_GEMM_NC; c++) aq(x, a + (size_t)c * as, n);

        const double bytes = (double)nr * (double)rs;
        const double ts = time_pass(tr->vec_dot, NULL, 0, n, nr, w, rs, a, as, want_out, 1);
        printf("%-5s %9.2f", tr->name, bytes / ts * 1e-9);
        double best = ts, maxrel = 0;
        for (int l = 1; l < MF_SIMD_LEVEL_COUNT; l++) {
            const mf_simd_level lv = (mf_simd_level)l;
            if (!mf_simd_level_supported(lv)) continue;
            const double tl = time_pass(mf_simd_vec_dot_at(lv, t), NULL, 0, n, nr, w, rs, a, as, out, reps);
            printf(" %9.2f", bytes / tl * 1e-9);
            for (int64_t r = 0; r < nr; r++) {
                const double d = fabs((double)out[r] - want_out[r]) / (fabs((double)want_out[r]) + 1e-3);
                if (d > maxrel) maxrel = d;
            }
            if (tl < best) best = tl;
        }
        const double tt = time_pass(NULL, mf_simd_gemm_at(cfg.level, t), MF_SIMD_GEMM_NC, n, nr, w, rs, a, as, out, reps);
        printf(" %7.1fx %9.2f %.1e\n", ts / best, bytes * MF_SIMD_GEMM_NC / tt * 1e-9, maxrel);
        fflush(stdout);
        mf_aligned_free(w);
        mf_aligned_free(a);
        free(out);
        free(want_out);
    }
    free(x);
    return 0;
}
