/* cpu_attn_avx512.c: AVX-512 attention kernels: the blockwise (flash) tile of cpu_attn.h with
 * 16 query rows per vector, and the F32-cache attention in llama.cpp's float order, bit-identical
 * to mf_cpu_attention_ordered_ref but vectorized across cells and dimensions. */
#include "x86/cpu_exp_avx512.h"
#include "cpu/cpu_attn.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>


void mf_cpu_attn_exp16_avx512(const float *x, float *y) { _mm512_storeu_ps(y, mf_exp_ord16(_mm512_loadu_ps(x))); }

/* ---- blockwise tile ----
 * Per cell tile (bc cells, converted once to F32 rows kf/vf of hdp = hd rounded up to 16 floats):
 *   scores  s[c][r] = sum_d k[c][d] * qt[d][r]    (qt: the rows' queries times scale, d-major, 16 nrv wide;
 *                                                  lanes are rows, so the softmax needs no shuffles)
 *   online  mt = max_c s, mn = max(m, mt), p[c][r] = exp(s - mn), l = l * exp(m - mn) + sum_c p
 *   output  o[r][d] = o[r][d] * exp(m - mn) + sum_c p[c][r] * v[c][d]   (lanes are dimensions)
 * Masked cells get s = -inf, so p = 0 exactly; a row that sees nothing in a tile is left as it was. */

/* s[c][0..16 nrv) for cells [c0, c0 + 8): 8 cells x nrv row vectors of accumulators; qt rows
 * are 16 nrv floats, s rows 32. */
static inline __attribute__((always_inline)) void scores8(const float *kf, int64_t hdp, int64_t hd,
                                                          const float *qt, int nrv, float *s) {
    __m512 a0[8], a1[8];
    for (int i = 0; i < 8; i++) a0[i] = a1[i] = _mm512_setzero_ps();
    if (nrv == 2) {
        for (int64_t d = 0; d < hd; d++) {
            const __m512 q0 = _mm512_load_ps(qt + d * 32), q1 = _mm512_load_ps(qt + d * 32 + 16);
            for (int i = 0; i < 8; i++) {
                const __m512 k = _mm512_set1_ps(kf[i * hdp + d]);
                a0[i] = _mm512_fmadd_ps(k, q0, a0[i]);
                a1[i] = _mm512_fmadd_ps(k, q1, a1[i]);
            }
        }
        for (int i = 0; i < 8; i++) _mm512_store_ps(s + i * 32 + 16, a1[i]);
    } else {
        for (int64_t d = 0; d < hd; d++) {
            const __m512 q0 = _mm512_load_ps(qt + d * 16);
            for (int i = 0; i < 8; i++) a0[i] = _mm512_fmadd_ps(_mm512_set1_ps(kf[i * hdp + d]), q0, a0[i]);
        }
    }
    for (int i = 0; i < 8; i++) _mm512_store_ps(s + i * 32, a0[i]);
}

/* o[r0 + i][d0 + 16 j] += sum_c p(c, r0 + i) * v[c][d0 + 16 j], i < 4, j < nd, c < nc8, with
 * p(c, r) = p[c * cs + r * rs] (the wide tile's cells x rows, the few-row tile's rows x cells). */
