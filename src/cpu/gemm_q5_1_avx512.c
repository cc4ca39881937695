/* gemm_q5_1_avx512.c: the Q5_1 prefill GEMM for AVX-512 VNNI (see cpu_gemm.h): the shared 16-row
 * panel GEMM of gemm_q_1_avx512.h with panels unpacked from the Q5_1 blocks, each output bit for bit
 * st_q5_1's value (its fma takes the lanes first; the product, and so the value, is the same). */
#include "cpu/gemm_q_1_avx512.h"

#include <string.h>

/* Unsigned values q5 = nibble | fifth bit << 4 (value j: low nibble of qs[j], value 16 + j: its high
 * nibble; fifth bit: bit j of qh): the bit as 0x10 by one zero-masked move under the qh mask. */
static inline __attribute__((always_inline)) __m256i load_q5_1(const uint8_t *block) {
    const mf_block_q5_1 *b = (const mf_block_q5_1 *)block;
    const __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(nib, _mm256_maskz_mov_epi8((__mmask32)qh, _mm256_set1_epi8(0x10)));
}

/* Not inlined: its constants would stay in registers across the tiles, which need all 32. */
static __attribute__((noinline)) void repack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel) {
    q1g_repack_rows(w, ob, nr, i0, i1, panel, sizeof(mf_block_q5_1), load_q5_1);
}

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                int64_t n_grouped, float *y, size_t ldy, void *scratch) {
    (void)n_grouped;
    q1g_run(repack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

static const mf_cpu_gemm gemm = {.min_tokens = 2, .scratch_size = q1g_scratch_size, .run = run};

const mf_cpu_gemm *mf_cpu_gemm_q5_1_avx512(void) { return &gemm; }
