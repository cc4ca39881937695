/* gemm_q8_avx512.h: the prefill GEMM shared by the 32-value block types whose ordered dot is the
 * plain 8-lane order against Q8_0 activations (Q8_0, Q5_0; see cpu_gemm.h). Each panel of 16 weight
 * rows is unpacked once per chunk of tokens into a scratch copy with one row per i32 lane (the
 * includer's repack: the only per-type part); tiles of tokens then form the ordered dot's integer
 * lanes for the 16 rows at once with vpdpbusd and run its float steps lane-wise, so each output is
 * bit for bit the ordered dot's value. Included by one .c per type, compiled with AVX-512. */
#ifndef MF_CPU_GEMM_Q8_AVX512_H
#define MF_CPU_GEMM_Q8_AVX512_H

#include "cpu/cpu_gemm.h"
#include "x86/gemm_q8_packed.h"
#include "x86/gemm_avx512_util.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* The ordered dot (plain 8-lane order) of one weight row w and one activation row a, blocks i:
 *     L[p] = sum_{j=0..3} w_i[4p + j] * a_i[4p + j]          (p = 0..7, exact integers)
 *     acc[p] = fma(h2f(w_i.d) * h2f(a_i.d), (float)L[p], acc[p])
 *     out = ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7))
 * with w the signed weight values (Q8_0: qs in [-128, 127]; Q5_0: q5 - 16 in [-16, 15]).
 *
 * vpdpbusd multiplies unsigned bytes (its first operand) by signed bytes and adds the four products
 * of each i32 lane to the lane. The panel holds one row per lane, so the first operand is the
 * activation dword broadcast to all lanes, biased to unsigned (a + 128 = a ^ 0x80, activations in
 * [-127, 127]), and the second the rows' signed weights. That gives L + 128 * Sw[r][p], Sw the sum
 * of the lane's four weights: a per-row constant of the panel, the same for every token. The panel
 * stores -128 * Sw as the start value of each dot, so vpdpbusd leaves L itself (exact: |L| < 2^16),
 * and its conversion is the ordered dot's (float)L. Per product that costs one broadcast load (the
 * activation dword), one vpdpbusd, one conversion and the fma; weights and start values are loaded
 * once per tile of tokens.
 *
 * Panel layout (per-thread scratch), per block i of a slice of the K / 32: eight 64-byte vectors,
 * vector p lane r = the signed weight bytes 4p..4p+3 of row r, eight vectors of the i32 starts
 * -128 * Sw[r][p], then the 16 rows' h2f(d) as floats: 1088 bytes. Rows past the matrix are zero;
 * their outputs are never stored. Then (with more than one slice) eight accumulator vectors per
 * token of the chunk; then, per token of the chunk and block, the 32 biased activation bytes, and
 * per token and block h2f(a.d).
 *
 * Speed (one Zen 5 core, 4.1 GHz, thread CPU time): ~210-225 GMAC/s (Q8_0 and Q5_0 alike), against
 * ~175 with the weights biased instead (the activations as the signed broadcast operand, and a
 * per-token correction subtracted from each converted sum: a second broadcast and one more
 * instruction per product). vpdpbusd, vfmadd and vmulps share two pipes (measured alone: two a
 * cycle; any two of them interleaved: one each a cycle; vcvtdq2ps and vaddps issue elsewhere), so
 * one vpdpbusd and one fma per 64 multiply-adds, and one scale product per 8 of them, bound this
 * order to ~245 GMAC/s a core (~0.245 ns per vpdpbusd + fma pair at this clock). Tiles of 3 tokens
 * x 16 rows (24 accumulators) load each weight vector and start vector once per 3 tokens. A panel
 * holds 1088 bytes a block, so with a long K (4864: 165 KB) it would be read from L2 at ~45 bytes a
 * product: panels are unpacked and run in slices of at most 28 blocks (30 KB, in L1), the tiles
 * keeping their accumulators in scratch between slices (the float steps of each output are still
 * one chain in block order); 896 x 4864 x 512, 1 thread: ~146 unsliced -> ~195 GMAC/s. */

