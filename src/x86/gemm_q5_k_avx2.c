/* gemm_q5_k_avx2.c: the Q5_K prefill GEMM for AVX2 without VNNI (see cpu_gemm.h). Each output keeps
 * the plain ordered dot's float steps (st_q5_K in cpu_dot_order_avx2.c): eight float lanes, lane p
 * taking per super-block acc_p = fma(d_a * d_w, (float)L_p, acc_p), with L_p the exact sum, over the
 * eight 32-value sub-blocks j, of sc[j] * q * a at values 32j + 4p..+3 (q the unsigned 5-bit
 * weight), and the minimums' chain s = fma(-d_a * dmin_w, (float)M, s) with M = sum of mn[j] * S[j]
 * (S[j]: sub-block j's activation sum); the output is ((acc0+acc4)+(acc2+acc6)) +
 * ((acc1+acc5)+(acc3+acc7)) + s.
 *
 * Eight weight rows per vector (one per 32-bit lane): for lane p and sub-block j, one vpmaddubsw of
 * the rows' four q (<= 31) against the token's four activation bytes (broadcast) and one vpmaddwd
 * by the rows' (sc[j], sc[j]); M of the eight rows is four vpmaddwd of (mn[2c], mn[2c+1]) by the
 * broadcast (S[2c], S[2c+1]).
 *
 * Panel layout (per-thread scratch), per super-block of a slice: for sub-block j and step p the
 * vector of the 8 rows' q at values 32j + 4p..+3 (64 vectors), the 8 vectors (sc[j], sc[j]), the 4
 * vectors (mn[2c], mn[2c+1]), then h2f(d) and h2f(dmin) of the 8 rows: 2496 bytes; rows past the
 * matrix are zeros. Slices of up to K5_SLICE super-blocks (20 KB) stay in L1 while a chunk's tokens
 * pass over them one by one, each token's nine accumulators parked in scratch between slices.
 *
 * A weight packed at load (gemm_q5_k_packed.h) serves up to K5_FEW tokens straight from its bytes,
 * a pass per token and half panel (few_token), and more through panel slices unpacked from it
 * (unpack) rather than transposed from the file's blocks (pack). */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"
#include "x86/gemm_q5_k_packed.h"
#include "simd/kquant_common.h"

#include <string.h>

enum {
    K5_BLOCK_BYTES = (64 + 8 + 4 + 2) * 32,
    K5_SLICE = 8,
};

static int64_t max_chunk(int64_t nb) { return mf_avx2_k_chunk((size_t)nb * sizeof(mf_block_q8_K)); }

static size_t scratch_size(int64_t K) {
    return (size_t)K5_SLICE * K5_BLOCK_BYTES + (size_t)max_chunk(K / 256) * 9 * 32;
}

/* Super-blocks [i0, i1) of rows [ob, ob + nr) (nr <= 8) into the panel layout; sub-blocks 2c and
 * 2c+1 of a row are formed as k4_sum forms them (nibbles of qs chunk c, fifth bits 2c, 2c+1 of qh). */
static void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                 const uint8_t *ahead) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    for (int64_t i = i0; i < i1; i++, panel += K5_BLOCK_BYTES) {
        MF_GEMM_STREAM_AHEAD(ahead, i, 8 * sizeof(mf_block_q5_K));
        const mf_block_q5_K *row[8];
        for (int r = 0; r < 8; r++)
            row[r] = r < nr ? (const mf_block_q5_K *)(base + (size_t)r * w->row_bytes) + i : NULL;
        __m256i *p = (__m256i *)panel;
        for (int c = 0; c < 4; c++) {
            __m256i lo[8], hi[8];
            for (int r = 0; r < 8; r++) {
                if (!row[r]) {
                    lo[r] = hi[r] = _mm256_setzero_si256();
                    continue;
                }
                const __m256i bits = _mm256_loadu_si256((const __m256i *)(row[r]->qs + 32 * c));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)row[r]->qh);
                lo[r] = _mm256_or_si256(_mm256_and_si256(bits, m4),
                                        _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hb, 2 * c), 4), b4));
                hi[r] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m4),
                                        _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hb, 2 * c + 1), 4), b4));
            }
            mf_avx2_transpose8_i32(lo, p + 8 * (2 * c));
            mf_avx2_transpose8_i32(hi, p + 8 * (2 * c + 1));
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

