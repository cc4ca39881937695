/* dot_float_avx512.c: AVX-512 dots and GEMM of the float formats (F32, F16, BF16 weights against
 * activations of the same format), in one summation order, so that every result of the GEMM equals
 * the dot's bit for bit: a token's output does not depend on the batch it is computed in.
 *
 * The order, for a row of n values (products w_k a_k, k = 0..n-1) in 16-lane vectors:
 *   chunk c = values 16c .. 16c+15 (lanes past n are zero); nch = ceil(n / 16) chunks;
 *   segments of 64 chunks (1,024 values; the last one shorter); in segment s, with chunks j = 0..m-1:
 *     a_q = 0, then a_q = fma(w_j, a_j, a_q) for the chunks j with j mod 4 = q, in increasing j;
 *     V_s = (a_0 + a_1) + (a_2 + a_3);
 *   S = V_0, then S = S + V_s for s = 1 .. nseg-1;
 *   result = tree(S): x_i = S_i + S_i+8, y_i = x_i + x_i+4, z_i = y_i + y_i+2, z_0 + z_1.
 * The dot is four accumulators over consecutive chunks (the fastest shape here: as many chains,
 * each row read in order; fewer chains or several streams per row lose up to a fifth of the decode
 * speed from DRAM). The GEMM keeps one register per output and takes the four accumulators of a
 * segment in four passes over packed copies of the operands; a 16-lane S per output waits in
 * memory between segments. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

enum { FL_F32, FL_F16, FL_BF16 };
enum { FL_SEG_CHUNKS = 64, FL_SEG = 16 * FL_SEG_CHUNKS }; /* a segment: chunks, values */

static inline __mmask16 mask16(int64_t left) { return left >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1); }

/* 16 values of a row from index i as floats (exact for every format); lanes outside m zero and not
 * read. Masked loads cost about twice a full one, so full chunks take fl_load_full. */
