/* test_model_invariance.c: batch invariance through the public API, on every fixture model: a
 * token's logits are bit-identical whether its prompt runs as one batch, in chunks of 1, 3, 7 or 64
 * tokens, with a small n_ubatch (chunks inside one decode), on 1 or 3 threads,
 * interleaved with the tokens of two or three other sequences in each batch, after a prefix shared
 * from another sequence, or after its state was saved and restored into another context. Checked for
 * both KV cache types, every instruction set this CPU runs and both float orders (the results may
 * differ between those, never within one). Also on Q2_K and Q3_K files quantized from the F32
 * fixture (no fixture holds them), whose x86 logits must stay within 1e-3 NMSE of the portable path's.
 *
 * The long prompt (254 tokens) runs on the best level with the F16 cache and the exact order, the
 * short one (39 tokens) for the other combinations. MINFER_SANITIZED=1 (the sanitizer build) runs a
 * reduced set: the short prompt, the default kernel level, fewer variants. MINFER_INVARIANCE_MODELS=substring limits the models. With MINFER_ISA set (CI's
 * second pass at one level) it reports itself skipped: this run already covers every level. */
#include "test.h"

#include "minfer.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <unistd.h>

typedef struct {
    const mf_model *m;
    const int32_t *ids;
    int32_t n, V;
    bool kv_f32;
    mf_isa isa;
    mf_float_order order;
    const char *name;
} setup;

static mf_context *make_ctx(const setup *s, int32_t n_ubatch, int32_t n_threads) {
    mf_context_params p = mf_context_default_params();
    p.n_ctx = 4 * s->n + 64;
    p.n_ubatch = n_ubatch;
    p.n_threads = n_threads;
    p.kv_f32 = s->kv_f32;
    p.isa = s->isa;
    p.order = s->order;
    mf_context *c = NULL;
    CHECKF(mf_context_create(s->m, &p, &c) == MF_OK, "%s", mf_last_error());
    return c;
}

/* Another sequence's tokens: the prompt read backwards from an offset, so it differs from seq 0. */
static int32_t other_tok(const setup *s, int32_t seq, int32_t i) { return s->ids[(s->n - 1 - i + 17 * seq) % s->n]; }

/* Run seq 0's prompt from position from (earlier positions already in c) in decode calls of chunk
 * seq-0 tokens, each call also holding the next chunk tokens of n_other other sequences (sequences
 * 1..n_other, interleaved token by token), and copy seq 0's logits of positions [from, n) to out.
 * lead: the other sequences start this many tokens ahead (a different cache layout). */
static bool run(const setup *s, mf_context *c, int32_t from, int32_t chunk, int n_other, int32_t lead, float *out) {
    const int32_t cap = chunk * (1 + n_other) + lead * n_other;
    int32_t *tok = malloc((size_t)cap * 4), *pos = malloc((size_t)cap * 4), *seq = malloc((size_t)cap * 4);
    int8_t *want = malloc((size_t)cap);
    int32_t other_next[4] = {0};
    bool ok = true;
    for (int32_t i0 = from; i0 < s->n && ok; i0 += chunk) {
        const int32_t k = i0 + chunk > s->n ? s->n - i0 : chunk;
        int32_t nt = 0;
        for (int32_t i = 0; i < k; i++) {
            tok[nt] = s->ids[i0 + i], pos[nt] = i0 + i, seq[nt] = 0, want[nt] = 1, nt++;
            for (int o = 1; o <= n_other; o++) {
                const int32_t extra = i0 == from && i == 0 ? lead : 0; /* the lead goes into the first batch */
                for (int32_t e = 0; e <= extra; e++) {
                    const int32_t p = other_next[o]++;
                    tok[nt] = other_tok(s, o, p), pos[nt] = p, seq[nt] = o, want[nt] = 0, nt++;
                }
            }
        }
        mf_batch b = {.n_tokens = nt, .tokens = tok, .pos = pos, .seq = seq, .logits = want};
        ok = mf_context_decode(c, &b) == MF_OK && mf_context_n_outputs(c) == k;
        CHECKF(ok, "%s: decode at %d: %s", s->name, i0, mf_last_error());
        for (int32_t i = 0; ok && i < k; i++)
            memcpy(out + (size_t)(i0 + i) * s->V, mf_context_logits(c, i), (size_t)s->V * 4);
    }
    free(tok), free(pos), free(seq), free(want);
    return ok;
}