static inline __attribute__((always_inline)) void pv_block(float *o, int64_t hdp, const float *p, const int cs,
                                                           const int rs, const float *vf, int nc8, int r0, int64_t d0,
                                                           int nd) {
    __m512 acc[4][4];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < nd; j++) acc[i][j] = _mm512_load_ps(o + (r0 + i) * hdp + d0 + 16 * j);
    for (int c = 0; c < nc8; c++) {
        __m512 v[4];
        for (int j = 0; j < nd; j++) v[j] = _mm512_load_ps(vf + c * hdp + d0 + 16 * j);
        for (int i = 0; i < 4; i++) {
            const __m512 pc = _mm512_set1_ps(p[c * cs + (r0 + i) * rs]);
            for (int j = 0; j < nd; j++) acc[i][j] = _mm512_fmadd_ps(pc, v[j], acc[i][j]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < nd; j++) _mm512_store_ps(o + (r0 + i) * hdp + d0 + 16 * j, acc[i][j]);
}

/* o += p . V for rows [0, nr4) (a multiple of 4), four rows and up to 64 dimensions at a time. */
static inline __attribute__((always_inline)) void pv_rows(float *o, int64_t hdp, const float *p, const int cs,
                                                          const int rs, const float *vf, int nc8, int nr4) {
    for (int r0 = 0; r0 < nr4; r0 += 4) {
        int64_t d0 = 0;
        for (; d0 + 64 <= hdp; d0 += 64) pv_block(o, hdp, p, cs, rs, vf, nc8, r0, d0, 4);
        switch ((hdp - d0) / 16) {
        case 3: pv_block(o, hdp, p, cs, rs, vf, nc8, r0, d0, 3); break;
        case 2: pv_block(o, hdp, p, cs, rs, vf, nc8, r0, d0, 2); break;
        case 1: pv_block(o, hdp, p, cs, rs, vf, nc8, r0, d0, 1); break;
        default: break;
        }
    }
}

/* Rows whose max grew (alpha[r] < 1; exactly 1 otherwise) rescaled. */
static void rescale_rows(float *o, int64_t hdp, const float *alpha, int nr) {
    for (int r = 0; r < nr; r++) {
        if (alpha[r] == 1.0f) continue;
        const __m512 a = _mm512_set1_ps(alpha[r]);
        for (int64_t d = 0; d < hdp; d += 16)
            _mm512_store_ps(o + r * hdp + d, _mm512_mul_ps(a, _mm512_load_ps(o + r * hdp + d)));
    }
}

/* out rows = o rows / their sums (0 where a row saw nothing). */
static void finish_rows(const float *o, int64_t hdp, const float *lsum, const int64_t *rows, int nr, int64_t hd,
                        float *out) {
    const int64_t nfull = hd & ~(int64_t)15;
    const __mmask16 tail = (__mmask16)((1u << (hd & 15)) - 1);
    for (int r = 0; r < nr; r++) {
        const __m512 inv = _mm512_set1_ps(lsum[r] > 0.0f ? 1.0f / lsum[r] : 0.0f);
        float *y = out + rows[r] * hd;
        for (int64_t d = 0; d < nfull; d += 16) _mm512_storeu_ps(y + d, _mm512_mul_ps(_mm512_load_ps(o + r * hdp + d), inv));
        if (tail) _mm512_mask_storeu_ps(y + nfull, tail, _mm512_mul_ps(_mm512_load_ps(o + r * hdp + nfull), inv));
    }
}

/* 16 x 16 transpose: x[i][j] -> x[j][i] (pairs, then quads within 128-bit lanes, then lanes). */
static inline void transpose16(__m512 *x) {
    __m512 t[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]);
    }
    for (int i = 0; i < 4; i++) {
        x[4 * i] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        x[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        x[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        x[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        t[j] = _mm512_shuffle_f32x4(x[j], x[4 + j], 0x88);
        t[4 + j] = _mm512_shuffle_f32x4(x[j], x[4 + j], 0xDD);
        t[8 + j] = _mm512_shuffle_f32x4(x[8 + j], x[12 + j], 0x88);
        t[12 + j] = _mm512_shuffle_f32x4(x[8 + j], x[12 + j], 0xDD);
    }
    for (int j = 0; j < 4; j++) {
        x[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        x[4 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0x88);
        x[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xDD);
        x[12 + j] = _mm512_shuffle_f32x4(t[4 + j], t[12 + j], 0xDD);
    }
}

/* K or V rows of cells[0..n) of head kvh as F32 rows of hdp floats (zeros past hd), rows n..n8 zero. */
static void load_tile(const mf_kv_cache *kv, const uint8_t *region, const int32_t *cells, int n, int n8, int32_t kvh,
                      int64_t hd, int64_t hdp, float *dst) {
    const int64_t nfull = hd & ~(int64_t)15;
    const __mmask16 tail = (__mmask16)((1u << (hd & 15)) - 1);
    for (int c = 0; c < n; c++) {
        const uint8_t *row = region + (size_t)cells[c] * kv->row_bytes;
        float *y = dst + c * hdp;
        if (kv->type == MF_TYPE_F32) {
            const float *x = (const float *)row + kvh * hd;
            for (int64_t d = 0; d < nfull; d += 16) _mm512_store_ps(y + d, _mm512_loadu_ps(x + d));
            if (tail) _mm512_store_ps(y + nfull, _mm512_maskz_loadu_ps(tail, x + nfull));
        } else {
            const mf_fp16 *x = (const mf_fp16 *)row + kvh * hd;
            for (int64_t d = 0; d < nfull; d += 16)
                _mm512_store_ps(y + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + d))));
            if (tail)
                _mm512_store_ps(y + nfull, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail, x + nfull)));
        }
    }
    if (n8 > n) memset(dst + n * hdp, 0, (size_t)(n8 - n) * (size_t)hdp * sizeof(float));
}

