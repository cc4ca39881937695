/* dot_float_avx2.h: the AVX2 float kernels' parts (F32, F16, BF16 against the same format): the
 * row formats, the few-token rows (fl_few) and the tile (fl_tile), in the order dot_float_avx2.c
 * describes. Included by dot_float_avx2.c, which builds them for AVX2, and by
 * dot_float_wide_avx512.c, which builds the same code with AVX-512's 32 vector registers (FL_WIDE 1)
 * for CPUs that run the AVX-512 level's float weights on these kernels: the same operations on
 * every output's chains, so the same bits. */
#ifndef MF_X86_DOT_FLOAT_AVX2_H
#define MF_X86_DOT_FLOAT_AVX2_H

#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

#ifndef FL_WIDE
#define FL_WIDE 0 /* 1: 32 vector registers (AVX-512VL builds) */
#endif
/* The most tokens fl_rows takes at once: four rows' accumulators and the tokens' vectors fill the
 * registers */
#define FL_TMAX (FL_WIDE ? 6 : 4)

enum { FS_F32, FS_F16, FS_BF16 };
enum {
    FS_SLICE = 1024, /* values per slice, a multiple of 8: a token group's widened values (16 KB) and a
                        row triple's (6 KB as f16) stay in L1 (512 measured slower: 48 against 50
                        GMAC/s a thread, f16 4864 x 896 x 64, Zen 5) */
    FS_PSTRIDE = FS_SLICE + 16, /* floats between widened rows: a cache line more, so rows do not share L1 sets */
    FS_RB = 128,    /* rows per block: the activations are widened once per block and slice (one block
                       per mf_cpu_matmul call; 48 gave 47.5 against 50 GMAC/s) */
    FS_NC = 64,     /* tokens a block of rows takes at once (mf_cpu_matmul's calls have at most 64) */
    FS_FEW = 32,    /* up to this many tokens run on the rows directly (fl_few): ahead of the tile
                       through 32 tokens with the weights from memory (bench_gemm --cold, f16 4864 x
                       896, 2 threads: 32 tokens 1.65 against 1.94 ms, 64 tokens level) */
};

/* Eight values of format kind at p as floats. */
static inline __m256 fl_load8(int kind, const void *p) {
    if (kind == FS_F32) return _mm256_loadu_ps(p);
    const __m128i x = _mm_loadu_si128((const __m128i *)p);
    if (kind == FS_F16) return _mm256_cvtph_ps(x);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(x), 16)); /* bf16: the top half of an f32 */
}

static inline float fl_value(int kind, const void *p, int64_t i) {
    if (kind == FS_F32) return ((const float *)p)[i];
    if (kind == FS_F16) return mf_x86_h2f(((const uint16_t *)p)[i]);
    return mf_bf16_to_f32(((const uint16_t *)p)[i]);
}

static inline size_t fl_size(int kind) { return kind == FS_F32 ? 4 : 2; }

/* s plus the products of values [i, n), one at a time (dot_float_avx2.c). One function, never
 * inlined, for the dot and both builds of the tile: a contraction into fma could differ between
 * copies compiled apart. */
float mf_x86_fl_tail(int kind, float s, const void *w, const void *a, int64_t i, int64_t n);

static inline __attribute__((always_inline)) float fl_finish(int kind, __m256 acc, int64_t n, const char *w,
                                                             const char *a) {
    const float s = mf_x86_hsum8(acc);
    const int64_t np = n & ~(int64_t)7;
    return np < n ? mf_x86_fl_tail(kind, s, w, a, np, n) : s;
}

/* R rows x T tokens straight from the formats, each row read front to back once: R x T fma chains
 * side by side, each token's vector converted once per step for the R rows. Row r is at w + r * rs
 * and its outputs at out[t * out_stride + r * ors]. Each row's run is fetched FL_AHEAD bytes ahead
 * into L2, a line at a time: the hardware prefetchers alone fell behind while the fmas of several
 * tokens ran (SmolLM2-135M F16 on Zen 4, 2 threads, steps of 1-4 tokens of one sequence, medians
 * of alternating runs: 4-10 % faster where memory was slow, level where it was fast). A fetch past
 * the matrix never faults. */
