/* qmodel_plan.c: which type each tensor of a model gets when quantizing to a file type: the file
 * types table, llama.cpp's quantizability rules, its per-tensor rules for every file type minfer writes,
 * the --output-tensor-type / --token-embedding-type overrides and its fallbacks for row lengths a block
 * does not divide (src/llama-quant.cpp, llama_tensor_get_type). Tensors are visited in llama.cpp's
 * order (by layer number, then name), which is also the order they are written in, because the rules
 * count attn_v and ffn_down tensors as they go. */
#include "quant/qmodel.h"
#include "core/core.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* llama.cpp's LLAMA_FTYPE_* values (the general.file_type of the files it writes) */
enum {
    FT_ALL_F32 = 0, FT_F16 = 1, FT_Q4_0 = 2, FT_Q4_1 = 3, FT_Q8_0 = 7, FT_Q5_0 = 8, FT_Q5_1 = 9, FT_Q2_K = 10,
    FT_Q3_K_S = 11, FT_Q3_K_M = 12, FT_Q3_K_L = 13, FT_Q4_K_S = 14, FT_Q4_K_M = 15, FT_Q5_K_S = 16,
    FT_Q5_K_M = 17, FT_Q6_K = 18, FT_BF16 = 32
};

/* llama-quantize's names; a bare K type is the _M mixture of that type (its alias). Q2_K_S is left
 * out: llama.cpp requires an importance matrix for it. */
static const mf_quant_ftype ftypes[] = {
    {"F32", MF_TYPE_F32, FT_ALL_F32},    {"F16", MF_TYPE_F16, FT_F16},        {"BF16", MF_TYPE_BF16, FT_BF16},
    {"Q4_0", MF_TYPE_Q4_0, FT_Q4_0},     {"Q4_1", MF_TYPE_Q4_1, FT_Q4_1},     {"Q5_0", MF_TYPE_Q5_0, FT_Q5_0},
    {"Q5_1", MF_TYPE_Q5_1, FT_Q5_1},     {"Q8_0", MF_TYPE_Q8_0, FT_Q8_0},     {"Q2_K", MF_TYPE_Q2_K, FT_Q2_K},
    {"Q3_K", MF_TYPE_Q3_K, FT_Q3_K_M},   {"Q3_K_S", MF_TYPE_Q3_K, FT_Q3_K_S}, {"Q3_K_M", MF_TYPE_Q3_K, FT_Q3_K_M},
    {"Q3_K_L", MF_TYPE_Q3_K, FT_Q3_K_L}, {"Q4_K", MF_TYPE_Q4_K, FT_Q4_K_M},   {"Q4_K_S", MF_TYPE_Q4_K, FT_Q4_K_S},
    {"Q4_K_M", MF_TYPE_Q4_K, FT_Q4_K_M}, {"Q5_K", MF_TYPE_Q5_K, FT_Q5_K_M},   {"Q5_K_S", MF_TYPE_Q5_K, FT_Q5_K_S},
    {"Q5_K_M", MF_TYPE_Q5_K, FT_Q5_K_M}, {"Q6_K", MF_TYPE_Q6_K, FT_Q6_K},
};

const mf_quant_ftype *mf_quant_ftype_find(const char *name) {
    for (size_t i = 0; i < MF_ARRAY_LEN(ftypes); i++)
        if (!strcasecmp(ftypes[i].name, name)) return &ftypes[i];
    return NULL;
}

