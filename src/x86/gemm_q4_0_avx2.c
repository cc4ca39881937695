/* gemm_q4_0_avx2.c: the Q4_0 prefill GEMM for AVX2 (and, built by gemm_q4_0_avxvnni.c, AVX-VNNI; see
 * gemm_avx2_util.h and cpu_gemm.h). Each output keeps
 * the repacked order's single float chain over the blocks i, s = fma((float)isum_i, d_w_i * d_a_i, s)
 * (dot_q4_0_rp in cpu_dot_order_avx2.c); only the exact integer block sums isum_i = sum((q - 8) * a)
 * are formed differently, as sum(q * a) - 8 * sum(a), by vpmaddubsw with the nibbles q (0..15) as
 * its unsigned operand and the token's four Q8_0 activation bytes, broadcast, as its signed one,
 * eight weight rows per vector (one row per 32-bit lane).
 *
 * Exactness: a vpmaddubsw pair is at most 2 * 15 * 128 = 3840 in magnitude, so the eight steps of a
 * block add up in int16 without overflow (30720 < 32767); one vpmaddwd by ones then leaves row r's
 * sum(q * a) in lane r. With AVX-VNNI, vpdpbusd sums each step straight into int32.
 *
 * The work goes in chunks of CHUNK blocks (each output's chain runs over the chunks in order, parked
 * in y between them) and of up to TILE tokens: per token chunk and block chunk the activations are
 * prepared once, then each 8-row panel slice is unpacked once and serves every tile of 4 tokens.
 * Scratch layouts:
 *   panel: per block i of the chunk, eight 32-byte vectors (step k: lane r holds row r's nibbles for
 *          positions 4k..4k+3 of the block, one byte each; k < 4 low nibbles of bytes 4k..4k+3,
 *          k >= 4 high nibbles of bytes 4(k-4)..), then the 8 rows' scales as floats: 288 bytes;
 *   acts:  per token t and block i of the chunk, the 32 quants ([t][i][32]), and per (t, i) the
 *          correction -8 * sum(quants) and the scale d_a. */
#include "cpu/cpu_dot_order.h"
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"
#include "x86/gemm_q4_0_packed.h"

#include <immintrin.h>
#include <string.h>

#define CHUNK 32
#define TILE 256
#define PBLK (8 * 32 + 8 * 4)
#define TT 4 /* tokens per micro tile */

static size_t scratch_size(int64_t K) {
    (void)K;
    return (size_t)CHUNK * PBLK + (size_t)TILE * CHUNK * (32 + 4 + 4);
}

/* Blocks [i0, i0 + cn) of tokens [0, n) of act into q (32 bytes per token and block), corr and da. */
static void prepare(const uint8_t *act, size_t act_row, int64_t n, int64_t i0, int64_t cn, uint8_t *q,
                    int32_t *corr, float *da) {
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t t = 0; t < n; t++) {
        const mf_block_q8_0 *a = (const mf_block_q8_0 *)(act + (size_t)t * act_row) + i0;
        for (int64_t i = 0; i < cn; i++) {
            const __m256i v = _mm256_loadu_si256((const __m256i *)a[i].qs);
            _mm256_store_si256((__m256i *)(q + (t * cn + i) * 32), v);
            __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16);
            __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
            h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 1));
            corr[t * cn + i] = -8 * _mm_cvtsi128_si32(h);
            da[t * cn + i] = _cvtsh_ss(a[i].d);
        }
    }
}

/* Blocks [i0, i0 + cn) of rows w, w + row_bytes, ... (nr <= 8; missing rows repeat the last one,
 * their outputs are never stored) into the panel layout: a 4 x 4 dword transpose within each
 * 128-bit lane (rows 0-3 in the low lane, 4-7 in the high one) gives step k's vector. */
