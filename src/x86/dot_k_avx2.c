/* dot_k_avx2.c: AVX2 dot products of the K-quant super-blocks (Q2_K .. Q6_K; 256 values) against
 * Q8_K activations, with their tile entries (Q2_K and Q3_K in llama.cpp's x86 order: below). Per
 * super-block the integer part is exact (maddubs u8 x s8 -> i16 pairs, madd by the sub-block scale
 * -> i32); for Q4_K, Q5_K and Q6_K the float part is one multiply per block:
 *   Q4_K/Q5_K: d_a * (d * sum_s sc_s * sum(q a)_s - dmin * sum_s m_s * (bsums[2s] + bsums[2s+1]))
 *   Q6_K:      d_a * d * (sum_g sc_g * sum(q a)_g - 32 * sum_g sc_g * bsums[g])   (q unsigned 0..63)
 * Bounds: q <= 63, |a| <= 128, so a maddubs pair stays below 2^15 and every i32 sum below 2^31. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"
#include "simd/kquant_common.h"

/* shuffle_epi8 masks that broadcast 16-bit element k of a 128-bit lane across the lane */
static inline __m256i bcast16_mask(int k) { return _mm256_set1_epi16((short)((2 * k) | (2 * k + 1) << 8)); }

/* shuffle_epi8 mask that spreads 16-bit element 2k of a 128-bit lane over the low lane and element
 * 2k + 1 over the high one (chunk k's two groups, from a vector holding its eight scales twice) */
static inline __m256i q3k_scale_pick(int k) {
    return _mm256_set_m128i(_mm_set1_epi16((short)((4 * k + 2) | (4 * k + 3) << 8)),
                            _mm_set1_epi16((short)((4 * k) | (4 * k + 1) << 8)));
}

/* Per chunk j (32 bytes of qs = sub-blocks 2j in the low nibbles, 2j+1 in the high ones) the dot
 * with the 64 activation values a[64j .. 64j+63], weighted by the two 6-bit scales. */
static inline __m256i k4_chunk(__m256i lo, __m256i hi, const int8_t *a, __m256i sc_lo, __m256i sc_hi) {
    __m256i pl = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, mf_x86_load(a)), sc_lo);
    __m256i ph = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, mf_x86_load(a + 32)), sc_hi);
    return _mm256_add_epi32(pl, ph);
}

/* sum_s m_s * (bsums[2s] + bsums[2s+1]) as i32x4 partial sums. mins: 8 u8 mins in bytes 8..15. */
static inline __m128i k4_mins_dot(__m128i scales_mins, const int16_t *bsums) {
    __m128i b0 = _mm_loadu_si128((const __m128i *)bsums), b1 = _mm_loadu_si128((const __m128i *)(bsums + 8));
    __m128i pairs = _mm_hadd_epi16(b0, b1); /* sub-block s = bsums[2s] + bsums[2s+1], s = 0..7 */
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(scales_mins, scales_mins)), pairs);
}

