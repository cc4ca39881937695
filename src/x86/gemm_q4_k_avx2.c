/* gemm_q4_k_avx2.c: the Q4_K prefill GEMM for AVX2 without VNNI (see cpu_gemm.h), in the repacked
 * order (dot_q4_K_rp in cpu_dot_order_avx2.c, twin mf_cpu_dot_q4_K_rp_ref): per super-block and pair
 * c of sub-blocks, s = fma(isum_c, d_w * d_a, s) with isum_c = sc[2c] * D[2c] + sc[2c+1] * D[2c+1]
 * (D[j]: sub-block j's nibbles times its activations), sm = fma(msum_c, dmin_w * d_a, sm) with
 * msum_c = mn[2c] * S[2c] + mn[2c+1] * S[2c+1] (S[j]: its activation sum); the output is s - sm.
 *
 * Eight weight rows per vector (one per 32-bit lane): D[j] of eight rows comes from eight
 * vpmaddubsw of the unpacked nibbles (unsigned) against the token's four activation bytes
 * (broadcast), added in int16 (a step is at most 2 * 15 * 128 = 3840, eight of them 30720 < 32767),
 * then one vpmaddwd by the rows' scales (sc, sc) gives sc[j] * D[j]; msum_c is one vpmaddwd of the
 * rows' (mn[2c], mn[2c+1]) by the broadcast (S[2c], S[2c+1]). The sums' chains run first over a
 * slice, the minimums' after (they need no weight values).
 *
 * Panel layout (per-thread scratch), per super-block of a slice: for sub-block j and step k (4
 * values each) the vector of the 8 rows' values 32j + 4k..+3 as bytes (64 vectors), the 8 vectors
 * (sc[j], sc[j]) and the 4 vectors (mn[2c], mn[2c+1]), then h2f(d) and h2f(dmin) of the 8 rows:
 * 2496 bytes; rows past the matrix are zeros. Slices of up to KA_SLICE super-blocks (20 KB) stay in
 * L1 while a chunk's tokens pass over them, in tiles of up to 3; the two chains of each token wait
 * in scratch between slices. */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"
#include "x86/gemm_q4_k_packed.h"
#include "simd/kquant_common.h"

#include <string.h>

enum {
    KA_BLOCK_BYTES = 64 * 32 + 8 * 32 + 4 * 32 + 2 * 32,
    KA_SLICE = 8,
    KA_TILE = 3,
};

static int64_t max_chunk(int64_t nb) { return mf_avx2_k_chunk((size_t)nb * sizeof(mf_block_q8_K)); }

static size_t scratch_size(int64_t K) {
    const int64_t nb = K / 256;
    return (size_t)KA_SLICE * KA_BLOCK_BYTES + (size_t)max_chunk(nb) * 2 * 32;
}

/* Super-blocks [i0, i1) of rows [ob, ob + nr) (nr <= 8) into the panel layout. */
static void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                 const uint8_t *ahead) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = i0; i < i1; i++, panel += KA_BLOCK_BYTES) {
        MF_GEMM_STREAM_AHEAD(ahead, i, 8 * sizeof(mf_block_q4_K));
        const mf_block_q4_K *row[8];
        for (int r = 0; r < 8; r++)
            row[r] = r < nr ? (const mf_block_q4_K *)(base + (size_t)r * w->row_bytes) + i : NULL;
        __m256i *p = (__m256i *)panel;
        for (int c = 0; c < 4; c++) {
            __m256i x[8], d[8];
            for (int r = 0; r < 8; r++)
                x[r] = row[r] ? _mm256_loadu_si256((const __m256i *)(row[r]->qs + 32 * c)) : _mm256_setzero_si256();
            mf_avx2_transpose8_i32(x, d);
            for (int k = 0; k < 8; k++) {
                _mm256_store_si256(p + 8 * (2 * c) + k, _mm256_and_si256(d[k], m4));
                _mm256_store_si256(p + 8 * (2 * c + 1) + k, _mm256_and_si256(_mm256_srli_epi16(d[k], 4), m4));
            }
        }
        int16_t sc[8][8], mn[8][8]; /* [sub-block][row] */
        uint16_t dh[8], mh[8];
        for (int r = 0; r < 8; r++) {
            uint8_t u[16] = {0};
            dh[r] = mh[r] = 0;
            if (row[r]) {
                mf_k4_unpack_scales(row[r]->scales, u);
                dh[r] = row[r]->d, mh[r] = row[r]->dmin;
            }
            for (int j = 0; j < 8; j++) sc[j][r] = u[j], mn[j][r] = u[8 + j];
        }
        for (int j = 0; j < 8; j++) _mm256_store_si256(p + 64 + j, mf_avx2_pairs16(sc[j], sc[j]));
        for (int c = 0; c < 4; c++) _mm256_store_si256(p + 72 + c, mf_avx2_pairs16(mn[2 * c], mn[2 * c + 1]));
        _mm256_store_ps((float *)(p + 76), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh)));
        _mm256_store_ps((float *)(p + 77), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)mh)));
    }
}

