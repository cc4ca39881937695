/* bench_gemm.c: speed of one prefill matmul through the CPU backend's thread pool: the prefill
 * GEMM (cpu_gemm.h) where the weight type has one, else the ordered dots. Activation quantization
 * is included, as in a real matmul. Prints which of the two ran, milliseconds, GMAC/s (wall) and
 * GMAC/s per thread from the process's CPU time, which a machine shared with other work disturbs
 * less (for a call well under a millisecond the process clock may not yet hold the other threads'
 * share, so with several threads that figure then reads high). With --cold, each
 * repetition reads a different copy of the weights, enough copies for 512 MiB in all, so that they
 * come from memory as in a model's forward pass (a model's weights exceed the caches; one matrix
 * repeated is served from L2/L3, which hides what a few-token matmul costs when it streams). With
 * --packed, the weights carry the packed layout a model load gives them (mf_cpu_pack) where the
 * best kernels have one (so: with the default MINFER_ISA and MINFER_ORDER).
 *   usage: bench_gemm [--threads T] [--reps R] [--cold] [--packed] TYPE N K NT     e.g. bench_gemm q4_0 4864 896 512 */
#include "cpu/cpu.h"
#include "cpu/cpu_gemm.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The kernels measured (MINFER_ISA / MINFER_ORDER). */
static mf_cpu_cfg cfg;

static uint64_t rng = 88172645463325252ull;
static float rndf(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    mf_isa isa = MF_ISA_AUTO; /* MINFER_ISA / MINFER_ORDER choose the kernels, as for the minfer program */
    if (getenv("MINFER_ISA") && mf_isa_from_name(getenv("MINFER_ISA"), &isa)) fprintf(stderr, "%s\n", mf_last_error());
    const char *order = getenv("MINFER_ORDER");
    cfg = mf_cpu_cfg_for(isa, order && !strcmp(order, "fast") ? MF_ORDER_FAST : MF_ORDER_EXACT);
    int threads = 2, reps = 5, pos = 0, cold = 0, packed = 0;
    const char *args[4] = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--cold")) cold = 1;
        else if (!strcmp(argv[i], "--packed")) packed = 1;
        else if (pos < 4) args[pos++] = argv[i];
    }
    mf_type t;
    if (pos != 4 || !mf_type_from_name(args[0], &t) || threads < 1 || reps < 1) {
        fprintf(stderr, "usage: %s [--threads T] [--reps R] [--cold] [--packed] TYPE N K NT\n", argv[0]);
        return 2;
    }
    const int64_t N = atoll(args[1]), K = atoll(args[2]), nt = atoll(args[3]);
    const mf_type_traits *tr = mf_type_get_traits(t);
    /* IQ4_NL and IQ4_XS have no quantizer: random blocks, their scale d (the first two bytes) small */
    const bool random_blocks = t == MF_TYPE_IQ4_NL || t == MF_TYPE_IQ4_XS;
    if (N < 1 || K < 1 || nt < 1 || K % tr->blck_size || (!tr->quantize && !random_blocks)) {
        fprintf(stderr, "bench_gemm: bad shape or type\n");
        return 2;
    }
    const size_t rb = mf_row_size(t, K), bytes = rb * (size_t)N;
    const size_t copies = cold ? MF_MAX((size_t)1, ((size_t)512 << 20) / bytes + 1) : 1;
    uint8_t *wq = malloc(bytes * copies);
    if (!wq) {
        fprintf(stderr, "bench_gemm: out of memory for %zu copies of %zu bytes\n", copies, bytes);
        return 1;
    }
    float *row = malloc((size_t)K * sizeof(float)), *x = malloc((size_t)(K * nt) * sizeof(float));
    float *y = malloc((size_t)(N * nt) * sizeof(float));
    for (int64_t o = 0; o < N && !random_blocks; o++) {
        for (int64_t i = 0; i < K; i++) row[i] = rndf();
        tr->quantize(row, wq + (size_t)o * rb, K);
    }
    for (size_t b = 0; random_blocks && b < bytes / tr->type_size; b++) {
        uint8_t *blk = wq + b * tr->type_size;
        for (size_t i = 2; i < tr->type_size; i++) blk[i] = (uint8_t)(rndf() * 128.0f + 128.0f);
        const mf_fp16 d = mf_f32_to_fp16(rndf() * 0.01f);
        memcpy(blk, &d, 2);
    }
    for (size_t c = 1; c < copies; c++) memcpy(wq + c * bytes, wq, bytes);
    for (int64_t i = 0; i < K * nt; i++) x[i] = rndf();
    mf_weight w = {.type = t, .ne = {K, N}, .data = wq, .row_bytes = rb};
    /* the packed copies, one per copy of the weights */
    const size_t pbytes = packed ? (mf_cpu_packed_size(&w) + 63) & ~(size_t)63 : 0;
    uint8_t *pk = pbytes ? mf_aligned_alloc(64, pbytes * copies) : NULL;
    if (packed && !pk) {
        fprintf(stderr, "bench_gemm: %s has no packed layout for these kernels (or no memory for it)\n", tr->name);
        return 1;
    }
    for (size_t c = 0; pk && c < copies; c++) {
        w.data = wq + c * bytes;
        mf_cpu_pack(&w, pk + c * pbytes);
    }
    w.data = wq;
    mf_pool *pool = NULL;
    if (mf_pool_create(threads, &pool) != MF_OK) return 1;
    void *work = malloc(mf_cpu_matmul_work_size(&cfg, &w, nt, threads));
    const double macs = (double)N * (double)K * (double)nt;
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < reps + 1; r++) {
        w.data = wq + (size_t)r % copies * bytes;
        if (pk) w.packed = pk + (size_t)r % copies * pbytes;
        const double t0 = mf_time_s(), c0 = cpu_s();
        mf_cpu_matmul(pool, &cfg, &w, NULL, x, y, nt, work);
        const double dt = mf_time_s() - t0, dc = cpu_s() - c0;
        if (r == 0) continue; /* warm-up */
        if (dt < best) best = dt;
        if (dc < best_cpu) best_cpu = dc;
    }
    printf("%s N=%lld K=%lld nt=%lld threads=%d %s%s: %.3f ms, %.1f GMAC/s, %.1f GMAC/s per thread (CPU time)\n",
           tr->name, (long long)N, (long long)K, (long long)nt, threads,
           mf_cpu_matmul_runs_gemm(&cfg, &w, nt) ? "GEMM" : "dots", pk ? " (packed)" : "", best * 1e3, macs / best * 1e-9, macs / best_cpu * 1e-9);
    mf_pool_free(pool);
    mf_aligned_free(pk);
    free(wq), free(row), free(x), free(y), free(work);
    return 0;
}