static float dot_q4_K_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_K *w = vw;
    const mf_block_q8_K *a = va;
    const int64_t nb = n / MF_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float d = a[i].d * mf_x86_h2f(w[i].d), dmin = -a[i].d * mf_x86_h2f(w[i].dmin);
        uint8_t sm[16];
        mf_k4_unpack_scales(w[i].scales, sm);
        const __m128i scales_mins = _mm_loadu_si128((const __m128i *)sm);
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k4_mins_dot(scales_mins, a[i].bsums)), accm);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales_mins)); /* sc0..7 as i16 */
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i q = mf_x86_load(w[i].qs + 32 * j);
            const __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            sumi = _mm256_add_epi32(sumi, k4_chunk(lo, hi, a[i].qs + 64 * j, _mm256_shuffle_epi8(sc, bcast16_mask(2 * j)),
                                                   _mm256_shuffle_epi8(sc, bcast16_mask(2 * j + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return mf_x86_hsum8(acc) + _mm_cvtss_f32(accm);
}

/* Q5_K: the 5th bit of value l of sub-block s is bit s of qh[l]; shifting qh right by 2j brings
 * sub-block 2j's bit to bit 0 and 2j+1's to bit 1 of each byte, then it moves to bit 4 (0x10). */
static float dot_q5_K_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_K *w = vw;
    const mf_block_q8_K *a = va;
    const int64_t nb = n / MF_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    __m256 acc = _mm256_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float d = a[i].d * mf_x86_h2f(w[i].d), dmin = -a[i].d * mf_x86_h2f(w[i].dmin);
        uint8_t sm[16];
        mf_k4_unpack_scales(w[i].scales, sm);
        const __m128i scales_mins = _mm_loadu_si128((const __m128i *)sm);
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k4_mins_dot(scales_mins, a[i].bsums)), accm);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales_mins));
        const __m256i qh = mf_x86_load(w[i].qh);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i q = mf_x86_load(w[i].qs + 32 * j);
            const __m256i h = _mm256_srli_epi16(qh, 2 * j);
            const __m256i lo = _mm256_or_si256(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_slli_epi16(h, 4), b4));
            const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                                               _mm256_and_si256(_mm256_slli_epi16(h, 3), b4));
            sumi = _mm256_add_epi32(sumi, k4_chunk(lo, hi, a[i].qs + 64 * j, _mm256_shuffle_epi8(sc, bcast16_mask(2 * j)),
                                                   _mm256_shuffle_epi8(sc, bcast16_mask(2 * j + 1))));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return mf_x86_hsum8(acc) + _mm_cvtss_f32(accm);
}

/* Q6_K: half h (values 128h..128h+127) takes ql[64h..], qh[32h..]; value 128h + 32k + l (l < 32) is
 * (nibble of ql) | (2 bits of qh[l] at 2k) << 4, the low nibble of ql[l] for k = 0, of ql[l+32] for
 * k = 1, the high nibbles for k = 2, 3. Its scale is scales[8h + 2k + l/16]: the low 128-bit lane of
 * a 32-value maddubs result takes scale 8h+2k, the high lane 8h+2k+1. */
static float dot_q6_K_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q6_K *w = vw;
    const mf_block_q8_K *a = va;
    const int64_t nb = n / MF_QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    /* lane 0 broadcasts 16-bit element 2k, lane 1 element 2k+1 */
    const __m256i pick[4] = {
        _mm256_set_m128i(_mm_set1_epi16(0x0302), _mm_set1_epi16(0x0100)),
        _mm256_set_m128i(_mm_set1_epi16(0x0706), _mm_set1_epi16(0x0504)),
        _mm256_set_m128i(_mm_set1_epi16(0x0B0A), _mm_set1_epi16(0x0908)),
        _mm256_set_m128i(_mm_set1_epi16(0x0F0E), _mm_set1_epi16(0x0D0C)),
    };
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float d = a[i].d * mf_x86_h2f(w[i].d);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales)); /* [sc0..7 | sc8..15] */
        const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        /* 32 * sum_g sc_g * bsums[g]: the -32 offset of every q, applied once per super-block */
        __m256i sumi = _mm256_slli_epi32(_mm256_madd_epi16(sc16, mf_x86_load(a[i].bsums)), 5);
        sumi = _mm256_sub_epi32(_mm256_setzero_si256(), sumi);
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w[i].ql + 64 * h;
            const int8_t *y = a[i].qs + 128 * h;
            const __m256i qh = mf_x86_load(w[i].qh + 32 * h);
            const __m256i l0 = mf_x86_load(ql), l1 = mf_x86_load(ql + 32);
            const __m256i sc = sc_half[h]; /* both lanes hold this half's eight scales */
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
            for (int k = 0; k < 4; k++) {
                __m256i p = _mm256_maddubs_epi16(q[k], mf_x86_load(y + 32 * k));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, _mm256_shuffle_epi8(sc, pick[k])));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return mf_x86_hsum8(acc);
}

/* ---- multi-row tiles: one weight row against up to MF_SIMD_GEMM_NC activation rows. Each chunk
 * of weights and its scales are unpacked once and used for every activation row. ---- */
#define NC MF_SIMD_GEMM_NC

