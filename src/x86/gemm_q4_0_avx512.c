/* gemm_q4_0_avx512.c: the Q4_0 prefill GEMM for AVX-512 VNNI (see cpu_gemm.h). Each output keeps
 * the repacked order's single float chain over the blocks i, s = fma((float)isum_i, d_w_i * d_a_i, s);
 * only the exact integer block sums isum_i = sum((q - 8) * a) are formed differently, as
 * sum(q * a) - 8 * sum(a), by vpdpbusd with the nibbles q (0..15) as its unsigned operand and the
 * Q8_0 activations a as its signed one, sixteen weight rows per vector. */
#include "cpu/cpu_dot_order.h"
#include "cpu/cpu_gemm.h"
#include "x86/gemm_q4_0_packed.h"

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

/* The work goes in chunks of CHUNK blocks (K / 32 = nb blocks in all; each output's chain runs over
 * the chunks in order, parked in y between them) and tiles of up to TILE activation rows: per tile and
 * chunk the activations are packed once, then each 16-row weight panel's slice is unpacked once and
 * serves every group of 8 rows of the tile. The packed activations (TILE * CHUNK * 40 bytes) stay in
 * L2 across the panels, the panel slice (18 KB) in L1 across the groups.
 * Scratch layouts:
 *   panel: the slice of 16 weight rows, for block i and step k (0..7) 64 bytes whose i32 lane r holds
 *          row r's nibbles for positions 4k..4k+3 of the block (k < 4: low nibbles of bytes 4k..4k+3,
 *          k >= 4: high nibbles of bytes 4(k-4)..4(k-4)+3), one byte each: [CHUNK][8][64 bytes];
 *   dw:    the 16 rows' block scales as floats, [CHUNK][16];
 *   tile:  the tile's activation rows in groups of 8, [group][block of the chunk][320 bytes]: the 8
 *          rows' 32 quants, then 8 x i32 corrections -8 * sum(quants), then 8 x f32 scales d_a. */
#define GROUP 8
#define CHUNK 32
#define TILE 512
#define GBLK (GROUP * 32 + GROUP * 4 + GROUP * 4)

static size_t scratch_size(int64_t K) {
    (void)K;
    return CHUNK * (8 * 64 + 16 * sizeof(float)) + TILE / GROUP * CHUNK * GBLK;
}

/* Lanes [r0 r1 r2 r3 | r0 r1 r2 r3]: each 128-bit half's four lanes of rows a..d summed. */
static inline __m256i sum4_rows(__m256i a, __m256i b, __m256i c, __m256i d) {
    const __m256i ab = _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
    const __m256i cd = _mm256_add_epi32(_mm256_unpacklo_epi32(c, d), _mm256_unpackhi_epi32(c, d));
    return _mm256_add_epi32(_mm256_unpacklo_epi64(ab, cd), _mm256_unpackhi_epi64(ab, cd));
}

/* Blocks [i0, i0 + cn) of one group of n <= 8 activation rows (act, act + act_row, ...) into the tile
 * layout at dst; the slots of missing rows are zeros (their outputs are never stored). The same blocks
 * of the next group's n_next rows are prefetched: eight short strided streams that the hardware
 * prefetchers do not pick up in time. */
static void pack_group(const uint8_t *act, size_t act_row, int n, int64_t i0, int64_t cn, uint8_t *dst, int n_next) {
    const __m256i ones8 = _mm256_set1_epi8(1);
    for (int64_t i = i0; i < i0 + cn; i++, dst += GBLK) {
        for (int u = 0; u < n_next; u++)
            _mm_prefetch((const char *)((const mf_block_q8_0 *)(act + (size_t)(GROUP + u) * act_row) + i), _MM_HINT_T0);
        __m256i s[GROUP];
        /* the eight half scales gathered in two u64 by shifts: eight 2-byte stores read back as one
         * vector would stall on store forwarding */
        uint64_t dh[2] = {0, 0};
        for (int u = 0; u < GROUP; u++) {
            __m256i q = _mm256_setzero_si256();
            if (u < n) {
                const mf_block_q8_0 *b = (const mf_block_q8_0 *)(act + (size_t)u * act_row) + i;
                uint16_t d;
                memcpy(&d, &b->d, 2);
                dh[u / 4] |= (uint64_t)d << (16 * (u % 4));
                q = _mm256_loadu_si256((const __m256i *)b->qs);
            }
            _mm256_storeu_si256((__m256i *)(dst + 32 * u), q);
            s[u] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones8, q);
        }
        const __m256i h0 = sum4_rows(s[0], s[1], s[2], s[3]), h1 = sum4_rows(s[4], s[5], s[6], s[7]);
        const __m256i sum =
            _mm256_add_epi32(_mm256_permute2x128_si256(h0, h1, 0x20), _mm256_permute2x128_si256(h0, h1, 0x31));
        const __m256i corr = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32(sum, 3));
        _mm256_storeu_si256((__m256i *)(dst + 256), corr);
        _mm256_storeu_ps((float *)(dst + 288), _mm256_cvtph_ps(_mm_set_epi64x((long long)dh[1], (long long)dh[0])));
    }
}

