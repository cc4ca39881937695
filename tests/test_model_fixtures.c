/* test_model_fixtures.c: agreement with llama.cpp on every fixture model (3 architectures x every
 * weight type, and the split file): the logits of every position of prompt.ids and of the last
 * position of prompt-long.ids against the reference (normalized MSE, argmax where the reference's
 * top-1/top-2 gap exceeds 0.1), and greedy continuation against the reference tokens up to the
 * first near-tie (where the logits are llama.cpp's to rounding noise: up to the first exact tie). Runs
 * with an F32 KV cache, as the references were made; an F16 KV cache must still give the reference
 * argmax at clear margins. Prints the worst NMSE per weight type. */
#include "test.h"

#include "cpu/cpu_dot_order.h"
#include "minfer.h"

#include <stdint.h>

/* The kernels under test (MINFER_ISA / MINFER_ORDER; test.h). */
static mf_cpu_cfg cfg;

#define N_VOCAB 4096
#define CLEAR_GAP 0.1f
/* NMSE bounds: the 1e-6 for float weights and 1e-4 for quantized ones. On x86 with AVX2
 * the CPU backend runs the quantized dots, RoPE, SwiGLU and F32-cache attention in llama.cpp's
 * float operation order (src/x86/cpu_dot_order_avx2.c), so quantized files match the references
 * to rounding noise (<= 1.5e-13 measured): NMSE_EXACT guards that. Q4_K weights included: minfer
 * runs every token in the order of llama.cpp's Q4_K GEMM, which computed all but the last n % 4
 * rows of the references' prompts (those rows, and llama.cpp's one-row decode steps, went through
 * its GEMV, whose float steps differ in the last bits). Elsewhere (other CPUs, MINFER_ISA=scalar,
 * MINFER_ORDER=fast) a last-bit difference in a float op can flip one rounding in an activation
 * quantizer, which the random weights amplify to ~1e-4 and a little above: 1e-3 there. */
#define NMSE_FLOAT 1e-6
#define NMSE_QUANT 1e-4
#define NMSE_QUANT_UNORDERED 1e-3
#define NMSE_EXACT 1e-10

static const char *const models[] = {
    "mini-qwen2.F32", "mini-qwen2.F16", "mini-qwen2.Q4_0", "mini-qwen2.Q4_1", "mini-qwen2.Q5_0",
    "mini-qwen2.Q5_1", "mini-qwen2.Q8_0", "mini-qwen2.Q4_K", "mini-qwen2.Q5_K", "mini-qwen2.Q6_K",
    "mini-qwen2.Q4_K_M", "mini-qwen3.F32", "mini-qwen3.Q4_0", "mini-qwen3.Q4_1", "mini-qwen3.Q5_0",
    "mini-qwen3.Q5_1", "mini-qwen3.Q8_0", "mini-qwen3.Q4_K", "mini-qwen3.Q5_K", "mini-qwen3.Q6_K",
    "mini-qwen3.Q4_K_M", "mini-llama.Q4_0", "mini-llama.Q4_1", "mini-llama.Q5_0", "mini-llama.Q5_1",
    "mini-llama.Q8_0", "mini-llama.Q4_K", "mini-llama.Q5_K", "mini-llama.Q6_K", "mini-llama.Q4_K_M",
    "mini-qwen2.Q8_0-split-00001-of-00003",
};

typedef struct {
    const char *type;
    double worst;
} worst_entry;

static worst_entry worst[32];
static int n_worst;

static void note_worst(const char *model, double nmse) {
    const char *type = strchr(model, '.') + 1;
    char key[32];
    snprintf(key, sizeof key, "%.*s", (int)strcspn(type, "-"), type);
    for (int i = 0; i < n_worst; i++)
        if (!strcmp(worst[i].type, key)) {
            if (nmse > worst[i].worst) worst[i].worst = nmse;
            return;
        }
    worst[n_worst].type = strdup(key);
    worst[n_worst++].worst = nmse;
}

static int32_t *read_ids(const char *rel, int32_t *n) {
    FILE *f = fopen(fixture(rel), "r");
    if (!f) return NULL;
    int32_t *v = malloc(4096 * sizeof *v);
    int k = 0, x;
    while (k < 4096 && fscanf(f, "%d", &x) == 1) v[k++] = x;
    fclose(f);
    *n = k;
    return v;
}