const char *mf_quant_ftype_names(void) {
    return "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q3_K_S Q3_K_M Q3_K_L Q4_K Q4_K_S Q4_K_M Q5_K Q5_K_S "
           "Q5_K_M Q6_K";
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

/* The layer number llama.cpp reads with sscanf("blk.%d."): -1 when the name does not start with
 * "blk." and a number (out-of-range numbers saturate instead of being undefined). */
static int layer_of(const char *name) {
    if (strncmp(name, "blk.", 4) != 0) return -1;
    char *end;
    const long v = strtol(name + 4, &end, 10);
    if (end == name + 4) return -1;
    return v > INT_MAX ? INT_MAX : v < INT_MIN ? INT_MIN : (int)v;
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
    uint32_t ftype;           /* LLAMA_FTYPE value */
    const mf_quant_rules *rules;
    uint32_t n_layer, n_expert, n_gqa;
    bool is_70b;              /* llama.cpp's LLM_TYPE_70B, the only model size its rules look at */
    int n_attention_wv, i_attention_wv, i_ffn_down, i_ffn_gate, i_ffn_up;
    bool tied;                /* no output.weight: token_embd doubles as the output projection */
} plan_state;

static bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

/* The layer an FFN tensor counts as: its position among its kind, except in a mixture-of-experts
 * model, whose expert tensors are not stored in layer order, so the name says. */
static mf_status ffn_layer(const plan_state *st, const mf_gguf_tensor *t, int counter, int *i_layer) {
    *i_layer = counter;
    if (st->n_expert <= 1) return MF_OK;
    *i_layer = layer_of(t->name);
    if (*i_layer < 0 || *i_layer >= (int)st->n_layer)
        return mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s': layer %d is outside [0, %u)", t->name, *i_layer,
                       st->n_layer);
    return MF_OK;
}

/* llama.cpp's per-tensor rules (llama_tensor_get_type_impl) for the file types minfer writes: the
 * type of one quantizable tensor whose base type `type` is a quantized type. */
static mf_status rule_type(plan_state *st, const mf_gguf_tensor *t, category cat, mf_type *out) {
    mf_type type = *out;
    const uint32_t ft = st->ftype;
    const bool falcon = !strcmp(st->arch, "falcon");
    const bool experts8 = st->n_expert == 8;
    int i_layer;
    mf_status s;
    if (cat == CAT_OUTPUT || (st->tied && cat == CAT_TOKEN_EMBD)) {
        if (st->rules->set_output_type)
            type = st->rules->output_type;
        else if (falcon || t->ne[0] % mf_type_get_traits(type)->blck_size != 0)
            type = MF_TYPE_Q8_0;
        else if (type != MF_TYPE_Q8_0)
            type = MF_TYPE_Q6_K;
    } else if (cat == CAT_TOKEN_EMBD) {
        /* only file types minfer does not write (IQ1/IQ2/IQ3, TQ, Q2_0) change the embeddings */
    } else if (is_attn_v_like(cat)) {
        if (ft == FT_Q2_K)
            type = st->n_gqa >= 4 ? MF_TYPE_Q4_K : MF_TYPE_Q3_K;
        else if (ft == FT_Q3_K_M)
            type = st->i_attention_wv < 2 ? MF_TYPE_Q5_K : MF_TYPE_Q4_K;
        else if (ft == FT_Q3_K_L)
            type = MF_TYPE_Q5_K;
        else if ((ft == FT_Q4_K_M || ft == FT_Q5_K_M) && use_more_bits(st->i_attention_wv, st->n_attention_wv))
            type = MF_TYPE_Q6_K;
        else if (ft == FT_Q4_K_S && st->i_attention_wv < 4)
            type = MF_TYPE_Q5_K;
        /* a 70B model shares each attn_v between 8 heads: more bits there cost little */
        if (st->is_70b && (type == MF_TYPE_Q3_K || type == MF_TYPE_Q4_K)) type = MF_TYPE_Q5_K;
        if (experts8) type = MF_TYPE_Q8_0;
        st->i_attention_wv++;
    } else if (cat == CAT_ATTN_K) {
        if (experts8) type = MF_TYPE_Q8_0;
    } else if (cat == CAT_FFN_DOWN) {
        if ((s = ffn_layer(st, t, st->i_ffn_down, &i_layer)) != MF_OK) return s;
        const int n_layer = (int)st->n_layer;
        if (ft == FT_Q2_K)
            type = MF_TYPE_Q3_K;
        else if (ft == FT_Q3_K_M)
            type = i_layer < n_layer / 16                      ? MF_TYPE_Q5_K
                   : !falcon || use_more_bits(i_layer, n_layer) ? MF_TYPE_Q4_K
                                                                : MF_TYPE_Q3_K;
        else if (ft == FT_Q3_K_L)
            type = falcon ? MF_TYPE_Q4_K : MF_TYPE_Q5_K;
        else if (ft == FT_Q4_K_M && falcon)
            type = i_layer < n_layer / 16             ? MF_TYPE_Q6_K
                   : use_more_bits(i_layer, n_layer) ? MF_TYPE_Q5_K
                                                     : MF_TYPE_Q4_K;
        else if (ft == FT_Q4_K_M || ft == FT_Q5_K_M) {
            if (use_more_bits(i_layer, n_layer)) type = MF_TYPE_Q6_K;
        } else if (ft == FT_Q4_K_S && !falcon && i_layer < n_layer / 8)
            type = MF_TYPE_Q5_K;
        st->i_ffn_down++;
    } else if (cat == CAT_ATTN_OUTPUT) {
        if (falcon) {
            if (ft == FT_Q3_K_L) type = MF_TYPE_Q4_K;
        } else if (experts8) {
            if (ft == FT_Q2_K || ft == FT_Q3_K_S || ft == FT_Q3_K_M || ft == FT_Q4_K_S || ft == FT_Q4_K_M)
                type = MF_TYPE_Q5_K;
        } else if (ft == FT_Q2_K) {
            type = MF_TYPE_Q3_K;
        } else if (ft == FT_Q3_K_M) {
            type = MF_TYPE_Q4_K;
        } else if (ft == FT_Q3_K_L) {
            type = MF_TYPE_Q5_K;
        }
    } else if (cat == CAT_FFN_GATE || cat == CAT_FFN_UP) {
        /* counted (and, with experts, checked) like ffn_down; only IQ3_XS changes them */
        int *counter = cat == CAT_FFN_GATE ? &st->i_ffn_gate : &st->i_ffn_up;
        if ((s = ffn_layer(st, t, *counter, &i_layer)) != MF_OK) return s;
        (*counter)++;
    }
    *out = type;
    return MF_OK;
}

