/* gemm_q8_0_avx2.c: the Q8_0 prefill GEMMs for AVX2 (see cpu_gemm.h): the shared 8-row panel GEMM of
 * gemm_q8_avx2.h with panels copied from the Q8_0 blocks, each output bit for bit st_q8_0's value
 * (llama.cpp's eight-lane order) or st_q8_0_rp's (the one-chain order of MF_ORDER_FAST). */
#include "x86/gemm_q8_avx2.h"

/* The weights are the blocks' signed bytes. */
static inline __attribute__((always_inline)) __m256i load_q8_0(const uint8_t *block) {
    return _mm256_loadu_si256((const __m256i *)((const mf_block_q8_0 *)block)->qs);
}

static __attribute__((noinline)) void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                           uint8_t *panel, const uint8_t *ahead) {
    q8a_pack(false, w, ob, nr, i0, i1, panel, ahead, sizeof(mf_block_q8_0), load_q8_0);
}

static __attribute__((noinline)) void unpack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                             uint8_t *panel, const uint8_t *ahead) {
    (void)nr, (void)ahead;
    q8a_unpack_packed(Q8A_Q8_0, w, ob, i0, i1, panel);
}

static size_t packed_size(const mf_weight *w) { return mf_cpu_panel16_size(w, 32); }

static void pack_weight(const mf_weight *w, void *dst) { q8g_pack(w, dst, false); }

static void packed_row(const mf_weight *w, int64_t r, void *dst) { q8g_packed_row(w, r, dst, false); }

static const mf_cpu_gemm gemm;

/* The packed copy (the layout the AVX-512 GEMM reads too) or the file's blocks (q8a_run_packed). */
static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    q8a_run_packed(Q8A_Q8_0, Q8A_FEW, &gemm, pack, unpack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

/* The one-chain order (mf_cpu_dot_q8_0_rp_ref), four tokens a pass over the same panels. */
static void run_rp(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                   float *y, size_t ldy, void *scratch) {
    q8a_run(false, true, pack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

/* min_tokens 5: in bench_gemm (896 x 4864) the GEMM was ahead from 4 tokens (with 2: Q8_0 0.54 vs
 * 0.50 ms on the dots), but a server's four-sequence decode step, where the output matrix is Q8_0,
 * ran faster on the dots (see gemm_q4_0_avx2.c). */
static const mf_cpu_gemm gemm = {.min_tokens = 5,
                                  .scratch_size = q8a_scratch_size,
                                  .run = run,
                                  .packed_size = packed_size,
                                  .pack = pack_weight,
                                  .packed_row = packed_row};

static const mf_cpu_gemm gemm_rp = {.min_tokens = 5, .scratch_size = q8a_scratch_size, .run = run_rp};

const mf_cpu_gemm *MF_AVX2_GEMM(mf_cpu_gemm_q8_0)(void) { return &gemm; }
const mf_cpu_gemm *MF_AVX2_GEMM(mf_cpu_gemm_q8_0_rp)(void) { return &gemm_rp; }