/* Blocks [i0, i0 + cn) of rows w, w + row_bytes, ... (nr <= 16 of them; missing rows repeat the last
 * one) into the panel layout. Row r goes to lane r: the four 128-bit lanes of z[j] hold rows j, 4 + j,
 * 8 + j, 12 + j, so the in-lane 4x4 transpose of the dwords leaves row 4L + j's dword k in lane 4L + j
 * of step k. The same blocks of the 16 rows at next (if any) are prefetched for the next panel. */
static void pack_panel(const uint8_t *w, size_t row_bytes, int nr, int64_t i0, int64_t cn, __m512i *panel,
                       float *dw, const uint8_t *next) {
    const mf_block_q4_0 *row[16];
    for (int r = 0; r < 16; r++) row[r] = (const mf_block_q4_0 *)(w + (size_t)(r < nr ? r : nr - 1) * row_bytes);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t i = i0; i < i0 + cn; i++, panel += 8, dw += 16) {
        if (next && (i - i0) % 3 == 0)
            for (int r = 0; r < 16; r++)
                _mm_prefetch((const char *)((const mf_block_q4_0 *)(next + (size_t)r * row_bytes) + i), _MM_HINT_T1);
        __m512i z[4];
        for (int j = 0; j < 4; j++) {
            z[j] = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)row[j][i].qs));
            z[j] = _mm512_inserti32x4(z[j], _mm_loadu_si128((const __m128i *)row[4 + j][i].qs), 1);
            z[j] = _mm512_inserti32x4(z[j], _mm_loadu_si128((const __m128i *)row[8 + j][i].qs), 2);
            z[j] = _mm512_inserti32x4(z[j], _mm_loadu_si128((const __m128i *)row[12 + j][i].qs), 3);
        }
        const __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
        const __m512i d[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                              _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
        for (int k = 0; k < 4; k++) {
            _mm512_store_si512(panel + k, _mm512_and_si512(d[k], m4));
            _mm512_store_si512(panel + 4 + k, _mm512_and_si512(_mm512_srli_epi16(d[k], 4), m4));
        }
        uint64_t h[4];
        for (int j = 0; j < 4; j++) {
            uint16_t x[4];
            for (int r = 0; r < 4; r++) memcpy(&x[r], &row[4 * j + r][i].d, 2);
            h[j] = (uint64_t)x[0] | (uint64_t)x[1] << 16 | (uint64_t)x[2] << 32 | (uint64_t)x[3] << 48;
        }
        const __m256i dh = _mm256_set_epi64x((long long)h[3], (long long)h[2], (long long)h[1], (long long)h[0]);
        _mm512_store_ps(dw, _mm512_cvtph_ps(dh));
    }
}

/* acc += the 16 i32 lanes' dot of the unsigned bytes of w with the four signed bytes at p, broadcast
 * from memory inside the instruction ({1to16}). Written in asm because the compiler emits a separate
 * vpbroadcastd for _mm512_set1_epi32(*p), which costs a vector-pipe slot per dot: measured 20% slower. */
#define DPBUSD_BCST(acc, w, p) __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*(p)))

/* 16 rows x T tokens (one packed group) over nb blocks, continuing the chains left in y unless
 * first. The T accumulators are named variables, not an array, which the compiler would keep in
 * memory (measured: a store per token and block). */
static inline __attribute__((always_inline)) void micro(const int T, int64_t nb, const __m512i *panel,
                                                        const float *dw, const uint8_t *grp, float *y, size_t ldy,
                                                        __mmask16 mask, bool first) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
