/* gemm_lanes_avx2.c: the AVX2 prefill GEMMs (see cpu_gemm.h) of the super-block formats whose
 * llama.cpp x86 order is eight int32 lanes per super-block: Q6_K, Q3_K, Q2_K and IQ4_XS. Each
 * output keeps its dot's float steps (Q6_K: st_q6_K in cpu_dot_order_avx2.c; Q2_K, Q3_K:
 * tile_q2_K_n, tile_q3_K_n in dot_k_avx2.c; IQ4_XS: tile_iq4_xs_n in dot_iq4_avx2.c): eight float
 * lanes, lane p taking per super-block acc_p = fma(d_a * d_w, (float)L_p, acc_p) (Q2_K after
 * acc_p = fma(-d_a * dmin_w, (float)M_p, acc_p), M_p = m[2p] S[2p] + m[2p+1] S[2p+1] with m its
 * minimums and S the Q8_K bsums), with L_p the exact sum, over the eight
 * 32-value groups g, of sc * q * a at values 32g + 4p..+3 (sc the scale of the 16 values they lie
 * in); then ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)). Since L_p is an exact integer,
 * any exact way of forming it gives the dot's bits:
 *   Q6_K: q unsigned 6-bit; vpmaddubsw of q against the activations, less
 *         32 * (S[2p] sc[2p] + S[2p+1] sc[2p+1]) (S: the Q8_K bsums).
 *   Q3_K: q signed (-4..3); vpmaddubsw of the activations plus 128 (unsigned: a ^ 0x80) against q,
 *         less the weight's constant C_p = 128 * sum over g of sc * (q's four values), formed when
 *         the panel is packed (a pair is at most 2 * 255 * 4: no saturation, a = -128 included).
 *   Q2_K: q unsigned 2-bit, as Q6_K's without the offset.
 *   IQ4_XS: q the table's signed values, one scale per 32 values; vpmaddubsw of |q| against the
 *         activations signed by q, as the dot pairs them.
 *
 * Eight weight rows per vector (one per 32-bit lane): for lane p and group g, one vpmaddubsw of the
 * rows' four q against the token's four activation bytes (broadcast) and one vpmaddwd by the rows'
 * (sc, sc) give the rows' part of L_p.
 *
 * Panel layout (per-thread scratch), per super-block of a slice: for group g and step p the vector
 * of the 8 rows' q at values 32g + 4p..+3 (64 vectors), the 16 vectors (sc[j], sc[j]), 8 vectors of
 * the offset's terms (Q6_K: (sc[2p], sc[2p+1]); Q3_K: C_p; Q2_K: (m[2p], m[2p+1])), then h2f(d) and
 * (Q2_K) h2f(dmin) of the 8 rows: 2880 bytes;
 * rows past the matrix are zeros. Slices of up to K6_SLICE super-blocks (20 KB) stay in L1 while a
 * chunk's tokens pass over them in tiles of up to three, each token's eight accumulators in scratch.
 * A tile loads each weight and scale vector once for its tokens, and a token's four activation bytes
 * of two lanes come from one 16-byte load spread by in-lane shuffles: a broadcast load for every
 * vpmaddubsw, one token at a time, had made the loads the bound (Zen 3, bench_gemm --threads 1 q6_k
 * 2048 2048 128, alternating: 10.9-11.4 -> 9.3-9.6 ms; two threads, 8192 x 2048 x 512 and its
 * transpose, 94-95 -> 80-82 ms). The rows in the dot's own layout (a row's 32 values against the
 * token's 32, no shuffle) ran level or 3 % slower: both are bound by the two multiplies per 32
 * products. */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"
#include "x86/x86_common.h"

#include <string.h>

enum {
    K6_BLOCK_BYTES = (64 + 16 + 8 + 2) * 32,
    K6_SLICE = 7,
    K6_TILE = 3,
};

/* The formats (a constant argument of the always-inline kernels below: one build each). */
typedef enum { F_Q6_K, F_Q3_K, F_IQ4_XS, F_Q2_K } lane_fmt;

static int64_t max_chunk(int64_t nb) { return mf_avx2_k_chunk((size_t)nb * sizeof(mf_block_q8_K)); }

static size_t scratch_size(int64_t K) {
    return (size_t)K6_SLICE * K6_BLOCK_BYTES + (size_t)max_chunk(K / 256) * 8 * 32;
}

