/* x86_common.h: the small AVX2 helpers of every x86 kernel file (included only by files built
 * with at least -mavx2 -mfma -mf16c): loads, half-float scalars, block unpacking, reductions. The
 * float reductions' order is part of the kernels' contract (bit-identical results across files). */
#ifndef MF_X86_COMMON_H
#define MF_X86_COMMON_H

#include "core/core.h"
#include "quant/quant.h"
#include "x86/x86_scratch.h"

#include <immintrin.h>
#include <string.h>

static inline __m256i mf_x86_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* IEEE half -> float; exact for every value. */
static inline float mf_x86_h2f(uint16_t h) { return _cvtsh_ss(h); }

/* ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)) */
static inline float mf_x86_hsum8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

static inline float mf_x86_hsum4(__m128 r) {
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

static inline int mf_x86_hsum8_i32(__m256i x) {
    __m128i r = _mm_add_epi32(_mm256_extracti128_si256(x, 1), _mm256_castsi256_si128(x));
    r = _mm_add_epi32(r, _mm_unpackhi_epi64(r, r));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 1));
    return _mm_cvtsi128_si32(r);
}

/* Half j of a Q6_K block: q[v] = the 6-bit values of its group v (values 128j + 32v..+31), the low
 * or high nibbles of ql with two bits of qh as bits 4..5. */
static inline __attribute__((always_inline)) void mf_x86_q6_half(const mf_block_q6_K *w, int j, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    const __m256i l0 = mf_x86_load(w->ql + 64 * j), l1 = mf_x86_load(w->ql + 64 * j + 32);
    const __m256i h = mf_x86_load(w->qh + 32 * j);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(h, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), m3), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), m3), 4));
}

/* 16 bytes of packed nibbles -> 32 bytes in block order: the low nibbles are values 0..15, the high
 * nibbles values 16..31. */
static inline __m256i mf_x86_nibbles32(const uint8_t *qs) {
    /* the 16 bytes in both halves (a load), the high half shifted by 4 within its dwords: each byte's
     * low nibble is then its high one (the bits from the next byte land above and are masked) */
    const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)qs));
    return _mm256_and_si256(_mm256_srlv_epi32(b, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
}

/* An IQ4_NL block's 16 nibble bytes (IQ4_XS: a sub-block's) -> its 32 values in block order, as
 * signed bytes from the IQ4_NL table. */
static inline __m256i mf_x86_iq4nl32(const uint8_t *qs) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mf_iq4nl_values));
    return _mm256_shuffle_epi8(lut, mf_x86_nibbles32(qs));
}

/* 32 bits (little-endian u32 as 4 bytes) -> 32 bytes, byte j = 0xFF if bit j is set, else 0.
 * Byte j first gets a copy of source byte j/8 (shuffle within each 128-bit lane, which holds the
 * whole u32), then is tested against the single bit j%8. */
static inline __m256i mf_x86_bits32(const uint8_t *qh) {
    uint32_t x;
    memcpy(&x, qh, 4);
    const __m256i pick = _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202,
                                            0x0303030303030303);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32((int)x), pick);
    return _mm256_cmpeq_epi8(_mm256_and_si256(b, bit), bit);
}

/* Bit j of the little-endian u32 at qh -> 0x10 in byte j (Q5's fifth bit in place). */
static inline __m256i mf_x86_bit5_32(const uint8_t *qh) {
    return _mm256_and_si256(mf_x86_bits32(qh), _mm256_set1_epi8(0x10));
}

/* A Q5_0 block's 32 signed values (nibble | fifth bit << 4) - 16: where the fifth bit is clear the
 * value is the nibble - 16, the nibble with the high four bits set; where it is set, the nibble. */
static inline __m256i mf_x86_q5_0_signed32(const uint8_t *qs, const uint8_t *qh) {
    return _mm256_or_si256(mf_x86_nibbles32(qs), _mm256_andnot_si256(mf_x86_bits32(qh), _mm256_set1_epi8((char)0xF0)));
}

#endif /* MF_X86_COMMON_H */
