/* cpu_dot_order_avx2.c: quantized dot products whose float operations run in the same order as
 * llama.cpp's x86 CPU kernels, so that minfer's matmul outputs equal llama.cpp's bit for bit.
 * Agreement needs it: a last-bit difference in one matmul output can move a later activation
 * across a Q8 rounding boundary, which changes it by a whole quantization step.
 *
 * The shared shape (32-value blocks and K-quants alike): eight float lanes; lane p holds the
 * integer sum of the products whose position inside each 32-byte group is 4p..4p+3 (what
 * maddubs + madd, or vpdpbusd, leave in i32 lane p); per block (or super-block) the lanes get
 * acc[p] = fma(d, (float)isum[p], acc[p]); the result is ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))
 * plus, for formats with minimums, a scalar sum of m * s accumulated with fma. The integer lane
 * sums are exact, so only the lane partition and the float steps have to match. */
#include "cpu/cpu.h"
#include "cpu/cpu_dot_order.h"
#include "simd/simd.h"
#include "x86/gemm_avx2_util.h"
#include "x86/x86_common.h"

#include <immintrin.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* i32 lane p = sum of u[i] * s[i] over bytes i = 4p..4p+3 (u unsigned <= 255, s signed; the
 * callers keep every pair sum within int16). */
static inline __m256i lanes_us(__m256i u, __m256i s) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

/* Signed x signed: |x| against y carrying x's sign (x, y in [-128, 127], y never -128). */
static inline __m256i lanes_ss(__m256i x, __m256i y) {
    return lanes_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}

/* ---- the dots: one step per block, the same steps for one row or four ----
 * A step updates one output's state; ORDERED_DOT makes the one-row dot and a four-row variant that
 * runs four independent chains over the same activation row (each output's order is unchanged). */
typedef struct {
    __m256 acc;  /* eight lanes */
    __m128 accm; /* Q4_K's four minimum lanes */
    float s, sm; /* scalar chains: minimums, or the repacked kernels' accumulators */
} ord_state;

/* A K-quant row (144-210 bytes a super-block) is read ORD_PFD bytes ahead by the one-row dot (the
 * four-row variant serves several tokens, its rows in cache): one row's stream alone leaves the
 * memory idle between the hardware prefetcher's requests (Zen 5, AVX2 level, bench_gemm --cold
 * --threads 2 q6_k 3584 18944 1: 2.68 -> 2.06 ms; shorter rows and Q4_K level). A prefetch past the
 * weights never faults. */
enum { ORD_PFD = 4096 };
#define ORDERED_DOT(name, WT, AT, BV, STEP, FINISH)                                                                    \
    static inline __attribute__((always_inline)) void name##_n(const int nr, int64_t n, const uint8_t *w, size_t ws,   \
                                                               const uint8_t *a, float *out) {                         \
        ord_state st[4];                                                                                               \
        for (int r = 0; r < nr; r++) st[r] = (ord_state){_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f, 0.0f};           \
        for (int64_t i = 0; i < n / (BV); i++) {                                                                       \
            const AT *ab = (const AT *)a + i;                                                                          \
            if ((BV) == 256 && nr == 1)                                                                                \
                for (int r = 0; r < nr; r++)                                                                           \
                    for (size_t l = 0; l < sizeof(WT); l += 64)                                                        \
                        _mm_prefetch((const char *)((const WT *)(w + (size_t)r * ws) + i) + ORD_PFD + l, _MM_HINT_T0); \
            for (int r = 0; r < nr; r++) STEP((const WT *)(w + (size_t)r * ws) + i, ab, &st[r]);                       \
        }                                                                                                              \
        for (int r = 0; r < nr; r++) out[r] = FINISH(&st[r]);                                                          \
    }                                                                                                                  \
    static float name(int64_t n, const void *w, const void *a) {                                                       \
        float o;                                                                                                       \
        name##_n(1, n, w, 0, a, &o);                                                                                   \
        return o;                                                                                                      \
    }                                                                                                                  \
    static void name##_x4(int64_t n, const void *w, size_t ws, const void *a, float *out) {                            \
        name##_n(4, n, w, ws, a, out);                                                                                 \
    }

static inline float fin_acc(const ord_state *st) { return mf_x86_hsum8(st->acc); }
static inline float fin_acc_s(const ord_state *st) { return mf_x86_hsum8(st->acc) + st->s; }
static inline float fin_s(const ord_state *st) { return st->s; }
static inline float fin_s_sm(const ord_state *st) { return st->s - st->sm; }

/* ---- 32-value blocks: acc = fma(d_w * d_a, lanes, acc); Q4_1/Q5_1 minimums as fma(m_w, s_a, summs) */

/* d_w * d_a of a block pair whose first fields are the half-float scales: one conversion. */
static inline __m256 dprod(const void *w, const void *a) {
    uint16_t x, y;
    memcpy(&x, w, 2), memcpy(&y, a, 2);
    const __m128 f = _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)x | (uint32_t)y << 16)));
    return _mm256_broadcastss_ps(_mm_mul_ss(f, _mm_movehdup_ps(f)));
}

static inline void st_q8_0(const mf_block_q8_0 *w, const mf_block_q8_0 *a, ord_state *st) {
    const __m256 d = dprod(w, a);
    st->acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_ss(mf_x86_load(w->qs), mf_x86_load(a->qs))), st->acc);
}
ORDERED_DOT(dot_q8_0, mf_block_q8_0, mf_block_q8_0, 32, st_q8_0, fin_acc)

static inline void st_q4_0(const mf_block_q4_0 *w, const mf_block_q8_0 *a, ord_state *st) {
    const __m256 d = dprod(w, a);
    const __m256i q = _mm256_sub_epi8(mf_x86_nibbles32(w->qs), _mm256_set1_epi8(8));
    st->acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_ss(q, mf_x86_load(a->qs))), st->acc);
}
ORDERED_DOT(dot_q4_0, mf_block_q4_0, mf_block_q8_0, 32, st_q4_0, fin_acc)

static inline void st_q5_0(const mf_block_q5_0 *w, const mf_block_q8_0 *a, ord_state *st) {
    const __m256 d = dprod(w, a);
    const __m256i q = mf_x86_q5_0_signed32(w->qs, w->qh);
    st->acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_ss(q, mf_x86_load(a->qs))), st->acc);
}
ORDERED_DOT(dot_q5_0, mf_block_q5_0, mf_block_q8_0, 32, st_q5_0, fin_acc)

/* d_w, m_w, d_a, s_a of a Q4_1/Q5_1 block pair with its Q8_1 block, converted in one instruction. */
static inline __m128 scales4(const void *w, const void *a) {
    uint32_t x, y;
    memcpy(&x, w, 4), memcpy(&y, a, 4);
    return _mm_cvtph_ps(_mm_insert_epi32(_mm_cvtsi32_si128((int)x), (int)y, 1));
}

static inline void st_q4_1(const mf_block_q4_1 *w, const mf_block_q8_1 *a, ord_state *st) {
    const __m128 f = scales4(w, a);                         /* d_w m_w d_a s_a */
    const __m128 prod = _mm_mul_ps(f, _mm_movehl_ps(f, f)); /* d_w * d_a, m_w * s_a (unused) */
    st->s = fmaf(_mm_cvtss_f32(_mm_shuffle_ps(f, f, 1)), _mm_cvtss_f32(_mm_shuffle_ps(f, f, 3)), st->s);
    const __m256 d = _mm256_broadcastss_ps(prod);
    st->acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(lanes_us(mf_x86_nibbles32(w->qs), mf_x86_load(a->qs))), st->acc);
}
ORDERED_DOT(dot_q4_1, mf_block_q4_1, mf_block_q8_1, 32, st_q4_1, fin_acc_s)

