/* test_cpu_order8.c: the eight-row ordered dots (mf_cpu_ordered_dots.dot8: the AVX2 ones of the
 * repacked Q4_0 and Q4_K orders and of Q8_0, Q5_0, Q4_1, Q5_1, the AVX-512 ones of every type) give
 * bit for bit the one-row ordered dot's result for every row: quantized random data, raw random
 * bytes (any code, -128 included where the format allows it), extremes (every code at its ends,
 * large and tiny scales), many block counts, rows further apart than their length; the repacked
 * Q4_K one and Q8_0's one-chain one (MF_ORDER_REPACKED) also their plain scalar twins'; the
 * several-token ones (dot8n: Q4_0 repacked, Q8_0 in both orders, Q5_0,
 * Q4_1, Q5_1, and at the AVX2 level Q6_K; dot16n: Q4_0 repacked, sixteen rows) for 1..4 activation
 * rows likewise; and the
 * matmul that uses them (one token, a few, and several) equals one ordered dot per output. */
#include "test.h"

#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

#if defined(__x86_64__)
static uint32_t rng = 777;
static uint32_t next(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}
static float frand(void) { return (float)(next() & 0xFFFF) / 32768.0f - 1.0f; }

enum { MODE_QUANT, MODE_RAW, MODE_EXTREME, N_MODES };

/* A finite half-float scale: moderate for raw data; for extremes the largest half, the smallest
 * normal or a subnormal, either sign. */
static uint16_t half_scale(int mode) {
    if (mode == MODE_EXTREME) {
        static const uint16_t ext[] = {0x7BFF, 0xFBFF, 0x0400, 0x0001, 0x8001, 0x3C00};
        return ext[next() % 6];
    }
    return mf_f32_to_fp16((0.001f + (float)(next() % 1000) / 1000.0f) * (next() & 1 ? 1.0f : -1.0f));
}

/* A raw byte: anything, or (extremes) 0x00 0xFF 0x80 0x7F 0x0F 0xF0. */
static uint8_t raw_byte(int mode) {
    static const uint8_t ext[] = {0x00, 0xFF, 0x80, 0x7F, 0x0F, 0xF0};
    return mode == MODE_EXTREME ? ext[next() % 6] : (uint8_t)next();
}

/* The byte offsets of a weight block's half-float fields (scales, minimums). */
static int half_fields(mf_type t, int off[2]) {
    switch (t) {
    case MF_TYPE_Q4_0: case MF_TYPE_Q5_0: case MF_TYPE_Q8_0: off[0] = 0; return 1;
    case MF_TYPE_Q4_1: case MF_TYPE_Q5_1: case MF_TYPE_Q4_K: case MF_TYPE_Q5_K: off[0] = 0, off[1] = 2; return 2;
    case MF_TYPE_Q6_K: off[0] = (int)offsetof(mf_block_q6_K, d); return 1;
    default: return 0;
    }
}

/* nr rows of n weights of type t, rows ws bytes apart. */
static void fill_weights(mf_type t, int64_t n, int nr, size_t ws, uint8_t *w, int mode) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    const size_t rb = mf_row_size(t, n);
    float *wf = malloc((size_t)n * sizeof(float));
    for (int r = 0; r < nr; r++) {
        uint8_t *row = w + (size_t)r * ws;
        if (mode == MODE_QUANT) {
            for (int64_t i = 0; i < n; i++) wf[i] = frand() * (1.0f + (float)(i % 5));
            tr->quantize(wf, row, n);
            continue;
        }
        for (size_t i = 0; i < rb; i++) row[i] = raw_byte(mode);
        int off[2];
        const int nf = half_fields(t, off);
        for (int64_t b = 0; b < n / tr->blck_size; b++)
            for (int f = 0; f < nf; f++) {
                const uint16_t h = half_scale(mode);
                memcpy(row + (size_t)b * tr->type_size + off[f], &h, 2);
            }
    }
    free(wf);
}

