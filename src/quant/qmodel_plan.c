/* qmodel_plan.c: which type each tensor of a model gets when quantizing to a file type: the file
 * types table, llama.cpp's quantizability rules, its Q4_K_M / Q5_K_M mixture rules and its fallbacks
 * for row lengths a block does not divide (src/llama-quant.cpp, llama_tensor_get_type). Tensors are
 * visited in llama.cpp's order (by layer number, then name) because the mixture rules count attn_v and
 * ffn_down tensors as they go. */
#include "quant/qmodel.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* general.file_type values are llama.cpp's LLAMA_FTYPE_*; a plain K type is written as the mixture
 * llama-quantize names it after (its "Q4_K" means Q4_K_M), which is what its --pure files carry. */
static const mf_quant_ftype ftypes[] = {
    {"F32", MF_TYPE_F32, 0, false},    {"F16", MF_TYPE_F16, 1, false},      {"BF16", MF_TYPE_BF16, 32, false},
    {"Q4_0", MF_TYPE_Q4_0, 2, false},  {"Q4_1", MF_TYPE_Q4_1, 3, false},    {"Q5_0", MF_TYPE_Q5_0, 8, false},
    {"Q5_1", MF_TYPE_Q5_1, 9, false},  {"Q8_0", MF_TYPE_Q8_0, 7, false},    {"Q2_K", MF_TYPE_Q2_K, 10, false},
    {"Q3_K", MF_TYPE_Q3_K, 12, false}, {"Q4_K", MF_TYPE_Q4_K, 15, false},   {"Q5_K", MF_TYPE_Q5_K, 17, false},
    {"Q6_K", MF_TYPE_Q6_K, 18, false}, {"Q3_K_M", MF_TYPE_Q3_K, 12, true},  {"Q4_K_M", MF_TYPE_Q4_K, 15, true},
    {"Q5_K_M", MF_TYPE_Q5_K, 17, true},
};

const mf_quant_ftype *mf_quant_ftype_find(const char *name) {
    for (size_t i = 0; i < MF_ARRAY_LEN(ftypes); i++)
        if (!strcasecmp(ftypes[i].name, name)) return &ftypes[i];
    return NULL;
}

const char *mf_quant_ftype_names(void) {
    return "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K Q3_K_M Q4_K_M Q5_K_M";
}

typedef enum { CAT_TOKEN_EMBD, CAT_ATTN_Q, CAT_ATTN_V, CAT_ATTN_K, CAT_ATTN_QKV, CAT_ATTN_KV_B, CAT_ATTN_OUTPUT,
               CAT_FFN_UP, CAT_FFN_GATE, CAT_FFN_DOWN, CAT_OUTPUT, CAT_OTHER } category;

static bool contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static category tensor_category(const char *name) {
    if (!strcmp(name, "output.weight")) return CAT_OUTPUT;
    if (!strcmp(name, "token_embd.weight") || !strcmp(name, "per_layer_token_embd.weight")) return CAT_TOKEN_EMBD;
    if (contains(name, "attn_qkv.weight")) return CAT_ATTN_QKV;
    if (contains(name, "attn_kv_b.weight")) return CAT_ATTN_KV_B;
    if (contains(name, "attn_v.weight")) return CAT_ATTN_V;
    if (contains(name, "attn_k.weight")) return CAT_ATTN_K;
    if (contains(name, "attn_q.weight")) return CAT_ATTN_Q;
    if (contains(name, "attn_output.weight")) return CAT_ATTN_OUTPUT;
    if (contains(name, "ffn_up")) return CAT_FFN_UP;
    if (contains(name, "ffn_gate")) return CAT_FFN_GATE;
    if (contains(name, "ffn_down")) return CAT_FFN_DOWN;
    return CAT_OTHER;
}

static bool is_attn_v_like(category c) { return c == CAT_ATTN_V || c == CAT_ATTN_QKV || c == CAT_ATTN_KV_B; }

/* Dimensions that count: trailing sizes of 1 do not (a [256, 1] tensor is 1-D). */
static int effective_dims(const mf_gguf_tensor *t) {
    int n = 1;
    for (int d = 1; d < MF_GGUF_MAX_DIMS; d++)
        if (t->ne[d] > 1) n = d + 1;
    return n;
}

/* llama.cpp quantizes 2-D and 3-D weights except norms, MoE router gates, and a list of small or
 * position tensors of other architectures. */
