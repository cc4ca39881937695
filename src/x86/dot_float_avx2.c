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
 * (twelve accumulators; per step three weight vectors widened and four activation vectors loaded
 * for twelve fmas), where four accumulators per output allowed one row by three tokens (four loads
 * per three fmas, load-bound). Activations are widened to f32 once per slice and block of 16 rows
 * in a per-thread scratch; between slices and passes the accumulators wait in scratch. The values
 * past the last whole 32-value step (steps of 8 into acc0, then the scalar tail) are added per
 * output at the end, as the dot does. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

#include <pthread.h>
#include <stdlib.h>

enum { FS_F32, FS_F16, FS_BF16 };
enum {
    FS_SLICE = 512, /* values per slice, a multiple of 32: four tokens' (8 KB) and 16 rows' (16 KB for F16) stay in L1 */
    FS_RB = 16,     /* rows per block */
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

/* The calling thread's scratch: FS_NC tokens x FS_SLICE widened activations, then FS_RB x FS_NC x 4
 * parked accumulators; NULL if it cannot have one (the tile then calls the dot per pair). */
#define FS_SCRATCH_FLOATS ((size_t)FS_NC * FS_SLICE + (size_t)FS_RB * FS_NC * 32)
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

/* R weight rows (w[r], addressed from value 0) by T tokens (widened activations ap[t], value k0
 * first) over the whole 32-value steps of [k0, k1): in pass k the R x T accumulators acc_k start at
 * zero (first) or from st[4r + t][k] and end there. */
static inline __attribute__((always_inline)) void fl_block(int kind, const int R, const int T, int64_t k0, int64_t k1,
                                                           const char *const *w, const float *const *ap,
                                                           __m256 *const *st, bool first) {
    const size_t es = fl_size(kind);
    for (int k = 0; k < 4; k++) {
        __m256 acc[3][4];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[r][t] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st[r * 4 + t] + k));
        for (int64_t i = k0; i < k1; i += 32) {
            __m256 av[4];
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) av[t] = _mm256_load_ps(ap[t] + (i - k0) + 8 * k);
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) {
                const __m256 wv = fl_load8(kind, w[r] + (size_t)(i + 8 * k) * es);
#pragma GCC unroll 4
                for (int t = 0; t < T; t++) acc[r][t] = _mm256_fmadd_ps(wv, av[t], acc[r][t]);
            }
        }
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) _mm256_store_ps((float *)(st[r * 4 + t] + k), acc[r][t]);
    }
}

#define FS_BLOCK_CASES(R)                                                                                      \
    switch (T) {                                                                                               \
    case 1: fl_block(kind, R, 1, k0, k1, wr, ap, st, first); break;                                            \
    case 2: fl_block(kind, R, 2, k0, k1, wr, ap, st, first); break;                                            \
    case 3: fl_block(kind, R, 3, k0, k1, wr, ap, st, first); break;                                            \
    default: fl_block(kind, R, 4, k0, k1, wr, ap, st, first); break;                                           \
    }