/* Q5_1 puts the lanes first in its fma; the product is the same. */
static inline void st_q5_1(const mf_block_q5_1 *w, const mf_block_q8_1 *a, ord_state *st) {
    const __m128 f = scales4(w, a);
    const __m128 prod = _mm_mul_ps(f, _mm_movehl_ps(f, f));
    st->s = fmaf(_mm_cvtss_f32(_mm_shuffle_ps(f, f, 1)), _mm_cvtss_f32(_mm_shuffle_ps(f, f, 3)), st->s);
    const __m256i q = _mm256_or_si256(mf_x86_nibbles32(w->qs), mf_x86_bit5_32(w->qh));
    const __m256 d = _mm256_broadcastss_ps(prod);
    st->acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(lanes_us(q, mf_x86_load(a->qs))), d, st->acc);
}
ORDERED_DOT(dot_q5_1, mf_block_q5_1, mf_block_q8_1, 32, st_q5_1, fin_acc_s)

/* ---- K-quants (256-value super-blocks, Q8_K activations) ---- */

/* The 6-bit scales and mins of Q4_K/Q5_K's eight sub-blocks. */
static inline void k4_scales(const uint8_t *packed, uint8_t sc[8], uint8_t mn[8]) {
    /* mf_get_scale_min_k4 for all eight at once, four bytes per 32-bit word: sub-blocks 0..3 keep
     * the low 6 bits of bytes 0..3 (scales) and 4..7 (mins); 4..7 take the nibbles of bytes 8..11
     * and the top 2 bits of bytes 0..3 (scales) or 4..7 (mins) as bits 4..5 */
    uint32_t u[3], s[2], m[2];
    memcpy(u, packed, 12);
    s[0] = u[0] & 0x3f3f3f3fu;
    m[0] = u[1] & 0x3f3f3f3fu;
    s[1] = (u[2] & 0x0f0f0f0fu) | ((u[0] >> 6) & 0x03030303u) << 4;
    m[1] = ((u[2] >> 4) & 0x0f0f0f0fu) | ((u[1] >> 6) & 0x03030303u) << 4;
    memcpy(sc, s, 8);
    memcpy(mn, m, 8);
}

/* Sum over the sub-blocks of mins[j] * (sum of that sub-block's 32 activations), an exact integer. */
static inline int32_t k4_min_sum(const uint8_t mn[8], const int16_t *bsums) {
    int32_t s = 0;
    for (int j = 0; j < 8; j++) s += (int32_t)mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
    return s;
}

/* Lanes of 32 unsigned weight bytes q (<= 63) times 32 activations, scaled by one int16 scale. */
static inline __m256i k_lanes(__m256i q, const int8_t *a, int16_t scale) {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, mf_x86_load(a)), _mm256_set1_epi16(scale));
}

/* Q4_K/Q5_K super-block lanes: sub-blocks 2c and 2c+1 are the low and high nibbles of qs chunk c;
 * Q5_K's qh gives the fifth bits (bit 2c / 2c+1 of qh[k] for value k); NULL for Q4_K. */
static inline __m256i k4_sum(const uint8_t *qs, const uint8_t *qh, const int8_t *a, const uint8_t sc[8]) {
    __m256i sum = _mm256_setzero_si256();
    const __m256i hbits = qh ? mf_x86_load(qh) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i bits = mf_x86_load(qs + 32 * c);
        __m256i lo = _mm256_and_si256(bits, _mm256_set1_epi8(0x0F));
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0F));
        if (qh) {
            lo = _mm256_or_si256(
                lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 2 * c), 4), _mm256_set1_epi8(0x10)));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hbits, 2 * c + 1), 4),
                                                      _mm256_set1_epi8(0x10)));
        }
        sum = _mm256_add_epi32(
            sum, _mm256_add_epi32(k_lanes(lo, a + 64 * c, sc[2 * c]), k_lanes(hi, a + 64 * c + 32, sc[2 * c + 1])));
    }
    return sum;
}

/* Q4_K keeps its minimums in four float lanes: lane m gets fma(dmin, mins[2m] * S[2m] +
 * mins[2m+1] * S[2m+1]) with S[j] the activation sum of sub-block j; (m0+m2) + (m1+m3) at the end. */
static inline void st_q4_K(const mf_block_q4_K *w, const mf_block_q8_K *a, ord_state *st) {
    const float d = a->d * mf_x86_h2f(w->d), dmin = -a->d * mf_x86_h2f(w->dmin);
    uint8_t sc[8], mn[8];
    k4_scales(w->scales, sc, mn);
    const int16_t *bs = a->bsums;
    int32_t m4[4];
    for (int m = 0; m < 4; m++)
        m4[m] =
            (int32_t)mn[2 * m] * (bs[4 * m] + bs[4 * m + 1]) + (int32_t)mn[2 * m + 1] * (bs[4 * m + 2] + bs[4 * m + 3]);
    st->accm = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(_mm_loadu_si128((const __m128i *)m4)), st->accm);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(k4_sum(w->qs, NULL, a->qs, sc)), st->acc);
}
static inline float fin_q4_K(const ord_state *st) {
    __m128 m = _mm_add_ps(st->accm, _mm_movehl_ps(st->accm, st->accm));
    m = _mm_add_ss(m, _mm_movehdup_ps(m));
    return mf_x86_hsum8(st->acc) + _mm_cvtss_f32(m);
}
ORDERED_DOT(dot_q4_K, mf_block_q4_K, mf_block_q8_K, 256, st_q4_K, fin_q4_K)

static inline void st_q5_K(const mf_block_q5_K *w, const mf_block_q8_K *a, ord_state *st) {
    const float d = a->d * mf_x86_h2f(w->d), dmin = -a->d * mf_x86_h2f(w->dmin);
    uint8_t sc[8], mn[8];
    k4_scales(w->scales, sc, mn);
    st->s = fmaf(dmin, (float)k4_min_sum(mn, a->bsums), st->s);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(k4_sum(w->qs, w->qh, a->qs, sc)), st->acc);
}
ORDERED_DOT(dot_q5_K, mf_block_q5_K, mf_block_q8_K, 256, st_q5_K, fin_acc_s)

/* The int16 scales of half j's eight sub-blocks in both 128-bit lanes (s16), spread for group v:
 * scale 2v over the low lane and 2v+1 over the high lane (bytes 0..15 and 16..31 of its 32 values). */
static inline __m256i q6_half_scales(__m128i sc8, int j) {
    return _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(j ? _mm_unpackhi_epi64(sc8, sc8) : sc8));
}
static inline __m256i q6_group_scales(__m256i s16, int v) {
    const char lo = (char)(4 * v), hi = (char)(4 * v + 2);
    const __m256i pick = _mm256_setr_epi8(lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo, lo + 1, lo,
                                          lo + 1, lo, lo + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1, hi, hi + 1,
                                          hi, hi + 1, hi, hi + 1, hi, hi + 1);
    return _mm256_shuffle_epi8(s16, pick);
}

/* Q6_K: unsigned 6-bit q against the activations, minus 32 * sum(scale * activation) taken per
 * 32 consecutive values (lane p gets values 32p..32p+31 of the super-block, from bsums). */
static inline void st_q6_K(const mf_block_q6_K *w, const mf_block_q8_K *a, ord_state *st) {
    const float d = a->d * mf_x86_h2f(w->d);
    /* the 16 scales as int16; the offsets 32 * (S[2p] sc[2p] + S[2p+1] sc[2p+1]) in lane p */
    const __m128i sc8 = _mm_loadu_si128((const __m128i *)w->scales);
    const __m256i off = _mm256_slli_epi32(
        _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), _mm256_cvtepi8_epi16(sc8)), 5);
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < 2; j++) {
        const __m256i s16 = q6_half_scales(sc8, j);
        __m256i q[4];
        mf_x86_q6_half(w, j, q);
        for (int v = 0; v < 4; v++) {
            const __m256i p16 = _mm256_maddubs_epi16(q[v], mf_x86_load(a->qs + 128 * j + 32 * v));
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p16, q6_group_scales(s16, v)));
        }
    }
    sum = _mm256_sub_epi32(sum, off);
    st->acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sum), st->acc);
}
ORDERED_DOT(dot_q6_K, mf_block_q6_K, mf_block_q8_K, 256, st_q6_K, fin_acc)

