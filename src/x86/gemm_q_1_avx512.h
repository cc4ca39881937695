/* gemm_q_1_avx512.h: the prefill GEMM shared by the 32-value block types with a minimum whose ordered
 * dot is the plain 8-lane order against Q8_1 activations (Q4_1, Q5_1; see cpu_gemm.h). Panels of 16
 * weight rows are unpacked once per chunk of tokens into one row per i32 lane (the block layout is
 * the only per-type part); tiles of tokens form the ordered dot's integer lanes for the 16 rows at
 * once with vpdpbusd and run its float steps lane-wise. Included by one .c per type (AVX-512). */
#ifndef MF_CPU_GEMM_Q_1_AVX512_H
#define MF_CPU_GEMM_Q_1_AVX512_H

#include "cpu/cpu_gemm.h"
#include "x86/gemm_q_1_packed.h"
#include "x86/gemm_avx512_util.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <string.h>

/* The ordered dot of one weight row w (blocks d_w, m_w, unsigned values q in [0, 15] or [0, 31]) and
 * one Q8_1 activation row a (blocks d_a, s_a = d_a * sum of its values, signed values), blocks i:
 *     L[p] = sum_{j=0..3} q_i[4p + j] * a_i[4p + j]          (p = 0..7, exact integers)
 *     acc[p] = fma(h2f(d_w) * h2f(d_a), (float)L[p], acc[p])
 *     s = fma(h2f(m_w), h2f(s_a), s)
 *     out = (((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7))) + s
 *
 * The weights are unsigned and the activations signed, just what vpdpbusd multiplies (unsigned first
 * operand, signed second): one row per i32 lane, the rows' weights as the first operand and the
 * token's activation dword broadcast as the second, straight from the Q8_1 row in memory (an
 * embedded broadcast, no separate load). It starts from zero and leaves L itself (|L| <= 4 * 31 *
 * 127), whose conversion is the ordered dot's (float)L. The minimum chain s is one more fma a block
 * per token, lane-wise over the 16 rows, in its own accumulator.
 *
 * Panel layout (per-thread scratch), per block i of a slice of the K / 32: eight 64-byte vectors,
 * vector p lane r = the unsigned weight bytes 4p..4p+3 of row r, then the 16 rows' h2f(d_w), then
 * their h2f(m_w): 640 bytes. Rows past the matrix are zero; their outputs are never stored. Then
 * (with more than one slice) nine accumulator vectors per token of the chunk (eight lanes, then the
 * minimum chain); then, per token of the chunk and block, h2f(d_a), and per token and block h2f(s_a).
 *
 * Tiles of 3 tokens x 16 rows hold 24 + 3 accumulators and the 3 scale products: 30 of the 32
 * registers. Panels are unpacked and run in slices of at most Q1G_SLICE blocks (in L1), the tiles
 * keeping their accumulators in scratch between slices (each output's float steps stay one chain
 * in block order).
 *
 * Speed (one Zen 5 core, thread CPU time, 512 tokens, N x K): 4864 x 896 ~220-225 GMAC/s, 896 x 4864
 * ~195-200 (Q4_1 and Q5_1 alike; the ordered dots: ~29 and ~22); 2 threads: ~440 and ~385. Per 16 rows, token and block the
 * order needs 8 vpdpbusd, 8 fma, the scale product and the minimum fma: 18 operations on the two
 * pipes these share, against 16 for Q8_0/Q5_0, which bounds it near 220. With K = 4864 each panel
 * is unpacked 5 times (chunks of ~105 tokens) in 4 slices: 3 chunks ran 1-2% faster on one thread
 * but ~1.5% slower on two (each thread's chunk then fills its L2), slices of 52 blocks the same. */

enum {
    Q1G_BLOCK_BYTES = 10 * 64,   /* one block of a 16-row panel */
    Q1G_CHUNK_BYTES = 400 << 10, /* activations of a chunk of tokens: they stay in L2 */
    Q1G_SLICE = 38,              /* blocks a tile runs at once: 24 KB of panel, which stays in L1 */
    Q1G_TILE = 3,                /* tokens per tile */
    Q1G_STATE = 9,               /* accumulator vectors per token between slices */
};

