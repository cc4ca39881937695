/* gemm_q4_1_avx2.c: the Q4_1 prefill GEMM for AVX2 (see cpu_gemm.h): the shared 8-row panel GEMM of
 * gemm_q8_avx2.h (unsigned weights with a minimum, Q8_1 activations), each output bit for bit
 * st_q4_1's value. */
#include "x86/gemm_q8_avx2.h"
#include "x86/x86_common.h"

/* Unsigned weights: the nibbles, as st_q4_1 forms them. */
static inline __attribute__((always_inline)) __m256i load_q4_1(const uint8_t *block) {
    return mf_x86_nibbles32(((const mf_block_q4_1 *)block)->qs);
}

static __attribute__((noinline)) void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                           uint8_t *panel, const uint8_t *ahead) {
    q8a_pack(true, w, ob, nr, i0, i1, panel, ahead, sizeof(mf_block_q4_1), load_q4_1);
}

static __attribute__((noinline)) void unpack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                             uint8_t *panel, const uint8_t *ahead) {
    (void)nr, (void)ahead;
    q8a_unpack_packed(Q8A_Q4_1, w, ob, i0, i1, panel);
}

static size_t packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 32); }

static void pack_weight(const mf_weight *w, void *dst) {
    q1g_pack(w, dst, sizeof(mf_block_q4_1), offsetof(mf_block_q4_1, qs), false);
}

static void packed_row(const mf_weight *w, int64_t r, void *dst) {
    q1g_packed_row(w, r, dst, sizeof(mf_block_q4_1), offsetof(mf_block_q4_1, qs), false);
}

static const mf_cpu_gemm gemm;

/* The packed copy (the layout the AVX-512 GEMM reads too) or the file's blocks (q8a_run_packed). */
static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    q8a_run_packed(Q8A_Q4_1, Q8A_FEW_UM, &gemm, pack, unpack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

/* min_tokens: Q8A_MIN_TOKENS (gemm_q8_avx2.h). */
static const mf_cpu_gemm gemm = {.min_tokens = Q8A_MIN_TOKENS,
                                  .scratch_size = q8a_scratch_size,
                                  .run = run,
                                  .packed_size = packed_size,
                                  .pack = pack_weight,
                                  .packed_row = packed_row};

const mf_cpu_gemm *MF_AVX2_GEMM(mf_cpu_gemm_q4_1)(void) { return &gemm; }