/* One activation row of n values in the dot type of t. Raw codes are in [-127, 127] for Q8_0/Q8_1
 * (what their quantizers write; the ordered dots rely on it) and [-128, 127] for Q8_K, whose
 * bsums are then recomputed. */
static void fill_act(mf_type t, int64_t n, uint8_t *a, int mode) {
    const mf_type at = mf_type_get_traits(t)->vec_dot_type;
    if (mode == MODE_QUANT) {
        float *x = malloc((size_t)n * sizeof(float));
        for (int64_t i = 0; i < n; i++) x[i] = frand() * 3.0f;
        mf_simd_quantize_row_at(cfg.level, at)(x, a, n);
        free(x);
        return;
    }
    const int lo = at == MF_TYPE_Q8_K ? -128 : -127;
    int8_t v;
    if (at == MF_TYPE_Q8_K) {
        mf_block_q8_K *b = (mf_block_q8_K *)a;
        for (int64_t i = 0; i < n / 256; i++) {
            b[i].d = mode == MODE_EXTREME ? (next() & 1 ? 3.0e38f : 1e-38f) : frand();
            for (int k = 0; k < 256; k++) {
                v = (int8_t)(mode == MODE_EXTREME ? (next() & 1 ? 127 : lo) : lo + (int)(next() % 256u));
                b[i].qs[k] = v;
            }
            for (int g = 0; g < 16; g++) {
                int s = 0;
                for (int k = 0; k < 16; k++) s += b[i].qs[16 * g + k];
                b[i].bsums[g] = (int16_t)s;
            }
        }
        return;
    }
    const size_t bs = mf_type_get_traits(at)->type_size, hdr = bs - 32;
    for (int64_t i = 0; i < n / 32; i++) {
        uint8_t *b = a + (size_t)i * bs;
        for (size_t f = 0; f < hdr; f += 2) {
            const uint16_t h = half_scale(mode);
            memcpy(b + f, &h, 2);
        }
        for (int k = 0; k < 32; k++) {
            v = (int8_t)(mode == MODE_EXTREME ? (next() & 1 ? 127 : lo) : lo + (int)(next() % 255u));
            b[hdr + k] = (uint8_t)v;
        }
    }
}

/* A several-token dot (dot8n, dot16n) of nr rows against 1..4 activation rows, each its own data,
 * outputs os apart, equals dot on each (row, token) pair, bit for bit; aux: the rows carry the Q4_0
 * side data (corrections and float scales) the kernel reads. */
static void check_several(mf_type t, int variant, int64_t n, int mode, size_t pad, mf_vec_dot_fn dot,
                          mf_cpu_dot8n_fn fn, const char *name, int nr, bool aux) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    enum { NT = 4, MAX_NR = 16 };
    const size_t ws = mf_row_size(t, n) + pad, os = (size_t)nr + 5;
    const size_t row = aux ? mf_cpu_q4_0_aux_offset(n) + mf_cpu_q4_0_aux_bytes(n)
                           : mf_row_size(tr->vec_dot_type, n);
    const size_t as = row + pad;
    uint8_t *w = calloc((size_t)nr, ws), *acts = malloc(as * NT);
    fill_weights(t, n, nr, ws, w, mode);
    for (int k = 0; k < NT; k++) {
        fill_act(t, n, acts + (size_t)k * as, mode);
        if (aux) mf_cpu_q4_0_aux(acts + (size_t)k * as, n);
    }
    for (int nt = 1; nt <= NT; nt++) {
        float got[NT * (MAX_NR + 5)];
        fn(n, w, ws, acts, as, nt, got, os);
        for (int k = 0; k < nt; k++)
            for (int r = 0; r < nr; r++) {
                const float one = dot(n, w + r * ws, acts + (size_t)k * as);
                CHECKF(memcmp(&one, &got[k * os + r], sizeof(float)) == 0,
                       "%s variant %d n=%lld mode %d pad %zu %s nt %d token %d row %d: %.9g vs one-row %.9g",
                       tr->name, variant, (long long)n, mode, pad, name, nt, k, r, got[k * os + r], one);
            }
    }
    free(acts), free(w);
}