/* Blocks [i0, i1) of rows [ob, ob + nr) (nr <= 16) of w -> the panel layout above (block i0 first). */
typedef void q1g_repack_fn(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                           const uint8_t *ahead);

/* The most tokens in a chunk (a multiple of Q1G_TILE): each panel is unpacked once per chunk. At
 * least 120 tokens, at most a whole prompt of 512. */
static int64_t q1g_max_chunk(int64_t nb) {
    const int64_t c = MF_MAX(120, MF_MIN(513, Q1G_CHUNK_BYTES / (nb * (int64_t)(sizeof(mf_block_q8_1) + 2 * sizeof(float)))));
    return c - c % Q1G_TILE;
}

/* Panel, then the accumulators of a chunk's tokens between slices (when there is more than one),
 * then the activation scales. */
static size_t q1g_scratch_size(int64_t K) {
    const int64_t nb = K / 32, max_chunk = q1g_max_chunk(nb);
    return (size_t)MF_MIN(nb, Q1G_SLICE) * Q1G_BLOCK_BYTES + (nb > Q1G_SLICE ? (size_t)max_chunk * Q1G_STATE * 64 : 0) +
           (size_t)(max_chunk * nb) * 2 * sizeof(float);
}

/* Q5_1's fifth bits into lane vector p / the eight lane vectors of one block (qh: each row's qh
 * dword in its lane; mf_qh_mask). */
static inline __m512i q1g_add_qh_p(__m512i v, __m512i qh, int p) {
    return _mm512_mask_add_epi8(v, mf_qh_mask(qh, p), v, _mm512_set1_epi8(0x10));
}
static inline void q1g_add_qh(__m512i v[8], __m512i qh) {
    for (int p = 0; p < 8; p++) v[p] = q1g_add_qh_p(v[p], qh, p);
}

/* Blocks [i0, i1) of rows [ob, ob + nr) of w (block_bytes each: d_w, m_w, for Q5_1 qh at byte 4, the
 * 16 bytes qs at qs_off) -> the panel layout above. Value j of a block is the low nibble of qs[j],
 * value 16 + j its high nibble (plus, for Q5_1, bit j of qh as 0x10), so lane p < 4 of the ordered
 * dot is the low nibbles of qs dword p and lane p + 4 their high nibbles: the panel is a 16 x 4
 * transpose of the rows' qs dwords, split into nibbles. Four rows' qs in one zmm (row 4k + j in its
 * 128-bit lane j), a dword permute within each makes lane 4p + j dword p of row 4k + j, and a 4 x 4
 * transpose of the 128-bit lanes gathers dword p of rows 0..15. d_w, m_w (and qh) come by one
 * gather each (row offsets as i32: rows under 128 MB). Rows past nr read a zero block. */