/* Row r's 256 values of one super-block as eight vectors of 32 bytes (q[g]: group g, in value
 * order), its 16 scales (sc[j]: values 16j..16j+15) and its d (the half); Q2_K also its 16
 * minimums and dmin. */
static inline __attribute__((always_inline)) void unpack_q6_K(const mf_block_q6_K *b, __m256i q[8], int16_t sc[16],
                                                              uint16_t *d) {
    mf_x86_q6_half(b, 0, q);
    mf_x86_q6_half(b, 1, q + 4);
    for (int j = 0; j < 16; j++) sc[j] = b->scales[j];
    *d = b->d;
}

/* Q3_K: group 4h + k is bits 2k of qs[32h..], less 4 where bit 4h + k of hmask[l] is clear. */
static inline __attribute__((always_inline)) void unpack_q3_K(const mf_block_q3_K *b, __m256i q[8], int16_t sc[16],
                                                              uint16_t *d) {
    const __m256i m3 = _mm256_set1_epi8(3), b2 = _mm256_set1_epi8(4);
    const __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    for (int h = 0; h < 2; h++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        for (int k = 0; k < 4; k++) {
            const int bit = 4 * h + k;
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
            const __m256i set = bit >= 2 ? _mm256_srli_epi16(hm, bit - 2) : _mm256_slli_epi16(hm, 2 - bit);
            q[bit] = _mm256_sub_epi8(lo, _mm256_andnot_si256(set, b2));
        }
    }
    for (int j = 0; j < 16; j++) sc[j] = (int16_t)mf_q3_K_scale(b->scales, j);
    *d = b->d;
}

/* Q2_K: group 4h + k is bits 2k of qs[32h..]; scale j the low nibble of scales[j], its minimum
 * the high one. */
static inline __attribute__((always_inline)) void unpack_q2_K(const mf_block_q2_K *b, __m256i q[8], int16_t sc[16],
                                                              int16_t mn[16], uint16_t *d, uint16_t *dmin) {
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i bits = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * h));
        for (int k = 0; k < 4; k++) q[4 * h + k] = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * k), m3);
    }
    for (int j = 0; j < 16; j++) sc[j] = b->scales[j] & 0xF, mn[j] = b->scales[j] >> 4;
    *d = b->d;
    *dmin = b->dmin;
}

/* IQ4_XS: sub-block g's table values, its scale twice (both halves of the 32 values). */
static inline __attribute__((always_inline)) void unpack_iq4_xs(const mf_block_iq4_xs *b, __m256i q[8], int16_t sc[16],
                                                                uint16_t *d) {
    for (int g = 0; g < 8; g++) {
        q[g] = mf_x86_iq4nl32(b->qs + 16 * g);
        sc[2 * g] = sc[2 * g + 1] = (int16_t)mf_iq4_xs_scale(b, g);
    }
    *d = b->d;
}