/* ---- llama.cpp's repacked Q4_0 / Q4_K (8 weight rows interleaved) ----
 * Each output is one float lane: per block, fma(exact integer block sum, d_w * d_a, acc); Q4_K
 * keeps its minimums in a second chain, fma(exact sum of mins * activation sums, dmin_w * d_a),
 * and returns acc - acc_min, both chains stepped once per 64 values (a pair of sub-blocks), as
 * llama.cpp's GEMM steps each token row (cpu_dot_order.h: that order for every token). */
static inline void st_q4_0_rp(const mf_block_q4_0 *w, const mf_block_q8_0 *a, ord_state *st) {
    const __m256i q = _mm256_sub_epi8(mf_x86_nibbles32(w->qs), _mm256_set1_epi8(8));
    st->s = fmaf((float)mf_x86_hsum8_i32(lanes_ss(q, mf_x86_load(a->qs))), _mm256_cvtss_f32(dprod(w, a)), st->s);
}
ORDERED_DOT(dot_q4_0_rp, mf_block_q4_0, mf_block_q8_0, 32, st_q4_0_rp, fin_s)

/* Q8_0's one-chain order (mf_cpu_dot_q8_0_rp_ref; cpu_dot_order.h): the float steps of st_q4_0_rp
 * over the exact signed products. */
static inline void st_q8_0_rp(const mf_block_q8_0 *w, const mf_block_q8_0 *a, ord_state *st) {
    st->s = fmaf((float)mf_x86_hsum8_i32(lanes_ss(mf_x86_load(w->qs), mf_x86_load(a->qs))), _mm256_cvtss_f32(dprod(w, a)),
                 st->s);
}
ORDERED_DOT(dot_q8_0_rp, mf_block_q8_0, mf_block_q8_0, 32, st_q8_0_rp, fin_s)

/* Eight rows of the repacked Q4_0 order at once: lane r of acc is row r's chain, stepped per block by
 * fma((float)block sum, d_w * d_a, acc), exactly st_q4_0_rp's float steps. The integer block sums
 * are exact, so they may be formed in any order: sum((q - 8) * a) = sum(q * a) - 8 * sum(a), with the
 * nibbles q (0..15) as maddubs' unsigned operand. One 32-bit lane per row, as the AVX2 GEMM holds
 * them (gemm_q4_0_avx2.c): per block the eight rows' sixteen bytes are transposed in registers into
 * four vectors, lane r holding dword j of row r, each split into its low nibbles (values 4j..4j+3)
 * and high ones (16 + 4j..): eight steps, each a maddubs against four activation bytes broadcast,
 * added in int16 (a step is at most 2 * 15 * 128 = 3840, eight of them 30720 < 32767), then one
 * madd by ones leaves row r's sum(q * a) in lane r: no horizontal reduction per token. */
/* Four blocks' half-float scales packed in a u64 (first in the low word), by scalar loads and shifts:
 * eight pinsrw would be a long dependent chain, a gather through memory a store-forwarding stall. */
static inline long long halves4(const mf_block_q4_0 *a, const mf_block_q4_0 *b, const mf_block_q4_0 *c,
                                const mf_block_q4_0 *d) {
    uint16_t h0, h1, h2, h3;
    memcpy(&h0, &a->d, 2), memcpy(&h1, &b->d, 2), memcpy(&h2, &c->d, 2), memcpy(&h3, &d->d, 2);
    return (long long)((uint64_t)h0 | (uint64_t)h1 << 16 | (uint64_t)h2 << 32 | (uint64_t)h3 << 48);
}

/* Lanes [r0 r1 r2 r3 | r0 r1 r2 r3]: each 128-bit half's four lanes of rows a..d summed, by unpacks
 * and adds (cheaper than the equivalent two levels of hadd). */
static inline __m256i sum4_rows(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    const __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

/* Against nt (1..4) activation rows: the eight rows' nibbles and scales are loaded and transposed
 * once per block, then every token takes the integer and float steps above. Eight rows advancing 18
 * bytes each per block defeat the hardware prefetchers (measured: half the bandwidth of one row at
 * a time), so the eight rows that follow are prefetched, which lie 8 rows ahead when rows are
 * contiguous (ws = row bytes), linearly: 8 * 18 bytes per block. A prefetch past the weights is
 * harmless (it never faults). The scales go straight into a register (a gather through memory,
 * eight 2-byte stores read back as one 16-byte load, stalls on store forwarding). aux: the
 * activation rows carry their corrections and float scales (mf_cpu_q4_0_aux); else each token's
 * correction is formed per block. */
static inline __attribute__((always_inline)) void q4_0_rp_x8_n(const bool aux, const int nt, int64_t n,
                                                                const uint8_t *wb, size_t ws, const uint8_t *a,
                                                                size_t as, float *out, size_t os) {
    const size_t aux_at = mf_cpu_q4_0_aux_offset(n);
    const __m256i ones16 = _mm256_set1_epi16(1), ones8 = _mm256_set1_epi8(1), m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[4];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        {
            const char *p = (const char *)wb + 8 * ws + (size_t)i * 8 * sizeof(mf_block_q4_0);
            _mm_prefetch(p, _MM_HINT_T0);
            _mm_prefetch(p + 64, _MM_HINT_T0);
            _mm_prefetch(p + 128, _MM_HINT_T0);
        }
        const mf_block_q4_0 *x[8];
        for (int r = 0; r < 8; r++) x[r] = (const mf_block_q4_0 *)(wb + (size_t)r * ws) + i;
        /* z[j]: row j in the low half, row 4 + j in the high one; then d[k] lane r = dword k of row r */
        __m256i z[8], d[8];
        for (int j = 0; j < 4; j++)
            z[j] = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)x[4 + j]->qs), _mm_loadu_si128((const __m128i *)x[j]->qs));
        {
            const __m256i t0 = _mm256_unpacklo_epi32(z[0], z[1]), t1 = _mm256_unpackhi_epi32(z[0], z[1]);
            const __m256i t2 = _mm256_unpacklo_epi32(z[2], z[3]), t3 = _mm256_unpackhi_epi32(z[2], z[3]);
            d[0] = _mm256_unpacklo_epi64(t0, t2), d[1] = _mm256_unpackhi_epi64(t0, t2);
            d[2] = _mm256_unpacklo_epi64(t1, t3), d[3] = _mm256_unpackhi_epi64(t1, t3);
        }
        __m256i q[8];
        for (int k = 0; k < 4; k++) {
            q[k] = _mm256_and_si256(d[k], m4);
            q[4 + k] = _mm256_and_si256(_mm256_srli_epi16(d[k], 4), m4);
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_set_epi64x(halves4(x[4], x[5], x[6], x[7]), halves4(x[0], x[1], x[2], x[3])));
        for (int t = 0; t < nt; t++) {
            const uint8_t *at = a + (size_t)t * as;
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)at + i;
            __m256i s16 = _mm256_setzero_si256();
            for (int k = 0; k < 8; k++) s16 = _mm256_adds_epi16(s16, _mm256_maddubs_epi16(q[k], mf_avx2_bcast4(ab->qs + 4 * k)));
            __m256i sum = _mm256_madd_epi16(s16, ones16);
            int32_t c;
            float dav;
            if (aux) {
                mf_cpu_q4_0_aux_get(at + aux_at, n / 32, i, &c, &dav);
            } else {
                c = -8 * mf_x86_hsum8_i32(_mm256_madd_epi16(_mm256_maddubs_epi16(ones8, mf_x86_load(ab->qs)), ones16));
                dav = mf_x86_h2f(ab->d);
            }
            sum = _mm256_add_epi32(sum, _mm256_set1_epi32(c));
            const __m256 dd = _mm256_mul_ps(dw, _mm256_set1_ps(dav));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), dd, acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(out + (size_t)t * os, acc[t]);
}

static void dot_q4_0_rp_x8(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    q4_0_rp_x8_n(false, 1, n, w, ws, a, 0, out, 0);
}

#define CALL_Q4_0_RP(k) q4_0_rp_x8_n(true, k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot_q4_0_rp_x8n, CALL_Q4_0_RP)
#undef CALL_Q4_0_RP