static inline __m512 fl_load(int kind, const void *p, int64_t i, __mmask16 m) {
    if (kind == FL_F32) return _mm512_maskz_loadu_ps(m, (const float *)p + i);
    const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)p + i);
    if (kind == FL_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
static inline __m512 fl_load_full(int kind, const void *p, int64_t i) {
    if (kind == FL_F32) return _mm512_loadu_ps((const float *)p + i);
    const __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)p + i));
    if (kind == FL_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* the final tree of one vector */
static inline float tree16(__m512 s) {
    const __m256 x = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
    __m128 y = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    y = _mm_add_ps(y, _mm_movehl_ps(y, y));
    return _mm_cvtss_f32(_mm_add_ss(y, _mm_movehdup_ps(y)));
}

/* ---- the dot --------------------------------------------------------------------------------- */

static inline __attribute__((always_inline)) float fl_dot(int kind, int64_t n, const void *w, const void *a) {
    if (n <= 0) return 0.0f;
    const int64_t nch = (n + 15) / 16, nfull = n / 16;
    __m512 s = _mm512_setzero_ps();
    for (int64_t c0 = 0; c0 < nch; c0 += FL_SEG_CHUNKS) {
        const int64_t m = MF_MIN(FL_SEG_CHUNKS, nch - c0), mf = MF_MIN(m, nfull - c0); /* chunks, full ones */
        const int64_t i0 = 16 * c0;
        __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
        int64_t j = 0;
        for (; j + 4 <= mf; j += 4)
            for (int q = 0; q < 4; q++) {
                const int64_t i = i0 + 16 * (j + q);
                acc[q] = _mm512_fmadd_ps(fl_load_full(kind, w, i), fl_load_full(kind, a, i), acc[q]);
            }
        for (; j < mf; j++) {
            const int64_t i = i0 + 16 * j;
            acc[j & 3] = _mm512_fmadd_ps(fl_load_full(kind, w, i), fl_load_full(kind, a, i), acc[j & 3]);
        }
        if (j < m) { /* the row's partial last chunk */
            const int64_t i = i0 + 16 * j;
            const __mmask16 k = mask16(n - i);
            acc[j & 3] = _mm512_fmadd_ps(fl_load(kind, w, i, k), fl_load(kind, a, i, k), acc[j & 3]);
        }
        const __m512 v = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
        s = c0 == 0 ? v : _mm512_add_ps(s, v);
    }
    return tree16(s);
}

static float dot_f32_f32(int64_t n, const void *w, const void *a) { return fl_dot(FL_F32, n, w, a); }
static float dot_f16_f16(int64_t n, const void *w, const void *a) { return fl_dot(FL_F16, n, w, a); }
static float dot_bf16_bf16(int64_t n, const void *w, const void *a) { return fl_dot(FL_BF16, n, w, a); }

/* ---- the GEMM -----------------------------------------------------------------------------------
 * Loop order: chunks of CN activation rows, blocks of RB weight rows, segments, tiles of RT weight
 * rows x CT activation rows. Buffers (f32, rows PSTRIDE floats apart: a cache line more than a
 * segment, so that a tile's rows do not share L1 sets):
 *   ap[c][k]  the chunk's activation rows over the segment, widened once per row block (260 KB, L2);
 *   wp[r][k]  a tile's RT weight rows over the segment, widened just before use (24 KB, L1);
 *   st[c][r]  the running S of every output of the block (16 floats each; 512 KB, L2), for rows of
 *             more than one segment;
 * so each weight is widened once per CN activation rows and each activation once per RB weight
 * rows. A tile computes the segment's a_q in four passes (per 16-value chunk RT + CT loads for
 * RT * CT fmas, one register per output), combines them as (a_0 + a_1) + (a_2 + a_3) through a
 * small buffer and adds V into st; at the row's last segment it reduces S itself and stores the
 * results (rows of at most 1,024 values never touch st). ap and st are one buffer per thread,
 * allocated at its first GEMM and freed when the thread exits. */
enum { RT = 6, CT = 4, RB = 128, CN = 64, PSTRIDE = FL_SEG + 16 };
#define FL_SCRATCH_FLOATS ((size_t)CN * PSTRIDE + (size_t)RB * CN * 16)

/* tree(v[i]) in lane i, for 16 vectors at once: each add is one level of the tree of tree16 for 2,
 * 4, 8, then 16 outputs. Slot 4m + l gets vector 4l + m, which puts vector i's result in lane i. */
static inline __m512 reduce16(const __m512 v[16]) {
    __m512 t[8], u[4], z[2];
    for (int i = 0; i < 8; i++) {
        const int p = 2 * i, q = 2 * i + 1; /* slots */
        const __m512 a = v[4 * (p % 4) + p / 4], b = v[4 * (q % 4) + q / 4];
        t[i] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE)); /* x: 8 + 8 */
    }
    for (int i = 0; i < 4; i++) /* y: four lanes for each of four outputs */
        u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0x88),
                             _mm512_shuffle_f32x4(t[2 * i], t[2 * i + 1], 0xDD));
    for (int i = 0; i < 2; i++) { /* z: two lanes per output */
        const __m512d a = _mm512_castps_pd(u[2 * i]), b = _mm512_castps_pd(u[2 * i + 1]);
        z[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
    }
    return _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88), _mm512_shuffle_ps(z[0], z[1], 0xDD));
}

/* out[c * os + r] = tree(f[c * RT + r]) for the tile's R x C outputs: rows 0-3 and 4-5 of the C
 * activation rows, 16 outputs per reduction (activation row c, row h + i in lane 4c + i) */
static inline __attribute__((always_inline)) void fl_finish(int R, int C, const __m512 *f, float *out, size_t os) {
    for (int h = 0; h < R; h += 4) {
        __m512 x[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++) x[i] = i / 4 < C && h + i % 4 < R ? f[(i / 4) * RT + h + i % 4] : _mm512_setzero_ps();
        const __m512 res = reduce16(x);
        const unsigned rows = (1u << MF_MIN(4, R - h)) - 1;
#pragma GCC unroll 4
        for (int c = 0; c < C; c++) _mm512_mask_compressstoreu_ps(out + (size_t)c * os + h, (__mmask16)(rows << (4 * c)), res);
    }
}

