/* types.c: the type-traits table: block size, bytes per block and name of every GGML type id, and
 * the reference functions for the formats minfer computes with (quant_legacy.c, quant_k.c,
 * quant_k23.c, quant_iq4.c, vec_dot.c). IQ4_NL and IQ4_XS are read-only (no quantizer). */
#include "quant/quant.h"
#include "quant/quant_ref.h"
#include "core/core.h"

#include <stdio.h>
#include <strings.h>

/* A type minfer only knows the size of (its functions NULL). */
#define SIZE_ONLY(nm, blck, size, quantized) {.name = nm, .blck_size = blck, .type_size = size, .is_quantized = quantized}

/* Columns: name, values per block, bytes per block, quantized?, dequantize, quantize, vec_dot,
 * vec_dot_type. For Q8_0, Q8_1 and Q8_K `quantize` is the activation quantizer (llama.cpp's x86 CPU
 * semantics); mf_quant_file_quantizer gives the one for writing model files. */
static const mf_type_traits traits[MF_TYPE_COUNT] = {
    [MF_TYPE_F32] = {"F32", 1, 4, false, mf_quant_dequant_f32, mf_quant_quantize_f32, mf_quant_dot_f32_f32, MF_TYPE_F32},
    [MF_TYPE_F16] = {"F16", 1, 2, false, mf_quant_dequant_f16, mf_quant_quantize_f16, mf_quant_dot_f16_f16, MF_TYPE_F16},
    [MF_TYPE_Q4_0] = {"Q4_0", MF_QK4_0, sizeof(mf_block_q4_0), true, mf_quant_dequant_q4_0, mf_quant_quantize_q4_0,
                      mf_quant_dot_q4_0_q8_0, MF_TYPE_Q8_0},
    [MF_TYPE_Q4_1] = {"Q4_1", MF_QK4_1, sizeof(mf_block_q4_1), true, mf_quant_dequant_q4_1, mf_quant_quantize_q4_1,
                      mf_quant_dot_q4_1_q8_1, MF_TYPE_Q8_1},
    [MF_TYPE_Q5_0] = {"Q5_0", MF_QK5_0, sizeof(mf_block_q5_0), true, mf_quant_dequant_q5_0, mf_quant_quantize_q5_0,
                      mf_quant_dot_q5_0_q8_0, MF_TYPE_Q8_0},
    [MF_TYPE_Q5_1] = {"Q5_1", MF_QK5_1, sizeof(mf_block_q5_1), true, mf_quant_dequant_q5_1, mf_quant_quantize_q5_1,
                      mf_quant_dot_q5_1_q8_1, MF_TYPE_Q8_1},
    [MF_TYPE_Q8_0] = {"Q8_0", MF_QK8_0, sizeof(mf_block_q8_0), true, mf_quant_dequant_q8_0, mf_quant_quantize_q8_0_act,
                      mf_quant_dot_q8_0_q8_0, MF_TYPE_Q8_0},
    [MF_TYPE_Q8_1] = {"Q8_1", MF_QK8_1, sizeof(mf_block_q8_1), true, mf_quant_dequant_q8_1, mf_quant_quantize_q8_1_act,
                      NULL, MF_TYPE_Q8_1},
    [MF_TYPE_Q2_K] = {"Q2_K", MF_QK_K, sizeof(mf_block_q2_K), true, mf_quant_dequant_q2_K, mf_quant_quantize_q2_K,
                      mf_quant_dot_q2_K_q8_K, MF_TYPE_Q8_K},
    [MF_TYPE_Q3_K] = {"Q3_K", MF_QK_K, sizeof(mf_block_q3_K), true, mf_quant_dequant_q3_K, mf_quant_quantize_q3_K,
                      mf_quant_dot_q3_K_q8_K, MF_TYPE_Q8_K},
    [MF_TYPE_Q4_K] = {"Q4_K", MF_QK_K, sizeof(mf_block_q4_K), true, mf_quant_dequant_q4_K, mf_quant_quantize_q4_K,
                      mf_quant_dot_q4_K_q8_K, MF_TYPE_Q8_K},
    [MF_TYPE_Q5_K] = {"Q5_K", MF_QK_K, sizeof(mf_block_q5_K), true, mf_quant_dequant_q5_K, mf_quant_quantize_q5_K,
                      mf_quant_dot_q5_K_q8_K, MF_TYPE_Q8_K},
    [MF_TYPE_Q6_K] = {"Q6_K", MF_QK_K, sizeof(mf_block_q6_K), true, mf_quant_dequant_q6_K, mf_quant_quantize_q6_K,
                      mf_quant_dot_q6_K_q8_K, MF_TYPE_Q8_K},
    [MF_TYPE_Q8_K] = {"Q8_K", MF_QK_K, sizeof(mf_block_q8_K), true, mf_quant_dequant_q8_K, mf_quant_quantize_q8_K_act,
                      NULL, MF_TYPE_Q8_K},
    [MF_TYPE_IQ2_XXS] = SIZE_ONLY("IQ2_XXS", MF_QK_K, 66, true),
    [MF_TYPE_IQ2_XS] = SIZE_ONLY("IQ2_XS", MF_QK_K, 74, true),
    [MF_TYPE_IQ3_XXS] = SIZE_ONLY("IQ3_XXS", MF_QK_K, 98, true),
    [MF_TYPE_IQ1_S] = SIZE_ONLY("IQ1_S", MF_QK_K, 50, true),
    [MF_TYPE_IQ4_NL] = {"IQ4_NL", 32, sizeof(mf_block_iq4_nl), true, mf_quant_dequant_iq4_nl, NULL,
                        mf_quant_dot_iq4_nl_q8_0, MF_TYPE_Q8_0},
    [MF_TYPE_IQ3_S] = SIZE_ONLY("IQ3_S", MF_QK_K, 110, true),
    [MF_TYPE_IQ2_S] = SIZE_ONLY("IQ2_S", MF_QK_K, 82, true),
    [MF_TYPE_IQ4_XS] = {"IQ4_XS", MF_QK_K, sizeof(mf_block_iq4_xs), true, mf_quant_dequant_iq4_xs, NULL,
                        mf_quant_dot_iq4_xs_q8_K, MF_TYPE_Q8_K},
    [MF_TYPE_I8] = SIZE_ONLY("I8", 1, 1, false),
    [MF_TYPE_I16] = SIZE_ONLY("I16", 1, 2, false),
    [MF_TYPE_I32] = SIZE_ONLY("I32", 1, 4, false),
    [MF_TYPE_I64] = SIZE_ONLY("I64", 1, 8, false),
    [MF_TYPE_F64] = SIZE_ONLY("F64", 1, 8, false),
    [MF_TYPE_IQ1_M] = SIZE_ONLY("IQ1_M", MF_QK_K, 56, true),
    [MF_TYPE_BF16] = {"BF16", 1, 2, false, mf_quant_dequant_bf16, mf_quant_quantize_bf16, mf_quant_dot_bf16_bf16,
                      MF_TYPE_BF16},
    [MF_TYPE_TQ1_0] = SIZE_ONLY("TQ1_0", MF_QK_K, 54, true),
    [MF_TYPE_TQ2_0] = SIZE_ONLY("TQ2_0", MF_QK_K, 66, true),
    [MF_TYPE_MXFP4] = SIZE_ONLY("MXFP4", 32, 17, true),
};
#undef SIZE_ONLY