/* The sub-block sums S[j] = bsums[2j] + bsums[2j+1] of a Q8_K block, as int16 lanes 0..7. */
static inline __m128i q8_K_sub_sums(const mf_block_q8_K *a) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)a->bsums);
    return _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
}

/* isum_c (below) in lane c of the return and msum_c in lane c of *msum, for c = 0..3, exact; s8:
 * q8_K_sub_sums(a). The four pairs' lane vectors are reduced together (sum4_rows). */
static inline __m128i q4_K_rp_sums(const mf_block_q4_K *w, const mf_block_q8_K *a, __m128i s8, __m128i *msum) {
    uint8_t sc[8], mn[8];
    k4_scales(w->scales, sc, mn);
    /* the eight scales as 16-bit lanes, each sub-block's spread over a vector by one shuffle (where
     * eight broadcasts from general registers took two operations each) */
    const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)sc)));
    __m256i l[4];
    for (int c = 0; c < 4; c++) {
        const __m256i bits = mf_x86_load(w->qs + 32 * c);
        const __m256i lo = _mm256_and_si256(bits, _mm256_set1_epi8(0x0F));
        const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0F));
        const __m256i s_lo = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c))));
        const __m256i s_hi = _mm256_shuffle_epi8(sc16, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
        l[c] = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(lo, mf_x86_load(a->qs + 64 * c)), s_lo),
                                _mm256_madd_epi16(_mm256_maddubs_epi16(hi, mf_x86_load(a->qs + 64 * c + 32)), s_hi));
    }
    const __m256i r = sum4_rows(l[0], l[1], l[2], l[3]); /* [c0 c1 c2 c3 | c0 c1 c2 c3] */
    *msum = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn)), s8); /* pairs by madd */
    return _mm_add_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* Per pair c of sub-blocks: isum_c = sc[2c] * D[2c] + sc[2c+1] * D[2c+1] (D[j]: sub-block j's
 * nibbles times its activations) and msum_c = mn[2c] * S[2c] + mn[2c+1] * S[2c+1] (S[j]: its
 * activation sum), exact, then s = fma(isum_c, d, s), sm = fma(msum_c, dm, sm) for c = 0..3 (the
 * twin: mf_cpu_dot_q4_K_rp_ref). */
static inline void st_q4_K_rp(const mf_block_q4_K *w, const mf_block_q8_K *a, ord_state *st) {
    __m128i mi;
    const __m128 isum = _mm_cvtepi32_ps(q4_K_rp_sums(w, a, q8_K_sub_sums(a), &mi));
    const __m128 msum = _mm_cvtepi32_ps(mi);
    const float d = mf_x86_h2f(w->d) * a->d, dm = mf_x86_h2f(w->dmin) * a->d;
    float is[4], ms[4];
    _mm_storeu_ps(is, isum), _mm_storeu_ps(ms, msum);
    for (int c = 0; c < 4; c++) {
        st->s = fmaf(is[c], d, st->s);
        st->sm = fmaf(ms[c], dm, st->sm);
    }
}
ORDERED_DOT(dot_q4_K_rp, mf_block_q4_K, mf_block_q8_K, 256, st_q4_K_rp, fin_s_sm)

/* ---- eight plain-order rows against one activation row (dot8, decode) ----
 * Q8_0 and Q5_0: row r keeps st_q8_0's / st_q5_0's float steps in its own eight-lane accumulator;
 * the eight chains run side by side (one dependent fma chain per row stalls on its latency), the
 * activation block and its scale are loaded once for the eight rows, the rows' eight weight scales
 * converted in one instruction. Eight rows advancing a block at a time defeat the hardware
 * prefetchers, so a later group of eight rows is prefetched linearly (rows contiguous: ws = row
 * bytes), 8 * block bytes per block: the group after next where a group is under 8 KB (a 896-wide
 * model), else the next. A prefetch past the weights never faults. */
static inline size_t dot8_ahead(size_t ws) { return 8 * ws < 8192 ? 16 * ws : 8 * ws; }

static inline __m256 scales8_avx2(const uint8_t *w, size_t ws, size_t bi) {
    uint64_t lo = 0, hi = 0;
    for (int r = 0; r < 4; r++) {
        uint16_t x, y;
        memcpy(&x, w + (size_t)r * ws + bi, 2), memcpy(&y, w + (size_t)(r + 4) * ws + bi, 2);
        lo |= (uint64_t)x << 16 * r, hi |= (uint64_t)y << 16 * r;
    }
    return _mm256_cvtph_ps(_mm_set_epi64x((long long)hi, (long long)lo));
}

/* The float steps of eight Q4_K rows for one token and super-block: isum[r] / msum[r] (row r's four
 * pair sums, q4_K_rp_sums) transposed so that lane r holds row r, then s = fma(isum_c, d, s) and
 * sm = fma(msum_c, dm, sm) for c = 0..3, each row's chain in its lane (st_q4_K_rp's steps). */
static inline __attribute__((always_inline)) void q4_K_rows_step(const __m128i *isum, const __m128i *msum, __m256 d,
                                                                  __m256 dm, __m256 *s, __m256 *sm) {
    __m256i is[4], ms[4]; /* rows r and r + 4: [row r's c0..c3 | row r + 4's] */
    for (int r = 0; r < 4; r++) {
        is[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(isum[r]), isum[r + 4], 1);
        ms[r] = _mm256_inserti128_si256(_mm256_castsi128_si256(msum[r]), msum[r + 4], 1);
    }
    __m256i vi[4], vm[4]; /* 4 x 4 transposes in each half: v[c] lane r = pair c of row r */
    for (int k = 0; k < 2; k++) {
        const __m256i *x = k ? ms : is;
        __m256i *v = k ? vm : vi;
        const __m256i t0 = _mm256_unpacklo_epi32(x[0], x[1]), t1 = _mm256_unpackhi_epi32(x[0], x[1]);
        const __m256i t2 = _mm256_unpacklo_epi32(x[2], x[3]), t3 = _mm256_unpackhi_epi32(x[2], x[3]);
        v[0] = _mm256_unpacklo_epi64(t0, t2), v[1] = _mm256_unpackhi_epi64(t0, t2);
        v[2] = _mm256_unpacklo_epi64(t1, t3), v[3] = _mm256_unpackhi_epi64(t1, t3);
    }
    for (int c = 0; c < 4; c++) {
        *s = _mm256_fmadd_ps(_mm256_cvtepi32_ps(vi[c]), d, *s);
        *sm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(vm[c]), dm, *sm);
    }
}

/* Eight rows of the repacked Q4_K order (st_q4_K_rp) against one activation row: each row's exact
 * pair sums are formed as the one-row dot forms them, transposed so that lane r holds row r, and
 * the eight rows' chains step together, s and sm each one register: per super-block four fmas for
 * eight rows where the one-row dot waits on a chain of four scalar fmas per row. The rows are
 * prefetched as the other dot8s do (the group after next, linearly), but into L2: eighteen lines
 * per super-block into L1 stall on the miss buffers (Zen 5, AVX2 level, bench_gemm --cold
 * --threads 2 q4_k 18944 3584 1: 2.0 ms, against 1.2 into L2 and 1.2-1.6 for the one-row dot;
 * 3584 x 18944: 1.1-1.2 against 1.5; one thread, weights in L3: 2.12 against 2.44). */
