/* gemm_q5_0_avx512.c: the Q5_0 prefill GEMM for AVX-512 VNNI (see cpu_gemm.h): the shared 16-row
 * panel GEMM of gemm_q8_avx512.h with panels unpacked from the Q5_0 blocks, each output bit for bit
 * st_q5_0's value. */
#include "x86/gemm_q8_avx512.h"


#include <string.h>

/* Signed weights w = q5 - 16, q5 = nibble | fifth bit << 4 (value j: low nibble of qs[j], value
 * 16 + j: its high nibble; fifth bit: bit j of qh). As a byte, nibble - 16 = nibble | 0xF0, so
 * w = nibble | (bit ? 0 : 0xF0): one zero-masked move under the inverted qh mask. */
static inline __attribute__((always_inline)) __m256i load_q5_0(const uint8_t *block) {
    const mf_block_q5_0 *b = (const mf_block_q5_0 *)block;
    const __m128i q = _mm_loadu_si128((const __m128i *)b->qs);
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    return _mm256_or_si256(nib, _mm256_maskz_mov_epi8((__mmask32)~qh, _mm256_set1_epi8((char)0xF0)));
}

/* Not inlined: its constants would stay in registers across the tiles, which need all 32. */
static __attribute__((noinline)) void repack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                                             const uint8_t *ahead) {
    q8g_repack_rows(w, ob, nr, i0, i1, panel, ahead, sizeof(mf_block_q5_0), load_q5_0);
}

static __attribute__((noinline)) void unpack(const uint8_t *p, int64_t i0, int64_t i1, uint8_t *panel,
                                             const uint8_t *ahead) {
    q8g_unpack(p, i0, i1, panel, ahead, true);
}

static size_t packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 32); }

static void pack(const mf_weight *w, void *dst) { q8g_pack(w, dst, true); }

static void packed_row(const mf_weight *w, int64_t r, void *dst) { q8g_packed_row(w, r, dst, true); }

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    q8g_run(repack, unpack, mf_cpu_gemm_packed(&gemm, w), true, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

/* min_tokens 2: 1 thread, 2 tokens, 4864x896: 0.167 vs 0.178 ms for the ordered dots; 896x4864:
 * 0.167 vs 0.170; 3 tokens: 0.18 vs 0.26 and 0.25. */
static const mf_cpu_gemm gemm = {
    .min_tokens = 2, .scratch_size = q8g_scratch_size, .run = run, .packed_size = packed_size, .pack = pack,
    .packed_row = packed_row};

const mf_cpu_gemm *mf_cpu_gemm_q5_0_avx512(void) { return &gemm; }
