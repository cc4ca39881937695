/* gemm_q8_0_avx512.c: the Q8_0 prefill GEMM for AVX-512 VNNI (see cpu_gemm.h): the shared 16-row
 * panel GEMM of gemm_q8_avx512.h with panels copied from the Q8_0 blocks, each output bit for bit
 * st_q8_0's value. */
#include "x86/gemm_q8_avx512.h"

/* The weights are the blocks' signed bytes. */
static inline __attribute__((always_inline)) __m256i load_q8_0(const uint8_t *block) {
    return _mm256_loadu_si256((const __m256i *)((const mf_block_q8_0 *)block)->qs);
}

/* Not inlined: its constants would stay in registers across the tiles, which need all 32. */
static __attribute__((noinline)) void repack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel,
                                             const uint8_t *ahead) {
    q8g_repack_rows(w, ob, nr, i0, i1, panel, ahead, sizeof(mf_block_q8_0), load_q8_0);
}

static __attribute__((noinline)) void unpack(const uint8_t *p, int64_t i0, int64_t i1, uint8_t *panel,
                                             const uint8_t *ahead) {
    q8g_unpack(p, i0, i1, panel, ahead, false);
}

static size_t packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 32); }

static void pack(const mf_weight *w, void *dst) { q8g_pack(w, dst, false); }

static void packed_row(const mf_weight *w, int64_t r, void *dst) { q8g_packed_row(w, r, dst, false); }

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    q8g_run(repack, unpack, mf_cpu_gemm_packed(&gemm, w), false, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

static const mf_cpu_gemm gemm = {
    .min_tokens = 2, .scratch_size = q8g_scratch_size, .run = run, .packed_size = packed_size, .pack = pack,
    .packed_row = packed_row};

const mf_cpu_gemm *mf_cpu_gemm_q8_0_avx512(void) { return &gemm; }
