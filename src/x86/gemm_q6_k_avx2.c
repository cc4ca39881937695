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
 * them one by one, each token's eight accumulators parked in scratch between slices. */
#include "cpu/cpu_gemm.h"
#include "x86/gemm_avx2_util.h"

#include <string.h>

enum {
    K6_BLOCK_BYTES = (64 + 16 + 8 + 1) * 32,
    K6_SLICE = 7,
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

/* One token (its Q8_K row a) against super-blocks [i0, i1) of the panel: the eight accumulators
 * start at zero (first) or from st and end in st or, after the last (last), as the outputs y[0..8)
 * (lanes in mask). */
static void token(const uint8_t *panel, int64_t i0, int64_t i1, const mf_block_q8_K *a, __m256 *st, bool first,
                  bool last, float *y, __m256i mask) {
    __m256 acc[8];
    for (int p = 0; p < 8; p++) acc[p] = first ? _mm256_setzero_ps() : _mm256_load_ps((const float *)(st + p));
    for (int64_t i = i0; i < i1; i++, panel += K6_BLOCK_BYTES) {
        const __m256i *pb = (const __m256i *)panel;
        const __m256 d = _mm256_mul_ps(_mm256_broadcast_ss(&a[i].d), _mm256_load_ps((const float *)(pb + 88)));
        const uint8_t *qa = (const uint8_t *)a[i].qs;
        for (int p = 0; p < 8; p++) {
            __m256i l = _mm256_setzero_si256();
            for (int g = 0; g < 8; g++) {
                const __m256i m = _mm256_maddubs_epi16(_mm256_load_si256(pb + 8 * g + p), mf_avx2_bcast4(qa + 32 * g + 4 * p));
                l = _mm256_add_epi32(l, _mm256_madd_epi16(m, _mm256_load_si256(pb + 64 + 2 * g + p / 4)));
            }
            const __m256i off = _mm256_madd_epi16(_mm256_load_si256(pb + 80 + p), mf_avx2_bcast4(a[i].bsums + 2 * p));
            l = _mm256_sub_epi32(l, _mm256_slli_epi32(off, 5));
            acc[p] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(l), acc[p]);
        }
    }
    if (!last) {
        for (int p = 0; p < 8; p++) _mm256_store_ps((float *)(st + p), acc[p]);
        return;
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(acc[0], acc[4]), _mm256_add_ps(acc[2], acc[6])),
                                   _mm256_add_ps(_mm256_add_ps(acc[1], acc[5]), _mm256_add_ps(acc[3], acc[7])));
    _mm256_maskstore_ps(y, mask, s);
}

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
                for (int64_t t = 0; t < n; t++)
                    token(panel, i0, i1, (const mf_block_q8_K *)(act + (size_t)(tc + t) * act_row), state + 8 * t,
                          i0 == 0, i1 == nb, y + (size_t)(tc + t) * ldy + ob, mask);
            }
        }
    }
}

/* min_tokens 2: with the weights streamed ahead (MF_GEMM_STREAM_AHEAD) the GEMM beats the four-row
 * dots from 2 tokens (bench_gemm --cold, 2 threads, Zen 5 at the AVX2 level, 4864 x 1024, 2 tokens:
 * Q4_K 0.14 vs 0.34 ms, Q5_K 0.24 vs 0.41, Q6_K 0.26 vs 0.47; 1024 x 4864 alike). */
static const mf_cpu_gemm gemm = {.min_tokens = 2, .scratch_size = scratch_size, .run = run};

const mf_cpu_gemm *mf_cpu_gemm_q6_K_avx2(void) { return &gemm; }
