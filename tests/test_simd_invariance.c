/* test_simd_invariance.c: batch invariance of the SIMD matmul kernels. At every level this CPU runs
 * and for every weight type with a dot, mf_simd_gemm_at(level, t) must give, bit for bit, what
 * mf_simd_vec_dot_at(level, t) gives for each (weight row, activation row) pair, whatever the
 * number of rows (1..130), of activation rows (1..70), the row length (tails included), the
 * strides and the alignment: a token's matmul output then does not depend on the batch around it.
 * Nothing outside the nr x nc block of out may be written. Exits 77 (skipped) only when no level
 * can be tested. */
#include "test.h"
#include "simd/simd.h"
#include "core/core.h"

#include <stdint.h>
#include <strings.h>

static uint64_t rng = 0xD1B54A32D192ED03ull;
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

/* One weight row of type t: the file quantizer on random floats; the read-only formats (no
 * quantizer: IQ4_NL, IQ4_XS) get random bytes with a finite fp16 scale d, their first field. */
static void random_weight_row(mf_type t, uint8_t *dst, int64_t n, float *tmp) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    mf_quantize_fn q = mf_quant_file_quantizer(t);
    if (t == MF_TYPE_F32) {
        random_floats((float *)tmp, n);
        memcpy(dst, tmp, (size_t)n * sizeof(float));
    } else if (q) {
        random_floats(tmp, n);
        q(tmp, dst, n);
    } else {
        const size_t size = mf_row_size(t, n);
        for (size_t i = 0; i < size; i++) dst[i] = (uint8_t)rnd();
        for (int64_t b = 0; b < n / tr->blck_size; b++) {
            const uint16_t d = mf_f32_to_fp16(rndf() * 0.05f);
            memcpy(dst + (size_t)b * tr->type_size, &d, 2);
        }
    }
}

static const float SENTINEL = -12345.0f;
enum { MAX_NR = 130, MAX_NC = 70 };

typedef struct {
    mf_simd_level lv;
    mf_gemm_fn gemm; /* the level's tile, or the AVX2 float tile's wide build */
    mf_type t;
    int64_t n;
    const uint8_t *wpool, *apool[MF_SIMD_LEVEL_COUNT]; /* MAX_NR weight rows, MAX_NC activation rows, packed */
    uint8_t *wbuf, *abuf;
    float *out;
    float *dots;  /* [MAX_NC][MAX_NR] dot of pool rows (r, c) at this level, computed once */
    bool *known;  /* which of dots are computed */
} ctx;

/* The alignment a row of type t may have: that of its blocks' fields (4 with a float or f32
 * values, else 2), the largest of 4, 2, 1 that divides the block size. */
static size_t block_align(mf_type t) {
    const size_t s = mf_type_get_traits(t)->type_size;
    return s % 4 == 0 ? 4 : s % 2 == 0 ? 2 : 1;
}

/* One (nr, nc) case: the pools' first rows at padded strides and shifted starts (by the blocks'
 * alignment, which every kernel must accept), against the dots of the packed pool rows (so neither the
 * dot nor the gemm may depend on where a row lies); returns the number of mismatches. */
static int check_case(const ctx *x, int nr, int nc, int variant) {
    const mf_type_traits *tr = mf_type_get_traits(x->t);
    const mf_type at = tr->vec_dot_type;
    const size_t wrow = mf_row_size(x->t, x->n), arow = mf_row_size(at, x->n);
    const size_t we = block_align(x->t), ae = block_align(at);
    const size_t ws = wrow + we * (size_t)(variant % 3 == 0 ? 0 : 1 + variant % 7);
    const size_t as = arow + ae * (size_t)(variant % 2 == 0 ? 0 : 3 + variant % 5);
    uint8_t *w = x->wbuf + we * (size_t)(variant % 4), *a = x->abuf + ae * (size_t)(variant % 3);
    for (int r = 0; r < nr; r++) memcpy(w + (size_t)r * ws, x->wpool + (size_t)r * wrow, wrow);
    for (int c = 0; c < nc; c++) memcpy(a + (size_t)c * as, x->apool[x->lv] + (size_t)c * arow, arow);
    const size_t os = (size_t)nr + (size_t)(variant % 5);
    const size_t out_len = os * (size_t)(nc + 1);
    for (size_t i = 0; i < out_len; i++) x->out[i] = SENTINEL;
    x->gemm(x->n, nr, nc, w, ws, a, as, x->out, os);
    mf_vec_dot_fn dot = mf_simd_vec_dot_at(x->lv, x->t);
    int bad = 0;
    for (int c = 0; c <= nc; c++)
        for (size_t r = 0; r < os; r++) {
            const float got = x->out[(size_t)c * os + r];
            if (c == nc || r >= (size_t)nr) {
                if (memcmp(&got, &SENTINEL, sizeof got) && bad++ < 3)
                    fprintf(stderr, "  %s %s n=%lld nr=%d nc=%d: out[%d][%zu] written outside the block\n",
                            mf_simd_level_name(x->lv), tr->name, (long long)x->n, nr, nc, c, r);
                continue;
            }
            const size_t di = (size_t)c * MAX_NR + r;
            if (!x->known[di]) {
                x->dots[di] = dot(x->n, x->wpool + r * wrow, x->apool[x->lv] + (size_t)c * arow);
                x->known[di] = true;
            }
            const float want = x->dots[di];
            if (memcmp(&got, &want, sizeof got) && bad++ < 3)
                fprintf(stderr, "  %s %s n=%lld nr=%d nc=%d: row %zu col %d: gemm %.9g, dot %.9g\n",
                        mf_simd_level_name(x->lv), tr->name, (long long)x->n, nr, nc, r, c, got, want);
        }
    return bad;
}

