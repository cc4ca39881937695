/* gemm_q8_avx2.h: the AVX2 prefill GEMM (and its AVX-VNNI build) of the 32-value formats in the plain order:
 * Q8_0 and Q5_0 (signed weights, Q8_0 activations), Q4_1 and Q5_1 (unsigned weights with a minimum,
 * Q8_1 activations) (see cpu_gemm.h). Each output keeps the ordered dot's float steps (st_q8_0,
 * st_q5_0, st_q4_1, st_q5_1 in cpu_dot_order_avx2.c): eight float lanes, lane p taking per block
 * acc_p = fma(d_w * d_a, (float)L_p, acc_p) with L_p the exact sum of the products at bytes 4p..4p+3,
 * then ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)), for Q4_1/Q5_1 plus the minimums'
 * chain s = fma(m_w, s_a, s) over the blocks. Included by *_avx2.c files only.
 *
 * Unsigned weights (Q4_1, Q5_1: q <= 31) go into vpmaddubsw as they are, against the activation
 * bytes; the panel then holds one vector per step (the q), h2f(d) and h2f(m): 320 bytes a block.
 *
 * The panel holds eight weight rows, one per 32-bit lane, so one vector op forms L_p of eight rows
 * against one token's four activation bytes (broadcast): the dot's own signed product, |w| by
 * sign(a, w) with vpmaddubsw (a pair is at most 2 * 128 * 127 < 32768: no saturation), then vpmaddwd
 * by ones (with AVX-VNNI one vpdpbusd). Per 32 products that is one broadcast, three integer ops, a conversion and the fma, where
 * the dot also reloads the weights and re-forms their scale product for every token.
 *
 * Panel layout (per-thread scratch), per block of a slice of the K / 32 blocks: for step p (0..7) the
 * vector of |w| bytes 4p..4p+3 of each row, then the vector of the signed bytes (their signs), then
 * the 8 rows' h2f(d) as floats: 544 bytes; rows past the matrix are zeros (their outputs are never
 * stored). Slices of Q8A_SLICE blocks (17 KB) stay in L1 while the tokens of a chunk pass over them,
 * each token's eight accumulators parked in scratch between slices (the float steps of each output
 * stay one chain per lane in block order). Then the chunk's activation scales h2f(a.d), [t][i]. */
#ifndef MF_CPU_GEMM_Q8_AVX2_H
#define MF_CPU_GEMM_Q8_AVX2_H

#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"
#include "x86/gemm_q8_packed.h"
#include "x86/gemm_q_1_packed.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

enum {
    Q8A_BLOCK_BYTES = 17 * 32,   /* one block of an 8-row panel (signed weights; unsigned: 10 * 32) */
    Q8A_SLICE = 32,              /* blocks per slice */
    Q8A_CHUNK_BYTES = 192 << 10, /* activation rows of a chunk of tokens: they stay in L2 */
};

/* The most tokens run per chunk for rows of nb blocks: activations of about Q8A_CHUNK_BYTES, at least 8. */
static inline int64_t q8a_max_chunk(int64_t nb) {
    return MF_MAX(8, Q8A_CHUNK_BYTES / (nb * (int64_t)sizeof(mf_block_q8_1)));
}

/* Panel slice, the parked accumulators of a chunk's tokens (9 vectors each: the lanes and the
 * minimums' chain), the chunk's activation scales and sums. */
static inline size_t q8a_scratch_size(int64_t K) {
    const int64_t nb = K / 32, mc = q8a_max_chunk(nb);
    return (size_t)Q8A_SLICE * Q8A_BLOCK_BYTES + (size_t)mc * 9 * 32 + (size_t)(2 * mc * nb) * sizeof(float);
}

/* A type's 32 weight bytes of one block, signed (Q8_0, Q5_0) or unsigned (Q4_1, Q5_1); the block's
 * half scale is its first field, then (unsigned) its half minimum. */
typedef __m256i q8a_load_fn(const uint8_t *block);

/* Bytes of one panel block: signed weights (|w| and w per step, d), or unsigned (q per step, d, m). */
static inline size_t q8a_block_bytes(bool um) { return um ? 10 * 32 : Q8A_BLOCK_BYTES; }

