/* gemm_q5_k_avx512.c: the Q5_K prefill GEMM for AVX-512 VNNI (see cpu_gemm.h). Each panel of 16
 * weight rows is unpacked into a row-interleaved scratch copy (one row per i32 lane); every tile of
 * 8 tokens then forms the ordered dot's exact integer lanes and minimum sums for the 16 rows at once
 * and takes its float steps lane-wise, so each output is bit for bit the ordered Q5_K dot. */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx512_util.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* The ordered dot (plain 8-lane order), per super-block of 256 values, one weight row against one
 * Q8_K activation block a (sub-block j = values 32j .. 32j+31, 6-bit scale sc[j] and min mn[j]):
 *     isum[p] = sum over j (0..7) of sc[j] * D(j, p),
 *     D(j, p) = sum_{i=0..3} q[32j + 4p + i] * a[32j + 4p + i]       (q = 5-bit value, 0..31)
 *     msum    = sum over j of mn[j] * (S[2j] + S[2j+1])                (S: the activation's bsums)
 *     acc[p] = fma(a.d * h2f(w.d), (float)isum[p], acc[p])
 *     s      = fma(-a.d * h2f(w.dmin), (float)msum, s)
 * and the output is (((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7))) + s.
 *
 * Integer steps, 16 rows per zmm (lane r: row r). vpdpbusd gives D(j, p) of the 16 rows against the
 * token's 4 bytes, broadcast. |D| <= 4 * 31 * 128 < 2^15, so two of them fit one i32 lane as int16
 * halves, and one vpdpwssd against the scale pair (sc[2k], sc[2k+1]) multiplies both by their
 * scales and accumulates them: 3 multiply instructions per 128 products instead of 4. The packing
 * without a borrow between the halves: x = 0x80008000 + D(2k+1) (no carry out of the low half, so
 * the high half stays 0x8000); swapping the halves gives 0x8000 + D(2k+1) high and 0x8000 low;
 * adding D(2k) keeps the low half in [0, 65535]; xor 0x80008000 turns both biased halves into the
 * signed int16 values. msum: with P[i] = S[2i] + S[2i+1] (an int16, |P| <= 32 * 128), one vpdpwssd
 * per two sub-blocks, the pair (mn[2i], mn[2i+1]) against the token's pair (P[2i], P[2i+1]). All
 * exact: any order gives the same isum and msum, and the float steps are the ordered dot's.
 *
 * Cost per super-block and token (16 rows: 4096 products): 64 vpdpbusd, 32 vpdpwssd and 8 fma, and
 * for the minimums 4 vpdpwssd and 3 float steps, all on the two pipes that take multiplies (two a
 * cycle): a bound of ~300 GMAC/s a core at 4.1 GHz; measured, 1 thread: ~210-225. */

enum { ROWS = 16, TILE = 8, QK = 256 };

/* One super-block of a 16-row panel; lane r of every vector belongs to row r. */
typedef struct {
    __m512i q[8][8]; /* [p][j]: bytes 32j+4p .. 32j+4p+3 of the row's 256 q (0..31) */
    __m512i sc[4];   /* [k]: int16 pair (sc[2k], sc[2k+1]) */
    __m512i mn[4];   /* [i]: int16 pair (mn[2i], mn[2i+1]) */
    __m512 d, dmin;  /* h2f(w.d), h2f(w.dmin) */
} panel_sb;

static size_t scratch_size(int64_t K) { return (size_t)(K / QK) * sizeof(panel_sb); }

/* The fifth bit of sub-block j (bit j of each qh byte) moved to bit 4 of the same byte. The i32
 * shifts move bits across bytes only where the mask drops them. */
static inline __m512i bit5(__m512i qh, int j) {
    const __m512i x = j <= 4 ? _mm512_slli_epi32(qh, (unsigned)(4 - j)) : _mm512_srli_epi32(qh, (unsigned)(j - 4));
    return _mm512_and_si512(x, _mm512_set1_epi8(0x10));
}

/* vpshufb control: bytes a and b of each i32 (0..3) zero-extended to the int16 pair (a, b). */
static inline __m512i bytes_to_i16(int a, int b) {
    const __m128i base = _mm_setr_epi8(0, -128, 0, -128, 4, -128, 4, -128, 8, -128, 8, -128, 12, -128, 12, -128);
    return _mm512_broadcast_i32x4(_mm_add_epi8(base, _mm_set1_epi32(a | b << 16)));
}

/* Rows [r0, r0 + nr) of w (nr <= 16) into the panel layout; lanes of missing rows are zero. Each
 * block's 44 i32 words are transposed in three groups of 16 (i32 i in lane r): X = words 0..15 (d and
 * dmin, the 12 scale bytes, qh, qs words 0..3), Y = words 16..31 (qs words 4..19), Z = words 28..43
 * (qs words 16..31). Sub-block j = 2c + h is the low (h = 0) or high (h = 1) nibbles of qs bytes
 * 32c .. 32c+31 with bit j of qh, so the i32 of q[p][j] comes from qs word 8c + p and qh word p. */
static __attribute__((noinline)) void unpack_panel(const mf_weight *w, int64_t r0, int nr, int64_t nsb,
                                                   panel_sb *ps, const uint8_t *ahead) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < nsb; sb++) {
        MF_GEMM_STREAM_AHEAD(ahead, sb, ROWS * sizeof(mf_block_q5_K));
        __m512i X[16], Y[16], Z[16];
        for (int r = 0; r < ROWS; r++) {
            if (r < nr) {
                const uint8_t *b = (const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes +
                                   (size_t)sb * sizeof(mf_block_q5_K);
                X[r] = _mm512_loadu_si512(b), Y[r] = _mm512_loadu_si512(b + 64), Z[r] = _mm512_loadu_si512(b + 112);
            } else {
                X[r] = Y[r] = Z[r] = _mm512_setzero_si512();
            }
        }
        mf_transpose16_i32(X);
        mf_transpose16_i32(Y);
        mf_transpose16_i32(Z);
        panel_sb *s = ps + sb;
        for (int c = 0; c < 4; c++)
            for (int p = 0; p < 8; p++) {
                const int wq = 8 * c + p;
                const __m512i l = wq < 4 ? X[12 + wq] : wq < 16 ? Y[wq - 4] : Z[wq - 16], h = X[4 + p];
                /* (l & 0x0F) | fifth bit, 0xEC: (a & c) | b */
                s->q[p][2 * c] = _mm512_ternarylogic_epi32(l, bit5(h, 2 * c), m4, 0xEC);
                s->q[p][2 * c + 1] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(l, 4), bit5(h, 2 * c + 1), m4, 0xEC);
            }
        /* the 6-bit scales and mins, four bytes per i32 (as the ordered dot unpacks them): sub-blocks
         * 0..3 keep the low 6 bits of scale bytes 0..3 (scales) and 4..7 (mins); 4..7 take the nibbles
         * of bytes 8..11 with the top 2 bits of bytes 0..3 (scales) or 4..7 (mins) as bits 4..5 */
        const __m512i u0 = X[1], u1 = X[2], u2 = X[3];
        __m512i s0, s1, n0, n1;
        mf_k_scale_words(u0, u1, u2, &s0, &s1, &n0, &n1);
        for (int k = 0; k < 2; k++) {
            s->sc[k] = _mm512_shuffle_epi8(s0, bytes_to_i16(2 * k, 2 * k + 1));
            s->sc[2 + k] = _mm512_shuffle_epi8(s1, bytes_to_i16(2 * k, 2 * k + 1));
        }
        for (int k = 0; k < 2; k++) {
            s->mn[k] = _mm512_shuffle_epi8(n0, bytes_to_i16(2 * k, 2 * k + 1));
            s->mn[2 + k] = _mm512_shuffle_epi8(n1, bytes_to_i16(2 * k, 2 * k + 1));
        }
        s->d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(X[0]));
        s->dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(X[0], 16)));
    }
}