/* Positions [from, n) of got against ref, bit for bit. */
static void compare(const setup *s, const char *variant, const float *ref, const float *got, int32_t from) {
    int32_t bad = 0, first = -1;
    for (int32_t i = from; i < s->n; i++)
        if (memcmp(ref + (size_t)i * s->V, got + (size_t)i * s->V, (size_t)s->V * 4) && !bad++) first = i;
    CHECKF(!bad, "%s: %s: %d of %d positions differ from the one-batch run (first %d)", s->name, variant, bad,
           s->n - from, first);
}

static void check_setup(const setup *s, bool full) {
    const size_t bytes = (size_t)s->n * (size_t)s->V * 4;
    float *ref = malloc(bytes), *got = malloc(bytes);
    mf_context *c = make_ctx(s, 512, 2);
    if (!c || !run(s, c, 0, s->n, 0, 0, ref)) goto done;
    mf_context_free(c);
    static const int32_t chunks[] = {1, 7, 3, 64};
    for (size_t k = 0; k < (full ? 4 : 2); k++) {
        char v[64];
        snprintf(v, sizeof v, "chunks of %d", chunks[k]);
        c = make_ctx(s, 512, 2);
        if (run(s, c, 0, chunks[k], 0, 0, got)) compare(s, v, ref, got, 0);
        mf_context_free(c);
    }
    /* two other sequences interleaved in every batch, they started 5 tokens earlier */
    c = make_ctx(s, 512, 2);
    if (run(s, c, 0, 16, 2, 5, got)) compare(s, "3 sequences interleaved, chunks of 16", ref, got, 0);
    mf_context_free(c);
    if (full) {
        c = make_ctx(s, 5, 1);
        if (run(s, c, 0, s->n, 0, 0, got)) compare(s, "n_ubatch 5, 1 thread", ref, got, 0);
        mf_context_free(c);
        c = make_ctx(s, 512, 3);
        if (run(s, c, 0, s->n, 0, 0, got)) compare(s, "3 threads", ref, got, 0);
        mf_context_free(c);
        c = make_ctx(s, 512, 2);
        if (run(s, c, 0, 1, 1, 0, got)) compare(s, "2 sequences, one token each per batch", ref, got, 0);
        mf_context_free(c);
        /* a shared prefix: sequence 3 computes the first half, sequence 0 shares it */
        const int32_t half = s->n / 2;
        c = make_ctx(s, 512, 2);
        int32_t *seq3 = malloc((size_t)half * 4);
        for (int32_t i = 0; i < half; i++) seq3[i] = 3;
        mf_batch b = {.n_tokens = half, .tokens = s->ids, .seq = seq3};
        CHECK(mf_context_decode(c, &b) == MF_OK && mf_context_seq_cp(c, 3, 0, 0, -1) == MF_OK);
        if (run(s, c, half, 7, 1, 2, got)) compare(s, "after a shared prefix", ref, got, half);
        /* and restored from a saved state in another context */
        size_t size = 0, written = 0;
        CHECK(mf_context_seq_state_size(c, 3, &size) == MF_OK);
        void *img = malloc(size);
        CHECK(mf_context_seq_state_save(c, 3, img, size, &written) == MF_OK);
        mf_context *d = make_ctx(s, 512, 2);
        CHECK(mf_context_seq_state_load(d, 0, img, written) == MF_OK);
        if (run(s, d, half, 64, 0, 0, got)) compare(s, "after a restored state", ref, got, half);
        mf_context_free(d);
        free(img);
        free(seq3);
        mf_context_free(c);
    }
    c = NULL;
done:
    mf_context_free(c);
    free(ref), free(got);
}

