/* test_quant_model.c: the model quantizer as a library (also under the sanitizers): mini-qwen2.F32
 * quantized to Q4_K_M with 3 threads gives llama.cpp's fixture tensor for tensor (types and bytes)
 * and keeps the metadata; the planned types of every file type, with and without pure and with the
 * output / token embedding overrides, are the ones llama-quantize chose for the fixture models (and
 * for synthetic llama/falcon/qwen2/MoE models its rules treat differently), in its tensor order;
 * planning refuses requantization and bad override types; a cancelled run leaves no file. */
#include "test.h"
#include "core/core.h"
#include "gguf/gguf.h"
#include "quant/qmodel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int progress_calls;
static void count_progress(void *user, const mf_quant_progress *p) {
    (void)user;
    progress_calls += p->done;
}

static void test_q4_k_m(const char *out) {
    mf_quant_params p = {.ftype = mf_quant_ftype_find("q4_k_m"), .n_threads = 3, .progress = count_progress};
    CHECK(p.ftype != NULL);
    mf_quant_stats st;
    mf_status s = mf_quant_model(fixture("models/mini-qwen2.F32.gguf"), out, &p, &st);
    CHECKF(s == MF_OK, "%s", mf_last_error());
    if (s != MF_OK) return;
    CHECK(st.n_quantized == 16 && st.n_copied == 11 && progress_calls == 27 && st.n_threads == 3);

    mf_gguf *ours = NULL, *ref = NULL, *in = NULL;
    CHECK(mf_gguf_open(out, &ours) == MF_OK);
    CHECK(mf_gguf_open(fixture("models/mini-qwen2.Q4_K_M.gguf"), &ref) == MF_OK);
    CHECK(mf_gguf_open(fixture("models/mini-qwen2.F32.gguf"), &in) == MF_OK);
    if (ours && ref && in) {
        CHECK(mf_gguf_n_tensors(ours) == mf_gguf_n_tensors(ref));
        for (int64_t i = 0; i < mf_gguf_n_tensors(ours); i++) {
            const mf_gguf_tensor *t = mf_gguf_tensor_at(ours, i), *r = mf_gguf_find_tensor(ref, t->name);
            CHECKF(r && r->type == t->type && r->nbytes == t->nbytes && !memcmp(r->data, t->data, t->nbytes),
                   "tensor %s differs from llama.cpp's", t->name);
        }
        for (int64_t i = 0; i < mf_gguf_n_kv(in); i++) {
            const mf_gguf_kv *kv = mf_gguf_kv_at(in, i);
            const mf_gguf_kv *o = mf_gguf_find_kv(ours, kv->key);
            CHECKF(o && mf_gguf_value_equal(&kv->value, &o->value), "metadata %s not kept", kv->key);
        }
        uint32_t ft = 0, qv = 0;
        CHECK(mf_gguf_get_u32(ours, "general.file_type", &ft) == MF_OK && ft == 15);
        CHECK(mf_gguf_get_u32(ours, "general.quantization_version", &qv) == MF_OK && qv == 2);
    }
    mf_gguf_free(ours);
    mf_gguf_free(ref);
    mf_gguf_free(in);
}

/* llama-quantize's choices for mini-qwen2 / mini-qwen3 (2 layers, GQA 2), as "name=TYPE" exceptions
 * to the base type of the 2-D weights (1-D tensors stay F32). HEAD is output.weight, or the tied
 * token_embd.weight of qwen3; a bare name like attn_v means that kind in every layer. */
