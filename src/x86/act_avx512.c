/* act_avx512.c: AVX-512 activation quantizers (f32 row -> Q8_0, Q8_1, Q8_K, F16, BF16), bit-identical
 * to the reference ones in the traits table; the semantics are those of act_avx2.c (see its header).
 * They differ from the AVX2 ones in doing the per-block reductions (amax, sums) for four Q8_0/Q8_1
 * blocks or one Q8_K block in a few transposing steps instead of one horizontal reduction each. */
#include "simd/simd_kernels.h"
#include "x86/x86_common.h"

/* Bytes of the four 32-bit values in each 128-bit lane of packs_epi16(packs_epi32(r0, r1),
 * packs_epi32(r2, r3)) come as (r0 r1 r2 r3) per lane; this dword permutation puts r0's four lanes
 * first, then r1's, ... (dword 4j + L holds input j's lane L; output k wants input k / 4, lane k % 4). */
static inline __m512i unlace_idx(void) {
    return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

/* 4 x 16 i32 -> 64 saturated i8 in order (as the reference's clamp to [-128, 127]). */
static inline __m512i pack64_i8(__m512i r0, __m512i r1, __m512i r2, __m512i r3) {
    const __m512i p = _mm512_packs_epi16(_mm512_packs_epi32(r0, r1), _mm512_packs_epi32(r2, r3));
    return _mm512_permutexvar_epi32(unlace_idx(), p);
}

/* Blocks to leave to the reference (as in act_avx2.c): amax NaN, infinite or above 3.4e38, or so small
 * (below 3.8e-37) that 127 / amax overflows. Never the case for the activations of a working model. */
static inline __mmask16 needs_reference16(__m512 amax) {
    const __mmask16 big = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(3.4e38f), _CMP_NLE_UQ);
    const __mmask16 tiny = _mm512_cmp_ps_mask(amax, _mm512_set1_ps(3.8e-37f), _CMP_LT_OQ) &
                           _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_OQ);
    return big | tiny;
}

/* Up to four blocks of 32 (nb = 1..4; missing blocks read as zeros and are not written): writes each
 * block's 32 q to qs + b * stride, sets lane 4b of *d to amax_b / 127 and, when sum is not NULL, lane 4b
 * of *sum to sum(q_b). Returns the blocks (bit b) the reference must redo.
 *
 * amax: |x| as integer bits (the order of non-negative floats; NaN and inf come out above every
 * finite value, so they need no separate test), maxed over each block's two vectors, then reduced in
 * two transposing steps (128-bit lanes of all four blocks at once) and two in-lane ones: lane 4b..4b+3
 * end up holding block b's amax. */
static inline unsigned q8_blocks4(const float *x, int nb, int8_t *qs, size_t stride, __m512 *d, __m512i *sum) {
    const __m512i absmask = _mm512_set1_epi32(0x7fffffff);
    __m512 v[8];
    __m512i m[4];
    for (int b = 0; b < 4; b++) {
        if (b < nb) {
            v[2 * b] = _mm512_loadu_ps(x + 32 * b);
            v[2 * b + 1] = _mm512_loadu_ps(x + 32 * b + 16);
        } else {
            v[2 * b] = v[2 * b + 1] = _mm512_setzero_ps();
        }
        m[b] = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v[2 * b]), absmask),
                                _mm512_and_si512(_mm512_castps_si512(v[2 * b + 1]), absmask));
    }
    /* lanes: m01 = (m0 L0|L2, m0 L1|L3, m1 L0|L2, m1 L1|L3), then y = (m0, m1, m2, m3) one lane each */
    const __m512i m01 = _mm512_max_epu32(_mm512_shuffle_i32x4(m[0], m[1], 0x44), _mm512_shuffle_i32x4(m[0], m[1], 0xEE));
    const __m512i m23 = _mm512_max_epu32(_mm512_shuffle_i32x4(m[2], m[3], 0x44), _mm512_shuffle_i32x4(m[2], m[3], 0xEE));
    __m512i y = _mm512_max_epu32(_mm512_shuffle_i32x4(m01, m23, 0x88), _mm512_shuffle_i32x4(m01, m23, 0xDD));
    y = _mm512_max_epu32(y, _mm512_shuffle_epi32(y, _MM_PERM_BADC));
    y = _mm512_max_epu32(y, _mm512_shuffle_epi32(y, _MM_PERM_CDAB));
    const __m512 amax = _mm512_castsi512_ps(y);
    const unsigned bad = (unsigned)needs_reference16(amax);
    /* 127 / amax and amax / 127 correctly rounded, as the reference's scalar divisions */
    const __mmask16 nz = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    const __m512 id = _mm512_maskz_div_ps(nz, _mm512_set1_ps(127.f), amax);
    *d = _mm512_div_ps(amax, _mm512_set1_ps(127.f));
    __m512i p[2];
    for (int h = 0; h < 2; h++) {
        /* id's 128-bit lanes 2h and 2h + 1 broadcast; two calls, as the immediate must be a constant
         * before inlining for clang */
        const __m512 id0 = h ? _mm512_shuffle_f32x4(id, id, 0xAA) : _mm512_shuffle_f32x4(id, id, 0x00);
        const __m512 id1 = h ? _mm512_shuffle_f32x4(id, id, 0xFF) : _mm512_shuffle_f32x4(id, id, 0x55);
        p[h] = pack64_i8(_mm512_cvtps_epi32(_mm512_mul_ps(v[4 * h], id0)),
                         _mm512_cvtps_epi32(_mm512_mul_ps(v[4 * h + 1], id0)),
                         _mm512_cvtps_epi32(_mm512_mul_ps(v[4 * h + 2], id1)),
                         _mm512_cvtps_epi32(_mm512_mul_ps(v[4 * h + 3], id1)));
    }
    for (int b = 0; b < nb; b++) {
        const __m256i q = (b & 1) ? _mm512_extracti64x4_epi64(p[b >> 1], 1) : _mm512_castsi512_si256(p[b >> 1]);
        _mm256_storeu_si256((__m256i *)(qs + (size_t)b * stride), q);
    }
    if (sum) {
        /* dword sums of 4 q (vpdpbusd with u8 ones), then the same transposing steps with adds */
        const __m512i ones = _mm512_set1_epi8(1);
        const __m512i s0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, p[0]);
        const __m512i s1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, p[1]);
        __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(s0, s1, 0x88), _mm512_shuffle_i32x4(s0, s1, 0xDD));
        s = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_BADC));
        *sum = _mm512_add_epi32(s, _mm512_shuffle_epi32(s, _MM_PERM_CDAB));
    }
    return (bad & 0x1111u) & ((1u << (4 * nb)) - 1);
}

