/* test_simd_models.c: the SIMD dots and tiles on real weights, the fixture models' tensors as
 * llama.cpp quantized them (every weight type of the fixtures, including the Q4_K_M mixture): at
 * every level this CPU runs, each kernel matches the reference dot on rows of every 2-D tensor
 * against activations quantized by the reference, within the float-summation bound used in
 * test_simd.c. Complements test_simd.c's random blocks with realistic scale distributions. */
#include "test.h"
#include "simd/simd.h"
#include "gguf/gguf.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float rndf(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)(rng >> 40) / 8388608.0f - 1.0f;
}

static const char *const models[] = {
    "mini-llama.Q4_0.gguf", "mini-llama.Q4_1.gguf", "mini-llama.Q5_0.gguf",  "mini-llama.Q5_1.gguf",
    "mini-llama.Q8_0.gguf", "mini-llama.Q4_K.gguf", "mini-llama.Q5_K.gguf",  "mini-llama.Q6_K.gguf",
    "mini-qwen3.Q4_K_M.gguf", "mini-qwen2.F16.gguf", "mini-qwen2.F32.gguf",
};

enum { ROWS = 8, NC = 5 };

/* Checks up to ROWS rows of one tensor at one level; returns the number of mismatches. */
static int check_tensor(mf_simd_level lv, const mf_gguf_tensor *t, const uint8_t *acts, size_t as, float *tw,
                        float *ta) {
    const mf_type_traits *tr = mf_type_get_traits(t->type);
    const int64_t n = t->ne[0];
    const size_t rs = mf_row_size(t->type, n);
    const int nr = (int)MF_MIN(ROWS, t->ne[1]);
    mf_vec_dot_fn ref = tr->vec_dot, dot = mf_simd_vec_dot_at(lv, t->type);
    mf_gemm_fn gemm = mf_simd_gemm_at(lv, t->type);
    float out[NC * ROWS];
    gemm(n, nr, NC, t->data, rs, acts, as, out, ROWS);
    int bad = 0;
    for (int r = 0; r < nr; r++) {
        const uint8_t *w = (const uint8_t *)t->data + (size_t)r * rs;
        tr->dequantize(w, tw, n);
        for (int c = 0; c < NC; c++) {
            const uint8_t *a = acts + (size_t)c * as;
            mf_type_get_traits(tr->vec_dot_type)->dequantize(a, ta, n);
            double bound = 0;
            for (int64_t i = 0; i < n; i++) bound += fabs((double)tw[i] * ta[i]);
            const double tol = 2e-6 * bound + 1e-30;
            const float want = ref(n, w, a), got = dot(n, w, a), tile = out[c * ROWS + r];
            if (!(fabs((double)got - want) <= tol) || !(fabs((double)tile - want) <= tol)) {
                if (bad++ < 2)
                    fprintf(stderr, "%s %s row %d: dot %.9g tile %.9g reference %.9g (tol %.3g)\n",
                            mf_simd_level_name(lv), t->name, r, got, tile, want, tol);
            }
        }
    }
    return bad;
}

int main(void) {
    enum { MAX_N = 8192 };
    float *x = malloc(MAX_N * sizeof *x), *tw = malloc(MAX_N * sizeof *tw), *ta = malloc(MAX_N * sizeof *ta);
    uint8_t *acts = malloc((size_t)NC * MAX_N * sizeof(float));
    CHECK(x && tw && ta && acts);
    int tensors = 0;
    for (size_t mi = 0; mi < MF_ARRAY_LEN(models) && x && tw && ta && acts; mi++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/%s", models[mi]);
        mf_gguf *g = NULL;
        if (mf_gguf_open(fixture(rel), &g) != MF_OK) {
            CHECKF(0, "open %s: %s", rel, mf_last_error());
            continue;
        }
        for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) {
            const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
            const mf_type_traits *tr = mf_type_get_traits(t->type);
            if (t->n_dims != 2 || !tr->vec_dot || !tr->dequantize || t->ne[0] > MAX_N) continue;
            const int64_t n = t->ne[0];
            const size_t as = mf_row_size(tr->vec_dot_type, n);
            for (int c = 0; c < NC; c++) {
                const float scale = (float)(c + 1) * 0.7f;
                for (int64_t k = 0; k < n; k++) x[k] = rndf() * scale;
                mf_type_get_traits(tr->vec_dot_type)->quantize(x, acts + (size_t)c * as, n);
            }
            for (int l = 0; l < MF_SIMD_LEVEL_COUNT; l++) {
                const mf_simd_level lv = (mf_simd_level)l;
                if (!mf_simd_level_supported(lv)) continue;
                const int bad = check_tensor(lv, t, acts, as, tw, ta);
                CHECKF(bad == 0, "%s: %s (%s) at level %s: %d mismatches", models[mi], t->name, tr->name,
                       mf_simd_level_name(lv), bad);
            }
            tensors++;
        }
        mf_gguf_free(g);
    }
    printf("checked %d tensors\n", tensors);
    CHECKF(tensors >= 100, "only %d weight tensors found in the fixtures", tensors);
    free(x), free(tw), free(ta), free(acts);
    return test_summary("test_simd_models");
}