/* Row lengths the type's block does not divide: llama.cpp's fallback, then F16 (a 32-block type goes
 * to F16 directly). */
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
    default: fb = *type; break;
    }
    if (t->ne[0] % mf_type_get_traits(fb)->blck_size != 0) fb = MF_TYPE_F16;
    mf_log(MF_LOG_INFO, "%s: row length %lld not a multiple of %lld: %s instead of %s", t->name, (long long)t->ne[0],
           (long long)blk, mf_type_name(fb), mf_type_name(*type));
    *type = fb;
    return MF_OK;
}

/* The type of one tensor (llama_tensor_get_type): copied if not quantizable, the overrides first,
 * then the base type, the per-tensor rules unless pure, and the row-length fallback. */
static mf_status tensor_type(plan_state *st, const mf_gguf_tensor *t, const mf_quant_ftype *ft, mf_type *out) {
    *out = t->type;
    if (!allows_quantization(t)) return MF_OK;
    const category cat = tensor_category(t->name);
    const mf_quant_rules *r = st->rules;
    if (r->set_token_embd_type && cat == CAT_TOKEN_EMBD) {
        *out = r->token_embd_type;
        return MF_OK;
    }
    if (r->set_output_type && cat == CAT_OUTPUT) {
        *out = r->output_type;
        return MF_OK;
    }
    *out = ft->type;
    if (!mf_type_get_traits(ft->type)->is_quantized) return MF_OK;
    if (!r->pure) {
        mf_status s = rule_type(st, t, cat, out);
        if (s != MF_OK) return s;
    }
    return fallback(t, out);
}

static uint32_t meta_u32(const mf_gguf *g, const char *arch, const char *suffix, uint32_t def) {
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    uint32_t v;
    /* absent, or an array (per-layer head counts): the default */
    return mf_gguf_get_u32(g, key, &v) == MF_OK ? v : def;
}