static void pack_panel(const uint8_t *w, size_t row_bytes, int nr, int64_t i0, int64_t cn, uint8_t *panel,
                       const uint8_t *ahead) {
    const mf_block_q4_0 *row[8];
    for (int r = 0; r < 8; r++) row[r] = (const mf_block_q4_0 *)(w + (size_t)(r < nr ? r : nr - 1) * row_bytes);
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int64_t i = i0; i < i0 + cn; i++, panel += PBLK) {
        MF_GEMM_STREAM_AHEAD_ROWS(ahead, i, sizeof(mf_block_q4_0), 8, row_bytes);
        __m256i z[4];
        for (int j = 0; j < 4; j++)
            z[j] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)row[4 + j][i].qs),
                                    _mm_loadu_si128((const __m128i *)row[j][i].qs));
        const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
        const __m256i d[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                              _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
        __m256i *p = (__m256i *)panel;
        for (int k = 0; k < 4; k++) {
            _mm256_store_si256(p + k, _mm256_and_si256(d[k], m4));
            _mm256_store_si256(p + 4 + k, _mm256_and_si256(_mm256_srli_epi16(d[k], 4), m4));
        }
        uint16_t h[8];
        for (int r = 0; r < 8; r++) memcpy(&h[r], &row[r][i].d, 2);
        _mm256_store_ps((float *)(p + 8), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)));
    }
}

/* A block's step k for one token: acc + the eight rows' products of wk (lane r: row r's four nibbles)
 * with the token's four bytes x; MF_Q40_SUM turns the sums into int32 lanes. Without VNNI the steps
 * add up in int16 (exact, see above) and one vpmaddwd by ones (ones16 in scope) widens them. */
#if defined(__AVXVNNI__)
#define MF_Q40_MUL(acc, wk, x) _mm256_dpbusd_avx_epi32(acc, wk, x)
#define MF_Q40_SUM(acc) (acc)
#else
#define MF_Q40_MUL(acc, wk, x) _mm256_adds_epi16(acc, _mm256_maddubs_epi16(wk, x))
#define MF_Q40_SUM(acc) _mm256_madd_epi16(acc, ones16)
#endif

/* 8 rows x T tokens (tokens t of the chunk, q/corr/da at their first block) over cn blocks,
 * continuing the chains left in y unless first. Each token's chain and block sum is a variable of
 * its own (T a constant: the unused ones vanish), and the int16 sums use the saturating add (exact:
 * they never reach 32767, see above), which the compiler does not reassociate: with plain adds it
 * turned each chain into a tree, keeping all 32 products of a block alive and spilling them. */
static inline __attribute__((always_inline)) void micro(const int T, int64_t cn, const uint8_t *panel,
                                                        const uint8_t *q, const int32_t *corr, const float *da,
                                                        float *y, size_t ldy, __m256i mask, bool first) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    if (!first) {
        s0 = _mm256_maskload_ps(y, mask);
        if (T > 1) s1 = _mm256_maskload_ps(y + ldy, mask);
        if (T > 2) s2 = _mm256_maskload_ps(y + 2 * ldy, mask);
        if (T > 3) s3 = _mm256_maskload_ps(y + 3 * ldy, mask);
    }
    const __m256i ones16 = _mm256_set1_epi16(1);
    (void)ones16; /* the AVX-VNNI build sums in int32 */
    const size_t qs = (size_t)cn * 32; /* bytes from one token's quants to the next's */
    for (int64_t i = 0; i < cn; i++, panel += PBLK) {
        const __m256i *p = (const __m256i *)panel;
        const uint8_t *qi = q + (size_t)i * 32;
        __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            const __m256i wk = _mm256_load_si256(p + k);
            a0 = MF_Q40_MUL(a0, wk, mf_avx2_bcast4(qi + 4 * k));
            if (T > 1) a1 = MF_Q40_MUL(a1, wk, mf_avx2_bcast4(qi + qs + 4 * k));
            if (T > 2) a2 = MF_Q40_MUL(a2, wk, mf_avx2_bcast4(qi + 2 * qs + 4 * k));
            if (T > 3) a3 = MF_Q40_MUL(a3, wk, mf_avx2_bcast4(qi + 3 * qs + 4 * k));
        }
        const __m256 dw = _mm256_load_ps((const float *)(p + 8));
#define MF_Q40_STEP(t, acc, s)                                                                                   \
    s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(MF_Q40_SUM(acc),                                     \
                                                            _mm256_set1_epi32(corr[(size_t)(t) * cn + i]))),     \
                        _mm256_mul_ps(dw, _mm256_set1_ps(da[(size_t)(t) * cn + i])), s)
        MF_Q40_STEP(0, a0, s0);
        if (T > 1) MF_Q40_STEP(1, a1, s1);
        if (T > 2) MF_Q40_STEP(2, a2, s2);
        if (T > 3) MF_Q40_STEP(3, a3, s3);
