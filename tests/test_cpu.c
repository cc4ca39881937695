/* test_cpu.c: CPU kernels against their reference twins on random inputs (matmul for every weight
 * type, RMSNorm, RoPE in both pairings, attention with F32 and F16 caches and grouped heads,
 * softmax), and the thread pool (every share runs once, results independent of thread count). */
#include "test.h"

#include "cpu/cpu.h"

#include <stdatomic.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float frand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static double nmse(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

/* ---- pool ---- */
typedef struct {
    atomic_int hits[64];
    atomic_int calls;
} pool_job;

static void pool_fn(void *arg, int ith, int nth) {
    pool_job *j = arg;
    atomic_fetch_add(&j->hits[ith], 1);
    atomic_fetch_add(&j->calls, nth);
}

static void test_pool(void) {
    for (int n = 1; n <= 4; n++) {
        mf_pool *p;
        CHECK(mf_pool_create(n, &p) == MF_OK);
        pool_job j;
        memset(&j, 0, sizeof j);
        for (int r = 0; r < 200; r++) mf_pool_run(p, pool_fn, &j);
        for (int i = 0; i < n; i++) CHECKF(atomic_load(&j.hits[i]) == 200, "thread %d of %d ran %d times", i, n, atomic_load(&j.hits[i]));
        CHECK(atomic_load(&j.calls) == 200 * n * n);
        mf_pool_free(p);
    }
    mf_pool *p;
    CHECK(mf_pool_create(0, &p) == MF_ERR_ARG);
    mf_pool_free(NULL);
    int64_t r0, r1, covered = 0;
    for (int i = 0; i < 3; i++) {
        mf_pool_range(10, i, 3, &r0, &r1);
        covered += r1 - r0;
    }
    CHECK(covered == 10);
}

/* ---- matmul ---- */
static void test_matmul_type(mf_type type, mf_pool *p1, mf_pool *p3) {
    const mf_type_traits *tr = mf_type_get_traits(type);
    const int64_t K = 512, N = 37, nt = 5;
    float *wf = malloc((size_t)(K * N) * sizeof *wf), *x = malloc((size_t)(K * nt) * sizeof *x);
    float *y1 = malloc((size_t)(N * nt) * 4), *y3 = malloc((size_t)(N * nt) * 4), *yr = malloc((size_t)(N * nt) * 4);
    float bias[37];
    for (int64_t i = 0; i < K * N; i++) wf[i] = frand();
    for (int64_t i = 0; i < K * nt; i++) x[i] = frand();
    for (int i = 0; i < N; i++) bias[i] = frand();
    size_t rb = mf_row_size(type, K);
    uint8_t *wq = malloc(rb * (size_t)N);
    for (int64_t o = 0; o < N; o++) tr->quantize(wf + o * K, wq + (size_t)o * rb, K);
    mf_weight w = {.name = "w", .type = type, .ne = {K, N, 1, 1}, .row_bytes = rb, .data = wq};
    mf_weight b = {.name = "b", .type = MF_TYPE_F32, .ne = {N, 1, 1, 1}, .row_bytes = N * 4, .data = bias};
    void *work = malloc(mf_cpu_matmul_work_size(&cfg, &w, nt, 4) + 1);
    mf_cpu_matmul(p1, &cfg, &w, &b, x, y1, nt, work);
    mf_cpu_matmul(p3, &cfg, &w, &b, x, y3, nt, work);
    mf_cpu_matmul_ref(&w, &b, x, yr, nt);
    CHECKF(!memcmp(y1, y3, (size_t)(N * nt) * 4), "%s: 1 and 3 threads differ", tr->name);
    /* The kernel quantizes activations (Q8: ~0.4% per value), the reference does not. */
    double e = nmse(y1, yr, N * nt), tol = type == MF_TYPE_F32 ? 1e-12 : type == MF_TYPE_F16 ? 1e-6 : 1e-4;
    CHECKF(e <= tol, "%s: matmul NMSE vs reference %.3g > %.1g", tr->name, e, tol);
    free(wf), free(x), free(y1), free(y3), free(yr), free(wq), free(work);
}