/* Blocks [i0, i1) of rows [ob, ob + nr) (nr <= 8) of w into the panel layout: a 4 x 4 transpose of
 * the dwords within each 128-bit lane (rows 0-3 and 4-7 share a vector) gathers step p of 8 rows. */
static inline __attribute__((always_inline)) void q8a_pack(bool um, const mf_weight *w, int64_t ob, int nr,
                                                           int64_t i0, int64_t i1, uint8_t *panel,
                                                           const uint8_t *ahead, size_t block_bytes,
                                                           q8a_load_fn *load) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    for (int64_t i = i0; i < i1; i++, panel += q8a_block_bytes(um)) {
        MF_GEMM_STREAM_AHEAD(ahead, i, 8 * block_bytes);
        __m256i r[8];
        uint16_t dh[8], mh[8];
        for (int k = 0; k < 8; k++) {
            if (k < nr) {
                const uint8_t *b = base + (size_t)k * w->row_bytes + (size_t)i * block_bytes;
                r[k] = load(b);
                memcpy(&dh[k], b, 2);
                memcpy(&mh[k], b + 2, 2);
            } else {
                r[k] = _mm256_setzero_si256();
                dh[k] = mh[k] = 0;
            }
        }
        __m256i d[8];
        mf_avx2_transpose8_i32(r, d); /* d[k] lane j: dword k of row j */
        __m256i *p = (__m256i *)panel;
        for (int k = 0; k < 8; k++) {
            if (um) {
                _mm256_store_si256(p + k, d[k]);
                continue;
            }
            _mm256_store_si256(p + 2 * k, _mm256_sign_epi8(d[k], d[k]));
            _mm256_store_si256(p + 2 * k + 1, d[k]);
        }
        if (um) {
            _mm256_store_ps((float *)(p + 8), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh)));
            _mm256_store_ps((float *)(p + 9), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)mh)));
            continue;
        }
        _mm256_store_ps((float *)(p + 16), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh)));
    }
}


/* One token (its activation blocks at a, bb bytes each; their scales da and, unsigned, sums sa)
 * against blocks [i0, i1) of the panel: the eight accumulators (and the minimums' chain) start at
 * zero (first) or from st, and end in st or, after the last block (last), as the eight rows'
 * outputs y[0..8) (lanes in mask). */
static inline __attribute__((always_inline)) void q8a_token(bool um, const uint8_t *panel, int64_t i0, int64_t i1,
                                                            const uint8_t *a, size_t bb, const float *da,
                                                            const float *sa, __m256 *st, bool first, bool last,
                                                            float *y, __m256i mask) {
    __m256 acc[8], sm = _mm256_setzero_ps();
    for (int p = 0; p < 8; p++) acc[p] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st + p));
    if (um && !first) sm = _mm256_load_ps((const float *)(st + 8));
    for (int64_t i = i0; i < i1; i++, panel += q8a_block_bytes(um)) {
        const __m256i *wv = (const __m256i *)panel;
        const uint8_t *q = a + (size_t)i * bb + (bb - 32); /* the quants end each activation block */
        if (um) {
            const __m256 d = _mm256_mul_ps(_mm256_load_ps((const float *)(wv + 8)), _mm256_broadcast_ss(da + i));
            sm = _mm256_fmadd_ps(_mm256_load_ps((const float *)(wv + 9)), _mm256_broadcast_ss(sa + i), sm);
            for (int p = 0; p < 8; p++) {
                const __m256i x = mf_avx2_bcast4(q + 4 * p);
                const __m256i l = mf_avx2_dpbusd(_mm256_setzero_si256(), _mm256_load_si256(wv + p), x);
                acc[p] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc[p]);
            }
            continue;
        }
        const __m256 d = _mm256_mul_ps(_mm256_load_ps((const float *)(wv + 16)), _mm256_broadcast_ss(da + i));
        for (int p = 0; p < 8; p++) {
            const __m256i x = mf_avx2_bcast4(q + 4 * p);
            const __m256i s = _mm256_sign_epi8(x, _mm256_load_si256(wv + 2 * p + 1));
            const __m256i l = mf_avx2_dpbusd(_mm256_setzero_si256(), _mm256_load_si256(wv + 2 * p), s);
            acc[p] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc[p]);
        }
    }
    if (!last) {
        for (int p = 0; p < 8; p++) _mm256_store_ps((float *)(st + p), acc[p]);
        if (um) _mm256_store_ps((float *)(st + 8), sm);
        return;
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                             _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    if (um) s = _mm256_add_ps(s, sm);
    _mm256_maskstore_ps(y, mask, s);
}

