/* gemm_q4_k_avx512.c: the Q4_K prefill GEMM for AVX-512 VNNI (see cpu_gemm.h). Blocks of 32 weight
 * rows are unpacked once per chunk of up to 256 tokens into a row-interleaved scratch copy; then each
 * tile of 4 tokens runs the repacked order's integer sums for 16 rows per vector (one row per i32
 * lane) and its float steps lane-wise, so each output is bit for bit st_q4_K_rp's (and its scalar
 * twin mf_cpu_dot_q4_K_rp_ref's), whatever tile its token falls in. */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx512_util.h"
#include "x86/gemm_q4_k_packed.h"
#include "core/core.h"
#include "quant/quant.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* The order (llama.cpp's Q4_K GEMM, per output), per super-block of 256 values, for one weight row
 * and one Q8_K activation block a (sc, mn: the row's 6-bit scales and mins; D_j = sum of the 32
 * unsigned nibbles of sub-block j times a's values there; S_j = sum of a's values in sub-block j):
 *     d = h2f(w.d) * a.d, dm = h2f(w.dmin) * a.d
 *     isum_c = sc[2c] * D_2c + sc[2c+1] * D_2c+1,  m_c = mn[2c] * S_2c + mn[2c+1] * S_2c+1
 *     for c = 0..3: s = fma((float)isum_c, d, s), sm = fma((float)m_c, dm, sm)
 * and the output is s - sm. All integers are exact (|D| <= 15 * 128 * 32, |isum_c| < 2^23, int32 sums),
 * so they may be formed in any order, here isum_c as sc[2c] * (float)D_2c + sc[2c+1] * (float)D_2c+1
 * in float (every term and partial sum an integer below 2^24: exact, and cheaper than vpmulld); the
 * float steps are the ordered dot's, lane-wise.
 *
 * Sub-blocks 2c and 2c+1 are the low and high nibbles of qs bytes 32c..32c+31: bytes 32c+4k..+3
 * hold values 4k..4k+3 of both. A zmm lane r carries row r, so vpdpbusd of the unpacked nibble
 * bytes of 16 rows against the token's 4 activation bytes broadcast adds 4 products per row. */

enum { RV = 2, ROWS = 16 * RV, TT = 4, TC_MAX = 256, QK = 256, PVEC = MF_Q4K_PVEC };

/* One super-block of a block of 32 rows (two vectors of 16: [rv]), lane r of vector rv = row 16rv+r. */
typedef struct {
    __m512i q[4][8][2][RV]; /* [c][k][h]: nibbles (h = 0 low, 1 high) of bytes 32c+4k..32c+4k+3 */
    __m512 sc[8][RV];       /* scale of sub-block j, as a float (exact) */
    __m512i mn[4][RV];      /* mins of sub-blocks 2c, 2c+1 as an int16 pair */
    __m512 d[RV], dm[RV];   /* h2f(d), h2f(dmin) */
} sb_panel;


/* The scales of a super-block for 16 rows (lane r: row r) from the header words h = d | dmin << 16
 * and the scale words u0, u1, u2: h2f(d), h2f(dmin), the eight scales as floats (exact), the mins of
 * sub-blocks 2c, 2c+1 as an int16 pair. */
static inline __attribute__((always_inline)) void sb_scales(__m512i h, __m512i u0, __m512i u1, __m512i u2, __m512 *d,
                                                            __m512 *dm, __m512 sc[8], __m512i mn[4]) {
    const __m512i b8 = _mm512_set1_epi32(0xFF);
    *d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
    *dm = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));
    __m512i s0, s1, m0, m1;
    mf_k_scale_words(u0, u1, u2, &s0, &s1, &m0, &m1);
    for (int j = 0; j < 4; j++) {
        sc[j] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(s0, 8 * j), b8));
        sc[4 + j] = _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srli_epi32(s1, 8 * j), b8));
    }
    /* pair (byte 2i, byte 2i+1) of x -> int16 pair */
    const __m512i pl = _mm512_set1_epi32(0xFF), ph = _mm512_set1_epi32(0xFF0000);
    mn[0] = _mm512_or_si512(_mm512_and_si512(m0, pl), _mm512_and_si512(_mm512_slli_epi32(m0, 8), ph));
    mn[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(m0, 16), pl), _mm512_and_si512(_mm512_srli_epi32(m0, 8), ph));
    mn[2] = _mm512_or_si512(_mm512_and_si512(m1, pl), _mm512_and_si512(_mm512_slli_epi32(m1, 8), ph));
    mn[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(m1, 16), pl), _mm512_and_si512(_mm512_srli_epi32(m1, 8), ph));
}

