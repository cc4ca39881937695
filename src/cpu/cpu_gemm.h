/* cpu_gemm.h: prefill GEMMs. For many activation rows at once a GEMM reads each weight panel once
 * per tile of tokens and keeps the integer dot-product units busy, where one dot per (row, token)
 * reloads and re-decodes the weights for every token.
 *
 * Every GEMM here gives, for each output, bit for bit the value of the ordered dot that
 * mf_cpu_ordered_dots_for(cfg, w) returns for it (llama.cpp's float order): only the exact integer block
 * sums are formed in a different order, the float steps of each output stay the same, whatever the
 * token count, the tile a token falls in or the row range. tests/test_cpu_gemm.c checks that on
 * random data, every tail, every row range. */
#ifndef MF_CPU_GEMM_H
#define MF_CPU_GEMM_H

#include "cpu/cpu.h"
#include "graph/graph.h"

#include <stddef.h>
#include <stdint.h>

typedef struct mf_cpu_gemm {
    /* The fewest activation rows for which the GEMM beats the ordered dots. */
    int64_t min_tokens;
    /* Bytes of per-thread scratch for weight rows of K values (64-byte aligned by the caller). */
    size_t (*scratch_size)(int64_t K);
    /* y[t * ldy + o] for the weight rows o in [o0, o1) (o0 a multiple of 16) and every activation
     * row t < nt: act + t * act_row holds row t quantized to the weight type's vec_dot_type. No bias. */
    void (*run)(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch);
} mf_cpu_gemm;

/* The GEMM for this weight, or NULL (no GEMM for its type or order on this CPU, or the ordered
 * kernels are off: then the SIMD kernels' own multi-row tiles serve). */
const mf_cpu_gemm *mf_cpu_gemm_for(const mf_cpu_cfg *cfg, const mf_weight *w);

#if defined(__x86_64__)
/* AVX-512 VNNI GEMMs (NULL until a type has one); each needs the repacked order (Q4_0, Q4_K: rows a
 * multiple of 8, checked by mf_cpu_gemm_for) or the plain one (Q4_1, Q5_0, Q5_1, Q8_0, Q5_K, Q6_K). */
const mf_cpu_gemm *mf_cpu_gemm_q4_0_avx512(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_0_avx512(void);
const mf_cpu_gemm *mf_cpu_gemm_q8_0_avx512(void);
const mf_cpu_gemm *mf_cpu_gemm_q4_K_avx512(void);
const mf_cpu_gemm *mf_cpu_gemm_q6_K_avx512(void);
const mf_cpu_gemm *mf_cpu_gemm_q4_1_avx512(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_1_avx512(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_K_avx512(void);
/* AVX2 GEMMs (vpmaddubsw/vpmaddwd, no VNNI), bit for bit the same outputs as the AVX2 ordered dots:
 * Q4_0 and Q4_K in the repacked order (rows a multiple of 8), Q5_0 and Q8_0 in the plain one, Q4_1, Q5_1, Q5_K and Q6_K too. */
const mf_cpu_gemm *mf_cpu_gemm_q4_0_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q4_K_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_0_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q8_0_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q6_K_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q4_1_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_1_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_K_avx2(void);
#endif

#endif /* MF_CPU_GEMM_H */
