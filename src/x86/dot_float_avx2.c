/* dot_float_avx2.c: AVX2 dots of the float formats (F32, F16, BF16 against the same format) and
 * their GEMM tile, which gives every (row, token) pair bit for bit the dot's value (simd.h).
 *
 * The order (dot and tile): 8-lane accumulators acc0..3; steps of 32 values put values
 * i + 8k..i + 8k + 7 into acc_k by fma; then steps of 8 into acc0; the sum hsum8((acc0 + acc1) +
 * (acc2 + acc3)); then the last n % 8 values added one at a time (fl_tail, shared).
 *
 * The tile (nr <= 128 rows x nc <= 64 tokens) keeps that order per output but runs it in passes: an
 * accumulator acc_k only ever takes the values i + 8k.. of each 32-value step, in increasing i, so
 * the four can be formed one after the other (pass k over a slice of the row), each pass with one
 * accumulator per output. That frees the registers for a block of three weight rows by four tokens
 * (twelve accumulators, the three weight vectors in registers, one activation vector at a time:
 * seven loads per twelve fmas), where four accumulators per output allowed one row by three tokens
 * (four loads per three fmas, load-bound). Both operands are widened to f32 before the fmas, into
 * per-thread scratch laid out pass by pass (pass k's eight values of each step side by side, so a
 * pass reads its operands in order): the activations once per slice and block of FS_RB rows, a
 * triple of weight rows once per slice for all the tokens of the call, so no fma waits on a
 * conversion. Between slices the accumulators wait in scratch. The values past the last whole
 * 32-value step (steps of 8 into acc0, then the scalar tail) are added per output at the end, as
 * the dot does. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

#include <pthread.h>
#include <stdlib.h>

enum { FS_F32, FS_F16, FS_BF16 };
enum {
    FS_SLICE = 1024, /* values per slice, a multiple of 32: a token group's (16 KB) and a row triple's
                        (12 KB) widened values stay in L1 */
    FS_PSTRIDE = FS_SLICE + 16, /* floats between widened rows: a cache line more, so rows do not share L1 sets */
    FS_RB = 48,     /* rows per block: activations are widened once per block and slice (Zen 5, f16
                       896 x 4864 x 64: 43 GMAC/s a thread against 38 with 16; the accumulators
                       parked between slices take 8 KB a row) */
    FS_FEW_SLICE = 512, /* the few-token path's slice: four tokens' (8 KB) stay in L1 */
    FS_NC = 64,     /* tokens per call, at most (mf_cpu_matmul's tiles) */
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

/* s plus the products of values [i, n), one at a time. Not inlined, so that the dot and the tile
 * run the same instructions (a contraction into fma may differ between inlined copies). */
static __attribute__((noinline)) float fl_tail(int kind, float s, const void *w, const void *a, int64_t i, int64_t n) {
    for (; i < n; i++) s += fl_value(kind, w, i) * fl_value(kind, a, i);
    return s;
}

