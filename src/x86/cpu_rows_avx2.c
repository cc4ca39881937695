/* cpu_rows_avx2.c: row kernels compiled for AVX2 + FMA, where the generic build would call fmaf
 * in libm per element. Same operations as the generic versions in cpu_kernels.c, bit for bit. */
#include "cpu/cpu.h"

#include <math.h>

/* RoPE of one head (see mf_cpu_rope_head); the contraction llama.cpp's compiled rotation performs,
 * fma(x0, c, -(x1 * s)) and fma(x0, s, x1 * c), which the compiler vectorizes here. */
void mf_cpu_rope_head_avx2(const mf_rope_params *rp, const float *cs, float *x, int64_t hd) {
    (void)hd; /* dims past n_dims pass through unchanged */
    const int32_t half = rp->n_dims / 2;
    if (rp->mode == MF_ROPE_NEOX) {
        float *restrict x0 = x, *restrict x1 = x + half;
        for (int32_t i = 0; i < half; i++) {
            const float c = cs[2 * i], s = cs[2 * i + 1], a = x0[i], b = x1[i];
            x0[i] = fmaf(a, c, -(b * s));
            x1[i] = fmaf(a, s, b * c);
        }
        return;
    }
    for (int32_t i = 0; i < half; i++) {
        const float c = cs[2 * i], s = cs[2 * i + 1], a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = fmaf(a, c, -(b * s));
        x[2 * i + 1] = fmaf(a, s, b * c);
    }
}