/* A few tokens (nc <= 4: a server's decode step of a few sequences, a speculative draft verified):
 * the tile's packing and passes cost more than they save, and its 16-row blocks read the weights as
 * 16 interleaved runs the hardware prefetchers do not follow. Here each slice of FS_SLICE values goes
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
                acc[t][k] = _mm256_fmadd_ps(wv, _mm256_load_ps(ap + (size_t)t * FS_SLICE + (i - k0) + 8 * k), acc[t][k]);
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
    for (int64_t k0 = 0; k0 < np; k0 += FS_SLICE) {
        const int64_t k1 = MF_MIN(k0 + FS_SLICE, np);
        for (int c = 0; c < nc; c++) {
            const char *ac = a + (size_t)c * a_stride;
            float *d = apb + (size_t)c * FS_SLICE;
            for (int64_t i = k0; i < k1; i += 8) _mm256_store_ps(d + (i - k0), fl_load8(kind, ac + (size_t)i * es));
        }
        for (int r = 0; r < nr; r++) {
            const char *wr = w + (size_t)r * w_stride;
            const char *pf = np > FS_SLICE && r + FS_AHEAD < nr ? wr + FS_AHEAD * w_stride : NULL;
            __m256 *st = state + (size_t)r * 16;
            if (nc == 1) fl_pair(kind, 1, k0, k1, wr, apb, st, k0 == 0, pf);
            else fl_pair(kind, 2, k0, k1, wr, apb, st, k0 == 0, pf);
            if (nc == 3) fl_pair(kind, 1, k0, k1, wr, apb + 2 * FS_SLICE, st + 8, k0 == 0, NULL);
            if (nc == 4) fl_pair(kind, 2, k0, k1, wr, apb + 2 * FS_SLICE, st + 8, k0 == 0, NULL);
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
    __m256 *const state = (__m256 *)(scratch + (size_t)FS_NC * FS_SLICE); /* [row][token][k] */
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
                int64_t i = np;
                for (; i + 8 <= n; i += 8)
                    acc[0] = _mm256_fmadd_ps(fl_load8(kind, wr + (size_t)i * es), fl_load8(kind, ac + (size_t)i * es), acc[0]);
                const float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
                out[(size_t)c * out_stride + (size_t)r] = fl_tail(kind, s, wr, ac, i, n);
            }
        }
        return;
    }
    for (int rb = 0; rb < nr; rb += FS_RB) {
        const int rn = MF_MIN(FS_RB, nr - rb);
        for (int64_t k0 = 0; k0 < np; k0 += FS_SLICE) {
            const int64_t k1 = MF_MIN(k0 + FS_SLICE, np);
            const bool first = k0 == 0;
            for (int c = 0; c < nc; c++) {
                const char *ac = a + (size_t)c * a_stride;
                float *d = apb + (size_t)c * FS_SLICE;
                for (int64_t i = k0; i < k1; i += 8) _mm256_store_ps(d + (i - k0), fl_load8(kind, ac + (size_t)i * es));
            }
            for (int c0 = 0; c0 < nc; c0 += 4) {
                const int T = MF_MIN(4, nc - c0);
                const float *ap[4];
                for (int t = 0; t < T; t++) ap[t] = apb + (size_t)(c0 + t) * FS_SLICE;
                for (int r0 = 0; r0 < rn; r0 += 3) {
                    const int R = MF_MIN(3, rn - r0);
                    const char *wr[3];
                    __m256 *st[12];
                    for (int r = 0; r < R; r++) {
                        wr[r] = w + (size_t)(rb + r0 + r) * w_stride;
                        for (int t = 0; t < T; t++)
                            st[r * 4 + t] = state + ((size_t)(r0 + r) * FS_NC + (size_t)(c0 + t)) * 4;
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
        /* per output: the steps of 8 past the last whole 32-value step into acc0, the sum, the tail */
        for (int r = 0; r < rn; r++) {
            const char *wr = w + (size_t)(rb + r) * w_stride;
            for (int c = 0; c < nc; c++) {
                const char *ac = a + (size_t)c * a_stride;
                const __m256 *sv = state + ((size_t)r * FS_NC + (size_t)c) * 4;
                __m256 acc[4];
                for (int k = 0; k < 4; k++) acc[k] = np ? _mm256_load_ps((const float *)(sv + k)) : _mm256_setzero_ps();
                int64_t i = np;
                for (; i + 8 <= n; i += 8)
                    acc[0] = _mm256_fmadd_ps(fl_load8(kind, wr + (size_t)i * es), fl_load8(kind, ac + (size_t)i * es), acc[0]);
                const float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
                out[(size_t)c * out_stride + (size_t)(rb + r)] = fl_tail(kind, s, wr, ac, i, n);
            }
        }
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