/* ---- the same tile for a few rows ----
 * A decode step's tile holds one token's GQA group: 1 to 4 rows in many models (MHA, Llama 3's 4,
 * SmolLM2's 3). With rows as lanes most of a score vector's 16 lanes would be idle, and every score
 * step broadcast a K value. With at most 4 rows the scores take cells as lanes instead: the K tile
 * transposed in chunks of 16 cells, four chunks against each row's query vector at d. Every float
 * step is the wide tile's, value by value: a score is the same fma chain over d, the exps are
 * lane-wise, each row's sum adds its cells one at a time in order, o += p . V reads p per row; the
 * maxima are exact whatever the grouping. So a row's bits do not depend on which tile ran it
 * (test_cpu_attn: 4- and 8-row tiles against the wide ones, and random splits).
 * bench_attn --nt 1, one thread, Zen 4, ms a layer: 3 rows (SmolLM2: --nh 9 --nkv 3, depth 1000,
 * 30 layers' caches) 0.145 -> 0.115; 4 rows of 128 (Llama 3 8B, depth 4096, 8 layers) 4.58 -> 4.05;
 * 1 row of 128 (MHA, 32 heads, depth 2048, 4 layers) 8.5 -> 7.2; in cache, 3 rows at depth 300
 * 0.036 -> 0.026. With 5 to 8 rows (the 0.5B's 7) it measured level in cache and 14 % slower with
 * the caches coming from memory, so the wide tile keeps those. */

/* The K tile (ce8 rows of hdp floats) in chunks of 16 cells: chunk h holds, for each d < hdp, the
 * chunk's 16 cells' values at d (cells past ce8 zero). */
static void transpose_tile(const float *kf, int ce8, int64_t hdp, float *kT) {
    for (int c0 = 0; c0 < ce8; c0 += 16) {
        float *ch = kT + (size_t)c0 * hdp;
        for (int64_t d0 = 0; d0 < hdp; d0 += 16) {
            __m512 x[16];
            for (int i = 0; i < 16; i++)
                x[i] = c0 + i < ce8 ? _mm512_load_ps(kf + (c0 + i) * hdp + d0) : _mm512_setzero_ps();
            transpose16(x);
            for (int i = 0; i < 16; i++) _mm512_store_ps(ch + (d0 + i) * 16, x[i]);
        }
    }
}

/* Scores of NR rows against CH chunks of 16 cells (kT at the first): s[r][16 h + i] = sum_d
 * k[16 h + i][d] * q[r][d], one fma chain over d each; s rows are 64 floats. The queries come as
 * whole vectors, qb[d][r] (each row's value at d in all 16 lanes): the fma reads them from memory,
 * where a broadcast per step would cost an instruction of its own. */
static inline __attribute__((always_inline)) void scores_cells(const int NR, const int CH, const float *kT,
                                                               int64_t hdp, int64_t hd, const float *qb, float *s) {
    __m512 acc[4][4];
    for (int r = 0; r < NR; r++)
        for (int h = 0; h < CH; h++) acc[r][h] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d++) {
        __m512 k[4];
        for (int h = 0; h < CH; h++) k[h] = _mm512_load_ps(kT + (size_t)h * 16 * hdp + d * 16);
        for (int r = 0; r < NR; r++) {
            const __m512 qv = _mm512_load_ps(qb + (d * NR + r) * 16);
            for (int h = 0; h < CH; h++) acc[r][h] = _mm512_fmadd_ps(k[h], qv, acc[r][h]);
        }
    }
    for (int r = 0; r < NR; r++)
        for (int h = 0; h < CH; h++) _mm512_store_ps(s + r * 64 + 16 * h, acc[r][h]);
}

/* All chunks of a tile (n16 of them) for nr = NR rows, four at a time (NR x 4 accumulators); before
 * each, as many cells of the next tile (from nx) are asked for. */
static inline __attribute__((always_inline)) void scores_rows(const int NR, const mf_attn_params *ap,
                                                              const mf_kv_cache *kv, const int32_t *list, int32_t nx,
                                                              int32_t nmax, int32_t kvh, const float *kT, int n16,
                                                              int64_t hdp, int64_t hd, const float *qb, float *s) {
    const int CH = 4;
    int h = 0;
    for (; h + CH <= n16; h += CH) {
        mf_cpu_attn_prefetch(kv, ap->layer, list, nx + 16 * h, MF_MIN(nx + 16 * (h + CH), nmax), kvh, hd);
        scores_cells(NR, CH, kT + (size_t)h * 16 * hdp, hdp, hd, qb, s + 16 * h);
    }
    for (; h < n16; h++) {
        mf_cpu_attn_prefetch(kv, ap->layer, list, nx + 16 * h, MF_MIN(nx + 16 * (h + 1), nmax), kvh, hd);
        scores_cells(NR, 1, kT + (size_t)h * 16 * hdp, hdp, hd, qb, s + 16 * h);
    }
}

