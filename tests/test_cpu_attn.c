/* test_cpu_attn.c: the attention kernels against the double-precision reference (blockwise kernel,
 * portable, AVX2 and AVX-512, F32 and F16 caches; the SIMD tiles also against the portable one) and
 * the AVX-512 ordered kernel bit for bit against its reference twin; the vector exps (AVX-512 bit
 * for bit against the ordered softmax's, AVX2 within 2 ulp of exp); any split of the (token, head)
 * units, and any rows per tile (the AVX2 and AVX-512 tiles' few-row layouts included), give the
 * same bits. */
#include "cpu/cpu_attn.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"
#include "test.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t next_u32(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float frand(void) { return (float)next_u32() / 4294967296.0f * 2.0f - 1.0f; } /* [-1, 1) */
static int irand(int n) { return (int)(next_u32() % (uint32_t)n); }

/* A case: cells of nseq sequences (cell c: seq c % nseq, pos c / nseq, some cells empty), tokens
 * with random sequences (-1: padding, nseq: a sequence without cells) and positions; the cache's
 * view (kv.h) built from them as the context does. */
typedef struct {
    int hd, nh, nkv, nt, ncells, nseq;
    mf_type type;
    float qscale; /* larger: sharper softmax */
    bool causal;  /* cells 0..ncells-1 = sequence 0 at positions 0..; token t at ncells - nt + t */
    bool growing; /* scores grow along the cells (the running max changes in every tile) */
} attn_case;

typedef struct {
    attn_case c;
    mf_kv_cache kv;
    mf_kv_view_buf vb;
    mf_attn_params ap;
    float *q, *scores;
    int32_t *pos, *seq;
    size_t nout;
} attn_data;

static void setup(attn_data *a, const attn_case *c) {
    memset(a, 0, sizeof *a);
    a->c = *c;
    CHECK(mf_kv_init(&a->kv, 1, c->ncells, c->nkv, c->hd, c->type) == MF_OK);
    const int64_t row = (int64_t)c->nkv * c->hd;
    float *k = malloc((size_t)row * sizeof(float)), *v = malloc((size_t)row * sizeof(float));
    for (int32_t cell = 0; cell < c->ncells; cell++) {
        a->kv.cell_seqs[cell] = (uint64_t)1 << (c->causal ? 0 : cell % c->nseq);
        a->kv.cell_pos[cell] = c->causal ? cell : cell / c->nseq;
        if (!c->causal && irand(10) == 0) a->kv.cell_seqs[cell] = 0;
        a->kv.n_used += a->kv.cell_seqs[cell] != 0;
        for (int64_t i = 0; i < row; i++) k[i] = frand(), v[i] = frand();
        if (c->growing)
            for (int h = 0; h < c->nkv; h++) k[h * c->hd] = 4.0f * (float)cell / (float)c->ncells;
        mf_cpu_kv_store_row(&a->kv, 0, cell, k, v);
    }
    a->kv.n_active = c->ncells;
    free(k);
    free(v);
    a->nout = (size_t)c->nt * (size_t)c->nh * (size_t)c->hd;
    a->q = malloc(a->nout * sizeof(float));
    a->pos = malloc((size_t)c->nt * sizeof(int32_t));
    a->seq = malloc((size_t)c->nt * sizeof(int32_t));
    for (size_t i = 0; i < a->nout; i++) a->q[i] = frand() * c->qscale;
    if (c->growing)
        for (size_t i = 0; i < a->nout; i += (size_t)c->hd) a->q[i] = 8.0f;
    for (int t = 0; t < c->nt; t++) {
        if (c->causal) {
            a->seq[t] = 0;
            a->pos[t] = c->ncells - c->nt + t;
        } else {
            int r = irand(12);
            a->seq[t] = r == 0 ? -1 : r == 1 ? c->nseq : irand(c->nseq);
            a->pos[t] = irand(c->ncells / c->nseq + 3) - 1;
        }
    }
    a->ap = (mf_attn_params){.layer = 0, .n_head = c->nh, .n_head_kv = c->nkv, .head_dim = c->hd,
                             .scale = 1.0f / sqrtf((float)c->hd)};
    CHECK(mf_kv_view_build(&a->kv, &a->vb, c->nt, a->pos, a->seq) == MF_OK);
    a->scores = malloc((size_t)(c->nh / c->nkv) * ((size_t)c->ncells + (size_t)c->hd) * sizeof(float));
}