/* Q8_0's one-chain order (mf_cpu_dot_q8_0_rp_ref): nt (1..4) tokens against blocks [i0, i1) of a
 * signed panel, each (row, token) output one float lane stepped per block by fma(exact block sum,
 * d_w * d_a, acc), the block sums formed in i32 over the eight steps. One register per output lets
 * four tokens share each step's weight loads; with eight float lanes per output the conversion and
 * fma per 32 products and eight accumulators per token held the GEMM to half Q4_0's speed. a[t]:
 * token t's activation blocks; da[t] their scales; st + t its parked chain. */
static inline __attribute__((always_inline)) void q8a_chain(const int nt, const uint8_t *panel, int64_t i0,
                                                            int64_t i1, const uint8_t *const *a, const float *const *da,
                                                            __m256 *st, bool first, bool last, float *y, size_t ldy,
                                                            __m256i mask) {
    __m256 acc[4];
    for (int t = 0; t < nt; t++) acc[t] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st + t));
    for (int64_t i = i0; i < i1; i++, panel += Q8A_BLOCK_BYTES) {
        const __m256i *wv = (const __m256i *)panel;
        __m256i l[4];
        for (int t = 0; t < nt; t++) l[t] = _mm256_setzero_si256();
        for (int p = 0; p < 8; p++) {
            const __m256i wa = _mm256_load_si256(wv + 2 * p), ws = _mm256_load_si256(wv + 2 * p + 1);
            for (int t = 0; t < nt; t++) {
                const uint8_t *q = a[t] + (size_t)i * sizeof(mf_block_q8_0) + offsetof(mf_block_q8_0, qs);
                l[t] = mf_avx2_dpbusd(l[t], wa, _mm256_sign_epi8(mf_avx2_bcast4(q + 4 * p), ws));
            }
        }
        const __m256 dw = _mm256_load_ps((const float *)(wv + 16));
        for (int t = 0; t < nt; t++)
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l[t]), _mm256_mul_ps(dw, _mm256_broadcast_ss(da[t] + i)), acc[t]);
    }
    for (int t = 0; t < nt; t++) {
        if (last)
            _mm256_maskstore_ps(y + (size_t)t * ldy, mask, acc[t]);
        else
            _mm256_store_ps((float *)(st + t), acc[t]);
    }
}

/* The GEMM's run (cpu_gemm.h) with the type's panel packing. */
typedef void q8a_pack_fn(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                         const uint8_t *ahead);