enum {
    Q8G_BLOCK_BYTES = 17 * 64, /* one block of a 16-row panel */
    Q8G_CHUNK_BYTES = 400 << 10, /* prepared activations of a chunk of tokens: they stay in L2 */
    Q8G_SLICE = 28,              /* blocks a tile runs at once: 30 KB of panel, which stays in L1 */
    Q8G_TILE = 3,              /* tokens per tile */
};

/* Blocks [i0, i1) of rows [ob, ob + nr) (nr <= 16) of w -> the panel layout above (block i0 first). */
typedef void q8g_repack_fn(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                           const uint8_t *ahead);

/* The most tokens prepared at once (a multiple of Q8G_TILE); each panel is unpacked once per chunk
 * (with K = 896, 120 tokens a chunk: the unpacking took ~12% of the GEMM's time). At least 120
 * tokens, at most a whole prompt of 512. */
static int64_t q8g_max_chunk(int64_t nb) {
    const int64_t c = MF_MAX(120, MF_MIN(513, Q8G_CHUNK_BYTES / (nb * (32 + (int64_t)sizeof(float)))));
    return c - c % Q8G_TILE;
}

/* Panel, then the accumulators of a chunk's tokens between slices (when there is more than one),
 * then the prepared activations. */
static size_t q8g_scratch_size(int64_t K) {
    const int64_t nb = K / 32, max_chunk = q8g_max_chunk(nb);
    return (size_t)MF_MIN(nb, Q8G_SLICE) * Q8G_BLOCK_BYTES + (nb > Q8G_SLICE ? (size_t)max_chunk * 8 * 64 : 0) +
           (size_t)(max_chunk * nb) * (32 + sizeof(float));
}

/* -128 * Sw of one lane vector = (-1) * (128 * Sw): 128 as the unsigned operand against the weights. */
static inline __m512i q8g_start(__m512i w) {
    return _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8((char)0x80), w));
}

/* One block of the panel layout from its eight lane vectors of signed weights and the rows' scales. */
static inline __attribute__((always_inline)) void q8g_store_vecs(const __m512i v[8], __m512 d, uint8_t *block) {
    __m512i *out = (__m512i *)block;
    for (int p = 0; p < 8; p++) {
        _mm512_store_si512(out + p, v[p]);
        _mm512_store_si512(out + 8 + p, q8g_start(v[p]));
    }
    _mm512_store_ps(out + 16, d);
}

/* Sixteen rows' 32 signed weight bytes of one block (rows past the matrix zero) -> the block's
 * eight weight vectors and their start values, and their scales dh -> its 16 floats. A 16 x 8
 * transpose of i32: rows j, j + 4 (and j + 8, j + 12) share a zmm, two unpack stages gather four
 * rows' same dword within each 128-bit lane, one lane shuffle puts rows 0-3, 4-7, 8-11, 12-15 in
 * order. */
static inline __attribute__((always_inline)) void q8g_store_block(const __m256i r[16], const uint16_t dh[16],
                                                                  uint8_t *block) {
    __m512i z[8], t[8], u[8];
    for (int j = 0; j < 4; j++) {
        z[j] = _mm512_inserti64x4(_mm512_castsi256_si512(r[j]), r[j + 4], 1);
        z[4 + j] = _mm512_inserti64x4(_mm512_castsi256_si512(r[j + 8]), r[j + 12], 1);
    }
    for (int h = 0; h < 2; h++) {
        __m512i *zz = z + 4 * h, *tt = t + 4 * h, *uu = u + 4 * h;
        tt[0] = _mm512_unpacklo_epi32(zz[0], zz[1]);
        tt[1] = _mm512_unpackhi_epi32(zz[0], zz[1]);
        tt[2] = _mm512_unpacklo_epi32(zz[2], zz[3]);
        tt[3] = _mm512_unpackhi_epi32(zz[2], zz[3]);
        /* uu[q] lane 0: rows 0-3 (of this half) dword q, lane 1: dword 4 + q; lanes 2, 3 the same
         * for the rows 4 further on. */
        uu[0] = _mm512_unpacklo_epi64(tt[0], tt[2]);
        uu[1] = _mm512_unpackhi_epi64(tt[0], tt[2]);
        uu[2] = _mm512_unpacklo_epi64(tt[1], tt[3]);
        uu[3] = _mm512_unpackhi_epi64(tt[1], tt[3]);
    }
    __m512i v[8];
    for (int q = 0; q < 4; q++) {
        v[q] = _mm512_shuffle_i32x4(u[q], u[4 + q], 0x88);
        v[4 + q] = _mm512_shuffle_i32x4(u[q], u[4 + q], 0xDD);
    }
    q8g_store_vecs(v, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh)), block);
}

