/* gemm_q6_k_avx512.c: the Q6_K prefill GEMM for AVX-512 VNNI (see cpu_gemm.h). Each panel of 16
 * weight rows is unpacked once into a row-interleaved scratch copy (one row per i32 lane); every
 * tile of 8 tokens then forms the ordered dot's exact integer lanes for the 16 rows at once and
 * takes its float steps lane-wise, so each output is bit for bit the ordered Q6_K dot. */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx512_util.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* The ordered dot (plain 8-lane order), per super-block of 256 values, one weight row against one
 * Q8_K activation block a: integer lane p (0..7) is
 *     isum[p] = sum over chunks c (0..7) of sc[2c + p/4] * D(c, p)
 *               - 32 * (S[2p] * sc[2p] + S[2p+1] * sc[2p+1]),
 *     D(c, p) = sum_{i=0..3} q[32c + 4p + i] * a[32c + 4p + i]
 * (q the unsigned 6-bit values, sc the 16 signed scales, S the activation's bsums); then
 * acc[p] = fma(a.d * h2f(w.d), (float)isum[p], acc[p]); the output is
 * ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)).
 *
 * Integer steps, 16 rows per zmm (lane r: row r). vpdpbusd gives D(c, p) of the 16 rows against the
 * token's 4 bytes, broadcast. |D| <= 4 * 63 * 128 < 2^15, so two of them fit one i32 lane as int16
 * halves, and one vpdpwssd against the scale pairs (sc of chunk 2k, sc of chunk 2k+1) multiplies
 * both by their scales and accumulates them: 3 multiply instructions per 128 products instead of 4.
 * The packing without a borrow between the halves: x = 0x80008000 + D(2k+1) (no carry out of the
 * low half, so the high half stays 0x8000); swapping the halves gives 0x8000 + D(2k+1) high and
 * 0x8000 low; adding D(2k) keeps the low half in [0, 65535]; xor 0x80008000 turns both biased halves
 * into the signed int16 values. Lanes start at the offset, one vpdpwssd of the pairs
 * (-32 sc[2p], -32 sc[2p+1]) against the pair (S[2p], S[2p+1]). All exact: any order gives the
 * same isum, and the float steps are the ordered dot's. */

enum { ROWS = 16, TILE = 8, QK = 256 };

/* One super-block of a 16-row panel; lane r of every vector belongs to row r. */
typedef struct {
    __m512i q[8][8];  /* [p][c]: bytes 32c+4p .. 32c+4p+3 of the row's 256 unsigned q */
    __m512i sc[4][2]; /* [k][h]: int16 pair (scale 4k+h, scale 4k+2+h): chunks 2k, 2k+1 at half h */
    __m512i off[8];   /* [p]: int16 pair (-32 scale 2p, -32 scale 2p+1) */
    __m512 d;         /* h2f(w.d) */
} panel_sb;

/* Scratch: the panel's super-blocks, then each row's scales before their transposition. */
typedef struct {
    int32_t sc[ROWS][16]; /* each row's 8 scale pairs, then its 8 offset pairs */
    uint16_t d[ROWS];
} panel_rows;

static size_t scratch_size(int64_t K) { return (size_t)(K / QK) * sizeof(panel_sb) + sizeof(panel_rows); }


/* Rows [r0, r0 + nr) of w (nr <= 16) into the panel layout; lanes of missing rows are zero. The
 * packed bits are transposed first (i32 i of ql, qh in lane r), then unpacked for 16 rows at once:
 * value 128j + 32v + i (i < 32) is ql[64j + 32(v & 1) + i] (low nibble for v < 2, high for v >= 2)
 * with bits 2v, 2v+1 of qh[32j + i] on top, so the i32 of q[p][4j + v] comes from ql i32
 * 16j + 8(v & 1) + p and qh i32 8j + p. */
static void unpack_panel(const mf_weight *w, int64_t r0, int nr, int64_t nsb, panel_sb *ps, panel_rows *tmp,
                         const uint8_t *ahead) {
    /* scale pairs (s[4k+h], s[4k+2+h]) at i32 2k+h: words 0 2 1 3 of each group of four */
    const __m256i pairs =
        _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15));
    const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
    memset(tmp, 0, sizeof *tmp); /* rows nr..15 stay zero */
    for (int64_t sb = 0; sb < nsb; sb++) {
        MF_GEMM_STREAM_AHEAD(ahead, sb, ROWS * sizeof(mf_block_q6_K));
        const mf_block_q6_K *b[ROWS];
        for (int r = 0; r < nr; r++) {
            b[r] = (const mf_block_q6_K *)((const uint8_t *)w->data + (size_t)(r0 + r) * w->row_bytes) + sb;
            const __m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b[r]->scales));
            _mm256_storeu_si256((__m256i *)tmp->sc[r], _mm256_shuffle_epi8(s16, pairs));
            _mm256_storeu_si256((__m256i *)(tmp->sc[r] + 8), _mm256_mullo_epi16(s16, _mm256_set1_epi16(-32)));
            tmp->d[r] = b[r]->d;
        }
        panel_sb *s = ps + sb;
        __m512i ql[2][16], qh[16];
        for (int j = 0; j < 2; j++) {
            for (int r = 0; r < ROWS; r++)
                ql[j][r] = r < nr ? _mm512_loadu_si512(b[r]->ql + 64 * j) : _mm512_setzero_si512();
            mf_transpose16_i32(ql[j]);
        }
        for (int r = 0; r < ROWS; r++) qh[r] = r < nr ? _mm512_loadu_si512(b[r]->qh) : _mm512_setzero_si512();
        mf_transpose16_i32(qh);
        for (int j = 0; j < 2; j++)
            for (int p = 0; p < 8; p++) {
                /* low 4 bits (x & 0x0F) | high 2 bits (y & 0x30) per byte, 0xEC: (a & c) | b; the i32
                 * shifts move bits across bytes only where the masks drop them */
                const __m512i l0 = ql[j][p], l1 = ql[j][8 + p], h = qh[8 * j + p];
                const __m512i h0 = _mm512_and_si512(_mm512_slli_epi32(h, 4), m30);
                const __m512i h1 = _mm512_and_si512(_mm512_slli_epi32(h, 2), m30);
                const __m512i h2 = _mm512_and_si512(h, m30);
                const __m512i h3 = _mm512_and_si512(_mm512_srli_epi32(h, 2), m30);
                s->q[p][4 * j + 0] = _mm512_ternarylogic_epi32(l0, h0, m4, 0xEC);
                s->q[p][4 * j + 1] = _mm512_ternarylogic_epi32(l1, h1, m4, 0xEC);
                s->q[p][4 * j + 2] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(l0, 4), h2, m4, 0xEC);
                s->q[p][4 * j + 3] = _mm512_ternarylogic_epi32(_mm512_srli_epi32(l1, 4), h3, m4, 0xEC);
            }
        __m512i v[16];
        for (int r = 0; r < ROWS; r++) v[r] = _mm512_loadu_si512(tmp->sc[r]);
        mf_transpose16_i32(v);
        for (int j = 0; j < 8; j++) s->sc[j / 2][j % 2] = v[j], s->off[j] = v[8 + j];
        s->d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)tmp->d));
    }
}