/* The few-row tile's query vectors: 16 floats per row and dimension (4 rows of 128, or fewer rows
 * of a longer head: tile_few's condition), a tile buffer's size. */
#define MF_ATTN_FEW_Q (16 * 512)

static void tile_few(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int32_t kvh,
                     const int64_t *rows, int nr) {
    const int64_t hd = ap->head_dim, nh = ap->n_head, hdp = (hd + 15) & ~(int64_t)15;
    const int bc = mf_cpu_attn_tile_cells(hd), nr4 = (nr + 3) & ~3;
    const int32_t *list = kv->view.list[rows[0] / nh];
    _Alignas(64) float kf[MF_ATTN_TILE_FLOATS], kT[MF_ATTN_TILE_FLOATS], vf[MF_ATTN_TILE_FLOATS],
        qd[MF_ATTN_FEW_Q], o[MF_ATTN_TILE_FLOATS], sp[4 * 64], lane[16];
    int32_t rn[4], nmax = 0;
    float m[4], l[4];
    for (int r = 0; r < nr; r++) {
        rn[r] = kv->view.n[rows[r] / nh];
        nmax = MF_MAX(nmax, rn[r]);
        m[r] = -INFINITY, l[r] = 0.0f;
    }
    for (int64_t d = 0; d < hd; d++)
        for (int r = 0; r < nr; r++) _mm512_store_ps(qd + (d * nr + r) * 16, _mm512_set1_ps(q[rows[r] * hd + d] * ap->scale));
    memset(o, 0, (size_t)nr4 * (size_t)hdp * sizeof(float));
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int32_t j0 = 0; j0 < nmax; j0 += bc) {
        const int ce = (int)MF_MIN(bc, nmax - j0), ce8 = (ce + 7) & ~7, n16 = (ce8 + 15) / 16;
        load_tile(kv, kv->k[ap->layer], list + j0, ce, ce8, kvh, hd, hdp, kf);
        load_tile(kv, kv->v[ap->layer], list + j0, ce, ce8, kvh, hd, hdp, vf);
        transpose_tile(kf, ce8, hdp, kT);
        switch (nr) {
        case 1: scores_rows(1, ap, kv, list, j0 + bc, nmax, kvh, kT, n16, hdp, hd, qd, sp); break;
        case 2: scores_rows(2, ap, kv, list, j0 + bc, nmax, kvh, kT, n16, hdp, hd, qd, sp); break;
        case 3: scores_rows(3, ap, kv, list, j0 + bc, nmax, kvh, kT, n16, hdp, hd, qd, sp); break;
        default: scores_rows(4, ap, kv, list, j0 + bc, nmax, kvh, kT, n16, hdp, hd, qd, sp); break;
        }
        /* per row: mask, maximum, p = exp(s - mu) and the sum of the ce8 cells in order */
        _Alignas(64) float dm[16] = {0};
        float sums[4];
        for (int r = 0; r < nr; r++) {
            float *sr = sp + r * 64;
            const int vis = (int)MF_MAX(0, MF_MIN(ce, rn[r] - j0)); /* cells [0, vis) of the tile */
            __m512 mt = ninf;
            for (int c = 0; c < ce8; c += 16) {
                const __mmask16 k = _mm512_cmplt_epi32_mask(_mm512_add_epi32(iota, _mm512_set1_epi32(c)),
                                                            _mm512_set1_epi32(vis));
                const __m512 x = _mm512_mask_mov_ps(ninf, k, _mm512_load_ps(sr + c));
                _mm512_store_ps(sr + c, x);
                mt = _mm512_max_ps(mt, x);
            }
            const float mn = fmaxf(m[r], _mm512_reduce_max_ps(mt));
            const float mu = mn == -INFINITY ? 0.0f : mn; /* rows that have seen nothing keep p at 0 */
            dm[r] = m[r] - mu;
            m[r] = mn;
            const __m512 muv = _mm512_set1_ps(mu);
            for (int c = 0; c < ce8; c += 16) _mm512_store_ps(sr + c, mf_exp_ord16(_mm512_sub_ps(_mm512_load_ps(sr + c), muv)));
            float sum = 0.0f;
            for (int c = 0; c < ce8; c++) sum += sr[c];
            sums[r] = sum;
        }
        _mm512_store_ps(lane, mf_exp_ord16(_mm512_load_ps(dm))); /* alpha, lane-wise as the wide tile's */
        for (int r = 0; r < nr; r++) l[r] = fmaf(l[r], lane[r], sums[r]);
        rescale_rows(o, hdp, lane, nr);
        for (int r = nr; r < nr4; r++) memset(sp + r * 64, 0, 64 * sizeof(float));
        pv_rows(o, hdp, sp, 1, 64, vf, ce8, nr4);
    }
    finish_rows(o, hdp, l, rows, nr, hd, out);
}