static inline void tile_k4(int64_t n, const uint8_t *base, size_t stride, const char *a, size_t a_stride, int nc,
                           float *out, size_t out_stride, bool five) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
    __m256 acc[NC];
    __m128 accm[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps(), accm[c] = _mm_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const uint8_t *blk = base + (size_t)i * stride;
        const mf_block_q4_K *hdr = (const mf_block_q4_K *)blk; /* Q5_K shares d, dmin, scales */
        const uint8_t *qs = five ? ((const mf_block_q5_K *)blk)->qs : hdr->qs;
        const float d = mf_x86_h2f(hdr->d), dmin = -mf_x86_h2f(hdr->dmin);
        uint8_t sm[16];
        mf_k4_unpack_scales(hdr->scales, sm);
        const __m128i scales_mins = _mm_loadu_si128((const __m128i *)sm);
        const __m256i sc = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(scales_mins));
        const __m256i qh = five ? mf_x86_load(((const mf_block_q5_K *)blk)->qh) : _mm256_setzero_si256();
        __m256i sumi[NC];
        for (int c = 0; c < NC; c++) sumi[c] = _mm256_setzero_si256();
        for (int j = 0; j < 4; j++) {
            const __m256i q = mf_x86_load(qs + 32 * j);
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (five) {
                const __m256i h = _mm256_srli_epi16(qh, 2 * j);
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), b4));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), b4));
            }
            const __m256i sl = _mm256_shuffle_epi8(sc, bcast16_mask(2 * j)), sh = _mm256_shuffle_epi8(sc, bcast16_mask(2 * j + 1));
            for (int c = 0; c < nc; c++) {
                const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
                sumi[c] = _mm256_add_epi32(sumi[c], k4_chunk(lo, hi, ab->qs + 64 * j, sl, sh));
            }
        }
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            accm[c] = _mm_fmadd_ps(_mm_set1_ps(dmin * ab->d), _mm_cvtepi32_ps(k4_mins_dot(scales_mins, ab->bsums)), accm[c]);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(d * ab->d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]) + mf_x86_hsum4(accm[c]);
}

static void tile_q6_K(int64_t n, const uint8_t *base, size_t stride, const char *a, size_t a_stride, int nc,
                      float *out, size_t out_stride, bool unused) {
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i pick[4] = {
        _mm256_set_m128i(_mm_set1_epi16(0x0302), _mm_set1_epi16(0x0100)),
        _mm256_set_m128i(_mm_set1_epi16(0x0706), _mm_set1_epi16(0x0504)),
        _mm256_set_m128i(_mm_set1_epi16(0x0B0A), _mm_set1_epi16(0x0908)),
        _mm256_set_m128i(_mm_set1_epi16(0x0F0E), _mm_set1_epi16(0x0D0C)),
    };
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const mf_block_q6_K *w = (const mf_block_q6_K *)(base + (size_t)i * stride);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        const __m256i sc_half[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00), _mm256_permute2x128_si256(sc16, sc16, 0x11)};
        __m256i sumi[NC];
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            sumi[c] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                       _mm256_slli_epi32(_mm256_madd_epi16(sc16, mf_x86_load(ab->bsums)), 5));
        }
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = w->ql + 64 * h;
            const __m256i qh = mf_x86_load(w->qh + 32 * h), l0 = mf_x86_load(ql), l1 = mf_x86_load(ql + 32);
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m2));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m2));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m2));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), m2));
            for (int k = 0; k < 4; k++) {
                const __m256i s = _mm256_shuffle_epi8(sc_half[h], pick[k]);
                for (int c = 0; c < nc; c++) {
                    const int8_t *y = ((const mf_block_q8_K *)(a + (size_t)c * a_stride) + i)->qs + 128 * h + 32 * k;
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], mf_x86_load(y)), s));
                }
            }
        }
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w->d) * ab->d), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

/* A Q3_K block's 16 scales s_g - 32 as int16 (mf_q3_K_scale, four at a time: the low nibbles of
 * bytes 0-7, then their high nibbles, each with its two bits from bytes 8-11) */