static inline __attribute__((always_inline)) void q1g_repack_rows(const mf_weight *w, int64_t ob, int nr, int64_t i0,
                                                                  int64_t i1, uint8_t *panel, const uint8_t *ahead,
                                                                  size_t block_bytes, size_t qs_off, bool has_qh) {
    static const uint8_t zero_block[32] __attribute__((aligned(32)));
    const uint8_t *row[16];
    size_t step[16];
    for (int k = 0; k < 16; k++) {
        row[k] = k < nr ? (const uint8_t *)w->data + (size_t)(ob + k) * w->row_bytes : zero_block;
        step[k] = k < nr ? block_bytes : 0;
    }
    const __mmask16 live = (__mmask16)((1u << nr) - 1);
    const __m512i offs = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32((int)w->row_bytes));
    const __m512i perm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    const __m512i lo = _mm512_set1_epi8(0x0F);
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    for (int64_t i = i0; i < i1; i++) {
        MF_GEMM_STREAM_AHEAD(ahead, i, 16 * block_bytes);
        __m512i z[4];
        for (int k = 0; k < 4; k++) {
#define Q1G_QS(j) _mm_loadu_si128((const __m128i *)(row[4 * k + (j)] + i * step[4 * k + (j)] + qs_off))
            __m512i v = _mm512_castsi128_si512(Q1G_QS(0));
            v = _mm512_inserti32x4(v, Q1G_QS(1), 1);
            v = _mm512_inserti32x4(v, Q1G_QS(2), 2);
            v = _mm512_inserti32x4(v, Q1G_QS(3), 3);
#undef Q1G_QS
            z[k] = _mm512_permutexvar_epi32(perm, v);
        }
        const __m512i a0 = _mm512_shuffle_i32x4(z[0], z[1], 0x44), a1 = _mm512_shuffle_i32x4(z[0], z[1], 0xEE);
        const __m512i b0 = _mm512_shuffle_i32x4(z[2], z[3], 0x44), b1 = _mm512_shuffle_i32x4(z[2], z[3], 0xEE);
        const __m512i q[4] = {_mm512_shuffle_i32x4(a0, b0, 0x88), _mm512_shuffle_i32x4(a0, b0, 0xDD),
                              _mm512_shuffle_i32x4(a1, b1, 0x88), _mm512_shuffle_i32x4(a1, b1, 0xDD)};
        __m512i v[8];
        for (int p = 0; p < 4; p++) {
            v[p] = _mm512_and_si512(q[p], lo);
            v[p + 4] = _mm512_and_si512(_mm512_srli_epi16(q[p], 4), lo);
        }
        const uint8_t *bb = base + (size_t)i * block_bytes;
        if (has_qh) q1g_add_qh(v, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, offs, bb + 4, 1));
        __m512i *out = (__m512i *)(panel + (size_t)(i - i0) * Q1G_BLOCK_BYTES);
        for (int p = 0; p < 8; p++) _mm512_store_si512(out + p, v[p]);
        const __m512i dm = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, offs, bb, 1);
        _mm512_store_ps(out + 8, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm)));
        _mm512_store_ps(out + 9, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16))));
    }
}

/* ---- the packed layout: gemm_q_1_packed.h ---- */

/* Blocks [i0, i1) of the packed panel at p into the panel layout above; the same blocks of the panel
 * at ahead (if any) are fetched meanwhile, as the repack does. */
static inline __attribute__((always_inline)) void q1g_unpack(const uint8_t *p, int64_t i0, int64_t i1, uint8_t *panel,
                                                             const uint8_t *ahead, bool has_qh) {
    const size_t pblk = Q1G_PBLK(has_qh), dm = pblk - 64;
    const __m512i lo = _mm512_set1_epi8(0x0F);
    for (int64_t i = i0; i < i1; i++) {
        MF_GEMM_STREAM_AHEAD(ahead, i, pblk);
        const uint8_t *b = p + (size_t)i * pblk;
        __m512i v[8];
        for (int k = 0; k < 4; k++) {
            const __m512i q = _mm512_load_si512(b + 64 * k);
            v[k] = _mm512_and_si512(q, lo);
            v[k + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), lo);
        }
        if (has_qh) q1g_add_qh(v, _mm512_load_si512(b + 256));
        __m512i *out = (__m512i *)(panel + (size_t)(i - i0) * Q1G_BLOCK_BYTES);
        for (int k = 0; k < 8; k++) _mm512_store_si512(out + k, v[k]);
        _mm512_store_ps(out + 8, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(b + dm))));
        _mm512_store_ps(out + 9, _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(b + dm + 32))));
    }
}

/* Activation scales of tokens [t0, t0 + n): da[t * nb + i] = h2f(d_a), sa[t * nb + i] = h2f(s_a). */
static void q1g_prepare(const uint8_t *act, size_t act_row, int64_t t0, int64_t n, int64_t nb, float *da, float *sa) {
    for (int64_t t = 0; t < n; t++) {
        const mf_block_q8_1 *a = (const mf_block_q8_1 *)(act + (size_t)(t0 + t) * act_row);
        for (int64_t i = 0; i < nb; i++) {
            da[t * nb + i] = _cvtsh_ss(a[i].d);
            sa[t * nb + i] = _cvtsh_ss(a[i].s);
        }
    }
}

typedef int32_t __attribute__((may_alias, aligned(1))) q1g_i32_alias;