static void teardown(attn_data *a) {
    mf_kv_view_buf_free(&a->vb);
    mf_kv_free(&a->kv);
    free(a->q);
    free(a->pos);
    free(a->seq);
    free(a->scores);
}

static const char *case_name(const attn_case *c) {
    static char buf[160];
    snprintf(buf, sizeof buf, "%s hd=%d nh=%d nkv=%d nt=%d cells=%d seqs=%d q*%g%s%s", mf_type_name(c->type), c->hd,
             c->nh, c->nkv, c->nt, c->ncells, c->nseq, (double)c->qscale, c->causal ? " causal" : "",
             c->growing ? " growing" : "");
    return buf;
}

/* Largest |o - ref| over the output, relative to the largest |v| (1 here): the outputs are convex
 * combinations of V rows, so this is the error in units of V's scale. */
static double max_err(const float *o, const float *ref, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)o[i] - (double)ref[i]);
        if (!(d <= e)) e = d; /* NaN counts as the largest */
    }
    return e;
}

/* Units [0, n) in random ranges, as threads would get them. */
static void run_split(const attn_data *a, float *out, mf_cpu_attn_tile_fn tile, int rows) {
    const int64_t n = (int64_t)a->c.nt * a->c.nh;
    for (int64_t u = 0; u < n;) {
        const int64_t step = 1 + irand(40), u1 = MF_MIN(n, u + step);
        if (tile)
            mf_cpu_attention_flash_rows(&a->ap, &a->kv, a->q, out, u, u1, tile, rows);
        else
            mf_cpu_attention(&cfg, &a->ap, &a->kv, a->q, out, u, u1, a->scores);
        u = u1;
    }
}

/* Bound on the blockwise kernels' error (float accumulation, a ~1.5 ulp exp), in units of V; the
 * worst case here is ~1.7e-6 (a sharp softmax, q * 8: the scores' float error, amplified by exp). */
#define FLASH_TOL 5e-6