/* v[r][c] = a_q over the segment's m chunks: those j with j mod 4 = q, weight row r at
 * wp + r * PSTRIDE, activation row c at ap + c * PSTRIDE (zero-padded past n) */
static inline __attribute__((always_inline)) void fl_pass(int R, int C, int64_t m, int q, const float *wp,
                                                          const float *ap, __m512 v[RT][CT]) {
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) v[r][c] = _mm512_setzero_ps();
    const float *wj = wp + 16 * q, *aj = ap + 16 * q;
    for (int64_t j = q; j < m; j += 4, wj += 64, aj += 64) {
        __m512 x[CT];
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) x[c] = _mm512_load_ps(aj + c * PSTRIDE);
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512 wv = _mm512_load_ps(wj + r * PSTRIDE);
#pragma GCC unroll 8
            for (int c = 0; c < C; c++) v[r][c] = _mm512_fmadd_ps(wv, x[c], v[r][c]);
        }
    }
}

/* V of one segment for the tile's outputs, added into S at st + (c * RB + r) * 16 (stored there for
 * the row's first segment); after the row's last segment (out not NULL) S goes through the tree into
 * out[c * os + r] instead. */
static inline __attribute__((always_inline)) void fl_tile(int R, int C, int64_t m, const float *wp, const float *ap,
                                                          bool first, float *st, float *out, size_t os) {
    _Alignas(64) float t01[RT * CT * 16], t2[RT * CT * 16];
    __m512 f[RT * CT];
    __m512 v[RT][CT];
    fl_pass(R, C, m, 0, wp, ap, v);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) _mm512_store_ps(t01 + (r * CT + c) * 16, v[r][c]);
    fl_pass(R, C, m, 1, wp, ap, v);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) {
            float *t = t01 + (r * CT + c) * 16;
            _mm512_store_ps(t, _mm512_add_ps(_mm512_load_ps(t), v[r][c]));
        }
    fl_pass(R, C, m, 2, wp, ap, v);
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int c = 0; c < C; c++) _mm512_store_ps(t2 + (r * CT + c) * 16, v[r][c]);
    fl_pass(R, C, m, 3, wp, ap, v);
#pragma GCC unroll 8
    for (int c = 0; c < C; c++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            const __m512 a23 = _mm512_add_ps(_mm512_load_ps(t2 + (r * CT + c) * 16), v[r][c]);
            const __m512 vs = _mm512_add_ps(_mm512_load_ps(t01 + (r * CT + c) * 16), a23);
            float *o = st + ((size_t)c * RB + (size_t)r) * 16;
            f[c * RT + r] = first ? vs : _mm512_add_ps(_mm512_load_ps(o), vs);
            if (!out) _mm512_store_ps(o, f[c * RT + r]);
        }
    if (out) fl_finish(R, C, f, out, os);
}

typedef void (*fl_tile_fn)(int64_t m, const float *wp, const float *ap, bool first, float *st, float *out, size_t os);
#define FL_TILE(R, C)                                                                                  \
    static void fl_tile_##R##_##C(int64_t m, const float *wp, const float *ap, bool first, float *st, float *out, \
                                  size_t os) {                                                         \
        fl_tile(R, C, m, wp, ap, first, st, out, os);                                                  \
    }
#define FL_TILE_ROW(R) FL_TILE(R, 1) FL_TILE(R, 2) FL_TILE(R, 3) FL_TILE(R, 4)
FL_TILE_ROW(1) FL_TILE_ROW(2) FL_TILE_ROW(3) FL_TILE_ROW(4) FL_TILE_ROW(5) FL_TILE_ROW(6)
#define FL_TILE_ENTRY(R) {NULL, fl_tile_##R##_1, fl_tile_##R##_2, fl_tile_##R##_3, fl_tile_##R##_4}
static const fl_tile_fn fl_tiles[RT + 1][CT + 1] = {{NULL}, FL_TILE_ENTRY(1), FL_TILE_ENTRY(2), FL_TILE_ENTRY(3),
                                                    FL_TILE_ENTRY(4), FL_TILE_ENTRY(5), FL_TILE_ENTRY(6)};

