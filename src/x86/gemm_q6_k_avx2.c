/* gemm_q6_k_avx2.c: the Q6_K prefill GEMM for AVX2 without VNNI (see cpu_gemm.h). Each output keeps
 * the plain ordered dot's float steps (st_q6_K in cpu_dot_order_avx2.c): eight float lanes, lane p
 * taking per super-block acc_p = fma(d_a * d_w, (float)L_p, acc_p), with L_p the exact sum, over the
 * eight 32-value groups g, of sc * q * a at values 32g + 4p..+3 (sc the scale of the 16 values they
 * lie in, q the unsigned 6-bit weight), minus 32 * (S[2p] sc[2p] + S[2p+1] sc[2p+1]) (S: the Q8_K
 * bsums); then ((acc0+acc4)+(acc2+acc6)) + ((acc1+acc5)+(acc3+acc7)).
 *
 * Eight weight rows per vector (one per 32-bit lane): for lane p and group g, one vpmaddubsw of the
 * rows' four q (unsigned, <= 63: a pair is at most 2 * 63 * 128 < 32768) against the token's four
 * activation bytes (broadcast) and one vpmaddwd by the rows' (sc, sc) give the rows' part of L_p.
 *
 * Panel layout (per-thread scratch), per super-block of a slice: for group g and step p the vector
 * of the 8 rows' q at values 32g + 4p..+3 (64 vectors), the 16 vectors (sc[j], sc[j]), the 8
 * vectors (sc[2p], sc[2p+1]), then h2f(d) of the 8 rows: 2848 bytes; rows past the matrix are
 * zeros. Slices of up to K6_SLICE super-blocks (20 KB) stay in L1 while a chunk's tokens pass over
 * them in tiles of up to three, each token's eight accumulators in scratch. A tile loads each weight
 * and scale vector once for its tokens, and a token's four activation bytes of two lanes come from
 * one 16-byte load spread by in-lane shuffles: a broadcast load for every vpmaddubsw, one token at a
 * time, had made the loads the bound (Zen 3, bench_gemm --threads 1 q6_k 2048 2048 128,
 * alternating: 10.9-11.4 -> 9.3-9.6 ms; two threads, 8192 x 2048 x 512 and its transpose, 94-95 ->
 * 80-82 ms). The rows in the dot's own layout (a row's 32 values against the token's 32, no
 * shuffle) ran level or 3 % slower: both are bound by the two multiplies per 32 products. */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"

#include <string.h>

enum {
    K6_BLOCK_BYTES = (64 + 16 + 8 + 1) * 32,
    K6_SLICE = 7,
    K6_TILE = 3,
};

static int64_t max_chunk(int64_t nb) { return mf_avx2_k_chunk((size_t)nb * sizeof(mf_block_q8_K)); }

static size_t scratch_size(int64_t K) {
    return (size_t)K6_SLICE * K6_BLOCK_BYTES + (size_t)max_chunk(K / 256) * 8 * 32;
}

/* Super-blocks [i0, i1) of rows [ob, ob + nr) (nr <= 8) into the panel layout; group 4h + v of a
 * row is formed as st_q6_K forms its q[v] of half h. */
static void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                 const uint8_t *ahead) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3);
    for (int64_t i = i0; i < i1; i++, panel += K6_BLOCK_BYTES) {
        MF_GEMM_STREAM_AHEAD(ahead, i, 8 * sizeof(mf_block_q6_K));
        const mf_block_q6_K *row[8];
        for (int r = 0; r < 8; r++)
            row[r] = r < nr ? (const mf_block_q6_K *)(base + (size_t)r * w->row_bytes) + i : NULL;
        __m256i *p = (__m256i *)panel;
        for (int h = 0; h < 2; h++) {
            __m256i q[4][8];
            for (int r = 0; r < 8; r++) {
                if (!row[r]) {
                    for (int v = 0; v < 4; v++) q[v][r] = _mm256_setzero_si256();
                    continue;
                }
                const __m256i l0 = _mm256_loadu_si256((const __m256i *)(row[r]->ql + 64 * h));
                const __m256i l1 = _mm256_loadu_si256((const __m256i *)(row[r]->ql + 64 * h + 32));
                const __m256i hb = _mm256_loadu_si256((const __m256i *)(row[r]->qh + 32 * h));
                q[0][r] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
                q[1][r] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
                q[2][r] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
                q[3][r] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
            }
            for (int v = 0; v < 4; v++) mf_avx2_transpose8_i32(q[v], p + 8 * (4 * h + v));
        }
        int16_t sc[16][8];
        uint16_t dh[8];
        for (int r = 0; r < 8; r++) {
            for (int j = 0; j < 16; j++) sc[j][r] = row[r] ? row[r]->scales[j] : 0;
            dh[r] = row[r] ? row[r]->d : 0;
        }
        for (int j = 0; j < 16; j++) _mm256_store_si256(p + 64 + j, mf_avx2_pairs16(sc[j], sc[j]));
        for (int q = 0; q < 8; q++) _mm256_store_si256(p + 80 + q, mf_avx2_pairs16(sc[2 * q], sc[2 * q + 1]));
        _mm256_store_ps((float *)(p + 88), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh)));
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
            const int o = 32 * g + 16 * ((P) / 4);                                                                     \
            K6_LANES(P, q0, l0a, l0b);                                                                                 \
            if (T > 1) K6_LANES(P, q1, l1a, l1b);                                                                      \
            if (T > 2) K6_LANES(P, q2, l2a, l2b);                                                                      \
        }                                                                                                              \
        k6_finish(T, pb, a, d, st, i, (P), l0a, l1a, l2a);                                                             \
        k6_finish(T, pb, a, d, st, i, (P) + 1, l0b, l1b, l2b);                                                         \
    } while (0)