static void check_case(const attn_case *c) {
    attn_data a;
    setup(&a, c);
    const int64_t n = (int64_t)c->nt * c->nh;
    float *ref = malloc(a.nout * sizeof(float)), *o = malloc(a.nout * sizeof(float)),
          *o2 = malloc(a.nout * sizeof(float));
    mf_cpu_attention_ref(&a.ap, &a.kv, a.q, ref, c->nt);
    /* each tile with the rows per tile it runs with, the AVX2 one also with the narrower tiles */
    const int rows = mf_cpu_attn_tile_rows(c->hd), wide = mf_cpu_attn_tile_rows_wide(c->hd);
    mf_cpu_attn_tile_fn tiles[4] = {mf_cpu_attn_tile_c, NULL, NULL, NULL};
    const int tile_rows[4] = {rows, wide, rows, rows};
    const char *tile_names[4] = {"c", "avx2", "avx2 narrow", "avx512"};
#if defined(__x86_64__)
    const bool avx512 = cfg.level == MF_SIMD_AVX512;
    if (cfg.level >= MF_SIMD_AVX2) tiles[1] = tiles[2] = mf_cpu_attn_tile_avx2;
    if (avx512) tiles[3] = mf_cpu_attn_tile_avx512;
#endif
    float *oc = malloc(a.nout * sizeof(float)); /* the portable tile's result, the SIMD tiles' twin */
    float *o1 = malloc(a.nout * sizeof(float)); /* the wide AVX2 tiles' */
    for (int k = 0; k < 4; k++) {
        if (!tiles[k]) continue;
        mf_cpu_attention_flash_rows(&a.ap, &a.kv, a.q, o, 0, n, tiles[k], tile_rows[k]);
        double e = max_err(o, ref, a.nout);
        CHECKF(e <= FLASH_TOL, "%s flash %s: max error %.3g", case_name(c), tile_names[k], e);
        if (k == 0) memcpy(oc, o, a.nout * sizeof(float));
        if (k == 1) memcpy(o1, o, a.nout * sizeof(float));
        if (k == 2) /* a row's bits do not depend on the rows sharing its tile */
            CHECKF(!memcmp(o, o1, a.nout * sizeof(float)), "%s flash avx2: 32- and 64-row tiles differ", case_name(c));
        e = max_err(o, oc, a.nout);
        CHECKF(e <= FLASH_TOL, "%s flash %s: max difference %.3g from the portable tile", case_name(c),
               tile_names[k], e);
        if (k == 1 || k == 3) /* tiles of 4 rows (the few-row layouts) and of 8 give the wide tile's bits */
            for (int few = 4; few <= 8; few += 4) {
                memset(o2, 0xFF, a.nout * sizeof(float));
                mf_cpu_attention_flash_rows(&a.ap, &a.kv, a.q, o2, 0, n, tiles[k], few);
                CHECKF(!memcmp(o, o2, a.nout * sizeof(float)), "%s flash %s: %d-row tiles differ from %d-row ones",
                       case_name(c), tile_names[k], few, tile_rows[k]);
            }
        memset(o2, 0xFF, a.nout * sizeof(float));
        run_split(&a, o2, tiles[k], tile_rows[k]);
        CHECKF(!memcmp(o, o2, a.nout * sizeof(float)), "%s flash %s: split units differ", case_name(c),
               tile_names[k]);
    }
    /* rows that see nothing are exact zeros */
    for (int t = 0; t < c->nt; t++) {
        bool any = false;
        for (int32_t cell = 0; cell < c->ncells; cell++)
            any |= a.seq[t] >= 0 && (a.kv.cell_seqs[cell] >> a.seq[t] & 1) && a.kv.cell_pos[cell] <= a.pos[t];
        if (!any)
            for (int64_t i = 0; i < (int64_t)c->nh * c->hd; i++) CHECK(o[(int64_t)t * c->nh * c->hd + i] == 0.0f);
    }
#if defined(__x86_64__)
    if (c->type == MF_TYPE_F32 && cfg.level >= MF_SIMD_AVX2) {
        mf_cpu_attention_ordered_ref(&a.ap, &a.kv, a.q, o, 0, n, a.scores);
        double e = max_err(o, ref, a.nout);
        CHECKF(e <= 1e-5, "%s ordered ref: max error %.3g", case_name(c), e);
        if (avx512) {
            memset(o2, 0xFF, a.nout * sizeof(float));
            mf_cpu_attention_ordered_avx512(&a.ap, &a.kv, a.q, o2, 0, n, a.scores);
            size_t bad = 0, first = 0;
            for (size_t i = 0; i < a.nout; i++)
                if (memcmp(&o[i], &o2[i], 4) && !bad++) first = i;
            CHECKF(!bad, "%s ordered avx512: %zu outputs differ, first [%zu] %.9g vs ref %.9g", case_name(c), bad,
                   first, (double)o2[first], (double)o[first]);
            memset(o2, 0xFF, a.nout * sizeof(float));
            for (int64_t u = 0; u < n;) {
                const int64_t step = 1 + irand(20), u1 = MF_MIN(n, u + step);
                mf_cpu_attention_ordered_avx512(&a.ap, &a.kv, a.q, o2, u, u1, a.scores);
                u = u1;
            }
            CHECKF(!memcmp(o, o2, a.nout * sizeof(float)), "%s ordered avx512: split units differ", case_name(c));
        }
    }
#endif
    /* the dispatching entry point: any split gives the same bits */
    mf_cpu_attention(&cfg, &a.ap, &a.kv, a.q, o, 0, n, a.scores);
    memset(o2, 0xFF, a.nout * sizeof(float));
    run_split(&a, o2, NULL, 0);
    CHECKF(!memcmp(o, o2, a.nout * sizeof(float)), "%s dispatch: split units differ", case_name(c));
    free(ref);
    free(o);
    free(o2);
    free(oc);
    free(o1);
    teardown(&a);
}