static inline __attribute__((always_inline)) float fl_dot(int kind, int64_t n, const void *vw, const void *va) {
    const char *w = vw, *a = va;
    const size_t es = fl_size(kind);
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(fl_load8(kind, w + (size_t)(i + 8 * k) * es), fl_load8(kind, a + (size_t)(i + 8 * k) * es), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(fl_load8(kind, w + (size_t)i * es), fl_load8(kind, a + (size_t)i * es), acc[0]);
    const float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    return fl_tail(kind, s, w, a, i, n);
}

static float dot_f32_f32(int64_t n, const void *w, const void *a) { return fl_dot(FS_F32, n, w, a); }
static float dot_f16_f16(int64_t n, const void *w, const void *a) { return fl_dot(FS_F16, n, w, a); }
static float dot_bf16_bf16(int64_t n, const void *w, const void *a) { return fl_dot(FS_BF16, n, w, a); }

/* The calling thread's scratch: FS_NC tokens x FS_PSTRIDE widened activations, three widened weight
 * rows, then FS_RB x FS_NC x 4 parked accumulators (the few-token path: FS_NC * 4 rows x 4 x 4);
 * NULL if it cannot have one (the tile then calls the dot per pair). */
#define FS_STATE_OFF ((size_t)(FS_NC + 3) * FS_PSTRIDE)
#define FS_SCRATCH_FLOATS (FS_STATE_OFF + (size_t)FS_RB * FS_NC * 32)
static pthread_key_t scratch_key;
static bool scratch_key_ok;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static void scratch_key_init(void) { scratch_key_ok = pthread_key_create(&scratch_key, free) == 0; }

static float *thread_scratch(void) {
    pthread_once(&scratch_once, scratch_key_init);
    if (!scratch_key_ok) return NULL;
    void *p = pthread_getspecific(scratch_key);
    if (!p) {
        if (posix_memalign(&p, 64, FS_SCRATCH_FLOATS * sizeof(float))) return NULL;
        if (pthread_setspecific(scratch_key, p)) {
            free(p);
            return NULL;
        }
    }
    return p;
}

/* One output from its four accumulators after the whole 32-value steps (np values): the steps of 8
 * past them into acc0, the sum, the scalar tail, as the dot. */
static inline __attribute__((always_inline)) float fl_finish(int kind, int64_t n, int64_t np, __m256 a0, __m256 a1,
                                                             __m256 a2, __m256 a3, const char *wr, const char *ac) {
    const size_t es = fl_size(kind);
    int64_t i = np;
    for (; i + 8 <= n; i += 8)
        a0 = _mm256_fmadd_ps(fl_load8(kind, wr + (size_t)i * es), fl_load8(kind, ac + (size_t)i * es), a0);
    const float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return i < n ? fl_tail(kind, s, wr, ac, i, n) : s;
}

/* Widens the values [k0, k1) of a row (k1 - k0 a multiple of 32) into d, pass by pass: pass k's
 * eight values of step j at d + k * (k1 - k0) / 4 + 8 * j. */
static inline __attribute__((always_inline)) void fl_widen(int kind, const char *src, int64_t k0, int64_t k1,
                                                           float *d) {
    const size_t es = fl_size(kind);
    const int64_t q = (k1 - k0) / 4;
    for (int64_t i = k0, j = 0; i < k1; i += 32, j += 8)
        for (int k = 0; k < 4; k++) _mm256_store_ps(d + k * q + j, fl_load8(kind, src + (size_t)(i + 8 * k) * es));
}

/* Where a block's outputs go on the last slice: out[t * out_stride + r] for row w[r] (the format's
 * row, for the steps past np) and token a + t * a_stride. */
typedef struct {
    int64_t n, np;
    const char *w[3];
    const char *a;
    size_t a_stride, out_stride;
    float *out;
} fl_out;

/* Prefetches lines [l0, l1) of a run of rows, nlines lines of each (row r's from p + r * stride). */
static inline void fl_prefetch_lines(const char *p, size_t stride, size_t nlines, size_t l0, size_t l1) {
    for (size_t l = l0; l < l1; l++) _mm_prefetch(p + (l / nlines) * stride + 64 * (l % nlines), _MM_HINT_T0);
}

/* R widened weight rows (wp[r]) by T widened tokens (ap[t]), both laid out by fl_widen over q / 8
 * steps a pass: in pass k the R x T accumulators acc_k start at zero (first) or from st[4r + t][k]
 * and end there. The weight vectors stay in registers while each activation vector is loaded once
 * for its R fmas (12 accumulators + 3 + 1 registers). On the row's last slice (fo) the outputs are
 * finished at the end of pass 3, acc_3 still in registers and acc_0..2 just stored, in L1. */
static inline __attribute__((always_inline)) void fl_block(int kind, const int R, const int T, int64_t q,
                                                           const float *const *wp, const float *const *ap,
                                                           __m256 *const *st, bool first, const fl_out *fo) {
    for (int k = 0; k < 4; k++) {
        __m256 acc[3][4];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[r][t] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st[r * 4 + t] + k));
        const int64_t o = k * q;
        for (int64_t j = 0; j < q; j += 8) {
            __m256 wv[3];
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) wv[r] = _mm256_load_ps(wp[r] + o + j);
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const __m256 av = _mm256_load_ps(ap[t] + o + j);
#pragma GCC unroll 3
                for (int r = 0; r < R; r++) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
            }
        }
        if (fo && k == 3) { /* the last slice: every output of the block finished from acc_3 in registers */
#pragma GCC unroll 3
            for (int r = 0; r < R; r++)
#pragma GCC unroll 4
                for (int t = 0; t < T; t++) {
                    const float *sv = (const float *)st[r * 4 + t];
                    fo->out[(size_t)t * fo->out_stride + (size_t)r] =
                        fl_finish(kind, fo->n, fo->np, _mm256_load_ps(sv), _mm256_load_ps(sv + 8),
                                  _mm256_load_ps(sv + 16), acc[r][t], fo->w[r], fo->a + (size_t)t * fo->a_stride);
                }
            break;
        }
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) _mm256_store_ps((float *)(st[r * 4 + t] + k), acc[r][t]);
    }
}