static inline __attribute__((always_inline)) void q8a_run(bool um, bool chain, q8a_pack_fn *pack, const mf_weight *w,
                                                          int64_t o0, int64_t o1, const uint8_t *act, size_t act_row,
                                                          int64_t nt, float *y, size_t ldy, void *scratch) {
    const int64_t nb = w->ne[0] / 32, mc = q8a_max_chunk(nb);
    const size_t bb = um ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0);
    uint8_t *panel = scratch;
    __m256 *state = (__m256 *)(panel + (size_t)Q8A_SLICE * Q8A_BLOCK_BYTES);
    float *das = (float *)(state + mc * 9), *sas = das + mc * nb;
    const int64_t n_slices = (nb + Q8A_SLICE - 1) / Q8A_SLICE, slice = (nb + n_slices - 1) / n_slices;
    for (int64_t tc = 0; tc < nt; tc += mc) {
        const int64_t n = MF_MIN(mc, nt - tc);
        for (int64_t t = 0; t < n; t++) {
            const uint8_t *a = act + (size_t)(tc + t) * act_row;
            for (int64_t i = 0; i < nb; i++) {
                uint16_t h[2];
                memcpy(h, a + (size_t)i * bb, um ? 4 : 2);
                das[t * nb + i] = _cvtsh_ss(h[0]);
                if (um) sas[t * nb + i] = _cvtsh_ss(h[1]);
            }
        }
        for (int64_t ob = o0; ob < o1; ob += 8) {
            const int nr = (int)MF_MIN(8, o1 - ob);
            const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
            const uint8_t *ahead = mf_gemm_ahead(w, ob, 8, o1, nt, 32);
            for (int64_t i0 = 0; i0 < nb; i0 += slice) {
                const int64_t i1 = MF_MIN(nb, i0 + slice);
                pack(w, ob, nr, i0, i1, panel, ahead);
                if (chain) {
                    for (int64_t t = 0; t < n; t += 4) {
                        const uint8_t *at[4];
                        const float *dt[4];
                        const int k = (int)MF_MIN(4, n - t);
                        for (int j = 0; j < k; j++) {
                            at[j] = act + (size_t)(tc + t + j) * act_row;
                            dt[j] = das + (t + j) * nb;
                        }
                        float *yt = y + (size_t)(tc + t) * ldy + ob;
                        switch (k) {
                        case 1: q8a_chain(1, panel, i0, i1, at, dt, state + t, i0 == 0, i1 == nb, yt, ldy, mask); break;
                        case 2: q8a_chain(2, panel, i0, i1, at, dt, state + t, i0 == 0, i1 == nb, yt, ldy, mask); break;
                        case 3: q8a_chain(3, panel, i0, i1, at, dt, state + t, i0 == 0, i1 == nb, yt, ldy, mask); break;
                        default: q8a_chain(4, panel, i0, i1, at, dt, state + t, i0 == 0, i1 == nb, yt, ldy, mask); break;
                        }
                    }
                    continue;
                }
                for (int64_t t = 0; t < n; t++)
                    q8a_token(um, panel, i0, i1, act + (size_t)(tc + t) * act_row, bb, das + t * nb, sas + t * nb,
                              state + t * 9, i0 == 0, i1 == nb, y + (size_t)(tc + t) * ldy + ob, mask);
            }
        }
    }
}

/* ---- a packed weight: Q8_0 or Q5_0 (gemm_q8_packed.h) or Q4_1 (gemm_q_1_packed.h), sixteen rows a
 * panel, each 64-byte vector two of ours (rows 0-7, then 8-15) ---- */

enum { Q8A_Q8_0, Q8A_Q5_0, Q8A_Q4_1 }; /* the packed kinds; Q4_1's weights are unsigned (um) */

/* Bytes of a packed block of 16 rows; where its half scales d (and, Q4_1, the minimums m) start. */
static inline size_t q8a_pblk(int kind) {
    return kind == Q8A_Q4_1 ? Q1G_PBLK(false) : Q8G_PBLK(kind == Q8A_Q5_0);
}
static inline size_t q8a_poff_d(int kind) {
    return kind == Q8A_Q4_1 ? Q1G_PBLK(false) - 64 : Q8G_POFF_D(kind == Q8A_Q5_0);
}

/* Step p's vector of eight rows (half h) of the packed block b: Q8_0 the signed bytes (vector p);
 * Q4_1 the codes 4p..4p+3, the low nibbles of vector p (p < 4) or the high ones of vector p - 4;
 * Q5_0 those nibbles with each value's fifth bit from the rows' qh words (vector 4), as signed
 * values q5 - 16: the nibble where the bit is set, nibble | 0xF0 where it is clear (st_q5_0's
 * mf_x86_q5_0_signed32). Byte j of lane r takes bit 4p + j of row r's qh: the lane's byte of bits
 * 4p.. is spread to its four bytes, each tested for its own bit. */
static inline __attribute__((always_inline)) __m256i q8a_packed_step(int kind, const uint8_t *b, int h, int p) {
    if (kind == Q8A_Q8_0) return _mm256_loadu_si256((const __m256i *)(b + 64 * p + 32 * h));
    const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 64 * (p & 3) + 32 * h));
    const __m256i nib = _mm256_and_si256(p < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F));
    if (kind == Q8A_Q4_1) return nib;
    const __m256i qh = _mm256_srli_epi32(_mm256_loadu_si256((const __m256i *)(b + 256 + 32 * h)), 4 * p);
    const __m256i spread = _mm256_shuffle_epi8(qh, _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0,
                                                                    0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12));
    const __m256i bit = _mm256_set1_epi32(0x08040201);
    const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
    return _mm256_or_si256(nib, _mm256_andnot_si256(set, _mm256_set1_epi8((char)0xF0)));
}