static void test_cases(void) {
    const int hds[] = {64, 128, 80, 72, 40};
    const int groups[] = {1, 2, 7};
    const mf_type types[] = {MF_TYPE_F32, MF_TYPE_F16};
    for (int ti = 0; ti < 2; ti++)
        for (int hi = 0; hi < 5; hi++)
            for (int gi = 0; gi < 3; gi++) {
                const int g = groups[gi], nkv = g == 7 ? 2 : 3;
                attn_case c = {.hd = hds[hi], .nh = g * nkv, .nkv = nkv, .nt = 37, .ncells = 150, .nseq = 3,
                               .type = types[ti], .qscale = 1.0f};
                check_case(&c);
                c.qscale = 8.0f, c.nseq = 1, c.ncells = 77, c.nt = 20;
                check_case(&c);
                c = (attn_case){.hd = hds[hi], .nh = g * nkv, .nkv = nkv, .nt = 45, .ncells = 130, .nseq = 1,
                                .type = types[ti], .qscale = 2.0f, .causal = true};
                check_case(&c);
            }
    /* long contexts: the 0.5B and 7B shapes, decode and a chunk at the end of 4096 cells */
    for (int ti = 0; ti < 2; ti++) {
        attn_case c = {.hd = 64, .nh = 14, .nkv = 2, .nt = 9, .ncells = 4096, .nseq = 1, .type = types[ti],
                       .qscale = 1.0f, .causal = true};
        check_case(&c);
        c.growing = true;
        check_case(&c);
        c = (attn_case){.hd = 128, .nh = 28, .nkv = 4, .nt = 1, .ncells = 4096, .nseq = 1, .type = types[ti],
                        .qscale = 4.0f, .causal = true};
        check_case(&c);
        c = (attn_case){.hd = 64, .nh = 14, .nkv = 2, .nt = 3, .ncells = 1000, .nseq = 4, .type = types[ti],
                        .qscale = 1.0f};
        check_case(&c);
    }
    /* head dims up to the largest: fewer rows and cells per tile */
    for (int ti = 0; ti < 2; ti++) {
        attn_case c = {.hd = 512, .nh = 4, .nkv = 1, .nt = 11, .ncells = 70, .nseq = 1, .type = types[ti],
                       .qscale = 1.0f, .causal = true};
        check_case(&c);
        c.hd = 272;
        check_case(&c);
    }
}

/* Layout invariance: one sequence's cells, stored contiguously or scattered among other sequences'
 * cells in random cell order, give bit-identical outputs for every kernel (the kernels sum over the
 * sequence's cells in position order), also when its tokens are computed alone or among tokens of
 * other sequences. */