/* A type's signed weight bytes of one block (the block's half scale is its first field). */
typedef __m256i q8g_load_fn(const uint8_t *block);

/* The per-type repack (q8g_repack_fn) around load: blocks [i0, i1) of rows [ob, ob + nr), rows past
 * nr as zeros. Inlined into each type's repack with its load, so no call remains per block. */
static inline __attribute__((always_inline)) void q8g_repack_rows(const mf_weight *w, int64_t ob, int nr, int64_t i0,
                                                                  int64_t i1, uint8_t *panel, const uint8_t *ahead,
                                                                  size_t block_bytes, q8g_load_fn *load) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    for (int64_t i = i0; i < i1; i++) {
        MF_GEMM_STREAM_AHEAD(ahead, i, 16 * block_bytes);
        __m256i r[16];
        uint16_t dh[16];
        for (int k = 0; k < 16; k++) {
            if (k < nr) {
                const uint8_t *b = base + (size_t)k * w->row_bytes + (size_t)i * block_bytes;
                r[k] = load(b);
                memcpy(&dh[k], b, sizeof dh[k]);
            } else {
                r[k] = _mm256_setzero_si256();
                dh[k] = 0;
            }
        }
        q8g_store_block(r, dh, panel + (size_t)(i - i0) * Q8G_BLOCK_BYTES);
    }
}

/* ---- the packed layout: gemm_q8_packed.h ---- */

/* The eight lane vectors of signed weights of the packed block at b. Q5_0: w = q5 - 16 = nibble - 16
 * + 16 * bit, as a byte nibble | 0xF0 where the fifth bit is clear. */
static inline __attribute__((always_inline)) void q8g_packed_vecs(const uint8_t *b, bool q5, __m512i v[8]) {
    if (!q5) {
        for (int p = 0; p < 8; p++) v[p] = _mm512_loadu_si512(b + 64 * p);
        return;
    }
    const __m512i lo = _mm512_set1_epi8(0x0F), hi = _mm512_set1_epi8((char)0xF0);
    const __m512i qh = _mm512_loadu_si512(b + 256);
    for (int k = 0; k < 4; k++) {
        const __m512i q = _mm512_loadu_si512(b + 64 * k);
        const __m512i nl = _mm512_and_si512(q, lo), nh = _mm512_and_si512(_mm512_srli_epi16(q, 4), lo);
        v[k] = _mm512_mask_mov_epi8(_mm512_or_si512(nl, hi), mf_qh_mask(qh, k), nl);
        v[k + 4] = _mm512_mask_mov_epi8(_mm512_or_si512(nh, hi), mf_qh_mask(qh, k + 4), nh);
    }
}

/* Blocks [i0, i1) of the packed panel at p into the panel layout above; the same blocks of the panel
 * at ahead (if any) are fetched meanwhile, as the repack does. */