static const struct {
    const char *ftype, *base, *special;
} rule_cases[] = {
    {"F32", "F32", ""},
    {"F16", "F16", ""},
    {"BF16", "BF16", ""},
    {"Q8_0", "Q8_0", ""},
    {"Q6_K", "Q6_K", ""},
    {"Q4_0", "Q4_0", "HEAD=Q6_K"},
    {"Q4_1", "Q4_1", "HEAD=Q6_K"},
    {"Q5_0", "Q5_0", "HEAD=Q6_K"},
    {"Q5_1", "Q5_1", "HEAD=Q6_K"},
    {"Q2_K", "Q2_K", "HEAD=Q6_K attn_v=Q3_K ffn_down=Q3_K attn_output=Q3_K"},
    {"Q3_K_S", "Q3_K", "HEAD=Q6_K"},
    {"Q3_K_M", "Q3_K", "HEAD=Q6_K attn_v=Q5_K ffn_down=Q4_K attn_output=Q4_K"},
    {"Q3_K", "Q3_K", "HEAD=Q6_K attn_v=Q5_K ffn_down=Q4_K attn_output=Q4_K"},
    {"Q3_K_L", "Q3_K", "HEAD=Q6_K attn_v=Q5_K ffn_down=Q5_K attn_output=Q5_K"},
    {"Q4_K_S", "Q4_K", "HEAD=Q6_K attn_v=Q5_K"},
    {"Q4_K_M", "Q4_K", "HEAD=Q6_K blk.1.attn_v=Q6_K blk.1.ffn_down=Q6_K"},
    {"Q4_K", "Q4_K", "HEAD=Q6_K blk.1.attn_v=Q6_K blk.1.ffn_down=Q6_K"},
    {"Q5_K_S", "Q5_K", "HEAD=Q6_K"},
    {"Q5_K_M", "Q5_K", "HEAD=Q6_K blk.1.attn_v=Q6_K blk.1.ffn_down=Q6_K"},
    {"Q5_K", "Q5_K", "HEAD=Q6_K blk.1.attn_v=Q6_K blk.1.ffn_down=Q6_K"},
};

/* The type `special` gives tensor `name` (key HEAD, the name without ".weight", or its kind), else
 * base. */
static mf_type expected_type(const mf_gguf_tensor *t, bool tied, const char *base, const char *special) {
    int dims = 0;
    for (int d = 0; d < MF_GGUF_MAX_DIMS; d++) dims += t->ne[d] > 1;
    if (dims < 2) return MF_TYPE_F32;
    char stem[128];
    snprintf(stem, sizeof stem, "%s", t->name);
    char *dot = strstr(stem, ".weight");
    if (dot) *dot = 0;
    const char *kind = !strncmp(stem, "blk.", 4) && strchr(stem + 4, '.') ? strchr(stem + 4, '.') + 1 : NULL;
    const bool head = !strcmp(t->name, tied ? "token_embd.weight" : "output.weight");
    const char *found = NULL;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", special);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        *eq = 0;
        if ((head && !strcmp(tok, "HEAD")) || (!head && !strcmp(tok, stem))) found = eq + 1;
        else if (!head && !found && kind && !strcmp(tok, kind)) found = eq + 1;
    }
    mf_type type = MF_TYPE_COUNT;
    CHECK(mf_type_from_name(found ? found : base, &type));
    return type;
}

static void check_plan(const mf_gguf *g, bool tied, const char *ftype, const mf_quant_rules *rules, const char *base,
                       const char *special) {
    const int64_t n = mf_gguf_n_tensors(g);
    mf_type *types = malloc((size_t)n * sizeof *types);
    int64_t *order = malloc((size_t)n * sizeof *order);
    const mf_status s = mf_quant_plan(g, mf_quant_ftype_find(ftype), rules, types, order);
    CHECKF(s == MF_OK, "%s: %s", ftype, mf_last_error());
    for (int64_t i = 0; s == MF_OK && i < n; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        const mf_type want = expected_type(t, tied, base, special);
        CHECKF(types[i] == want, "%s%s: %s is %s, llama-quantize gives %s", ftype, rules && rules->pure ? " pure" : "",
               t->name, mf_type_name(types[i]), mf_type_name(want));
    }
    free(types);
    free(order);
}