static void test_layout(mf_type type, int hd, int n_pos) {
    const int nkv = 2, nh = 4, ncells = 4 * n_pos;
    mf_kv_cache kv[2];
    mf_kv_view_buf vb[2];
    memset(vb, 0, sizeof vb);
    float *k = malloc((size_t)(nkv * hd) * 4), *v = malloc((size_t)(nkv * hd) * 4);
    float *kk = malloc((size_t)(n_pos * nkv * hd) * 4), *vv = malloc((size_t)(n_pos * nkv * hd) * 4);
    for (int i = 0; i < n_pos * nkv * hd; i++) kk[i] = frand(), vv[i] = frand();
    int32_t *perm = malloc((size_t)ncells * 4);
    for (int i = 0; i < ncells; i++) perm[i] = i;
    for (int i = ncells - 1; i > 0; i--) {
        int j = irand(i + 1), t = perm[i];
        perm[i] = perm[j], perm[j] = t;
    }
    for (int l = 0; l < 2; l++) {
        CHECK(mf_kv_init(&kv[l], 1, ncells, nkv, hd, type) == MF_OK);
        /* layout 0: sequence 0 in cells 0..n_pos-1; layout 1: its position p in cell perm[p], the
         * other cells hold sequences 1..3 */
        for (int c = 0; c < ncells; c++) {
            const int p = c % n_pos, s = c / n_pos, cell = l ? perm[c] : c;
            kv[l].cell_seqs[cell] = (uint64_t)1 << s;
            kv[l].cell_pos[cell] = p;
            const float *src_k = s == 0 ? kk + (size_t)p * nkv * hd : k, *src_v = s == 0 ? vv + (size_t)p * nkv * hd : v;
            if (s) for (int i = 0; i < nkv * hd; i++) k[i] = frand(), v[i] = frand();
            mf_cpu_kv_store_row(&kv[l], 0, cell, src_k, src_v);
        }
        kv[l].n_used = kv[l].n_active = ncells;
    }
    enum { NT = 12 };
    int32_t pos[2][NT], seq[2][NT];
    float *q = malloc((size_t)(NT * nh * hd) * 4), *o[2][4];
    for (int i = 0; i < NT * nh * hd; i++) q[i] = frand();
    for (int t = 0; t < NT; t++) {
        pos[0][t] = pos[1][t] = n_pos - NT + t;
        seq[0][t] = 0;
        seq[1][t] = t % 3 == 1 ? 1 + irand(3) : 0; /* layout 1's batch mixes other sequences in */
    }
    mf_attn_params ap = {.layer = 0, .n_head = nh, .n_head_kv = nkv, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd)};
    float *scores = malloc((size_t)(nh / nkv) * ((size_t)ncells + (size_t)hd) * 4);
    for (int l = 0; l < 2; l++) {
        CHECK(mf_kv_view_build(&kv[l], &vb[l], NT, pos[l], seq[l]) == MF_OK);
        for (int kind = 0; kind < 4; kind++) o[l][kind] = calloc((size_t)(NT * nh * hd), 4);
        mf_cpu_attention_flash(&ap, &kv[l], q, o[l][0], 0, NT * nh, mf_cpu_attn_tile_c);
#if defined(__x86_64__)
        if (cfg.level >= MF_SIMD_AVX2)
            mf_cpu_attention_flash_rows(&ap, &kv[l], q, o[l][3], 0, NT * nh, mf_cpu_attn_tile_avx2,
                                        mf_cpu_attn_tile_rows_wide(hd));
        if (cfg.level == MF_SIMD_AVX512) {
            mf_cpu_attention_flash(&ap, &kv[l], q, o[l][1], 0, NT * nh, mf_cpu_attn_tile_avx512);
            if (type == MF_TYPE_F32) mf_cpu_attention_ordered_avx512(&ap, &kv[l], q, o[l][2], 0, NT * nh, scores);
        } else if (type == MF_TYPE_F32 && cfg.level == MF_SIMD_AVX2) {
            mf_cpu_attention_ordered_ref(&ap, &kv[l], q, o[l][2], 0, NT * nh, scores);
        }
#endif
    }
    for (int kind = 0; kind < 4; kind++)
        for (int t = 0; t < NT; t++) {
            if (seq[1][t]) continue;
            CHECKF(!memcmp(o[0][kind] + t * nh * hd, o[1][kind] + t * nh * hd, (size_t)(nh * hd) * 4),
                   "%s hd %d, %d positions, kernel %d, token %d: scattered cells give other bits", mf_type_name(type),
                   hd, n_pos, kind, t);
        }
    for (int l = 0; l < 2; l++) {
        for (int kind = 0; kind < 4; kind++) free(o[l][kind]);
        mf_kv_view_buf_free(&vb[l]);
        mf_kv_free(&kv[l]);
    }
    free(k), free(v), free(kk), free(vv), free(perm), free(q), free(scores);
}