void mf_cpu_attn_tile_avx512(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                             int32_t kvh, const int64_t *rows, int nr) {
    if (nr <= 4 && nr * ap->head_dim * 16 <= MF_ATTN_FEW_Q) {
        tile_few(ap, kv, q, out, kvh, rows, nr);
        return;
    }
    const int64_t hd = ap->head_dim, nh = ap->n_head, hdp = (hd + 15) & ~(int64_t)15;
    const int bc = mf_cpu_attn_tile_cells(hd), nrv = (nr + 15) / 16, nr4 = (nr + 3) & ~3;
    const int32_t *list = kv->view.list[rows[0] / nh];
    _Alignas(64) float kf[MF_ATTN_TILE_FLOATS], vf[MF_ATTN_TILE_FLOATS], qt[MF_ATTN_TILE_FLOATS],
        o[MF_ATTN_TILE_FLOATS], sp[64 * MF_ATTN_MAX_ROWS], alpha[MF_ATTN_MAX_ROWS];
    _Alignas(64) int32_t rn[MF_ATTN_MAX_ROWS]; /* row r sees list entries [0, rn[r]); rows past nr none */
    int32_t nmax = 0;
    for (int r = 0; r < 16 * nrv; r++) {
        rn[r] = r < nr ? kv->view.n[rows[r] / nh] : 0;
        nmax = MF_MAX(nmax, rn[r]);
    }
    const int qs = 16 * nrv;
    const __m512 vscale = _mm512_set1_ps(ap->scale);
    for (int v = 0; v < nrv; v++)
        for (int64_t d0 = 0; d0 < hd; d0 += 16) {
            const __mmask16 dm = d0 + 16 <= hd ? (__mmask16)0xFFFF : (__mmask16)((1u << (hd - d0)) - 1);
            __m512 x[16];
            for (int i = 0; i < 16; i++) {
                const int r = 16 * v + i;
                x[i] = r < nr ? _mm512_mul_ps(_mm512_maskz_loadu_ps(dm, q + rows[r] * hd + d0), vscale)
                              : _mm512_setzero_ps();
            }
            transpose16(x);
            for (int i = 0; i < 16 && d0 + i < hd; i++) _mm512_store_ps(qt + (d0 + i) * qs + 16 * v, x[i]);
        }
    memset(o, 0, (size_t)nr4 * (size_t)hdp * sizeof(float));
    __m512i vn[2];
    __m512 m[2], l[2];
    for (int v = 0; v < nrv; v++) {
        vn[v] = _mm512_load_si512(rn + 16 * v);
        m[v] = _mm512_set1_ps(-INFINITY);
        l[v] = _mm512_setzero_ps();
    }
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    for (int32_t j0 = 0; j0 < nmax; j0 += bc) {
        const int ce = (int)MF_MIN(bc, nmax - j0), ce8 = (ce + 7) & ~7; /* the longest row sees all ce */
        __mmask16 vis[64][2];
        for (int c = 0; c < ce; c++)
            for (int v = 0; v < nrv; v++) vis[c][v] = _mm512_cmpgt_epi32_mask(vn[v], _mm512_set1_epi32(j0 + c));
        load_tile(kv, kv->k[ap->layer], list + j0, ce, ce8, kvh, hd, hdp, kf);
        load_tile(kv, kv->v[ap->layer], list + j0, ce, ce8, kvh, hd, hdp, vf);
        for (int c = 0; c < ce8; c += 8) {
            const int32_t nx = j0 + bc + c; /* the next tile's cells, eight per step */
            mf_cpu_attn_prefetch(kv, ap->layer, list, nx, MF_MIN(nx + 8, nmax), kvh, hd);
            scores8(kf + c * hdp, hdp, hd, qt, nrv, sp + c * 32);
        }
        for (int v = 0; v < nrv; v++) {
            __m512 mt = ninf;
            for (int c = 0; c < ce8; c++) {
                __m512 s = _mm512_load_ps(sp + c * 32 + 16 * v);
                s = _mm512_mask_mov_ps(ninf, c < ce ? vis[c][v] : 0, s);
                _mm512_store_ps(sp + c * 32 + 16 * v, s);
                mt = _mm512_max_ps(mt, s);
            }
            const __m512 mn = _mm512_max_ps(m[v], mt);
            /* rows that have seen nothing yet keep m = -inf; subtracting 0 keeps their p at 0 */
            const __m512 mu = _mm512_mask_mov_ps(mn, _mm512_cmp_ps_mask(mn, ninf, _CMP_EQ_OQ), _mm512_setzero_ps());
            const __m512 al = mf_exp_ord16(_mm512_sub_ps(m[v], mu));
            __m512 sum = _mm512_setzero_ps();
            for (int c = 0; c < ce8; c++) {
                const __m512 p = mf_exp_ord16(_mm512_sub_ps(_mm512_load_ps(sp + c * 32 + 16 * v), mu));
                _mm512_store_ps(sp + c * 32 + 16 * v, p);
                sum = _mm512_add_ps(sum, p);
            }
            l[v] = _mm512_fmadd_ps(l[v], al, sum);
            m[v] = mn;
            _mm512_store_ps(alpha + 16 * v, al);
        }
        rescale_rows(o, hdp, alpha, nr);
        pv_rows(o, hdp, sp, 32, 1, vf, ce8, nr4);
    }
    _Alignas(64) float lr[MF_ATTN_MAX_ROWS];
    for (int v = 0; v < nrv; v++) _mm512_store_ps(lr + 16 * v, l[v]);
    finish_rows(o, hdp, lr, rows, nr, hd, out);
}

