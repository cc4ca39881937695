/* gemm_iq4_nl_avx2.c: the IQ4_NL GEMM for AVX2 (see cpu_gemm.h), in llama.cpp's repacked IQ4_NL order,
 * every output bit for bit mf_cpu_dot_iq4_nl_x86_ref's: per block s = fma(exact block sum,
 * d_w * d_a, s), one chain per output. The table's values are at most 127 in magnitude, as Q8_0's
 * weights, so the products are formed as Q8_0's (|w| against the activations signed by w).
 *
 * Packed layout (mf_weight.packed): Q4_0's (gemm_q4_0_packed.h), whose blocks have the same fields
 * (a half scale, then 16 nibble bytes): per panel of 16 rows and block, four 64-byte vectors, vector
 * k lane r = row r's qs dword k (the codes of values 4k..4k+3 in the low nibbles, 16+4k.. in the
 * high ones), then the 16 rows' half-float d. One to four tokens run straight from it, the values
 * of each step of eight rows looked up from their nibbles; more take the shared 8-row panel GEMM of
 * gemm_q8_avx2.h in its one-chain order (q8a_chain), its panels filled from the packed copy (or from
 * the file's blocks for a weight that was not packed). */
#include "x86/gemm_q4_0_packed.h"
#include "x86/gemm_q8_avx2.h"
#include "x86/x86_common.h"

MF_STATIC_ASSERT(sizeof(mf_block_iq4_nl) == sizeof(mf_block_q4_0) &&
                     offsetof(mf_block_iq4_nl, qs) == offsetof(mf_block_q4_0, qs),
                 "IQ4_NL and Q4_0 blocks share a layout, so their packed layouts are one");

enum { IQ4P_PBLK = MF_Q40_PBLK, IQ4P_D = 256, IQ4P_FEW = 4 };

static inline __m256i iq4_lut(void) { return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)mf_iq4nl_values)); }

/* The block's 32 values from the file (first field its half scale, as q8a_pack expects) */
static inline __attribute__((always_inline)) __m256i load_iq4_nl(const uint8_t *block) {
    return mf_x86_iq4nl32(((const mf_block_iq4_nl *)block)->qs);
}

/* Step p (values 4p..4p+3) of the eight rows of half h of the packed block b, as signed values */
static inline __attribute__((always_inline)) __m256i packed_step(const uint8_t *b, int h, int p, __m256i lut) {
    const __m256i v = _mm256_loadu_si256((const __m256i *)(b + 64 * (p & 3) + 32 * h));
    return _mm256_shuffle_epi8(lut, _mm256_and_si256(p < 4 ? v : _mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)));
}

static __attribute__((noinline)) void pack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                           uint8_t *panel, const uint8_t *ahead) {
    q8a_pack(false, w, ob, nr, i0, i1, panel, ahead, sizeof(mf_block_iq4_nl), load_iq4_nl);
}

/* Blocks [i0, i1) of the eight rows [ob, ob + 8) (half ob / 8 % 2 of their packed panel) into the
 * panel layout of gemm_q8_avx2.h */
static __attribute__((noinline)) void unpack(const mf_weight *w, int64_t ob, int nr, int64_t i0, int64_t i1,
                                             uint8_t *panel, const uint8_t *ahead) {
    (void)nr, (void)ahead;
    const __m256i lut = iq4_lut();
    const int h = (int)(ob / 8 % 2);
    const uint8_t *p = (const uint8_t *)w->packed + (size_t)(ob - 8 * h) * w->row_bytes;
    for (int64_t i = i0; i < i1; i++, panel += Q8A_BLOCK_BYTES) {
        const uint8_t *b = p + (size_t)i * IQ4P_PBLK;
        __m256i *o = (__m256i *)panel;
        for (int k = 0; k < 8; k++) {
            const __m256i v = packed_step(b, h, k, lut);
            _mm256_store_si256(o + 2 * k, _mm256_sign_epi8(v, v));
            _mm256_store_si256(o + 2 * k + 1, v);
        }
        _mm256_store_ps((float *)(o + 16), _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + IQ4P_D + 16 * h))));
    }
}