/* One token (its Q8_K row a) against super-blocks [i0, i1) of the panel: the accumulators (eight
 * lanes, then the minimums' chain) start at zero (first) or from st and end in st or, after the
 * last (last), as the outputs y[0..8) (lanes in mask). */
static void token(const uint8_t *panel, int64_t i0, int64_t i1, const mf_block_q8_K *a, __m256 *st, bool first,
                  bool last, float *y, __m256i mask) {
    __m256 acc[8], sm = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st + 8));
    for (int p = 0; p < 8; p++) acc[p] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st + p));
    for (int64_t i = i0; i < i1; i++, panel += K5_BLOCK_BYTES) {
        const __m256i *pb = (const __m256i *)panel;
        /* the minimums: M of the eight rows from the sub-block sums S[j] = bsums[2j] + bsums[2j+1] */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        int32_t sp[4];
        _mm_storeu_si128((__m128i *)sp, _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
        __m256i ms = _mm256_madd_epi16(_mm256_load_si256(pb + 72), _mm256_set1_epi32(sp[0]));
        for (int c = 1; c < 4; c++)
            ms = _mm256_add_epi32(ms, _mm256_madd_epi16(_mm256_load_si256(pb + 72 + c), _mm256_set1_epi32(sp[c])));
        const __m256 dmin = _mm256_mul_ps(_mm256_set1_ps(-a[i].d), _mm256_load_ps((const float *)(pb + 77)));
        sm = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(ms), sm);
        const __m256 d = _mm256_mul_ps(_mm256_broadcast_ss(&a[i].d), _mm256_load_ps((const float *)(pb + 76)));
        const uint8_t *qa = (const uint8_t *)a[i].qs;
        for (int p = 0; p < 8; p++) {
            __m256i l = _mm256_setzero_si256();
            for (int j = 0; j < 8; j++) {
                const __m256i m = _mm256_maddubs_epi16(_mm256_load_si256(pb + 8 * j + p), mf_avx2_bcast4(qa + 32 * j + 4 * p));
                l = _mm256_add_epi32(l, _mm256_madd_epi16(m, _mm256_load_si256(pb + 64 + j)));
            }
            acc[p] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc[p]);
        }
    }
    if (!last) {
        for (int p = 0; p < 8; p++) _mm256_store_ps((float *)(st + p), acc[p]);
        _mm256_store_ps((float *)(st + 8), sm);
        return;
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                   _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    _mm256_maskstore_ps(y, mask, _mm256_add_ps(s, sm));
}

/* ---- a packed weight (gemm_q5_k_packed.h: sixteen rows a panel, each 64-byte vector two of ours) ---- */

/* Vector k of half h (rows 8h..8h+7) of the packed super-block b. */
static inline __m256i pvec(const uint8_t *b, int h, int k) { return _mm256_loadu_si256((const __m256i *)(b + 64 * k + 32 * h)); }

/* The fifth bits of sub-block j as 0x10 in each byte, from the rows' qh word of a step (bit j of
 * each byte): moved to bit 4 by a 16-bit shift (what crosses from the neighbouring byte lands below
 * bit 4 or above it, and is masked off). */
static inline __m256i fifth(__m256i qh, int j) {
    return _mm256_and_si256(j <= 4 ? _mm256_slli_epi16(qh, 4 - j) : _mm256_srli_epi16(qh, j - 4), _mm256_set1_epi8(0x10));
}

/* Sub-blocks 2c and 2c+1 of a step of eight rows: their 5-bit values (the panel layout's q) from
 * the step's qs word v (nibbles) and qh word. */
static inline __attribute__((always_inline)) void q5_pair(__m256i v, __m256i qh, int c, __m256i *lo, __m256i *hi) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    *lo = _mm256_or_si256(_mm256_and_si256(v, m4), fifth(qh, 2 * c));
    *hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), fifth(qh, 2 * c + 1));
}

/* Super-blocks [i0, i1) of the half of a packed panel that holds rows [ob, ob + 8) into the panel
 * layout above (ob is o0 + 8k, o0 a multiple of 16); the first half's pass fetches the same
 * super-blocks of the next panel into L2 (past the matrix: a prefetch never faults). */
