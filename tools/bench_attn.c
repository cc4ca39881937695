/* bench_attn.c: single-thread speed of the blockwise attention tiles (portable, AVX2, AVX-512) on
 * an F16 KV cache at depth: nt query tokens of one sequence after `depth` cells, a model's head
 * shape (default the 0.5B Qwen2: 14 query heads, 2 KV heads, head_dim 64). Prints milliseconds per
 * layer call and the achieved GFLOP/s (4 flops per (row, visible cell, dim): q.k and p.v), in
 * thread CPU time (best of the repetitions), so time the thread spent descheduled on a shared
 * machine does not count.
 *   usage: bench_attn [--depth N] [--nt N] [--nh N] [--nkv N] [--hd N] [--reps R] [--rows N] [--layers L]
 *   (--rows: every tile with up to N rows per tile instead of its own; --layers: L layers' caches,
 *   each repetition runs every layer once and the time is per layer, so that with enough layers the
 *   cache comes from memory as in a model: one layer's is served from L2/L3)
 *   e.g. bench_attn --depth 4096 --nt 1  (decode)     bench_attn --depth 4096 --nt 512  (prefill) */
#include "cpu/cpu_attn.h"
#include "core/core.h"
#include "simd/simd.h"
#include "minfer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 88172645463325252ull;
static float rndf(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

int main(int argc, char **argv) {
    int depth = 4096, nt = 1, nh = 14, nkv = 2, hd = 64, reps = 5, rows = 0, layers = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--depth")) depth = v;
        else if (!strcmp(argv[i], "--nt")) nt = v;
        else if (!strcmp(argv[i], "--nh")) nh = v;
        else if (!strcmp(argv[i], "--nkv")) nkv = v;
        else if (!strcmp(argv[i], "--hd")) hd = v;
        else if (!strcmp(argv[i], "--reps")) reps = v;
        else if (!strcmp(argv[i], "--rows")) rows = v;
        else if (!strcmp(argv[i], "--layers")) layers = v;
        else {
            fprintf(stderr, "bench_attn: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (depth < 0 || nt < 1 || nkv < 1 || nh % nkv || hd < 1 || hd > MF_MAX_HEAD_DIM || reps < 1 || rows < 0 ||
        rows > mf_cpu_attn_tile_rows_wide(hd) || layers < 1) {
        fprintf(stderr, "bench_attn: bad shape\n");
        return 2;
    }
    const int ncells = depth + nt;
    mf_kv_cache kv;
    mf_kv_view_buf vb = {0};
    if (mf_kv_init(&kv, layers, ncells, nkv, hd, MF_TYPE_F16) != MF_OK) return 1;
    float *k = malloc((size_t)nkv * hd * sizeof(float)), *v = malloc((size_t)nkv * hd * sizeof(float));
    for (int c = 0; c < ncells; c++) {
        kv.cell_seqs[c] = 1, kv.cell_pos[c] = c;
        for (int i = 0; i < nkv * hd; i++) k[i] = rndf(), v[i] = rndf();
        for (int l = 0; l < layers; l++) mf_cpu_kv_store_row(&kv, l, c, k, v);
    }
    kv.n_used = kv.n_active = ncells;
    int32_t *pos = malloc((size_t)nt * sizeof(int32_t)), *seq = calloc((size_t)nt, sizeof(int32_t));
    for (int t = 0; t < nt; t++) pos[t] = depth + t;
    if (mf_kv_view_build(&kv, &vb, nt, pos, seq) != MF_OK) return 1;
    const size_t nout = (size_t)nt * nh * hd;
    float *q = malloc(nout * sizeof(float)), *out = malloc(nout * sizeof(float));
    for (size_t i = 0; i < nout; i++) q[i] = rndf();
    mf_attn_params ap = {.layer = 0, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .scale = 0.125f};
    double flops = 0;
    for (int t = 0; t < nt; t++) flops += 4.0 * nh * hd * (depth + t + 1);
    /* each tile with the rows per tile mf_cpu_attention gives it */
    struct { const char *name; mf_cpu_attn_tile_fn fn; mf_simd_level need; int rows; } tiles[] = {
        {"c", mf_cpu_attn_tile_c, MF_SIMD_SCALAR, mf_cpu_attn_tile_rows(hd)},
#if defined(__x86_64__)
        {"avx2", mf_cpu_attn_tile_avx2, MF_SIMD_AVX2, mf_cpu_attn_tile_rows_wide(hd)},
        {"avx512", mf_cpu_attn_tile_avx512, MF_SIMD_AVX512, mf_cpu_attn_tile_rows(hd)},
#endif
    };
    printf("depth %d, %d tokens, %d heads (%d KV), head_dim %d, F16 cache, %d layer%s, 1 thread, best of %d"
           " (ms per layer)\n",
           depth, nt, nh, nkv, hd, layers, layers > 1 ? "s" : "", reps);
    for (size_t i = 0; i < sizeof tiles / sizeof tiles[0]; i++) {
        if (!mf_simd_level_supported(tiles[i].need)) continue;
        double best = 1e30;
        for (int r = 0; r < reps; r++) {
            double t0 = cpu_s();
            for (ap.layer = 0; ap.layer < layers; ap.layer++)
                mf_cpu_attention_flash_rows(&ap, &kv, q, out, 0, (int64_t)nt * nh, tiles[i].fn,
                                            rows ? rows : tiles[i].rows);
            best = MF_MIN(best, (cpu_s() - t0) / layers);
        }
        printf("  %-7s %9.3f ms  %7.1f GFLOP/s\n", tiles[i].name, best * 1e3, flops / best / 1e9);
    }
    mf_kv_view_buf_free(&vb);
    mf_kv_free(&kv);
    free(k), free(v), free(pos), free(seq), free(q), free(out);
    return 0;
}