/* nt (1..4) tokens against half h of the packed panel p, nb blocks: per block each row's exact sum
 * over the eight steps, then its chain's fma (q8a_chain's steps, the values from the nibbles) */
static inline __attribute__((always_inline)) void few_pass(const int nt, const uint8_t *p, int h, int64_t nb,
                                                           const uint8_t *act, size_t act_row, float *y, size_t ldy,
                                                           __m256i mask) {
    const __m256i lut = iq4_lut();
    __m256 acc[IQ4P_FEW];
    for (int t = 0; t < nt; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < nb; i++) {
        const uint8_t *b = p + (size_t)i * IQ4P_PBLK;
        __m256i l[IQ4P_FEW];
        for (int t = 0; t < nt; t++) l[t] = _mm256_setzero_si256();
        for (int s = 0; s < 8; s++) {
            const __m256i v = packed_step(b, h, s, lut), va = _mm256_sign_epi8(v, v);
            for (int t = 0; t < nt; t++) {
                const mf_block_q8_0 *a = (const mf_block_q8_0 *)(act + (size_t)t * act_row) + i;
                l[t] = mf_avx2_dpbusd(l[t], va, _mm256_sign_epi8(mf_avx2_bcast4(a->qs + 4 * s), v));
            }
        }
        const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(b + IQ4P_D + 16 * h)));
        for (int t = 0; t < nt; t++) {
            const mf_block_q8_0 *a = (const mf_block_q8_0 *)(act + (size_t)t * act_row) + i;
            acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(l[t]), _mm256_mul_ps(dw, _mm256_set1_ps(_cvtsh_ss(a->d))), acc[t]);
        }
    }
    for (int t = 0; t < nt; t++) _mm256_maskstore_ps(y + (size_t)t * ldy, mask, acc[t]);
}

/* Up to IQ4P_FEW tokens from the packed copy: per 16-row panel, one pass per half */
static void few(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt, float *y,
                size_t ldy) {
    const int64_t nb = w->ne[0] / 32;
    for (int64_t o = o0; o < o1; o += 16) {
        const int64_t nr = MF_MIN(16, o1 - o);
        const uint8_t *p = (const uint8_t *)w->packed + (size_t)o * w->row_bytes;
        for (int h = 0; h < (nr > 8 ? 2 : 1); h++) {
            const __m256i mask = mf_avx2_row_mask((int)MF_MIN(8, nr - 8 * h));
            float *yo = y + o + 8 * h;
            switch (nt) {
            case 1: few_pass(1, p, h, nb, act, act_row, yo, ldy, mask); break;
            case 2: few_pass(2, p, h, nb, act, act_row, yo, ldy, mask); break;
            case 3: few_pass(3, p, h, nb, act, act_row, yo, ldy, mask); break;
            default: few_pass(4, p, h, nb, act, act_row, yo, ldy, mask); break;
            }
        }
    }
}

static const mf_cpu_gemm gemm;

static void run(const mf_weight *w, int64_t o0, int64_t o1, const uint8_t *act, size_t act_row, int64_t nt,
                float *y, size_t ldy, void *scratch) {
    const bool packed = mf_cpu_gemm_packed(&gemm, w);
    if (packed && nt <= IQ4P_FEW)
        few(w, o0, o1, act, act_row, nt, y, ldy);
    else
        q8a_run(false, true, packed ? unpack : pack, w, o0, o1, act, act_row, nt, y, ldy, scratch);
}

/* min_tokens: as Q8_0's one-chain GEMM (gemm_q8_0_avx2.c) for a weight in the file's layout (fewer
 * tokens take the eight-row dots); a packed weight takes this GEMM for every token count */
static const mf_cpu_gemm gemm = {.min_tokens = 5,
                                  .scratch_size = q8a_scratch_size,
                                  .run = run,
                                  .packed_size = mf_q4_0_packed_size,
                                  .pack = mf_q4_0_pack,
                                  .packed_row = mf_q4_0_packed_row};

const mf_cpu_gemm *mf_cpu_gemm_iq4_nl_avx2(void) { return &gemm; }