static void unpack(const mf_weight *w, int64_t ob, int64_t i0, int64_t i1, uint8_t *panel) {
    const size_t sbb = MF_Q5K_PVEC * 64;
    const int h = (int)(ob / 8 % 2);
    const uint8_t *pk = (const uint8_t *)w->packed + (size_t)(ob - 8 * h) * w->row_bytes;
    for (int64_t i = i0; i < i1; i++, panel += K5_BLOCK_BYTES) {
        const uint8_t *b = pk + (size_t)i * sbb;
        if (h == 0)
            for (size_t l = 0; l < sbb; l += 64) _mm_prefetch((const char *)b + 16 * w->row_bytes + l, _MM_HINT_T1);
        __m256i *p = (__m256i *)panel;
        for (int k = 0; k < 8; k++) {
            const __m256i qh = pvec(b, h, MF_Q5K_PQH + k);
            for (int c = 0; c < 4; c++) {
                __m256i lo, hi;
                q5_pair(pvec(b, h, MF_Q5K_PQS + 8 * c + k), qh, c, &lo, &hi);
                _mm256_store_si256(p + 8 * (2 * c) + k, lo);
                _mm256_store_si256(p + 8 * (2 * c + 1) + k, hi);
            }
        }
        __m256 d, dm;
        __m256i s0, s1, m0, m1;
        mf_avx2_k_packed_scales(b + 64 * MF_Q5K_PDM + 32 * h, &d, &dm, &s0, &s1, &m0, &m1);
        for (int j = 0; j < 8; j++) _mm256_store_si256(p + 64 + j, mf_avx2_k_sc_pair(s0, s1, j));
        for (int c = 0; c < 4; c++) _mm256_store_si256(p + 72 + c, mf_avx2_k_mn_pair(m0, m1, c));
        _mm256_store_ps((float *)(p + 76), d);
        _mm256_store_ps((float *)(p + 77), dm);
    }
}

/* One token (its Q8_K row a) against half h of the packed panel at p, nsb super-blocks, straight
 * from the packed bytes: token()'s steps, each step's values formed in registers from its qs and qh
 * words instead of read from a panel copy. Pass k of a panel's n_pass fetches its share of the next
 * panel (next, NULL: none; mf_few_share). */
static void few_token(const uint8_t *p, int h, int64_t nsb, const mf_block_q8_K *a, const uint8_t *next, int k,
                      int n_pass, float *y, __m256i mask) {
    const size_t sbb = MF_Q5K_PVEC * 64;
    __m256 acc[8], sm = _mm256_setzero_ps();
    for (int q = 0; q < 8; q++) acc[q] = _mm256_setzero_ps();
    __m256i sc[8] __attribute__((aligned(32)));
    mf_few_share pf = mf_few_share_of(next, k, n_pass, nsb, sbb);
    for (int64_t i = 0; i < nsb; i++) {
        const uint8_t *b = p + (size_t)i * sbb;
        MF_FEW_SHARE_STEP(pf);
        __m256 dw, dmw;
        __m256i s0, s1, m0, m1;
        mf_avx2_k_packed_scales(b + 64 * MF_Q5K_PDM + 32 * h, &dw, &dmw, &s0, &s1, &m0, &m1);
        for (int j = 0; j < 8; j++) sc[j] = mf_avx2_k_sc_pair(s0, s1, j);
        /* the minimums, as token() forms them */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)a[i].bsums);
        int32_t sp[4];
        _mm_storeu_si128((__m128i *)sp, _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1)));
        __m256i ms = _mm256_madd_epi16(mf_avx2_k_mn_pair(m0, m1, 0), _mm256_set1_epi32(sp[0]));
        for (int c = 1; c < 4; c++)
            ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mf_avx2_k_mn_pair(m0, m1, c), _mm256_set1_epi32(sp[c])));
        sm = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(-a[i].d), dmw), _mm256_cvtepi32_ps(ms), sm);
        const __m256 d = _mm256_mul_ps(_mm256_broadcast_ss(&a[i].d), dw);
        const uint8_t *qa = (const uint8_t *)a[i].qs;
        for (int q = 0; q < 8; q++) {
            const __m256i qh = pvec(b, h, MF_Q5K_PQH + q);
            __m256i l = _mm256_setzero_si256();
            for (int c = 0; c < 4; c++) {
                __m256i lo, hi;
                q5_pair(pvec(b, h, MF_Q5K_PQS + 8 * c + q), qh, c, &lo, &hi);
                l = _mm256_add_epi32(l, _mm256_madd_epi16(_mm256_maddubs_epi16(lo, mf_avx2_bcast4(qa + 64 * c + 4 * q)),
                                                          sc[2 * c]));
                l = _mm256_add_epi32(l, _mm256_madd_epi16(_mm256_maddubs_epi16(hi, mf_avx2_bcast4(qa + 64 * c + 32 + 4 * q)),
                                                          sc[2 * c + 1]));
            }
            acc[q] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc[q]);
        }
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                   _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    _mm256_maskstore_ps(y, mask, _mm256_add_ps(s, sm));
}