/* The sums' chains of T tokens (a[t]: their Q8_K rows) over super-blocks [i0, i1) of the panel,
 * from zero (first) or st[t]; left in st[t]. Each token's values are variables of their own (T is a
 * constant: the unused ones vanish) and the int16 sums use the saturating add (exact: they stay
 * below 32767), which the compiler does not reassociate: plain adds became trees of live products
 * that spilled to the stack. */
static inline __attribute__((always_inline)) void tile(const int T, const uint8_t *panel, int64_t i0, int64_t i1,
                                                       const mf_block_q8_K *const *a, __m256 *const *st,
                                                       bool first) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0;
    if (!first) {
        s0 = _mm256_load_ps((const float *)st[0]);
        if (T > 1) s1 = _mm256_load_ps((const float *)st[1]);
        if (T > 2) s2 = _mm256_load_ps((const float *)st[2]);
    }
    for (int64_t i = i0; i < i1; i++, panel += KA_BLOCK_BYTES) {
        const __m256i *p = (const __m256i *)panel;
        const __m256 dw = _mm256_load_ps((const float *)(p + 76));
        const int8_t *q0 = a[0][i].qs, *q1 = T > 1 ? a[1][i].qs : q0, *q2 = T > 2 ? a[2][i].qs : q0;
        for (int c = 0; c < 4; c++) {
            __m256i u0 = _mm256_setzero_si256(), u1 = u0, u2 = u0;
            for (int h = 0; h < 2; h++) {
                const int j = 2 * c + h;
                __m256i c0 = _mm256_setzero_si256(), c1 = c0, c2 = c0;
#pragma GCC unroll 8
                for (int k = 0; k < 8; k++) {
                    const __m256i wk = _mm256_load_si256(p + 8 * j + k);
                    const int o = 32 * j + 4 * k;
                    c0 = _mm256_adds_epi16(c0, _mm256_maddubs_epi16(wk, mf_avx2_bcast4(q0 + o)));
                    if (T > 1) c1 = _mm256_adds_epi16(c1, _mm256_maddubs_epi16(wk, mf_avx2_bcast4(q1 + o)));
                    if (T > 2) c2 = _mm256_adds_epi16(c2, _mm256_maddubs_epi16(wk, mf_avx2_bcast4(q2 + o)));
                }
                const __m256i scj = _mm256_load_si256(p + 64 + j);
                u0 = _mm256_add_epi32(u0, _mm256_madd_epi16(c0, scj));
                if (T > 1) u1 = _mm256_add_epi32(u1, _mm256_madd_epi16(c1, scj));
                if (T > 2) u2 = _mm256_add_epi32(u2, _mm256_madd_epi16(c2, scj));
            }
            s0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(u0), _mm256_mul_ps(dw, _mm256_broadcast_ss(&a[0][i].d)), s0);
            if (T > 1)
                s1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(u1), _mm256_mul_ps(dw, _mm256_broadcast_ss(&a[1][i].d)), s1);
            if (T > 2)
                s2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(u2), _mm256_mul_ps(dw, _mm256_broadcast_ss(&a[2][i].d)), s2);
        }
    }
    _mm256_store_ps((float *)st[0], s0);
    if (T > 1) _mm256_store_ps((float *)st[1], s1);
    if (T > 2) _mm256_store_ps((float *)st[2], s2);
}