/* Vector rv of every super-block of the panel from weight rows w0 + r * rb, r < nr (<= 16); rows
 * past nr are zero. ahead: the 16 rows to stream in meanwhile (MF_GEMM_STREAM_AHEAD), or NULL. */
static void unpack16(const uint8_t *w0, size_t rb, int nr, int64_t nsb, sb_panel *p, int rv, const uint8_t *ahead,
                     const uint8_t *packed) {
    const __mmask16 live = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)rb));
    const __m512i zero = _mm512_setzero_si512(), m4 = _mm512_set1_epi8(0x0F);
    for (int64_t sb = 0; sb < nsb; sb++) {
        MF_GEMM_STREAM_AHEAD(ahead, sb, 16 * sizeof(mf_block_q4_K));
        const uint8_t *b = w0 + (size_t)sb * sizeof(mf_block_q4_K);
        const __m512i *pk = packed ? (const __m512i *)(packed + (size_t)sb * PVEC * 64) : NULL;
        sb_panel *ps = p + sb;
        /* the header words: d | dmin << 16, then the 12 scale bytes as u0, u1, u2 (see k4_scales) */
        const __m512i h = pk ? _mm512_load_si512(pk + 32) : _mm512_mask_i32gather_epi32(zero, live, idx, b, 1);
        const __m512i u0 = pk ? _mm512_load_si512(pk + 33) : _mm512_mask_i32gather_epi32(zero, live, idx, b + 4, 1);
        const __m512i u1 = pk ? _mm512_load_si512(pk + 34) : _mm512_mask_i32gather_epi32(zero, live, idx, b + 8, 1);
        const __m512i u2 = pk ? _mm512_load_si512(pk + 35) : _mm512_mask_i32gather_epi32(zero, live, idx, b + 12, 1);
        __m512 sc[8];
        __m512i mn[4];
        sb_scales(h, u0, u1, u2, &ps->d[rv], &ps->dm[rv], sc, mn);
        for (int j = 0; j < 8; j++) ps->sc[j][rv] = sc[j];
        for (int c = 0; c < 4; c++) ps->mn[c][rv] = mn[c];
        if (pk) {
            for (int j = 0; j < 32; j++) {
                const __m512i v = _mm512_load_si512(pk + j);
                ps->q[j / 8][j % 8][0][rv] = _mm512_and_si512(v, m4);
                ps->q[j / 8][j % 8][1][rv] = _mm512_and_si512(_mm512_srli_epi32(v, 4), m4);
            }
            continue;
        }
        /* qs words 0..15 (chunks 0, 1) and 16..31 (chunks 2, 3) of each row, transposed */
        __m512i x[16], y[16];
        for (int r = 0; r < 16; r++) {
            x[r] = y[r] = zero;
            if (r < nr) {
                const uint8_t *qs = b + (size_t)r * rb + offsetof(mf_block_q4_K, qs);
                x[r] = _mm512_loadu_si512(qs);
                y[r] = _mm512_loadu_si512(qs + 64);
            }
        }
        mf_transpose16_i32(x);
        mf_transpose16_i32(y);
        for (int j = 0; j < 32; j++) {
            const __m512i v = j < 16 ? x[j] : y[j - 16];
            ps->q[j / 8][j % 8][0][rv] = _mm512_and_si512(v, m4);
            ps->q[j / 8][j % 8][1][rv] = _mm512_and_si512(_mm512_srli_epi32(v, 4), m4);
        }
    }
}

/* ---- the packed layout: gemm_q4_k_packed.h ---- */

