/* cpu_attn_avx2.c: the blockwise (flash) attention tile of cpu_attn.h for AVX2 + FMA + F16C, the
 * AVX-512 tile's scheme (cpu_attn_avx512.c) with 8 query rows per vector: K and V converted to F32
 * once per tile of cells for all the tile's rows, scores and the online softmax with rows as lanes,
 * then o += p . V with dimensions as lanes; tiles of up to 4 rows with cells as lanes (tile_few).
 * Its reference twin is mf_cpu_attn_tile_c. */
#include "cpu/cpu_attn.h"

#include <immintrin.h>
#include <math.h>
#include <string.h>

/* exp(x), 8 lanes: n = round(x / ln2) by the 1.5 * 2^23 trick, b = x - n ln2 (ln2 split in two),
 * the degree-5 polynomial of the AVX-512 exp less its constant 1, j(b) = exp(b) - 1, then
 * (j * 2^(n/2) + 2^(n/2)) * 2^(n - n/2): one rounding for 1 + j (within 2 ulp of exp), and two
 * exact power-of-two factors. x < -87 gives exactly 0 (-inf included): subnormal results, which
 * cost a microcode assist per instruction on x86 (a masked cell's lane in every call, a hundred
 * cycles each), are flushed; they are below 2^-126 of the row's largest weight. x > 88.72 gives
 * infinity, NaN NaN. exp(0) is exactly 1. */
static inline __m256 exp8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.72f));
    const __m256 z = _mm256_fmadd_ps(xc, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), xc));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_mul_ps(_mm256_set1_ps(0x1.ffffecp-1f), b));
    const __m256i ni = _mm256_cvtps_epi32(n), n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    __m256 y = _mm256_mul_ps(_mm256_fmadd_ps(j, s1, s1), s2);
    y = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ), y);
    y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, _mm256_set1_ps(88.72f), _CMP_GT_OQ));
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

void mf_cpu_attn_exp8_avx2(const float *x, float *y) { _mm256_storeu_ps(y, exp8(_mm256_loadu_ps(x))); }

/* s[c + i][8 (v0 + v) ..] = sum_d kf[c + i][d] * qt[d][8 (v0 + v) ..] for i < CB, v < NV: one fma
 * chain over d per score, whatever the blocking. qt rows are qs floats, s rows MF_ATTN_MAX_ROWS. */
#define SCORES(CB, NV)                                                                                                 \
    static inline __attribute__((always_inline)) void scores_##CB##x##NV(const float *kf, int64_t hdp, int64_t hd,   \
                                                                         const float *qt, int qs, int v0, float *s) { \
        __m256 acc[CB][NV];                                                                                            \
        for (int i = 0; i < CB; i++)                                                                                   \
            for (int v = 0; v < NV; v++) acc[i][v] = _mm256_setzero_ps();                                              \
        for (int64_t d = 0; d < hd; d++) {                                                                             \
            __m256 qv[NV];                                                                                             \
            for (int v = 0; v < NV; v++) qv[v] = _mm256_load_ps(qt + d * qs + 8 * (v0 + v));                           \
            for (int i = 0; i < CB; i++) {                                                                             \
                const __m256 k = _mm256_broadcast_ss(kf + i * hdp + d);                                                \
                for (int v = 0; v < NV; v++) acc[i][v] = _mm256_fmadd_ps(k, qv[v], acc[i][v]);                         \
            }                                                                                                          \
        }                                                                                                              \
        for (int i = 0; i < CB; i++)                                                                                   \
            for (int v = 0; v < NV; v++) _mm256_store_ps(s + i * MF_ATTN_MAX_ROWS + 8 * (v0 + v), acc[i][v]);       \
    }
SCORES(8, 1)
SCORES(4, 2)
#undef SCORES