static void test_rules(const char *model, bool tied) {
    char path[128];
    snprintf(path, sizeof path, "models/mini-%s.F32.gguf", model);
    mf_gguf *g = NULL, *ref = NULL;
    CHECK(mf_gguf_open(fixture(path), &g) == MF_OK);
    snprintf(path, sizeof path, "models/mini-%s.Q4_0.gguf", model);
    CHECK(mf_gguf_open(fixture(path), &ref) == MF_OK);
    if (!g || !ref) goto done;
    const mf_quant_rules pure = {.pure = true};
    for (size_t c = 0; c < MF_ARRAY_LEN(rule_cases); c++) {
        check_plan(g, tied, rule_cases[c].ftype, NULL, rule_cases[c].base, rule_cases[c].special);
        check_plan(g, tied, rule_cases[c].ftype, &pure, rule_cases[c].base, "");
    }
    /* the overrides (as llama-quantize applies them): the output type also reaches tied embeddings
     * through the rules, so not with pure; both apply to float file types */
    const mf_quant_rules out_q8 = {.set_output_type = true, .output_type = MF_TYPE_Q8_0};
    const mf_quant_rules pure_out_q8 = {.pure = true, .set_output_type = true, .output_type = MF_TYPE_Q8_0};
    const mf_quant_rules both = {.set_output_type = true, .output_type = MF_TYPE_Q4_0, .set_token_embd_type = true,
                                 .token_embd_type = MF_TYPE_Q5_1};
    check_plan(g, tied, "Q4_K_M", &out_q8, "Q4_K", "HEAD=Q8_0 blk.1.attn_v=Q6_K blk.1.ffn_down=Q6_K");
    check_plan(g, tied, "Q4_0", &pure_out_q8, "Q4_0", tied ? "" : "HEAD=Q8_0");
    check_plan(g, tied, "F16", &both, "F16", tied ? "HEAD=Q5_1" : "HEAD=Q4_0 token_embd=Q5_1");

    /* the output order is llama-quantize's (its Q4_0 fixture): by layer, non-layer tensors first, then name */
    const int64_t n = mf_gguf_n_tensors(g);
    mf_type *types = malloc((size_t)n * sizeof *types);
    int64_t *order = malloc((size_t)n * sizeof *order);
    CHECK(mf_gguf_n_tensors(ref) == n);
    if (mf_quant_plan(g, mf_quant_ftype_find("Q4_0"), NULL, types, order) == MF_OK && mf_gguf_n_tensors(ref) == n) {
        for (int64_t k = 0; k < n; k++)
            CHECKF(!strcmp(mf_gguf_tensor_at(g, order[k])->name, mf_gguf_tensor_at(ref, k)->name),
                   "%s: tensor %lld is %s, llama.cpp writes %s", model, (long long)k,
                   mf_gguf_tensor_at(g, order[k])->name, mf_gguf_tensor_at(ref, k)->name);
    }

    /* override types minfer cannot write are refused by name */
    const mf_quant_rules bad = {.set_output_type = true, .output_type = MF_TYPE_Q8_K};
    CHECK(mf_quant_plan(g, mf_quant_ftype_find("Q4_0"), &bad, types, NULL) == MF_ERR_ARG);
    CHECK(strstr(mf_last_error(), "Q8_K") != NULL);
    const mf_quant_rules bad2 = {.set_token_embd_type = true, .token_embd_type = (mf_type)MF_TYPE_COUNT + 3};
    CHECK(mf_quant_plan(g, mf_quant_ftype_find("Q4_0"), &bad2, types, NULL) == MF_ERR_ARG);
    free(types);
    free(order);
done:
    mf_gguf_free(g);
    mf_gguf_free(ref);
}

/* Models the fixtures do not cover, as llama-quantize typed them: a 16-layer llama with 4 query heads
 * per KV head, a 16-layer falcon (fused attn_qkv), an 80-layer qwen2 (llama.cpp's "70B" rule) with
 * tied embeddings, a qwen2moe with 4 experts stored out of layer order and a llama with 8 experts.
 * Expected types per layer: 2..6 = Q2_K..Q6_K, 8 = Q8_0, f = F32. */
