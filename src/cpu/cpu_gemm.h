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
#include <string.h>

typedef struct mf_cpu_gemm {
    /* The fewest activation rows for which the GEMM beats the ordered dots. */
    int64_t min_tokens;
    /* Bytes of per-thread scratch for weight rows of K values (64-byte aligned by the caller). */
    size_t (*scratch_size)(int64_t K);
    /* y[t * ldy + o] for the weight rows o in [o0, o1) (o0 a multiple of 16) and every activation
     * row t < nt: act + t * act_row holds row t quantized to the weight type's vec_dot_type. No bias. */
    void (*run)(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch);
    /* Optional (NULL where the GEMM has none): its own layout of a whole weight, made once at load
     * (mf_cpu_pack) so that no call transposes the file's blocks into panels. pack writes
     * packed_size(w) bytes at dst (64-byte aligned; a size of 0: not for this weight). run reads
     * w->packed where w->packed_for is this GEMM, and then serves every matmul of that weight, from
     * one token up, the dots none. */
    size_t (*packed_size)(const mf_weight *w);
    void (*pack)(const mf_weight *w, void *dst);
    /* With a packed layout: row r of w in the file's format (row_bytes at dst), read from the packed
     * copy. An embedding table that is also the output matrix is looked up there (mf_cpu_get_rows),
     * so that the file's pages, released once packed, are not mapped again row by row. */
    void (*packed_row)(const mf_weight *w, int64_t r, void *dst);
    /* With a packed weight, a matmul of up to this many tokens gives run activation rows with the
     * several-token dots' side data (mf_cpu_q4_0_aux, after each row's blocks; act_row includes it). */
    int64_t packed_aux_tokens;
} mf_cpu_gemm;

/* The size of a packed layout in panels of 16 rows that start where their rows do in the file (so
 * each panel takes 16 rows' bytes; the last one padded): for a 2-D weight of whole blocks of blck
 * values and rows a multiple of 8 (the repacked orders' condition), else 0. */
static inline size_t mf_cpu_panel16_size(const mf_weight *w, int64_t blck) {
    if (w->ne[2] > 1 || w->ne[3] > 1 || w->ne[0] % blck || w->ne[1] % 8) return 0;
    return (size_t)((w->ne[1] + 15) / 16) * 16 * w->row_bytes;
}

/* The packed layouts here hold each file block's 4-byte words (and 2-byte scales) transposed across
 * a panel of 16 rows, row r's word at 4 r (half-word at 2 r) of a 64-byte vector (32-byte run):
 * mf_panel16_words copies n words of row lane from the vectors at pk (64 bytes apart) to fb, and
 * mf_panel16_halves one half-word from the run at pk. */
static inline void mf_panel16_words(uint8_t *fb, const uint8_t *pk, int n, int lane) {
    for (int k = 0; k < n; k++) memcpy(fb + 4 * k, pk + 64 * k + 4 * lane, 4);
}
static inline void mf_panel16_half(uint8_t *fb, const uint8_t *pk, int lane) { memcpy(fb, pk + 2 * lane, 2); }

/* A layout of only words (the K-quants' super-blocks, blck values of blk_bytes, 4 * n_vec bytes):
 * per panel and block, vector k lane r = word word_of(k) of row r's block; rows past the matrix
 * zero. */
static inline __attribute__((always_inline)) void mf_panel16_pack_words(const mf_weight *w, void *dst, int64_t blck,
                                                                        size_t blk_bytes, int n_vec,
                                                                        int (*word_of)(int k)) {
    const int64_t nb = w->ne[0] / blck, N = w->ne[1];
    uint8_t *out = dst;
    for (int64_t ob = 0; ob < N; ob += 16)
        for (int64_t i = 0; i < nb; i++, out += (size_t)n_vec * 64) {
            memset(out, 0, (size_t)n_vec * 64);
            for (int r = 0; r < 16 && ob + r < N; r++) {
                const uint8_t *b = (const uint8_t *)w->data + (size_t)(ob + r) * w->row_bytes + (size_t)i * blk_bytes;
                for (int k = 0; k < n_vec; k++) memcpy(out + 64 * k + 4 * r, b + 4 * word_of(k), 4);
            }
        }
}

/* Whether w carries g's packed layout. */
static inline bool mf_cpu_gemm_packed(const mf_cpu_gemm *g, const mf_weight *w) {
    return w->packed && w->packed_for == (const void *)g;
}

/* The GEMM for this weight (its entry in the dispatch table, cpu_dispatch.h), or NULL (no GEMM for
 * its type or order on this CPU, or the ordered kernels are off: then the SIMD kernels' own
 * multi-row tiles serve). */