#undef MF_Q40_STEP
    }
    _mm256_maskstore_ps(y, mask, s0);
    if (T > 1) _mm256_maskstore_ps(y + ldy, mask, s1);
    if (T > 2) _mm256_maskstore_ps(y + 2 * ldy, mask, s2);
    if (T > 3) _mm256_maskstore_ps(y + 3 * ldy, mask, s3);
}

/* ---- a packed weight (gemm_q4_0_packed.h: sixteen rows a panel, each 64-byte vector two of ours) ---- */

/* Half h (rows 8h..8h+7) of the packed block b: its eight steps' nibbles into q (as the panel layout
 * holds them) and its rows' scales, returned as floats. */
static inline __attribute__((always_inline)) __m256 packed_half(const uint8_t *b, int h, __m256i q[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    for (int j = 0; j < 4; j++) {
        const __m256i u = _mm256_loadu_si256((const __m256i *)(b + 64 * j + 32 * h));
        q[j] = _mm256_and_si256(u, m4);
        q[4 + j] = _mm256_and_si256(_mm256_srli_epi16(u, 4), m4);
    }
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + 256 + 16 * h)));
}

/* Half h (rows 8h..8h+7) of the packed panel at p: blocks [i0, i0 + cn) into the panel layout above. */
static void unpack_panel(const uint8_t *p, int h, int64_t i0, int64_t cn, uint8_t *panel) {
    for (int64_t i = i0; i < i0 + cn; i++, panel += PBLK) {
        __m256i q[8], *o = (__m256i *)panel;
        const __m256 dw = packed_half(p + (size_t)i * MF_Q40_PBLK, h, q);
        for (int k = 0; k < 8; k++) _mm256_store_si256(o + k, q[k]);
        _mm256_store_ps((float *)(o + 8), dw);
    }
}

/* One token's chain step over that half: qa its 32 quants of the block, c and da its correction and
 * scale (the side data), dw the rows' scales. */
static inline __attribute__((always_inline)) __m256 packed_step(const __m256i q[8], const uint8_t *qa, int32_t c,
                                                                __m256 dw, float da, __m256 s) {
    const __m256i ones16 = _mm256_set1_epi16(1);
    (void)ones16; /* the AVX-VNNI build sums in int32 */
    __m256i acc = _mm256_setzero_si256();
    for (int k = 0; k < 8; k++) acc = MF_Q40_MUL(acc, q[k], mf_avx2_bcast4(qa + 4 * k));
    const __m256i sum = _mm256_add_epi32(MF_Q40_SUM(acc), _mm256_set1_epi32(c));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(da)), s);
}

/* Up to FEW_MAX tokens (decode, the decode steps of several sequences, speculative verifications)
 * straight from a packed weight, with no panel scratch: per block, each half's nibbles are split in
 * registers and used by up to FEW tokens, a panel's further tokens in further passes over it while
 * it is in cache. Per token and block the chain step is the GEMM's, with the correction -8 * sum(a)
 * and d_a read from the rows' side data (mf_cpu_q4_0_aux, computed once per row by the matmul:
 * packed_aux_tokens). Against the eight-row dots on the file's layout (dot_q4_0_rp_x8n) this drops
 * the per-block transpose of eight rows' words and the scales' gathering, and reads each matrix as
 * one stream front to back. One or two tokens take both halves of a block in one pass; three or four
 * (whose chains and nibbles would not fit the sixteen registers with both halves) a pass a half
 * (few_half). Zen 3, 2 threads, weights from memory, `bench_gemm --cold --packed q4_0 4864 896 T`
 * against the dots on the file's layout, five alternations: 1 token 0.082-0.131 -> 0.071-0.094 ms,
 * 2 tokens 0.099-0.132 -> 0.077-0.096, 8 tokens 0.31-0.35 -> 0.28-0.31 (16 level with the GEMM);
 * the Q4_0 matrices of a four-token 0.5B decode step (`bench_step -s 4 --ops`) 20.2 -> 16.0 ms (a
 * pass for both halves: 18.4). */
#define FEW 4
#define FEW_MAX 8

