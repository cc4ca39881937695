/* dot_avx2.c: AVX2 dot products of the 32-value block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against
 * Q8_0/Q8_1 activations) and of the float formats (F32, F16, BF16 against the same format), with
 * their multi-row tile kernels. Compiled with -mavx2 -mfma -mf16c -mbmi2; the dispatcher calls
 * these only on CPUs that have them. Integer sums inside a block are exact; blocks are combined in
 * float, so results differ from the reference only by summation order. */
#include "simd/simd_kernels.h"
#include "simd/x86_common.h"

/* ---- 32-value blocks ------------------------------------------------------------------------
 * Per block b of 32 values: sum_j w_j * a_j = d_w * d_a * S_b, S_b an exact int32 computed with
 * maddubs (u8 x s8 -> pairs summed in i16) and madd (i16 pairs -> i32). The offset formats
 * (Q4_0: q - 8, Q5_0: q - 16) use the unsigned q and subtract off * sum(a), both in i16:
 * |q * a + q' * a'| <= 2 * 31 * 128 < 2^15, so nothing saturates. */

/* i32x8 partial sums of (q - off) * a for 32 unsigned q and 32 signed a. */
static inline __m256i sum_offset_u8_i8(__m256i q, __m256i a, __m256i off) {
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, a), _mm256_maddubs_epi16(off, a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline __m256i sum_u8_i8(__m256i q, __m256i a) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, a), _mm256_set1_epi16(1));
}

/* Signed x signed via the sign trick: |x| * (a with x's sign). |x| <= 128 and the pair sums stay
 * within i16 because activations are in [-127, 127]. */
static inline __m256i sum_i8_i8(__m256i x, __m256i a) {
    return sum_u8_i8(_mm256_sign_epi8(x, x), _mm256_sign_epi8(a, x));
}

/* Q4_0 unsigned nibbles 0..15 and Q5_0/Q5_1 5-bit values, in activation order. */
static inline __m256i q4_0_values(const mf_block_q4_0 *b) { return mf_x86_nibbles32(b->qs); }
static inline __m256i q5_values(const uint8_t qs[16], const uint8_t qh[4]) {
    return _mm256_or_si256(mf_x86_nibbles32(qs), _mm256_and_si256(mf_x86_bits32(qh), _mm256_set1_epi8(0x10)));
}

static float dot_q4_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const int64_t nb = n / MF_QK4_0;
    const __m256i off = _mm256_set1_epi8(8);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i s0 = sum_offset_u8_i8(q4_0_values(&w[i]), mf_x86_load(a[i].qs), off);
        __m256i s1 = sum_offset_u8_i8(q4_0_values(&w[i + 1]), mf_x86_load(a[i + 1].qs), off);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i + 1].d) * mf_x86_h2f(a[i + 1].d)), _mm256_cvtepi32_ps(s1), acc1);
    }
    for (; i < nb; i++) {
        __m256i s0 = sum_offset_u8_i8(q4_0_values(&w[i]), mf_x86_load(a[i].qs), off);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
    }
    return mf_x86_hsum8(_mm256_add_ps(acc0, acc1));
}

/* Q4_1 / Q5_1 against Q8_1: sum_j (d q_j + m) * d_a a_j = d d_a sum(q a) + m * s_a, where the
 * activation block stores s_a = d_a * sum(a). */
static float dot_q4_1_q8_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q4_1 *w = vw;
    const mf_block_q8_1 *a = va;
    const int64_t nb = n / MF_QK4_1;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float mins = 0.0f;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i s0 = sum_u8_i8(mf_x86_nibbles32(w[i].qs), mf_x86_load(a[i].qs));
        __m256i s1 = sum_u8_i8(mf_x86_nibbles32(w[i + 1].qs), mf_x86_load(a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i + 1].d) * mf_x86_h2f(a[i + 1].d)), _mm256_cvtepi32_ps(s1), acc1);
        mins += mf_x86_h2f(w[i].m) * mf_x86_h2f(a[i].s) + mf_x86_h2f(w[i + 1].m) * mf_x86_h2f(a[i + 1].s);
    }
    for (; i < nb; i++) {
        __m256i s0 = sum_u8_i8(mf_x86_nibbles32(w[i].qs), mf_x86_load(a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
        mins += mf_x86_h2f(w[i].m) * mf_x86_h2f(a[i].s);
    }
    return mf_x86_hsum8(_mm256_add_ps(acc0, acc1)) + mins;
}

static float dot_q5_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const int64_t nb = n / MF_QK5_0;
    const __m256i off = _mm256_set1_epi8(16);
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i s0 = sum_offset_u8_i8(q5_values(w[i].qs, w[i].qh), mf_x86_load(a[i].qs), off);
        __m256i s1 = sum_offset_u8_i8(q5_values(w[i + 1].qs, w[i + 1].qh), mf_x86_load(a[i + 1].qs), off);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i + 1].d) * mf_x86_h2f(a[i + 1].d)), _mm256_cvtepi32_ps(s1), acc1);
    }
    for (; i < nb; i++) {
        __m256i s0 = sum_offset_u8_i8(q5_values(w[i].qs, w[i].qh), mf_x86_load(a[i].qs), off);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
    }
    return mf_x86_hsum8(_mm256_add_ps(acc0, acc1));
}

