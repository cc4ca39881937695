/* dot_k_avx512.c: AVX-512 (BW + VNNI) dot products of the K-quant super-blocks against Q8_K. As in
 * dot_k_avx2.c, per super-block the integer part is exact and one float multiply-add combines it;
 * here 64 values go through each step: maddubs (u8 x s8 -> i16 pairs) and vpdpwssd (i16 pairs times
 * the i16 scales, summed into i32), with the scales placed per 16 i16 lanes by vpermw. The tiles
 * unpack each super-block once for several activation rows. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"
#include "simd/kquant_common.h"

/* i16 lane l of the result takes element idx(l) of the source: for Q4_K/Q5_K chunk j, lanes 0..15
 * (the low nibbles, sub-block 2j) take scale 2j and lanes 16..31 scale 2j+1; for Q6_K part g, lane l
 * takes scale 4g + l/8 (each 128-bit lane is one group of 16 values). */
static inline __m512i pick_k4(int j) {
    return _mm512_inserti64x4(_mm512_set1_epi16((short)(2 * j)), _mm256_set1_epi16((short)(2 * j + 1)), 1);
}
static inline __m512i pick_q6(int g) {
    return _mm512_set_epi16(4 * g + 3, 4 * g + 3, 4 * g + 3, 4 * g + 3, 4 * g + 3, 4 * g + 3, 4 * g + 3, 4 * g + 3,
                            4 * g + 2, 4 * g + 2, 4 * g + 2, 4 * g + 2, 4 * g + 2, 4 * g + 2, 4 * g + 2, 4 * g + 2,
                            4 * g + 1, 4 * g + 1, 4 * g + 1, 4 * g + 1, 4 * g + 1, 4 * g + 1, 4 * g + 1, 4 * g + 1,
                            4 * g, 4 * g, 4 * g, 4 * g, 4 * g, 4 * g, 4 * g, 4 * g);
}
/* i16 shift counts: a in the low 256 bits, b in the high 256 bits */
static inline __m512i counts(short lo, short hi) {
    return _mm512_inserti64x4(_mm512_set1_epi16(lo), _mm256_set1_epi16(hi), 1);
}

/* sum_s m_s * (bsums[2s] + bsums[2s+1]) as i32x4 partial sums; the mins are bytes 8..15. */
static inline __m128i k4_mins_dot(__m128i scales_mins, const int16_t *bsums) {
    __m128i b0 = _mm_loadu_si128((const __m128i *)bsums), b1 = _mm_loadu_si128((const __m128i *)(bsums + 8));
    return _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_unpackhi_epi64(scales_mins, scales_mins)), _mm_hadd_epi16(b0, b1));
}

/* Q4_K and Q5_K share everything but the 5th bit: chunk j (32 bytes of qs) is broadcast to both
 * halves and shifted right by 0 (low nibbles, sub-block 2j) or 4 (high nibbles, 2j+1), so the
 * register holds 64 values in activation order a[64j .. 64j+63]. For Q5_K, bit 2j of qh[l] (low
 * half) or 2j+1 (high half) adds 16. */
static inline float dot_k4(int64_t n, const uint8_t *base, size_t stride, const mf_block_q8_K *a, bool five) {
    const int64_t nb = n / MF_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), nib_shift = counts(0, 4), sixteen = _mm512_set1_epi8(16);
    __m512 acc = _mm512_setzero_ps();
    __m128 accm = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = base + (size_t)i * stride;
        /* Q4_K and Q5_K both start with d, dmin, scales[12]; Q5_K then has qh[32] before qs */
        const mf_block_q4_K *hdr = (const mf_block_q4_K *)blk;
        const uint8_t *qs = five ? ((const mf_block_q5_K *)blk)->qs : hdr->qs;
        const float d = a[i].d * mf_x86_h2f(hdr->d), dmin = -a[i].d * mf_x86_h2f(hdr->dmin);
        uint8_t sm[16];
        mf_k4_unpack_scales(hdr->scales, sm);
        const __m128i scales_mins = _mm_loadu_si128((const __m128i *)sm);
        accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k4_mins_dot(scales_mins, a[i].bsums)), accm);
        const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scales_mins));
        const __m512i qh = five ? _mm512_broadcast_i64x4(mf_x86_load(((const mf_block_q5_K *)blk)->qh)) : _mm512_setzero_si512();
        __m512i sumi = _mm512_setzero_si512();
        for (int j = 0; j < 4; j++) {
            __m512i q = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(mf_x86_load(qs + 32 * j)), nib_shift), m4);
            if (five) {
                const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * j))),
                                                       _mm256_set1_epi8((char)(1 << (2 * j + 1))), 1);
                q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qh, bit), q, sixteen);
            }
            const __m512i p = _mm512_maddubs_epi16(q, _mm512_loadu_si512(a[i].qs + 64 * j));
            sumi = _mm512_dpwssd_epi32(sumi, p, _mm512_permutexvar_epi16(pick_k4(j), sc));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    }
    accm = _mm_add_ps(accm, _mm_movehl_ps(accm, accm));
    accm = _mm_add_ss(accm, _mm_movehdup_ps(accm));
    return _mm512_reduce_add_ps(acc) + _mm_cvtss_f32(accm);
}