#define FS_BLOCK_CASES(R)                                                                                      \
    switch (T) {                                                                                               \
    case 1: fl_block(kind, R, 1, q, wp, ap, st, first, fo); break;                                             \
    case 2: fl_block(kind, R, 2, q, wp, ap, st, first, fo); break;                                             \
    case 3: fl_block(kind, R, 3, q, wp, ap, st, first, fo); break;                                             \
    default: fl_block(kind, R, 4, q, wp, ap, st, first, fo); break;                                            \
    }

/* A few tokens (nc <= 4: a server's decode step of a few sequences, a speculative draft verified):
 * the tile's packing and passes cost more than they save, and its 16-row blocks read the weights as
 * 16 interleaved runs the hardware prefetchers do not follow. Here each slice of FS_FEW_SLICE values goes
 * over every weight row in turn, its 32-value steps read once for up to two tokens at a time (four
 * accumulators each, as the dot; the second pair reads the row's slice again from L1), the
 * accumulators parked in state between slices, the slice of the row FS_AHEAD rows on prefetched
 * meanwhile. The steps of 8 and the tail follow per output as in fl_gemm. */
enum { FS_AHEAD = 8 };

static inline __attribute__((always_inline)) void fl_pair(int kind, const int T, int64_t k0, int64_t k1, const char *wr,
                                                          const float *ap, __m256 *st, bool first, const char *pf) {
    const size_t es = fl_size(kind);
    __m256 acc[2][4];
#pragma GCC unroll 2
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 4; k++) acc[t][k] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st + 4 * t + k));
    for (int64_t i = k0; i < k1; i += 32) {
        if (pf)
            for (size_t l = 0; l < es / 2; l++) _mm_prefetch(pf + (size_t)i * es + 64 * l, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            const __m256 wv = fl_load8(kind, wr + (size_t)(i + 8 * k) * es);
#pragma GCC unroll 2
            for (int t = 0; t < T; t++)
                acc[t][k] =
                    _mm256_fmadd_ps(wv, _mm256_load_ps(ap + (size_t)t * FS_FEW_SLICE + (i - k0) + 8 * k), acc[t][k]);
        }
    }
#pragma GCC unroll 2
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 4; k++) _mm256_store_ps((float *)(st + 4 * t + k), acc[t][k]);
}

/* The 32-value steps of every (row, token) into state[(r * 4 + c) * 4 + k]. */
static inline __attribute__((always_inline)) void fl_few(int kind, int64_t np, int nr, int nc, const char *w,
                                                         size_t w_stride, const char *a, size_t a_stride, float *apb,
                                                         __m256 *state) {
    const size_t es = fl_size(kind);
    for (int64_t k0 = 0; k0 < np; k0 += FS_FEW_SLICE) {
        const int64_t k1 = MF_MIN(k0 + FS_FEW_SLICE, np);
        for (int c = 0; c < nc; c++) {
            const char *ac = a + (size_t)c * a_stride;
            float *d = apb + (size_t)c * FS_FEW_SLICE;
            for (int64_t i = k0; i < k1; i += 8) _mm256_store_ps(d + (i - k0), fl_load8(kind, ac + (size_t)i * es));
        }
        for (int r = 0; r < nr; r++) {
            const char *wr = w + (size_t)r * w_stride;
            const char *pf = np > FS_FEW_SLICE && r + FS_AHEAD < nr ? wr + FS_AHEAD * w_stride : NULL;
            __m256 *st = state + (size_t)r * 16;
            if (nc == 1) fl_pair(kind, 1, k0, k1, wr, apb, st, k0 == 0, pf);
            else fl_pair(kind, 2, k0, k1, wr, apb, st, k0 == 0, pf);
            if (nc == 3) fl_pair(kind, 1, k0, k1, wr, apb + 2 * FS_FEW_SLICE, st + 8, k0 == 0, NULL);
            if (nc == 4) fl_pair(kind, 2, k0, k1, wr, apb + 2 * FS_FEW_SLICE, st + 8, k0 == 0, NULL);
        }
    }
}