/* fp16 of lanes 0, 4, 8, 12 (round to nearest even, as mf_f32_to_fp16 for the finite values here) */
static inline void halves4(__m512 v, uint16_t out[16]) {
    _mm256_storeu_si256((__m256i *)out, _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

static void quantize_q8_0(const float *src, void *dst, int64_t n) {
    mf_block_q8_0 *b = dst;
    const int64_t nb = n / MF_QK8_0;
    for (int64_t i = 0; i < nb; i += 4) {
        const int k = nb - i < 4 ? (int)(nb - i) : 4;
        __m512 d;
        /* the constant 4 lets the compiler drop the per-block tests of full groups */
        unsigned bad = k == 4 ? q8_blocks4(src + MF_QK8_0 * i, 4, b[i].qs, sizeof *b, &d, NULL)
                              : q8_blocks4(src + MF_QK8_0 * i, k, b[i].qs, sizeof *b, &d, NULL);
        uint16_t h[16];
        halves4(d, h);
        for (int j = 0; j < k; j++) b[i + j].d = h[4 * j];
        while (MF_UNLIKELY(bad)) {
            const int j = __builtin_ctz(bad) / 4;
            mf_type_get_traits(MF_TYPE_Q8_0)->quantize(src + MF_QK8_0 * (i + j), &b[i + j], MF_QK8_0);
            bad &= bad - 1;
        }
    }
}

static void quantize_q8_1(const float *src, void *dst, int64_t n) {
    mf_block_q8_1 *b = dst;
    const int64_t nb = n / MF_QK8_1;
    for (int64_t i = 0; i < nb; i += 4) {
        const int k = nb - i < 4 ? (int)(nb - i) : 4;
        __m512 d;
        __m512i sum;
        unsigned bad = k == 4 ? q8_blocks4(src + MF_QK8_1 * i, 4, b[i].qs, sizeof *b, &d, &sum)
                              : q8_blocks4(src + MF_QK8_1 * i, k, b[i].qs, sizeof *b, &d, &sum);
        uint16_t hd[16], hs[16];
        halves4(d, hd);
        halves4(_mm512_mul_ps(d, _mm512_cvtepi32_ps(sum)), hs); /* s = d * sum with the f32 d */
        for (int j = 0; j < k; j++) b[i + j].d = hd[4 * j], b[i + j].s = hs[4 * j];
        while (MF_UNLIKELY(bad)) {
            const int j = __builtin_ctz(bad) / 4;
            mf_type_get_traits(MF_TYPE_Q8_1)->quantize(src + MF_QK8_1 * (i + j), &b[i + j], MF_QK8_1);
            bad &= bad - 1;
        }
    }
}

/* Q8_K needs the sign of the first value of largest magnitude. As integers, the largest positive float
 * has the largest signed bits and the negative one of largest magnitude the largest unsigned bits, so
 * two max trees over the raw bits give both candidates at once; only when a positive and a negative
 * value share the largest magnitude does the order decide, and a scan finds the first. NaN and inf
 * come out as magnitudes >= 0x7f800000, which go to the reference. */
static void quantize_q8_K(const float *src, void *dst, int64_t n) {
    mf_block_q8_K *b = dst;
    const __m512i ones = _mm512_set1_epi8(1);
    for (int64_t i = 0; i < n / MF_QK_K; i++, src += MF_QK_K) {
        __m512i u[16];
        for (int k = 0; k < 16; k++) u[k] = _mm512_castps_si512(_mm512_loadu_ps(src + 16 * k));
        __m512i ps[8], ns[8];
        for (int k = 0; k < 8; k++) {
            ps[k] = _mm512_max_epi32(u[2 * k], u[2 * k + 1]);
            ns[k] = _mm512_max_epu32(u[2 * k], u[2 * k + 1]);
        }
        for (int w = 4; w >= 1; w /= 2)
            for (int k = 0; k < w; k++) ps[k] = _mm512_max_epi32(ps[k], ps[k + w]), ns[k] = _mm512_max_epu32(ns[k], ns[k + w]);
        const int32_t pmax = _mm512_reduce_max_epi32(ps[0]);
        const uint32_t nmax = _mm512_reduce_max_epu32(ns[0]);
        const uint32_t pc = pmax > 0 ? (uint32_t)pmax : 0, nc = nmax > 0x80000000u ? nmax & 0x7fffffffu : 0;
        const uint32_t abits = pc > nc ? pc : nc;
        float amax;
        memcpy(&amax, &abits, 4);
        if (MF_UNLIKELY(!(amax <= 3.4e38f) || (amax != 0.0f && amax < 3.8e-37f))) {
            mf_type_get_traits(MF_TYPE_Q8_K)->quantize(src, &b[i], MF_QK_K);
            continue;
        }
        if (abits == 0) {
            memset(&b[i], 0, sizeof b[i]);
            continue;
        }
        float max = pc > nc ? amax : -amax;
        if (MF_UNLIKELY(pc == nc)) {
            const __m512i am = _mm512_set1_epi32((int)abits), absmask = _mm512_set1_epi32(0x7fffffff);
            for (int k = 0; k < 16; k++) {
                const unsigned hit = _mm512_cmpeq_epi32_mask(_mm512_and_si512(u[k], absmask), am);
                if (hit) {
                    max = src[16 * k + __builtin_ctz(hit)];
                    break;
                }
            }
        }
        const float iscale = -127.f / max;
        const __m512 is = _mm512_set1_ps(iscale);
        __m512i s[4];
        for (int c = 0; c < 4; c++) {
            __m512i r[4];
            for (int k = 0; k < 4; k++) r[k] = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_castsi512_ps(u[4 * c + k]), is));
            const __m512i p = pack64_i8(r[0], r[1], r[2], r[3]);
            _mm512_storeu_si512(b[i].qs + 64 * c, p);
            s[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, p); /* dword 4L + j: 4 q of group 4c + L */
        }
        /* sum each 128-bit lane (one group of 16) of s0..s3: afterwards dword 4L + c holds group 4c + L */
        const __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[0], s[1]), _mm512_unpackhi_epi32(s[0], s[1]));
        const __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(s[2], s[3]), _mm512_unpackhi_epi32(s[2], s[3]));
        const __m512i g = _mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23));
        _mm256_storeu_si256((__m256i *)b[i].bsums, _mm512_cvtepi32_epi16(_mm512_permutexvar_epi32(unlace_idx(), g)));
        b[i].d = 1 / iscale;
    }
}

