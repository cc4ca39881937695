/* quant.h: the weight and activation formats minfer reads, defined once for C and CUDA.
 *
 * Type ids are GGML's on-disk ids (append-only). Each quantized format stores a row of n values as
 * n / blck_size blocks; a block's layout is the struct below, little-endian, no padding. fp16 fields
 * are IEEE half bit patterns (mf_fp16). The type-traits table gives, for every id, the block size,
 * the bytes per block and, for formats minfer computes with, the reference (scalar) dequantize,
 * quantize and dot-product functions. Fast SIMD kernels live elsewhere and are tested against these. */
#ifndef MF_QUANT_H
#define MF_QUANT_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "minfer.h" /* mf_type */

#ifdef __CUDACC__
#define MF_STATIC_ASSERT(c, m) static_assert(c, m)
#else
#include <assert.h>
#define MF_STATIC_ASSERT(c, m) _Static_assert(c, m)
#endif



#define MF_QK4_0 32
#define MF_QK4_1 32
#define MF_QK5_0 32
#define MF_QK5_1 32
#define MF_QK8_0 32
#define MF_QK8_1 32
#define MF_QK_K 256
#define MF_K_SCALE_SIZE 12

/* x = (q - 8) * d, q = nibble. Element j < 16 is the low nibble of qs[j], j >= 16 the high nibble of qs[j-16]. */
typedef struct { uint16_t d; uint8_t qs[MF_QK4_0 / 2]; } mf_block_q4_0;
/* x = q * d + m */
typedef struct { uint16_t d, m; uint8_t qs[MF_QK4_1 / 2]; } mf_block_q4_1;
/* x = (q - 16) * d; bit 4 of element j is bit j of qh (little-endian u32 stored as bytes). */
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[MF_QK5_0 / 2]; } mf_block_q5_0;
/* x = q * d + m */
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[MF_QK5_1 / 2]; } mf_block_q5_1;
/* x = q * d */
typedef struct { uint16_t d; int8_t qs[MF_QK8_0]; } mf_block_q8_0;
/* Activation format for Q4_1/Q5_1 dots: d, and s = d * sum(qs). */
typedef struct { uint16_t d, s; int8_t qs[MF_QK8_1]; } mf_block_q8_1;

/* 8 sub-blocks of 32 with 6-bit scales and mins packed in scales[12] (see mf_get_scale_min_k4).
 * x = d * sc * q - dmin * m. qs: 4 chunks of 32 bytes; chunk c low nibbles = sub-block 2c,
 * high nibbles = sub-block 2c+1. */
typedef struct { uint16_t d, dmin; uint8_t scales[MF_K_SCALE_SIZE]; uint8_t qs[MF_QK_K / 2]; } mf_block_q4_K;
/* As Q4_K plus a 5th bit: bit 4 of element l of sub-block s is bit s of qh[l % 32]. Unsigned q. */
typedef struct { uint16_t d, dmin; uint8_t scales[MF_K_SCALE_SIZE]; uint8_t qh[MF_QK_K / 8]; uint8_t qs[MF_QK_K / 2]; } mf_block_q5_K;
/* 16 groups of 16 with int8 scales; 6-bit q = low 4 bits in ql, high 2 bits in qh; x = d * sc * (q - 32). */
typedef struct { uint8_t ql[MF_QK_K / 2]; uint8_t qh[MF_QK_K / 4]; int8_t scales[MF_QK_K / 16]; uint16_t d; } mf_block_q6_K;
/* Activation format for K-quant dots: float d, int8 q, and sums of each group of 16 q. */
typedef struct { float d; int8_t qs[MF_QK_K]; int16_t bsums[MF_QK_K / 16]; } mf_block_q8_K;

/* 16 groups of 16 with 4-bit scale (low nibble) and min (high nibble) in scales[g]; 2-bit q.
 * x = d * sc_g * q - dmin * m_g. Element e = 128h + 32k + l (l < 32) is bits 2k..2k+1 of qs[32h + l]. */
typedef struct { uint8_t scales[MF_QK_K / 16]; uint8_t qs[MF_QK_K / 4]; uint16_t d, dmin; } mf_block_q2_K;
/* 16 groups of 16 with 6-bit scales s_g (stored + 32, packed in scales[12]); 3-bit signed q:
 * low 2 bits as in Q2_K, bit 2 (set = no -4) is bit e / 32 of hmask[e % 32]. x = d * (s_g - 32) * q.
 * s_g: low 4 bits = g < 8 ? scales[g] & 15 : scales[g - 8] >> 4, high 2 bits = scales[8 + g % 4] >> 2 (g / 4). */
typedef struct { uint8_t hmask[MF_QK_K / 8]; uint8_t qs[MF_QK_K / 4]; uint8_t scales[12]; uint16_t d; } mf_block_q3_K;
/* Group g's scale s_g - 32 from a Q3_K block's packed scales (the layout above). */
static inline int mf_q3_K_scale(const uint8_t s[12], int g) {
    const int lo = g < 8 ? s[g] & 0xF : s[g - 8] >> 4;
    const int hi = (s[8 + g % 4] >> (2 * (g / 4))) & 3;
    return (lo | hi << 4) - 32;
}

/* Non-linear 4-bit: x = d * mf_iq4nl_values[q], q = nibble (order as Q4_0). */
typedef struct { uint16_t d; uint8_t qs[16]; } mf_block_iq4_nl;
/* IQ4_NL levels in super-blocks of 8 x 32 with 6-bit scales s_b (stored + 32): low 4 bits in
 * scales_l[b / 2] (nibble b % 2), high 2 bits at bit 2b of scales_h; sub-block b uses qs[16b..16b+15]
 * in Q4_0 nibble order. x = d * (s_b - 32) * mf_iq4nl_values[q]. */