/* The short prompt's logits of m at isa in the exact order (F32 cache), or NULL. */
static float *all_logits(const mf_model *m, mf_isa isa, const int32_t *ids, int32_t n) {
    setup s = {.m = m, .ids = ids, .n = n, .V = mf_model_n_vocab(m), .kv_f32 = true, .isa = isa,
               .order = MF_ORDER_EXACT, .name = "logits"};
    float *out = malloc((size_t)n * (size_t)s.V * 4);
    mf_context *c = make_ctx(&s, 512, 2);
    const bool ok = c && out && run(&s, c, 0, n, 0, 0, out);
    mf_context_free(c);
    if (!ok) free(out);
    return ok ? out : NULL;
}

/* Q2_K and Q3_K, which no fixture holds: mini-qwen2's F32 weights quantized into them (`minfer
 * quantize --pure`), then every check above, and the x86 kernels (llama.cpp's x86 order) against the
 * portable reference (its generic order) within the bound of two orders, 1e-3 NMSE (test_model_fixtures). */
static void quantized_models(const int32_t *ids, int32_t n, const mf_isa *isas, int n_isa, bool reduced) {
    static const char *const ftypes[] = {"Q2_K", "Q3_K_S"};
    char dir[] = "/tmp/minfer-invariance-XXXXXX";
    if (!mkdtemp(dir)) {
        CHECKF(false, "mkdtemp: %s", strerror(errno));
        return;
    }
    for (size_t f = 0; f < sizeof ftypes / sizeof ftypes[0]; f++) {
        char path[256];
        snprintf(path, sizeof path, "%s/mini-qwen2.%s.gguf", dir, ftypes[f]);
        mf_quant_params qp = {.ftype = mf_quant_ftype_find(ftypes[f]), .rules = {.pure = true}, .n_threads = 2};
        const mf_status qs = mf_quant_model(fixture("models/mini-qwen2.F32.gguf"), path, &qp, NULL);
        CHECKF(qs == MF_OK, "quantize %s: %s", ftypes[f], mf_last_error());
        if (qs != MF_OK) continue;
        mf_model *m = NULL;
        const mf_status ls = mf_model_load(path, &m);
        CHECKF(ls == MF_OK, "%s: %s", path, mf_last_error());
        if (ls != MF_OK) {
            unlink(path);
            continue;
        }
        for (int ii = 0; ii < n_isa; ii++)
            for (int order = 0; order < (reduced ? 1 : 2); order++) {
                if (order && isas[ii] == MF_ISA_SCALAR) continue;
                char name[128];
                snprintf(name, sizeof name, "mini-qwen2 %s (pure) %s %s", ftypes[f], mf_isa_name(isas[ii]),
                         order ? "fast" : "exact");
                setup s = {.m = m, .ids = ids, .n = n, .V = mf_model_n_vocab(m), .isa = isas[ii],
                           .order = order ? MF_ORDER_FAST : MF_ORDER_EXACT, .name = name};
                check_setup(&s, !reduced);
            }
        float *ref = all_logits(m, MF_ISA_SCALAR, ids, n);
        for (int ii = 0; ref && ii < n_isa; ii++) {
            if (isas[ii] == MF_ISA_SCALAR) continue;
            float *got = all_logits(m, isas[ii], ids, n);
            if (!got) continue;
            double num = 0, den = 0;
            for (size_t i = 0; i < (size_t)n * (size_t)mf_model_n_vocab(m); i++)
                num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]), den += (double)ref[i] * ref[i];
            CHECKF(num <= 1e-3 * den, "%s at %s against the portable reference: NMSE %.3g", ftypes[f],
                   mf_isa_name(isas[ii]), num / den);
            printf("%s: %s against the portable reference, NMSE %.3g\n", ftypes[f], mf_isa_name(isas[ii]), num / den);
            free(got);
        }
        free(ref);
        mf_model_free(m);
        unlink(path);
    }
    rmdir(dir);
}

