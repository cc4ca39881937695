/* test_cpu_gemm.c: every prefill GEMM (cpu_gemm.h) gives bit for bit the one-row ordered dot of
 * each output (for Q4_K also the order's plain scalar twin, mf_cpu_dot_q4_K_rp_ref): random and
 * extreme weights and activations, rows that are not a multiple of 16, every
 * token count around the GEMMs' tiles, row ranges starting inside the matrix; then a matmul through
 * the thread pool, bias included; at an x86 level also the GEMMs of the other float order (Q8_0's
 * one chain under MF_ORDER_FAST at the AVX2 level). At the AVX2 level both builds of each GEMM, plain AVX2 and
 * AVX-VNNI (where the CPU has it), whichever the dispatch table chose. Where a GEMM has a packed
 * layout (mf_cpu_pack), the same checks again with the weight packed. Skipped (exit 77) where no
 * type has a GEMM. */
#include "test.h"

#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"
#include "cpu/cpu_dispatch.h"
#include "cpu/cpu_gemm.h"
#include "simd/simd.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

#if defined(__x86_64__)
static uint32_t rng = 4242;
static float frand(void) {
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

typedef struct {
    mf_weight w;
    float *wf;
    uint8_t *wq;
} weight;

/* N x K weights of type t; extreme: full-range values with mixed signs and an outlier per row. */
static weight make_weight(mf_type t, int64_t N, int64_t K, bool extreme) {
    weight r;
    const size_t rb = mf_row_size(t, K);
    r.wf = malloc((size_t)(N * K) * sizeof(float));
    r.wq = malloc(rb * (size_t)N);
    for (int64_t i = 0; i < N * K; i++)
        r.wf[i] = extreme ? ((i / 5) % 2 ? 1.0f : -1.0f) * (1.0f + (float)(i % 7)) * (i % 97 == 0 ? 40.0f : 1.0f)
                          : frand() * (1.0f + (float)((i / K) % 5));
    if (mf_type_get_traits(t)->quantize) {
        for (int64_t o = 0; o < N; o++) mf_type_get_traits(t)->quantize(r.wf + o * K, r.wq + o * rb, K);
    } else {
        /* no quantizer (IQ4_XS): random blocks, every byte but the scale d of any value (extreme: the
         * codes and sub-block scales at their ends), d a finite half of either sign */
        MF_ASSERT(t == MF_TYPE_IQ4_XS);
        for (size_t i = 0; i < rb * (size_t)N; i++) {
            rng = rng * 1664525u + 1013904223u;
            r.wq[i] = extreme ? ((rng >> 20) & 1 ? 0xFF : 0x00) ^ (uint8_t)(i & 0x11) : (uint8_t)(rng >> 24);
        }
        for (size_t b = 0; b < rb * (size_t)N / sizeof(mf_block_iq4_xs); b++) {
            mf_block_iq4_xs *x = (mf_block_iq4_xs *)r.wq + b;
            x->d = mf_f32_to_fp16(frand() * 0.01f);
        }
    }
    r.w = (mf_weight){.type = t, .ne = {K, N}, .data = r.wq, .row_bytes = rb};
    return r;
}

/* Activation rows quantized as a matmul does; aux: each with the side data after its blocks
 * (mf_cpu_q4_0_aux), as a matmul hands a packed weight's GEMM with few tokens. */
static uint8_t *make_acts(mf_type t, int64_t K, int64_t nt, bool extreme, bool aux, size_t *act_row) {
    const mf_type at = mf_type_get_traits(t)->vec_dot_type;
    *act_row = aux ? mf_cpu_q4_0_aux_offset(K) + mf_cpu_q4_0_aux_bytes(K) : mf_row_size(at, K);
    uint8_t *a = malloc(*act_row * (size_t)nt + 64);
    float *x = malloc((size_t)K * sizeof(float));
    for (int64_t r = 0; r < nt; r++) {
        for (int64_t i = 0; i < K; i++)
            x[i] = extreme ? ((i + r) % 3 ? 8.0f : -8.0f) : frand() * 4.0f * (1.0f + (float)(r % 3));
        mf_simd_quantize_row_at(cfg.level, at)(x, a + (size_t)r * *act_row, K);
        if (aux) mf_cpu_q4_0_aux(a + (size_t)r * *act_row, K);
    }
    free(x);
    return a;
}

/* The GEMM under test: the table's, or at the AVX2 level the build asked for (0 plain, 1 AVX-VNNI). */
static int avx2_build = -1;
static const mf_cpu_gemm *gemm_under_test(const mf_weight *w) {
    const mf_cpu_gemm *g = mf_cpu_gemm_for(&cfg, w);
    if (!g || avx2_build < 0) return g;
    return mf_cpu_gemm_avx2_build(w->type, mf_cpu_order_variant(cfg.level, cfg.ordered, w->type, w->ne[1]), avx2_build == 1);
}

/* The weight's packed layout for g (mf_cpu_pack) where g has one for it, else NULL. */
static void *pack_for(const mf_cpu_gemm *g, weight *w) {
    if (!g->pack || !g->packed_size(&w->w) || g != mf_cpu_gemm_for(&cfg, &w->w)) return NULL;
    void *p = aligned_alloc(64, (g->packed_size(&w->w) + 63) & ~(size_t)63);
    memset(p, 0xA5, g->packed_size(&w->w)); /* every byte is the packer's to write */
    mf_cpu_pack(&w->w, p);
    CHECK(mf_cpu_gemm_packed(g, &w->w));
    /* every row read back from the packed copy (an embedding lookup) is the file's row */
    CHECKF(g->packed_row != NULL, "%s: a packed layout without packed_row", mf_type_name(w->w.type));
    uint8_t *row = malloc(w->w.row_bytes);
    int bad = 0;
    for (int64_t r = 0; g->packed_row && r < w->w.ne[1]; r++) {
        g->packed_row(&w->w, r, row);
        bad += memcmp(row, (const uint8_t *)w->w.data + (size_t)r * w->w.row_bytes, w->w.row_bytes) != 0;
    }
    CHECKF(bad == 0, "%s N=%lld K=%lld: %d rows differ read back from the packed copy", mf_type_name(w->w.type),
           (long long)w->w.ne[1], (long long)w->w.ne[0], bad);
    free(row);
    return p;
}

/* One GEMM call over rows [o0, o1) against the ordered dots; with packed, from the weight's packed
 * layout (skipped where the GEMM has none for it). */
static void check_gemm_as(mf_type t, int64_t N, int64_t K, int64_t nt, int64_t o0, int64_t o1, bool extreme,
                          bool packed) {
    if (K % mf_type_get_traits(t)->blck_size) return; /* e.g. K = 896 holds no whole K-quant block */
    weight w = make_weight(t, N, K, extreme);
    const mf_cpu_gemm *g = gemm_under_test(&w.w);
    void *pk = g && packed ? pack_for(g, &w) : NULL;
    if (!g || (packed && !pk)) {
        free(w.wf), free(w.wq);
        return;
    }
    size_t act_row;
    uint8_t *a = make_acts(t, K, nt, extreme, pk && nt <= g->packed_aux_tokens, &act_row);
    float *y = malloc((size_t)(N * nt) * sizeof(float));
    for (int64_t i = 0; i < N * nt; i++) y[i] = NAN;
    void *scratch = aligned_alloc(64, (g->scratch_size(K) + 63) & ~(size_t)63);
    g->run(&w.w, o0, o1, a, act_row, nt, y, (size_t)N, scratch);
    const mf_cpu_ordered_dots d = mf_cpu_ordered_dots_for(&cfg, &w.w);
    int bad = 0;
    for (int64_t tk = 0; tk < nt; tk++)
        for (int64_t o = 0; o < N; o++) {
            const float v = y[tk * N + o];
            if (o < o0 || o >= o1) {
                if (!isnan(v) && bad++ < 3)
                    CHECKF(0, "%s N=%lld K=%lld nt=%lld: wrote row %lld outside [%lld, %lld)", mf_type_name(t),
                           (long long)N, (long long)K, (long long)nt, (long long)o, (long long)o0, (long long)o1);
                continue;
            }
            const uint8_t *wr = w.wq + (size_t)o * w.w.row_bytes, *ar = a + (size_t)tk * act_row;
            /* Q2_K, Q3_K and IQ4_XS have no ordered dots: the level's dot (llama.cpp's x86 order) */
            const float ref = d.dot ? d.dot(K, wr, ar) : mf_cpu_mm_kernels_for(&cfg, &w.w)->dot(K, wr, ar);
            /* the repacked Q4_K order and Q8_0's one-chain order: also their plain scalar twins */
            const bool rp = mf_cpu_order_variant(cfg.level, cfg.ordered, t, w.w.ne[1]) == MF_ORDER_REPACKED;
            const float twin = !rp                ? ref
                               : t == MF_TYPE_Q4_K ? mf_cpu_dot_q4_K_rp_ref(K, wr, ar)
                               : t == MF_TYPE_Q8_0 ? mf_cpu_dot_q8_0_rp_ref(K, wr, ar)
                                                   : ref;
            if (memcmp(&twin, &v, sizeof v) != 0 && bad++ < 3)
                CHECKF(0, "%s N=%lld K=%lld nt=%lld: y[%lld][%lld] = %.9g, scalar twin %.9g", mf_type_name(t),
                       (long long)N, (long long)K, (long long)nt, (long long)tk, (long long)o, v, twin);
            if (memcmp(&ref, &v, sizeof v) != 0 && bad++ < 3)
                CHECKF(0, "%s N=%lld K=%lld nt=%lld rows [%lld, %lld)%s: y[%lld][%lld] = %.9g, ordered dot %.9g",
                       mf_type_name(t), (long long)N, (long long)K, (long long)nt, (long long)o0, (long long)o1,
                       extreme ? " extreme" : "", (long long)tk, (long long)o, v, ref);
        }
    CHECKF(bad == 0, "%s N=%lld K=%lld nt=%lld%s: %d outputs differ", mf_type_name(t), (long long)N, (long long)K,
           (long long)nt, pk ? " packed" : "", bad);
    free(w.wf), free(w.wq), free(a), free(y), free(scratch), free(pk);
}

static void check_gemm(mf_type t, int64_t N, int64_t K, int64_t nt, int64_t o0, int64_t o1, bool extreme) {
    check_gemm_as(t, N, K, nt, o0, o1, extreme, false);
    check_gemm_as(t, N, K, nt, o0, o1, extreme, true);
}

/* The whole matmul through a two-thread pool, with a bias, against one ordered dot per output;
 * with packed, of the weight in its packed layout (skipped where there is none). */
static void check_matmul_as(mf_type t, int64_t N, int64_t K, int64_t nt, bool packed) {
    if (K % mf_type_get_traits(t)->blck_size) return;
    weight w = make_weight(t, N, K, false);
    const mf_cpu_gemm *g = mf_cpu_gemm_for(&cfg, &w.w);
    void *pk = g && packed ? pack_for(g, &w) : NULL;
    if (!g || (packed && !pk)) {
        free(w.wf), free(w.wq);
        return;
    }
    if (pk) CHECKF(mf_cpu_matmul_runs_gemm(&cfg, &w.w, nt), "%s: a packed weight's matmul of %lld tokens runs the dots",
                   mf_type_name(t), (long long)nt);
    float *bias = malloc((size_t)N * sizeof(float)), *x = malloc((size_t)(K * nt) * sizeof(float));
    float *y = malloc((size_t)(N * nt) * sizeof(float));
    for (int64_t o = 0; o < N; o++) bias[o] = frand();
    for (int64_t i = 0; i < K * nt; i++) x[i] = frand() * 3.0f;
    mf_weight b = {.type = MF_TYPE_F32, .ne = {N, 1}, .data = bias, .row_bytes = (size_t)N * sizeof(float)};
    mf_pool *pool = NULL;
    CHECK(mf_pool_create(2, &pool) == MF_OK);
    void *work = malloc(mf_cpu_matmul_work_size(&cfg, &w.w, nt, 2));
    mf_cpu_matmul(pool, &cfg, &w.w, &b, x, y, nt, work);
    const mf_type at = mf_type_get_traits(t)->vec_dot_type;
    uint8_t *a = malloc(mf_row_size(at, K));
    const mf_cpu_ordered_dots d = mf_cpu_ordered_dots_for(&cfg, &w.w);
    int bad = 0;
    for (int64_t tk = 0; tk < nt; tk++) {
        mf_simd_quantize_row_at(cfg.level, at)(x + tk * K, a, K);
        for (int64_t o = 0; o < N; o++) {
            const float ref = (d.dot ? d.dot : mf_cpu_mm_kernels_for(&cfg, &w.w)->dot)(K, w.wq + (size_t)o * w.w.row_bytes, a) + bias[o];
            if (memcmp(&ref, &y[tk * N + o], sizeof ref) != 0 && bad++ < 3)
                CHECKF(0, "%s matmul N=%lld K=%lld nt=%lld: y[%lld][%lld] = %.9g, expected %.9g", mf_type_name(t),
                       (long long)N, (long long)K, (long long)nt, (long long)tk, (long long)o, y[tk * N + o], ref);
        }
    }
    CHECKF(bad == 0, "%s matmul nt=%lld%s: %d outputs differ", mf_type_name(t), (long long)nt, pk ? " packed" : "", bad);
    mf_pool_free(pool);
    free(w.wf), free(w.wq), free(bias), free(x), free(y), free(work), free(a), free(pk);
}

static void check_matmul(mf_type t, int64_t N, int64_t K, int64_t nt) {
    check_matmul_as(t, N, K, nt, false);
    check_matmul_as(t, N, K, nt, true);
}
static void check_type(mf_type t) {
    const int64_t Ks[] = {256, 768, 4864};
    const int64_t nts[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 64, 67};
    for (size_t k = 0; k < sizeof Ks / sizeof Ks[0]; k++)
        for (size_t j = 0; j < sizeof nts / sizeof nts[0]; j++) {
            const int64_t nt = nts[j];
            check_gemm(t, 40, Ks[k], nt, 0, 40, false);
            check_gemm(t, 48, Ks[k], nt, 16, 48, j % 2 == 0);
            check_gemm(t, 24, Ks[k], nt, 16, 24, false);
        }
    check_gemm(t, 136, 512, 130, 32, 136, true);
    check_gemm(t, 40, 768, 1030, 0, 40, false); /* past the GEMMs' token tiles (up to 512) */
    check_gemm(t, 24, 768, 519, 16, 24, true);
    /* several token chunks and several K slices of the GEMMs, uneven slices */
    check_gemm(t, 32, 4864, 300, 0, 32, false);
    check_gemm(t, 16, 4864, 245, 0, 16, false);
    check_gemm(t, 16, 1024, 530, 0, 16, false);
    check_gemm(t, 16, 896, 1100, 0, 16, false);
    check_gemm(t, 24, 928, 7, 0, 24, false);
    check_gemm(t, 40, 928, 2, 16, 40, false);
    check_matmul(t, 896, 768, 37); /* K a multiple of 256, for the K-quants */
    check_matmul(t, 136, 4864, 9);
    /* a packed weight serves every token count: decode, a few tokens, past the few-token path */
    for (int64_t nt = 1; nt <= 6; nt++) check_matmul(t, 200, 1024, nt);
}
/* check_type for t under cfg: at the AVX2 level the plain build, then the AVX-VNNI one where this
 * CPU has it and it differs; else the table's GEMM. */
static void check_builds(mf_type t) {
    const bool avx2 = cfg.level == MF_SIMD_AVX2;
    const int last = !avx2 ? -1 : mf_simd_avxvnni() ? 1 : 0;
    if (avx2 && last == 0) printf("  AVX-VNNI build: skipped (this CPU has no AVX-VNNI, or MINFER_AVXVNNI=0)\n");
    const int v = mf_cpu_order_variant(cfg.level, cfg.ordered, t, 8);
    for (int b = avx2 ? 0 : -1; b <= last; b++) {
        if (b == 1 && mf_cpu_gemm_avx2_build(t, v, true) == mf_cpu_gemm_avx2_build(t, v, false)) continue;
        avx2_build = b;
        if (b >= 0) printf("  %s build\n", b ? "AVX-VNNI" : "plain AVX2");
        check_type(t);
    }
    avx2_build = -1;
}
#endif

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
#if defined(__x86_64__)
    const mf_type types[] = {MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1, MF_TYPE_Q8_0,
                             MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K, MF_TYPE_Q2_K, MF_TYPE_Q3_K, MF_TYPE_IQ4_XS};
    int n_gemm = 0;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        const mf_type t = types[i];
        weight probe = make_weight(t, 16, 256, false);
        const bool has = mf_cpu_gemm_for(&cfg, &probe.w) != NULL;
        free(probe.wf), free(probe.wq);
        printf("%s: %s\n", mf_type_name(t), has ? "GEMM" : "no GEMM on this CPU (ordered dots serve)");
        if (!has) continue;
        n_gemm++;
        check_builds(t);
    }
    /* the other float order's GEMMs where it has its own (Q8_0's one chain at the AVX2 level) */
    const mf_cpu_cfg main_cfg = cfg;
    cfg = mf_cpu_cfg_for(test_isa(), test_order() == MF_ORDER_FAST ? MF_ORDER_EXACT : MF_ORDER_FAST);
    for (size_t i = 0; cfg.level == main_cfg.level && i < sizeof types / sizeof types[0]; i++) {
        const mf_type t = types[i];
        if (mf_cpu_order_variant(cfg.level, cfg.ordered, t, 8) == mf_cpu_order_variant(cfg.level, main_cfg.ordered, t, 8))
            continue;
        printf("%s in the %s order:\n", mf_type_name(t), cfg.ordered ? "exact" : "fast");
        check_builds(t);
    }
    cfg = main_cfg;
    printf("%d of %zu types have a GEMM here\n", n_gemm, sizeof types / sizeof types[0]);
#endif
    return test_summary("test_cpu_gemm");
}