static void test_matmul(void) {
    mf_pool *p1, *p3;
    CHECK(mf_pool_create(1, &p1) == MF_OK && mf_pool_create(3, &p3) == MF_OK);
    const mf_type types[] = {MF_TYPE_F32, MF_TYPE_F16, MF_TYPE_Q4_0, MF_TYPE_Q4_1, MF_TYPE_Q5_0, MF_TYPE_Q5_1,
                             MF_TYPE_Q8_0, MF_TYPE_Q4_K, MF_TYPE_Q5_K, MF_TYPE_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        CHECKF(mf_cpu_type_supported(types[i]), "%s unsupported", mf_type_name(types[i]));
        if (mf_cpu_type_supported(types[i])) test_matmul_type(types[i], p1, p3);
    }
    CHECK(!mf_cpu_type_supported(MF_TYPE_IQ2_XXS));
    mf_pool_free(p1);
    mf_pool_free(p3);
}

/* ---- row ops ---- */
static void test_rows(void) {
    float x[300], w[300], y[300], yr[300];
    for (int i = 0; i < 300; i++) x[i] = frand() * 3, w[i] = frand();
    mf_cpu_rms_norm_row(x, w, y, 300, 1e-6f);
    mf_cpu_rms_norm_row_ref(x, w, yr, 300, 1e-6f);
    CHECK(nmse(y, yr, 300) < 1e-12);
    mf_cpu_rms_norm_row(x, NULL, y, 300, 1e-6f);
    double ss = 0;
    for (int i = 0; i < 300; i++) ss += (double)y[i] * y[i];
    CHECK_NEAR(ss / 300, 1.0, 1e-4);
    {   /* several rows at once (interleaved sums): bit for bit the one-row result, 7 rows = 4 + 3 */
        enum { R = 7, N = 97 };
        float xr[R * N], ym[R * N], y1[N];
        for (int i = 0; i < R * N; i++) xr[i] = frand() * (float)(1 + i % 5) * (i % 31 == 0 ? 1e3f : 1.0f);
        mf_cpu_rms_norm_rows(xr, w, ym, R, N, 1e-6f);
        for (int r = 0; r < R; r++) {
            mf_cpu_rms_norm_row(xr + r * N, w, y1, N, 1e-6f);
            CHECKF(memcmp(y1, ym + r * N, sizeof y1) == 0, "rms_norm_rows: row %d differs from the one-row norm", r);
        }
    }

    /* Frequency factors as Llama 3.1's rope_freqs: 1 for the fast pairs, 8 for the slow ones, a ramp
     * between. */
    float ff[48];
    for (int i = 0; i < 48; i++) ff[i] = i < 16 ? 1.0f : i >= 32 ? 8.0f : 1.0f + 7.0f * (float)(i - 16) / 16.0f;
    for (int variant = 0; variant < 4; variant++) {
        int mode = variant & 1;
        mf_rope_params rp = {.mode = mode ? MF_ROPE_NEOX : MF_ROPE_NORMAL, .n_dims = 96, .freq_base = 10000.0f,
                             .freq_scale = 1.0f, .freq_factors = variant & 2 ? ff : NULL};
        float cs[MF_MAX_HEAD_DIM], h[128], hr[128];
        const int32_t positions[] = {0, 1, 7, 100, 2047};
        for (size_t pi = 0; pi < 5; pi++) {
            for (int i = 0; i < 128; i++) h[i] = frand();
            mf_cpu_rope_head_ref(&rp, positions[pi], h, hr, 128);
            mf_cpu_rope_cache(&rp, positions[pi], cs);
            mf_cpu_rope_head(&cfg, &rp, cs, h, 128);
            /* Angles by repeated multiplication in float: error grows with the position. */
            double tol = 1e-6 * (1 + positions[pi]);
            double maxd = 0;
            for (int i = 0; i < 128; i++) maxd = fmax(maxd, fabs(h[i] - hr[i]));
            CHECKF(maxd <= tol, "rope mode %d factors %d pos %d: max diff %.3g", mode, variant >> 1, positions[pi],
                   maxd);
            CHECK(h[100] == hr[100]); /* past n_dims: untouched */
        }
        /* Normal mode rotates neighbours, NEOX the two halves: check where element 1 goes at pos 1. */
        float e[128] = {0}, out[128];
        e[1] = 1.0f;
        mf_cpu_rope_head_ref(&rp, 1, e, out, 128);
        CHECK(mode ? fabsf(out[49]) > 0.1f : fabsf(out[0]) > 0.1f);
    }

    float a[5] = {-3, -1, 0, 1, 3}, b[5] = {1, 2, 3, 4, 5}, o[5];
    mf_cpu_swiglu(&cfg, a, b, o, 5);
    for (int i = 0; i < 5; i++) CHECK_NEAR(o[i], a[i] / (1 + exp(-a[i])) * b[i], 1e-6);
}

