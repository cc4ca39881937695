/* cpu_attn.h: the attention kernels behind mf_cpu_attention (cpu.h), shared by cpu_attn.c, its
 * per-ISA files and tests/test_cpu_attn.c. Layouts as in cpu.h: q[t][h][d], cache rows [c][kvh][d],
 * out[t][h][d]; a unit u = t * nh + h is one (token, query head) pair. */
#ifndef MF_CPU_ATTN_H
#define MF_CPU_ATTN_H

#include "cpu/cpu.h"

/* Blockwise (flash) attention works on tiles: up to mf_cpu_attn_tile_rows(hd) query rows of one
 * KV head (the heads of its GQA group for consecutive tokens) against mf_cpu_attn_tile_cells(hd)
 * consecutive cells, with an online softmax per row. The tile buffers live on the stack and hold
 * MF_ATTN_TILE_FLOATS floats each (a K tile, a V tile, the rows' queries, their accumulators). */
#define MF_ATTN_TILE_FLOATS 8192
#define MF_ATTN_MAX_ROWS 64
int mf_cpu_attn_tile_rows(int64_t hd);
/* Up to 64 rows (the AVX2 tile: each converted K/V tile serves twice the rows). */
int mf_cpu_attn_tile_rows_wide(int64_t hd);
int mf_cpu_attn_tile_cells(int64_t hd);

/* Asks for the K and V rows of KV head kvh of the cells list[c0..c1) of a layer ahead of their use
 * (a tile computes while the next one's rows arrive): their addresses come from the cell list, which
 * the hardware prefetchers do not follow, so a tile's conversion otherwise waits on memory. Decode
 * at depth 16,384 from memory, `bench_attn --depth 16384 --layers 24`, Zen 5: AVX2 tile 2.2-2.9 ->
 * 1.9 ms a layer, AVX-512 2.4-2.5 -> 2.0 (1.2 and 1.4 with one layer's cache in L3). Into L2 (hint
 * T1): fetches into L1 stalled once its miss buffers were full, the tile's own loads behind them; a
 * decode step of one sequence in a model (its weights between the layers' caches), Zen 4, 2
 * threads, T0 against T1 alternating in one process: SmolLM2-135M Q4_0 at depth 1,000 7.1 -> 6.1 ms,
 * 4,000 17.6-24.6 -> 14.6-15.4 (its AVX2 tile 29.6 -> 19.1), the 0.5B Q4_0 at 4,000 20.3 -> 17.3. */
static inline void mf_cpu_attn_prefetch(const mf_kv_cache *kv, int32_t layer, const int32_t *list, int32_t c0,
                                        int32_t c1, int32_t kvh, int64_t hd) {
    const size_t bytes = (size_t)hd * (kv->type == MF_TYPE_F32 ? 4 : 2);
    for (int32_t c = c0; c < c1; c++)
        for (int h = 0; h < 2; h++) {
            const uintptr_t p = (uintptr_t)(h ? kv->v[layer] : kv->k[layer]) + (size_t)list[c] * kv->row_bytes +
                                (size_t)kvh * bytes;
            for (uintptr_t l = p & ~(uintptr_t)63; l < p + bytes; l += 64) __builtin_prefetch((const void *)l, 0, 2);
        }
}

/* One tile of rows: units rows[0..nr) of tokens of one sequence (one kv->view.list, every
 * kv->view.n > 0), all heads of KV head kvh, nr <= mf_cpu_attn_tile_rows(hd). Writes out for those
 * units. Tiles of cells are consecutive entries of the sequence's position-ordered list, starting
 * at multiples of the tile size: a row's result depends only on its own query and its sequence's
 * cells, never on which other rows share its tile, so any split of the units gives the same bits. */
typedef void (*mf_cpu_attn_tile_fn)(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                    int32_t kvh, const int64_t *rows, int nr);
/* Portable C version (expf, float accumulation). */
void mf_cpu_attn_tile_c(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int32_t kvh,
                        const int64_t *rows, int nr);

/* Units [u0, u1) through the blockwise kernel tile (tokens that see no cell get zeros), tiles of up
 * to mf_cpu_attn_tile_rows(hd) rows; _rows: up to max_rows <= MF_ATTN_MAX_ROWS rows (what the tile
 * function takes). */
void mf_cpu_attention_flash(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int64_t u0,
                            int64_t u1, mf_cpu_attn_tile_fn tile);
void mf_cpu_attention_flash_rows(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                 int64_t u0, int64_t u1, mf_cpu_attn_tile_fn tile, int max_rows);

#if defined(__x86_64__)
/* AVX2 + FMA + F16C required: 8 rows per vector, exp8 below for the softmax; nr up to
 * mf_cpu_attn_tile_rows_wide(hd). */
void mf_cpu_attn_tile_avx2(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out, int32_t kvh,
                           const int64_t *rows, int nr);
/* y[i] = the AVX2 tile's exp of x[i], i < 8 (for tests, against expf). */
void mf_cpu_attn_exp8_avx2(const float *x, float *y);
/* AVX-512 F/BW/DQ/VL required. */
void mf_cpu_attn_tile_avx512(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                             int32_t kvh, const int64_t *rows, int nr);

/* F32 cache in llama.cpp's float order (mf_cpu_attention's contract, scores scratch as there):
 * the plain version is the reference twin (AVX2 + FMA + F16C), the AVX-512 one is bit-identical. */
void mf_cpu_attention_ordered_ref(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                  int64_t u0, int64_t u1, float *scores);
void mf_cpu_attention_ordered_avx512(const mf_attn_params *ap, const mf_kv_cache *kv, const float *q, float *out,
                                     int64_t u0, int64_t u1, float *scores);
/* y[i] = llama.cpp's vector exp of x[i], i < 16 (for tests: bit-identical to the ordered softmax's). */
void mf_cpu_attn_exp16_avx512(const float *x, float *y);
#endif

#endif /* MF_CPU_ATTN_H */
