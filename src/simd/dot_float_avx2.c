/* dot_float_avx2.c: AVX2 dots of the float formats (F32, F16, BF16 against the same format) and
 * their GEMM tile, which gives every (row, token) pair bit for bit the dot's value (simd.h).
 *
 * The order (dot and tile): 8-lane accumulators acc0..3; steps of 32 values put values
 * i + 8k..i + 8k + 7 into acc_k by fma; then steps of 8 into acc0; the sum hsum8((acc0 + acc1) +
 * (acc2 + acc3)); then the last n % 8 values added one at a time (fl_tail, shared).
 *
 * The tile (nr <= 128 rows x nc <= 64 tokens) register-blocks that order: one weight row against
 * three tokens, twelve accumulators, each weight vector widened once for the three tokens, the
 * activations widened to f32 once per block of 16 rows in a per-thread scratch. The work goes in
 * slices of FS_SLICE values (in order, the accumulators parked in scratch between them), so that
 * three tokens' slices (3 KB) and the 16 rows' slices (8 KB for F16) stay in L1 while the three
 * tokens pass over the rows: with whole rows the activations came from L2 at every step, which
 * capped the tile at ~20% above the dots. */
#include "simd/simd_kernels.h"
#include "simd/x86_common.h"

#include <pthread.h>
#include <stdlib.h>

enum { FS_F32, FS_F16, FS_BF16 };
enum {
    FS_SLICE = 256,      /* values per slice, a multiple of 32 */
    FS_RB = 16,          /* rows per block */
    FS_NC = 64,          /* tokens per call, at most (mf_cpu_matmul's tiles) */
    FS_AP = FS_SLICE + 32, /* floats per token in the widened slice (the last one may be 31 longer) */
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

/* The calling thread's scratch: FS_NC tokens x FS_AP widened activations, then FS_RB x FS_NC x 4
 * parked accumulators; NULL if it cannot have one (the tile then calls the dot per pair). */
#define FS_SCRATCH_FLOATS ((size_t)FS_NC * FS_AP + (size_t)FS_RB * FS_NC * 32)
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

/* One weight row w (values [k0, k1) of the n) against T tokens: widened activations ap[t] (value k0
 * first), originals a[t] (for the scalar tail). The accumulators start at zero (k0 == 0) or from
 * st[t], and end in st[t] or, when k1 == n, as the outputs *o[t]. np: the values in steps of 32. */
static inline __attribute__((always_inline)) void fl_tile(int kind, const int T, int64_t n, int64_t np, int64_t k0,
                                                          int64_t k1, const char *w, const float *const *ap,
                                                          const char *const *a, __m256 *const *st, float *const *o) {
    const size_t es = fl_size(kind);
    __m256 acc[3][4];
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 4; k++) acc[t][k] = k0 == 0 ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st[t] + k));
    int64_t i = k0;
    for (; i < MF_MIN(k1, np); i += 32)
        for (int k = 0; k < 4; k++) {
            const __m256 wk = fl_load8(kind, w + (size_t)(i + 8 * k) * es);
            for (int t = 0; t < T; t++) acc[t][k] = _mm256_fmadd_ps(wk, _mm256_loadu_ps(ap[t] + (i - k0) + 8 * k), acc[t][k]);
        }
    if (k1 < n) {
        for (int t = 0; t < T; t++)
            for (int k = 0; k < 4; k++) _mm256_store_ps((float *)(st[t] + k), acc[t][k]);
        return;
    }
    for (; i + 8 <= n; i += 8) {
        const __m256 wk = fl_load8(kind, w + (size_t)i * es);
        for (int t = 0; t < T; t++) acc[t][0] = _mm256_fmadd_ps(wk, _mm256_loadu_ps(ap[t] + (i - k0)), acc[t][0]);
    }
    for (int t = 0; t < T; t++) {
        const float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(acc[t][0], acc[t][1]), _mm256_add_ps(acc[t][2], acc[t][3])));
        *o[t] = fl_tail(kind, s, w, a[t], i, n);
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
    __m256 *const state = (__m256 *)(scratch + (size_t)FS_NC * FS_AP);
    const int64_t np = n & ~(int64_t)31;
    for (int rb = 0; rb < nr; rb += FS_RB) {
        const int rn = MF_MIN(FS_RB, nr - rb);
        for (int64_t k0 = 0; k0 < n; k0 += FS_SLICE) {
            /* the last slice takes everything past the last whole slice of 32-value steps */
            const int64_t k1 = k0 + FS_SLICE >= np ? n : k0 + FS_SLICE;
            for (int c = 0; c < nc; c++) {
                const char *ac = a + (size_t)c * a_stride;
                float *d = apb + (size_t)c * FS_AP;
                int64_t i = k0;
                for (; i + 8 <= k1; i += 8) _mm256_storeu_ps(d + (i - k0), fl_load8(kind, ac + (size_t)i * es));
                for (; i < k1; i++) d[i - k0] = fl_value(kind, ac, i);
            }
            for (int c0 = 0; c0 < nc; c0 += 3) {
                const int T = MF_MIN(3, nc - c0);
                const float *ap[3];
                const char *ar[3];
                for (int t = 0; t < T; t++) {
                    ap[t] = apb + (size_t)(c0 + t) * FS_AP;
                    ar[t] = a + (size_t)(c0 + t) * a_stride;
                }
                for (int r = 0; r < rn; r++) {
                    const char *wr = w + (size_t)(rb + r) * w_stride;
                    __m256 *st[3];
                    float *o[3];
                    for (int t = 0; t < T; t++) {
                        st[t] = state + ((size_t)r * FS_NC + (size_t)(c0 + t)) * 4;
                        o[t] = out + (size_t)(c0 + t) * out_stride + (size_t)(rb + r);
                    }
                    if (T == 3) fl_tile(kind, 3, n, np, k0, k1, wr, ap, ar, st, o);
                    else if (T == 2) fl_tile(kind, 2, n, np, k0, k1, wr, ap, ar, st, o);
                    else fl_tile(kind, 1, n, np, k0, k1, wr, ap, ar, st, o);
                }
            }
            if (k1 == n) break;
        }
    }
}

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