/* Blocks [i0, i1) of the half of a packed panel that holds rows [ob, ob + 8) into the panel layout
 * above (a q8a_pack_fn: ob is o0 + 8k, and o0 a multiple of 16). The first half's pass fetches the
 * same blocks of the next panel into L2 (rows past the matrix: a prefetch never faults). */
static inline __attribute__((always_inline)) void q8a_unpack_packed(int kind, const mf_weight *w, int64_t ob,
                                                                    int64_t i0, int64_t i1, uint8_t *panel) {
    const bool um = kind == Q8A_Q4_1;
    const size_t pblk = q8a_pblk(kind), off_d = q8a_poff_d(kind);
    const int h = (int)(ob / 8 % 2);
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(ob - 8 * h) * w->row_bytes;
    for (int64_t i = i0; i < i1; i++, panel += q8a_block_bytes(um)) {
        const uint8_t *b = p + (size_t)i * pblk;
        if (h == 0)
            for (size_t l = 0; l < pblk; l += 64) _mm_prefetch((const char *)b + 16 * w->row_bytes + l, _MM_HINT_T1);
        __m256i *o = (__m256i *)panel;
        for (int k = 0; k < 8; k++) {
            const __m256i v = q8a_packed_step(kind, b, h, k);
            if (um) {
                _mm256_store_si256(o + k, v);
                continue;
            }
            _mm256_store_si256(o + 2 * k, _mm256_sign_epi8(v, v));
            _mm256_store_si256(o + 2 * k + 1, v);
        }
        const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + off_d + 16 * h)));
        _mm256_store_ps((float *)(o + (um ? 8 : 16)), d);
        if (um) _mm256_store_ps((float *)(o + 9), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + off_d + 32 + 16 * h))));
    }
}

/* One token against half h (rows 8h..8h+7) of the packed panel at p, nb blocks, straight from the
 * packed bytes: the steps of q8a_token, with Q8_0's |w| (Q4_1's codes) formed in registers instead
 * of read from a panel copy. Pass k of a panel's n_pass fetches its share of the next panel (next,
 * NULL: none; mf_few_share); the first pass reads what was fetched a panel earlier. */
static inline __attribute__((always_inline)) void q8a_few_pass(int kind, const uint8_t *p, int h, int64_t nb,
                                                               const uint8_t *a, const uint8_t *next, int k, int n_pass,
                                                               float *y, __m256i mask) {
    const bool um = kind == Q8A_Q4_1;
    const size_t pblk = q8a_pblk(kind), off_d = q8a_poff_d(kind);
    const size_t bb = um ? sizeof(mf_block_q8_1) : sizeof(mf_block_q8_0);
    __m256 acc[8], sm = _mm256_setzero_ps();
    for (int j = 0; j < 8; j++) acc[j] = _mm256_setzero_ps();
    mf_few_share pf = mf_few_share_of(next, k, n_pass, nb, pblk);
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * pblk;
        MF_FEW_SHARE_STEP(pf);
        const uint8_t *ab = a + (size_t)i * bb, *q = ab + (bb - 32); /* the quants end each activation block */
        uint16_t hs[2];
        memcpy(hs, ab, um ? 4 : 2);
        const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + off_d + 16 * h))),
                                       _mm256_set1_ps(_cvtsh_ss(hs[0])));
        if (um)
            sm = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + off_d + 32 + 16 * h))),
                                 _mm256_set1_ps(_cvtsh_ss(hs[1])), sm);
        for (int j = 0; j < 8; j++) {
            const __m256i v = q8a_packed_step(kind, b, h, j), x = mf_avx2_bcast4(q + 4 * j);
            const __m256i l = um ? mf_avx2_dpbusd(_mm256_setzero_si256(), v, x)
                                 : mf_avx2_dpbusd(_mm256_setzero_si256(), _mm256_sign_epi8(v, v), _mm256_sign_epi8(x, v));
            acc[j] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc[j]);
        }
    }
    __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                             _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    if (um) s = _mm256_add_ps(s, sm);
    _mm256_maskstore_ps(y, mask, s);
}