enum { FL_AHEAD = 2048 };
static inline __attribute__((always_inline)) void fl_rows(int kind, const int R, const int T, int64_t n, const char *w,
                                                          size_t rs, const char *a, size_t a_stride, float *out,
                                                          size_t out_stride, size_t ors) {
    const size_t es = fl_size(kind);
    __m256 acc[4][FL_TMAX];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 6
        for (int t = 0; t < T; t++) acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        if ((i * (int64_t)es & 63) == 0)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) _mm_prefetch(w + (size_t)r * rs + (size_t)i * es + FL_AHEAD, _MM_HINT_T1);
        __m256 av[FL_TMAX];
#pragma GCC unroll 6
        for (int t = 0; t < T; t++) av[t] = fl_load8(kind, a + (size_t)t * a_stride + (size_t)i * es);
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const __m256 wv = fl_load8(kind, w + (size_t)r * rs + (size_t)i * es);
#pragma GCC unroll 6
            for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(wv, av[t], acc[r][t]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 6
        for (int t = 0; t < T; t++)
            out[(size_t)t * out_stride + (size_t)r * ors] =
                fl_finish(kind, acc[r][t], n, w + (size_t)r * rs, a + (size_t)t * a_stride);
}

/* A few tokens (decode, a server's step of a few sequences, a speculative draft verified), bound by
 * reading the weights. The rows are cut into rg strands of consecutive rows (four, or two for four
 * tokens with 16 registers: what they hold beside four tokens' accumulators), and the strands
 * advance together, one row of each at a time: rg fma chains per token side by side, while each
 * strand is one sequential run through memory that the hardware prefetchers follow (neighbouring
 * rows side by side would interleave rg runs within each page, and lose a third of the speed). The
 * tokens pass over each set of rows three at a time with 16 registers (six with 32, FL_WIDE), the
 * passes as even as can be, the later ones reading the rows from L1. Two strands by four tokens a
 * pass, as the 16-register build did for every count from four, made five tokens a pass of four and
 * one: bench_gemm --threads 1 f16 1536 576 N on Zen 3, alternating: 5 tokens 0.155 -> 0.105 ms,
 * 6 0.157 -> 0.122, 7 0.160 -> 0.152, 9 0.246 -> 0.181, 10 0.248 -> 0.221, 12 0.26-0.28 -> 0.24,
 * 8 level; four tokens keep two strands (0.085 against 0.093 in passes of two). SmolLM2-135M F16
 * on Zen 4, medians of alternating runs: a step of four tokens 12.5-16.3 -> 11.9-13.0 ms with four
 * rows by four tokens (FL_WIDE) against two by four (one token 9.5-12.2 ms); five tokens in one pass
 * 12.8-15.6 -> 11.9-14.2 ms, six 14.1-16.4 -> 13.1-15.9 against passes of four and the rest. */