static void dot_q4_K_rp_x8(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    const uint8_t *wb = w;
    const mf_block_q8_K *ab = a;
    const size_t bs = sizeof(mf_block_q4_K);
    const size_t ahead = dot8_ahead(ws);
    const int lines = (int)((8 * bs + 63) / 64);
    __m256 s = _mm256_setzero_ps(), sm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const char *pf = (const char *)wb + ahead + (size_t)i * 8 * bs;
        for (int l = 0; l < lines; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T1);
        const mf_block_q8_K *y = ab + i;
        const size_t bi = (size_t)i * bs;
        const __m128i s8 = q8_K_sub_sums(y);
        const __m256 ad = _mm256_set1_ps(y->d);
        const __m256 d = _mm256_mul_ps(scales8_avx2(wb, ws, bi + offsetof(mf_block_q4_K, d)), ad);
        const __m256 dm = _mm256_mul_ps(scales8_avx2(wb, ws, bi + offsetof(mf_block_q4_K, dmin)), ad);
        __m128i isum[8], msum[8];
        for (int r = 0; r < 8; r++)
            isum[r] = q4_K_rp_sums((const mf_block_q4_K *)(wb + (size_t)r * ws) + i, y, s8, &msum[r]);
        q4_K_rows_step(isum, msum, d, dm, &s, &sm);
    }
    _mm256_storeu_ps(out, _mm256_sub_ps(s, sm));
}

/* The same against nt (1..4) activation rows: each super-block's eight rows are unpacked once (their
 * nibbles, scales and minimums, as q4_K_rp_sums forms them) for every token, then each token takes
 * q4_K_rp_sums' integer steps and dot_q4_K_rp_x8's float steps, its s and sm one register each.
 * Two tokens take it rather than the per-call GEMM, whose panels suit many tokens (Zen 3, the
 * builds alternating: bench_gemm --threads 1 q4_k 1536 1024 2, in cache, 23.3-23.8 -> 26.3-26.4
 * GMAC/s; --cold --threads 2 4864 1024 2, 0.32-0.35 -> 0.19-0.33 ms); from three tokens the GEMM
 * was level or ahead (4 tokens in cache 35 against 31 GMAC/s). */
static inline __attribute__((always_inline)) void q4_K_rp_x8_n(const int nt, int64_t n, const uint8_t *wb, size_t ws,
                                                                const uint8_t *a, size_t as, float *out, size_t os) {
    const size_t bs = sizeof(mf_block_q4_K);
    const size_t ahead = dot8_ahead(ws);
    const int lines = (int)((8 * bs + 63) / 64);
    __m256 s[4], sm[4];
    for (int t = 0; t < nt; t++) s[t] = sm[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const char *pf = (const char *)wb + ahead + (size_t)i * 8 * bs;
        for (int l = 0; l < lines; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T1);
        const size_t bi = (size_t)i * bs;
        const __m256 dw = scales8_avx2(wb, ws, bi + offsetof(mf_block_q4_K, d));
        const __m256 dmw = scales8_avx2(wb, ws, bi + offsetof(mf_block_q4_K, dmin));
        __m256i q[8][8]; /* row r: [2c] the low nibbles of qs chunk c, [2c + 1] the high ones */
        uint8_t sc[8][8], mn[8][8];
        for (int r = 0; r < 8; r++) {
            const mf_block_q4_K *x = (const mf_block_q4_K *)(wb + (size_t)r * ws) + i;
            k4_scales(x->scales, sc[r], mn[r]);
            for (int c = 0; c < 4; c++) {
                const __m256i bits = mf_x86_load(x->qs + 32 * c);
                q[r][2 * c] = _mm256_and_si256(bits, _mm256_set1_epi8(0x0F));
                q[r][2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), _mm256_set1_epi8(0x0F));
            }
        }
        for (int t = 0; t < nt; t++) {
            const mf_block_q8_K *y = (const mf_block_q8_K *)(a + (size_t)t * as) + i;
            const __m128i s8 = q8_K_sub_sums(y);
            const __m256 ad = _mm256_set1_ps(y->d);
            const __m256 d = _mm256_mul_ps(dw, ad), dm = _mm256_mul_ps(dmw, ad);
            __m128i isum[8], msum[8];
            for (int r = 0; r < 8; r++) {
                __m256i l[4];
                for (int c = 0; c < 4; c++)
                    l[c] = _mm256_add_epi32(k_lanes(q[r][2 * c], y->qs + 64 * c, sc[r][2 * c]),
                                            k_lanes(q[r][2 * c + 1], y->qs + 64 * c + 32, sc[r][2 * c + 1]));
                const __m256i rs = sum4_rows(l[0], l[1], l[2], l[3]);
                isum[r] = _mm_add_epi32(_mm256_castsi256_si128(rs), _mm256_extracti128_si256(rs, 1));
                msum[r] = _mm_madd_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)mn[r])), s8);
            }
            q4_K_rows_step(isum, msum, d, dm, &s[t], &sm[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(out + (size_t)t * os, _mm256_sub_ps(s[t], sm[t]));
}

#define CALL_Q4_K_RP(k) q4_K_rp_x8_n(k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot_q4_K_rp_x8n, CALL_Q4_K_RP)
#undef CALL_Q4_K_RP

/* The signed weight bytes of a Q8_0 or Q5_0 block, as st_q8_0 / st_q5_0 form them. */
static inline __m256i signed_w(bool q5, const uint8_t *b) {
    if (!q5) return mf_x86_load(((const mf_block_q8_0 *)b)->qs);
    const mf_block_q5_0 *x = (const mf_block_q5_0 *)b;
    return mf_x86_q5_0_signed32(x->qs, x->qh);
}

/* Eight rows of Q8_0's one-chain order against nt (1..4) activation rows: per token and block each
 * row's eight i32 lanes (|w| by sign(a, w)) are reduced together, four rows at a time (sum4_rows),
 * so that lane r holds row r's exact block sum, and the eight rows' chains step as one register,
 * fma(sum, d_w * d_a, acc): st_q8_0_rp's float steps. The weight bytes come from L1 again for each
 * token after the first. The group of eight rows after next is prefetched linearly, 8 * block bytes
 * per block. */
static inline __attribute__((always_inline)) void q8_0_rp_x8_n(const int nt, int64_t n, const uint8_t *w, size_t ws,
                                                                const uint8_t *a, size_t as, float *out, size_t os) {
    const size_t bs = sizeof(mf_block_q8_0);
    const size_t ahead = dot8_ahead(ws);
    const int lines = (int)((8 * bs + 63) / 64);
    __m256 acc[4];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++) {
        const char *pf = (const char *)w + ahead + (size_t)i * 8 * bs;
        for (int l = 0; l < lines; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        const __m256 dw = scales8_avx2(w, ws, (size_t)i * bs);
        for (int t = 0; t < nt; t++) {
            const mf_block_q8_0 *ab = (const mf_block_q8_0 *)(a + (size_t)t * as) + i;
            const __m256i av = mf_x86_load(ab->qs);
            __m256i h[2];
            for (int g = 0; g < 2; g++) {
                __m256i l[4];
                for (int r = 0; r < 4; r++) {
                    const __m256i x = mf_x86_load(((const mf_block_q8_0 *)(w + (size_t)(4 * g + r) * ws) + i)->qs);
                    l[r] = lanes_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(av, x));
                }
                h[g] = sum4_rows(l[0], l[1], l[2], l[3]); /* [rows 4g..4g+3: low halves | high halves] */
            }
            const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(h[0], h[1], 0x20),
                                                 _mm256_permute2x128_si256(h[0], h[1], 0x31));
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(mf_x86_h2f(ab->d))),
                                     acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm256_storeu_ps(out + (size_t)t * os, acc[t]);
}

static void dot_q8_0_rp_x8(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    q8_0_rp_x8_n(1, n, w, ws, a, 0, out, 0);
}

#define CALL_Q8_0_RP(k) q8_0_rp_x8_n(k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot_q8_0_rp_x8n, CALL_Q8_0_RP)
#undef CALL_Q8_0_RP

/* The same dots a group of rows at a time: rg rows x nt tokens of accumulators stay in registers
 * while the group's rows pass block by block (8 x 4 chains at once do not fit sixteen registers, and
 * went through memory), the activation blocks read again from L1 for each group. The float steps are
 * st_q8_0's / st_q5_0's, the weight scale times the activation's as one float product. */