static inline __m256i q3k_scales(const uint8_t b[12]) {
    uint32_t u[3];
    memcpy(u, b, 12);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const __m128i s = _mm_setr_epi32((int)((u[0] & m4) | (u[2] & m2) << 4), (int)((u[1] & m4) | ((u[2] >> 2) & m2) << 4),
                                     (int)(((u[0] >> 4) & m4) | ((u[2] >> 4) & m2) << 4),
                                     (int)(((u[1] >> 4) & m4) | ((u[2] >> 6) & m2) << 4));
    return _mm256_cvtepi8_epi16(_mm_sub_epi8(s, _mm_set1_epi8(32)));
}

/* Q2_K and Q3_K in llama.cpp's x86 order (its AVX2 ggml_vec_dot_q2_K_q8_K / q3_K_q8_K, which its
 * AVX-512 builds run too; scalar twins mf_cpu_dot_q2_K_x86_ref / q3_K_x86_ref): eight int32 lanes
 * per super-block, lane k taking s_g * q * q8 of the values 32c + 4k .. 32c + 4k + 3 of each chunk c
 * of 32 (vpmaddubsw pairs, vpmaddwd by the group's scale: group 2c in the low half, 2c + 1 in the
 * high one), then per block acc = fma(d_w * d_a, lanes, acc) (Q2_K first fma(-d_a * dmin, m_g
 * bsums pairs, acc)), and llama.cpp's horizontal sum. Chunk c is bits 2(c % 4) of qs[32(c / 4) ..];
 * Q3_K's values are q = low - 4 where bit c of hmask[l] is clear: vpmaddubsw of the 2-bit field
 * less that of 4 or 0 (a pair is at most 2 * 4 * 128). */
static inline __attribute__((always_inline)) void tile_q2_K_n(int64_t n, const uint8_t *base, size_t stride,
                                                              const char *a, size_t a_stride, int nc, float *out,
                                                              size_t out_stride, bool unused) {
    const __m256i m3 = _mm256_set1_epi8(3);
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const mf_block_q2_K *w = (const mf_block_q2_K *)(base + (size_t)i * stride);
        const __m128i sm = _mm_loadu_si128((const __m128i *)w->scales);
        const __m256i mins = _mm256_cvtepi8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), _mm_set1_epi8(0x0F)));
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_and_si128(sm, _mm_set1_epi8(0x0F)));
        __m256i sumi[NC];
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            const float dmin = -ab->d * mf_x86_h2f(w->dmin);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_madd_epi16(mins, mf_x86_load(ab->bsums))),
                                     acc[c]);
            sumi[c] = _mm256_setzero_si256();
        }
        for (int h = 0; h < 2; h++) {
            const __m256i bits = mf_x86_load(w->qs + 32 * h);
            const __m256i sch = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            for (int k = 0; k < 4; k++) {
                const __m256i q = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                const __m256i s = _mm256_shuffle_epi8(sch, q3k_scale_pick(k));
                for (int c = 0; c < nc; c++) {
                    const int8_t *y = ((const mf_block_q8_K *)(a + (size_t)c * a_stride) + i)->qs + 128 * h + 32 * k;
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, _mm256_maddubs_epi16(q, mf_x86_load(y))));
                }
            }
        }
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(ab->d * mf_x86_h2f(w->d)), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

static inline __attribute__((always_inline)) void tile_q3_K_n(int64_t n, const uint8_t *base, size_t stride,
                                                              const char *a, size_t a_stride, int nc, float *out,
                                                              size_t out_stride, bool unused) {
    const __m256i m3 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / MF_QK_K; i++) {
        const mf_block_q3_K *w = (const mf_block_q3_K *)(base + (size_t)i * stride);
        const __m256i sc16 = q3k_scales(w->scales), hm = mf_x86_load(w->hmask);
        __m256i sumi[NC];
        for (int c = 0; c < nc; c++) sumi[c] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            const __m256i bits = mf_x86_load(w->qs + 32 * h);
            const __m256i sch = h ? _mm256_permute2x128_si256(sc16, sc16, 0x11) : _mm256_permute2x128_si256(sc16, sc16, 0x00);
            for (int k = 0; k < 4; k++) {
                const int bit = 4 * h + k;
                const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
                /* 4 where bit `bit` of hmask[l] is clear: bit `bit` of each byte moved to bit 2 (the
                 * shift moves 16-bit words; only bit 2 of each byte is kept, from the same byte) */
                const __m256i set = bit >= 2 ? _mm256_srli_epi16(hm, bit - 2) : _mm256_slli_epi16(hm, 2 - bit);
                const __m256i four = _mm256_andnot_si256(set, b2);
                const __m256i s = _mm256_shuffle_epi8(sch, q3k_scale_pick(k));
                for (int c = 0; c < nc; c++) {
                    const __m256i y = mf_x86_load(((const mf_block_q8_K *)(a + (size_t)c * a_stride) + i)->qs + 128 * h + 32 * k);
                    const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(lo, y), _mm256_maddubs_epi16(four, y));
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(s, p));
                }
            }
        }
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(ab->d * mf_x86_h2f(w->d)), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