/* dot8 of 8 rows (ws bytes apart) against one activation row equals dot on each row, bit for bit. */
static void check_rows(mf_type t, int variant, int64_t n, int mode, size_t pad) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    enum { NR = 8 };
    const size_t rb = mf_row_size(t, n), ws = rb + pad;
    /* room for the prefetches' addresses past the rows is not needed (they never fault) */
    uint8_t *w = malloc(ws * NR), *a = malloc(mf_row_size(tr->vec_dot_type, n));
    memset(w, 0, ws * NR);
    fill_weights(t, n, NR, ws, w, mode);
    fill_act(t, n, a, mode);
    const mf_cpu_ordered_dots d = mf_cpu_ordered_dots_at(cfg.level, t, variant);
    if (d.dot && d.dot8n) check_several(t, variant, n, mode, pad, d.dot, d.dot8n, "dot8n", 8, d.dot8n_aux);
    if (d.dot && d.dot16n) check_several(t, variant, n, mode, pad, d.dot, d.dot16n, "dot16n", 16, true);
    if (d.dot && d.dot8) {
        float eight[NR];
        d.dot8(n, w, ws, a, eight);
        for (int r = 0; r < NR; r++) {
            const float one = d.dot(n, w + r * ws, a);
            CHECKF(memcmp(&one, &eight[r], sizeof(float)) == 0,
                   "%s variant %d n=%lld mode %d pad %zu row %d: eight-row %.9g vs one-row %.9g", tr->name, variant,
                   (long long)n, mode, pad, r, eight[r], one);
            if ((t != MF_TYPE_Q4_K && t != MF_TYPE_Q8_0) || variant != MF_ORDER_REPACKED) continue;
            const float twin = t == MF_TYPE_Q4_K ? mf_cpu_dot_q4_K_rp_ref(n, w + r * ws, a)
                                                 : mf_cpu_dot_q8_0_rp_ref(n, w + r * ws, a);
            CHECKF(memcmp(&twin, &eight[r], sizeof(float)) == 0,
                   "%s repacked n=%lld mode %d pad %zu row %d: eight-row %.9g vs scalar twin %.9g", tr->name,
                   (long long)n, mode, pad, r, eight[r], twin);
        }
    }
    free(w), free(a);
}

/* A N x n matmul through the backend (rows split over threads, eight-row groups plus a remainder
 * within each thread's range) against one ordered dot per (output, token). */
static void check_matmul(mf_type t, int64_t n, int64_t N, int64_t nt) {
    const mf_type_traits *tr = mf_type_get_traits(t);
    const size_t rb = mf_row_size(t, n), ab = mf_row_size(tr->vec_dot_type, n);
    float *x = malloc((size_t)(n * nt) * sizeof(float)), *y = malloc((size_t)(N * nt) * sizeof(float));
    uint8_t *wq = malloc(rb * (size_t)N);
    fill_weights(t, n, (int)N, rb, wq, MODE_QUANT);
    for (int64_t i = 0; i < n * nt; i++) x[i] = frand() * 2.0f;
    mf_weight w = {.type = t, .ne = {n, N}, .data = wq, .row_bytes = rb};
    void *work = malloc(mf_cpu_matmul_work_size(&cfg, &w, nt, 4));
    mf_pool *pool = NULL;
    CHECK(mf_pool_create(2, &pool) == MF_OK);
    mf_cpu_matmul(pool, &cfg, &w, NULL, x, y, nt, work);
    const mf_cpu_ordered_dots d = mf_cpu_ordered_dots_for(&cfg, &w);
    CHECK(d.dot);
    uint8_t *a = malloc(ab);
    for (int64_t t0 = 0; d.dot && t0 < nt; t0++) {
        mf_simd_quantize_row_at(cfg.level, tr->vec_dot_type)(x + t0 * n, a, n);
        for (int64_t o = 0; o < N; o++) {
            const float v = d.dot(n, wq + o * rb, a);
            CHECKF(memcmp(&v, &y[t0 * N + o], sizeof(float)) == 0,
                   "%s matmul n=%lld N=%lld nt=%lld [%lld,%lld]: %.9g vs %.9g", tr->name, (long long)n, (long long)N,
                   (long long)nt, (long long)t0, (long long)o, y[t0 * N + o], v);
        }
    }
    mf_pool_free(pool);
    free(x), free(y), free(wq), free(work), free(a);
}