/* ---- F32 cache in llama.cpp's order ----
 * Scores: the ordered F32 dot of a cell row k with q keeps four 16-lane accumulators over steps of
 * 64 dims, combines them as (a0 + a2) + (a1 + a3) and reduces the 16 lanes as reduce16: halves,
 * quarters, then (t0 + t2) + (t1 + t3). Here a chunk of 16 cells gets its 16 combined vectors and
 * one shuffle network performs the 16 reductions in exactly that order. Softmax sums chunks of 16
 * cells (reduce16, then added in double); V^T . p accumulates cell c into lane c % 16 with fma and
 * reduces the lanes as reduce16 at the end, here with the lanes as 16 registers per 16 dims. */

static inline __m512 cell_partial(const float *k, const float *q, int64_t np) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t d = 0; d < np; d += 64) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + d), _mm512_loadu_ps(q + d), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + d + 16), _mm512_loadu_ps(q + d + 16), a1);
        a2 = _mm512_fmadd_ps(_mm512_loadu_ps(k + d + 32), _mm512_loadu_ps(q + d + 32), a2);
        a3 = _mm512_fmadd_ps(_mm512_loadu_ps(k + d + 48), _mm512_loadu_ps(q + d + 48), a3);
    }
    return _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
}

/* r[i] = reduce16(a[i]) for 16 vectors. Step 1 adds the 8-float halves of two cells at a time,
 * step 2 the 4-float quarters of four cells, steps 3 and 4 the pairs within 128-bit lanes; the last
 * vector holds cell 4k + L at 4L + k, put back in order by one permute. */
static inline __m512 reduce16x16(const __m512 *a) {
    __m512 b[8], c[4], d[2];
    for (int m = 0; m < 8; m++)
        b[m] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int k = 0; k < 4; k++)
        c[k] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int k = 0; k < 2; k++)
        d[k] = _mm512_add_ps(_mm512_shuffle_ps(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(d[0], d[1], _MM_SHUFFLE(3, 1, 3, 1)));
    const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(idx, f);
}

/* reduce16 of one vector. */
static inline float reduce16(__m512 x) {
    const __m256 t8 = _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1));
    const __m128 t4 = _mm_add_ps(_mm256_castps256_ps128(t8), _mm256_extractf128_ps(t8, 1));
    const __m128 r = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    return _mm_cvtss_f32(_mm_add_ss(r, _mm_movehdup_ps(r)));
}

/* Lane i of V^T . p for up to 4 heads of one token (rows p[0..nr)) and dims [d0, d0 + 16 nd): the
 * lane accumulates the list entries c = i mod 16 in order, entries with p = 0 skipped (as the
 * reference does: an fma with 0 would turn an infinite v into NaN). Each V row is loaded once for
 * the nr heads. lanes[r][i][0..64): the lane's result. */