/* dst[16j ..] <- values k0 + 16j .. of row p as floats, j < m, zeros past n */
static inline void fl_widen(int kind, const char *p, int64_t n, int64_t k0, int64_t m, float *dst) {
    const int64_t full = MF_MIN(m, (n - k0) / 16);
    for (int64_t j = 0; j < full; j++) _mm512_store_ps(dst + 16 * j, fl_load_full(kind, p, k0 + 16 * j));
    for (int64_t j = full; j < m; j++) _mm512_store_ps(dst + 16 * j, fl_load(kind, p, k0 + 16 * j, mask16(n - k0 - 16 * j)));
}

/* values k0 .. k0+kv-1 of rows [r0, r1) (es bytes each) into L2 */
static inline void fl_prefetch(const char *p, size_t stride, int r0, int r1, int64_t k0, int64_t kv, size_t es) {
    for (int r = r0; r < r1; r++)
        for (size_t off = (size_t)k0 * es; off < (size_t)(k0 + kv) * es; off += 64) _mm_prefetch(p + (size_t)r * stride + off, _MM_HINT_T1);
}

/* The calling thread's ap + st (FL_SCRATCH_FLOATS floats, 64-byte aligned), NULL if it cannot have one. */
static float *thread_scratch(void) { return mf_x86_thread_scratch(FL_SCRATCH_FLOATS * sizeof(float)); }

/* A few activation rows (C <= FL_FEW: a server's decode step of a few sequences, a speculative draft
 * verified): each weight row is read once, in order, as the dot reads it, every chunk widened once for
 * up to four of the C rows, against activations widened once per call (zeros past n); per (weight
 * row, activation row) fl_dot's four accumulators, segments and tree, so each output is the dot's bit
 * for bit. The GEMM's packing and four passes cost more than they save here (F16, 1536 x 576, 2
 * threads, weights from memory: 2 tokens 0.080 ms against 0.041 for one). */

/* One segment of weight row wr (chunks from value i0: m of them, mf full) against C activation rows
 * (row c at ap + c * stride, indexed like the weights from i0 on): V of each in v[c]. pf: the same
 * bytes of the next row to prefetch meanwhile, or NULL. */
static inline __attribute__((always_inline)) void fl_seg_few(int kind, const int C, int64_t n, const char *wr,
                                                             int64_t i0, int64_t m, int64_t mf, const float *ap,
                                                             size_t stride, const char *pf, size_t es, __m512 v[4]) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) acc[c][0] = acc[c][1] = acc[c][2] = acc[c][3] = _mm512_setzero_ps();
    int64_t j = 0;
    for (; j + 4 <= mf; j += 4) {
        if (pf) /* the next four chunks' bytes of the row ahead: es lines */
            for (size_t l = 0; l < es; l++) _mm_prefetch(pf + (size_t)(i0 + 16 * j) * es + 64 * l, _MM_HINT_T0);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            const int64_t i = i0 + 16 * (j + q);
            const __m512 wv = fl_load_full(kind, wr, i);
#pragma GCC unroll 4
            for (int c = 0; c < C; c++)
                acc[c][q] = _mm512_fmadd_ps(wv, _mm512_load_ps(ap + (size_t)c * stride + 16 * (j + q)), acc[c][q]);
        }
    }
    for (; j < m; j++) { /* the last full chunks, then the row's partial one */
        const int64_t i = i0 + 16 * j;
        const __m512 wv = j < mf ? fl_load_full(kind, wr, i) : fl_load(kind, wr, i, mask16(n - i));
#pragma GCC unroll 4
        for (int c = 0; c < C; c++)
            acc[c][j & 3] = _mm512_fmadd_ps(wv, _mm512_load_ps(ap + (size_t)c * stride + 16 * j), acc[c][j & 3]);
    }
#pragma GCC unroll 4
    for (int c = 0; c < C; c++) v[c] = _mm512_add_ps(_mm512_add_ps(acc[c][0], acc[c][1]), _mm512_add_ps(acc[c][2], acc[c][3]));
}

