/* test_quant_model.c: the model quantizer as a library (also under the sanitizers): mini-qwen2.F32
 * quantized to Q4_K_M with 3 threads gives llama.cpp's fixture tensor for tensor (types and bytes)
 * and keeps the metadata; planning refuses requantization; a cancelled run leaves no file. */
#include "test.h"
#include "core/core.h"
#include "gguf/gguf.h"
#include "quant/qmodel.h"

#include <stdlib.h>
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

static void test_refusals(const char *out) {
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open(fixture("models/mini-qwen3.Q8_0.gguf"), &g) == MF_OK);
    if (g) {
        mf_type *types = malloc((size_t)mf_gguf_n_tensors(g) * sizeof *types);
        CHECK(mf_quant_plan(g, mf_quant_ftype_find("Q8_0"), types) == MF_OK); /* copy: same types */
        for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) CHECK(types[i] == mf_gguf_tensor_at(g, i)->type);
        CHECK(mf_quant_plan(g, mf_quant_ftype_find("Q4_K_M"), types) == MF_ERR_UNSUPPORTED);
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
    test_refusals(out);
    unlink(out);
    return test_summary("test_quant_model");
}