/* Row lengths: for the float formats every tail around the 16- and 32-value steps and the longer
 * blocks, for block formats 1..9 blocks and model-sized rows. */
static int lengths(int64_t bs, int64_t *out) {
    int k = 0;
    if (bs == 1) {
        const int64_t ns[] = {1, 2, 7, 15, 16, 17, 31, 33, 48, 63, 64, 65, 100, 127, 128, 129, 200, 255,
                              256, 257, 300, 511, 513, 896, 1023, 1024, 1025, 1100, 2048 + 7, 4864 + 5};
        for (size_t i = 0; i < MF_ARRAY_LEN(ns); i++) out[k++] = ns[i];
    } else {
        for (int64_t i = 1; i <= 9; i++) out[k++] = i * bs;
        const int64_t big[] = {896, 1024 + 256, 4864, 2 * 4864 + 256};
        for (size_t i = 0; i < MF_ARRAY_LEN(big); i++)
            if (big[i] % bs == 0) out[k++] = big[i];
    }
    return k;
}

/* argv: optional type names to check only those (for work on one kernel) */
static bool wanted(int argc, char **argv, const char *name) {
    if (argc < 2) return true;
    for (int i = 1; i < argc; i++)
        if (!strcasecmp(argv[i], name)) return true;
    return false;
}