/* ---- attention ---- */
static void attend(const mf_attn_params *ap, mf_kv_cache *kv, mf_kv_view_buf *vb, const float *q, const int32_t *pos,
                   const int32_t *seq, int32_t nt, float *o, float *orf, float *scores) {
    CHECK(mf_kv_view_build(kv, vb, nt, pos, seq) == MF_OK);
    mf_cpu_attention(&cfg, ap, kv, q, o, 0, (int64_t)nt * ap->n_head, scores);
    if (orf) mf_cpu_attention_ref(ap, kv, q, orf, nt);
}

static void test_attention_type(mf_type kvt) {
    const int32_t hd = 64, nh = 4, nkv = 2, nt = 6;
    mf_kv_cache kv;
    mf_kv_view_buf vb = {0};
    CHECK(mf_kv_init(&kv, 1, 16, nkv, hd, kvt) == MF_OK);
    /* Two sequences interleaved: tokens 0,2,4 -> seq 0 at pos 0..2; 1,3,5 -> seq 1 at pos 0..2. */
    int32_t pos[6] = {0, 0, 1, 1, 2, 2}, seq[6] = {0, 1, 0, 1, 0, 1}, tok[6] = {0}, cells[6];
    CHECK(mf_kv_reserve(&kv, nt, pos, seq, tok, cells) == MF_OK);
    float k[64 * 2], v[64 * 2];
    for (int t = 0; t < nt; t++) {
        for (int i = 0; i < hd * nkv; i++) k[i] = frand(), v[i] = frand();
        mf_cpu_kv_store_row(&kv, 0, cells[t], k, v);
    }
    float q[6 * 4 * 64], o[6 * 4 * 64], orf[6 * 4 * 64], o3[6 * 4 * 64], scores[2 * (16 + 64)];
    for (int i = 0; i < nt * nh * hd; i++) q[i] = frand();
    mf_attn_params ap = {.layer = 0, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .scale = 0.125f};
    attend(&ap, &kv, &vb, q, pos, seq, nt, o, orf, scores);
    /* F16 cache: the kernel rounds q and the probabilities to F16 (relative error 2^-11 each). */
    double tol = kvt == MF_TYPE_F32 ? 1e-10 : 1e-5;
    CHECKF(nmse(o, orf, nt * nh * hd) < tol, "attention (%s KV) NMSE %.3g", mf_type_name(kvt),
           nmse(o, orf, nt * nh * hd));
    /* Split into ranges of 3 (token, head) pairs, as threads do: groups get cut, results stay. */
    for (int64_t u = 0; u < nt * nh; u += 3) mf_cpu_attention(&cfg, &ap, &kv, q, o3, u, MF_MIN(u + 3, nt * nh), scores);
    CHECK(!memcmp(o3, o, sizeof o));
    /* Removing sequence 1 must not change sequence 0's results. */
    mf_kv_seq_rm(&kv, 1, 0, -1);
    CHECK(mf_kv_seq_count(&kv, 1) == 0 && mf_kv_seq_count(&kv, 0) == 3);
    float o2[6 * 4 * 64];
    int32_t seq0[6] = {0, -1, 0, -1, 0, -1};
    attend(&ap, &kv, &vb, q, pos, seq0, nt, o2, NULL, scores);
    for (int t = 0; t < nt; t += 2) CHECK(!memcmp(o2 + t * nh * hd, o + t * nh * hd, (size_t)(nh * hd) * 4));
    for (int i = 0; i < nh * hd; i++) CHECK(o2[nh * hd + i] == 0.0f); /* padding: zeros */
    mf_kv_view_buf_free(&vb);
    mf_kv_free(&kv);
}