static inline __attribute__((always_inline)) void fl_gemm(int kind, int64_t n, int nr, int nc, const char *w,
                                                          size_t w_stride, const char *a, size_t a_stride, float *out,
                                                          size_t out_stride) {
    float *const scratch = n > 0 && nc <= FS_NC ? thread_scratch() : NULL;
    const size_t es = fl_size(kind);
    if (!scratch) {
        for (int c = 0; c < nc; c++)
            for (int r = 0; r < nr; r++)
                out[(size_t)c * out_stride + (size_t)r] = fl_dot(kind, n, w + (size_t)r * w_stride, a + (size_t)c * a_stride);
        return;
    }
    float *const apb = scratch;
    __m256 *const state = (__m256 *)(scratch + FS_STATE_OFF); /* [row][token][k] */
    const int64_t np = n & ~(int64_t)31;
    if (nc <= 4 && (size_t)nr * 16 <= (size_t)FS_RB * FS_NC * 4) {
        fl_few(kind, np, nr, nc, w, w_stride, a, a_stride, apb, state);
        for (int r = 0; r < nr; r++) {
            const char *wr = w + (size_t)r * w_stride;
            for (int c = 0; c < nc; c++) {
                const char *ac = a + (size_t)c * a_stride;
                const __m256 *sv = state + (size_t)r * 16 + 4 * c;
                __m256 acc[4];
                for (int k = 0; k < 4; k++) acc[k] = np ? _mm256_load_ps((const float *)(sv + k)) : _mm256_setzero_ps();
                out[(size_t)c * out_stride + (size_t)r] =
                    fl_finish(kind, n, np, acc[0], acc[1], acc[2], acc[3], wr, ac);
            }
        }
        return;
    }
    float *const wpb = scratch + (size_t)FS_NC * FS_PSTRIDE; /* three widened weight rows */
    for (int rb = 0; rb < nr; rb += FS_RB) {
        const int rn = MF_MIN(FS_RB, nr - rb);
        for (int64_t k0 = 0; k0 < np; k0 += FS_SLICE) {
            const int64_t k1 = MF_MIN(k0 + FS_SLICE, np), q = (k1 - k0) / 4;
            const bool first = k0 == 0;
            for (int c = 0; c < nc; c++) fl_widen(kind, a + (size_t)c * a_stride, k0, k1, apb + (size_t)c * FS_PSTRIDE);
            for (int r0 = 0; r0 < rn; r0 += 3) {
                const int R = MF_MIN(3, rn - r0);
                const float *wp[3];
                for (int r = 0; r < R; r++) {
                    fl_widen(kind, w + (size_t)(rb + r0 + r) * w_stride, k0, k1, wpb + (size_t)r * FS_PSTRIDE);
                    wp[r] = wpb + (size_t)r * FS_PSTRIDE;
                }
                /* The next triple's slice (this block's next rows, else its first rows' next slice) is
                 * fetched meanwhile, a share of its lines per token group: widened from memory on
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
                fl_out fob = {.n = n, .np = np, .a_stride = a_stride, .out_stride = out_stride};
                for (int r = 0; r < R; r++) fob.w[r] = w + (size_t)(rb + r0 + r) * w_stride;
                for (int c0 = 0; c0 < nc; c0 += 4) {
                    const size_t pl = (size_t)(c0 / 4) * per;
                    if (pl < nall) fl_prefetch_lines(nw, w_stride, nlines, pl, MF_MIN(pl + per, nall));
                    const int T = MF_MIN(4, nc - c0);
                    const float *ap[4];
                    __m256 *st[12];
                    for (int t = 0; t < T; t++) ap[t] = apb + (size_t)(c0 + t) * FS_PSTRIDE;
                    for (int r = 0; r < R; r++)
                        for (int t = 0; t < T; t++)
                            st[r * 4 + t] = state + ((size_t)(r0 + r) * FS_NC + (size_t)(c0 + t)) * 4;
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
    if (np == 0) /* rows shorter than one 32-value step: the steps of 8 and the tail alone */
        for (int r = 0; r < nr; r++)
            for (int c = 0; c < nc; c++) {
                const __m256 z = _mm256_setzero_ps();
                out[(size_t)c * out_stride + (size_t)r] =
                    fl_finish(kind, n, 0, z, z, z, z, w + (size_t)r * w_stride, a + (size_t)c * a_stride);
            }
}
#undef FS_BLOCK_CASES

static void gemm_f32(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as, float *out, size_t os) {
    fl_gemm(FS_F32, n, nr, nc, w, ws, a, as, out, os);
}
static void gemm_f16(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as, float *out, size_t os) {
    fl_gemm(FS_F16, n, nr, nc, w, ws, a, as, out, os);
}
static void gemm_bf16(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as, float *out, size_t os) {
    fl_gemm(FS_BF16, n, nr, nc, w, ws, a, as, out, os);
}

void mf_simd_register_avx2_float(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, F32, F32, dot_f32_f32, gemm_f32);
    MF_SIMD_SET_DOT(t, F16, F16, dot_f16_f16, gemm_f16);
    MF_SIMD_SET_DOT(t, BF16, BF16, dot_bf16_bf16, gemm_bf16);
}