/* each count of activation rows its own build (the accumulators in registers) */
#define TILE_BY_COUNT(name, tile_n)                                                                        \
    static void name(int64_t n, const uint8_t *base, size_t stride, const char *a, size_t a_stride, int nc, \
                     float *out, size_t out_stride, bool unused) {                                          \
        switch (nc) {                                                                                       \
        case 1: tile_n(n, base, stride, a, a_stride, 1, out, out_stride, unused); break;                    \
        case 2: tile_n(n, base, stride, a, a_stride, 2, out, out_stride, unused); break;                    \
        case 3: tile_n(n, base, stride, a, a_stride, 3, out, out_stride, unused); break;                    \
        default: tile_n(n, base, stride, a, a_stride, 4, out, out_stride, unused); break;                   \
        }                                                                                                   \
    }
MF_STATIC_ASSERT(NC == 4, "TILE_BY_COUNT takes 1..4 activation rows");
TILE_BY_COUNT(tile_q2_K, tile_q2_K_n)
TILE_BY_COUNT(tile_q3_K, tile_q3_K_n)

/* rows outer, groups of NC activation rows inner, so each weight row is read from memory once */
#define TILE_GEMM(name, tile, stride, five)                                                           \
    static void name(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,        \
                     size_t a_stride, float *out, size_t out_stride) {                                \
        for (int r = 0; r < nr; r++)                                                                  \
            for (int c0 = 0; c0 < nc; c0 += NC)                                                       \
                tile(n, (const uint8_t *)w + (size_t)r * w_stride, stride,                            \
                     (const char *)a + (size_t)c0 * a_stride, a_stride, MF_MIN(NC, nc - c0),          \
                     out + (size_t)c0 * out_stride + (size_t)r, out_stride, five);                    \
    }
TILE_GEMM(gemm_q4_K, tile_k4, sizeof(mf_block_q4_K), false)
TILE_GEMM(gemm_q5_K, tile_k4, sizeof(mf_block_q5_K), true)
TILE_GEMM(gemm_q6_K, tile_q6_K, sizeof(mf_block_q6_K), false)
TILE_GEMM(gemm_q2_K, tile_q2_K, sizeof(mf_block_q2_K), false)
TILE_GEMM(gemm_q3_K, tile_q3_K, sizeof(mf_block_q3_K), false)

/* Q2_K and Q3_K: one activation row through the tiles (the same operations: a dot and a tile agree
 * bit for bit) */
static float dot_q2_K_q8_K(int64_t n, const void *w, const void *a) {
    float r;
    tile_q2_K(n, w, sizeof(mf_block_q2_K), a, 0, 1, &r, 0, false);
    return r;
}

static float dot_q3_K_q8_K(int64_t n, const void *w, const void *a) {
    float r;
    tile_q3_K(n, w, sizeof(mf_block_q3_K), a, 0, 1, &r, 0, false);
    return r;
}

void mf_simd_register_avx2_k(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_K, Q8_K, dot_q4_K_q8_K, gemm_q4_K);
    MF_SIMD_SET_DOT(t, Q5_K, Q8_K, dot_q5_K_q8_K, gemm_q5_K);
    MF_SIMD_SET_DOT(t, Q6_K, Q8_K, dot_q6_K_q8_K, gemm_q6_K);
    MF_SIMD_SET_DOT(t, Q2_K, Q8_K, dot_q2_K_q8_K, gemm_q2_K);
    MF_SIMD_SET_DOT(t, Q3_K, Q8_K, dot_q3_K_q8_K, gemm_q3_K);
}