static inline __attribute__((always_inline)) void fl_few(int kind, int64_t n, int nr, int nc, const char *w,
                                                         size_t w_stride, const char *a, size_t a_stride, float *out,
                                                         size_t out_stride) {
    /* four strands, each pass at most FL_TMAX tokens (three with 16 registers), the passes as even
     * as can be; with 16 registers four tokens take two strands in one pass instead */
    const int rg = FL_WIDE || nc != 4 ? 4 : 2;
    const int q = nr / rg; /* rows per strand; the last nr % rg rows follow one at a time */
    const size_t rs = (size_t)q * w_stride;
    const int tmax = rg == 2 ? 4 : FL_WIDE ? FL_TMAX : 3;
    const int passes = (nc + tmax - 1) / tmax;
    for (int j = 0; j < q; j++) {
        const char *wr = w + (size_t)j * w_stride;
        for (int pi = 0, c0 = 0; pi < passes; pi++) {
            const int tn = nc / passes + (pi < nc % passes);
            const char *ac = a + (size_t)c0 * a_stride;
            float *o = out + (size_t)c0 * out_stride + j;
            c0 += tn;
            switch (tn + (rg == 4 ? 0 : 8)) {
            case 1: fl_rows(kind, 4, 1, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            case 2: fl_rows(kind, 4, 2, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            case 3: fl_rows(kind, 4, 3, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
#if FL_WIDE
            case 4: fl_rows(kind, 4, 4, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            case 5: fl_rows(kind, 4, 5, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            case 6: fl_rows(kind, 4, 6, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
#endif
            case 9: fl_rows(kind, 2, 1, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            case 10: fl_rows(kind, 2, 2, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            case 11: fl_rows(kind, 2, 3, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            default: fl_rows(kind, 2, 4, n, wr, rs, ac, a_stride, o, out_stride, (size_t)q); break;
            }
        }
    }
    for (int r = q * rg; r < nr; r++) {
        const char *wr = w + (size_t)r * w_stride;
        for (int c0 = 0; c0 < nc; c0 += 4) {
            const char *ac = a + (size_t)c0 * a_stride;
            float *o = out + (size_t)c0 * out_stride + r;
            switch (MF_MIN(4, nc - c0)) {
            case 1: fl_rows(kind, 1, 1, n, wr, 0, ac, a_stride, o, out_stride, 0); break;
            case 2: fl_rows(kind, 1, 2, n, wr, 0, ac, a_stride, o, out_stride, 0); break;
            case 3: fl_rows(kind, 1, 3, n, wr, 0, ac, a_stride, o, out_stride, 0); break;
            default: fl_rows(kind, 1, 4, n, wr, 0, ac, a_stride, o, out_stride, 0); break;
            }
        }
    }
}

/* The calling thread's scratch: FS_NC tokens x FS_PSTRIDE widened activations, then FS_RB x FS_NC
 * parked accumulators; NULL if it cannot have one (the calls then run fl_few on groups of tokens). */
#define FS_STATE_OFF ((size_t)FS_NC * FS_PSTRIDE)
#define FS_SCRATCH_FLOATS (FS_STATE_OFF + (size_t)FS_RB * FS_NC * 8)
static float *thread_scratch(void) { return mf_x86_thread_scratch(FS_SCRATCH_FLOATS * sizeof(float)); }

/* Widens the values [k0, k1) of a row (k1 - k0 a multiple of 8) into d. */
static inline __attribute__((always_inline)) void fl_widen(int kind, const char *src, int64_t k0, int64_t k1,
                                                           float *d) {
    const size_t es = fl_size(kind);
    for (int64_t i = k0; i < k1; i += 8) _mm256_store_ps(d + (i - k0), fl_load8(kind, src + (size_t)i * es));
}

/* Where a block's outputs go on the last slice: out[t * out_stride + r] for row w[r] (the row's
 * start, for the tail) and token a + t * a_stride. */
typedef struct {
    int64_t n;
    const char *w[3];
    const char *a;
    size_t a_stride, out_stride;
    float *out;
} fl_out;

/* Prefetches lines [l0, l1) of a run of rows, nlines lines of each (row r's from p + r * stride). */
static inline void fl_prefetch_lines(const char *p, size_t stride, size_t nlines, size_t l0, size_t l1) {
    for (size_t l = l0; l < l1; l++) _mm_prefetch(p + (l / nlines) * stride + 64 * (l % nlines), _MM_HINT_T0);
}

/* R weight rows (wk[r]: the slice's first value, in the format) by T widened tokens (ap[t]), len
 * values of a slice: the R x T accumulators start at zero (first) or from st[4r + t] and end there,
 * or on the row's last slice (fo) become the outputs. Each step converts the R weight vectors once
 * for the T tokens, and each activation vector is loaded once for its R fmas (12 accumulators + 3
 * + 1 registers). Converting the weights here rather than widening them into scratch first keeps the
 * conversion off the critical path of a load from memory (Zen 5, f16 4864 x 896 x 64: 48 against
 * 46 GMAC/s a thread). */
static inline __attribute__((always_inline)) void fl_block(int kind, const int R, const int T, int64_t len,
                                                           const char *const *wk, const float *const *ap,
                                                           __m256 *const *st, bool first, const fl_out *fo) {
    const size_t es = fl_size(kind);
    __m256 acc[3][4];
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            acc[r][t] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)st[r * 4 + t]);
    for (int64_t j = 0; j < len; j += 8) {
        __m256 wv[3];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++) wv[r] = fl_load8(kind, wk[r] + (size_t)j * es);
#pragma GCC unroll 4
        for (int t = 0; t < T; t++) {
            const __m256 av = _mm256_load_ps(ap[t] + j);
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
#pragma GCC unroll 3
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            if (fo)
                fo->out[(size_t)t * fo->out_stride + (size_t)r] =
                    fl_finish(kind, acc[r][t], fo->n, fo->w[r], fo->a + (size_t)t * fo->a_stride);
            else
                _mm256_store_ps((float *)st[r * 4 + t], acc[r][t]);
}

#define FS_BLOCK_CASES(R)                                                                                      \
    switch (T) {                                                                                               \
    case 1: fl_block(kind, R, 1, k1 - k0, wk, ap, st, first, fo); break;                                       \
    case 2: fl_block(kind, R, 2, k1 - k0, wk, ap, st, first, fo); break;                                       \
    case 3: fl_block(kind, R, 3, k1 - k0, wk, ap, st, first, fo); break;                                       \
    default: fl_block(kind, R, 4, k1 - k0, wk, ap, st, first, fo); break;                                      \
    }

/* Rows [0, nr) by up to FS_NC tokens, in slices of the rows with the tokens' slice widened. */
static inline __attribute__((always_inline)) void fl_tile(int kind, int64_t n, int nr, int nc, const char *w,
                                                          size_t w_stride, const char *a, size_t a_stride, float *out,
                                                          size_t out_stride, float *scratch) {
    const size_t es = fl_size(kind);
    const int64_t np = n & ~(int64_t)7;
    float *const apb = scratch;
    __m256 *const state = (__m256 *)(scratch + FS_STATE_OFF); /* [row][token] */
    for (int rb = 0; rb < nr; rb += FS_RB) {
        const int rn = MF_MIN(FS_RB, nr - rb);
        for (int64_t k0 = 0; k0 < np; k0 += FS_SLICE) {
            const int64_t k1 = MF_MIN(k0 + FS_SLICE, np);
            const bool first = k0 == 0;
            for (int c = 0; c < nc; c++) fl_widen(kind, a + (size_t)c * a_stride, k0, k1, apb + (size_t)c * FS_PSTRIDE);
            for (int r0 = 0; r0 < rn; r0 += 3) {
                const int R = MF_MIN(3, rn - r0);
                fl_out fob = {.n = n, .a_stride = a_stride, .out_stride = out_stride};
                const char *wk[3];
                for (int r = 0; r < R; r++) {
                    fob.w[r] = w + (size_t)(rb + r0 + r) * w_stride;
                    wk[r] = fob.w[r] + (size_t)k0 * es;
                }
                /* The next triple's slice (this block's next rows, else its first rows' next slice) is
                 * fetched meanwhile, a share of its lines per token group: read from memory on
                 * demand, the weights would stall every triple. */
                const char *nw = NULL;
                size_t nlines = 0, nall = 0;
                if (r0 + 3 < rn) {
                    nw = w + (size_t)(rb + r0 + 3) * w_stride + (size_t)k0 * es;
                    nlines = ((size_t)(k1 - k0) * es + 63) / 64;
                    nall = (size_t)MF_MIN(3, rn - r0 - 3) * nlines;
                } else if (k1 < np) {
                    nw = w + (size_t)rb * w_stride + (size_t)k1 * es;
                    nlines = ((size_t)(MF_MIN(k1 + FS_SLICE, np) - k1) * es + 63) / 64;
                    nall = (size_t)MF_MIN(3, rn) * nlines;
                }
                const size_t per = (nall + (size_t)(nc + 3) / 4 - 1) / ((size_t)(nc + 3) / 4);
                for (int c0 = 0; c0 < nc; c0 += 4) {
                    const size_t pl = (size_t)(c0 / 4) * per;
                    if (pl < nall) fl_prefetch_lines(nw, w_stride, nlines, pl, MF_MIN(pl + per, nall));
                    const int T = MF_MIN(4, nc - c0);
                    const float *ap[4];
                    __m256 *st[12];
                    for (int t = 0; t < T; t++) ap[t] = apb + (size_t)(c0 + t) * FS_PSTRIDE;
                    for (int r = 0; r < R; r++)
                        for (int t = 0; t < T; t++) st[r * 4 + t] = state + (size_t)(r0 + r) * FS_NC + (size_t)(c0 + t);
                    const fl_out *fo = NULL; /* the row's last slice: the block finishes its outputs */
                    if (k1 == np) {
                        fob.a = a + (size_t)c0 * a_stride;
                        fob.out = out + (size_t)c0 * out_stride + (size_t)(rb + r0);
                        fo = &fob;
                    }
                    if (R == 3) {
                        FS_BLOCK_CASES(3)
                    } else if (R == 2) {
                        FS_BLOCK_CASES(2)
                    } else {
                        FS_BLOCK_CASES(1)
                    }
                }
            }
        }
    }
    if (np == 0) /* rows shorter than one step of 8: the tail alone */
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++)
                out[(size_t)c * out_stride + (size_t)r] =
                    fl_finish(kind, _mm256_setzero_ps(), n, w + (size_t)r * w_stride, a + (size_t)c * a_stride);
}
#undef FS_BLOCK_CASES

static inline __attribute__((always_inline)) void fl_gemm(int kind, int64_t n, int nr, int nc, const char *w,
                                                          size_t w_stride, const char *a, size_t a_stride, float *out,
                                                          size_t out_stride) {
    float *const scratch = n > 0 && nc > FS_FEW ? thread_scratch() : NULL;
    for (int c0 = 0; c0 < nc; c0 += scratch ? FS_NC : FS_FEW) {
        const int cn = MF_MIN(scratch ? FS_NC : FS_FEW, nc - c0);
        const char *ac = a + (size_t)c0 * a_stride;
        float *oc = out + (size_t)c0 * out_stride;
        if (cn <= FS_FEW) fl_few(kind, n, nr, cn, w, w_stride, ac, a_stride, oc, out_stride);
        else fl_tile(kind, n, nr, cn, w, w_stride, ac, a_stride, oc, out_stride, scratch);
    }
}

/* This build's tile entries (mf_gemm_fn): gemm_f32, gemm_f16, gemm_bf16. */
#define FL_DEFINE_GEMMS                                                                                      \
    static void gemm_f32(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as,     \
                         float *out, size_t os) {                                                          \
        fl_gemm(FS_F32, n, nr, nc, w, ws, a, as, out, os);                                                 \
    }                                                                                                      \
    static void gemm_f16(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as,     \
                         float *out, size_t os) {                                                          \
        fl_gemm(FS_F16, n, nr, nc, w, ws, a, as, out, os);                                                 \
    }                                                                                                      \
    static void gemm_bf16(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as,    \
                          float *out, size_t os) {                                                         \
        fl_gemm(FS_BF16, n, nr, nc, w, ws, a, as, out, os);                                                \
    }

#endif /* MF_X86_DOT_FLOAT_AVX2_H */
