/* gemm_avx2_util.h: small AVX2 helpers shared by the AVX2 prefill GEMMs (8-row panels, one weight
 * row per 32-bit lane). Included by *_avx2.c files only (AVX2 flags).
 *
 * A gemm_*_avx2.c with a gemm_*_avxvnni.c twin is built twice: as itself, and included by the twin,
 * which is compiled with AVX-VNNI too (Alder Lake and later, Zen 5): there the byte products run on
 * vpdpbusd (the multiply and the adds in one instruction, no int16 intermediate), and the getter
 * MF_AVX2_GEMM(name) is name_avxvnni instead of name_avx2. The integer sums are exact either way,
 * so both builds give the same bits. The 32-value formats have such builds (Q4_0, Q4_1, Q5_0, Q5_1,
 * Q8_0); the K-quants' products go through vpmaddwd by the sub-block scales, and vpdpwssd in its
 * place chains each sum on the instruction's latency (Zen 5, bench_gemm 896 x 4864, 128 tokens,
 * 1 thread: Q4_K 5.1 -> 6.1 ms, Q6_K 8.8 -> 12.1 ms), so they have none. */
#ifndef MF_CPU_GEMM_AVX2_UTIL_H
#define MF_CPU_GEMM_AVX2_UTIL_H

#include "core/core.h"
#include "cpu/cpu_gemm.h"

#include <immintrin.h>
#include <stdint.h>

/* Tokens per chunk of the K-quant GEMMs, for activation rows of row_bytes: as many as 512 KB of them
 * and at least 32, because each chunk packs every panel again (with 192 KB
 * a 18944-wide row gave chunks of 9 tokens, and packing took a third of the time: Zen 5, AVX2 level,
 * bench_gemm --threads 1 3584 18944 128, Q4_K 57 -> 71 GMAC/s, Q6_K 41 -> 51). Past L2, the chunk's
 * activations come from L3, a slice (2 KB a token) at a time. */
static inline int64_t mf_avx2_k_chunk(size_t row_bytes) { return MF_MAX(32, (int64_t)((512 << 10) / row_bytes)); }

#if defined(__AVXVNNI__)
#define MF_AVX2_GEMM(name) name##_avxvnni
#else
#define MF_AVX2_GEMM(name) name##_avx2
#endif

/* acc + (i32 lane p: sum of u[i] * s[i] over bytes i = 4p..4p+3), u unsigned, s signed. Without VNNI
 * through vpmaddubsw, whose int16 pair sums saturate: callers keep every pair within int16. */
static inline __m256i mf_avx2_dpbusd(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* d[k] lane r = dword k of r[r], for 8 vectors of 8 dwords: rows r and 4 + r share a vector per
 * half (dwords 0-3, 4-7), then a 4 x 4 transpose within each 128-bit lane. */
static inline __attribute__((always_inline)) void mf_avx2_transpose8_i32(const __m256i r[8], __m256i d[8]) {
    for (int h = 0; h < 2; h++) {
        __m256i z[4];
        for (int j = 0; j < 4; j++)
            z[j] = h ? _mm256_permute2x128_si256(r[j], r[4 + j], 0x31) : _mm256_permute2x128_si256(r[j], r[4 + j], 0x20);
        const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
        d[4 * h + 0] = _mm256_unpacklo_epi64(t0, t2);
        d[4 * h + 1] = _mm256_unpackhi_epi64(t0, t2);
        d[4 * h + 2] = _mm256_unpacklo_epi64(t1, t3);
        d[4 * h + 3] = _mm256_unpackhi_epi64(t1, t3);
    }
}

/* The 6-bit scales and mins of eight rows' Q4_K / Q5_K super-blocks (one row per i32 lane), four bytes
 * per lane, from the scale words u0, u1, u2 (bytes 0..3, 4..7, 8..11 of the 12 scale bytes):
 * sub-blocks 0..3 keep the low 6 bits of bytes 0..3 (scales, *s0) and 4..7 (mins, *m0); 4..7 take
 * the nibbles of bytes 8..11 with the top 2 bits of bytes 0..3 (scales, *s1) or 4..7 (mins, *m1) as
 * bits 4..5 (gemm_avx512_util.h's mf_k_scale_words on eight lanes). */
static inline void mf_avx2_k_scale_words(__m256i u0, __m256i u1, __m256i u2, __m256i *s0, __m256i *s1, __m256i *m0,
                                         __m256i *m1) {
    const __m256i lo6 = _mm256_set1_epi8(0x3F), lo4 = _mm256_set1_epi8(0x0F), top2 = _mm256_set1_epi8(0x03);
    *s0 = _mm256_and_si256(u0, lo6);
    *m0 = _mm256_and_si256(u1, lo6);
    *s1 = _mm256_or_si256(_mm256_and_si256(u2, lo4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), top2), 4));
    *m1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), lo4),
                          _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), top2), 4));
}

/* Eight lanes' 16-bit values (each below 65536) as eight halves in order, for vcvtph2ps. */
static inline __m128i mf_avx2_lanes16(__m256i x) {
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(x, x), 0x08));
}

/* The scales of eight rows of a packed Q4_K / Q5_K super-block (gemm_q4_k_packed.h,
 * gemm_q5_k_packed.h): dm points at the rows' half of the d | dmin vector, the three scale-word
 * vectors following it 64 bytes apart. h2f(d) and h2f(dmin) of the rows, and their scale and min
 * bytes (mf_avx2_k_scale_words). */