#define MICRO_LOAD(t, s)                                                                                               \
    if (T > (t) && !first) s = _mm512_maskz_loadu_ps(mask, y + (size_t)(t) * ldy)
    MICRO_LOAD(0, s0); MICRO_LOAD(1, s1); MICRO_LOAD(2, s2); MICRO_LOAD(3, s3);
    MICRO_LOAD(4, s4); MICRO_LOAD(5, s5); MICRO_LOAD(6, s6); MICRO_LOAD(7, s7);
#undef MICRO_LOAD
    for (int64_t i = 0; i < nb; i++, panel += 8, dw += 16, grp += GBLK) {
        const __m512i w0 = _mm512_load_si512(panel), w1 = _mm512_load_si512(panel + 1);
        const __m512i w2 = _mm512_load_si512(panel + 2), w3 = _mm512_load_si512(panel + 3);
        const __m512i w4 = _mm512_load_si512(panel + 4), w5 = _mm512_load_si512(panel + 5);
        const __m512i w6 = _mm512_load_si512(panel + 6), w7 = _mm512_load_si512(panel + 7);
        const __m512 dwv = _mm512_load_ps(dw);
        const int32_t *corr = (const int32_t *)(grp + 256);
        const float *da = (const float *)(grp + 288);
        /* token t: acc = -8 * sum(a) + sum(q * a) over the block = the exact block sum; then its chain step */
#define MICRO_TOKEN(t, s)                                                                                              \
    if (T > (t)) {                                                                                                     \
        const int32_t *q = (const int32_t *)(grp + 32 * (t));                                                          \
        __m512i acc = _mm512_set1_epi32(corr[t]);                                                                      \
        DPBUSD_BCST(acc, w0, q); DPBUSD_BCST(acc, w1, q + 1);                                                         \
        DPBUSD_BCST(acc, w2, q + 2); DPBUSD_BCST(acc, w3, q + 3);                                                     \
        DPBUSD_BCST(acc, w4, q + 4); DPBUSD_BCST(acc, w5, q + 5);                                                     \
        DPBUSD_BCST(acc, w6, q + 6); DPBUSD_BCST(acc, w7, q + 7);                                                     \
        s = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(dwv, _mm512_set1_ps(da[t])), s);                   \
    }
        MICRO_TOKEN(0, s0); MICRO_TOKEN(1, s1); MICRO_TOKEN(2, s2); MICRO_TOKEN(3, s3);
        MICRO_TOKEN(4, s4); MICRO_TOKEN(5, s5); MICRO_TOKEN(6, s6); MICRO_TOKEN(7, s7);
#undef MICRO_TOKEN
    }
#define MICRO_STORE(t, s)                                                                                              \
    if (T > (t)) _mm512_mask_storeu_ps(y + (size_t)(t) * ldy, mask, s)
    MICRO_STORE(0, s0); MICRO_STORE(1, s1); MICRO_STORE(2, s2); MICRO_STORE(3, s3);
    MICRO_STORE(4, s4); MICRO_STORE(5, s5); MICRO_STORE(6, s6); MICRO_STORE(7, s7);
#undef MICRO_STORE
}

/* ---- the packed layout (gemm_q4_0_packed.h) ---- */
#define PBLK MF_Q40_PBLK

/* The packed panel at p: blocks [i0, i0 + cn) into the panel slice layout; the same blocks of the
 * panel at next (if any) are prefetched. */
static void unpack_panel(const uint8_t *p, int64_t i0, int64_t cn, __m512i *panel, float *dw, const uint8_t *next) {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    for (int64_t i = i0; i < i0 + cn; i++, panel += 8, dw += 16) {
        const uint8_t *b = p + (size_t)i * PBLK;
        if (next)
            for (int l = 0; l < PBLK; l += 64) _mm_prefetch((const char *)next + (size_t)i * PBLK + l, _MM_HINT_T1);
        for (int k = 0; k < 4; k++) {
            const __m512i u = _mm512_loadu_si512(b + 64 * k);
            _mm512_store_si512(panel + k, _mm512_and_si512(u, m4));
            _mm512_store_si512(panel + 4 + k, _mm512_and_si512(_mm512_srli_epi16(u, 4), m4));
        }
        _mm512_store_ps(dw, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 256))));
    }
}

