/* gemm_avx512_util.h: small AVX-512 helpers shared by the prefill GEMMs (panel transposes, the multiply
 * with a token's broadcast activation bytes). Included by *_avx512.c files only (AVX-512 flags). */
#ifndef MF_CPU_GEMM_AVX512_UTIL_H
#define MF_CPU_GEMM_AVX512_UTIL_H

#include "quant/quant.h"

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* In-register transpose of a 16 x 16 matrix of 32-bit words: x[i] lane j <- x[j] lane i. */
static inline void mf_transpose16_i32(__m512i x[16]) {
    __m512i t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(x[2 * i], x[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(x[2 * i], x[2 * i + 1]);
    }
    /* u[4g + m], 128-bit lane L: rows 4g..4g+3 of column m + 4L */
    for (int g = 0; g < 4; g++) {
        u[4 * g + 0] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    for (int m = 0; m < 4; m++) {
        const __m512i a = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88), b = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xDD);
        const __m512i c = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88);
        const __m512i e = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xDD);
        x[m] = _mm512_shuffle_i32x4(a, c, 0x88);
        x[m + 8] = _mm512_shuffle_i32x4(a, c, 0xDD);
        x[m + 4] = _mm512_shuffle_i32x4(b, e, 0x88);
        x[m + 12] = _mm512_shuffle_i32x4(b, e, 0xDD);
    }
}

/* acc += vpdpbusd(u, 4 bytes of token t broadcast) / vpdpwssd(s, an int16 pair of token t broadcast),
 * the broadcast folded into the instruction (the compiler emits a separate vpbroadcastd, one more
 * vector instruction per multiply). Token t's bytes are at p0 + t * rs, addressed as
 * base + index * scale from p0, p4 = p0 + 4 rs, rs and rs3 = 3 rs, so that eight tokens cost four
 * registers and no pointer arithmetic per step. The asm reads memory that the compiler does not see
 * as an operand; nothing writes the activations while a GEMM runs. */
#define MF_TOK_ASM(ins, acc, u, t, p0, p4, rs, rs3)                                                                       \
    switch (t) {                                                                                                       \
    case 0: __asm__(ins " (%2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p0)); break;                               \
    case 1: __asm__(ins " (%2,%3,1)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p0), "r"(rs)); break;                 \
    case 2: __asm__(ins " (%2,%3,2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p0), "r"(rs)); break;                 \
    case 3: __asm__(ins " (%2,%3,1)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p0), "r"(rs3)); break;                \
    case 4: __asm__(ins " (%2,%3,4)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p0), "r"(rs)); break;                 \
    case 5: __asm__(ins " (%2,%3,1)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p4), "r"(rs)); break;                 \
    case 6: __asm__(ins " (%2,%3,2)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p4), "r"(rs)); break;                 \
    default: __asm__(ins " (%2,%3,1)%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "r"(p4), "r"(rs3)); break;               \
    }

/* The bytes of lane vector p (byte b = value 4p + b of the row in that lane) whose fifth bit is set in
 * qh (each row's qh dword in its lane: bit j for value j), for Q5_0 / Q5_1 panels: bit 4p + b of qh
 * is bit 4 (p % 2) + b of qh byte p / 2, spread to the dword's four bytes by a byte shuffle. */
static inline __mmask64 mf_qh_mask(__m512i qh, int p) {
    const int8_t h = (int8_t)(p / 2);
    const __m512i pick = _mm512_add_epi8(_mm512_set1_epi32(h * 0x01010101),
                                         _mm512_set4_epi32(0x0C0C0C0C, 0x08080808, 0x04040404, 0));
    const __m512i bits = _mm512_set1_epi32(p % 2 ? (int)0x80402010 : 0x08040201);
    return _mm512_test_epi8_mask(_mm512_shuffle_epi8(qh, pick), bits);
}

/* The ordered dots' horizontal sum of eight float lanes, ((v0+v4)+(v2+v6)) + ((v1+v5)+(v3+v7)), for
 * sixteen outputs at once (vector lane r: output r). */
static inline __m512 mf_hsum8_lanes(const __m512 v[8]) {
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                         _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
}

/* The token chunks of a GEMM over nt tokens: equal chunks of at most max_chunk tokens, each a
 * multiple of the tile (but the last). Returns the chunk length. */
static inline int64_t mf_gemm_chunk(int64_t nt, int64_t max_chunk, int64_t tile) {
    const int64_t n_chunks = (nt + max_chunk - 1) / max_chunk, per = (nt + n_chunks - 1) / n_chunks;
    return per + (tile - per % tile) % tile;
}

/* Prefetching the next panel's weight rows while this panel's tiles run: the next panel of 16 rows
 * (or the first one again for the next chunk), its lines spread evenly over the tiles. Not for a
 * few tokens: the prefetches then come in bursts of 30 lines and more, which cost more than they
 * save (Q8_0, K = 896, 3 tokens, 1 thread: 0.18 vs 0.16 ms); then the repack streams the next
 * panel instead (MF_GEMM_STREAM_AHEAD in cpu_gemm.h). */
typedef struct mf_gemm_prefetch {
    const uint8_t *next;
    size_t lines, n_tiles;
} mf_gemm_prefetch;

/* For the panel at row ob of [o0, o1) in the chunk of n tokens at tc of nt, with tiles of tile
 * tokens over n_slices slices of the blocks. */