static inline __attribute__((always_inline)) void mf_avx2_k_packed_scales(const uint8_t *dm, __m256 *d, __m256 *dmin,
                                                                          __m256i *s0, __m256i *s1, __m256i *m0,
                                                                          __m256i *m1) {
    const __m256i hd = _mm256_loadu_si256((const __m256i *)dm);
    *d = _mm256_cvtph_ps(mf_avx2_lanes16(_mm256_and_si256(hd, _mm256_set1_epi32(0xFFFF))));
    *dmin = _mm256_cvtph_ps(mf_avx2_lanes16(_mm256_srli_epi32(hd, 16)));
    mf_avx2_k_scale_words(_mm256_loadu_si256((const __m256i *)(dm + 64)), _mm256_loadu_si256((const __m256i *)(dm + 128)),
                          _mm256_loadu_si256((const __m256i *)(dm + 192)), s0, s1, m0, m1);
}

/* The (sc[j], sc[j]) pair vector of sub-block j, and the (mn[2c], mn[2c+1]) one of pair c, from the
 * scale and min bytes of mf_avx2_k_scale_words. */
static inline __m256i mf_avx2_k_sc_pair(__m256i s0, __m256i s1, int j) {
    const __m256i x = _mm256_and_si256(_mm256_srli_epi32(j < 4 ? s0 : s1, 8 * (j % 4)), _mm256_set1_epi32(0xFF));
    return _mm256_or_si256(x, _mm256_slli_epi32(x, 16));
}
static inline __m256i mf_avx2_k_mn_pair(__m256i m0, __m256i m1, int c) {
    const __m256i x = _mm256_srli_epi32(c < 2 ? m0 : m1, 16 * (c % 2)); /* its bytes 0, 1 */
    return _mm256_or_si256(_mm256_and_si256(x, _mm256_set1_epi32(0xFF)),
                           _mm256_and_si256(_mm256_slli_epi32(x, 8), _mm256_set1_epi32(0xFF0000)));
}

/* All-ones in the first nr of 8 lanes (maskload / maskstore of a partial panel's outputs). */
static inline __m256i mf_avx2_row_mask(int nr) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(nr), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* One pass of a packed weight's few-token path (Q4_K, Q5_K): tokens [t0, t0 + tn) against half h
 * (rows o + 8h..) of the 16-row panel at p, as pass k of the panel's n_pass (next: the next panel,
 * NULL: none), the half's rows in mask; ctx: the caller's activations and outputs. */
typedef void mf_avx2_few_pass_fn(void *ctx, const uint8_t *p, const uint8_t *next, int h, int64_t o, int64_t t0,
                                 int tn, int k, int n_pass, __m256i mask);

/* The passes of a few-token path over rows [o0, o1) of a packed weight (16-row panels, o0 a multiple
 * of 16): per panel, per half, per group of up to tpp of the nt tokens, in that order. */
static inline __attribute__((always_inline)) void mf_avx2_few_panels(const mf_weight *w, int64_t o0, int64_t o1,
                                                                     int64_t nt, int tpp, mf_avx2_few_pass_fn *pass,
                                                                     void *ctx) {
    const int groups = (int)((nt + tpp - 1) / tpp);
    for (int64_t o = o0; o < o1; o += 16) {
        const int64_t nr = MF_MIN(16, o1 - o);
        const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
        const uint8_t *next = o + 16 < o1 ? p + 16 * w->row_bytes : NULL;
        const int nh = nr > 8 ? 2 : 1;
        for (int h = 0; h < nh; h++) {
            const __m256i mask = mf_avx2_row_mask((int)MF_MIN(8, nr - 8 * h));
            for (int g = 0; g < groups; g++)
                pass(ctx, p, next, h, o, (int64_t)g * tpp, (int)MF_MIN(tpp, nt - (int64_t)g * tpp), h * groups + g,
                     nh * groups, mask);
        }
    }
}

/* What a few-token pass reads and writes: the tokens' activation rows, their outputs, and the
 * weight's blocks (or super-blocks) per row. */
typedef struct {
    const uint8_t *act;
    size_t act_row;
    float *y;
    size_t ldy;
    int64_t nb;
} mf_avx2_few_io;

/* Lane r = the int16 pair (lo[r], hi[r]) (vpmaddwd operands, one pair per row). */
static inline __m256i mf_avx2_pairs16(const int16_t lo[8], const int16_t hi[8]) {
    int32_t v[8];
    for (int r = 0; r < 8; r++) v[r] = (int32_t)((uint32_t)(uint16_t)lo[r] | (uint32_t)(uint16_t)hi[r] << 16);
    return _mm256_loadu_si256((const __m256i *)v);
}

/* aligned(1): the four bytes may sit anywhere (Q8_0 quants start 2 bytes into a 34-byte block) */
typedef int32_t __attribute__((may_alias, aligned(1))) mf_avx2_i32_alias;

/* The four bytes at p broadcast to every lane. */
static inline __m256i mf_avx2_bcast4(const void *p) { return _mm256_set1_epi32(*(const mf_avx2_i32_alias *)p); }

#endif /* MF_CPU_GEMM_AVX2_UTIL_H */