static float dot_q4_K_q8_K(int64_t n, const void *w, const void *a) {
    return dot_k4(n, w, sizeof(mf_block_q4_K), a, false);
}
static float dot_q5_K_q8_K(int64_t n, const void *w, const void *a) {
    return dot_k4(n, w, sizeof(mf_block_q5_K), a, true);
}

/* Q6_K, half h: ql[64h .. 64h+63] loads as (l0 | l1) and qh[32h ..] is broadcast to both halves.
 * Values 0..63 of the half are (low nibbles of l0 | low nibbles of l1) with qh bits 0-1 | 2-3,
 * values 64..127 the high nibbles with qh bits 4-5 | 6-7; each lands at bits 4-5 by a per-half
 * shift. The -32 offset is applied once per super-block through bsums, as in the AVX2 kernel. */
static float dot_q6_K_q8_K(int64_t n, const void *vw, const void *va) {
    const mf_block_q6_K *w = vw;
    const mf_block_q8_K *a = va;
    const int64_t nb = n / MF_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
    const __m512i up = counts(4, 2), down = counts(0, 2);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const float d = a[i].d * mf_x86_h2f(w[i].d);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w[i].scales));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, mf_x86_load(a[i].bsums)), 5);
        __m512i sumi = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), corr));
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(w[i].ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(mf_x86_load(w[i].qh + 32 * h));
            const __m512i q01 = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, up), m2));
            const __m512i q23 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                                _mm512_and_si512(_mm512_srlv_epi16(qh, down), m2));
            const int8_t *y = a[i].qs + 128 * h;
            const __m512i p01 = _mm512_maddubs_epi16(q01, _mm512_loadu_si512(y));
            const __m512i p23 = _mm512_maddubs_epi16(q23, _mm512_loadu_si512(y + 64));
            sumi = _mm512_dpwssd_epi32(sumi, p01, _mm512_permutexvar_epi16(pick_q6(2 * h), sc));
            sumi = _mm512_dpwssd_epi32(sumi, p23, _mm512_permutexvar_epi16(pick_q6(2 * h + 1), sc));
        }
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(sumi), acc);
    }
    return _mm512_reduce_add_ps(acc);
}

/* ---- multi-row tiles: one weight row against up to MF_SIMD_GEMM_NC activation rows. Each
 * super-block's weights and scales are unpacked once into registers; each activation row then
 * costs only its loads, the multiplies and its own min/offset correction. ---- */
#define NC MF_SIMD_GEMM_NC