/* Rows of one segment (up to 4 KB of activations each): row after row, each whole. Longer rows go
 * a segment at a time over all the weight rows, so that the activations' segment stays in L1 beside
 * the streaming weights (C rows of 4,864 values widened whole would not: 896 x 4864, 2 tokens, 0.69
 * ms against 0.26 for one), each output's S kept in st between segments, the next row's run of the
 * segment prefetched FL_AHEAD rows ahead (runs of 2 KB that the hardware prefetchers pick up late;
 * one row ahead is shorter than the memory's latency: 896 x 4864, 2 tokens, 1 thread, rows 1, 2, 4,
 * 8 ahead: 0.48, 0.40, 0.39, 0.36 ms). */
/* FL_FEW: the most tokens that go this way, four at a time over each row (the later ones read it
 * from L1); the GEMM is ahead from 8 on (bench_gemm --cold f16, 2 threads, 4864 x 896 / 896 x 4864:
 * 5 tokens 0.37 / 0.54 against 0.67 / 0.72 ms, 7 tokens 0.78 against 0.94, 8 tokens 0.89 / 0.85
 * against 0.82 / 0.84). */
enum { FL_AHEAD = 8, FL_FEW = 7 };
static inline __attribute__((always_inline)) void fl_rows_few(int kind, const int C, int64_t n, int nr, const char *w,
                                                              size_t w_stride, const char *a, size_t a_stride,
                                                              float *ap, float *st, float *out, size_t out_stride) {
    const int64_t nch = (n + 15) / 16, nfull = n / 16;
    const size_t es = kind == FL_F32 ? 4 : 2;
    for (int64_t c0 = 0; c0 < nch; c0 += FL_SEG_CHUNKS) {
        const int64_t m = MF_MIN(FL_SEG_CHUNKS, nch - c0), mf = MF_MIN(m, nfull - c0), i0 = 16 * c0;
        const bool first = c0 == 0, last = c0 + FL_SEG_CHUNKS >= nch;
        for (int c = 0; c < C; c++) fl_widen(kind, a + (size_t)c * a_stride, n, i0, m, ap + (size_t)c * PSTRIDE);
        for (int r = 0; r < nr; r++) {
            const char *wr = w + (size_t)r * w_stride;
            const char *pf = first && last ? NULL : r + FL_AHEAD < nr ? wr + FL_AHEAD * w_stride : NULL;
            for (int t0 = 0; t0 < C; t0 += 4) { /* four tokens at a time; the later ones read the row from L1 */
                __m512 v[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
                const float *at = ap + (size_t)t0 * PSTRIDE;
                const int ct = MF_MIN(4, C - t0);
                switch (ct) {
                case 1: fl_seg_few(kind, 1, n, wr, i0, m, mf, at, PSTRIDE, pf, es, v); break;
                case 2: fl_seg_few(kind, 2, n, wr, i0, m, mf, at, PSTRIDE, pf, es, v); break;
                case 3: fl_seg_few(kind, 3, n, wr, i0, m, mf, at, PSTRIDE, pf, es, v); break;
                default: fl_seg_few(kind, 4, n, wr, i0, m, mf, at, PSTRIDE, pf, es, v); break;
                }
                pf = NULL;
#pragma GCC unroll 4
                for (int c = 0; c < ct; c++) {
                    float *o = st + ((size_t)(t0 + c) * RB + (size_t)r) * 16;
                    const __m512 sv = first ? v[c] : _mm512_add_ps(_mm512_load_ps(o), v[c]);
                    if (last) out[(size_t)(t0 + c) * out_stride + (size_t)r] = tree16(sv);
                    else _mm512_store_ps(o, sv);
                }
            }
        }
    }
}

static void fl_gemm(int kind, int64_t n, int nr, int nc, const char *w, size_t w_stride, const char *a, size_t a_stride,
                    float *out, size_t out_stride) {
    float *const scratch = n > 0 ? thread_scratch() : NULL;
    if (!scratch) { /* no scratch (or nothing to sum): the dots give the same results */
        for (int c = 0; c < nc; c++)
            for (int r = 0; r < nr; r++)
                out[(size_t)c * out_stride + (size_t)r] = fl_dot(kind, n, w + (size_t)r * w_stride, a + (size_t)c * a_stride);
        return;
    }
    float *const ap = scratch, *const st = scratch + (size_t)CN * PSTRIDE;
    const int64_t nch = (n + 15) / 16;
    if (nc <= FL_FEW && nr <= RB) {
        switch (nc) {
        case 1: fl_rows_few(kind, 1, n, nr, w, w_stride, a, a_stride, ap, st, out, out_stride); break;
        case 2: fl_rows_few(kind, 2, n, nr, w, w_stride, a, a_stride, ap, st, out, out_stride); break;
        case 3: fl_rows_few(kind, 3, n, nr, w, w_stride, a, a_stride, ap, st, out, out_stride); break;
        case 4: fl_rows_few(kind, 4, n, nr, w, w_stride, a, a_stride, ap, st, out, out_stride); break;
        default: fl_rows_few(kind, nc, n, nr, w, w_stride, a, a_stride, ap, st, out, out_stride); break;
        }
        return;
    }
    _Alignas(64) float wp[RT * PSTRIDE];
    const size_t es = kind == FL_F32 ? 4 : 2;
    for (int cc = 0; cc < nc; cc += CN) {
        const int cn = MF_MIN(CN, nc - cc);
        const char *ac = a + (size_t)cc * a_stride;
        for (int rb = 0; rb < nr; rb += RB) {
            const int rbn = MF_MIN(RB, nr - rb);
            for (int64_t c0 = 0; c0 < nch; c0 += FL_SEG_CHUNKS) {
                const int64_t k0 = 16 * c0, m = MF_MIN(FL_SEG_CHUNKS, nch - c0);
                const bool last = c0 + FL_SEG_CHUNKS >= nch;
                for (int c = 0; c < cn; c++) fl_widen(kind, ac + (size_t)c * a_stride, n, k0, m, ap + (size_t)c * PSTRIDE);
                for (int r0 = 0; r0 < rbn; r0 += RT) {
                    const int rn = MF_MIN(RT, rbn - r0);
                    const char *wr = w + (size_t)(rb + r0) * w_stride;
                    for (int r = 0; r < rn; r++) fl_widen(kind, wr + (size_t)r * w_stride, n, k0, m, wp + (size_t)r * PSTRIDE);
                    /* the next tile's rows, read in runs the hardware prefetchers do not follow */
                    if (r0 + RT < rbn) fl_prefetch(wr, w_stride, RT, MF_MIN(2 * RT, rbn - r0), k0, 16 * m, es);
                    for (int t0 = 0; t0 < cn; t0 += CT) {
                        float *o = last ? out + (size_t)(cc + t0) * out_stride + (size_t)(rb + r0) : NULL;
                        fl_tiles[rn][MF_MIN(CT, cn - t0)](m, wp, ap + (size_t)t0 * PSTRIDE, c0 == 0,
                                                          st + ((size_t)t0 * RB + (size_t)r0) * 16, o, out_stride);
                    }
                }
            }
        }
    }
}

static void gemm_f32(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as, float *out, size_t os) {
    fl_gemm(FL_F32, n, nr, nc, w, ws, a, as, out, os);
}
static void gemm_f16(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as, float *out, size_t os) {
    fl_gemm(FL_F16, n, nr, nc, w, ws, a, as, out, os);
}
static void gemm_bf16(int64_t n, int nr, int nc, const void *w, size_t ws, const void *a, size_t as, float *out, size_t os) {
    fl_gemm(FL_BF16, n, nr, nc, w, ws, a, as, out, os);
}

void mf_simd_register_avx512_float(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, F32, F32, dot_f32_f32, gemm_f32);
    MF_SIMD_SET_DOT(t, F16, F16, dot_f16_f16, gemm_f16);
    MF_SIMD_SET_DOT(t, BF16, BF16, dot_bf16_bf16, gemm_bf16);
}