static inline mf_gemm_prefetch mf_gemm_prefetch_plan(const uint8_t *data, size_t row_bytes, int64_t o0, int64_t o1,
                                                     int64_t ob, int64_t tc, int64_t n, int64_t nt, int64_t tile,
                                                     int64_t n_slices) {
    const int64_t on = ob + 16 < o1 ? ob + 16 : tc + n < nt ? o0 : o1;
    mf_gemm_prefetch p = {data + (size_t)on * row_bytes, 0, (size_t)(n_slices * ((n + tile - 1) / tile))};
    if (n >= 8 * tile) p.lines = ((size_t)(o1 - on < 16 ? o1 - on : 16) * row_bytes + 63) / 64;
    return p;
}

/* The lines that tile j of the panel prefetches. */
static inline void mf_gemm_prefetch_step(const mf_gemm_prefetch *p, size_t j) {
    for (size_t l = j * p->lines / p->n_tiles; l < (j + 1) * p->lines / p->n_tiles; l++)
        _mm_prefetch((const char *)(p->next + 64 * l), _MM_HINT_T1);
}

/* One 64-value group k (bytes 64k..64k+63 of a Q8_K block's qs) of a K-quant GEMM tile, for T tokens:
 * q0/q1 hold the group's two 32-value halves of unsigned weights (16 rows, four bytes each, for
 * activation bytes 4p..4p+3 of each half), sc the two halves' scales as an int16 pair per row. Each
 * token's two vpdpbusd sums land in the int16 halves of one lane (biased by 0x8000 so they cannot
 * overflow, the high half swapped down), and one vpdpwssd multiplies both by their scales into
 * acc[t]. b0/b4: the activation block of tokens 0 and 4 plus 4p; rs, rs3: 1 and 3 rows of them. */
static inline __attribute__((always_inline)) void mf_kq_scaled_group(const int T, __m512i *acc, __m512i q0,
                                                                     __m512i q1, __m512i sc, const uint8_t *b0,
                                                                     const uint8_t *b4, int k, size_t rs,
                                                                     size_t rs3) {
    const __m512i bias = _mm512_set1_epi32((int)0x80008000u);
    const __m512i swap = _mm512_broadcast_i32x4(_mm_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
    const size_t o = offsetof(mf_block_q8_K, qs) + 64 * (size_t)k;
    const uint8_t *lo0 = b0 + o, *lo4 = b4 + o, *hi0 = lo0 + 32, *hi4 = lo4 + 32;
    for (int t = 0; t < T; t++) {
        __m512i x = bias;
        MF_TOK_ASM("vpdpbusd", x, q1, t, hi0, hi4, rs, rs3)
        x = _mm512_shuffle_epi8(x, swap);
        MF_TOK_ASM("vpdpbusd", x, q0, t, lo0, lo4, rs, rs3)
        acc[t] = _mm512_dpwssd_epi32(acc[t], _mm512_xor_si512(x, bias), sc);
    }
}

/* The 6-bit scales and mins of 16 rows' Q4_K / Q5_K super-blocks (one row per i32 lane), four bytes
 * per lane, from the scale words u0, u1, u2 (bytes 0..3, 4..7, 8..11 of the 12 scale bytes):
 * sub-blocks 0..3 keep the low 6 bits of bytes 0..3 (scales, *s0) and 4..7 (mins, *m0); 4..7 take
 * the nibbles of bytes 8..11 with the top 2 bits of bytes 0..3 (scales, *s1) or 4..7 (mins, *m1) as
 * bits 4..5. */
static inline void mf_k_scale_words(__m512i u0, __m512i u1, __m512i u2, __m512i *s0, __m512i *s1, __m512i *m0,
                                    __m512i *m1) {
    const __m512i lo6 = _mm512_set1_epi8(0x3F), lo4 = _mm512_set1_epi8(0x0F), top2 = _mm512_set1_epi8(0x03);
    *s0 = _mm512_and_si512(u0, lo6);
    *m0 = _mm512_and_si512(u1, lo6);
    *s1 = _mm512_or_si512(_mm512_and_si512(u2, lo4), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), top2), 4));
    *m1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), lo4),
                          _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), top2), 4));
}

/* CALL(T, t0) for the token tiles t0 = 0, TILE, 2 TILE, ... below nt, the last one shorter, each T a
 * constant (the tile functions are inlined per T, so their loops over tokens unroll). TILE <= 8. */
#define MF_GEMM_TOKEN_TILES(TILE, nt, CALL)                                                                            \
    do {                                                                                                               \
        int64_t t0_ = 0;                                                                                               \
        for (; t0_ + (TILE) <= (nt); t0_ += (TILE)) CALL(TILE, t0_);                                                   \
        switch ((nt) - t0_) {                                                                                          \
        case 1: CALL(1, t0_); break;                                                                                   \
        case 2: CALL(2, t0_); break;                                                                                   \
        case 3: CALL(3, t0_); break;                                                                                   \
        case 4: CALL(4, t0_); break;                                                                                   \
        case 5: CALL(5, t0_); break;                                                                                   \
        case 6: CALL(6, t0_); break;                                                                                   \
        case 7: CALL(7, t0_); break;                                                                                   \
        default: break;                                                                                                \
        }                                                                                                              \
    } while (0)

#endif /* MF_CPU_GEMM_AVX512_UTIL_H */