typedef struct {
    const char *arch;
    uint32_t n_layer, n_head, n_head_kv, n_expert;
    const char *kinds; /* per-layer weights, space-separated; the "_exps" ones are 3-D */
    bool output;       /* has output.weight (else tied) */
} synth_model;

static const synth_model synth_llama16 = {"llama", 16, 4, 1, 0, "attn_v ffn_down attn_output ffn_up", true};
static const synth_model synth_falcon = {"falcon", 16, 4, 1, 0, "attn_qkv ffn_down attn_output ffn_up", true};
static const synth_model synth_qwen80 = {"qwen2", 80, 8, 8, 0, "attn_v ffn_down", false};
static const synth_model synth_moe4 = {"qwen2moe", 3, 4, 4, 4, "ffn_down_exps attn_v", true};
static const synth_model synth_moe8 = {"llama", 2, 4, 4, 8,
                                       "attn_v attn_k attn_output ffn_gate_inp ffn_down_exps ffn_up_exps", true};

static mf_status write_synth(const synth_model *m, const char *path) {
    mf_gguf_writer *w = NULL;
    mf_status s = mf_gguf_writer_create(&w);
    char key[96];
    if (s == MF_OK) s = mf_gguf_writer_set_str(w, "general.architecture", m->arch);
    const struct {
        const char *suffix;
        uint32_t v;
    } kv[] = {{"block_count", m->n_layer}, {"attention.head_count", m->n_head},
              {"attention.head_count_kv", m->n_head_kv}, {"expert_count", m->n_expert}};
    for (size_t i = 0; i < MF_ARRAY_LEN(kv) && s == MF_OK; i++) {
        snprintf(key, sizeof key, "%s.%s", m->arch, kv[i].suffix);
        if (kv[i].v) s = mf_gguf_writer_set_u32(w, key, kv[i].v);
    }
    /* rows of 256 (every block divides them), 2 rows, 4 experts; file order: layers descending, so
     * the planner's own ordering is exercised */
    int64_t ne2[MF_GGUF_MAX_DIMS] = {256, 2, 1, 1}, ne3[MF_GGUF_MAX_DIMS] = {256, 2, 4, 1};
    size_t nbytes[256];
    int64_t n = 0;
    if (s == MF_OK) s = mf_gguf_writer_add_tensor(w, "token_embd.weight", MF_TYPE_F32, 2, ne2);
    nbytes[n++] = 256 * 2 * sizeof(float);
    if (s == MF_OK && m->output) {
        s = mf_gguf_writer_add_tensor(w, "output.weight", MF_TYPE_F32, 2, ne2);
        nbytes[n++] = 256 * 2 * sizeof(float);
    }
    for (int l = (int)m->n_layer - 1; l >= 0 && s == MF_OK; l--) {
        char kinds[128];
        snprintf(kinds, sizeof kinds, "%s", m->kinds);
        for (char *save = NULL, *k = strtok_r(kinds, " ", &save); k && s == MF_OK; k = strtok_r(NULL, " ", &save)) {
            snprintf(key, sizeof key, "blk.%d.%s.weight", l, k);
            const bool exps = strstr(k, "_exps") != NULL;
            MF_ASSERT(n < (int64_t)MF_ARRAY_LEN(nbytes));
            s = mf_gguf_writer_add_tensor(w, key, MF_TYPE_F32, exps ? 3 : 2, exps ? ne3 : ne2);
            nbytes[n++] = (exps ? 4 : 1) * 256 * 2 * sizeof(float);
        }
    }
    static const float zeros[256 * 2 * 4];
    if (s == MF_OK) s = mf_gguf_writer_begin(w, path);
    for (int64_t i = 0; i < n && s == MF_OK; i++) s = mf_gguf_writer_write_tensor_data(w, i, zeros, nbytes[i]);
    if (s == MF_OK) s = mf_gguf_writer_finish(w);
    mf_gguf_writer_free(w);
    return s;
}