/* The minimums' chain of one token over super-blocks [i0, i1), from zero (first) or *sm. */
static void min_chain(const uint8_t *panel, int64_t i0, int64_t i1, const mf_block_q8_K *a, __m256 *sm, bool first) {
    __m256 m = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)sm);
    for (int64_t i = i0; i < i1; i++, panel += KA_BLOCK_BYTES) {
        const __m256i *p = (const __m256i *)panel;
        /* S[j] = bsums[2j] + bsums[2j+1] as int16, pair c in dword c */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        const __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
        const __m256 dm = _mm256_mul_ps(_mm256_load_ps((const float *)(p + 77)), _mm256_broadcast_ss(&a[i].d));
        int32_t sp4[4];
        _mm_storeu_si128((__m128i *)sp4, s8);
        for (int c = 0; c < 4; c++) {
            const __m256i sp = _mm256_set1_epi32(sp4[c]);
            const __m256i ms = _mm256_madd_epi16(_mm256_load_si256(p + 72 + c), sp);
            m = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), dm, m);
        }
    }
    _mm256_store_ps((float *)sm, m);
}

/* ---- a packed weight (gemm_q4_k_packed.h: sixteen rows a panel, each 64-byte vector two of ours) ---- */

/* The scales of half h (rows 8h..8h+7) of the packed super-block b (mf_avx2_k_packed_scales). */
static inline __attribute__((always_inline)) void packed_scales(const uint8_t *b, int h, __m256 *d, __m256 *dm,
                                                                __m256i *s0, __m256i *s1, __m256i *m0,
                                                                __m256i *m1) {
    mf_avx2_k_packed_scales(b + 64 * 32 + 32 * h, d, dm, s0, s1, m0, m1);
}

/* Super-blocks [i0, i1) of the half of a packed panel that holds rows [ob, ob + 8) into the panel
 * layout above (ob is o0 + 8k, o0 a multiple of 16); the first half's pass fetches the same
 * super-blocks of the next panel into L2 (past the matrix: a prefetch never faults). */
static void unpack(const mf_weight *w, int64_t ob, int64_t i0, int64_t i1, uint8_t *panel) {
    const size_t sbb = MF_Q4K_PVEC * 64;
    const int h = (int)(ob / 8 % 2);
    const uint8_t *pk = (const uint8_t *)w->packed + (size_t)(ob - 8 * h) * w->row_bytes;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = i0; i < i1; i++, panel += KA_BLOCK_BYTES) {
        const uint8_t *b = pk + (size_t)i * sbb;
        if (h == 0)
            for (size_t l = 0; l < sbb; l += 64) _mm_prefetch((const char *)b + 16 * w->row_bytes + l, _MM_HINT_T1);
        __m256i *p = (__m256i *)panel;
        for (int c = 0; c < 4; c++)
            for (int k = 0; k < 8; k++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 64 * (8 * c + k) + 32 * h));
                _mm256_store_si256(p + 8 * (2 * c) + k, _mm256_and_si256(v, m4));
                _mm256_store_si256(p + 8 * (2 * c + 1) + k, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            }
        __m256 d, dm;
        __m256i s0, s1, m0, m1;
        packed_scales(b, h, &d, &dm, &s0, &s1, &m0, &m1);
        for (int j = 0; j < 8; j++) _mm256_store_si256(p + 64 + j, mf_avx2_k_sc_pair(s0, s1, j));
        for (int c = 0; c < 4; c++) _mm256_store_si256(p + 72 + c, mf_avx2_k_mn_pair(m0, m1, c));
        _mm256_store_ps((float *)(p + 76), d);
        _mm256_store_ps((float *)(p + 77), dm);
    }
}

/* One or two tokens (a decode step) against half h of the packed panel at p, nsb super-blocks,
 * straight from the packed bytes: tile's sums and min_chain's minimums in one pass, their chains
 * stepped as there. Pass k of a panel's n_pass fetches its share of the next panel (next, NULL:
 * none; mf_few_share). */