/* Up to K5_FEW tokens from a packed weight: per 16-row panel and half, a pass per token (few_token);
 * more go through panels unpacked from the copy (unpack). Zen 3, 2 threads, weights from memory,
 * `bench_gemm --cold [--packed] q5_k 8192 2048 T`, three runs each: 1 token 0.61-0.86 ms on the
 * file's four-row dots against 0.53-0.57 from the copy, 2 tokens 1.1-1.8 (the GEMM packing panels
 * from the file) against 0.62-1.12; from the copy, 4 tokens in passes 1.14-1.53 ms against
 * 1.43-1.48 through unpacked panels, 8 tokens 2.6-4.0 against 1.8-2.3. */
#define K5_FEW 4

/* A pass of one token (mf_avx2_few_pass_fn). */
static void few_pass(void *ctx, const uint8_t *p, const uint8_t *next, int h, int64_t o, int64_t t0, int tn, int k,
                     int n_pass, __m256i mask) {
    (void)tn;
    const mf_avx2_few_io *io = ctx;
    few_token(p, h, io->nb, (const mf_block_q8_K *)(io->act + (size_t)t0 * io->act_row), next, k, n_pass,
              io->y + (size_t)t0 * io->ldy + o + 8 * h, mask);
}

static void run_few(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                    float *y, size_t ldy) {
    mf_avx2_few_io io = {act, act_row, y, ldy, w->ne[0] / 256};
    mf_avx2_few_panels(w, o0, o1, nt, 1, few_pass, &io);
}

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const bool packed = mf_cpu_gemm_packed(&gemm, w);
    if (packed && nt <= K5_FEW) {
        run_few(w, o0, o1, act, act_row, nt, y, ldy);
        return;
    }
    const int64_t nb = w->ne[0] / 256, mc = max_chunk(nb);
    uint8_t *panel = scratch;
    __m256 *state = (__m256 *)(panel + (size_t)K5_SLICE * K5_BLOCK_BYTES);
    const int64_t n_slices = (nb + K5_SLICE - 1) / K5_SLICE, slice = (nb + n_slices - 1) / n_slices;
    for (int64_t tc = 0; tc < nt; tc += mc) {
        const int64_t n = MF_MIN(mc, nt - tc);
        for (int64_t ob = o0; ob < o1; ob += 8) {
            const int nr = (int)MF_MIN(8, o1 - ob);
            const __m256i mask = mf_avx2_row_mask(nr);
            const uint8_t *ahead = mf_gemm_ahead(w, ob, 8, o1, nt, 32);
            for (int64_t i0 = 0; i0 < nb; i0 += slice) {
                const int64_t i1 = MF_MIN(nb, i0 + slice);
                if (packed)
                    unpack(w, ob, i0, i1, panel);
                else
                    pack(w, ob, nr, i0, i1, panel, ahead);
                for (int64_t t = 0; t < n; t++)
                    token(panel, i0, i1, (const mf_block_q8_K *)(act + (size_t)(tc + t) * act_row), state + 9 * t,
                          i0 == 0, i1 == nb, y + (size_t)(tc + t) * ldy + ob, mask);
            }
        }
    }
}

/* min_tokens 2: with the weights streamed ahead (MF_GEMM_STREAM_AHEAD) the GEMM beats the four-row
 * dots from 2 tokens (bench_gemm --cold, 2 threads, Zen 5 at the AVX2 level, 4864 x 1024, 2 tokens:
 * Q4_K 0.14 vs 0.34 ms, Q5_K 0.24 vs 0.41, Q6_K 0.26 vs 0.47; 1024 x 4864 alike). A packed weight
 * takes this GEMM for every token count. */
static const mf_cpu_gemm gemm = {.min_tokens = 2,
                                  .scratch_size = scratch_size,
                                  .run = run,
                                  .packed_size = mf_q5_k_packed_size,
                                  .pack = mf_q5_k_pack,
                                  .packed_row = mf_q5_k_packed_row};

const mf_cpu_gemm *mf_cpu_gemm_q5_K_avx2(void) { return &gemm; }