static float *read_f32(const char *rel, size_t n) {
    FILE *f = fopen(fixture(rel), "rb");
    if (!f) return NULL;
    float *v = malloc(n * sizeof *v);
    size_t got = fread(v, sizeof *v, n, f);
    fclose(f);
    if (got != n) {
        free(v);
        return NULL;
    }
    return v;
}

static int32_t argmax(const float *x, float *gap) {
    int32_t b = 0, s = -1;
    for (int32_t i = 1; i < N_VOCAB; i++) {
        if (x[i] > x[b]) {
            s = b;
            b = i;
        } else if (s < 0 || x[i] > x[s]) {
            s = i;
        }
    }
    if (gap) *gap = x[b] - x[s];
    return b;
}

/* Decode ids (fresh sequence) and compare rows with ref (n_rows rows: all positions, or the last). */
static double check_prompt(mf_context *c, const char *model, const int32_t *ids, int32_t n, const float *ref,
                           bool all, float clear_gap, bool quiet) {
    mf_context_seq_rm(c, -1, 0, -1);
    int8_t *want = calloc((size_t)n, 1);
    for (int32_t i = 0; i < n; i++) want[i] = (int8_t)(all || i == n - 1);
    mf_batch b = {.n_tokens = n, .tokens = ids, .logits = want};
    mf_status st = mf_context_decode(c, &b);
    free(want);
    CHECKF(st == MF_OK, "%s: decode: %s", model, mf_last_error());
    if (st) return INFINITY;
    int32_t rows = all ? n : 1;
    CHECK(mf_context_n_outputs(c) == rows);
    double num = 0, den = 0;
    int bad_argmax = 0;
    for (int32_t r = 0; r < rows; r++) {
        const float *got = mf_context_logits(c, r), *want_row = ref + (size_t)r * N_VOCAB;
        for (int32_t i = 0; i < N_VOCAB; i++) {
            double d = (double)got[i] - want_row[i];
            num += d * d;
            den += (double)want_row[i] * want_row[i];
        }
        float gap;
        int32_t ra = argmax(want_row, &gap);
        if (gap > clear_gap && argmax(got, NULL) != ra) bad_argmax++;
    }
    CHECKF(bad_argmax == 0, "%s: argmax differs at %d of %d positions with a clear reference margin", model,
           bad_argmax, rows);
    if (!quiet && bad_argmax) fprintf(stderr, "%s: %d argmax mismatches\n", model, bad_argmax);
    return num / den;
}

/* Continue greedily from the decoded prompt; compare with the reference tokens until our own
 * top-1/top-2 gap drops under CLEAR_GAP (a near-tie, where ulp-level differences may decide).
 * exact: the logits are llama.cpp's to rounding noise (ordered kernels, quantized weights), so
 * near-ties do not stop the comparison (exact ties do). */
static void check_greedy(mf_context *c, const char *model, const char *rel, int n_expect, bool exact) {
    int32_t n_ref = 0;
    int32_t *ref = read_ids(rel, &n_ref);
    CHECKF(ref && n_ref == n_expect, "%s: reading %s", model, rel);
    if (!ref) return;
    const float *logits = mf_context_logits(c, mf_context_n_outputs(c) - 1);
    int matched = 0;
    for (int i = 0; i < n_ref; i++) {
        float gap;
        int32_t t = argmax(logits, &gap);
        if (exact ? gap == 0.0f : gap < CLEAR_GAP) break;
        CHECKF(t == ref[i], "%s: greedy token %d is %d, reference %d", model, i, t, ref[i]);
        if (t != ref[i]) break;
        matched++;
        mf_batch b = {.n_tokens = 1, .tokens = &t};
        if (mf_context_decode(c, &b) != MF_OK) break;
        logits = mf_context_logits(c, 0);
    }
    printf("  %-40s greedy %s: %d/%d tokens before the first %s\n", model, strstr(rel, "long") ? "long" : "short",
           matched, n_ref, exact ? "tie" : "near-tie");
    free(ref);
}