static float dot_q5_1_q8_1(int64_t n, const void *vw, const void *va) {
    const mf_block_q5_1 *w = vw;
    const mf_block_q8_1 *a = va;
    const int64_t nb = n / MF_QK5_1;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    float mins = 0.0f;
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i s0 = sum_u8_i8(q5_values(w[i].qs, w[i].qh), mf_x86_load(a[i].qs));
        __m256i s1 = sum_u8_i8(q5_values(w[i + 1].qs, w[i + 1].qh), mf_x86_load(a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i + 1].d) * mf_x86_h2f(a[i + 1].d)), _mm256_cvtepi32_ps(s1), acc1);
        mins += mf_x86_h2f(w[i].m) * mf_x86_h2f(a[i].s) + mf_x86_h2f(w[i + 1].m) * mf_x86_h2f(a[i + 1].s);
    }
    for (; i < nb; i++) {
        __m256i s0 = sum_u8_i8(q5_values(w[i].qs, w[i].qh), mf_x86_load(a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
        mins += mf_x86_h2f(w[i].m) * mf_x86_h2f(a[i].s);
    }
    return mf_x86_hsum8(_mm256_add_ps(acc0, acc1)) + mins;
}

static float dot_q8_0_q8_0(int64_t n, const void *vw, const void *va) {
    const mf_block_q8_0 *w = vw;
    const mf_block_q8_0 *a = va;
    const int64_t nb = n / MF_QK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i s0 = sum_i8_i8(mf_x86_load(w[i].qs), mf_x86_load(a[i].qs));
        __m256i s1 = sum_i8_i8(mf_x86_load(w[i + 1].qs), mf_x86_load(a[i + 1].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i + 1].d) * mf_x86_h2f(a[i + 1].d)), _mm256_cvtepi32_ps(s1), acc1);
    }
    for (; i < nb; i++) {
        __m256i s0 = sum_i8_i8(mf_x86_load(w[i].qs), mf_x86_load(a[i].qs));
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(mf_x86_h2f(w[i].d) * mf_x86_h2f(a[i].d)), _mm256_cvtepi32_ps(s0), acc0);
    }
    return mf_x86_hsum8(_mm256_add_ps(acc0, acc1));
}

/* ---- multi-row tiles for Q4_0 and Q8_0 ----------------------------------------------------------
 * One weight row against up to MF_SIMD_GEMM_NC activation rows: each weight block is loaded and
 * unpacked once and multiplied with the matching block of every activation row. */
#define NC MF_SIMD_GEMM_NC

static void tile_q4_0(int64_t n, const mf_block_q4_0 *w, const char *a, size_t a_stride, int nc, float *out,
                      size_t out_stride) {
    const int64_t nb = n / MF_QK4_0;
    const __m256i off = _mm256_set1_epi8(8);
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = q4_0_values(&w[i]);
        const float dw = mf_x86_h2f(w[i].d);
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)(a + (size_t)c * a_stride) + i;
            __m256i s = sum_offset_u8_i8(q, mf_x86_load(ab->qs), off);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * mf_x86_h2f(ab->d)), _mm256_cvtepi32_ps(s), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

static void tile_q8_0(int64_t n, const mf_block_q8_0 *w, const char *a, size_t a_stride, int nc, float *out,
                      size_t out_stride) {
    const int64_t nb = n / MF_QK8_0;
    __m256 acc[NC];
    for (int c = 0; c < NC; c++) acc[c] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const __m256i q = mf_x86_load(w[i].qs);
        const __m256i aq = _mm256_sign_epi8(q, q);
        const float dw = mf_x86_h2f(w[i].d);
        for (int c = 0; c < nc; c++) {
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)(a + (size_t)c * a_stride) + i;
            __m256i s = sum_u8_i8(aq, _mm256_sign_epi8(mf_x86_load(ab->qs), q));
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(dw * mf_x86_h2f(ab->d)), _mm256_cvtepi32_ps(s), acc[c]);
        }
    }
    for (int c = 0; c < nc; c++) out[(size_t)c * out_stride] = mf_x86_hsum8(acc[c]);
}