static inline int32_t load_i32(const void *p) {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Outputs of nt tokens (act rows act + t * act_row) x nr vectors of 16 rows: y[t * ldy + 16 * rv + r],
 * the last vector's lanes limited to mlast. stab[t * stab_row + 4 * sb + c]: the token's (S_2c, S_2c+1)
 * as an int16 pair. */
static inline __attribute__((always_inline)) void tile(const sb_panel *p, int64_t nsb, const uint8_t *act,
                                                       size_t act_row, const uint32_t *stab, size_t stab_row,
                                                       const int nt, const int nr, float *y, size_t ldy,
                                                       __mmask16 mlast) {
    __m512 s[TT][RV], sm[TT][RV];
    /* The tile's output lines, fetched now: a store that misses at the end of the tile holds up the
     * stores of the next one. */
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++) {
            _mm_prefetch((const char *)(y + (size_t)t * ldy + 16 * r), _MM_HINT_T0);
            _mm_prefetch((const char *)(y + (size_t)t * ldy + 16 * r + 15), _MM_HINT_T0);
            s[t][r] = sm[t][r] = _mm512_setzero_ps();
        }
    for (int64_t sb = 0; sb < nsb; sb++) {
        const sb_panel *ps = p + sb;
        const mf_block_q8_K *ab[TT];
        __m512 d[TT][RV];
        for (int t = 0; t < nt; t++) {
            ab[t] = (const mf_block_q8_K *)(act + (size_t)t * act_row) + sb;
            const __m512 ad = _mm512_set1_ps(ab[t]->d);
            for (int r = 0; r < nr; r++) d[t][r] = _mm512_mul_ps(ps->d[r], ad);
        }
        for (int c = 0; c < 4; c++) {
            __m512i a0[TT][RV], a1[TT][RV];
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < nr; r++) a0[t][r] = a1[t][r] = _mm512_setzero_si512();
#pragma GCC unroll 8
            for (int k = 0; k < 8; k++) {
                __m512i lo[RV], hi[RV];
                for (int r = 0; r < nr; r++) {
                    lo[r] = _mm512_load_si512(&ps->q[c][k][0][r]);
                    hi[r] = _mm512_load_si512(&ps->q[c][k][1][r]);
                }
                for (int t = 0; t < nt; t++) {
                    const __m512i b0 = _mm512_set1_epi32(load_i32(ab[t]->qs + 64 * c + 4 * k));
                    const __m512i b1 = _mm512_set1_epi32(load_i32(ab[t]->qs + 64 * c + 32 + 4 * k));
                    for (int r = 0; r < nr; r++) {
                        a0[t][r] = _mm512_dpbusd_epi32(a0[t][r], lo[r], b0);
                        a1[t][r] = _mm512_dpbusd_epi32(a1[t][r], hi[r], b1);
                    }
                }
            }
            /* one float step per pair of sub-blocks; (float)isum_c formed exactly (the order above) */
            for (int t = 0; t < nt; t++)
                for (int r = 0; r < nr; r++) {
                    const __m512 i = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1[t][r]), ps->sc[2 * c + 1][r],
                                                     _mm512_mul_ps(_mm512_cvtepi32_ps(a0[t][r]), ps->sc[2 * c][r]));
                    s[t][r] = _mm512_fmadd_ps(i, d[t][r], s[t][r]);
                }
            /* The float chains live in memory (touched once per pair): left to itself the compiler
             * keeps them in registers and reloads the weight vectors for every token instead. */
            __asm__ volatile("" : : "r"(s) : "memory");
        }
    }
    /* The minimums' chains, which need no weight values: after the sums', in registers. */
    for (int64_t sb = 0; sb < nsb; sb++) {
        const sb_panel *ps = p + sb;
        for (int t = 0; t < nt; t++) {
            const __m512 ad = _mm512_set1_ps(((const mf_block_q8_K *)(act + (size_t)t * act_row) + sb)->d);
            const uint32_t *st = stab + (size_t)t * stab_row + 4 * (size_t)sb;
            for (int r = 0; r < nr; r++) {
                const __m512 dm = _mm512_mul_ps(ps->dm[r], ad);
                for (int c = 0; c < 4; c++) {
                    const __m512i m = _mm512_madd_epi16(ps->mn[c][r], _mm512_set1_epi32((int)st[c]));
                    sm[t][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm, sm[t][r]);
                }
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < nr; r++)
            _mm512_mask_storeu_ps(y + (size_t)t * ldy + 16 * r, r == nr - 1 ? mlast : (__mmask16)0xFFFF,
                                  _mm512_sub_ps(s[t][r], sm[t][r]));
}

typedef void (*tile_fn)(const sb_panel *p, int64_t nsb, const uint8_t *act, size_t act_row, const uint32_t *stab,
                        size_t stab_row, float *y, size_t ldy, __mmask16 mlast);

#define TILE_FN(nt, nr)                                                                                                \
    static void tile_##nt##_##nr(const sb_panel *p, int64_t nsb, const uint8_t *act, size_t act_row,                  \
                                 const uint32_t *stab, size_t stab_row, float *y, size_t ldy, __mmask16 mlast) {      \
        tile(p, nsb, act, act_row, stab, stab_row, nt, nr, y, ldy, mlast);                                             \
    }
#define TILE_FNS(nr) TILE_FN(1, nr) TILE_FN(2, nr) TILE_FN(3, nr) TILE_FN(4, nr)
TILE_FNS(1)
TILE_FNS(2)
#define TILE_ROW(nr) {tile_1_##nr, tile_2_##nr, tile_3_##nr, tile_4_##nr}
/* [nr - 1][nt - 1] */
static const tile_fn tiles[RV][TT] = {TILE_ROW(1), TILE_ROW(2)};