#if defined(__x86_64__)
/* The AVX-512 exp against the ordered softmax's exp (exp(x - 0) = exp(x)), bit for bit. */
static void test_exp(void) {
    if (cfg.level != MF_SIMD_AVX512) return;
    enum { N = 4096 };
    static float x[N], y[N], z[N];
    size_t bad = 0, total = 0;
    const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-45f, -1e-45f, 1e-38f, -87.3f, -87.4f,
                             -88.7f, -103.9f, -104.0f, -133.0f, -133.2f, -192.5f * 0.6931472f, 88.72f, 88.73f,
                             89.0f, 133.1f, 133.2f, 1000.0f, -1000.0f, 0.5f, -0.5f, 1.0f, -1.0f};
    for (int round = 0; round < 1000; round++) {
        for (int i = 0; i < N; i++) {
            switch (round % 4) {
            case 0: x[i] = frand() * 100.0f; break;                      /* the softmax range and more */
            case 1: x[i] = frand() * 200.0f - 20.0f; break;              /* under- and overflow */
            case 2: x[i] = frand() * 0.01f; break;                       /* near 0 */
            default: {
                uint32_t b = next_u32();
                memcpy(&x[i], &b, 4); /* any bit pattern */
            }
            }
        }
        if (round == 0) memcpy(x, special, sizeof special);
        memcpy(y, x, sizeof x);
        mf_cpu_softmax_exp_ord_avx2(y, N, 0.0f);
        for (int i = 0; i < N; i += 16) mf_cpu_attn_exp16_avx512(x + i, z + i);
        for (int i = 0; i < N; i++) {
            total++;
            bool same = isnan(y[i]) ? isnan(z[i]) : !memcmp(&y[i], &z[i], 4);
            if (!same && bad++ < 5) fprintf(stderr, "exp(%a): %a, ordered %a\n", (double)x[i], (double)z[i], (double)y[i]);
        }
    }
    CHECKF(bad == 0, "vector exp: %zu of %zu differ", bad, total);
}

/* The AVX2 tile's exp against exp: within 2 ulp down to -87, exactly 1 at 0, exactly 0 below -87
 * (-inf included: no subnormal results), infinity above the largest float, NaN for NaN. */
static void test_exp8(void) {
    if (cfg.level < MF_SIMD_AVX2) return;
    enum { N = 4096 };
    static float x[N], y[N];
    size_t bad = 0;
    const float special[8] = {0.0f, -0.0f, -INFINITY, INFINITY, NAN, -87.01f, 88.8f, -1000.0f};
    const float want[8] = {1.0f, 1.0f, 0.0f, INFINITY, NAN, 0.0f, INFINITY, 0.0f};
    mf_cpu_attn_exp8_avx2(special, y);
    for (int i = 0; i < 8; i++)
        CHECKF(isnan(want[i]) ? isnan(y[i]) : y[i] == want[i], "exp8(%g) = %g, want %g", (double)special[i],
               (double)y[i], (double)want[i]);
    for (int round = 0; round < 100; round++) {
        for (int i = 0; i < N; i++) x[i] = round % 2 ? frand() * 87.0f : frand() * 20.0f - 10.0f;
        if (round == 0) x[0] = -87.0f, x[1] = 88.7f;
        for (int i = 0; i < N; i += 8) mf_cpu_attn_exp8_avx2(x + i, y + i);
        for (int i = 0; i < N; i++) {
            const double e = exp((double)x[i]), ulp = (double)nextafterf((float)e, INFINITY) - (double)(float)e;
            if (fabs((double)y[i] - e) > 2.0 * ulp && bad++ < 5)
                fprintf(stderr, "exp8(%a) = %a, exp %a\n", (double)x[i], (double)y[i], e);
            if (x[i] >= -87.0f && !isnormal(y[i]) && bad++ < 5)
                fprintf(stderr, "exp8(%a) = %a\n", (double)x[i], (double)y[i]);
        }
    }
    CHECKF(bad == 0, "exp8: %zu values off", bad);
}
#endif

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
#if defined(__x86_64__)
    test_exp();
    test_exp8();
#endif
    test_cases();
    for (int ti = 0; ti < 2; ti++) {
        const mf_type t = ti ? MF_TYPE_F16 : MF_TYPE_F32;
        test_layout(t, 64, 40);
        test_layout(t, 128, 300);
        test_layout(t, 80, 129);
    }
    printf("test_cpu_attn: %d checks, %d failed\n", test_checks, test_failures);
    return test_failures != 0;
}