static inline __attribute__((always_inline)) void q8g_unpack(const uint8_t *p, int64_t i0, int64_t i1, uint8_t *panel,
                                                             const uint8_t *ahead, bool q5) {
    const size_t pblk = Q8G_PBLK(q5);
    for (int64_t i = i0; i < i1; i++) {
        MF_GEMM_STREAM_AHEAD(ahead, i, pblk);
        const uint8_t *b = p + (size_t)i * pblk;
        __m512i v[8];
        q8g_packed_vecs(b, q5, v);
        q8g_store_vecs(v, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + Q8G_POFF_D(q5)))),
                       panel + (size_t)(i - i0) * Q8G_BLOCK_BYTES);
    }
}

/* Biased activation bytes and scales of tokens [t0, t0 + n): ab[(t * nb + i) * 32 + j], da[t * nb + i]. */
static void q8g_prepare(const uint8_t *act, size_t act_row, int64_t t0, int64_t n, int64_t nb, uint8_t *ab, float *da) {
    const __m256i bias = _mm256_set1_epi8((char)0x80);
    for (int64_t t = 0; t < n; t++) {
        const mf_block_q8_0 *a = (const mf_block_q8_0 *)(act + (size_t)(t0 + t) * act_row);
        for (int64_t i = 0; i < nb; i++) {
            _mm256_store_si256((__m256i *)(ab + (t * nb + i) * 32),
                               _mm256_xor_si256(bias, _mm256_loadu_si256((const __m256i *)a[i].qs)));
            da[t * nb + i] = _cvtsh_ss(a[i].d);
        }
    }
}

typedef int32_t __attribute__((may_alias, aligned(1))) q8g_i32_alias;

/* c + the 16 lanes' a . w, all operands in registers (left to themselves, compilers reload the
 * weights and start values from memory for every token: two more 64-byte loads per product). */
static inline __m512i q8g_dpbusd(__m512i c, __m512i a, __m512i w) {
    __m512i l;
    __asm__("vmovdqa64 %1, %0\n\tvpdpbusd %3, %2, %0" : "=&v"(l) : "v"(c), "v"(a), "v"(w));
    return l;
}

/* Up to Q8G_FEW tokens (a decode step, a speculative verification, a server step of a few sequences)
 * straight from a packed weight: no panel slice. Each block's weights and start values are formed in
 * registers for up to two tokens at a time (16 accumulators), each further pair reading the panel
 * again from cache; the first pass streams the panel, fetching eight blocks ahead, the second the
 * next panel into L2 (mf_few_pass_ahead). The float steps
 * are q8g_tile's, so the outputs are its bits. ab, da: the tokens' biased activations and scales
 * (q8g_prepare). Ahead of the packed GEMM through 16 tokens (Zen 4, bench_gemm --cold --packed
 * --threads 2 q8_0 4864 896 N: 1 token 0.13 against 0.26 ms, 8 0.34 against 0.39, 16 0.50 against
 * 0.56; 24 level). */
#define Q8G_FEW 16

static inline __attribute__((always_inline)) void q8g_few_pass(const int T, const uint8_t *p, int64_t nb, bool q5,
                                                               const uint8_t *ab, const float *da, size_t ahead,
                                                               float *y, size_t ldy, __mmask16 mask) {
    const size_t pblk = Q8G_PBLK(q5);
    __m512 acc[2][8];
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 8; k++) acc[t][k] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * pblk;
        MF_FEW_PREFETCH(b, ahead, pblk);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + Q8G_POFF_D(q5))));
        __m512 d[2];
        for (int t = 0; t < T; t++) d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(da[t * nb + i]));
        __m512i v[8];
        q8g_packed_vecs(b, q5, v);
        for (int k = 0; k < 8; k++) {
            const __m512i cp = q8g_start(v[k]);
            for (int t = 0; t < T; t++) {
                const __m512i a = _mm512_set1_epi32(*(const q8g_i32_alias *)(ab + (t * nb + i) * 32 + 4 * k));
                acc[t][k] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(q8g_dpbusd(cp, a, v[k])), acc[t][k]);
            }
        }
    }
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy, mask, mf_hsum8_lanes(acc[t]));
}