int main(int argc, char **argv) {
    const bool sanitized = getenv("MINFER_SANITIZED") != NULL;
    const int64_t max_n = 2 * 4864 + 256;
    /* (nr, nc) shapes: each count around the kernels' tile, panel and group sizes, both extremes */
    const int nrs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 47, 48, 49, 64, 96, 100, 127, 128, 130};
    const int ncs[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 17, 24, 31, 32, 33, 48, 63, 64, 65, 70};
    const size_t row_max = mf_row_size(MF_TYPE_F32, max_n) + 256;
    ctx x = {.wbuf = malloc((size_t)MAX_NR * row_max + 256), .abuf = malloc((size_t)MAX_NC * row_max + 256),
             .out = malloc((size_t)(MAX_NR + 5) * (MAX_NC + 1) * sizeof(float)),
             .dots = malloc((size_t)MAX_NR * MAX_NC * sizeof(float)), .known = malloc((size_t)MAX_NR * MAX_NC)};
    uint8_t *wpool = malloc((size_t)MAX_NR * row_max), *apool[MF_SIMD_LEVEL_COUNT];
    float *tmp = malloc((size_t)max_n * sizeof(float)), *acts = malloc((size_t)MAX_NC * (size_t)max_n * sizeof(float));
    bool ok = x.wbuf && x.abuf && x.out && x.dots && x.known && wpool && tmp && acts;
    for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) ok &= (apool[l] = malloc((size_t)MAX_NC * row_max)) != NULL;
    CHECK(ok);
    if (!ok) return test_summary("test_simd_invariance");
    x.wpool = wpool;
    int levels = 0, types[MF_SIMD_LEVEL_COUNT] = {0};
    for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) levels += mf_simd_level_supported((mf_simd_level)l);
    for (int ti = 0; ti < MF_TYPE_COUNT; ti++) {
        x.t = (mf_type)ti;
        const mf_type_traits *tr = mf_type_get_traits(x.t);
        if (!tr->vec_dot || !wanted(argc, argv, tr->name)) continue;
        const mf_type at = tr->vec_dot_type;
        int64_t ns[64];
        const int nn = lengths(tr->blck_size, ns);
        int bad[MF_SIMD_LEVEL_COUNT] = {0}, cases[MF_SIMD_LEVEL_COUNT] = {0}, bad_wide = 0, cases_wide = 0;
        for (int k = 0; k < nn; k++) {
            x.n = ns[k];
            const bool big = x.n > 1100;
            /* the rows of this length, once: weights from the file quantizer, activations from
             * each level's own quantizer (bit-identical to the reference, but this is its input) */
            const size_t wrow = mf_row_size(x.t, x.n), arow = mf_row_size(at, x.n);
            for (int r = 0; r < MAX_NR; r++) random_weight_row(x.t, wpool + (size_t)r * wrow, x.n, tmp);
            for (int c = 0; c < MAX_NC; c++) random_floats(acts + (size_t)c * (size_t)x.n, x.n);
            for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) {
                if (!mf_simd_level_supported((mf_simd_level)l)) continue;
                mf_quantize_fn q = mf_simd_quantize_row_at((mf_simd_level)l, at);
                for (int c = 0; c < MAX_NC; c++) {
                    const float *src = acts + (size_t)c * (size_t)x.n;
                    if (at == MF_TYPE_F32) memcpy(apool[l] + (size_t)c * arow, src, (size_t)x.n * sizeof(float));
                    else q(src, apool[l] + (size_t)c * arow, x.n);
                }
                x.apool[l] = apool[l];
            }
            for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) {
                x.lv = (mf_simd_level)l;
                if (!mf_simd_level_supported(x.lv) || !mf_simd_vec_dot_at(x.lv, x.t)) continue;
                /* a level with the same dot and gemm as one tested already (the reference
                 * kernels, or AVX2's where AVX-512 has none) adds nothing */
                bool seen = false;
                for (int e = 0; e < l; e++)
                    seen |= mf_simd_level_supported((mf_simd_level)e) &&
                            mf_simd_vec_dot_at((mf_simd_level)e, x.t) == mf_simd_vec_dot_at(x.lv, x.t) &&
                            mf_simd_gemm_at((mf_simd_level)e, x.t) == mf_simd_gemm_at(x.lv, x.t);
                if (seen) continue;
                memset(x.known, 0, (size_t)MAX_NR * MAX_NC);
                if (k == 0) {
                    types[l]++;
                    CHECKF(mf_simd_gemm_at(x.lv, x.t) != NULL, "%s %s: a dot but no gemm", mf_simd_level_name(x.lv), tr->name);
                }
                if (!mf_simd_gemm_at(x.lv, x.t)) continue;
                /* at the AVX2 level the float tile's wide build too (what Zen 4's AVX-512 level runs):
                 * the same dot's bits */
                const mf_gemm_fn wide = x.lv == MF_SIMD_AVX2 ? mf_simd_gemm_avx2_wide(x.t) : NULL;
                for (int wi = 0; wi < (wide ? 2 : 1); wi++) {
                    x.gemm = wi ? wide : mf_simd_gemm_at(x.lv, x.t);
                    int *b = wi ? &bad_wide : &bad[l], *cs = wi ? &cases_wide : &cases[l];
                    int variant = k;
                    /* every nr against a few nc, every nc against a few nr; long rows take fewer */
                    for (size_t i = 0; i < MF_ARRAY_LEN(nrs); i++) {
                        if ((big || sanitized) && i % (big ? 6 : 3)) continue;
                        *b += check_case(&x, nrs[i], ncs[(i + (size_t)k) % MF_ARRAY_LEN(ncs)], variant++), (*cs)++;
                    }
                    for (size_t i = 0; i < MF_ARRAY_LEN(ncs); i++) {
                        if ((big || sanitized) && i % (big ? 6 : 3)) continue;
                        *b += check_case(&x, nrs[(i * 7 + (size_t)k) % MF_ARRAY_LEN(nrs)], ncs[i], variant++), (*cs)++;
                    }
                    if (x.n <= 1100 && (k == nn - 1 || ns[k + 1] > 1100)) /* the largest shape, on a model-sized row */
                        *b += check_case(&x, MAX_NR, MAX_NC, variant), (*cs)++;
                }
            }
        }
        for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) {
            if (!cases[l]) continue;
            CHECKF(bad[l] == 0, "%s %s: %d results of the gemm differ from the dot (%d shapes)",
                   mf_simd_level_name((mf_simd_level)l), tr->name, bad[l], cases[l]);
            test_checks += cases[l];
        }
        if (cases_wide) {
            CHECKF(bad_wide == 0, "avx2 (wide build) %s: %d results of the gemm differ from the dot (%d shapes)",
                   tr->name, bad_wide, cases_wide);
            test_checks += cases_wide;
            printf("avx2 %s: the wide build's tile checked too (%d shapes)\n", tr->name, cases_wide);
        }
    }
    for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++)
        if (mf_simd_level_supported((mf_simd_level)l))
            printf("level %s: %d weight types with their own kernels checked\n", mf_simd_level_name((mf_simd_level)l), types[l]);
    free(x.wbuf), free(x.abuf), free(x.out), free(x.dots), free(x.known), free(wpool), free(tmp), free(acts);
    for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) free(apool[l]);
    if (levels == 0) {
        printf("test_simd_invariance: no level to test (skipped)\n");
        return 77;
    }
    return test_summary("test_simd_invariance");
}