static inline __attribute__((always_inline)) void dot8n_signed32_rg(bool q5, const int nt, const int rg, int64_t n,
                                                                     const uint8_t *w, size_t ws, const uint8_t *a,
                                                                     size_t as, float *out, size_t os) {
    const size_t bs = q5 ? sizeof(mf_block_q5_0) : sizeof(mf_block_q8_0);
    const int64_t nb = n / 32;
    const size_t ahead = dot8_ahead(ws);
    const int lines = (int)((rg * bs + 63) / 64);
    for (int r0 = 0; r0 < 8; r0 += rg) {
        const uint8_t *wg = w + (size_t)r0 * ws;
        /* the group of eight rows after next, linearly, rg blocks' bytes a step */
        const char *pf = (const char *)w + ahead + (size_t)(r0 / rg) * (size_t)nb * rg * bs;
        __m256 acc[4][4];
        for (int r = 0; r < rg; r++)
            for (int t = 0; t < nt; t++) acc[r][t] = _mm256_setzero_ps();
        for (int64_t i = 0; i < nb; i++) {
            for (int l = 0; l < lines; l++) _mm_prefetch(pf + (size_t)i * rg * bs + 64 * l, _MM_HINT_T0);
            __m256i av[4];
            if (nt == 1) {
                /* one token: the rows' scales converted together and multiplied by the token's, both
                 * halves of a register holding the products, each row's spread by an in-lane shuffle
                 * (a conversion, a product and a broadcast per row had been a fifth of the work).
                 * bench_gemm --threads 1 --reps 3000 TYPE 1536 896 1 (Zen 3), alternating: Q8_0 0.053
                 * -> 0.048 ms, Q5_0 0.082 -> 0.080 */
                const mf_block_q8_0 *ab = (const mf_block_q8_0 *)a + i;
                const __m256i a0 = mf_x86_load(ab->qs);
                uint64_t hw = 0;
                for (int r = 0; r < rg; r++) {
                    uint16_t h;
                    memcpy(&h, wg + (size_t)r * ws + (size_t)i * bs, 2); /* d, each type's first field */
                    hw |= (uint64_t)h << 16 * r;
                }
                const __m128 dd = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)hw)), _mm_set1_ps(mf_x86_h2f(ab->d)));
                const __m256 d2 = _mm256_set_m128(dd, dd);
                for (int r = 0; r < rg; r++) {
                    const __m256i x = signed_w(q5, wg + (size_t)r * ws + (size_t)i * bs);
                    const __m256i l = lanes_us(_mm256_sign_epi8(x, x), _mm256_sign_epi8(a0, x));
                    const __m256 d = r == 0 ? _mm256_permute_ps(d2, 0x00) : r == 1 ? _mm256_permute_ps(d2, 0x55)
                                   : r == 2 ? _mm256_permute_ps(d2, 0xAA) : _mm256_permute_ps(d2, 0xFF);
                    acc[r][0] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc[r][0]);
                }
                continue;
            }
            /* two or more tokens: the scales, tokens' and rows', four halves to a conversion; each
             * row's products with the tokens' in one multiply, each product then broadcast from
             * memory (a load, no arithmetic): the same float products as dw * da one at a time.
             * bench_gemm --threads 1 q8_0 1536 896 (Zen 3), alternating: 4 tokens 0.178 -> 0.162
             * ms, 2 tokens 0.089 -> 0.085; Q5_0 at 4 tokens 0.226 -> 0.215 */
            uint64_t ha = 0, hw = 0;
            for (int t = 0; t < nt; t++) {
                const mf_block_q8_0 *ab = (const mf_block_q8_0 *)(a + (size_t)t * as) + i;
                av[t] = mf_x86_load(ab->qs);
                uint16_t h;
                memcpy(&h, &ab->d, 2);
                ha |= (uint64_t)h << 16 * t;
            }
            for (int r = 0; r < rg; r++) {
                uint16_t h;
                memcpy(&h, wg + (size_t)r * ws + (size_t)i * bs, 2); /* d, each type's first field */
                hw |= (uint64_t)h << 16 * r;
            }
            const __m128 da = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)ha));
            const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128((long long)hw));
            float dd[4][4];
            _mm_storeu_ps(dd[0], _mm_mul_ps(_mm_shuffle_ps(dw, dw, 0x00), da));
            if (rg > 1) _mm_storeu_ps(dd[1], _mm_mul_ps(_mm_shuffle_ps(dw, dw, 0x55), da));
            if (rg > 2) _mm_storeu_ps(dd[2], _mm_mul_ps(_mm_shuffle_ps(dw, dw, 0xAA), da));
            if (rg > 3) _mm_storeu_ps(dd[3], _mm_mul_ps(_mm_shuffle_ps(dw, dw, 0xFF), da));
            for (int r = 0; r < rg; r++) {
                const uint8_t *b = wg + (size_t)r * ws + (size_t)i * bs;
                const __m256i x = signed_w(q5, b), ax = _mm256_sign_epi8(x, x);
                for (int t = 0; t < nt; t++) {
                    const __m256i l = lanes_us(ax, _mm256_sign_epi8(av[t], x));
                    acc[r][t] = _mm256_fmadd_ps(_mm256_broadcast_ss(&dd[r][t]), _mm256_cvtepi32_ps(l), acc[r][t]);
                }
            }
        }
        for (int r = 0; r < rg; r++)
            for (int t = 0; t < nt; t++) out[(size_t)t * os + r0 + r] = mf_x86_hsum8(acc[r][t]);
    }
}

/* Q8_0 and Q5_0 against nt (1..4) activation rows, a group of rows at a time (four rows for one or
 * two tokens, two for three or four). AVX2 level on Zen 4, bench_gemm --cold --threads 2 q8_0
 * 151936 896 (a 0.5B model's output matrix), alternating: 1 token 6.7-8.2 -> 5.3-6.3 ms, 2 tokens
 * 7.7-8.1 -> 5.3-6.7, 3 tokens 8.6-9.9 -> 6.6-9.2, against the eight rows side by side (8 x nt
 * accumulators, from two tokens on in memory). Four tokens measured level or slower there by
 * groups of two rows, but on an AVX2-only Zen 3 (which runs these kernels; AVX-512 VNNI CPUs take
 * their own) the groups win with the weights from memory, alternating pairs: the same matrix
 * 9.1-12.0 -> 9.0-11.2 ms (median 11.9 -> 9.0), 4864 x 896 0.41-0.51 -> 0.30-0.39 ms, a four-token
 * 0.5B Q4_0 step's output matrix 11-16 -> 10-11 ms; Q5_0 level; in cache 3 % slower (32 against
 * 31 GMAC/s, 1536 x 896, one thread). */
static inline __attribute__((always_inline)) void dot8n_signed32_pick(bool q5, const int nt, int64_t n,
                                                                       const uint8_t *w, size_t ws, const uint8_t *a,
                                                                       size_t as, float *out, size_t os) {
    if (nt <= 2)
        dot8n_signed32_rg(q5, nt, 4, n, w, ws, a, as, out, os);
    else
        dot8n_signed32_rg(q5, nt, 2, n, w, ws, a, as, out, os);
}

/* Q4_1 and Q5_1 (st_q4_1 / st_q5_1) against nt (1..4) activation rows, in the same arrangement:
 * each row's unsigned codes formed once per block; per (row, token) the lanes' chain and, eight rows
 * to a register (lane r: row r, the same fmaf as the one-row dot's scalar), the minimums' chain. */