static void test_kv_cells(void) {
    mf_kv_cache kv;
    CHECK(mf_kv_init(&kv, 2, 4, 1, 8, MF_TYPE_F16) == MF_OK);
    int32_t pos[3] = {0, 1, 2}, seq[3] = {0, 0, 1}, tok[3] = {7, 8, 9}, cells[3];
    CHECK(mf_kv_reserve(&kv, 3, pos, seq, tok, cells) == MF_OK);
    CHECK(cells[0] == 0 && cells[1] == 1 && cells[2] == 2 && kv.n_used == 3 && kv.n_active == 3);
    CHECK(mf_kv_has(&kv, 0, 1) && !mf_kv_has(&kv, 1, 1) && mf_kv_has(&kv, 1, 2));
    /* all or nothing: two more tokens do not fit in one free cell */
    int32_t p5[2] = {2, 3}, s5[2] = {0, 0};
    CHECK(mf_kv_reserve(&kv, 2, p5, s5, tok, cells) == MF_ERR_RANGE);
    CHECK(strstr(mf_last_error(), "context of 4") != NULL && kv.n_used == 3 && kv.n_active == 3);
    /* a released reservation leaves the cells as they were */
    CHECK(mf_kv_reserve(&kv, 1, p5, s5, tok, cells) == MF_OK && cells[0] == 3 && kv.n_used == 4);
    mf_kv_release(&kv, 1, cells);
    CHECK(kv.n_used == 3 && kv.n_active == 3 && !mf_kv_has(&kv, 0, 2));
    /* sharing: seq 2 gets seq 0's cells; removing seq 0 keeps them for seq 2 */
    mf_kv_seq_cp(&kv, 0, 2, 0, -1);
    CHECK(mf_kv_seq_count(&kv, 2) == 2 && kv.n_used == 3);
    mf_kv_seq_rm(&kv, 0, 0, -1);
    CHECK(mf_kv_seq_count(&kv, 0) == 0 && mf_kv_seq_count(&kv, 2) == 2 && kv.n_used == 3);
    CHECK(mf_kv_seq_pos_min(&kv, 2) == 0 && mf_kv_seq_pos_max(&kv, 2) == 1 && mf_kv_seq_pos_max(&kv, 0) == -1);
    mf_kv_seq_keep(&kv, 1);
    CHECK(kv.n_used == 1 && kv.n_active == 3 && mf_kv_seq_count(&kv, 2) == 0);
    int32_t list[4];
    CHECK(mf_kv_seq_cells(&kv, 1, list) == 1 && list[0] == 2 && kv.cell_tok[2] == 9);
    mf_kv_free(&kv);
    CHECK(mf_kv_init(&kv, 1, 4, 1, 8, MF_TYPE_Q4_0) == MF_ERR_ARG);
}

/* Cells of one sequence scattered and out of position order come back sorted by position. */
static void test_kv_order(void) {
    mf_kv_cache kv;
    CHECK(mf_kv_init(&kv, 1, 300, 1, 8, MF_TYPE_F16) == MF_OK);
    int32_t pos[300], seq[300], tok[300] = {0}, cells[300], list[300];
    for (int i = 0; i < 300; i++) pos[i] = i / 3, seq[i] = i % 3;
    CHECK(mf_kv_reserve(&kv, 300, pos, seq, tok, cells) == MF_OK);
    mf_kv_seq_rm(&kv, 1, 0, -1); /* holes at cells 1, 4, 7, ... */
    int32_t p2[100], s2[100];
    for (int i = 0; i < 100; i++) p2[i] = 100 + i, s2[i] = 0;
    CHECK(mf_kv_reserve(&kv, 100, p2, s2, tok, cells) == MF_OK && cells[0] == 1);
    const int32_t n = mf_kv_seq_cells(&kv, 0, list);
    CHECK(n == 200);
    bool sorted = true;
    for (int i = 0; i < n; i++) sorted &= kv.cell_pos[list[i]] == i;
    CHECK(sorted);
    mf_kv_free(&kv);
}

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
    test_pool();
    test_matmul();
    test_rows();
    test_attention_type(MF_TYPE_F32);
    test_attention_type(MF_TYPE_F16);
    test_kv_cells();
    test_kv_order();
    return test_summary("test_cpu");
}