static inline __attribute__((always_inline)) void few_panel(const int T, int64_t nb, const uint8_t *p, const int nh,
                                                            const uint8_t *act, size_t act_row, float *y, size_t ldy,
                                                            __m256i mask1) {
    const size_t aux_at = mf_cpu_q4_0_aux_offset(32 * nb);
    __m256 s[2][FEW];
    for (int h = 0; h < 2; h++)
        for (int t = 0; t < T; t++) s[h][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * MF_Q40_PBLK;
        /* the stream, eight blocks (2.3 KB) ahead; past the panel's end it runs into the next one */
        for (int l = 0; l < MF_Q40_PBLK; l += 64) _mm_prefetch((const char *)b + 8 * MF_Q40_PBLK + l, _MM_HINT_T0);
        int32_t c[FEW];
        float da[FEW];
        for (int t = 0; t < T; t++) mf_cpu_q4_0_aux_get(act + (size_t)t * act_row + aux_at, nb, i, &c[t], &da[t]);
        for (int h = 0; h < nh; h++) {
            __m256i q[8];
            const __m256 dw = packed_half(b, h, q);
            for (int t = 0; t < T; t++)
                s[h][t] = packed_step(q, act + (size_t)t * act_row + (size_t)i * sizeof(mf_block_q8_0) + 2, c[t], dw, da[t],
                                      s[h][t]);
        }
    }
    for (int t = 0; t < T; t++) {
        if (nh == 2) {
            _mm256_storeu_ps(y + (size_t)t * ldy, s[0][t]);
            _mm256_maskstore_ps(y + (size_t)t * ldy + 8, mask1, s[1][t]);
        } else {
            _mm256_maskstore_ps(y + (size_t)t * ldy, mask1, s[0][t]);
        }
    }
}

/* The same for T tokens of half h alone (rows 8h..8h+7), so that three or four tokens' chains and a
 * block's nibbles stay in registers: the second half's pass finds the panel in cache, and each pass
 * fetches half of the next panel (next, contiguous with this one) into L2, spread over its blocks, so
 * that the memory is busy through both. */
static inline __attribute__((always_inline)) void few_half(const int T, int64_t nb, const uint8_t *p, const int h,
                                                           const uint8_t *act, size_t act_row, float *y, size_t ldy,
                                                           __m256i mask) {
    const size_t aux_at = mf_cpu_q4_0_aux_offset(32 * nb);
    const char *next = (const char *)p + (size_t)nb * MF_Q40_PBLK + (size_t)h * nb * (MF_Q40_PBLK / 2);
    __m256 s[FEW];
    for (int t = 0; t < T; t++) s[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * MF_Q40_PBLK;
        const char *f = next + (size_t)i * (MF_Q40_PBLK / 2);
        _mm_prefetch(f, _MM_HINT_T1);
        _mm_prefetch(f + 64, _MM_HINT_T1);
        _mm_prefetch(f + 128, _MM_HINT_T1);
        __m256i q[8];
        const __m256 dw = packed_half(b, h, q);
        for (int t = 0; t < T; t++) {
            const uint8_t *at = act + (size_t)t * act_row;
            int32_t c;
            float da;
            mf_cpu_q4_0_aux_get(at + aux_at, nb, i, &c, &da);
            s[t] = packed_step(q, at + (size_t)i * sizeof(mf_block_q8_0) + 2, c, dw, da, s[t]);
        }
    }
    for (int t = 0; t < T; t++) _mm256_maskstore_ps(y + (size_t)t * ldy, mask, s[t]);
}

typedef void (*few_fn)(int64_t nb, const uint8_t *p, const uint8_t *act, size_t act_row, float *y, size_t ldy,
                       __m256i mask1);
#define FEW_FN(T, NH)                                                                                                  \
    static void few_##T##_##NH(int64_t nb, const uint8_t *p, const uint8_t *act, size_t act_row, float *y,           \
                               size_t ldy, __m256i mask1) {                                                            \
        if (T <= 2 || NH == 1) {                                                                                       \
            few_panel(T, nb, p, NH, act, act_row, y, ldy, mask1);                                                      \
        } else {                                                                                                       \
            few_half(T, nb, p, 0, act, act_row, y, ldy, _mm256_set1_epi32(-1));                                       \
            few_half(T, nb, p, 1, act, act_row, y + 8, ldy, mask1);                                                    \
        }                                                                                                              \
    }