/* Super-blocks [i0, i1) of rows [ob, ob + nr) (nr <= 8) into the panel layout. */
static inline __attribute__((always_inline)) void pack(const lane_fmt F, const mf_weight *w, int64_t ob, int nr,
                                                       int64_t i0, int64_t i1, uint8_t *panel, const uint8_t *ahead) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    const size_t bb = F == F_Q6_K   ? sizeof(mf_block_q6_K)
                      : F == F_Q3_K ? sizeof(mf_block_q3_K)
                      : F == F_Q2_K ? sizeof(mf_block_q2_K)
                                    : sizeof(mf_block_iq4_xs);
    for (int64_t i = i0; i < i1; i++, panel += K6_BLOCK_BYTES) {
        MF_GEMM_STREAM_AHEAD(ahead, i, 8 * bb);
        __m256i q[8][8]; /* [row][group] */
        int16_t sc[16][8], mn[16][8];
        uint16_t dh[8], dmh[8];
        for (int r = 0; r < 8; r++) {
            int16_t s[16], m[16] = {0};
            if (r >= nr) {
                for (int g = 0; g < 8; g++) q[r][g] = _mm256_setzero_si256();
                memset(s, 0, sizeof s);
                dh[r] = dmh[r] = 0;
            } else {
                const uint8_t *b = base + (size_t)r * w->row_bytes + (size_t)i * bb;
                if (F == F_Q6_K) unpack_q6_K((const mf_block_q6_K *)b, q[r], s, &dh[r]);
                if (F == F_Q3_K) unpack_q3_K((const mf_block_q3_K *)b, q[r], s, &dh[r]);
                if (F == F_IQ4_XS) unpack_iq4_xs((const mf_block_iq4_xs *)b, q[r], s, &dh[r]);
                if (F == F_Q2_K) unpack_q2_K((const mf_block_q2_K *)b, q[r], s, m, &dh[r], &dmh[r]);
            }
            for (int j = 0; j < 16; j++) sc[j][r] = s[j], mn[j][r] = m[j];
        }
        __m256i *p = (__m256i *)panel;
        for (int g = 0; g < 8; g++) {
            __m256i rows[8];
            for (int r = 0; r < 8; r++) rows[r] = q[r][g];
            mf_avx2_transpose8_i32(rows, p + 8 * g);
        }
        for (int j = 0; j < 16; j++) _mm256_store_si256(p + 64 + j, mf_avx2_pairs16(sc[j], sc[j]));
        if (F == F_Q6_K || F == F_Q2_K) {
            int16_t (*o)[8] = F == F_Q6_K ? sc : mn;
            for (int k = 0; k < 8; k++) _mm256_store_si256(p + 80 + k, mf_avx2_pairs16(o[2 * k], o[2 * k + 1]));
        }
        if (F == F_Q3_K) {
            /* C_p = 128 * sum_g sc * (the four q of lane p) */
            const __m256i ones = _mm256_set1_epi8(1);
            for (int k = 0; k < 8; k++) {
                __m256i c = _mm256_setzero_si256();
                for (int g = 0; g < 8; g++)
                    c = _mm256_add_epi32(c, _mm256_madd_epi16(_mm256_maddubs_epi16(ones, p[8 * g + k]),
                                                              p[64 + 2 * g + k / 4]));
                _mm256_store_si256(p + 80 + k, _mm256_slli_epi32(c, 7));
            }
        }
        _mm256_store_ps((float *)(p + 88), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh)));
        if (F == F_Q2_K) _mm256_store_ps((float *)(p + 89), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dmh)));
    }
}

/* Lanes P and P + 1 (P even: one scale half) of T tokens over one super-block: for each group g,
 * the two weight vectors and the scale vector are loaded once for the T tokens. */
#define K6_PAIR(P)                                                                                                     \
    do {                                                                                                               \
        __m256i l0a = _mm256_setzero_si256(), l0b = l0a, l1a = l0a, l1b = l0a, l2a = l0a, l2b = l0a;                   \
        for (int g = 0; g < 8; g++) {                                                                                  \
            const __m256i wa = _mm256_load_si256(pb + 8 * g + (P)), wb = _mm256_load_si256(pb + 8 * g + (P) + 1);      \
            const __m256i sc = _mm256_load_si256(pb + 64 + 2 * g + (P) / 4);                                           \
            const __m256i ua = F == F_IQ4_XS ? _mm256_abs_epi8(wa) : wa, ub = F == F_IQ4_XS ? _mm256_abs_epi8(wb) : wb; \
            const int o = 32 * g + 16 * ((P) / 4);                                                                     \
            K6_LANES(P, q0, l0a, l0b);                                                                                 \
            if (T > 1) K6_LANES(P, q1, l1a, l1b);                                                                      \
            if (T > 2) K6_LANES(P, q2, l2a, l2b);                                                                      \
        }                                                                                                              \
        k6_finish(F, T, pb, a, d, dm, st, i, (P), l0a, l1a, l2a);                                                      \
        k6_finish(F, T, pb, a, d, dm, st, i, (P) + 1, l0b, l1b, l2b);                                                  \
    } while (0)
/* One token's part of lanes P and P + 1: its bytes 16 * (P / 4)..+15 of group g in both halves of a
 * register, dwords P % 4 and P % 4 + 1 spread over the eight rows. */
#define K6_LANES(P, q, la, lb)                                                                                         \
    do {                                                                                                               \
        __m256i h_ = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((q) + o)));                       \
        if (F == F_Q3_K) h_ = _mm256_xor_si256(h_, _mm256_set1_epi8((char)0x80));                                      \
        const __m256i xa_ = _mm256_shuffle_epi32(h_, (P) % 4 * 0x55), xb_ = _mm256_shuffle_epi32(h_, ((P) % 4 + 1) * 0x55); \
        la = _mm256_add_epi32(la, _mm256_madd_epi16(k6_pairs(F, wa, ua, xa_), sc));                                   \
        lb = _mm256_add_epi32(lb, _mm256_madd_epi16(k6_pairs(F, wb, ub, xb_), sc));                                   \
    } while (0)

