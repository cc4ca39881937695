/* act_avx2.c: AVX2 activation quantizers (f32 row -> Q8_0, Q8_1, Q8_K, F16, BF16), bit-identical to
 * the reference ones in the traits table (semantics in quant.h, mf_quant_file_quantizer):
 *   Q8_0/Q8_1: per 32, d = amax / 127 (fp16), q = nearest-even(x * (127 / amax)) saturated to int8,
 *              Q8_1 s = fp16(d * sum q) with the f32 d;
 *   Q8_K:      per 256, iscale = -127 / max (max = first value of largest magnitude),
 *              q = nearest-even(iscale * x) saturated, d = 1 / iscale, bsums = sums of 16 q;
 *   F16, BF16: round to nearest even per value, NaN as the scalar converters write it.
 * cvtps_epi32 rounds to nearest even (the default MXCSR mode), as the reference's 1.5 * 2^23 trick. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

static inline float hmax8(__m256 x) {
    __m128 r = _mm_max_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_max_ps(r, _mm_movehl_ps(r, r));
    r = _mm_max_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}

/* 4 x 8 i32 -> 32 saturated i8 in order. The two packs work per 128-bit lane, leaving the 4-value
 * groups as (v0a v1a v2a v3a | v0b v1b v2b v3b); the permute restores v0a v0b v1a v1b ... */
static inline __m256i pack32_i8(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* Blocks holding NaN or infinity, or whose amax is so small (below 3.8e-37) that 127 / amax is
 * infinite, produce NaN products, on which the reference's rounding trick and cvtps_epi32 disagree:
 * they go to the reference quantizer. Never the case for the activations of a working model. */
static inline bool needs_reference(float amax, __m256 unordered) {
    return _mm256_movemask_ps(unordered) || !(amax <= 3.4e38f) || (amax != 0.0f && amax < 3.8e-37f);
}

/* One block of 32: writes q, returns sum(q), sets *d_out = amax / 127; returns -1000 (not a
 * possible sum) without writing when the block needs the reference. */
static inline int q8_block(const float *x, int8_t *q, float *d_out) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
        nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[k], v[k], _CMP_UNORD_Q));
    }
    const float amax = hmax8(m);
    if (MF_UNLIKELY(needs_reference(amax, nan))) return -1000;
    const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
    __m256i r[4];
    for (int k = 0; k < 4; k++) r[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], id));
    const __m256i p = pack32_i8(r[0], r[1], r[2], r[3]);
    _mm256_storeu_si256((__m256i *)q, p);
    *d_out = amax / 127.f;
    return mf_x86_hsum8_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1)));
}

static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    mf_block_q8_0 *b = dst;
    for (int64_t i = 0; i < n / MF_QK8_0; i++, src += MF_QK8_0) {
        float d;
        if (MF_UNLIKELY(q8_block(src, b[i].qs, &d) == -1000)) {
            mf_type_get_traits(MF_TYPE_Q8_0)->quantize(src, &b[i], MF_QK8_0);
            continue;
        }
        b[i].d = mf_f32_to_fp16(d);
    }
}

static void quantize_q8_1(const float *src, void *dst, int64_t n) {
    mf_block_q8_1 *b = dst;
    for (int64_t i = 0; i < n / MF_QK8_1; i++, src += MF_QK8_1) {
        float d;
        const int sum = q8_block(src, b[i].qs, &d);
        if (MF_UNLIKELY(sum == -1000)) {
            mf_type_get_traits(MF_TYPE_Q8_1)->quantize(src, &b[i], MF_QK8_1);
            continue;
        }
        b[i].d = mf_f32_to_fp16(d);
        b[i].s = mf_f32_to_fp16(d * (float)sum);
    }
}

static void quantize_q8_K(const float *src, void *dst, int64_t n) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    mf_block_q8_K *b = dst;
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        __m256 m = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int k = 0; k < MF_QK_K; k += 8) {
            const __m256 v = _mm256_loadu_ps(src + k);
            m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        const float amax = hmax8(m);
        if (MF_UNLIKELY(needs_reference(amax, nan))) {
            mf_type_get_traits(MF_TYPE_Q8_K)->quantize(src, &b[i], MF_QK_K);
            continue;
        }
        if (!(amax > 0.0f)) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        /* the first value whose magnitude is amax gives the sign of the scale */
        const __m256 am = _mm256_set1_ps(amax);
        float max = amax;
        for (int k = 0; k < MF_QK_K; k += 8) {
            int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(src + k)), am, _CMP_EQ_OQ));
            if (hit) {
                max = src[k + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        __m256i gsum[4]; /* per 32 values: i32 lanes 0..3 sum group 2c's values, lanes 4..7 group 2c+1's */
        for (int c = 0; c < MF_QK_K / 32; c++) {
            const float *x = src + 32 * c;
            __m256i r[4];
            for (int k = 0; k < 4; k++) r[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), is));
            const __m256i p = pack32_i8(r[0], r[1], r[2], r[3]);
            _mm256_storeu_si256((__m256i *)(b[i].qs + 32 * c), p);
            const __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), p), _mm256_set1_epi16(1));
            gsum[c % 4] = s;
            if (c % 4 == 3) {
                /* hadd twice: lanes (g0 g2 g4 g6 | g1 g3 g5 g7) of this 128-value quarter, then reorder */
                __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(gsum[0], gsum[1]), _mm256_hadd_epi32(gsum[2], gsum[3]));
                h = _mm256_permutevar8x32_epi32(h, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                int32_t g[8];
                _mm256_storeu_si256((__m256i *)g, h);
                for (int k = 0; k < 8; k++) b[i].bsums[(c / 4) * 8 + k] = (int16_t)g[k];
            }
        }
        b[i].d = 1 / iscale;
    }
}

static void quantize_f16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(src + i);
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (MF_UNLIKELY(_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)))) /* NaN payloads: as the scalar */
            for (int k = 0; k < 8; k++) y[i + k] = mf_f32_to_fp16(src[i + k]);
    }
    for (; i < n; i++) y[i] = mf_f32_to_fp16(src[i]);
}

/* bf16 = top half after adding 0x7fff + (bit 16) (round to nearest even); NaN -> top half | 0x40. */
static void quantize_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff), quiet = _mm256_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i r[2];
        for (int k = 0; k < 2; k++) {
            const __m256 v = _mm256_loadu_ps(src + i + 8 * k);
            const __m256i u = _mm256_castps_si256(v);
            const __m256i top = _mm256_srli_epi32(u, 16);
            const __m256i rounded =
                _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(u, bias), _mm256_and_si256(top, one)), 16);
            const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
            r[k] = _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quiet), nan);
        }
        /* packus works per lane: (r0 lo, r1 lo | r0 hi, r1 hi) -> reorder the 64-bit quarters */
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r[0], r[1]), 0xD8);
        _mm256_storeu_si256((__m256i *)(y + i), p);
    }
    for (; i < n; i++) y[i] = mf_f32_to_bf16(src[i]);
}

static void quantize_f32(const float *src, void *dst, int64_t n) { memcpy(dst, src, (size_t)n * sizeof(float)); }

void mf_simd_register_avx2_act(mf_simd_table *t) {
    t->quantize[MF_TYPE_Q8_0] = quantize_q8_0;
    t->quantize[MF_TYPE_Q8_1] = quantize_q8_1;
    t->quantize[MF_TYPE_Q8_K] = quantize_q8_K;
    t->quantize[MF_TYPE_F16] = quantize_f16;
    t->quantize[MF_TYPE_BF16] = quantize_bf16;
    t->quantize[MF_TYPE_F32] = quantize_f32;
}