/* The 16 lanes' w . a from zero, a = the activation dword at p broadcast by the instruction itself
 * (left to themselves, compilers broadcast into a register first and copy a zero register). */
static inline __m512i q1g_dpbusd(__m512i w, const uint8_t *p) {
    __m512i l;
    __asm__("vpxord %0, %0, %0\n\tvpdpbusd %2%{1to16%}, %1, %0" : "=&v"(l) : "v"(w), "m"(*(const q1g_i32_alias *)p));
    return l;
}

/* T tokens (a: each token's Q8_1 row; da, sa: its scales) against blocks [i0, i1) of one panel. The
 * accumulators start at zero (first) or from st[t] (Q1G_STATE vectors a token), and end in st[t] or,
 * after the last block (last), as the outputs y[t] of the 16 rows (row lanes in mask). */
static inline __attribute__((always_inline)) void q1g_tile(const int T, const uint8_t *panel, int64_t i0, int64_t i1,
                                                           const uint8_t *const *a, const float *const *da,
                                                           const float *const *sa, __m512 *const *st, bool first,
                                                           bool last, float *const *y, __mmask16 mask) {
    __m512 acc[Q1G_TILE][8], sacc[Q1G_TILE];
    for (int t = 0; t < T; t++) {
        /* The output lines, fetched now: a store that misses at the end of the tile holds up the
         * stores of the next one. */
        if (last) {
            _mm_prefetch((const char *)y[t], _MM_HINT_T0);
            _mm_prefetch((const char *)(y[t] + 15), _MM_HINT_T0);
        }
        for (int p = 0; p < 8; p++) acc[t][p] = first ? _mm512_setzero_ps() : _mm512_load_ps(st[t] + p);
        sacc[t] = first ? _mm512_setzero_ps() : _mm512_load_ps(st[t] + 8);
    }
    for (int64_t i = i0; i < i1; i++) {
        const __m512i *wv = (const __m512i *)(panel + (size_t)(i - i0) * Q1G_BLOCK_BYTES);
        const __m512 dw = _mm512_load_ps(wv + 8), mw = _mm512_load_ps(wv + 9);
        __m512 d[Q1G_TILE];
        for (int t = 0; t < T; t++) {
            d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(da[t][i]));
            sacc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa[t][i]), sacc[t]);
        }
        for (int p = 0; p < 8; p++) {
            const __m512i wp = _mm512_load_si512(wv + p);
            for (int t = 0; t < T; t++) {
                const uint8_t *ap = a[t] + (size_t)i * sizeof(mf_block_q8_1) + 4 + 4 * p;
                acc[t][p] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(q1g_dpbusd(wp, ap)), acc[t][p]);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        if (!last) {
            for (int p = 0; p < 8; p++) _mm512_store_ps(st[t] + p, acc[t][p]);
            _mm512_store_ps(st[t] + 8, sacc[t]);
            continue;
        }
        const __m512 s = mf_hsum8_lanes(acc[t]);
        _mm512_mask_storeu_ps(y[t], mask, _mm512_add_ps(s, sacc[t]));
    }
}

/* Tokens [t, t + T) of the chunk that starts at token tc against blocks [i0, i1) of one panel. */
static inline __attribute__((always_inline)) void q1g_tile_at(const int T, const uint8_t *panel, int64_t nb, int64_t i0,
                                                              int64_t i1, const uint8_t *act, size_t act_row,
                                                              const float *das, const float *sas, __m512 *state,
                                                              int64_t tc, int64_t t, float *y, size_t ldy,
                                                              __mmask16 mask) {
    const uint8_t *a[Q1G_TILE];
    const float *da[Q1G_TILE], *sa[Q1G_TILE];
    __m512 *st[Q1G_TILE];
    float *yt[Q1G_TILE];
    for (int k = 0; k < T; k++) {
        a[k] = act + (size_t)(tc + t + k) * act_row;
        da[k] = das + (t + k) * nb, sa[k] = sas + (t + k) * nb;
        st[k] = state + (t + k) * Q1G_STATE;
        yt[k] = y + (size_t)(tc + t + k) * ldy;
    }
    q1g_tile(T, panel, i0, i1, a, da, sa, st, i0 == 0, i1 == nb, yt, mask);
}