static int32_t *read_ids(const char *path, int32_t *n) {
    FILE *f = fopen(path, "r");
    int32_t *ids = malloc(4096 * 4);
    *n = 0;
    while (f && *n < 4096 && fscanf(f, "%d", &ids[*n]) == 1) (*n)++;
    if (f) fclose(f);
    return ids;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(void) {
    if (getenv("MINFER_ISA") && *getenv("MINFER_ISA")) {
        printf("test_model_invariance: every instruction set is covered by the run without MINFER_ISA\n");
        return 77;
    }
    const bool reduced = getenv("MINFER_SANITIZED") && atoi(getenv("MINFER_SANITIZED"));
    const char *only = getenv("MINFER_INVARIANCE_MODELS");
    /* the long prompt (254 tokens) for the best level's common setup, the short one (39) elsewhere */
    int32_t n_long, n_short;
    int32_t *long_ids = read_ids(fixture("models/prompt-long.ids"), &n_long);
    int32_t *short_ids = read_ids(fixture("models/prompt.ids"), &n_short);
    CHECKF(n_long > 200 && n_short > 30, "cannot read the prompt ids");
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", fixture("models"));
    DIR *d = opendir(dir);
    CHECKF(d != NULL, "cannot list %s", dir);
    char *names[256];
    int n_names = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n_names < 256;) {
        const size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "mini-", 5) || len < 6 || strcmp(e->d_name + len - 5, ".gguf")) continue;
        if (strstr(e->d_name, "-split-") && !strstr(e->d_name, "-00001-of-")) continue;
        if (only && !strstr(e->d_name, only)) continue;
        names[n_names++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n_names, sizeof *names, cmp_str);
    CHECKF(n_names >= 30 || only, "only %d fixture models found", n_names);

    mf_isa isas[MF_ISA_COUNT];
    int n_isa = 0;
    printf("instruction sets:");
    for (int i = MF_ISA_SCALAR; i < MF_ISA_COUNT; i++)
        if (mf_isa_supported((mf_isa)i) && (!reduced || (mf_isa)i == mf_isa_resolve(MF_ISA_AUTO))) {
            isas[n_isa++] = (mf_isa)i;
            printf(" %s", mf_isa_name((mf_isa)i));
        }
    printf("\n");
    for (int k = 0; k < n_names; k++) {
        char rel[512];
        snprintf(rel, sizeof rel, "models/%s", names[k]);
        mf_model *m = NULL;
        if (mf_model_load(fixture(rel), &m) != MF_OK) {
            CHECKF(false, "%s: %s", names[k], mf_last_error());
            continue;
        }
        for (int ii = 0; ii < n_isa; ii++)
            for (int order = 0; order < (reduced ? 1 : 2); order++)
                for (int kv = 0; kv < 2; kv++) {
                    /* the scalar kernels have one order; every combination on the best level, the
                     * common one (F16 cache, exact order) on every level */
                    if (order && isas[ii] == MF_ISA_SCALAR) continue;
                    const bool best = isas[ii] == mf_isa_resolve(MF_ISA_AUTO), common = !order && !kv;
                    char name[640];
                    snprintf(name, sizeof name, "%s %s %s %s", names[k], mf_isa_name(isas[ii]),
                             order ? "fast" : "exact", kv ? "F32 KV" : "F16 KV");
                    const bool long_prompt = best && common && !reduced;
                    setup s = {.m = m, .ids = long_prompt ? long_ids : short_ids, .n = long_prompt ? n_long : n_short,
                               .V = mf_model_n_vocab(m), .kv_f32 = kv, .isa = isas[ii],
                               .order = order ? MF_ORDER_FAST : MF_ORDER_EXACT, .name = name};
                    if (best || common) check_setup(&s, !reduced);
                }
        mf_model_free(m);
        free(names[k]);
    }
    if (!only) quantized_models(short_ids, n_short, isas, n_isa, reduced);
    free(long_ids), free(short_ids);
    return test_summary("test_model_invariance");
}