/* Up to FEW_MAX tokens (decode steps of several sequences, speculative verifications, a serving
 * step's small prompt chunks) straight from a packed weight: no panel slice, each block's nibbles
 * split in registers and used by up to FEW tokens (16 accumulators), a panel's further tokens in
 * further passes over it while it is in cache. Per token and block the chain step is the GEMM's,
 * with the correction -8 * sum(a) and d_a read from the rows' side data (mf_cpu_q4_0_aux: the matmul
 * computes it once per row for up to FEW_MAX tokens, packed_aux_tokens). The GEMM's inner step is
 * the same; what it adds is the panel unpacking. Measured against it (Zen 4, 2 threads, weights from
 * memory, `bench_gemm --cold --packed q4_0 N K T`): 4864 x 896 at 8 tokens 0.120 against 0.156 ms,
 * at 16 0.204 against 0.245, at 32 (two passes) 0.407 against 0.434; 14336 x 4096 at 16 tokens 2.66
 * against 3.42 ms, at 32 5.39 against 6.15. From 48 tokens on the two were level. */
#define FEW 16
#define FEW_MAX 32

static inline __attribute__((always_inline)) void few_panel(const int T, int64_t nb, const uint8_t *p,
                                                            const uint8_t *act, size_t act_row, float *y, size_t ldy,
                                                            __mmask16 mask) {
    const size_t aux_at = mf_cpu_q4_0_aux_offset(32 * nb);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 s[FEW];
    for (int t = 0; t < T; t++) s[t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * PBLK;
        /* The stream of one panel after another, which the prefetchers would otherwise take up
         * late: with one or two tokens eight blocks ahead into L1; with more 24 blocks ahead into
         * L2, as with a long K the tokens' activation blocks (K = 4864, four tokens: 25 KB) share
         * L1 with the stream. Zen 4, 2 threads, bench_gemm --cold --packed q4_0 896 4864 4, four
         * runs alternating: 0.091-0.113 ms eight blocks ahead into L1, 0.072-0.083 this way (4864
         * x 896 level); bench_step -s 4 decode step 14.6 -> 13.3 ms (medians of 6 alternating
         * runs). With one token the L2 fetch was slower (bench_step -s 1 10.3 -> 10.6 ms). */
        if (T <= 2)
            for (int l = 0; l < PBLK; l += 64) _mm_prefetch((const char *)b + 8 * PBLK + l, _MM_HINT_T0);
        else
            for (int l = 0; l < PBLK; l += 64) _mm_prefetch((const char *)b + 24 * PBLK + l, _MM_HINT_T1);
        __m512i q[8];
        for (int j = 0; j < 4; j++) {
            const __m512i u = _mm512_loadu_si512(b + 64 * j);
            q[j] = _mm512_and_si512(u, m4);
            q[4 + j] = _mm512_and_si512(_mm512_srli_epi16(u, 4), m4);
        }
        const __m512 dwv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(b + 256)));
        for (int t = 0; t < T; t++) {
            const uint8_t *at = act + (size_t)t * act_row;
            const int32_t *qa = (const int32_t *)(at + (size_t)i * sizeof(mf_block_q8_0) + 2);
            int32_t c;
            float da;
            mf_cpu_q4_0_aux_get(at + aux_at, nb, i, &c, &da);
            __m512i acc = _mm512_set1_epi32(c);
            for (int k = 0; k < 8; k++) DPBUSD_BCST(acc, q[k], qa + k);
            s[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc), _mm512_mul_ps(dwv, _mm512_set1_ps(da)), s[t]);
        }
    }
    for (int t = 0; t < T; t++) _mm512_mask_storeu_ps(y + (size_t)t * ldy, mask, s[t]);
}

typedef void (*few_fn)(int64_t nb, const uint8_t *p, const uint8_t *act, size_t act_row, float *y, size_t ldy,
                       __mmask16 mask);
#define FEW_FN(T)                                                                                                      \
    static void few_##T(int64_t nb, const uint8_t *p, const uint8_t *act, size_t act_row, float *y, size_t ldy,       \
                        __mmask16 mask) {                                                                              \
        few_panel(T, nb, p, act, act_row, y, ldy, mask);                                                               \
    }