/* Up to Q1G_FEW tokens (a decode step, a speculative verification, a server step of a few sequences)
 * straight from a packed weight: no panel slice. Each block's nibbles are split in registers for up
 * to two tokens at a time (16 + 2 accumulators), each further pair reading the panel again from
 * cache; the first pass streams the panel, fetching eight blocks ahead, the second the next panel
 * into L2 (mf_few_pass_ahead). The float steps are
 * q1g_tile's, so the outputs are its bits. da, sa: the tokens' activation scales (q1g_prepare).
 * Ahead of the packed GEMM through 16 tokens (Zen 4, bench_gemm --cold --packed --threads 2 q4_1
 * 4864 896 N: 1 token 0.074 against 0.159 ms, 8 0.24 against 0.34, 16 0.44 against 0.52; 24 0.62
 * against 0.56). */
#define Q1G_FEW 16

static inline __attribute__((always_inline)) void q1g_few_pass(const int T, const uint8_t *p, int64_t nb, bool has_qh,
                                                               const uint8_t *act, size_t act_row, const float *da,
                                                               const float *sa, size_t ahead, float *y, size_t ldy,
                                                               __mmask16 mask) {
    const size_t pblk = Q1G_PBLK(has_qh), dm = pblk - 64;
    const __m512i lo = _mm512_set1_epi8(0x0F);
    __m512 acc[2][8], sacc[2];
    for (int t = 0; t < T; t++) {
        for (int k = 0; k < 8; k++) acc[t][k] = _mm512_setzero_ps();
        sacc[t] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * pblk;
        MF_FEW_PREFETCH(b, ahead, pblk);
        const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(b + dm)));
        const __m512 mw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(b + dm + 32)));
        __m512 d[2];
        for (int t = 0; t < T; t++) {
            d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(da[t * nb + i]));
            sacc[t] = _mm512_fmadd_ps(mw, _mm512_set1_ps(sa[t * nb + i]), sacc[t]);
        }
        const __m512i qh = has_qh ? _mm512_load_si512(b + 256) : _mm512_setzero_si512();
        for (int k = 0; k < 4; k++) {
            const __m512i q = _mm512_load_si512(b + 64 * k);
            __m512i vl = _mm512_and_si512(q, lo), vh = _mm512_and_si512(_mm512_srli_epi16(q, 4), lo);
            if (has_qh) {
                vl = q1g_add_qh_p(vl, qh, k);
                vh = q1g_add_qh_p(vh, qh, k + 4);
            }
            for (int t = 0; t < T; t++) {
                const uint8_t *ab = act + (size_t)t * act_row + (size_t)i * sizeof(mf_block_q8_1) + 4;
                acc[t][k] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(q1g_dpbusd(vl, ab + 4 * k)), acc[t][k]);
                acc[t][k + 4] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(q1g_dpbusd(vh, ab + 16 + 4 * k)), acc[t][k + 4]);
            }
        }
    }
    for (int t = 0; t < T; t++)
        _mm512_mask_storeu_ps(y + (size_t)t * ldy, mask, _mm512_add_ps(mf_hsum8_lanes(acc[t]), sacc[t]));
}

/* Rows [o0, o1) for nt <= Q1G_FEW tokens from the packed weight; scratch holds their scales. */
static inline __attribute__((always_inline)) void q1g_few(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act,
                                                          size_t act_row, int64_t nt, float *y, size_t ldy,
                                                          void *scratch, bool has_qh) {
    const int64_t nb = w->ne[0] / 32;
    float *da = scratch, *sa = da + nt * nb;
    q1g_prepare(act, act_row, 0, nt, nb, da, sa);
    for (int64_t o = o0; o < o1; o += 16) {
        const __mmask16 mask = (__mmask16)((1u << MF_MIN(16, o1 - o)) - 1);
        const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
        for (int64_t t = 0; t < nt; t += 2) {
            const uint8_t *at = act + (size_t)t * act_row;
            const size_t ahead = mf_few_pass_ahead((int)(t / 2), Q1G_PBLK(has_qh), nb, o + 16 < o1);
            if (nt - t >= 2)
                q1g_few_pass(2, p, nb, has_qh, at, act_row, da + t * nb, sa + t * nb, ahead, y + (size_t)t * ldy + o, ldy, mask);
            else
                q1g_few_pass(1, p, nb, has_qh, at, act_row, da + t * nb, sa + t * nb, ahead, y + (size_t)t * ldy + o, ldy, mask);
        }
    }
}