static bool allows_quantization(const mf_gguf_tensor *t) {
    if (effective_dims(t) < 2) return false;
    const char *name = t->name;
    const size_t len = strlen(name);
    if (len < 6 || strcmp(name + len - 6, "weight") != 0) return false;
    static const char *const never[] = {
        "_norm.weight", "ffn_gate_inp.weight", "ffn_gate_tid2eid.weight", "altup", "laurel", "per_layer_model_proj",
        "ssm_conv1d", "shortconv.conv.weight", "indexer.k_proj.weight", "indexer.q_proj.weight",
        "time_mix_first.weight", "time_mix_w0.weight", "time_mix_w1.weight", "time_mix_w2.weight",
        "time_mix_v0.weight", "time_mix_v1.weight", "time_mix_v2.weight", "time_mix_a0.weight",
        "time_mix_a1.weight", "time_mix_a2.weight", "time_mix_g1.weight", "time_mix_g2.weight",
        "time_mix_decay_w1.weight", "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight",
        ".position_embd", "sam.pos_embd", "sam.neck.", "sam.net_", ".rel_pos", ".patch_embd", ".patch_merger",
        "a.rvq.codebook", "mm.a.code_embd",
    };
    for (size_t i = 0; i < MF_ARRAY_LEN(never); i++)
        if (contains(name, never[i])) return false;
    return strcmp(name, "position_embd.weight") != 0 && strcmp(name, "token_types.weight") != 0;
}

/* "blk.N." -> N, else -1 */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    long v = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && v >= 0 && v < 1000000 ? (int)v : -1;
}

typedef struct {
    int layer;
    const char *name;
    int64_t index;
} visit;

static int by_layer_then_name(const void *a, const void *b) {
    const visit *x = a, *y = b;
    return x->layer != y->layer ? (x->layer < y->layer ? -1 : 1) : strcmp(x->name, y->name);
}

typedef struct {
    const char *arch;
    uint32_t n_layer, n_expert, n_head, n_head_kv;
    int n_attention_wv, i_attention_wv, i_ffn_down;
    bool tied; /* no output.weight: token_embd doubles as the output projection */
} plan_state;

static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* llama.cpp's mixture rules for the file types minfer writes (Q3_K_M, Q4_K_M, Q5_K_M: the mixture
 * is named by its base type). */
static mf_type mixture_type(plan_state *st, const mf_gguf_tensor *t, const mf_quant_ftype *ft, category cat) {
    mf_type type = ft->type;
    const bool falcon = !strcmp(st->arch, "falcon");
    const bool q3km = ft->type == MF_TYPE_Q3_K, q4km = ft->type == MF_TYPE_Q4_K;
    if (cat == CAT_OUTPUT || (st->tied && cat == CAT_TOKEN_EMBD)) {
        if (falcon || t->ne[0] % mf_type_get_traits(type)->blck_size != 0) return MF_TYPE_Q8_0;
        return MF_TYPE_Q6_K;
    }
    if (is_attn_v_like(cat)) {
        if (q3km)
            type = st->i_attention_wv < 2 ? MF_TYPE_Q5_K : MF_TYPE_Q4_K;
        else if (use_more_bits(st->i_attention_wv, st->n_attention_wv))
            type = MF_TYPE_Q6_K;
        /* a 70B llama shares each attn_v between 8 heads: more bits there cost little */
        if (!strcmp(st->arch, "llama") && st->n_layer == 80 && st->n_head != st->n_head_kv &&
            (type == MF_TYPE_Q3_K || type == MF_TYPE_Q4_K))
            type = MF_TYPE_Q5_K;
        if (st->n_expert == 8) type = MF_TYPE_Q8_0;
        st->i_attention_wv++;
    } else if (cat == CAT_ATTN_K) {
        if (st->n_expert == 8) type = MF_TYPE_Q8_0;
    } else if (cat == CAT_FFN_DOWN) {
        int i_layer = st->i_ffn_down;
        if (st->n_expert > 1) i_layer = layer_of(t->name); /* experts are not stored in layer order */
        const int n_layer = (int)st->n_layer;
        if (q3km)
            type = i_layer < n_layer / 16                      ? MF_TYPE_Q5_K
                   : !falcon || use_more_bits(i_layer, n_layer) ? MF_TYPE_Q4_K
                                                                : MF_TYPE_Q3_K;
        else if (q4km && falcon)
            type = i_layer < n_layer / 16 ? MF_TYPE_Q6_K : use_more_bits(i_layer, n_layer) ? MF_TYPE_Q5_K : MF_TYPE_Q4_K;
        else if (use_more_bits(i_layer, n_layer))
            type = MF_TYPE_Q6_K;
        st->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (!falcon && st->n_expert == 8 && (q3km || q4km))
            type = MF_TYPE_Q5_K;
        else if (!falcon && q3km)
            type = MF_TYPE_Q4_K;
    }
    return type;
}