/* Up to Q8A_FEW tokens (a decode step, the decode steps of several sequences, a speculative
 * verification) from a packed weight with no panel copy: per 16-row panel, one pass per half and
 * token, computing from cache after the first while the next panel streams in. Each token keeps
 * eight accumulators of eight rows (the sixteen registers hold no second token's), so a pass per
 * token. A thread's first panel is fetched as it is read. Zen 3, 2 threads: a 0.5B model's output
 * matrix from memory (`bench_gemm --cold --packed q8_0 151936 896 4`, six alternations against the
 * row-group dots on the file's layout) 8.2-11.9 -> 7.7-8.1 ms, one token level (4.6-6.3 against
 * 5.0-6.1); in cache (`--threads 1 q8_0 1536 896`) 4 tokens 0.160 -> 0.146 ms, 1 token 0.048-0.064
 * -> 0.040-0.051. With the next panel fetched all in the second pass (as the AVX-512 path does) four
 * tokens took 16-18 ms: the later passes left the memory idle. */
#define Q8A_FEW 8
/* Q4_1's codes are split from the nibbles again in every pass: from five tokens on, panels unpacked
 * once for all of them (q8a_run) were faster (`bench_gemm --cold --packed q4_1 4864 896 T`, Zen 3, 2
 * threads: 8 tokens 0.44-0.52 against 0.45-0.80 ms; 1-3 tokens the passes 0.08-0.17 against
 * 0.13-0.26). */
#define Q8A_FEW_UM 4
/* Q5_0's fifth bits cost more per pass than Q4_1's split: up to two tokens (measured below, in
 * gemm_q5_0_avx2.c). */
#define Q8A_FEW_Q5 2

static inline __attribute__((always_inline)) void q8a_few(int kind, const mf_weight *w, int64_t o0, int64_t o1,
                                                          const uint8_t *act, size_t act_row, int64_t nt, float *y,
                                                          size_t ldy) {
    const int64_t nb = w->ne[0] / 32;
    for (int64_t o = o0; o < o1; o += 16) {
        const int64_t nr = MF_MIN(16, o1 - o);
        const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
        const uint8_t *next = o + 16 < o1 ? p + 16 * w->row_bytes : NULL;
        const int nh = nr > 8 ? 2 : 1, n_pass = nh * (int)nt;
        for (int h = 0; h < nh; h++) {
            const __m256i mask = mf_avx2_row_mask((int)MF_MIN(8, nr - 8 * h));
            for (int64_t t = 0; t < nt; t++)
                q8a_few_pass(kind, p, h, nb, act + (size_t)t * act_row, next, h * (int)nt + (int)t, n_pass,
                             y + (size_t)t * ldy + o + 8 * h, mask);
        }
    }
}

/* The fewest tokens for which a weight in the file's layout takes these GEMMs rather than the
 * eight-row dots (mf_cpu_gemm.min_tokens; Q8_0's own is 5, gemm_q8_0_avx2.c): with 2 tokens the
 * panel unpacking costs more than the dots save (bench_gemm, 896 x 4864: Q8_0 0.54 vs 0.50 ms, Q4_K
 * 0.52 vs 0.45, Q6_K 0.83 vs 0.44); with 4 the GEMM is ahead. A packed weight takes the GEMM for
 * every token count. */
#define Q8A_MIN_TOKENS 4

/* A run (cpu_gemm.h) of the GEMM g, whose packed layout is of this kind: up to few tokens straight
 * from a weight's packed copy (q8a_few), more through panels unpacked from it (unpack); a weight in
 * the file's layout through panels packed from its blocks (pack). */
static inline __attribute__((always_inline)) void q8a_run_packed(int kind, int64_t few, const mf_cpu_gemm *g,
                                                                 q8a_pack_fn *pack, q8a_pack_fn *unpack,
                                                                 const mf_weight *w, int64_t o0, int64_t o1,
                                                                 const uint8_t *act, size_t act_row, int64_t nt,
                                                                 float *y, size_t ldy, void *scratch) {
    const bool packed = mf_cpu_gemm_packed(g, w);
    if (packed && nt <= few)
        q8a_few(kind, w, o0, o1, act, act_row, nt, y, ldy);
    else
        q8a_run(kind == Q8A_Q4_1, false, packed ? unpack : pack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

#endif /* MF_CPU_GEMM_Q8_AVX2_H */