const mf_cpu_gemm *mf_cpu_gemm_for(const mf_cpu_cfg *cfg, const mf_weight *w);
/* Whether mf_cpu_matmul of nt tokens runs that GEMM (rather than the one-row or several-token dots). */
bool mf_cpu_matmul_runs_gemm(const mf_cpu_cfg *cfg, const mf_weight *w, int64_t nt);

#if defined(__x86_64__)
#include <xmmintrin.h>

/* Streaming a GEMM's weights with few tokens. Then a GEMM is bound by reading its weights (as a
 * one-token dot is), and its repack streams: a panel's rows
 * are read a block at a time, 16 or 32 streams that the hardware prefetchers do not follow, so a
 * matrix that comes from memory (any model's weights: they exceed the caches) waits on every line.
 * Then the repack of block i prefetches step bytes at ahead + i * step: with ahead the next panel's
 * first byte (its rows contiguous) and step the panel's rows times the block bytes, one pass over the
 * blocks fetches the whole next panel, one panel ahead, spread evenly (bench_gemm --cold, 1 thread,
 * 5 tokens: Q8_0 4864 x 896 0.86 -> 0.34 ms, the 49152 x 576 lm_head 4.1 -> 1.9 ms). NULL: none. A
 * macro: GCC deletes calls of a function that only prefetches. */
#define MF_GEMM_STREAM_AHEAD(ahead, i, step)                                                                           \
    do {                                                                                                               \
        if (ahead) {                                                                                                   \
            const char *p_ = (const char *)(ahead) + (size_t)(i) * (size_t)(step);                                     \
            for (size_t l_ = 0; l_ < ((size_t)(step) + 63) / 64; l_++) _mm_prefetch(p_ + 64 * l_, _MM_HINT_T0);       \
        }                                                                                                              \
    } while (0)

/* The same for a GEMM that packs a panel's blocks in chunks across all panels before the next chunk
 * (so the next panel's bytes it needs are not contiguous): block i of each of the next panel's rows
 * rows ahead, row_bytes apart. */
#define MF_GEMM_STREAM_AHEAD_ROWS(ahead, i, block_bytes, rows, row_bytes)                                              \
    do {                                                                                                               \
        if (ahead)                                                                                                     \
            for (int r_ = 0; r_ < (rows); r_++)                                                                        \
                _mm_prefetch((const char *)(ahead) + (size_t)r_ * (row_bytes) + (size_t)(i) * (block_bytes), _MM_HINT_T0); \
    } while (0)

/* The next panel of rows [o, o + rows) within [o0, o1) for MF_GEMM_STREAM_AHEAD when the GEMM runs few
 * tokens (at most few), else NULL. */
static inline const uint8_t *mf_gemm_ahead(const mf_weight *w, int64_t o, int64_t rows, int64_t o1, int64_t nt,
                                           int64_t few) {
    return nt <= few && o + rows < o1 ? (const uint8_t *)w->data + (size_t)(o + rows) * w->row_bytes : NULL;
}

/* What the passes of a packed few-token path (tokens two at a time over one 16-row panel of
 * pblk-byte blocks, nb of them, the panel in cache after the first pass) fetch meanwhile, as a byte
 * offset from the block at hand (0: nothing): the first pass streams the panel eight blocks ahead
 * into L1; the second pass, computing from cache, fetches the same block of the next panel into L2
 * (has_next: this thread runs one), so that the memory keeps streaming while it computes. Later
 * passes fetch nothing. Zen 4, 2 threads, bench_gemm --cold --packed, alternating
 * builds: q8_0 151936 x 896 (a 0.5B model's output matrix), 4 tokens 5.2-5.7 -> 4.4-5.2 ms, 8
 * tokens 8.9-9.1 -> 7.6-8.0; q4_1 4864 x 896, 8 tokens 0.22-0.26 -> 0.20-0.22. Into L2 rather than
 * L1 (a whole panel's lines in one pass are more misses than L1 tracks at once): q8_0 151936 x 896,
 * medians of four, 4 tokens 6.4 -> 5.9 ms, 8 tokens 10.4 -> 9.3 (the machine slower that hour);
 * bench_step 0.5B Q4_0, medians of eight, 4 sequences 17.0 -> 15.8 ms, 8 sequences 26.9 -> 23.4.
 * Into L2, a second pass of one token (3 tokens) gains from it too, where into L1 it had not: q8_0
 * 151936 x 896, 3 tokens 7.9-11.4 -> 5.5-6.5 ms; bench_step -s 3 14.7 -> 13.5 ms (medians of six). */
static inline size_t mf_few_pass_ahead(int pass, size_t pblk, int64_t nb, bool has_next) {
    return pass == 0 ? 8 * pblk : pass == 1 && has_next ? (size_t)nb * pblk : 0;
}