int main(void) {
    cfg = mf_cpu_cfg_for(test_isa(), test_order());
    bool sanitized = getenv("MINFER_SANITIZED") != NULL;
    int32_t n_short = 0, n_long = 0;
    int32_t *ids_short = read_ids("models/prompt.ids", &n_short);
    int32_t *ids_long = read_ids("models/prompt-long.ids", &n_long);
    CHECK(ids_short && n_short == 39);
    CHECK(ids_long && n_long == 254);
    if (!ids_short || !ids_long) return test_summary("test_model_fixtures");
    size_t n_models = sizeof models / sizeof models[0];
    for (size_t mi = 0; mi < n_models; mi++) {
        /* Under the sanitizers every third model is enough to exercise every code path. */
        if (sanitized && mi % 3 != 0 && mi != n_models - 1) continue;
        const char *name = models[mi];
        char path[256], ref_name[128], rel[256];
        snprintf(path, sizeof path, "models/%s.gguf", name);
        /* The split file's reference is the unsplit model's. */
        const char *dash = strstr(name, "-split");
        snprintf(ref_name, sizeof ref_name, "%.*s", dash ? (int)(dash - name) : (int)strlen(name), name);
        mf_model *m = NULL;
        mf_status st = mf_model_load(fixture(path), &m);
        CHECKF(st == MF_OK, "%s: %s", name, mf_last_error());
        if (st) continue;
        CHECK(mf_model_n_vocab(m) == N_VOCAB);
        bool is_float = strstr(name, ".F32") || strstr(name, ".F16");
        const bool exact = cfg.ordered && !is_float;
        double bound = is_float ? NMSE_FLOAT : exact ? NMSE_QUANT : NMSE_QUANT_UNORDERED;
        mf_context_params p = test_context_params();
        p.n_ctx = 512;
        p.n_threads = 2;
        p.kv_f32 = true;
        mf_context *c = NULL;
        st = mf_context_create(m, &p, &c);
        CHECKF(st == MF_OK, "%s: %s", name, mf_last_error());
        if (st) {
            mf_model_free(m);
            continue;
        }
        snprintf(rel, sizeof rel, "models/ref/%s.short.logits.f32", ref_name);
        float *ref_short = read_f32(rel, (size_t)n_short * N_VOCAB);
        snprintf(rel, sizeof rel, "models/ref/%s.long.logits.f32", ref_name);
        float *ref_long = read_f32(rel, N_VOCAB);
        CHECKF(ref_short && ref_long, "%s: reference logits missing", name);
        if (ref_short && ref_long) {
            double e_short = check_prompt(c, name, ids_short, n_short, ref_short, true, CLEAR_GAP, false);
            CHECKF(e_short <= bound, "%s: short prompt NMSE %.3g > %.1g", name, e_short, bound);
            snprintf(rel, sizeof rel, "models/ref/%s.short.greedy.txt", ref_name);
            check_greedy(c, name, rel, 16, exact);
            double e_long = check_prompt(c, name, ids_long, n_long, ref_long, false, CLEAR_GAP, false);
            CHECKF(e_long <= bound, "%s: long prompt NMSE %.3g > %.1g", name, e_long, bound);
            snprintf(rel, sizeof rel, "models/ref/%s.long.greedy.txt", ref_name);
            if (!sanitized) check_greedy(c, name, rel, 32, exact);
            if (exact)
                CHECKF(e_short <= NMSE_EXACT && e_long <= NMSE_EXACT,
                       "%s: NMSE short %.3g long %.3g: no longer llama.cpp's float order (<= %.0g)", name, e_short,
                       e_long, NMSE_EXACT);
            printf("  %-40s NMSE short %.3g long %.3g\n", name, e_short, e_long);
            note_worst(name, e_short > e_long ? e_short : e_long);
        }
        mf_context_free(c);
        /* F16 KV cache: same argmax where the reference is clear by a wider margin. */
        p.kv_f32 = false;
        if (ref_short && mf_context_create(m, &p, &c) == MF_OK) {
            double e = check_prompt(c, name, ids_short, n_short, ref_short, true, 0.5f, false);
            CHECKF(e < 1e-2, "%s: F16 KV cache NMSE %.3g", name, e);
            printf("  %-40s F16 KV cache: NMSE short %.3g\n", name, e);
            mf_context_free(c);
        }
        free(ref_short);
        free(ref_long);
        mf_model_free(m);
    }
    printf("worst NMSE per weight type (F32 KV cache, short and long prompts):\n");
    for (int i = 0; i < n_worst; i++) printf("  %-8s %.3g\n", worst[i].type, worst[i].worst);
    for (int i = 0; i < n_worst; i++) free((void *)worst[i].type);
    free(ids_short);
    free(ids_long);
    return test_summary("test_model_fixtures");
}