/* The int16 pair sums of the rows' q (u: |q| for IQ4_XS) against a token's bytes x (Q3_K: a ^ 0x80). */
static inline __attribute__((always_inline)) __m256i k6_pairs(const lane_fmt F, __m256i q, __m256i u, __m256i x) {
    if (F == F_Q3_K) return _mm256_maddubs_epi16(x, q);
    if (F == F_IQ4_XS) return _mm256_maddubs_epi16(u, _mm256_sign_epi8(x, q));
    return _mm256_maddubs_epi16(q, x);
}

/* Lane p of T tokens after a super-block's groups: the offset, then one fma per token into its
 * accumulator in st[t] (d[t]: d_a * d_w of the eight rows); Q2_K first the minimums' fma
 * (dm[t]: -d_a * dmin_w; the lane's m[2p] S[2p] + m[2p+1] S[2p+1]). */
static inline __attribute__((always_inline)) void k6_finish(const lane_fmt F, const int T, const __m256i *pb,
                                                            const mf_block_q8_K *const *a, const __m256 *d,
                                                            const __m256 *dm, __m256 *const *st, int64_t i, int p,
                                                            __m256i l0, __m256i l1, __m256i l2) {
    const __m256i mo = _mm256_load_si256(pb + 80 + p);
    for (int t = 0; t < T; t++) {
        __m256i l = t == 0 ? l0 : t == 1 ? l1 : l2;
        __m256 acc = _mm256_load_ps((const float *)(st[t] + p));
        if (F == F_Q6_K) l = _mm256_sub_epi32(l, _mm256_slli_epi32(_mm256_madd_epi16(mo, mf_avx2_bcast4(a[t][i].bsums + 2 * p)), 5));
        if (F == F_Q3_K) l = _mm256_sub_epi32(l, mo);
        if (F == F_Q2_K)
            acc = _mm256_fmadd_ps(dm[t], _mm256_cvtepi32_ps(_mm256_madd_epi16(mo, mf_avx2_bcast4(a[t][i].bsums + 2 * p))), acc);
        _mm256_store_ps((float *)(st[t] + p), _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(l), acc));
    }
}

/* T tokens (a[t]: their Q8_K rows) against super-blocks [i0, i1) of the panel, each token's eight
 * lanes' accumulators in st[t] (zeroed before the first slice), stepped as one token alone steps them. */
static inline __attribute__((always_inline)) void tile(const lane_fmt F, const int T, const uint8_t *panel, int64_t i0,
                                                       int64_t i1, const mf_block_q8_K *const *a, __m256 *const *st) {
    for (int64_t i = i0; i < i1; i++, panel += K6_BLOCK_BYTES) {
        const __m256i *pb = (const __m256i *)panel;
        const uint8_t *q0 = (const uint8_t *)a[0][i].qs, *q1 = T > 1 ? (const uint8_t *)a[1][i].qs : q0,
                      *q2 = T > 2 ? (const uint8_t *)a[2][i].qs : q0;
        const __m256 dw = _mm256_load_ps((const float *)(pb + 88));
        __m256 d[K6_TILE], dm[K6_TILE];
        for (int t = 0; t < T; t++) d[t] = _mm256_mul_ps(_mm256_broadcast_ss(&a[t][i].d), dw);
        if (F == F_Q2_K)
            for (int t = 0; t < T; t++)
                dm[t] = _mm256_mul_ps(_mm256_set1_ps(-a[t][i].d), _mm256_load_ps((const float *)(pb + 89)));
        K6_PAIR(0);
        K6_PAIR(2);
        K6_PAIR(4);
        K6_PAIR(6);
    }
}
#undef K6_PAIR
#undef K6_LANES