/* Prefetch the pblk bytes at b + ahead (ahead 0: nothing): the first pass's eight blocks ahead into
 * L1, the next panel into L2 (mf_few_pass_ahead). A macro: GCC judges a function that only
 * prefetches free of effects and may delete its calls. */
#define MF_FEW_PREFETCH(b, ahead, pblk)                                                                               \
    do {                                                                                                               \
        if ((ahead) == 8 * (pblk))                                                                                     \
            for (size_t l_ = 0; l_ < (pblk); l_ += 64) _mm_prefetch((const char *)(b) + (ahead) + l_, _MM_HINT_T0);  \
        else if (ahead)                                                                                                \
            for (size_t l_ = 0; l_ < (pblk); l_ += 64) _mm_prefetch((const char *)(b) + (ahead) + l_, _MM_HINT_T1);  \
    } while (0)

/* Pass k of the n_pass passes a few-token path makes over a panel of nb blocks of pblk bytes fetches
 * its share, the k-th of n_pass equal parts, of the next panel (next, contiguous with this one; NULL:
 * none) into L2, spread evenly over its blocks: the AVX2 paths pass over each panel once per half
 * and token (or pair of tokens), and so the memory streams at an even pace while the later passes
 * compute from cache (fetching the whole next panel in one pass left it idle through the others).
 * The cursor advances in 16.16 fixed point, with no division per block (the share was formed with
 * two 64-bit divisions a block, and its lines' loop waited on them): Zen 3, 2 threads,
 * `bench_gemm --cold --packed q8_0 151936 896 4`, four alternations, 12.5-16.6 -> 8.3-11.1 ms; one
 * and eight tokens, and Q4_K's two, level within the noise. */
typedef struct {
    uintptr_t line, base, end; /* the next line to fetch; where the share starts and ends */
    uint64_t pos, inc;         /* bytes into the share after the blocks so far, and per block (16.16) */
} mf_few_share;

static inline mf_few_share mf_few_share_of(const void *next, int k, int n_pass, int64_t nb, size_t pblk) {
    mf_few_share s = {0, 0, 0, 0, 0};
    if (!next) return s;
    const size_t total = (size_t)nb * pblk, lo = (size_t)k * total / (size_t)n_pass;
    const size_t hi = (size_t)(k + 1) * total / (size_t)n_pass;
    s.base = (uintptr_t)next + lo;
    s.line = s.base & ~(uintptr_t)63;
    s.end = (uintptr_t)next + hi;
    s.inc = (((uint64_t)(hi - lo) << 16) + (uint64_t)nb - 1) / (uint64_t)nb;
    return s;
}

/* After each block of the pass: fetch the share's lines up to its part so far. A macro, as above. */
#define MF_FEW_SHARE_STEP(s)                                                                                           \
    do {                                                                                                               \
        (s).pos += (s).inc;                                                                                            \
        const uintptr_t t_ = MF_MIN((s).end, (s).base + (uintptr_t)((s).pos >> 16));                                   \
        for (; (s).line < t_; (s).line += 64) _mm_prefetch((const char *)(s).line, _MM_HINT_T1);                      \
    } while (0)

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
const mf_cpu_gemm *mf_cpu_gemm_q8_0_rp_avx2(void); /* Q8_0's one-chain order (MF_ORDER_REPACKED) */
const mf_cpu_gemm *mf_cpu_gemm_q6_K_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q4_1_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_1_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_K_avx2(void);
/* IQ4_NL in llama.cpp's repacked order (one chain per output; also what the AVX-512 level runs) */
const mf_cpu_gemm *mf_cpu_gemm_iq4_nl_avx2(void);
/* Q2_K, Q3_K and IQ4_XS in the order of their AVX2 dots (eight int32 lanes per super-block: the
 * dots of every x86 level; gemm_lanes_avx2.c, with Q6_K's) */
const mf_cpu_gemm *mf_cpu_gemm_q2_K_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_q3_K_avx2(void);
const mf_cpu_gemm *mf_cpu_gemm_iq4_xs_avx2(void);
/* The 32-value formats' AVX2 GEMMs built with AVX-VNNI (vpdpbusd on ymm; the CPU must have it): the
 * same bits (gemm_avx2_util.h). */
const mf_cpu_gemm *mf_cpu_gemm_q4_0_avxvnni(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_0_avxvnni(void);
const mf_cpu_gemm *mf_cpu_gemm_q8_0_avxvnni(void);
const mf_cpu_gemm *mf_cpu_gemm_q8_0_rp_avxvnni(void);
const mf_cpu_gemm *mf_cpu_gemm_q4_1_avxvnni(void);
const mf_cpu_gemm *mf_cpu_gemm_q5_1_avxvnni(void);
#endif

#endif /* MF_CPU_GEMM_H */