static inline __attribute__((always_inline)) void dot8n_min32_avx2(bool q5, const int nt, int64_t n,
                                                                    const uint8_t *w, size_t ws, const uint8_t *a,
                                                                    size_t as, float *out, size_t os) {
    const size_t bs = q5 ? sizeof(mf_block_q5_1) : sizeof(mf_block_q4_1);
    const size_t ahead = dot8_ahead(ws);
    const int lines = (int)((8 * bs + 63) / 64);
    __m256 acc[4][8], sm[4];
    for (int t = 0; t < nt; t++) {
        sm[t] = _mm256_setzero_ps();
        for (int r = 0; r < 8; r++) acc[t][r] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < n / 32; i++) {
        const char *pf = (const char *)w + ahead + (size_t)i * 8 * bs;
        for (int l = 0; l < lines; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        const size_t bi = (size_t)i * bs;
        const __m256 dw = scales8_avx2(w, ws, bi), mw = scales8_avx2(w, ws, bi + 2);
        float d[4][8];
        __m256i av[4];
        for (int t = 0; t < nt; t++) {
            const mf_block_q8_1 *ab = (const mf_block_q8_1 *)(a + (size_t)t * as) + i;
            av[t] = mf_x86_load(ab->qs);
            _mm256_storeu_ps(d[t], _mm256_mul_ps(dw, _mm256_set1_ps(mf_x86_h2f(ab->d))));
            sm[t] = _mm256_fmadd_ps(mw, _mm256_set1_ps(mf_x86_h2f(ab->s)), sm[t]);
        }
        for (int r = 0; r < 8; r++) {
            const uint8_t *b = w + (size_t)r * ws + bi;
            const __m256i q = q5 ? _mm256_or_si256(mf_x86_nibbles32(((const mf_block_q5_1 *)b)->qs), mf_x86_bit5_32(((const mf_block_q5_1 *)b)->qh))
                                 : mf_x86_nibbles32(((const mf_block_q4_1 *)b)->qs);
            for (int t = 0; t < nt; t++) {
                const __m256i l = lanes_us(q, av[t]);
                acc[t][r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&d[t][r]), _mm256_cvtepi32_ps(l), acc[t][r]);
            }
        }
    }
    for (int t = 0; t < nt; t++) {
        float s8[8];
        _mm256_storeu_ps(s8, sm[t]);
        for (int r = 0; r < 8; r++) out[(size_t)t * os + r] = mf_x86_hsum8(acc[t][r]) + s8[r];
    }
}

#define CALL_Q4_1(k) dot8n_min32_avx2(false, k, n, w, ws, a, as, out, os)
#define CALL_Q5_1(k) dot8n_min32_avx2(true, k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot_q4_1_x8n, CALL_Q4_1)
MF_CPU_DOT8N_BODIES(dot_q5_1_x8n, CALL_Q5_1)
#undef CALL_Q4_1
#undef CALL_Q5_1

static void dot_q4_1_x8(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_min32_avx2(false, 1, n, w, ws, a, 0, out, 0);
}
static void dot_q5_1_x8(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_min32_avx2(true, 1, n, w, ws, a, 0, out, 0);
}

#define CALL_Q8_0(k) dot8n_signed32_pick(false, k, n, w, ws, a, as, out, os)
#define CALL_Q5_0(k) dot8n_signed32_pick(true, k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot_q8_0_x8n, CALL_Q8_0)
MF_CPU_DOT8N_BODIES(dot_q5_0_x8n, CALL_Q5_0)
#undef CALL_Q8_0
#undef CALL_Q5_0

static void dot_q8_0_x8(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_signed32_pick(false, 1, n, w, ws, a, 0, out, 0);
}
static void dot_q5_0_x8(int64_t n, const void *w, size_t ws, const void *a, float *out) {
    dot8n_signed32_pick(true, 1, n, w, ws, a, 0, out, 0);
}

#define ORD_PAIR(fn)                                                                                                   \
    (mf_cpu_ordered_dots) { fn, fn##_x4, NULL, NULL, 0, false, NULL, false}

/* Q6_K (st_q6_K) for eight rows against nt (1..4) activation rows: each row's 6-bit values and its
 * scale vectors formed once per super-block for all nt tokens, each (row, token) output stepped as
 * st_q6_K steps it. Between the several-token GEMM, which repacks the file's blocks into panels on
 * every call, and a pass of the four-row dot per token, this reads each row once: Zen 3, 2 threads,
 * `bench_gemm --cold q6_k 8192 2048 T`, three alternations against the commit before (the GEMM from
 * 2 tokens), T = 2 / 3 / 4: 0.66-1.14 / 0.67-0.87 / 1.15-1.66 ms against 1.26-2.01 / 1.69-2.10 /
 * 2.04-2.34 (one token, the four-row dot: 0.53-0.59); from 5 tokens the GEMM. */
static inline __attribute__((always_inline)) void dot8n_q6_K_avx2(const int nt, int64_t n, const uint8_t *w, size_t ws,
                                                                   const uint8_t *a, size_t as, float *out, size_t os) {
    const size_t bs = sizeof(mf_block_q6_K), ahead = dot8_ahead(ws);
    const int lines = (int)((8 * bs + 63) / 64);
    __m256 acc[4][8];
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < 8; r++) acc[t][r] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 256; i++) {
        const char *pf = (const char *)w + ahead + (size_t)i * 8 * bs;
        for (int l = 0; l < lines; l++) _mm_prefetch(pf + 64 * l, _MM_HINT_T0);
        const mf_block_q8_K *ab[4];
        for (int t = 0; t < nt; t++) ab[t] = (const mf_block_q8_K *)(a + (size_t)t * as) + i;
        for (int r = 0; r < 8; r++) {
            const mf_block_q6_K *b = (const mf_block_q6_K *)(w + (size_t)r * ws) + i;
            const __m128i sc8 = _mm_loadu_si128((const __m128i *)b->scales);
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            __m256i sum[4];
            for (int t = 0; t < nt; t++) sum[t] = _mm256_setzero_si256();
            for (int j = 0; j < 2; j++) {
                const __m256i s16 = q6_half_scales(sc8, j);
                __m256i q[4];
                mf_x86_q6_half(b, j, q);
                for (int v = 0; v < 4; v++) {
                    const __m256i scv = q6_group_scales(s16, v);
                    for (int t = 0; t < nt; t++) {
                        const __m256i p16 = _mm256_maddubs_epi16(q[v], mf_x86_load(ab[t]->qs + 128 * j + 32 * v));
                        sum[t] = _mm256_add_epi32(sum[t], _mm256_madd_epi16(p16, scv));
                    }
                }
            }
            const float dw = mf_x86_h2f(b->d);
            for (int t = 0; t < nt; t++) {
                const __m256i off =
                    _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)ab[t]->bsums), sc16), 5);
                acc[t][r] = _mm256_fmadd_ps(_mm256_set1_ps(ab[t]->d * dw), _mm256_cvtepi32_ps(_mm256_sub_epi32(sum[t], off)),
                                            acc[t][r]);
            }
        }
    }
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < 8; r++) out[(size_t)t * os + r] = mf_x86_hsum8(acc[t][r]);
}

#define CALL_Q6_K(k) dot8n_q6_K_avx2(k, n, w, ws, a, as, out, os)
MF_CPU_DOT8N_BODIES(dot_q6_K_x8n, CALL_Q6_K)
#undef CALL_Q6_K

static mf_cpu_ordered_dots dots_avx2(mf_type t, int variant) {
    const mf_cpu_ordered_dots none = {NULL, NULL, NULL, NULL, 0, false, NULL, false};
    if (variant == MF_ORDER_REPACKED) {
        if (t == MF_TYPE_Q4_0) {
            /* dot8's per-block correction (-8 x the activation block's sum) costs a reduction per
             * eight rows; read from the side data, once per matmul */
            return (mf_cpu_ordered_dots){dot_q4_0_rp, dot_q4_0_rp_x4, dot_q4_0_rp_x8, dot_q4_0_rp_x8n, 4, true, NULL, true};
        }
        if (t == MF_TYPE_Q4_K)
            return (mf_cpu_ordered_dots){dot_q4_K_rp, dot_q4_K_rp_x4, dot_q4_K_rp_x8, dot_q4_K_rp_x8n, 2, false, NULL, false};
        if (t == MF_TYPE_Q8_0)
            return (mf_cpu_ordered_dots){dot_q8_0_rp, dot_q8_0_rp_x4, dot_q8_0_rp_x8, dot_q8_0_rp_x8n, 4, false, NULL, false};
        return none;
    }
    switch (t) {
    case MF_TYPE_Q4_0: return ORD_PAIR(dot_q4_0);
    case MF_TYPE_Q4_1: return (mf_cpu_ordered_dots){dot_q4_1, dot_q4_1_x4, dot_q4_1_x8, dot_q4_1_x8n, 4, false, NULL, false};
    case MF_TYPE_Q5_0: return (mf_cpu_ordered_dots){dot_q5_0, dot_q5_0_x4, dot_q5_0_x8, dot_q5_0_x8n, 4, false, NULL, false};
    case MF_TYPE_Q5_1: return (mf_cpu_ordered_dots){dot_q5_1, dot_q5_1_x4, dot_q5_1_x8, dot_q5_1_x8n, 4, false, NULL, false};
    case MF_TYPE_Q8_0: return (mf_cpu_ordered_dots){dot_q8_0, dot_q8_0_x4, dot_q8_0_x8, dot_q8_0_x8n, 4, false, NULL, false};
    case MF_TYPE_Q4_K: return ORD_PAIR(dot_q4_K);
    case MF_TYPE_Q5_K: return ORD_PAIR(dot_q5_K);
    case MF_TYPE_Q6_K: return (mf_cpu_ordered_dots){dot_q6_K, dot_q6_K_x4, NULL, dot_q6_K_x8n, 4, false, NULL, false};
    case MF_TYPE_IQ4_NL: return mf_cpu_ordered_dots_iq4_nl_avx2();
    default: return none;
    }
}