/* o[r0 + i][d0 + 8 j] += sum_c p[c][r0 + i] * v[c][d0 + 8 j], i < 4, j < nd <= 3, c < nc. */
static inline __attribute__((always_inline)) void pv_block(float *o, int64_t hdp, const float *p, const float *vf,
                                                           int nc, int r0, int64_t d0, int nd) {
    __m256 acc[4][3];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < nd; j++) acc[i][j] = _mm256_load_ps(o + (r0 + i) * hdp + d0 + 8 * j);
    for (int c = 0; c < nc; c++) {
        __m256 v[3];
        for (int j = 0; j < nd; j++) v[j] = _mm256_load_ps(vf + c * hdp + d0 + 8 * j);
        for (int i = 0; i < 4; i++) {
            const __m256 pc = _mm256_broadcast_ss(p + c * MF_ATTN_MAX_ROWS + r0 + i);
            for (int j = 0; j < nd; j++) acc[i][j] = _mm256_fmadd_ps(pc, v[j], acc[i][j]);
        }
    }
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < nd; j++) _mm256_store_ps(o + (r0 + i) * hdp + d0 + 8 * j, acc[i][j]);
}

/* K or V rows of cells[0..n) of head kvh as F32 rows of hdp floats (zeros past hd), rows n..n8 zero. */
static void load_tile(const mf_kv_cache *kv, const uint8_t *region, const int32_t *cells, int n, int n8, int32_t kvh,
                      int64_t hd, int64_t hdp, float *dst) {
    const int64_t nfull = hd & ~(int64_t)7;
    for (int c = 0; c < n; c++) {
        const uint8_t *row = region + (size_t)cells[c] * kv->row_bytes;
        float *y = dst + c * hdp;
        if (kv->type == MF_TYPE_F32) {
            const float *x = (const float *)row + kvh * hd;
            for (int64_t d = 0; d < nfull; d += 8) _mm256_store_ps(y + d, _mm256_loadu_ps(x + d));
            for (int64_t d = nfull; d < hdp; d++) y[d] = d < hd ? x[d] : 0.0f;
        } else {
            const mf_fp16 *x = (const mf_fp16 *)row + kvh * hd;
            for (int64_t d = 0; d < nfull; d += 8)
                _mm256_store_ps(y + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + d))));
            if (nfull < hd) {
                _Alignas(16) uint16_t t[8] = {0};
                memcpy(t, x + nfull, (size_t)(hd - nfull) * sizeof(mf_fp16));
                _mm256_store_ps(y + nfull, _mm256_cvtph_ps(_mm_load_si128((const __m128i *)t)));
            }
        }
    }
    if (n8 > n) memset(dst + n * hdp, 0, (size_t)(n8 - n) * (size_t)hdp * sizeof(float));
}

/* ---- the same tile for a few rows ----
 * A decode step's tile holds one token's GQA group: 1 to 4 rows in many models (MHA, Llama 3's and
 * Qwen3's 4, SmolLM2's 3), where rows as lanes leave most of a score vector idle while every score
 * step broadcasts a K value. With at most 4 rows the scores take cells as lanes instead: eight
 * cells' K rows are read straight from the cache, transposed in registers (8 x 8 halves: 24
 * unpacks, then one conversion per dimension) and multiplied into each row's eight-cell
 * accumulator; V is converted as o += p . V reads it. No K or V tile is stored. Every float step
 * is the wide tile's, value by value: a score is the same fma chain over d, the exps are lane-wise,
 * each row's sum adds its cells one at a time in order (the tile's padding cells included, whose p
 * is 0), o += p . V is the same chain over the cells (a padding cell adds 0 * 0); the maxima are
 * exact whatever the grouping. So a row's bits do not depend on which tile ran it (test_cpu_attn:
 * 4- and 8-row tiles against the wide ones, and random splits). */

/* The few-row tile's query vectors: 8 floats per row and dimension. */
#define FEW_Q (8 * 1024)

/* A padding cell's K and V (the most a row of a head holds: 512 floats). */
static const float few_zeros[512] __attribute__((aligned(32)));