/* Rows [o0, o1) for nt <= Q8G_FEW tokens from the packed weight; scratch holds the prepared activations. */
static inline __attribute__((always_inline)) void q8g_few(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act,
                                                          size_t act_row, int64_t nt, float *y, size_t ldy,
                                                          void *scratch, bool q5) {
    const int64_t nb = w->ne[0] / 32;
    uint8_t *ab = scratch;
    float *da = (float *)(ab + nt * nb * 32);
    q8g_prepare(act, act_row, 0, nt, nb, ab, da);
    for (int64_t o = o0; o < o1; o += 16) {
        const __mmask16 mask = (__mmask16)((1u << MF_MIN(16, o1 - o)) - 1);
        const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
        for (int64_t t = 0; t < nt; t += 2) {
            float *yt = y + (size_t)t * ldy + o;
            const size_t ahead = mf_few_pass_ahead((int)(t / 2), Q8G_PBLK(q5), nb, o + 16 < o1);
            if (nt - t >= 2)
                q8g_few_pass(2, p, nb, q5, ab + t * nb * 32, da + t * nb, ahead, yt, ldy, mask);
            else
                q8g_few_pass(1, p, nb, q5, ab + t * nb * 32, da + t * nb, ahead, yt, ldy, mask);
        }
    }
}

/* T tokens (ab, da: each token's biased activation blocks and scales) against blocks [i0, i1) of one
 * panel. The accumulators start at zero (first) or from st[t] (eight vectors a token), and end in
 * st[t] or, after the last block (last), as the outputs y[t] of the 16 rows (row lanes in mask). */
