/* gemm_iq4_nl_avx2.c: the IQ4_NL prefill GEMM for AVX2 (see cpu_gemm.h): the shared 8-row panel GEMM
 * of gemm_q8_avx2.h in its one-chain order (q8a_chain: four tokens a pass over each panel), the
 * panels packed from the file's blocks with each nibble's value from the IQ4_NL table, so that every
 * output is bit for bit mf_cpu_dot_iq4_nl_x86_ref's (llama.cpp's repacked IQ4_NL order: per block
 * s = fma(exact block sum, d_w * d_a, s)). The table's values are at most 127 in magnitude, as Q8_0's
 * weights, so the panel and its bounds are Q8_0's. */
#include "x86/gemm_q8_avx2.h"
#include "x86/x86_common.h"

/* The block's 32 values (first field: its half scale, as the packer expects) */
static inline __attribute__((always_inline)) __m256i load_iq4_nl(const uint8_t *block) {
    const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mf_iq4nl_values));
    const __m128i b = _mm_loadu_si128((const __m128i *)((const mf_block_iq4_nl *)block)->qs);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(b, 4), b), _mm256_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(lut, nib);
}

static __attribute__((noinline)) void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                           uint8_t *panel, const uint8_t *ahead) {
    q8a_pack(false, w, ob, nr, i0, i1, panel, ahead, sizeof(mf_block_iq4_nl), load_iq4_nl);
}

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    q8a_run(false, true, pack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

/* min_tokens: as Q8_0's one-chain GEMM (gemm_q8_0_avx2.c); fewer tokens take the eight-row dots */
static const mf_cpu_gemm gemm = {.min_tokens = 5, .scratch_size = q8a_scratch_size, .run = run};

const mf_cpu_gemm *mf_cpu_gemm_iq4_nl_avx2(void) { return &gemm; }