#define TILE_GEMM(name, tile, wtype)                                                                  \
    static void name(int64_t n, int nr, int nc, const void *w, size_t w_stride, const void *a,        \
                     size_t a_stride, float *out, size_t out_stride) {                                \
        for (int r = 0; r < nr; r++)                                                                  \
            for (int c0 = 0; c0 < nc; c0 += NC)                                                       \
                tile(n, (const wtype *)((const char *)w + (size_t)r * w_stride),                      \
                     (const char *)a + (size_t)c0 * a_stride, a_stride, MF_MIN(NC, nc - c0),          \
                     out + (size_t)c0 * out_stride + (size_t)r, out_stride);                          \
    }
TILE_GEMM(gemm_q4_0, tile_q4_0, mf_block_q4_0)
TILE_GEMM(gemm_q8_0, tile_q8_0, mf_block_q8_0)

/* ---- float formats: any n, 32 values per step in four accumulators, scalar tail ---------------- */

static float dot_f32_f32(int64_t n, const void *vw, const void *va) {
    const float *w = vw, *a = va;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8 * k), _mm256_loadu_ps(a + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(a + i), acc[0]);
    float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) s += w[i] * a[i];
    return s;
}

static inline __m256 load_f16x8(const uint16_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

static float dot_f16_f16(int64_t n, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_f16x8(w + i + 8 * k), load_f16x8(a + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load_f16x8(w + i), load_f16x8(a + i), acc[0]);
    float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) s += mf_x86_h2f(w[i]) * mf_x86_h2f(a[i]);
    return s;
}

/* bf16 is the top half of an f32: widen to 32 bits and shift left by 16. */
static inline __m256 load_bf16x8(const uint16_t *p) {
    __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
}

static float dot_bf16_bf16(int64_t n, const void *vw, const void *va) {
    const uint16_t *w = vw, *a = va;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    int64_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++)
            acc[k] = _mm256_fmadd_ps(load_bf16x8(w + i + 8 * k), load_bf16x8(a + i + 8 * k), acc[k]);
    for (; i + 8 <= n; i += 8) acc[0] = _mm256_fmadd_ps(load_bf16x8(w + i), load_bf16x8(a + i), acc[0]);
    float s = mf_x86_hsum8(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
    for (; i < n; i++) s += mf_bf16_to_f32(w[i]) * mf_bf16_to_f32(a[i]);
    return s;
}

MF_SIMD_GEMM_FROM_DOT(gemm_q4_1, dot_q4_1_q8_1)
MF_SIMD_GEMM_FROM_DOT(gemm_q5_0, dot_q5_0_q8_0)
MF_SIMD_GEMM_FROM_DOT(gemm_q5_1, dot_q5_1_q8_1)
MF_SIMD_GEMM_FROM_DOT(gemm_f32, dot_f32_f32)
MF_SIMD_GEMM_FROM_DOT(gemm_f16, dot_f16_f16)
MF_SIMD_GEMM_FROM_DOT(gemm_bf16, dot_bf16_bf16)

void mf_simd_register_avx2(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, Q4_0, Q8_0, dot_q4_0_q8_0, gemm_q4_0);
    MF_SIMD_SET_DOT(t, Q4_1, Q8_1, dot_q4_1_q8_1, gemm_q4_1);
    MF_SIMD_SET_DOT(t, Q5_0, Q8_0, dot_q5_0_q8_0, gemm_q5_0);
    MF_SIMD_SET_DOT(t, Q5_1, Q8_1, dot_q5_1_q8_1, gemm_q5_1);
    MF_SIMD_SET_DOT(t, Q8_0, Q8_0, dot_q8_0_q8_0, gemm_q8_0);
    MF_SIMD_SET_DOT(t, F32, F32, dot_f32_f32, gemm_f32);
    MF_SIMD_SET_DOT(t, F16, F16, dot_f16_f16, gemm_f16);
    MF_SIMD_SET_DOT(t, BF16, BF16, dot_bf16_bf16, gemm_bf16);
}