typedef struct { uint16_t d; uint16_t scales_h; uint8_t scales_l[MF_QK_K / 64]; uint8_t qs[MF_QK_K / 2]; } mf_block_iq4_xs;
/* Sub-block b's scale s_b - 32 from an IQ4_XS block (the layout above). */
static inline int mf_iq4_xs_scale(const mf_block_iq4_xs *x, int b) {
    return (((x->scales_l[b / 2] >> (4 * (b % 2))) & 0xF) | ((x->scales_h >> (2 * b)) & 3) << 4) - 32;
}

MF_STATIC_ASSERT(sizeof(mf_block_iq4_nl) == 18, "iq4_nl block size");
MF_STATIC_ASSERT(sizeof(mf_block_iq4_xs) == 136, "iq4_xs block size");
MF_STATIC_ASSERT(sizeof(mf_block_q2_K) == 84, "q2_K block size");
MF_STATIC_ASSERT(sizeof(mf_block_q3_K) == 110, "q3_K block size");
MF_STATIC_ASSERT(sizeof(mf_block_q4_0) == 18, "q4_0 block size");
MF_STATIC_ASSERT(sizeof(mf_block_q4_1) == 20, "q4_1 block size");
MF_STATIC_ASSERT(sizeof(mf_block_q5_0) == 22, "q5_0 block size");
MF_STATIC_ASSERT(sizeof(mf_block_q5_1) == 24, "q5_1 block size");
MF_STATIC_ASSERT(sizeof(mf_block_q8_0) == 34, "q8_0 block size");
MF_STATIC_ASSERT(sizeof(mf_block_q8_1) == 36, "q8_1 block size");
MF_STATIC_ASSERT(sizeof(mf_block_q4_K) == 144, "q4_K block size");
MF_STATIC_ASSERT(sizeof(mf_block_q5_K) == 176, "q5_K block size");
MF_STATIC_ASSERT(sizeof(mf_block_q6_K) == 210, "q6_K block size");
MF_STATIC_ASSERT(sizeof(mf_block_q8_K) == 292, "q8_K block size");

/* The 16 levels of IQ4_NL and IQ4_XS (a device-side copy in CUDA translation units). */
#ifdef __CUDACC__
#define MF_QUANT_TABLE static __device__ const
#else
#define MF_QUANT_TABLE static const
#endif
MF_QUANT_TABLE int8_t mf_iq4nl_values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

#ifndef __CUDACC__

/* Reference row functions. n is the number of values, a multiple of the type's block size.
 * dequantize: blocks -> n floats. quantize: n floats -> blocks (the best-error quantizer we have,
 * matching llama.cpp's reference quantizers in quality). vec_dot: sum over n of w[i] * a[i], where
 * w is a row of this type and a a row of the type's activation format (traits.vec_dot_type). */
typedef void (*mf_dequantize_fn)(const void *src, float *dst, int64_t n);
typedef void (*mf_quantize_fn)(const float *src, void *dst, int64_t n);
typedef float (*mf_vec_dot_fn)(int64_t n, const void *w, const void *a);

typedef struct mf_type_traits {
    const char *name;      /* "Q4_K", as llama.cpp names it; NULL for ids with no format */
    int64_t blck_size;     /* values per block; 0 for ids with no format */
    size_t type_size;      /* bytes per block */
    bool is_quantized;
    mf_dequantize_fn dequantize; /* NULL where minfer cannot compute with the type */
    mf_quantize_fn quantize;
    mf_vec_dot_fn vec_dot;       /* reference dot against vec_dot_type */
    mf_type vec_dot_type;        /* activation format: Q8_0, Q8_1 or Q8_K; F32, F16, BF16 for those weights */
} mf_type_traits;

/* Traits of a type id; for unknown ids returns a record with blck_size 0 and name NULL. */
const mf_type_traits *mf_type_get_traits(uint32_t type);

/* The quantizer that writes type's blocks in a model file, as llama-quantize does without an
 * importance matrix: traits.quantize, except for Q8_0, whose traits.quantize is the activation
 * quantizer (127 / amax multiplier, ties to even) while files use d = amax / 127 and q = round(x / d)
 * with ties away from zero. NULL for types with no quantizer and for the activation-only Q8_1, Q8_K.
 *
 * Activation semantics of traits[Q8_0/Q8_1/Q8_K].quantize: per block of 32, d = amax / 127 (stored as
 * fp16), q = nearest-even(x * (127 / amax)) saturated to int8, and for Q8_1 s = fp16(d * sum(q)) with the
 * f32 d (llama.cpp's AVX2 quantize_row_q8_0/q8_1, which its x86 CPU backend runs). Q8_K (block 256):
 * iscale = -127 / max (max = signed value of largest magnitude), q = min(127, nearest-even(iscale * x)),
 * d = 1 / iscale as f32, bsums = sums of 16 q (llama.cpp's quantize_row_q8_K_ref, also used on x86). */
mf_quantize_fn mf_quant_file_quantizer(mf_type type);

/* 6-bit scale and min j (0..7) of a Q4_K/Q5_K block. */
static inline void mf_get_scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4);
    }
}

#endif /* __CUDACC__ */
#endif /* MF_QUANT_H */