static size_t scratch_size(int64_t K) {
    const size_t nsb = (size_t)(K / QK);
    return nsb * sizeof(sb_panel) + (size_t)TC_MAX * nsb * 4 * sizeof(uint32_t);
}

/* Up to TT tokens straight from a packed panel (p: its first super-block): no panel copy, each
 * super-block's nibbles split in registers and used by every token; the float chains and their
 * order are the tile's. ahead: what the pass fetches meanwhile, in vectors from the super-block at
 * hand (FEW_STREAM: the panel two super-blocks ahead, into L1; beyond: the next panel, into L2; 0:
 * nothing), as mf_few_pass_ahead plans the passes of the other packed formats. */
#define FEW_STREAM (2 * PVEC)
static inline __attribute__((always_inline)) void few(const int nt, const uint8_t *p, int64_t nsb, const uint8_t *act,
                                                      size_t act_row, const uint32_t *stab, size_t stab_row,
                                                      int64_t ahead, float *y, size_t ldy, __mmask16 mask) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 s[TT], sm[TT];
    for (int t = 0; t < nt; t++) s[t] = sm[t] = _mm512_setzero_ps();
    for (int64_t sb = 0; sb < nsb; sb++) {
        const __m512i *pk = (const __m512i *)(p + (size_t)sb * PVEC * 64);
        if (ahead == FEW_STREAM) /* one panel's stream after another's */
            for (int l = 0; l < PVEC; l++) _mm_prefetch((const char *)(pk + FEW_STREAM + l), _MM_HINT_T0);
        else if (ahead)
            for (int l = 0; l < PVEC; l++) _mm_prefetch((const char *)(pk + ahead + l), _MM_HINT_T1);
        __m512 dw, dmw, sc[8];
        __m512i mn[4];
        sb_scales(_mm512_load_si512(pk + 32), _mm512_load_si512(pk + 33), _mm512_load_si512(pk + 34),
                  _mm512_load_si512(pk + 35), &dw, &dmw, sc, mn);
        const mf_block_q8_K *ab[TT];
        __m512 d[TT];
        for (int t = 0; t < nt; t++) {
            ab[t] = (const mf_block_q8_K *)(act + (size_t)t * act_row) + sb;
            d[t] = _mm512_mul_ps(dw, _mm512_set1_ps(ab[t]->d));
        }
        for (int c = 0; c < 4; c++) {
            __m512i a0[TT], a1[TT];
            for (int t = 0; t < nt; t++) a0[t] = a1[t] = _mm512_setzero_si512();
            for (int k = 0; k < 8; k++) {
                const __m512i v = _mm512_load_si512(pk + 8 * c + k);
                const __m512i lo = _mm512_and_si512(v, m4), hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), m4);
                for (int t = 0; t < nt; t++) {
                    a0[t] = _mm512_dpbusd_epi32(a0[t], lo, _mm512_set1_epi32(load_i32(ab[t]->qs + 64 * c + 4 * k)));
                    a1[t] = _mm512_dpbusd_epi32(a1[t], hi, _mm512_set1_epi32(load_i32(ab[t]->qs + 64 * c + 32 + 4 * k)));
                }
            }
            for (int t = 0; t < nt; t++) {
                const __m512 i = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a1[t]), sc[2 * c + 1],
                                                 _mm512_mul_ps(_mm512_cvtepi32_ps(a0[t]), sc[2 * c]));
                s[t] = _mm512_fmadd_ps(i, d[t], s[t]);
            }
        }
        for (int t = 0; t < nt; t++) {
            const __m512 dm = _mm512_mul_ps(dmw, _mm512_set1_ps(ab[t]->d));
            const uint32_t *st = stab + (size_t)t * stab_row + 4 * (size_t)sb;
            for (int c = 0; c < 4; c++) {
                const __m512i m = _mm512_madd_epi16(mn[c], _mm512_set1_epi32((int)st[c]));
                sm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), dm, sm[t]);
            }
        }
    }
    for (int t = 0; t < nt; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy, mask, _mm512_sub_ps(s[t], sm[t]));
}

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const int64_t nsb = w->ne[0] / QK;
    const bool packed = mf_cpu_gemm_packed(&gemm, w);
    sb_panel *panel = scratch;
    uint32_t *stab = (uint32_t *)(panel + nsb);
    const size_t stab_row = 4 * (size_t)nsb;
    /* Tokens in chunks of up to TC_MAX: each block of rows is unpacked once per chunk, while the
     * chunk's activations stream through the cache once per block (measured: as fast as chunks that
     * stay in L2, which need more unpacking). */
    const int64_t tc = TC_MAX;
    for (int64_t t0 = 0; t0 < nt; t0 += tc) {
        const int64_t t1 = MF_MIN(t0 + tc, nt);
        for (int64_t t = t0; t < t1; t++)
            for (int64_t sb = 0; sb < nsb; sb++) {
                const int16_t *bs = ((const mf_block_q8_K *)(act + (size_t)t * act_row) + sb)->bsums;
                for (int c = 0; c < 4; c++) {
                    const uint16_t lo = (uint16_t)(bs[4 * c] + bs[4 * c + 1]);
                    const uint16_t hi = (uint16_t)(bs[4 * c + 2] + bs[4 * c + 3]);
                    stab[(size_t)(t - t0) * stab_row + 4 * (size_t)sb + c] = lo | (uint32_t)hi << 16;
                }
            }
        if (packed && nt <= TT) {
            for (int64_t o = o0; o < o1; o += 16) {
                const __mmask16 mask = (__mmask16)(o1 - o >= 16 ? 0xFFFF : (1u << (o1 - o)) - 1);
                const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
                /* two tokens a pass (more would not fit the registers); a second pass finds the
                 * panel in cache */
                for (int64_t t = 0; t < nt; t += 2) {
                    const uint8_t *at = act + (size_t)t * act_row;
                    const uint32_t *st = stab + (size_t)t * stab_row;
                    /* the first pass streams the panel, the second fetches the next one */
                    const int64_t ahead = t == 0 ? FEW_STREAM : t == 2 && o + 16 < o1 ? nsb * PVEC : 0;
                    if (nt - t >= 2)
                        few(2, p, nsb, at, act_row, st, stab_row, ahead, y + (size_t)t * ldy + o, ldy, mask);
                    else
                        few(1, p, nsb, at, act_row, st, stab_row, ahead, y + (size_t)t * ldy + o, ldy, mask);
                }
            }
            continue;
        }
        for (int64_t o = o0; o < o1; o += ROWS) {
            const int nrows = (int)MF_MIN(ROWS, o1 - o), nr = (nrows + 15) / 16;
            const uint8_t *wr = (const uint8_t *)(packed ? w->packed : w->data) + (size_t)o * w->row_bytes;
            /* a packed panel's super-blocks lie where its rows do in the file: the same stream ahead */
            const uint8_t *ahead = o + ROWS < o1 && nt <= 32 ? wr + (size_t)ROWS * w->row_bytes : NULL;
            for (int r = 0; r < nr; r++)
                unpack16(wr + (size_t)(16 * r) * w->row_bytes, w->row_bytes, MF_MIN(16, nrows - 16 * r), nsb, panel, r,
                         ahead ? ahead + (size_t)(16 * r) * w->row_bytes : NULL,
                         packed ? wr + (size_t)(16 * r) * w->row_bytes : NULL);
            const int last = nrows - 16 * (nr - 1);
            const __mmask16 mlast = (__mmask16)(last >= 16 ? 0xFFFF : (1u << last) - 1);
            for (int64_t t = t0; t < t1; t += TT)
                tiles[nr - 1][MF_MIN(TT, t1 - t) - 1](panel, nsb, act + (size_t)t * act_row, act_row,
                                                      stab + (size_t)(t - t0) * stab_row, stab_row,
                                                      y + (size_t)t * ldy + o, ldy, mlast);
        }
    }
}

/* min_tokens 6: through 5 tokens the eight-row dot, one token after another over each block of 16
 * rows (in cache by then), beats the GEMM's unpacking with the weights coming from memory
 * (bench_gemm --cold, 2 threads, Zen 5, 4864 x 1024: 2 tokens 0.067 vs 0.106 ms, 5 tokens 0.119 vs
 * 0.128; 1024 x 4864: 0.081 vs 0.123, 0.143 vs 0.153); from 8 the GEMM leads (0.173 vs 0.185,
 * 0.159 vs 0.218). */
static const mf_cpu_gemm gemm = {.min_tokens = 6,
                                  .scratch_size = scratch_size,
                                  .run = run,
                                  .packed_size = mf_q4_k_packed_size,
                                  .pack = mf_q4_k_pack,
                                  .packed_row = mf_q4_k_packed_row};

const mf_cpu_gemm *mf_cpu_gemm_q4_K_avx512(void) { return &gemm; }