/* llama.cpp's LLM_TYPE_70B for the architectures that have one */
static bool is_70b(const char *arch, uint32_t n_layer, uint32_t n_head, uint32_t n_head_kv) {
    if (!strcmp(arch, "llama")) return n_layer == 80 && n_head != n_head_kv;
    if (!strcmp(arch, "qwen2") || !strcmp(arch, "deci") || !strcmp(arch, "olmo")) return n_layer == 80;
    if (!strcmp(arch, "jais2")) return n_layer == 68;
    return false;
}

/* The chosen type must be one minfer can produce from this input. */
static mf_status check_conversion(const mf_gguf_tensor *t, mf_type type) {
    if (type == t->type) return MF_OK;
    if (t->type != MF_TYPE_F32 && t->type != MF_TYPE_F16 && t->type != MF_TYPE_BF16) {
        if (mf_type_get_traits(t->type)->is_quantized)
            return mf_fail(MF_ERR_UNSUPPORTED,
                           "tensor '%s' is already quantized (%s); minfer quantize converts F32, F16 and BF16 "
                           "weights and copies a quantized tensor only into its own type (requantizing loses "
                           "accuracy: start from the F16/F32 model)",
                           t->name, mf_type_name(t->type));
        return mf_fail(MF_ERR_ARG, "tensor '%s' has type %s, which minfer cannot convert to %s", t->name,
                       mf_type_name(t->type), mf_type_name(type));
    }
    if (!mf_quant_file_quantizer(type))
        return mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s': minfer cannot write type %s", t->name, mf_type_name(type));
    const int64_t blk = mf_type_get_traits(type)->blck_size;
    if (t->ne[0] % blk != 0)
        return mf_fail(MF_ERR_UNSUPPORTED, "tensor '%s': row length %lld is not a multiple of %s's block size %lld",
                       t->name, (long long)t->ne[0], mf_type_name(type), (long long)blk);
    return MF_OK;
}

mf_status mf_quant_plan(const mf_gguf *g, const mf_quant_ftype *ft, const mf_quant_rules *rules, mf_type *types,
                        int64_t *order_out) {
    static const mf_quant_rules defaults = {0};
    const int64_t n = mf_gguf_n_tensors(g);
    plan_state st = {.arch = "", .ftype = ft->file_type, .rules = rules ? rules : &defaults, .tied = true};
    if (st.rules->set_output_type && !mf_quant_file_quantizer(st.rules->output_type))
        return mf_fail(MF_ERR_ARG, "output tensor type %s: minfer cannot write it (F32, F16, BF16, Q4_0, Q4_1, "
                       "Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)", mf_type_name(st.rules->output_type));
    if (st.rules->set_token_embd_type && !mf_quant_file_quantizer(st.rules->token_embd_type))
        return mf_fail(MF_ERR_ARG, "token embedding type %s: minfer cannot write it (F32, F16, BF16, Q4_0, Q4_1, "
                       "Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)", mf_type_name(st.rules->token_embd_type));
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
        max_layer = MF_MAX(max_layer, MF_MIN(layer_of(t->name), 1 << 20));
    }
    st.n_layer = meta_u32(g, st.arch, "block_count", (uint32_t)(max_layer + 1));
    st.n_expert = meta_u32(g, st.arch, "expert_count", 0);
    const uint32_t n_head = meta_u32(g, st.arch, "attention.head_count", 0);
    const uint32_t n_head_kv = meta_u32(g, st.arch, "attention.head_count_kv", n_head);
    st.n_gqa = n_head_kv ? n_head / n_head_kv : 0;
    st.is_70b = is_70b(st.arch, st.n_layer, n_head, n_head_kv);

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
        s = tensor_type(&st, t, ft, &type);
        types[order[k].index] = type;
        if (s == MF_OK) s = check_conversion(t, type);
        if (order_out) order_out[k] = order[k].index;
    }
    free(order);
    free(arch);
    return s;
}