static mf_type type_of_code(char c) {
    switch (c) {
    case '2': return MF_TYPE_Q2_K;
    case '3': return MF_TYPE_Q3_K;
    case '4': return MF_TYPE_Q4_K;
    case '5': return MF_TYPE_Q5_K;
    case '6': return MF_TYPE_Q6_K;
    case '8': return MF_TYPE_Q8_0;
    default: return MF_TYPE_F32;
    }
}

/* expect: "token_embd=C output=C kind=CCC..." with one code per layer (layer 0 first) */
static void check_synth(const synth_model *m, const char *path, const char *ftype, const char *expect) {
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open(path, &g) == MF_OK);
    if (!g) return;
    const int64_t n = mf_gguf_n_tensors(g);
    mf_type *types = malloc((size_t)n * sizeof *types);
    const mf_status s = mf_quant_plan(g, mf_quant_ftype_find(ftype), NULL, types, NULL);
    CHECKF(s == MF_OK, "%s %s: %s", m->arch, ftype, mf_last_error());
    int64_t matched = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", expect);
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); s == MF_OK && tok; tok = strtok_r(NULL, " ", &save)) {
        char *codes = strchr(tok, '=');
        *codes++ = 0;
        for (int64_t i = 0; i < n; i++) {
            const char *name = mf_gguf_tensor_at(g, i)->name;
            int layer = 0;
            char kind[64] = "";
            if (sscanf(name, "blk.%d.%63[^.]", &layer, kind) != 2) {
                snprintf(kind, sizeof kind, "%s", name);
                *strchr(kind, '.') = 0;
            }
            if (strcmp(kind, tok) != 0) continue;
            MF_ASSERT(layer < (int)strlen(codes));
            const mf_type want = type_of_code(codes[layer]);
            CHECKF(types[i] == want, "%s %s: %s is %s, llama-quantize gives %s", m->arch, ftype, name,
                   mf_type_name(types[i]), mf_type_name(want));
            matched++;
        }
    }
    CHECKF(s != MF_OK || matched == n, "%s %s: %lld of %lld tensors checked", m->arch, ftype, (long long)matched,
           (long long)n);
    free(types);
    mf_gguf_free(g);
}

