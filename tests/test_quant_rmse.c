/* test_quant_rmse.c: our file quantizers against llama.cpp's on the same weights. For every fixture
 * that llama-quantize made from mini-qwen2/qwen3.F32.gguf, quantize each of its quantized tensors
 * from the F32 weights to the same type with mf_quant_file_quantizer and compare the RMSE against
 * the F32 values with that of llama.cpp's tensor: ours must be no worse than 1.02x. Prints the table
 * of ratios and how many bytes are identical to llama.cpp's. */
#include "test.h"
#include "core/core.h"
#include "gguf/gguf.h"
#include "quant/quant.h"

#include <stdlib.h>

typedef struct {
    double err_ours, err_ref; /* sums of squared errors */
    uint64_t n, bytes, same_bytes;
} rmse_acc;

static void compare_tensor(const mf_gguf_tensor *f32, const mf_gguf_tensor *ref, int64_t max_rows, rmse_acc *acc) {
    const mf_type_traits *tr = mf_type_get_traits(ref->type);
    const mf_quantize_fn quantize = mf_quant_file_quantizer(ref->type);
    CHECKF(quantize && tr->dequantize, "%s: no quantizer for %s", ref->name, tr->name);
    if (!quantize) return;
    const int64_t row = f32->ne[0];
    int64_t nrows = f32->ne[1] * f32->ne[2] * f32->ne[3];
    if (nrows > max_rows) nrows = max_rows;
    const size_t row_bytes = mf_row_size(ref->type, row);
    uint8_t *q = malloc(row_bytes);
    float *ours = malloc((size_t)row * sizeof(float)), *theirs = malloc((size_t)row * sizeof(float));
    for (int64_t r = 0; r < nrows; r++) {
        const float *x = (const float *)f32->data + r * row;
        const uint8_t *refq = (const uint8_t *)ref->data + r * row_bytes;
        quantize(x, q, row);
        tr->dequantize(q, ours, row);
        tr->dequantize(refq, theirs, row);
        for (int64_t i = 0; i < row; i++) {
            acc->err_ours += ((double)ours[i] - x[i]) * ((double)ours[i] - x[i]);
            acc->err_ref += ((double)theirs[i] - x[i]) * ((double)theirs[i] - x[i]);
        }
        for (size_t b = 0; b < row_bytes; b++) acc->same_bytes += q[b] == refq[b];
        acc->bytes += row_bytes;
        acc->n += (uint64_t)row;
    }
    free(q);
    free(ours);
    free(theirs);
}

static void compare_file(const char *model, const char *type, mf_gguf *f32, int64_t max_rows) {
    char rel[128];
    snprintf(rel, sizeof rel, "models/mini-%s.%s.gguf", model, type);
    mf_gguf *ref = NULL;
    mf_status s = mf_gguf_open(fixture(rel), &ref);
    CHECKF(s == MF_OK, "%s: %s", rel, mf_last_error());
    if (s != MF_OK) return;
    rmse_acc acc = {0};
    int tensors = 0;
    for (int64_t i = 0; i < mf_gguf_n_tensors(ref); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(ref, i);
        if (!mf_type_get_traits(t->type)->is_quantized) continue;
        const mf_gguf_tensor *w = mf_gguf_find_tensor(f32, t->name);
        CHECKF(w && w->type == MF_TYPE_F32 && w->ne[0] == t->ne[0] && w->ne[1] == t->ne[1], "%s: %s", rel, t->name);
        if (!w || w->type != MF_TYPE_F32 || w->ne[0] != t->ne[0] || w->ne[1] != t->ne[1]) continue;
        compare_tensor(w, t, max_rows, &acc);
        tensors++;
    }
    const double ours = sqrt(acc.err_ours / (double)acc.n), theirs = sqrt(acc.err_ref / (double)acc.n);
    const double ratio = ours / theirs;
    printf("  %-7s %-7s %3d tensors  rmse ours %.6e  llama.cpp %.6e  ratio %.4f  identical bytes %6.2f%%\n", model,
           type, tensors, ours, theirs, ratio, 100.0 * (double)acc.same_bytes / (double)acc.bytes);
    CHECK(tensors > 0);
    CHECKF(ratio <= 1.02, "%s %s: RMSE ratio %.4f > 1.02", model, type, ratio);
    /* The quantizers follow llama.cpp's float operation order, so the bytes agree (100% with GCC on
     * x86-64); a compiler that fuses multiply-adds may flip a few roundings, a layout bug many. */
    CHECKF(acc.same_bytes >= acc.bytes * 0.95, "%s %s: only %llu of %llu bytes identical to llama.cpp's", model, type,
           (unsigned long long)acc.same_bytes, (unsigned long long)acc.bytes);
    mf_gguf_free(ref);
}

int main(void) {
    /* The sanitizer build quantizes only the first rows of each tensor. */
    const int64_t max_rows = getenv("MINFER_SANITIZED") ? 32 : INT64_MAX;
    static const char *models[] = {"qwen2", "qwen3"};
    static const char *types[] = {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M"};
    printf("RMSE against the F32 weights, ours / llama.cpp's fixture of the same type:\n");
    for (size_t m = 0; m < MF_ARRAY_LEN(models); m++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/mini-%s.F32.gguf", models[m]);
        mf_gguf *f32 = NULL;
        mf_status s = mf_gguf_open(fixture(rel), &f32);
        CHECKF(s == MF_OK, "%s: %s", rel, mf_last_error());
        if (s != MF_OK) continue;
        for (size_t t = 0; t < MF_ARRAY_LEN(types); t++) compare_file(models[m], types[t], f32, max_rows);
        mf_gguf_free(f32);
    }
    return test_summary("test_quant_rmse");
}