typedef struct {
    mf_type t;
    int variant;
} case_t;

/* Every (type, variant) with an eight-row dot on this CPU. */
static const case_t cases[] = {
    {MF_TYPE_Q4_0, MF_ORDER_REPACKED}, {MF_TYPE_Q8_0, MF_ORDER_PLAIN}, {MF_TYPE_Q5_0, MF_ORDER_PLAIN},
    {MF_TYPE_Q4_K, MF_ORDER_REPACKED}, {MF_TYPE_Q6_K, MF_ORDER_PLAIN}, {MF_TYPE_Q4_1, MF_ORDER_PLAIN},
    {MF_TYPE_Q5_1, MF_ORDER_PLAIN},    {MF_TYPE_Q5_K, MF_ORDER_PLAIN}, {MF_TYPE_Q8_0, MF_ORDER_REPACKED},
};
#endif

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
#if defined(__x86_64__)
    if (!cfg.ordered) {
        printf("ordered kernels not in use on this CPU; nothing to check\n");
        return test_summary("test_cpu_order8");
    }
    const bool avx512 = cfg.level == MF_SIMD_AVX512;
    CHECK(mf_cpu_ordered_dots_avx2(MF_TYPE_Q4_0, MF_ORDER_REPACKED).dot8);
    CHECK(mf_cpu_ordered_dots_avx2(MF_TYPE_Q4_K, MF_ORDER_REPACKED).dot8);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const mf_type t = cases[c].t;
        const int v = cases[c].variant;
        const mf_cpu_ordered_dots d = mf_cpu_ordered_dots_at(cfg.level, t, v);
        if (avx512) CHECKF(d.dot8, "%s variant %d: no eight-row dot", mf_type_get_traits(t)->name, v);
        if (t == MF_TYPE_Q4_0 || t == MF_TYPE_Q8_0 || t == MF_TYPE_Q5_0 || t == MF_TYPE_Q4_1 || t == MF_TYPE_Q5_1 ||
            (t == MF_TYPE_Q6_K && !avx512))
            CHECKF(d.dot8n, "%s variant %d: no eight-row several-token dot", mf_type_get_traits(t)->name, v);
        if (!d.dot8 && !d.dot8n) continue;
        const int64_t bk = mf_type_get_traits(t)->blck_size;
        /* block counts: 1..9, odd and even, and the model shapes' 896, 3584, 4864, 18944 values */
        int64_t nbs[16];
        int nn = 0;
        for (int64_t b = 1; b <= 9; b++) nbs[nn++] = b;
        const int64_t ks[] = {896, 3584, 4864, 18944};
        for (int k = 0; k < 4; k++)
            if (ks[k] % bk == 0) nbs[nn++] = ks[k] / bk;
        for (int i = 0; i < nn; i++)
            for (int mode = 0; mode < N_MODES; mode++) {
                check_rows(t, v, nbs[i] * bk, mode, 0);
                if (i < 3) check_rows(t, v, nbs[i] * bk, mode, 40);
            }
        const int64_t n = bk == 32 ? 896 : 512;
        check_matmul(t, n, v == MF_ORDER_PLAIN ? 44 : 40, 1);
        for (int64_t nt = 2; nt <= 5; nt++) check_matmul(t, n, v == MF_ORDER_PLAIN ? 44 : 40, nt); /* dot8n */
        check_matmul(t, n, 40, 7);
    }
#endif
    return test_summary("test_cpu_order8");
}