/* T tokens (rows of act) against the unpacked panel: y[t * ldy + r] for the lanes r in m. */
static inline __attribute__((always_inline)) void tile(const int T, const panel_sb *ps, int64_t nsb,
                                                       const uint8_t *act, size_t act_row, float *y, size_t ldy,
                                                       __mmask16 m) {
    const size_t rs = act_row, rs3 = 3 * act_row;
    __m512 f[TILE][8], fm[TILE];
    /* The tile's output lines, fetched now: a store that misses at the end of the tile holds up the
     * stores of the next one (4864 x 1024 x 512, 1 thread: ~160 -> ~200 GMAC/s). */
    for (int t = 0; t < T; t++) {
        _mm_prefetch((const char *)(y + (size_t)t * ldy), _MM_HINT_T0);
        _mm_prefetch((const char *)(y + (size_t)t * ldy + 15), _MM_HINT_T0);
        fm[t] = _mm512_setzero_ps();
        for (int p = 0; p < 8; p++) f[t][p] = _mm512_setzero_ps();
    }
    for (int64_t sb = 0; sb < nsb; sb++) {
        const panel_sb *s = ps + sb;
        const uint8_t *a0 = act + (size_t)sb * sizeof(mf_block_q8_K);
        const uint8_t *a4 = T > 4 ? a0 + 4 * rs : a0; /* only for tokens 5..7 */
        __m512 dv[TILE];
        for (int t = 0; t < T; t++) {
            float ad;
            memcpy(&ad, a0 + (size_t)t * act_row + offsetof(mf_block_q8_K, d), sizeof ad);
            dv[t] = _mm512_mul_ps(_mm512_set1_ps(ad), s->d);
            const __m512 dm = _mm512_mul_ps(_mm512_set1_ps(-ad), s->dmin);
            /* bsums -> the pairs (P[2i], P[2i+1]): i32 lane j holds P[j] in its low half */
            const __m256i bs = _mm256_loadu_si256(
                (const __m256i *)(a0 + (size_t)t * act_row + offsetof(mf_block_q8_K, bsums)));
            uint32_t pb[4];
            _mm_storeu_si128((__m128i *)pb, _mm256_cvtepi32_epi16(_mm256_add_epi16(bs, _mm256_srli_epi32(bs, 16))));
            __m512i msum = _mm512_setzero_si512();
            for (int i = 0; i < 4; i++) msum = _mm512_dpwssd_epi32(msum, s->mn[i], _mm512_set1_epi32((int)pb[i]));
            fm[t] = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(msum), fm[t]);
        }
        for (int p = 0; p < 8; p++) {
            const uint8_t *b0 = a0 + 4 * p, *b4 = a4 + 4 * p;
            __m512i acc[TILE];
            for (int t = 0; t < T; t++) acc[t] = _mm512_setzero_si512();
            for (int k = 0; k < 4; k++)
                mf_kq_scaled_group(T, acc, s->q[p][2 * k], s->q[p][2 * k + 1], s->sc[k], b0, b4, k, rs, rs3);
            for (int t = 0; t < T; t++) f[t][p] = _mm512_fmadd_ps(dv[t], _mm512_cvtepi32_ps(acc[t]), f[t][p]);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m512 v = mf_hsum8_lanes(f[t]);
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, m, _mm512_add_ps(v, fm[t]));
    }
}

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const int64_t nsb = w->ne[0] / QK;
    panel_sb *ps = scratch;
    for (int64_t r0 = o0; r0 < o1; r0 += ROWS) {
        const int nr = (int)(o1 - r0 < ROWS ? o1 - r0 : ROWS);
        const __mmask16 m = (__mmask16)((1u << nr) - 1);
        unpack_panel(w, r0, nr, nsb, ps, mf_gemm_ahead(w, r0, ROWS, o1, nt, 32));
#define TILE_AT(T, t0) tile(T, ps, nsb, act + (size_t)(t0) * act_row, act_row, y + (size_t)(t0) * ldy + r0, ldy, m)
        MF_GEMM_TOKEN_TILES(TILE, nt, TILE_AT);
#undef TILE_AT
    }
}

/* min_tokens: from 2 tokens the GEMM is at least level with the eight-row ordered dots (1 thread,
 * 2 tokens: 896 x 4864 0.133 vs 0.136 ms, 4864 x 1024 0.145 vs 0.150; 3 tokens: 0.148 vs 0.197 and
 * 0.168 vs 0.222; 1 token: 0.122 vs 0.072 and 0.126 vs 0.080). */
static const mf_cpu_gemm gemm = {.min_tokens = 2, .scratch_size = scratch_size, .run = run};

const mf_cpu_gemm *mf_cpu_gemm_q5_K_avx512(void) { return &gemm; }