static inline __attribute__((always_inline)) void pv_lane(const float *const *p, int nr, int32_t nc,
                                                          const float *V, const int32_t *cells, size_t stride,
                                                          int64_t d0, __mmask16 dm, int nd, int i, float *lanes) {
    __m512 acc[4][4];
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nd; j++) acc[r][j] = _mm512_setzero_ps();
    for (int32_t c = i; c < nc; c += 16) {
        const float *vr = V + (size_t)cells[c] * stride + d0;
        __m512 v[4];
        for (int j = 0; j < nd; j++) v[j] = j < nd - 1 ? _mm512_loadu_ps(vr + 16 * j) : _mm512_maskz_loadu_ps(dm, vr + 16 * j);
        for (int r = 0; r < nr; r++) {
            if (p[r][c] == 0.0f) continue;
            const __m512 pc = _mm512_set1_ps(p[r][c]);
            for (int j = 0; j < nd; j++) acc[r][j] = _mm512_fmadd_ps(v[j], pc, acc[r][j]);
        }
    }
    for (int r = 0; r < nr; r++)
        for (int j = 0; j < nd; j++) _mm512_store_ps(lanes + (r * 16 + i) * 64 + 16 * j, acc[r][j]);
}

/* o[r][d] = sum over list entries c < nc of p[r][c] * v_{cells[c]}[d] for nr <= 4 heads, in the
 * lane-c%16 order, the lanes then reduced as reduce16. */
static void pv_ordered(const float *const *p, float *const *o, int nr, int32_t nc, const float *V,
                       const int32_t *cells, size_t stride, int64_t hd) {
    _Alignas(64) float lanes[4 * 16 * 64];
    for (int64_t d0 = 0; d0 < hd; d0 += 64) {
        const int nd = (int)MF_MIN(4, (hd - d0 + 15) / 16);
        const int64_t rem = hd - d0 - 16 * (nd - 1);
        const __mmask16 dm = rem >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << rem) - 1);
        for (int i = 0; i < 16; i++) {
#define PV_LANE(NR, ND) pv_lane(p, NR, nc, V, cells, stride, d0, dm, ND, i, lanes)
#define PV_ND(NR)                                                                                                      \
    switch (nd) {                                                                                                      \
    case 4: PV_LANE(NR, 4); break;                                                                                     \
    case 3: PV_LANE(NR, 3); break;                                                                                     \
    case 2: PV_LANE(NR, 2); break;                                                                                     \
    default: PV_LANE(NR, 1); break;                                                                                    \
    }
            switch (nr) {
            case 4: PV_ND(4) break;
            case 3: PV_ND(3) break;
            case 2: PV_ND(2) break;
            default: PV_ND(1) break;
            }
#undef PV_ND
#undef PV_LANE
        }
        for (int r = 0; r < nr; r++)
            for (int j = 0; j < nd; j++) {
                __m512 acc[16];
                for (int i = 0; i < 16; i++) acc[i] = _mm512_load_ps(lanes + (r * 16 + i) * 64 + 16 * j);
                for (int i = 0; i < 8; i++) acc[i] = _mm512_add_ps(acc[i + 8], acc[i]);
                for (int i = 0; i < 4; i++) acc[i] = _mm512_add_ps(acc[i + 4], acc[i]);
                _mm512_mask_storeu_ps(o[r] + d0 + 16 * j, j < nd - 1 ? (__mmask16)0xFFFF : dm,
                                      _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3])));
            }
    }
}

/* The partial vectors of 16 list entries for one query (entries not in vis: zeros), then their
 * reductions; NQ > 0: np = 64 * NQ with the query's first np floats held in registers. */
static inline __attribute__((always_inline)) __m512 chunk_scores(const float *K, const int32_t *cells, size_t stride,
                                                                 const float *qh, int64_t np, __mmask16 vis, int nq) {
    __m512 a[16], qv[8];
    for (int j = 0; j < 4 * nq; j++) qv[j] = _mm512_loadu_ps(qh + 16 * j);
    for (int i = 0; i < 16; i++) {
        if (!(vis >> i & 1)) {
            a[i] = _mm512_setzero_ps();
            continue;
        }
        const float *k = K + (size_t)cells[i] * stride;
        if (nq) {
            __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
            for (int st = 0; st < nq; st++) {
                a0 = _mm512_fmadd_ps(_mm512_loadu_ps(k + 64 * st), qv[4 * st], a0);
                a1 = _mm512_fmadd_ps(_mm512_loadu_ps(k + 64 * st + 16), qv[4 * st + 1], a1);
                a2 = _mm512_fmadd_ps(_mm512_loadu_ps(k + 64 * st + 32), qv[4 * st + 2], a2);
                a3 = _mm512_fmadd_ps(_mm512_loadu_ps(k + 64 * st + 48), qv[4 * st + 3], a3);
            }
            a[i] = _mm512_add_ps(_mm512_add_ps(a0, a2), _mm512_add_ps(a1, a3));
        } else {
            a[i] = cell_partial(k, qh, np);
        }
    }
    return reduce16x16(a);
}