/* Row lengths the type's block does not divide: llama.cpp's fallback, then F16. */
static mf_status fallback(const mf_gguf_tensor *t, mf_type *type) {
    const int64_t blk = mf_type_get_traits(*type)->blck_size;
    if (t->ne[0] % blk == 0) return MF_OK;
    mf_type fb;
    switch (*type) {
    case MF_TYPE_Q2_K:
    case MF_TYPE_Q3_K: fb = MF_TYPE_Q4_0; break;
    case MF_TYPE_Q4_K: fb = MF_TYPE_Q5_0; break;
    case MF_TYPE_Q5_K: fb = MF_TYPE_Q5_1; break;
    case MF_TYPE_Q6_K: fb = MF_TYPE_Q8_0; break;
    default:
        return mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s': row length %lld is not a multiple of %s's block size %lld",
                       t->name, (long long)t->ne[0], mf_type_name(*type), (long long)blk);
    }
    if (t->ne[0] % mf_type_get_traits(fb)->blck_size != 0) fb = MF_TYPE_F16;
    mf_log(MF_LOG_INFO, "%s: row length %lld not a multiple of %lld: %s instead of %s", t->name, (long long)t->ne[0],
           (long long)blk, mf_type_name(fb), mf_type_name(*type));
    *type = fb;
    return MF_OK;
}

static uint32_t meta_u32(const mf_gguf *g, const char *arch, const char *suffix, uint32_t def) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    /* absent, or an array (per-layer head counts): the default */
    return mf_gguf_get_u32(g, key, &v) == MF_OK ? v : def;
}

mf_status mf_quant_plan(const mf_gguf *g, const mf_quant_ftype *ft, mf_type *types) {
    const int64_t n = mf_gguf_n_tensors(g);
    plan_state st = {.arch = "", .tied = true};
    char *arch = NULL;
    mf_status s = mf_gguf_find_str_dup(g, "general.architecture", &arch);
    if (s != MF_OK) return s;
    if (arch) st.arch = arch;
    int max_layer = -1;
    for (int64_t i = 0; i < n; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        const category c = tensor_category(t->name);
        if (is_attn_v_like(c)) st.n_attention_wv++;
        if (c == CAT_OUTPUT) st.tied = false;
        max_layer = MF_MAX(max_layer, layer_of(t->name));
    }
    st.n_layer = meta_u32(g, st.arch, "block_count", (uint32_t)(max_layer + 1));
    st.n_expert = meta_u32(g, st.arch, "expert_count", 0);
    st.n_head = meta_u32(g, st.arch, "attention.head_count", 0);
    st.n_head_kv = meta_u32(g, st.arch, "attention.head_count_kv", st.n_head);

    visit *order = mf_malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order) {
        free(arch);
        return MF_ERR_NOMEM;
    }
    for (int64_t i = 0; i < n; i++) {
        const char *name = mf_gguf_tensor_at(g, i)->name;
        order[i] = (visit){layer_of(name), name, i};
    }
    qsort(order, (size_t)n, sizeof *order, by_layer_then_name);

    s = MF_OK;
    for (int64_t k = 0; k < n && s == MF_OK; k++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, order[k].index);
        mf_type type = t->type;
        if (allows_quantization(t)) {
            type = ft->type;
            if (mf_type_get_traits(type)->is_quantized) {
                if (ft->mixture) type = mixture_type(&st, t, ft, tensor_category(t->name));
                s = fallback(t, &type);
            }
        }
        types[order[k].index] = type;
        if (s != MF_OK || type == t->type) continue;
        if (t->type != MF_TYPE_F32 && t->type != MF_TYPE_F16 && t->type != MF_TYPE_BF16) {
            if (mf_type_get_traits(t->type)->is_quantized)
                s = mf_fail(MF_ERR_UNSUPPORTED,
                            "tensor '%s' is already quantized (%s); minfer quantize converts F32, F16 and BF16 "
                            "weights and copies a quantized tensor only into its own type (requantizing loses "
                            "accuracy: start from the F16/F32 model)",
                            t->name, mf_type_name(t->type));
            else
                s = mf_fail(MF_ERR_ARG, "tensor '%s' has type %s, which minfer cannot convert to %s", t->name,
                            mf_type_name(t->type), mf_type_name(type));
        } else if (!mf_quant_file_quantizer(type)) {
            s = mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s': minfer cannot write type %s", t->name, mf_type_name(type));
        }
    }
    free(order);
    free(arch);
    return s;
}
