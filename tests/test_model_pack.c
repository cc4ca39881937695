/* test_model_pack.c: a model loaded with the kernels' packed copies (mf_model_load_params.no_repack
 * false, the default) gives bit for bit the logits of the same model loaded without them, for a
 * prompt, one-token decode steps and a batch of several sequences (the packed GEMM's few-token path
 * and its prefill path), on the fixtures of every architecture; packed_bytes says what was copied:
 * something for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and Q4_K matrices where the best kernels are AVX-512,
 * for all but Q5_1 where they are AVX2 (their layouts serve both), and there for Q5_K too (a layout
 * of the AVX2 GEMM only), nothing with no_repack or for a type without a packed layout. Contexts of another level (MINFER_ISA=avx2 on an AVX-512 machine)
 * ignore the copies and must agree too. */
#include "test.h"

#include "minfer.h"
#include "simd/simd.h"

#include <stdint.h>

#define N_PROMPT 20 /* past the 16 tokens of the Q8_0 / Q4_1 few-token paths: their GEMM's packed panels too */

/* Logits of: a prompt of N_PROMPT tokens (all positions), then three one-token steps, then one
 * batch of one token for each of three more sequences (each with the prompt's first tokens),
 * concatenated into out (n_vocab floats a row). Returns the row count. */
static int run(const mf_model *m, float *out) {
    mf_context_params p = test_context_params();
    p.n_ctx = 128;
    p.n_threads = 2;
    mf_context *c = NULL;
    CHECK(mf_context_create(m, &p, &c) == MF_OK);
    if (!c) return 0;
    const int32_t nv = mf_model_n_vocab(m);
    int32_t tok[N_PROMPT], pos[N_PROMPT], seq[N_PROMPT];
    int8_t want[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++) tok[i] = 17 + 31 * i, pos[i] = i, seq[i] = 0, want[i] = 1;
    int rows = 0;
    mf_batch b = {.n_tokens = N_PROMPT, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
    CHECK(mf_context_decode(c, &b) == MF_OK);
    for (int i = 0; i < N_PROMPT; i++) memcpy(out + (size_t)rows++ * nv, mf_context_logits(c, i), (size_t)nv * 4);
    for (int s = 0; s < 3; s++) {
        const int32_t t = 5 + s, q = N_PROMPT + s, z = 0;
        mf_batch one = {.n_tokens = 1, .tokens = &t, .pos = &q, .seq = &z};
        CHECK(mf_context_decode(c, &one) == MF_OK);
        memcpy(out + (size_t)rows++ * nv, mf_context_logits(c, 0), (size_t)nv * 4);
    }
    const int32_t t3[3] = {tok[0], tok[0], tok[0]}, p3[3] = {0, 0, 0}, s3[3] = {1, 2, 3};
    const int8_t w3[3] = {1, 1, 1};
    mf_batch three = {.n_tokens = 3, .tokens = t3, .pos = p3, .seq = s3, .logits = w3};
    CHECK(mf_context_decode(c, &three) == MF_OK);
    for (int i = 0; i < 3; i++) memcpy(out + (size_t)rows++ * nv, mf_context_logits(c, i), (size_t)nv * 4);
    mf_context_free(c);
    return rows;
}

int main(void) {
    const char *models[] = {"mini-qwen2.Q4_0", "mini-qwen3.Q4_0", "mini-llama.Q4_0", "mini-qwen2.Q4_K",
                            "mini-llama.Q4_K_M", "mini-qwen3.Q4_K", "mini-qwen2.Q8_0", "mini-llama.Q8_0",
                            "mini-qwen2.Q4_1", "mini-qwen3.Q5_0", "mini-llama.Q5_1", "mini-qwen2.Q6_K",
                            "mini-llama.Q5_K", "mini-qwen3.Q5_K"};
    const bool avx512 = mf_simd_best_level() == MF_SIMD_AVX512, avx2 = mf_simd_best_level() == MF_SIMD_AVX2;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "models/%s.gguf", models[i]);
        mf_model *packed = NULL, *plain = NULL;
        const mf_model_load_params np = {.no_repack = true};
        CHECK(mf_model_load(fixture(rel), &packed) == MF_OK);
        CHECK(mf_model_load_ex(fixture(rel), &np, &plain) == MF_OK);
        if (!packed || !plain) {
            mf_model_free(packed), mf_model_free(plain);
            continue;
        }
        mf_model_info a, b;
        mf_model_get_info(packed, &a);
        mf_model_get_info(plain, &b);
        CHECKF(b.packed_bytes == 0 && b.n_packed == 0, "%s: no_repack packed %llu bytes", models[i],
               (unsigned long long)b.packed_bytes);
        /* where something is packed, it is matrices of the types with a packed layout, at their size
         * in the file (rows rounded up to whole panels of 16) */
        const uint64_t packable =
            avx512 ? a.type_bytes[MF_TYPE_Q4_0] + a.type_bytes[MF_TYPE_Q4_K] + a.type_bytes[MF_TYPE_Q4_1] +
                         a.type_bytes[MF_TYPE_Q5_0] + a.type_bytes[MF_TYPE_Q5_1] + a.type_bytes[MF_TYPE_Q8_0]
            : avx2 ? a.type_bytes[MF_TYPE_Q4_0] + a.type_bytes[MF_TYPE_Q4_1] + a.type_bytes[MF_TYPE_Q5_0] +
                         a.type_bytes[MF_TYPE_Q8_0] + a.type_bytes[MF_TYPE_Q4_K] + a.type_bytes[MF_TYPE_Q5_K]
                   : 0;
        if (packable)
            CHECKF(a.n_packed > 0 && a.packed_bytes > 0 && a.packed_bytes <= 2 * packable,
                   "%s: packed %u matrices, %llu bytes (of types with a packed layout: %llu)", models[i], a.n_packed,
                   (unsigned long long)a.packed_bytes, (unsigned long long)packable);
        else
            CHECKF(a.packed_bytes == 0, "%s: packed %llu bytes without a packed layout here", models[i],
                   (unsigned long long)a.packed_bytes);
        printf("%s: %u matrices packed (%llu bytes)\n", models[i], a.n_packed, (unsigned long long)a.packed_bytes);
        const size_t nv = (size_t)mf_model_n_vocab(packed);
        float *x = malloc((N_PROMPT + 6) * nv * sizeof(float)), *y = malloc((N_PROMPT + 6) * nv * sizeof(float));
        const int rx = run(packed, x), ry = run(plain, y);
        CHECK(rx == ry && rx == N_PROMPT + 6);
        int bad = 0;
        for (size_t k = 0; k < (size_t)rx * nv; k++) bad += memcmp(&x[k], &y[k], sizeof(float)) != 0;
        CHECKF(bad == 0, "%s: %d logits differ between the packed and the file layout", models[i], bad);
        free(x), free(y);
        mf_model_free(packed), mf_model_free(plain);
    }
    return test_summary("test_model_pack");
}
