/* gemm_q5_1_avx2.c: the Q5_1 prefill GEMM for AVX2 (see cpu_gemm.h): the shared 8-row panel GEMM of
 * gemm_q8_avx2.h (unsigned weights with a minimum, Q8_1 activations), each output bit for bit
 * st_q5_1's value. */
#include "x86/gemm_q8_avx2.h"
#include "x86/x86_common.h"

/* Unsigned weights: nibble | fifth bit << 4, as st_q5_1 forms them. */
static inline __attribute__((always_inline)) __m256i load_q5_1(const uint8_t *block) {
    const mf_block_q5_1 *b = (const mf_block_q5_1 *)block;
    return _mm256_or_si256(mf_x86_nibbles32(b->qs), _mm256_and_si256(mf_x86_bits32(b->qh), _mm256_set1_epi8(0x10)));
}

static __attribute__((noinline)) void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                           uint8_t *panel, const uint8_t *ahead) {
    q8a_pack(true, w, ob, nr, i0, i1, panel, ahead, sizeof(mf_block_q5_1), load_q5_1);
}

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    q8a_run(true, false, pack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

/* min_tokens: Q8A_MIN_TOKENS (gemm_q8_avx2.h). */
static const mf_cpu_gemm gemm = {.min_tokens = Q8A_MIN_TOKENS, .scratch_size = q8a_scratch_size, .run = run};

const mf_cpu_gemm *MF_AVX2_GEMM(mf_cpu_gemm_q5_1)(void) { return &gemm; }