/* T tokens (rows of act) against the unpacked panel: y[t * ldy + r] for the lanes r in m. */
static inline __attribute__((always_inline)) void tile(const int T, const panel_sb *ps, int64_t nsb,
                                                       const uint8_t *act, size_t act_row, float *y, size_t ldy,
                                                       __mmask16 m) {
    const size_t rs = act_row, rs3 = 3 * act_row;
    __m512 f[TILE][8];
    /* The tile's output lines, fetched now: a store that misses at the end of the tile holds up the
     * stores of the next one. */
    for (int t = 0; t < T; t++) {
        _mm_prefetch((const char *)(y + (size_t)t * ldy), _MM_HINT_T0);
        _mm_prefetch((const char *)(y + (size_t)t * ldy + 15), _MM_HINT_T0);
        for (int p = 0; p < 8; p++) f[t][p] = _mm512_setzero_ps();
    }
    for (int64_t sb = 0; sb < nsb; sb++) {
        const panel_sb *s = ps + sb;
        const uint8_t *a0 = act + (size_t)sb * sizeof(mf_block_q8_K);
        __m512 dv[TILE];
        for (int t = 0; t < T; t++) {
            float ad;
            memcpy(&ad, a0 + (size_t)t * act_row + offsetof(mf_block_q8_K, d), sizeof ad);
            dv[t] = _mm512_mul_ps(_mm512_set1_ps(ad), s->d);
        }
        for (int p = 0; p < 8; p++) {
            const uint8_t *b0 = a0 + 4 * p, *b4 = T > 4 ? b0 + 4 * rs : b0; /* b4: only for tokens 5..7 */
            __m512i acc[TILE];
            for (int t = 0; t < T; t++) {
                acc[t] = _mm512_setzero_si512();
                const uint8_t *p0 = b0 + offsetof(mf_block_q8_K, bsums), *p4 = b4 + offsetof(mf_block_q8_K, bsums);
                MF_TOK_ASM("vpdpwssd", acc[t], s->off[p], t, p0, p4, rs, rs3)
            }
            for (int k = 0; k < 4; k++)
                mf_kq_scaled_group(T, acc, s->q[p][2 * k], s->q[p][2 * k + 1], s->sc[k][p / 4], b0, b4, k, rs, rs3);
            for (int t = 0; t < T; t++) f[t][p] = _mm512_fmadd_ps(dv[t], _mm512_cvtepi32_ps(acc[t]), f[t][p]);
        }
    }
    for (int t = 0; t < T; t++) {
        const __m512 v = mf_hsum8_lanes(f[t]);
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, m, v);
    }
}

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const int64_t nsb = w->ne[0] / QK;
    panel_sb *ps = scratch;
    panel_rows *tmp = (panel_rows *)((uint8_t *)scratch + (size_t)nsb * sizeof(panel_sb));
    for (int64_t r0 = o0; r0 < o1; r0 += ROWS) {
        const int nr = (int)(o1 - r0 < ROWS ? o1 - r0 : ROWS);
        const __mmask16 m = (__mmask16)((1u << nr) - 1);
        unpack_panel(w, r0, nr, nsb, ps, tmp, mf_gemm_ahead(w, r0, ROWS, o1, nt, 32));
#define TILE_AT(T, t0) tile(T, ps, nsb, act + (size_t)(t0) * act_row, act_row, y + (size_t)(t0) * ldy + r0, ldy, m)
        MF_GEMM_TOKEN_TILES(TILE, nt, TILE_AT);
#undef TILE_AT
    }
}

/* min_tokens: from 4 tokens the GEMM beats the eight-row ordered dots with the weights coming from
 * memory (bench_gemm --cold, 2 threads, Zen 5: 4864 x 1024 at 3 tokens 0.18 vs 0.29 ms dots first,
 * at 4 level, at 5 0.21 vs 0.30; 1024 x 4864 at 4 0.21 vs 0.24): below, the panel unpacking and a
 * short tile's dependency chains are not paid back. */
static const mf_cpu_gemm gemm = {.min_tokens = 4, .scratch_size = scratch_size, .run = run};

const mf_cpu_gemm *mf_cpu_gemm_q6_K_avx512(void) { return &gemm; }