static inline __attribute__((always_inline)) void few(const int T, const uint8_t *p, int h, int64_t nsb,
                                                      const uint8_t *act, size_t act_row, const uint8_t *next, int k,
                                                      int n_pass, float *y, size_t ldy, __m256i mask) {
    const size_t sbb = MF_Q4K_PVEC * 64;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 s[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, m[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    mf_few_share pf = mf_few_share_of(next, k, n_pass, nsb, sbb);
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *b = p + (size_t)i * sbb;
        MF_FEW_SHARE_STEP(pf);
        const mf_block_q8_K *a[2];
        for (int t = 0; t < T; t++) a[t] = (const mf_block_q8_K *)(act + (size_t)t * act_row) + i;
        __m256 d, dm;
        __m256i s0, s1, m0, m1;
        packed_scales(b, h, &d, &dm, &s0, &s1, &m0, &m1);
        for (int c = 0; c < 4; c++) {
            __m256i lo[2], hi[2];
            for (int t = 0; t < T; t++) lo[t] = hi[t] = _mm256_setzero_si256();
            for (int kk = 0; kk < 8; kk++) {
                const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 64 * (8 * c + kk) + 32 * h));
                const __m256i vl = _mm256_and_si256(v, m4), vh = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                for (int t = 0; t < T; t++) {
                    const int8_t *q = a[t]->qs + 64 * c + 4 * kk;
                    lo[t] = _mm256_adds_epi16(lo[t], _mm256_maddubs_epi16(vl, mf_avx2_bcast4(q)));
                    hi[t] = _mm256_adds_epi16(hi[t], _mm256_maddubs_epi16(vh, mf_avx2_bcast4(q + 32)));
                }
            }
            const __m256i sl = mf_avx2_k_sc_pair(s0, s1, 2 * c), sh = mf_avx2_k_sc_pair(s0, s1, 2 * c + 1);
            for (int t = 0; t < T; t++) {
                const __m256i u = _mm256_add_epi32(_mm256_madd_epi16(lo[t], sl), _mm256_madd_epi16(hi[t], sh));
                s[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(u), _mm256_mul_ps(d, _mm256_broadcast_ss(&a[t]->d)), s[t]);
            }
        }
        for (int t = 0; t < T; t++) { /* the minimums' chain, as min_chain */
            const __m256i bs = _mm256_loadu_si256((const __m256i *)a[t]->bsums);
            const __m128i s8 = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
            const __m256 dmt = _mm256_mul_ps(dm, _mm256_broadcast_ss(&a[t]->d));
            int32_t sp4[4];
            _mm_storeu_si128((__m128i *)sp4, s8);
            for (int c = 0; c < 4; c++) {
                const __m256i ms = _mm256_madd_epi16(mf_avx2_k_mn_pair(m0, m1, c), _mm256_set1_epi32(sp4[c]));
                m[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms), dmt, m[t]);
            }
        }
    }
    for (int t = 0; t < T; t++) _mm256_maskstore_ps(y + (size_t)t * ldy, mask, _mm256_sub_ps(s[t], m[t]));
}

/* A pass of one or two tokens (mf_avx2_few_pass_fn). */
static void few_pass(void *ctx, const uint8_t *p, const uint8_t *next, int h, int64_t o, int64_t t0, int tn, int k,
                     int n_pass, __m256i mask) {
    const mf_avx2_few_io *io = ctx;
    const uint8_t *act = io->act + (size_t)t0 * io->act_row;
    float *y = io->y + (size_t)t0 * io->ldy + o + 8 * h;
    if (tn == 1)
        few(1, p, h, io->nb, act, io->act_row, next, k, n_pass, y, io->ldy, mask);
    else
        few(2, p, h, io->nb, act, io->act_row, next, k, n_pass, y, io->ldy, mask);
}

/* Up to KA_FEW tokens from a packed weight: per 16-row panel and half, a pass per two tokens. More
 * tokens go through panels unpacked from the copy (unpack), whose slices serve tiles of three. Zen 3,
 * 2 threads, weights from memory, `bench_gemm --cold [--packed] q4_k N K T` against the commit
 * before (the dots and the GEMM on the file's layout), 896 x 4864 and 4864 x 1024: 1 token
 * 0.085-0.154 -> 0.089-0.126 ms, 2 tokens 0.17-0.34 -> 0.09-0.12, 4 tokens 0.26-0.45 -> 0.15-0.20
 * (through unpacked panels 0.22-0.40), 8 tokens 0.38-0.56 -> 0.28-0.40 (unpacked 0.41-0.50); from 16
 * the two ways were level. */
