/* dot_float_avx2.c: AVX2 dots of the float formats (F32, F16, BF16 against the same format) and
 * their GEMM tile, which gives every (row, token) pair bit for bit the dot's value (simd.h).
 *
 * The order (dot and tile), per output: one 8-lane accumulator; for each step of 8 values, in
 * increasing order, acc = fma(w[i..i+7], a[i..i+7], acc); then hsum8(acc) (mf_x86_hsum8:
 * ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7))); then the last n % 8 products added one at a time
 * (fl_tail, shared). This is the order of llama.cpp's AVX2 float GEMM (tinyBLAS, which it runs from two
 * tokens on; its one-token dot keeps four accumulators), with a tail where llama.cpp falls back.
 *
 * One accumulator per output is the shape a GEMM wants: one register per output, nothing to
 * combine. One row's dot is then a single fma chain, bound by its latency rather than by reading the
 * row, so the dispatch table sends one-token matmuls to the tile too (mf_cpu_mm_kernels.tile_one),
 * and up to FS_FEW tokens run fl_few: several rows side by side straight from the format, taken
 * from separate strands of the matrix so that each strand is still read front to back. From there
 * on the tile runs blocks of three weight rows x four tokens (twelve accumulators, the three weight
 * vectors in registers, one activation vector at a time: seven loads per twelve fmas) over slices
 * of the row, the tokens' slice widened to f32 in per-thread scratch once per block of FS_RB rows,
 * the weights converted as they are loaded (the next triple prefetched). Between slices the
 * accumulators wait in scratch; on the last slice the block finishes its outputs (hsum8, the tail).
 * Zen 5 at this level, against the four-accumulator order this replaced (whose tile built the four
 * accumulators in four passes): f16 4864 x 896 x 64 on one thread 43.8 -> 51.5 GMAC/s; one token
 * level (weights from memory); two to four tokens about twice as fast. */
#include "x86/dot_float_avx2.h"

/* The tail of every dot and tile output (dot_float_avx2.h). */
__attribute__((noinline)) float mf_x86_fl_tail(int kind, float s, const void *w, const void *a, int64_t i, int64_t n) {
    for (; i < n; i++) s += fl_value(kind, w, i) * fl_value(kind, a, i);
    return s;
}

static inline __attribute__((always_inline)) float fl_dot(int kind, int64_t n, const void *vw, const void *va) {
    const char *w = vw, *a = va;
    const size_t es = fl_size(kind);
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i + 8 <= n; i += 8)
        acc = _mm256_fmadd_ps(fl_load8(kind, w + (size_t)i * es), fl_load8(kind, a + (size_t)i * es), acc);
    return fl_finish(kind, acc, n, w, a);
}

static float dot_f32_f32(int64_t n, const void *w, const void *a) { return fl_dot(FS_F32, n, w, a); }
static float dot_f16_f16(int64_t n, const void *w, const void *a) { return fl_dot(FS_F16, n, w, a); }
static float dot_bf16_bf16(int64_t n, const void *w, const void *a) { return fl_dot(FS_BF16, n, w, a); }

FL_DEFINE_GEMMS

void mf_simd_register_avx2_float(mf_simd_table *t) {
    MF_SIMD_SET_DOT(t, F32, F32, dot_f32_f32, gemm_f32);
    MF_SIMD_SET_DOT(t, F16, F16, dot_f16_f16, gemm_f16);
    MF_SIMD_SET_DOT(t, BF16, BF16, dot_bf16_bf16, gemm_bf16);
}