static void quantize_f16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(src + i);
        _mm256_storeu_si256((__m256i *)(y + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        if (MF_UNLIKELY(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q))) /* NaN payloads: as the scalar */
            for (int k = 0; k < 16; k++) y[i + k] = mf_f32_to_fp16(src[i + k]);
    }
    for (; i < n; i++) y[i] = mf_f32_to_fp16(src[i]);
}

/* bf16 = top half after adding 0x7fff + (bit 16) (round to nearest even); NaN -> top half | 0x40. */
static void quantize_bf16(const float *src, void *dst, int64_t n) {
    uint16_t *y = dst;
    const __m512i one = _mm512_set1_epi32(1), bias = _mm512_set1_epi32(0x7fff), quiet = _mm512_set1_epi32(0x40);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 live = n - i >= 16 ? 0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        const __m512 v = _mm512_maskz_loadu_ps(live, src + i);
        const __m512i u = _mm512_castps_si512(v);
        const __m512i top = _mm512_srli_epi32(u, 16);
        const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, bias), _mm512_and_si512(top, one)), 16);
        const __m512i r = _mm512_mask_or_epi32(rounded, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), top, quiet);
        _mm256_mask_storeu_epi16(y + i, live, _mm512_cvtepi32_epi16(r));
    }
}

void mf_simd_register_avx512_act(mf_simd_table *t) {
    t->quantize[MF_TYPE_Q8_0] = quantize_q8_0;
    t->quantize[MF_TYPE_Q8_1] = quantize_q8_1;
    t->quantize[MF_TYPE_Q8_K] = quantize_q8_K;
    t->quantize[MF_TYPE_F16] = quantize_f16;
    t->quantize[MF_TYPE_BF16] = quantize_bf16;
}