static inline void tile_k4(int64_t n, const uint8_t *base, size_t stride, const char *a, size_t a_stride, int nc,
                           float *out, size_t out_stride, bool five) {
    const int64_t nb = n / MF_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), nib_shift = counts(0, 4), sixteen = _mm512_set1_epi8(16);
    __m512 acc[NC];
    __m128 accm[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps(), accm[c] = _mm_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *blk = base + (size_t)i * stride;
        const mf_block_q4_K *hdr = (const mf_block_q4_K *)blk;
        const uint8_t *qs = five ? ((const mf_block_q5_K *)blk)->qs : hdr->qs;
        const float d = mf_x86_h2f(hdr->d), dmin = -mf_x86_h2f(hdr->dmin);
        uint8_t sm[16];
        mf_k4_unpack_scales(hdr->scales, sm);
        const __m128i scales_mins = _mm_loadu_si128((const __m128i *)sm);
        const __m512i sc = _mm512_castsi128_si512(_mm_cvtepu8_epi16(scales_mins));
        const __m512i qh = five ? _mm512_broadcast_i64x4(mf_x86_load(((const mf_block_q5_K *)blk)->qh)) : _mm512_setzero_si512();
        __m512i q[4], s[4];
        for (int j = 0; j < 4; j++) {
            q[j] = _mm512_and_si512(_mm512_srlv_epi16(_mm512_broadcast_i64x4(mf_x86_load(qs + 32 * j)), nib_shift), m4);
            if (five) {
                const __m512i bit = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * j))),
                                                       _mm256_set1_epi8((char)(1 << (2 * j + 1))), 1);
                q[j] = _mm512_mask_add_epi8(q[j], _mm512_test_epi8_mask(qh, bit), q[j], sixteen);
            }
            s[j] = _mm512_permutexvar_epi16(pick_k4(j), sc);
        }
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            accm[c] = _mm_fmadd_ps(_mm_set1_ps(dmin * ab->d), _mm_cvtepi32_ps(k4_mins_dot(scales_mins, ab->bsums)), accm[c]);
            __m512i sumi = _mm512_setzero_si512();
            for (int j = 0; j < 4; j++)
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[j], _mm512_loadu_si512(ab->qs + 64 * j)), s[j]);
            acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(d * ab->d), _mm512_cvtepi32_ps(sumi), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) {
        __m128 m = _mm_add_ps(accm[c], _mm_movehl_ps(accm[c], accm[c]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        out[(size_t)c * out_stride] = _mm512_reduce_add_ps(acc[c]) + _mm_cvtss_f32(m);
    }
}

static void tile_q6_K(int64_t n, const uint8_t *base, size_t stride, const char *a, size_t a_stride, int nc,
                      float *out, size_t out_stride, bool unused) {
    const int64_t nb = n / MF_QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), m2 = _mm512_set1_epi8(0x30);
    const __m512i up = counts(4, 2), down = counts(0, 2);
    __m512 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const mf_block_q6_K *w = (const mf_block_q6_K *)(base + (size_t)i * stride);
        const float d = mf_x86_h2f(w->d);
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        const __m512i sc = _mm512_castsi256_si512(sc16);
        __m512i q[4], s[4];
        for (int h = 0; h < 2; h++) {
            const __m512i l = _mm512_loadu_si512(w->ql + 64 * h);
            const __m512i qh = _mm512_broadcast_i64x4(mf_x86_load(w->qh + 32 * h));
            q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, up), m2));
            q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                           _mm512_and_si512(_mm512_srlv_epi16(qh, down), m2));
            s[2 * h] = _mm512_permutexvar_epi16(pick_q6(2 * h), sc);
            s[2 * h + 1] = _mm512_permutexvar_epi16(pick_q6(2 * h + 1), sc);
        }
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_K *ab = (const mf_block_q8_K *)(a + (size_t)c * a_stride) + i;
            const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(sc16, mf_x86_load(ab->bsums)), 5);
            __m512i sumi = _mm512_zextsi256_si512(_mm256_sub_epi32(_mm256_setzero_si256(), corr));
            for (int k = 0; k < 4; k++)
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q[k], _mm512_loadu_si512(ab->qs + 64 * k)), s[k]);
            acc[c] = _mm512_fmadd_ps(_mm512_set1_ps(d * ab->d), _mm512_cvtepi32_ps(sumi), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = _mm512_reduce_add_ps(acc[c]);
}

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

void mf_simd_register_avx512_k(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_K, Q8_K, dot_q4_K_q8_K, gemm_q4_K);
    MF_SIMD_SET_DOT(t, Q5_K, Q8_K, dot_q5_K_q8_K, gemm_q5_K);
    MF_SIMD_SET_DOT(t, Q6_K, Q8_K, dot_q6_K_q8_K, gemm_q6_K);
}