/* x[i] (cell i's 8 halves at d0..d0+7) -> x[j] (the 8 cells' halves at d0 + j). */
static inline void transpose8_epi16(__m128i *x) {
    __m128i a[8], b[8];
    for (int i = 0; i < 4; i++) {
        a[2 * i] = _mm_unpacklo_epi16(x[2 * i], x[2 * i + 1]);
        a[2 * i + 1] = _mm_unpackhi_epi16(x[2 * i], x[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        b[4 * h] = _mm_unpacklo_epi32(a[4 * h], a[4 * h + 2]);
        b[4 * h + 1] = _mm_unpackhi_epi32(a[4 * h], a[4 * h + 2]);
        b[4 * h + 2] = _mm_unpacklo_epi32(a[4 * h + 1], a[4 * h + 3]);
        b[4 * h + 3] = _mm_unpackhi_epi32(a[4 * h + 1], a[4 * h + 3]);
    }
    for (int j = 0; j < 4; j++) {
        x[2 * j] = _mm_unpacklo_epi64(b[j], b[4 + j]);
        x[2 * j + 1] = _mm_unpackhi_epi64(b[j], b[4 + j]);
    }
}

/* x[i][j] -> x[j][i], 8 x 8 floats. */
static inline void transpose8_ps(__m256 *x) {
    __m256 t[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(x[2 * i], x[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(x[2 * i], x[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        x[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        x[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
        x[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        x[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        t[j] = _mm256_permute2f128_ps(x[j], x[4 + j], 0x20);
        t[4 + j] = _mm256_permute2f128_ps(x[j], x[4 + j], 0x31);
    }
    for (int j = 0; j < 8; j++) x[j] = t[j];
}

/* s[r][i] = sum_d k[i][d] * q[r][d] for the 8 cells kp[0..8) (one fma chain over d each, the wide
 * tile's), r < NR; qb[d][r]: row r's value at d in all 8 lanes; s rows are 64 floats. */
static inline __attribute__((always_inline)) void few_scores(const bool F16, const int NR, const uint8_t *const *kp,
                                                             int64_t hd, const float *qb, float *s) {
    __m256 acc[4];
    for (int r = 0; r < NR; r++) acc[r] = _mm256_setzero_ps();
    for (int64_t d0 = 0; d0 < hd; d0 += 8) {
        __m256 k[8];
        if (F16) {
            __m128i x[8];
            for (int i = 0; i < 8; i++) x[i] = _mm_loadu_si128((const __m128i *)(kp[i] + (size_t)d0 * 2));
            transpose8_epi16(x);
            for (int j = 0; j < 8; j++) k[j] = _mm256_cvtph_ps(x[j]);
        } else {
            for (int i = 0; i < 8; i++) k[i] = _mm256_loadu_ps((const float *)(kp[i] + (size_t)d0 * 4));
            transpose8_ps(k);
        }
        for (int j = 0; j < 8; j++)
            for (int r = 0; r < NR; r++)
                acc[r] = _mm256_fmadd_ps(k[j], _mm256_load_ps(qb + ((d0 + j) * NR + r) * 8), acc[r]);
    }
    for (int r = 0; r < NR; r++) _mm256_store_ps(s + r * 64, acc[r]);
}

/* o[r][d0 + 8 j] += sum_c p[r][c] * v[c][d0 + 8 j], r < R, j < nd <= 3, c < nc, V converted from the
 * cache rows vp[c] as it is read: the wide tile's chain over c per output. */
static inline __attribute__((always_inline)) void few_pv(const bool F16, const int R, float *o, int64_t hdp,
                                                         const float *p, const uint8_t *const *vp, int nc, int64_t d0,
                                                         int nd) {
    __m256 acc[4][3];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < nd; j++) acc[i][j] = _mm256_load_ps(o + i * hdp + d0 + 8 * j);
    for (int c = 0; c < nc; c++) {
        __m256 v[3];
        for (int j = 0; j < nd; j++)
            v[j] = F16 ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(vp[c] + (size_t)(d0 + 8 * j) * 2)))
                       : _mm256_loadu_ps((const float *)(vp[c] + (size_t)(d0 + 8 * j) * 4));
        for (int i = 0; i < R; i++) {
            const __m256 pc = _mm256_broadcast_ss(p + i * 64 + c);
            for (int j = 0; j < nd; j++) acc[i][j] = _mm256_fmadd_ps(pc, v[j], acc[i][j]);
        }
    }
    for (int i = 0; i < R; i++)
        for (int j = 0; j < nd; j++) _mm256_store_ps(o + i * hdp + d0 + 8 * j, acc[i][j]);
}

static inline __attribute__((always_inline)) void tile_few_t(const bool F16, const int NR, const mf_attn_params *ap,
                                                             const mf_kv_cache *kv, const float *q, float *out,
                                                             int32_t kvh, const int64_t *rows) {
    const int64_t hd = ap->head_dim, nh = ap->n_head; /* hd % 8 == 0 here: rows need no padding */
    const int bc = mf_cpu_attn_tile_cells(hd);
    const int32_t *list = kv->view.list[rows[0] / nh];
    const size_t hbytes = (size_t)hd * (F16 ? 2 : 4);
    const uint8_t *kreg = kv->k[ap->layer] + (size_t)kvh * hbytes, *vreg = kv->v[ap->layer] + (size_t)kvh * hbytes;
    _Alignas(32) float qb[FEW_Q], o[4 * 512], sp[4 * 64], lane[8];
    const uint8_t *kp[64], *vp[64];
    int32_t rn[4], nmax = 0;
    float m[4], l[4];
    for (int r = 0; r < NR; r++) {
        rn[r] = kv->view.n[rows[r] / nh];
        nmax = MF_MAX(nmax, rn[r]);
        m[r] = -INFINITY, l[r] = 0.0f;
    }
    for (int64_t d = 0; d < hd; d++)
        for (int r = 0; r < NR; r++)
            _mm256_store_ps(qb + (d * NR + r) * 8, _mm256_set1_ps(q[rows[r] * hd + d] * ap->scale));
    memset(o, 0, (size_t)NR * (size_t)hd * sizeof(float));
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int32_t j0 = 0; j0 < nmax; j0 += bc) {
        const int ce = (int)MF_MIN(bc, nmax - j0), ce8 = (ce + 7) & ~7;
        for (int c = 0; c < ce8; c++) {
            const bool real = c < ce;
            kp[c] = real ? kreg + (size_t)list[j0 + c] * kv->row_bytes : (const uint8_t *)few_zeros;
            vp[c] = real ? vreg + (size_t)list[j0 + c] * kv->row_bytes : (const uint8_t *)few_zeros;
        }
        for (int c = 0; c < ce8; c += 8) {
            const int32_t nx = j0 + bc + c; /* the next tile's cells, eight per step */
            mf_cpu_attn_prefetch(kv, ap->layer, list, nx, MF_MIN(nx + 8, nmax), kvh, hd);
            few_scores(F16, NR, kp + c, hd, qb, sp + c);
        }
        /* per row: mask, maximum, p = exp(s - mu) and the sum of the ce8 cells in order */
        _Alignas(32) float dm[8] = {0};
        float sums[4];
        for (int r = 0; r < NR; r++) {
            float *sr = sp + r * 64;
            const int vis = (int)MF_MAX(0, MF_MIN(ce, rn[r] - j0)); /* cells [0, vis) of the tile */
            __m256 mt = ninf;
            for (int c = 0; c < ce8; c += 8) {
                const __m256 k = _mm256_castsi256_ps(
                    _mm256_cmpgt_epi32(_mm256_set1_epi32(vis), _mm256_add_epi32(iota, _mm256_set1_epi32(c))));
                const __m256 x = _mm256_blendv_ps(ninf, _mm256_load_ps(sr + c), k);
                _mm256_store_ps(sr + c, x);
                mt = _mm256_max_ps(mt, x);
            }
            const __m128 h4 = _mm_max_ps(_mm256_castps256_ps128(mt), _mm256_extractf128_ps(mt, 1));
            const __m128 h2 = _mm_max_ps(h4, _mm_movehl_ps(h4, h4));
            const float mx = _mm_cvtss_f32(_mm_max_ss(h2, _mm_movehdup_ps(h2)));
            const float mn = m[r] > mx ? m[r] : mx;
            const float mu = mn == -INFINITY ? 0.0f : mn; /* rows that have seen nothing keep p at 0 */
            dm[r] = m[r] - mu;
            m[r] = mn;
            const __m256 muv = _mm256_set1_ps(mu);
            for (int c = 0; c < ce8; c += 8) _mm256_store_ps(sr + c, exp8(_mm256_sub_ps(_mm256_load_ps(sr + c), muv)));
            float sum = 0.0f;
            for (int c = 0; c < ce8; c++) sum += sr[c];
            sums[r] = sum;
        }
        _mm256_store_ps(lane, exp8(_mm256_load_ps(dm))); /* alpha, lane-wise as the wide tile's */
        for (int r = 0; r < NR; r++) {
            l[r] = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(l[r]), _mm_set_ss(lane[r]), _mm_set_ss(sums[r])));
            if (lane[r] == 1.0f) continue; /* rescale the rows whose max grew */
            const __m256 a = _mm256_set1_ps(lane[r]);
            for (int64_t d = 0; d < hd; d += 8)
                _mm256_store_ps(o + r * hd + d, _mm256_mul_ps(a, _mm256_load_ps(o + r * hd + d)));
        }
        int64_t d0 = 0;
        for (; d0 + 24 <= hd; d0 += 24) few_pv(F16, NR, o, hd, sp, vp, ce8, d0, 3);
        switch ((hd - d0) / 8) {
        case 2: few_pv(F16, NR, o, hd, sp, vp, ce8, d0, 2); break;
        case 1: few_pv(F16, NR, o, hd, sp, vp, ce8, d0, 1); break;
        default: break;
        }
    }
    for (int r = 0; r < NR; r++) {
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
        const __m256 vinv = _mm256_set1_ps(inv);
        float *y = out + rows[r] * hd;
        for (int64_t d = 0; d < hd; d += 8)
            _mm256_storeu_ps(y + d, _mm256_mul_ps(_mm256_load_ps(o + r * hd + d), vinv));
    }
}

#define FEW_CASES(F16)                                                                                                 \
    switch (nr) {                                                                                                      \
    case 1: tile_few_t(F16, 1, ap, kv, q, out, kvh, rows); break;                                                      \
    case 2: tile_few_t(F16, 2, ap, kv, q, out, kvh, rows); break;                                                      \
    case 3: tile_few_t(F16, 3, ap, kv, q, out, kvh, rows); break;                                                      \
    default: tile_few_t(F16, 4, ap, kv, q, out, kvh, rows); break;                                                     \
    }

static void tile_few(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int32_t kvh,
                     const int64_t *rows, int nr) {
    if (kv->type == MF_TYPE_F16) {
        FEW_CASES(true)
    } else {
        FEW_CASES(false)
    }
}
#undef FEW_CASES

void mf_cpu_attn_tile_avx2(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int32_t kvh,
                           const int64_t *rows, int nr) {
    if (nr <= 4 && ap->head_dim % 8 == 0 && ap->head_dim <= 512 && (int64_t)nr * ap->head_dim * 8 <= FEW_Q) {
        tile_few(ap, kv, q, out, kvh, rows, nr);
        return;
    }
    const int64_t hd = ap->head_dim, nh = ap->n_head, hdp = (hd + 7) & ~(int64_t)7;
    const int bc = mf_cpu_attn_tile_cells(hd), nrv = (nr + 7) / 8, nr4 = (nr + 3) & ~3, qs = 8 * nrv;
    const int32_t *list = kv->view.list[rows[0] / nh];
    _Alignas(32) float kf[MF_ATTN_TILE_FLOATS], vf[MF_ATTN_TILE_FLOATS], qt[MF_ATTN_TILE_FLOATS],
        o[MF_ATTN_TILE_FLOATS], sp[64 * MF_ATTN_MAX_ROWS], alpha[MF_ATTN_MAX_ROWS], lr[MF_ATTN_MAX_ROWS];
    _Alignas(32) int32_t rn[MF_ATTN_MAX_ROWS]; /* row r sees list entries [0, rn[r]); rows past nr none */
    int32_t nmax = 0;
    for (int r = 0; r < qs; r++) {
        rn[r] = r < nr ? kv->view.n[rows[r] / nh] : 0;
        nmax = MF_MAX(nmax, rn[r]);
        for (int64_t d = 0; d < hd; d++) qt[d * qs + r] = r < nr ? q[rows[r] * hd + d] * ap->scale : 0.0f;
    }
    memset(o, 0, (size_t)nr4 * (size_t)hdp * sizeof(float));
    __m256i vn[MF_ATTN_MAX_ROWS / 8];
    __m256 m[MF_ATTN_MAX_ROWS / 8], l[MF_ATTN_MAX_ROWS / 8];
    for (int v = 0; v < nrv; v++) {
        vn[v] = _mm256_load_si256((const __m256i *)(rn + 8 * v));
        m[v] = _mm256_set1_ps(-INFINITY);
        l[v] = _mm256_setzero_ps();
    }
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    for (int32_t j0 = 0; j0 < nmax; j0 += bc) {
        const int ce = (int)MF_MIN(bc, nmax - j0), ce8 = (ce + 7) & ~7; /* the longest row sees all ce */
        load_tile(kv, kv->k[ap->layer], list + j0, ce, ce8, kvh, hd, hdp, kf);
        load_tile(kv, kv->v[ap->layer], list + j0, ce, ce8, kvh, hd, hdp, vf);
        for (int c = 0; c < ce8; c += 8) {
            const int32_t nx = j0 + bc + c; /* the next tile's cells, eight per step */
            mf_cpu_attn_prefetch(kv, ap->layer, list, nx, MF_MIN(nx + 8, nmax), kvh, hd);
            int v = 0;
            for (; v + 2 <= nrv; v += 2) {
                scores_4x2(kf + c * hdp, hdp, hd, qt, qs, v, sp + c * MF_ATTN_MAX_ROWS);
                scores_4x2(kf + (c + 4) * hdp, hdp, hd, qt, qs, v, sp + (c + 4) * MF_ATTN_MAX_ROWS);
            }
            if (v < nrv) scores_8x1(kf + c * hdp, hdp, hd, qt, qs, v, sp + c * MF_ATTN_MAX_ROWS);
        }
        for (int v = 0; v < nrv; v++) {
            __m256 mt = ninf;
            for (int c = 0; c < ce8; c++) {
                /* cell j0 + c is visible to the rows with rn > j0 + c (none for c >= ce) */
                const __m256 vis = _mm256_castsi256_ps(_mm256_cmpgt_epi32(vn[v], _mm256_set1_epi32(j0 + c)));
                __m256 s = _mm256_load_ps(sp + c * MF_ATTN_MAX_ROWS + 8 * v);
                s = _mm256_blendv_ps(ninf, s, c < ce ? vis : _mm256_setzero_ps());
                _mm256_store_ps(sp + c * MF_ATTN_MAX_ROWS + 8 * v, s);
                mt = _mm256_max_ps(mt, s);
            }
            const __m256 mn = _mm256_max_ps(m[v], mt);
            /* rows that have seen nothing yet keep m = -inf; subtracting 0 keeps their p at 0 */
            const __m256 mu = _mm256_andnot_ps(_mm256_cmp_ps(mn, ninf, _CMP_EQ_OQ), mn);
            const __m256 al = exp8(_mm256_sub_ps(m[v], mu));
            __m256 sum = _mm256_setzero_ps();
            for (int c = 0; c < ce8; c++) {
                const __m256 p = exp8(_mm256_sub_ps(_mm256_load_ps(sp + c * MF_ATTN_MAX_ROWS + 8 * v), mu));
                _mm256_store_ps(sp + c * MF_ATTN_MAX_ROWS + 8 * v, p);
                sum = _mm256_add_ps(sum, p);
            }
            l[v] = _mm256_fmadd_ps(l[v], al, sum);
            m[v] = mn;
            _mm256_store_ps(alpha + 8 * v, al);
        }
        /* rescale the rows whose max grew (alpha < 1); alpha is exactly 1 otherwise */
        for (int r = 0; r < nr; r++) {
            if (alpha[r] == 1.0f) continue;
            const __m256 a = _mm256_set1_ps(alpha[r]);
            for (int64_t d = 0; d < hdp; d += 8)
                _mm256_store_ps(o + r * hdp + d, _mm256_mul_ps(a, _mm256_load_ps(o + r * hdp + d)));
        }
        for (int r0 = 0; r0 < nr4; r0 += 4) {
            int64_t d0 = 0;
            for (; d0 + 24 <= hdp; d0 += 24) pv_block(o, hdp, sp, vf, ce8, r0, d0, 3);
            switch ((hdp - d0) / 8) {
            case 2: pv_block(o, hdp, sp, vf, ce8, r0, d0, 2); break;
            case 1: pv_block(o, hdp, sp, vf, ce8, r0, d0, 1); break;
            default: break;
            }
        }
    }
    for (int v = 0; v < nrv; v++) _mm256_store_ps(lr + 8 * v, l[v]);
    for (int r = 0; r < nr; r++) {
        const float inv = lr[r] > 0.0f ? 1.0f / lr[r] : 0.0f;
        const __m256 vinv = _mm256_set1_ps(inv);
        float *y = out + rows[r] * hd;
        const int64_t nfull = hd & ~(int64_t)7;
        for (int64_t d = 0; d < nfull; d += 8)
            _mm256_storeu_ps(y + d, _mm256_mul_ps(_mm256_load_ps(o + r * hdp + d), vinv));
        for (int64_t d = nfull; d < hd; d++) y[d] = o[r * hdp + d] * inv;
    }
}