mf_cpu_ordered_dots mf_cpu_ordered_dots_avx2(mf_type t, int variant) { return dots_avx2(t, variant); }

/* ---- float kernels of attention and the FFN, in llama.cpp's AVX-512 order ----
 * exp: llama.cpp's vector exp (round x / ln2 to n with the 1.5 * 2^23 trick, reduce by ln2 split in
 * two, degree-5 polynomial, scale by 2^n), written per lane; |n| > 192 gives 0 or infinity. */
static inline float exp_ord(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         fmaf(0x1.ffffecp-1f, b, 1.0f));
    if (isnan(n)) return n; /* NaN in, NaN out, as the vector code */
    if (fabsf(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    /* j * 2^n rounded once, as vscalefps does: exact in double, then one rounding to float */
    const uint64_t bits = (uint64_t)((int64_t)n + 1023) << 52;
    double p2;
    memcpy(&p2, &bits, sizeof p2);
    return (float)((double)j * p2);
}

/* Sum of 16 floats as _mm512_reduce_add_ps adds them: halves, quarters, then pairs. */
static inline float reduce16(const float *a) {
    float t8[8], t4[4];
    for (int i = 0; i < 8; i++) t8[i] = a[i + 8] + a[i];
    for (int i = 0; i < 4; i++) t4[i] = t8[i + 4] + t8[i];
    return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

/* exp_ord on eight lanes: the same float steps lane by lane, j * 2^n formed in double (exact) and
 * rounded once to float, as the one-lane version's conversion. */
static inline __m256 exp_ord8(__m256 x) {
    const __m256 r = _mm256_set1_ps(0x1.8p23f);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(0x1.715476p+0f), r);
    const __m256 n = _mm256_sub_ps(z, r);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.7f7d1cp-20f),
                                      _mm256_fnmadd_ps(n, _mm256_set1_ps(0x1.62e4p-1f), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(0x1.0e4020p-7f), b, _mm256_set1_ps(0x1.573e2ep-5f)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(0x1.555e66p-3f), b, _mm256_set1_ps(0x1.fffdb6p-2f))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(0x1.ffffecp-1f), b, _mm256_set1_ps(1.0f)));
    /* 2^n as a double's bits: (n + 1023) << 52; lanes with |n| > 192 or NaN are replaced below */
    const __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(1023));
    const __m256d p0 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(e)), 52));
    const __m256d p1 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_cvtepi32_epi64(_mm256_extracti128_si256(e, 1)), 52));
    const __m128 y0 = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(j)), p0));
    const __m128 y1 = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(j, 1)), p1));
    __m256 y = _mm256_set_m128(y1, y0);
    const __m256 an = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 big = _mm256_cmp_ps(an, _mm256_set1_ps(192.0f), _CMP_GT_OQ);
    const __m256 pos = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_GT_OQ);
    y = _mm256_blendv_ps(y, _mm256_and_ps(pos, _mm256_set1_ps(INFINITY)), big);
    return _mm256_blendv_ps(y, n, _mm256_cmp_ps(n, n, _CMP_UNORD_Q));
}

float mf_cpu_exp_ord_ref(float x) { return exp_ord(x); }

void mf_cpu_swiglu_ord_ref(const float *a, const float *b, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) y[i] = a[i] / (1.0f + exp_ord(0.0f - a[i])) * b[i];
}

void mf_cpu_swiglu_ord_avx2(const float *a, const float *b, float *y, int64_t n) {
    const int64_t n8 = n & ~(int64_t)7;
    for (int64_t i = 0; i < n8; i += 8) {
        const __m256 x = _mm256_loadu_ps(a + i);
        const __m256 e = exp_ord8(_mm256_sub_ps(_mm256_setzero_ps(), x));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)),
                                              _mm256_loadu_ps(b + i)));
    }
    mf_cpu_swiglu_ord_ref(a + n8, b + n8, y + n8, n - n8);
}

/* x . y: four 16-lane accumulators over steps of 64, combined (0+2, 1+3, then 0+1) and reduced;
 * a tail below 64 is added in order with fma. */
float mf_cpu_dot_f32_ord_avx2(const float *x, const float *y, int64_t n) {
    float acc[4][16] = {{0}};
    const int64_t np = n & ~(int64_t)63;
    for (int64_t i = 0; i < np; i += 64)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 16; l++) acc[j][l] = fmaf(x[i + 16 * j + l], y[i + 16 * j + l], acc[j][l]);
    for (int l = 0; l < 16; l++) {
        acc[0][l] += acc[2][l];
        acc[1][l] += acc[3][l];
        acc[0][l] += acc[1][l];
    }
    float s = reduce16(acc[0]);
    for (int64_t i = np; i < n; i++) s = fmaf(x[i], y[i], s);
    return s;
}

/* e[c] = exp(x[c] - mx) in place; returns the sum in double of each 16-entry chunk's float sum
 * (entries past n count as zeros). */
double mf_cpu_softmax_exp_ord_avx2(float *x, int64_t n, float mx) {
    double sum = 0.0;
    const __m256 m = _mm256_set1_ps(mx);
    int64_t c0 = 0;
    for (; c0 + 16 <= n; c0 += 16) {
        float v[16];
        for (int h = 0; h < 2; h++) {
            const __m256 e = exp_ord8(_mm256_sub_ps(_mm256_loadu_ps(x + c0 + 8 * h), m));
            _mm256_storeu_ps(x + c0 + 8 * h, e);
            _mm256_storeu_ps(v + 8 * h, e);
        }
        sum += (double)reduce16(v);
    }
    for (; c0 < n; c0 += 16) {
        float v[16];
        for (int l = 0; l < 16; l++) {
            int64_t c = c0 + l;
            v[l] = c < n ? (x[c] = exp_ord(x[c] - mx)) : 0.0f;
        }
        sum += (double)reduce16(v);
    }
    return sum;
}

/* out[d] = sum_c p[c] * v_c[d] as llama.cpp's F32 GEMM over V^T adds it: lane c % 16 accumulates
 * its cells in order with fma, the 16 lanes are reduced at the end. acc: 16 * hd floats. */
void mf_cpu_pv_ord_avx2(const float *p, int64_t nc, const float *v, const int32_t *cells, size_t v_stride, int64_t hd,
                        float *acc, float *out) {
    memset(acc, 0, (size_t)(16 * hd) * sizeof(float));
    for (int64_t c = 0; c < nc; c++) {
        if (p[c] == 0.0f) continue;
        const float *vr = v + (size_t)cells[c] * v_stride;
        float *a = acc + (c & 15) * hd;
        for (int64_t d = 0; d < hd; d++) a[d] = fmaf(vr[d], p[c], a[d]);
    }
    for (int64_t d = 0; d < hd; d++) {
        float l[16];
        for (int k = 0; k < 16; k++) l[k] = acc[k * hd + d];
        out[d] = reduce16(l);
    }
}