FEW_FN(1) FEW_FN(2) FEW_FN(3) FEW_FN(4) FEW_FN(5) FEW_FN(6) FEW_FN(7) FEW_FN(8)
FEW_FN(9) FEW_FN(10) FEW_FN(11) FEW_FN(12) FEW_FN(13) FEW_FN(14) FEW_FN(15) FEW_FN(16)
static const few_fn few_fns[FEW] = {few_1, few_2,  few_3,  few_4,  few_5,  few_6,  few_7,  few_8,
                                    few_9, few_10, few_11, few_12, few_13, few_14, few_15, few_16};

static void run_few(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                    float *y, size_t ldy) {
    const int64_t nb = w->ne[0] / 32;
    for (int64_t o = o0; o < o1; o += 16) {
        const __mmask16 mask = (__mmask16)((1u << MF_MIN(16, o1 - o)) - 1);
        const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
        for (int64_t t0 = 0; t0 < nt; t0 += FEW)
            few_fns[MF_MIN(FEW, nt - t0) - 1](nb, p, act + (size_t)t0 * act_row, act_row, y + (size_t)t0 * ldy + o, ldy,
                                              mask);
    }
}

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const bool packed = mf_cpu_gemm_packed(&gemm, w);
    if (packed && nt <= FEW_MAX) {
        run_few(w, o0, o1, act, act_row, nt, y, ldy);
        return;
    }
    const int64_t nb = w->ne[0] / 32;
    __m512i *panel = scratch;
    float *dw = (float *)(panel + 8 * CHUNK);
    uint8_t *tile = (uint8_t *)(dw + 16 * CHUNK);
    for (int64_t t0 = 0; t0 < nt; t0 += TILE) {
        const int64_t tn = MF_MIN(TILE, nt - t0);
        for (int64_t c = 0; c < nb; c += CHUNK) {
            const int64_t cn = MF_MIN(CHUNK, nb - c);
            const bool first = c == 0;
            for (int64_t g = 0; g < tn; g += GROUP)
                pack_group(act + (size_t)(t0 + g) * act_row, act_row, (int)MF_MIN(GROUP, tn - g), c, cn,
                           tile + (size_t)(g / GROUP * cn) * GBLK, (int)MF_MAX(0, MF_MIN(GROUP, tn - g - GROUP)));
            for (int64_t o = o0; o < o1; o += 16) {
                const int nr = (int)MF_MIN(16, o1 - o);
                const __mmask16 mask = (__mmask16)((1u << nr) - 1);
                const uint8_t *wo = (const uint8_t *)(packed ? w->packed : w->data) + (size_t)o * w->row_bytes;
                const uint8_t *next = o + 32 <= o1 ? wo + 16 * w->row_bytes : NULL;
                if (packed)
                    unpack_panel(wo, c, cn, panel, dw, next);
                else
                    pack_panel(wo, w->row_bytes, nr, c, cn, panel, dw, next);
                for (int64_t g = 0; g < tn; g += GROUP) {
                    const uint8_t *grp = tile + (size_t)(g / GROUP * cn) * GBLK;
                    float *yg = y + (size_t)(t0 + g) * ldy + o;
                    /* the next group's outputs, read (chains parked in y) and written: their misses
                     * would otherwise stall the stores at the end of each pass */
                    for (int64_t u = g + GROUP; u < MF_MIN(g + 2 * GROUP, tn); u++)
                        _mm_prefetch((const char *)(y + (size_t)(t0 + u) * ldy + o), _MM_HINT_ET0);
                    switch (MF_MIN(GROUP, tn - g)) {
                    case 1: micro(1, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    case 2: micro(2, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    case 3: micro(3, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    case 4: micro(4, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    case 5: micro(5, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    case 6: micro(6, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    case 7: micro(7, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    default: micro(8, cn, panel, dw, grp, yg, ldy, mask, first); break;
                    }
                }
            }
        }
    }
}

static const mf_cpu_gemm gemm = {.min_tokens = 2,
                                  .scratch_size = scratch_size,
                                  .run = run,
                                  .packed_size = mf_q4_0_packed_size,
                                  .pack = mf_q4_0_pack,
                                  .packed_row = mf_q4_0_packed_row,
                                  .packed_aux_tokens = FEW_MAX};

const mf_cpu_gemm *mf_cpu_gemm_q4_0_avx512(void) { return &gemm; }
