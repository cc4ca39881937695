/* gemm_q8_0_avx512.c: the Q8_0 prefill GEMM for AVX-512 VNNI (see cpu_gemm.h): the shared 16-row
 * panel GEMM of gemm_q8_avx512.h with panels copied from the Q8_0 blocks, each output bit for bit
 * st_q8_0's value. */
#include "cpu/gemm_q8_avx512.h"

/* The weights are the blocks' signed bytes. */
/* Not inlined: its constants would stay in registers across the tiles, which need all 32. */
static __attribute__((noinline)) void repack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1, uint8_t *panel) {
    const uint8_t *base = (const uint8_t *)w->data + (size_t)ob * w->row_bytes;
    for (int64_t i = i0; i < i1; i++) {
        __m256i r[16];
        uint16_t dh[16];
        for (int k = 0; k < 16; k++) {
            if (k < nr) {
                const mf_block_q8_0 *b = (const mf_block_q8_0 *)(base + (size_t)k * w->row_bytes) + i;
                r[k] = _mm256_loadu_si256((const __m256i *)b->qs);
                dh[k] = b->d;
            } else {
                r[k] = _mm256_setzero_si256();
                dh[k] = 0;
            }
        }
        q8g_store_block(r, dh, panel + (size_t)(i - i0) * Q8G_BLOCK_BYTES);
    }
}

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                int64_t n_grouped, float *y, size_t ldy, void *scratch) {
    (void)n_grouped;
    q8g_run(repack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

static const mf_cpu_gemm gemm = {.min_tokens = 2, .scratch_size = q8g_scratch_size, .run = run};

const mf_cpu_gemm *mf_cpu_gemm_q8_0_avx512(void) { return &gemm; }