typedef void q1g_unpack_fn(const uint8_t *p, int64_t i0, int64_t i1, uint8_t *panel, const uint8_t *ahead);

/* The GEMM's run (cpu_gemm.h): a few tokens straight from the packed layout where w has it
 * (q1g_few), else panels unpacked from it (unpack) or from the file's blocks (repack). */
static inline __attribute__((always_inline)) void q1g_run(q1g_repack_fn *repack, q1g_unpack_fn *unpack, bool packed,
                                                          bool has_qh, const mf_weight *w, int64_t o0, int64_t o1,
                                                          const uint8_t *act, size_t act_row, int64_t nt, float *y,
                                                          size_t ldy, void *scratch) {
    if (packed && nt <= Q1G_FEW) {
        q1g_few(w, o0, o1, act, act_row, nt, y, ldy, scratch, has_qh);
        return;
    }
    const int64_t nb = w->ne[0] / 32, max_chunk = q1g_max_chunk(nb);
    uint8_t *panel = scratch;
    __m512 *state = (__m512 *)(panel + (size_t)MF_MIN(nb, Q1G_SLICE) * Q1G_BLOCK_BYTES);
    float *das = (float *)(state + (nb > Q1G_SLICE ? max_chunk * Q1G_STATE : 0));
    float *sas = das + max_chunk * nb;
    /* Equal chunks, each a multiple of the tile (but the last); equal slices. */
    const int64_t chunk = mf_gemm_chunk(nt, max_chunk, Q1G_TILE);
    const int64_t n_slices = (nb + Q1G_SLICE - 1) / Q1G_SLICE, slice = (nb + n_slices - 1) / n_slices;
    for (int64_t tc = 0; tc < nt; tc += chunk) {
        const int64_t n = MF_MIN(chunk, nt - tc);
        q1g_prepare(act, act_row, tc, n, nb, das, sas);
        for (int64_t ob = o0; ob < o1; ob += 16) {
            const int nr = (int)MF_MIN(16, o1 - ob);
            const __mmask16 mask = (__mmask16)((1u << nr) - 1);
            const uint8_t *data = packed ? w->packed : w->data;
            const mf_gemm_prefetch pf = mf_gemm_prefetch_plan(data, w->row_bytes, o0, o1, ob, tc, n, nt, Q1G_TILE,
                                                              n_slices);
            size_t j = 0;
            for (int64_t i0 = 0; i0 < nb; i0 += slice) {
                const int64_t i1 = MF_MIN(nb, i0 + slice);
                if (packed)
                    unpack(data + (size_t)ob * w->row_bytes, i0, i1, panel, pf.lines ? NULL : pf.next);
                else
                    repack(w, ob, nr, i0, i1, panel, pf.lines ? NULL : pf.next);
                for (int64_t t = 0; t < n; t += Q1G_TILE, j++) {
                    mf_gemm_prefetch_step(&pf, j);
                    if (n - t >= Q1G_TILE)
                        q1g_tile_at(Q1G_TILE, panel, nb, i0, i1, act, act_row, das, sas, state, tc, t, y + ob, ldy, mask);
                    else if (n - t == 2)
                        q1g_tile_at(2, panel, nb, i0, i1, act, act_row, das, sas, state, tc, t, y + ob, ldy, mask);
                    else
                        q1g_tile_at(1, panel, nb, i0, i1, act, act_row, das, sas, state, tc, t, y + ob, ldy, mask);
                }
            }
        }
    }
}

#endif /* MF_CPU_GEMM_Q_1_AVX512_H */