static const mf_type_traits no_traits = {0};

const mf_type_traits *mf_type_get_traits(uint32_t type) {
    return type < MF_TYPE_COUNT && traits[type].blck_size ? &traits[type] : &no_traits;
}

const char *mf_type_name(uint32_t type) {
    const mf_type_traits *t = mf_type_get_traits(type);
    if (t->name) return t->name;
    static _Thread_local char buf[32];
    snprintf(buf, sizeof buf, "type-%u", type);
    return buf;
}

bool mf_type_from_name(const char *name, mf_type *out) {
    for (uint32_t i = 0; i < MF_TYPE_COUNT; i++) {
        if (traits[i].name && !strcasecmp(traits[i].name, name)) {
            *out = (mf_type)i;
            return true;
        }
    }
    return false;
}

size_t mf_row_size(mf_type type, int64_t n) {
    const mf_type_traits *t = mf_type_get_traits(type);
    if (!t->blck_size || n < 0 || n % t->blck_size) return 0;
    return (size_t)(n / t->blck_size) * t->type_size;
}

int64_t mf_type_block_size(mf_type type) { return mf_type_get_traits(type)->blck_size; }
bool mf_type_readable(mf_type type) { return mf_type_get_traits(type)->dequantize != NULL; }
bool mf_quant_type_writable(mf_type type) { return mf_quant_file_quantizer(type) != NULL; }

mf_quantize_fn mf_quant_file_quantizer(mf_type type) {
    switch (type) {
    case MF_TYPE_Q8_0: return mf_quant_quantize_q8_0_weight;
    case MF_TYPE_Q8_1:
    case MF_TYPE_Q8_K: return NULL; /* activation-only formats */
    default: return mf_type_get_traits(type)->quantize;
    }
}