/* One token's part of lanes P and P + 1: its bytes 16 * (P / 4)..+15 of group g in both halves of a
 * register, dwords P % 4 and P % 4 + 1 spread over the eight rows. */
#define K6_LANES(P, q, la, lb)                                                                                         \
    do {                                                                                                               \
        const __m256i h_ = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)((q) + o)));                 \
        const __m256i xa_ = _mm256_shuffle_epi32(h_, (P) % 4 * 0x55), xb_ = _mm256_shuffle_epi32(h_, ((P) % 4 + 1) * 0x55); \
        la = _mm256_add_epi32(la, _mm256_madd_epi16(_mm256_maddubs_epi16(wa, xa_), sc));                              \
        lb = _mm256_add_epi32(lb, _mm256_madd_epi16(_mm256_maddubs_epi16(wb, xb_), sc));                              \
    } while (0)

/* Lane p of T tokens after a super-block's groups: the bsums' offset, then one fma per token into
 * its accumulator in st[t] (d[t]: d_a * d_w of the eight rows). */
static inline __attribute__((always_inline)) void k6_finish(const int T, const __m256i *pb, const mf_block_q8_K *const *a,
                                                            const __m256 *d, __m256 *const *st, int64_t i, int p,
                                                            __m256i l0, __m256i l1, __m256i l2) {
    const __m256i mo = _mm256_load_si256(pb + 80 + p);
    for (int t = 0; t < T; t++) {
        const __m256i off = _mm256_madd_epi16(mo, mf_avx2_bcast4(a[t][i].bsums + 2 * p));
        const __m256i l = _mm256_sub_epi32(t == 0 ? l0 : t == 1 ? l1 : l2, _mm256_slli_epi32(off, 5));
        _mm256_store_ps((float *)(st[t] + p),
                        _mm256_fmadd_ps(d[t], _mm256_cvtepi32_ps(l), _mm256_load_ps((const float *)(st[t] + p))));
    }
}

/* T tokens (a[t]: their Q8_K rows) against super-blocks [i0, i1) of the panel, each token's eight
 * lanes' accumulators in st[t] (zeroed before the first slice), stepped as one token alone steps them. */
static inline __attribute__((always_inline)) void tile(const int T, const uint8_t *panel, int64_t i0, int64_t i1,
                                                       const mf_block_q8_K *const *a, __m256 *const *st) {
    for (int64_t i = i0; i < i1; i++, panel += K6_BLOCK_BYTES) {
        const __m256i *pb = (const __m256i *)panel;
        const uint8_t *q0 = (const uint8_t *)a[0][i].qs, *q1 = T > 1 ? (const uint8_t *)a[1][i].qs : q0,
                      *q2 = T > 2 ? (const uint8_t *)a[2][i].qs : q0;
        const __m256 dw = _mm256_load_ps((const float *)(pb + 88));
        __m256 d[K6_TILE];
        for (int t = 0; t < T; t++) d[t] = _mm256_mul_ps(_mm256_broadcast_ss(&a[t][i].d), dw);
        K6_PAIR(0);
        K6_PAIR(2);
        K6_PAIR(4);
        K6_PAIR(6);
    }
}
#undef K6_PAIR
#undef K6_LANES

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
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
                pack(w, ob, nr, i0, i1, panel, ahead);
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
                    case 1: tile(1, panel, i0, i1, a, st); break;
                    case 2: tile(2, panel, i0, i1, a, st); break;
                    default: tile(3, panel, i0, i1, a, st); break;
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

/* min_tokens 2: with the weights streamed ahead (MF_GEMM_STREAM_AHEAD) the GEMM beats the four-row
 * dots from 2 tokens (bench_gemm --cold, 2 threads, Zen 5 at the AVX2 level, 4864 x 1024, 2 tokens:
 * Q4_K 0.14 vs 0.34 ms, Q5_K 0.24 vs 0.41, Q6_K 0.26 vs 0.47; 1024 x 4864 alike). */
static const mf_cpu_gemm gemm = {.min_tokens = 2, .scratch_size = scratch_size, .run = run};

const mf_cpu_gemm *mf_cpu_gemm_q6_K_avx2(void) { return &gemm; }