static inline __attribute__((always_inline)) void q8g_tile(const int T, const uint8_t *panel, int64_t i0, int64_t i1,
                                                           const uint8_t *const *ab, const float *const *da,
                                                           __m512 *const *st, bool first, bool last,
                                                           float *const *y, __mmask16 mask) {
    __m512 acc[Q8G_TILE][8];
    for (int t = 0; t < T; t++)
        for (int p = 0; p < 8; p++) acc[t][p] = first ? _mm512_setzero_ps() : _mm512_load_ps(st[t] + p);
    for (int64_t i = i0; i < i1; i++) {
        const __m512i *wv = (const __m512i *)(panel + (size_t)(i - i0) * Q8G_BLOCK_BYTES);
        const __m512 dw = _mm512_load_ps(wv + 16);
        __m512 d[Q8G_TILE];
        for (int t = 0; t < T; t++) d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(da[t][i]));
        for (int p = 0; p < 8; p++) {
            const __m512i wp = _mm512_load_si512(wv + p), cp = _mm512_load_si512(wv + 8 + p);
            for (int t = 0; t < T; t++) {
                const __m512i a = _mm512_set1_epi32(*(const q8g_i32_alias *)(ab[t] + i * 32 + 4 * p));
                acc[t][p] = _mm512_fmadd_ps(d[t], _mm512_cvtepi32_ps(q8g_dpbusd(cp, a, wp)), acc[t][p]);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        if (!last) {
            for (int p = 0; p < 8; p++) _mm512_store_ps(st[t] + p, acc[t][p]);
            continue;
        }
        const __m512 s = mf_hsum8_lanes(acc[t]);
        _mm512_mask_storeu_ps(y[t], mask, s);
    }
}

/* Tokens [t, t + T) of the chunk that starts at token tc against blocks [i0, i1) of one panel. */
static inline __attribute__((always_inline)) void q8g_tile_at(const int T, const uint8_t *panel, int64_t nb, int64_t i0,
                                                              int64_t i1, const uint8_t *actb, const float *das,
                                                              __m512 *state, int64_t tc, int64_t t, float *y,
                                                              size_t ldy, __mmask16 mask) {
    const uint8_t *ab[Q8G_TILE];
    const float *da[Q8G_TILE];
    __m512 *st[Q8G_TILE];
    float *yt[Q8G_TILE];
    for (int k = 0; k < T; k++) {
        ab[k] = actb + (t + k) * nb * 32, da[k] = das + (t + k) * nb;
        st[k] = state + (t + k) * 8;
        yt[k] = y + (size_t)(tc + t + k) * ldy;
    }
    q8g_tile(T, panel, i0, i1, ab, da, st, i0 == 0, i1 == nb, yt, mask);
}

typedef void q8g_unpack_fn(const uint8_t *p, int64_t i0, int64_t i1, uint8_t *panel, const uint8_t *ahead);

/* The GEMM's run (cpu_gemm.h): a few tokens straight from the packed layout where w has it
 * (q8g_few), else panels unpacked from it (unpack) or from the file's blocks (repack). */
static inline __attribute__((always_inline)) void q8g_run(q8g_repack_fn *repack, q8g_unpack_fn *unpack, bool packed,
                                                          bool q5, const mf_weight *w, int64_t o0, int64_t o1,
                                                          const uint8_t *act, size_t act_row, int64_t nt, float *y,
                                                          size_t ldy, void *scratch) {
    if (packed && nt <= Q8G_FEW) {
        q8g_few(w, o0, o1, act, act_row, nt, y, ldy, scratch, q5);
        return;
    }
    const int64_t nb = w->ne[0] / 32, max_chunk = q8g_max_chunk(nb);
    uint8_t *panel = scratch;
    __m512 *state = (__m512 *)(panel + (size_t)MF_MIN(nb, Q8G_SLICE) * Q8G_BLOCK_BYTES);
    uint8_t *actb = (uint8_t *)(state + (nb > Q8G_SLICE ? max_chunk * 8 : 0));
    float *das = (float *)(actb + max_chunk * nb * 32);
    /* Equal chunks, each a multiple of the tile (but the last); equal slices. */
    const int64_t chunk = mf_gemm_chunk(nt, max_chunk, Q8G_TILE);
    const int64_t n_slices = (nb + Q8G_SLICE - 1) / Q8G_SLICE, slice = (nb + n_slices - 1) / n_slices;
    for (int64_t tc = 0; tc < nt; tc += chunk) {
        const int64_t n = MF_MIN(chunk, nt - tc);
        q8g_prepare(act, act_row, tc, n, nb, actb, das);
        for (int64_t ob = o0; ob < o1; ob += 16) {
            const int nr = (int)MF_MIN(16, o1 - ob);
            const __mmask16 mask = (__mmask16)((1u << nr) - 1);
            const uint8_t *data = packed ? w->packed : w->data;
            const mf_gemm_prefetch pf = mf_gemm_prefetch_plan(data, w->row_bytes, o0, o1, ob, tc, n, nt, Q8G_TILE,
                                                              n_slices);
            size_t j = 0;
            for (int64_t i0 = 0; i0 < nb; i0 += slice) {
                const int64_t i1 = MF_MIN(nb, i0 + slice);
                if (packed)
                    unpack(data + (size_t)ob * w->row_bytes, i0, i1, panel, pf.lines ? NULL : pf.next);
                else
                    repack(w, ob, nr, i0, i1, panel, pf.lines ? NULL : pf.next);
                for (int64_t t = 0; t < n; t += Q8G_TILE, j++) {
                    mf_gemm_prefetch_step(&pf, j);
                    if (n - t >= Q8G_TILE)
                        q8g_tile_at(Q8G_TILE, panel, nb, i0, i1, actb, das, state, tc, t, y + ob, ldy, mask);
                    else if (n - t == 2)
                        q8g_tile_at(2, panel, nb, i0, i1, actb, das, state, tc, t, y + ob, ldy, mask);
                    else
                        q8g_tile_at(1, panel, nb, i0, i1, actb, das, state, tc, t, y + ob, ldy, mask);
                }
            }
        }
    }
}

#endif /* MF_CPU_GEMM_Q8_AVX512_H */