static void test_synthetic(const char *path) {
    static const struct {
        const synth_model *model;
        const char *ftype, *expect;
    } cases[] = {
        {&synth_llama16, "Q2_K",
         "output=6 token_embd=2 attn_output=3333333333333333 attn_v=4444444444444444 ffn_down=3333333333333333 "
         "ffn_up=2222222222222222"},
        {&synth_llama16, "Q3_K_M",
         "output=6 token_embd=3 attn_output=4444444444444444 attn_v=5544444444444444 ffn_down=5444444444444444 "
         "ffn_up=3333333333333333"},
        {&synth_llama16, "Q3_K_L",
         "output=6 token_embd=3 attn_output=5555555555555555 attn_v=5555555555555555 ffn_down=5555555555555555 "
         "ffn_up=3333333333333333"},
        {&synth_llama16, "Q4_K_S",
         "output=6 token_embd=4 attn_output=4444444444444444 attn_v=5555444444444444 ffn_down=5544444444444444 "
         "ffn_up=4444444444444444"},
        {&synth_llama16, "Q4_K_M",
         "output=6 token_embd=4 attn_output=4444444444444444 attn_v=6644644644644666 ffn_down=6644644644644666 "
         "ffn_up=4444444444444444"},
        {&synth_falcon, "Q2_K",
         "output=8 token_embd=2 attn_output=2222222222222222 attn_qkv=4444444444444444 ffn_down=3333333333333333 "
         "ffn_up=2222222222222222"},
        {&synth_falcon, "Q3_K_M",
         "output=8 token_embd=3 attn_output=3333333333333333 attn_qkv=5544444444444444 ffn_down=5433433433433444 "
         "ffn_up=3333333333333333"},
        {&synth_falcon, "Q3_K_L",
         "output=8 token_embd=3 attn_output=4444444444444444 attn_qkv=5555555555555555 ffn_down=4444444444444444 "
         "ffn_up=3333333333333333"},
        {&synth_falcon, "Q4_K_M",
         "output=8 token_embd=4 attn_output=4444444444444444 attn_qkv=6644644644644666 ffn_down=6544544544544555 "
         "ffn_up=4444444444444444"},
        {&synth_qwen80, "Q3_K_M",
         "token_embd=6 attn_v=55555555555555555555555555555555555555555555555555555555555555555555555555555555 "
         "ffn_down=55555444444444444444444444444444444444444444444444444444444444444444444444444444"},
        {&synth_qwen80, "Q4_K_M",
         "token_embd=6 attn_v=66666666665565565565565565565565565565565565565565565565565565565565566666666666 "
         "ffn_down=66666666664464464464464464464464464464464464464464464464464464464464466666666666"},
        {&synth_moe4, "Q3_K_M", "output=6 token_embd=3 attn_v=554 ffn_down_exps=444"},
        {&synth_moe4, "Q4_K_M", "output=6 token_embd=4 attn_v=446 ffn_down_exps=446"},
        {&synth_moe8, "Q2_K",
         "output=6 token_embd=2 attn_k=88 attn_output=55 attn_v=88 ffn_down_exps=33 ffn_gate_inp=ff ffn_up_exps=22"},
        {&synth_moe8, "Q4_K_M",
         "output=6 token_embd=4 attn_k=88 attn_output=55 attn_v=88 ffn_down_exps=46 ffn_gate_inp=ff ffn_up_exps=44"},
    };
    const synth_model *written = NULL;
    for (size_t c = 0; c < MF_ARRAY_LEN(cases); c++) {
        if (cases[c].model != written) {
            const mf_status s = write_synth(cases[c].model, path);
            CHECKF(s == MF_OK, "%s", mf_last_error());
            if (s != MF_OK) return;
            written = cases[c].model;
        }
        check_synth(cases[c].model, path, cases[c].ftype, cases[c].expect);
    }
}

static void test_refusals(const char *out) {
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open(fixture("models/mini-qwen3.Q8_0.gguf"), &g) == MF_OK);
    if (g) {
        mf_type *types = malloc((size_t)mf_gguf_n_tensors(g) * sizeof *types);
        CHECK(mf_quant_plan(g, mf_quant_ftype_find("Q8_0"), NULL, types, NULL) == MF_OK); /* copy: same types */
        for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) CHECK(types[i] == mf_gguf_tensor_at(g, i)->type);
        CHECK(mf_quant_plan(g, mf_quant_ftype_find("Q4_K_M"), NULL, types, NULL) == MF_ERR_UNSUPPORTED);
        CHECK(strstr(mf_last_error(), "already quantized") != NULL);
        free(types);
        mf_gguf_free(g);
    }
    CHECK(mf_quant_ftype_find("Q7_K") == NULL && mf_quant_ftype_find("f16") != NULL);

    /* cancelled before the first tensor: an error, and nothing under out's name */
    unlink(out);
    volatile sig_atomic_t cancel = 1;
    mf_quant_params p = {.ftype = mf_quant_ftype_find("Q6_K"), .n_threads = 2, .cancel = &cancel};
    CHECK(mf_quant_model(fixture("models/mini-qwen3.F32.gguf"), out, &p, NULL) != MF_OK);
    CHECK(access(out, F_OK) != 0);
}

int main(void) {
    char out[] = "/tmp/minfer-test-quant-model-XXXXXX";
    int fd = mkstemp(out);
    CHECK(fd >= 0);
    if (fd >= 0) close(fd);
    test_q4_k_m(out);
    test_rules("qwen2", false);
    test_rules("qwen3", true);
    test_synthetic(out);
    test_refusals(out);
    unlink(out);
    return test_summary("test_quant_model");
}