void mf_cpu_attention_ordered_avx512(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                     int64_t u0, int64_t u1, float *scores) {
    const int64_t hd = ap->head_dim, nh = ap->n_head, group = ap->n_head / ap->n_head_kv, np = hd & ~(int64_t)63;
    const size_t stride = kv->row_bytes / sizeof(float);
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    /* one token's heads of one KV group at a time: each K row chunk is read for all of them */
    for (int64_t u = u0; u < u1;) {
        const int64_t t = u / nh, h0 = u % nh, ng = MF_MIN(group - h0 % group, u1 - u), kvh = h0 / group;
        const int32_t *list = kv->view.list[t], nc = kv->view.n[t];
        float *o0 = out + u * hd;
        const float *q0 = q + u * hd;
        u += ng;
        if (nc <= 0) { /* padding, or nothing stored for this token: zeros, not NaN */
            memset(o0, 0, (size_t)(ng * hd) * sizeof(float));
            continue;
        }
        const float *K = (const float *)kv->k[ap->layer] + kvh * hd;
        const float *V = (const float *)kv->v[ap->layer] + kvh * hd;
        __m512 mxv[MF_MAX_GQA_GROUP];
        for (int64_t j = 0; j < ng; j++) mxv[j] = ninf;
        for (int32_t c0 = 0; c0 < nc; c0 += 16) {
            const __mmask16 vis = nc - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nc - c0)) - 1);
            for (int64_t j = 0; j < ng; j++) {
                float *sc = scores + j * nc + c0;
                const float *qh = q0 + j * hd;
                const int32_t *cl = list + c0;
                __m512 s = np == 64    ? chunk_scores(K, cl, stride, qh, np, vis, 1)
                           : np == 128 ? chunk_scores(K, cl, stride, qh, np, vis, 2)
                                       : chunk_scores(K, cl, stride, qh, np, vis, 0);
                if (np < hd) { /* the ordered dot adds dims past the last 64 one by one with fma */
                    _Alignas(64) float sv[16];
                    _mm512_store_ps(sv, s);
                    for (int i = 0; i < 16; i++) {
                        if (!(vis >> i & 1)) continue;
                        const float *kr = K + (size_t)cl[i] * stride;
                        for (int64_t d = np; d < hd; d++) sv[i] = fmaf(kr[d], qh[d], sv[i]);
                    }
                    s = _mm512_load_ps(sv);
                }
                s = _mm512_mask_mov_ps(ninf, vis, _mm512_mul_ps(s, _mm512_set1_ps(ap->scale)));
                _mm512_mask_storeu_ps(sc, vis, s);
                mxv[j] = _mm512_max_ps(mxv[j], s);
            }
        }
        /* softmax per head; then V^T . p four heads at a time */
        const float *pr[MF_MAX_GQA_GROUP];
        float *orow[MF_MAX_GQA_GROUP];
        int npv = 0;
        for (int64_t j = 0; j < ng; j++) {
            float *sc = scores + j * nc;
            const float mx = _mm512_reduce_max_ps(mxv[j]);
            if (mx == -INFINITY) { /* every score -inf (infinite K or q): zeros, not NaN */
                memset(o0 + j * hd, 0, (size_t)hd * sizeof(float));
                continue;
            }
            const __m512 vmx = _mm512_set1_ps(mx);
            double sum = 0.0;
            for (int32_t c0 = 0; c0 < nc; c0 += 16) {
                const __mmask16 tm = nc - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nc - c0)) - 1);
                const __m512 e = _mm512_maskz_mov_ps(tm, mf_exp_ord16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tm, sc + c0), vmx)));
                _mm512_mask_storeu_ps(sc + c0, tm, e);
                sum += (double)reduce16(e);
            }
            const __m512 inv = _mm512_set1_ps(sum > 0.0 ? (float)(1.0 / sum) : 0.0f);
            for (int32_t c0 = 0; c0 < nc; c0 += 16) {
                const __mmask16 tm = nc - c0 >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (nc - c0)) - 1);
                _mm512_mask_storeu_ps(sc + c0, tm, _mm512_mul_ps(_mm512_maskz_loadu_ps(tm, sc + c0), inv));
            }
            pr[npv] = sc;
            orow[npv++] = o0 + j * hd;
        }
        for (int j = 0; j < npv; j += 4) pv_ordered(pr + j, orow + j, MF_MIN(4, npv - j), nc, V, list, stride, hd);
    }
}