FEW_FN(1, 1) FEW_FN(2, 1) FEW_FN(3, 1) FEW_FN(4, 1) FEW_FN(1, 2) FEW_FN(2, 2) FEW_FN(3, 2) FEW_FN(4, 2)
#undef FEW_FN
static const few_fn few_fns[2][FEW] = {{few_1_1, few_2_1, few_3_1, few_4_1}, {few_1_2, few_2_2, few_3_2, few_4_2}};

static void run_few(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                    float *y, size_t ldy) {
    const int64_t nb = w->ne[0] / 32;
    for (int64_t o = o0; o < o1; o += 16) {
        const int64_t nr = MF_MIN(16, o1 - o);
        const int nh = nr > 8 ? 2 : 1; /* the second half's rows, where there are any */
        const __m256i mask1 = mf_avx2_row_mask((int)(nr > 8 ? nr - 8 : nr));
        const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
        for (int64_t t0 = 0; t0 < nt; t0 += FEW)
            few_fns[nh - 1][MF_MIN(FEW, nt - t0) - 1](nb, p, act + (size_t)t0 * act_row, act_row, y + (size_t)t0 * ldy + o,
                                                      ldy, mask1);
    }
}

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const bool packed = mf_cpu_gemm_packed(&gemm, w);
    if (packed && nt <= FEW_MAX) {
        run_few(w, o0, o1, act, act_row, nt, y, ldy);
        return;
    }
    const int64_t nb = w->ne[0] / 32;
    uint8_t *panel = scratch;
    uint8_t *q = panel + (size_t)CHUNK * PBLK;
    int32_t *corr = (int32_t *)(q + (size_t)TILE * CHUNK * 32);
    float *da = (float *)(corr + TILE * CHUNK);
    for (int64_t t0 = 0; t0 < nt; t0 += TILE) {
        const int64_t tn = MF_MIN(TILE, nt - t0);
        for (int64_t c = 0; c < nb; c += CHUNK) {
            const int64_t cn = MF_MIN(CHUNK, nb - c);
            const bool first = c == 0;
            prepare(act + (size_t)t0 * act_row, act_row, tn, c, cn, q, corr, da);
            for (int64_t o = o0; o < o1; o += 8) {
                const int nr = (int)MF_MIN(8, o1 - o);
                const __m256i mask = mf_avx2_row_mask(nr);
                if (packed)
                    unpack_panel((const uint8_t *)w->packed + (size_t)(o & ~(int64_t)15) * w->row_bytes, (int)(o / 8 % 2), c,
                                 cn, panel);
                else
                    pack_panel((const uint8_t *)w->data + (size_t)o * w->row_bytes, w->row_bytes, nr, c, cn, panel,
                               mf_gemm_ahead(w, o, 8, o1, nt, 32));
                for (int64_t t = 0; t < tn; t += TT) {
                    const uint8_t *qt = q + (size_t)(t * cn) * 32;
                    const int32_t *ct = corr + t * cn;
                    const float *dt = da + t * cn;
                    float *yt = y + (size_t)(t0 + t) * ldy + o;
                    switch (MF_MIN(TT, tn - t)) {
                    case 1: micro(1, cn, panel, qt, ct, dt, yt, ldy, mask, first); break;
                    case 2: micro(2, cn, panel, qt, ct, dt, yt, ldy, mask, first); break;
                    case 3: micro(3, cn, panel, qt, ct, dt, yt, ldy, mask, first); break;
                    default: micro(4, cn, panel, qt, ct, dt, yt, ldy, mask, first); break;
                    }
                }
            }
        }
    }
}

/* min_tokens 5 for a weight in the file's layout: below it, packing the panels costs more than the
 * tiles save (a server's decode step of four sequences, 0.5B shape on a 2-core Zen 3: 47 tokens/s
 * with the GEMM, 51 with the dots). A packed weight takes this GEMM for every token count. */
static const mf_cpu_gemm gemm = {.min_tokens = 5,
                                  .scratch_size = scratch_size,
                                  .run = run,
                                  .packed_size = mf_q4_0_packed_size,
                                  .pack = mf_q4_0_pack,
                                  .packed_row = mf_q4_0_packed_row,
                                  .packed_aux_tokens = FEW_MAX};

const mf_cpu_gemm *MF_AVX2_GEMM(mf_cpu_gemm_q4_0)(void) { return &gemm; }