static inline __attribute__((always_inline)) void run(const lane_fmt F, const mf_weight *w, int64_t o0, int64_t o1,
                                                      const uint8_t *act, size_t act_row, int64_t nt, float *y,
                                                      size_t ldy, void *scratch) {
    const int64_t nb = w->ne[0] / 256, mc = max_chunk(nb);
    uint8_t *panel = scratch;
    __m256 *state = (__m256 *)(panel + (size_t)K6_SLICE * K6_BLOCK_BYTES);
    const int64_t n_slices = (nb + K6_SLICE - 1) / K6_SLICE, slice = (nb + n_slices - 1) / n_slices;
    for (int64_t tc = 0; tc < nt; tc += mc) {
        const int64_t n = MF_MIN(mc, nt - tc);
        for (int64_t ob = o0; ob < o1; ob += 8) {
            const int nr = (int)MF_MIN(8, o1 - ob);
            const __m256i mask = mf_avx2_row_mask(nr);
            const uint8_t *ahead = mf_gemm_ahead(w, ob, 8, o1, nt, 32);
            for (int64_t i0 = 0; i0 < nb; i0 += slice) {
                const int64_t i1 = MF_MIN(nb, i0 + slice);
                pack(F, w, ob, nr, i0, i1, panel, ahead);
                if (i0 == 0) memset(state, 0, (size_t)n * 8 * sizeof *state);
                for (int64_t t = 0; t < n; t += K6_TILE) {
                    const mf_block_q8_K *a[K6_TILE];
                    __m256 *st[K6_TILE];
                    const int T = (int)MF_MIN(K6_TILE, n - t);
                    for (int k = 0; k < T; k++) {
                        a[k] = (const mf_block_q8_K *)(act + (size_t)(tc + t + k) * act_row);
                        st[k] = state + 8 * (t + k);
                    }
                    switch (T) {
                    case 1: tile(F, 1, panel, i0, i1, a, st); break;
                    case 2: tile(F, 2, panel, i0, i1, a, st); break;
                    default: tile(F, 3, panel, i0, i1, a, st); break;
                    }
                }
            }
            for (int64_t t = 0; t < n; t++) {
                const __m256 *acc = state + 8 * t;
                const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                               _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
                _mm256_maskstore_ps(y + (size_t)(tc + t) * ldy + ob, mask, s);
            }
        }
    }
}

#define LANES_GEMM(name, F, min)                                                                                       \
    static void run_##name(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt, \
                           float *y, size_t ldy, void *scratch) {                                                      \
        run(F, w, o0, o1, act, act_row, nt, y, ldy, scratch);                                                          \
    }                                                                                                                  \
    static const mf_cpu_gemm gemm_##name = {.min_tokens = (min), .scratch_size = scratch_size, .run = run_##name};     \
    const mf_cpu_gemm *mf_cpu_gemm_##name##_avx2(void) { return &gemm_##name; }

/* Q6_K's min_tokens 2: with the weights streamed ahead (MF_GEMM_STREAM_AHEAD) the GEMM beats the
 * four-row dots from 2 tokens (bench_gemm --cold, 2 threads, Zen 5 at the AVX2 level, 4864 x 1024,
 * 2 tokens: Q4_K 0.14 vs 0.34 ms, Q5_K 0.24 vs 0.41, Q6_K 0.26 vs 0.47; 1024 x 4864 alike). */
LANES_GEMM(q6_K, F_Q6_K, 2)
/* Q3_K's, IQ4_XS's and Q2_K's: the tiles of four tokens (dot_k_avx2.c, dot_iq4_avx2.c) form each row's
 * values once per four tokens without packing, and serve up to 8 (Zen 3, bench_gemm --threads 2
 * --cold --reps 20, 8192 x 2048, the tiles / the GEMM in ms: Q3_K 4 tokens 1.3-1.4 / 1.9-2.6, 8
 * 2.6-2.8 / 2.7-3.7, 12 4.0-4.3 / 2.7-4.1, 16 6.2-7.8 / 3.0-4.6; IQ4_XS 8 1.7-2.9 / 2.3-3.3, 12
 * 4.1-4.8 / 2.6-3.4, 16 5.3-6.4 / 4.0-4.3; Q2_K, whose tiles are faster, level from 12 to 24 tokens,
 * then ahead: --threads 1 2048 x 2048 x 128, 11.5-12.7 / 9.5-9.8 ms) */
LANES_GEMM(q3_K, F_Q3_K, 9)
LANES_GEMM(iq4_xs, F_IQ4_XS, 9)
LANES_GEMM(q2_K, F_Q2_K, 9)
