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
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"

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
#if defined(__AVXVNNI__)
        /* the block sums in int32, one vpdpbusd per step */
#define MF_Q40_MUL(acc, wk, x) _mm256_dpbusd_avx_epi32(acc, wk, x)
#define MF_Q40_SUM(acc) (acc)
#else
#define MF_Q40_MUL(acc, wk, x) _mm256_adds_epi16(acc, _mm256_maddubs_epi16(wk, x))
#define MF_Q40_SUM(acc) _mm256_madd_epi16(acc, ones16)
#endif
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
#undef MF_Q40_MUL
#undef MF_Q40_SUM
    }
    _mm256_maskstore_ps(y, mask, s0);
    if (T > 1) _mm256_maskstore_ps(y + ldy, mask, s1);
    if (T > 2) _mm256_maskstore_ps(y + 2 * ldy, mask, s2);
    if (T > 3) _mm256_maskstore_ps(y + 3 * ldy, mask, s3);
}

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
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
                const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
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

/* min_tokens 5: below it, packing the panels costs more than the tiles save (a server's decode step
 * of four sequences, 0.5B shape on a 2-core Zen 3: 47 tokens/s with the GEMM, 51 with the dots). */
static const mf_cpu_gemm gemm = {.min_tokens = 5, .scratch_size = scratch_size, .run = run};

const mf_cpu_gemm *MF_AVX2_GEMM(mf_cpu_gemm_q4_0)(void) { return &gemm; }