#define KA_FEW 8

static void run_few(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                    float *y, size_t ldy) {
    mf_avx2_few_io io = {act, act_row, y, ldy, w->ne[0] / 256};
    mf_avx2_few_panels(w, o0, o1, nt, 2, few_pass, &io);
}

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const bool packed = mf_cpu_gemm_packed(&gemm, w);
    if (packed && nt <= KA_FEW) {
        run_few(w, o0, o1, act, act_row, nt, y, ldy);
        return;
    }
    const int64_t nb = w->ne[0] / 256, mc = max_chunk(nb);
    uint8_t *panel = scratch;
    __m256 *state = (__m256 *)(panel + (size_t)KA_SLICE * KA_BLOCK_BYTES); /* [t][s, sm] */
    const int64_t n_slices = (nb + KA_SLICE - 1) / KA_SLICE, slice = (nb + n_slices - 1) / n_slices;
    for (int64_t tc = 0; tc < nt; tc += mc) {
        const int64_t n = MF_MIN(mc, nt - tc);
        for (int64_t ob = o0; ob < o1; ob += 8) {
            const int nr = (int)MF_MIN(8, o1 - ob);
            const uint8_t *ahead = mf_gemm_ahead(w, ob, 8, o1, nt, 32);
            for (int64_t i0 = 0; i0 < nb; i0 += slice) {
                const int64_t i1 = MF_MIN(nb, i0 + slice);
                if (packed)
                    unpack(w, ob, i0, i1, panel);
                else
                    pack(w, ob, nr, i0, i1, panel, ahead);
                for (int64_t t = 0; t < n; t += KA_TILE) {
                    const mf_block_q8_K *a[KA_TILE];
                    __m256 *st[KA_TILE];
                    const int T = (int)MF_MIN(KA_TILE, n - t);
                    for (int k = 0; k < T; k++) {
                        a[k] = (const mf_block_q8_K *)(act + (size_t)(tc + t + k) * act_row);
                        st[k] = state + 2 * (t + k);
                    }
                    switch (T) {
                    case 1: tile(1, panel, i0, i1, a, st, i0 == 0); break;
                    case 2: tile(2, panel, i0, i1, a, st, i0 == 0); break;
                    default: tile(3, panel, i0, i1, a, st, i0 == 0); break;
                    }
                    for (int k = 0; k < T; k++) min_chain(panel, i0, i1, a[k], st[k] + 1, i0 == 0);
                }
            }
            const __m256i mask = mf_avx2_row_mask(nr);
            for (int64_t t = 0; t < n; t++) {
                const __m256 v = _mm256_sub_ps(_mm256_load_ps((const float *)(state + 2 * t)),
                                               _mm256_load_ps((const float *)(state + 2 * t + 1)));
                _mm256_maskstore_ps(y + (size_t)(tc + t) * ldy + ob, mask, v);
            }
        }
    }
}

/* min_tokens 2 for a weight in the file's layout: with the weights streamed ahead
 * (MF_GEMM_STREAM_AHEAD) the GEMM beats the four-row dots from 2 tokens (bench_gemm --cold, 2
 * threads, Zen 5 at the AVX2 level, 4864 x 1024, 2 tokens: Q4_K 0.14 vs 0.34 ms, Q5_K 0.24 vs 0.41,
 * Q6_K 0.26 vs 0.47; 1024 x 4864 alike). A packed weight takes this GEMM for every token count. */
static const mf_cpu_gemm gemm = {.min_tokens = 2,
                                  .scratch_size = scratch_size,
                                  .run = run,
                                  .packed_size = mf_q4_k_packed_size,
                                  .pack = mf_q4_k_pack,
                                  .packed_row = mf_q4_k_packed_row};

const mf_cpu_gemm *mf_cpu_gemm_q4_K_avx2(void) { return &gemm; }
