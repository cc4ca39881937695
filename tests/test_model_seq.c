/* test_model_seq.c: a context's sequence operations through the public API, on a fixture model:
 * a failed decode (context full, bad token, bad position) leaves the cache exactly as before;
 * sharing a prefix (seq_cp) gives bit for bit what computing it would have; seq_keep; saved
 * sequence states restore exactly, into another context or sequence, through a buffer or a file,
 * and every damaged or foreign image is refused with the cache untouched. */
#include "test.h"

#include "minfer.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

static int32_t V;

static mf_context *make_ctx(const mf_model *m, int32_t n_ctx, bool kv_f32) {
    mf_context_params p = test_context_params();
    p.n_ctx = n_ctx;
    p.n_threads = 2;
    p.kv_f32 = kv_f32;
    mf_context *c = NULL;
    CHECKF(mf_context_create(m, &p, &c) == MF_OK, "%s", mf_last_error());
    return c;
}

/* Decode toks[0..n) of seq after its current end with logits for the last; copy them to out. */
static mf_status feed(mf_context *c, int32_t seq, const int32_t *toks, int32_t n, float *out) {
    int32_t s[64];
    for (int32_t i = 0; i < n; i++) s[i] = seq;
    mf_batch b = {.n_tokens = n, .tokens = toks, .seq = s};
    mf_status st = mf_context_decode(c, &b);
    if (!st && out) memcpy(out, mf_context_logits(c, 0), (size_t)V * sizeof(float));
    return st;
}

static bool same(const float *a, const float *b) { return !memcmp(a, b, (size_t)V * sizeof(float)); }

static const int32_t P[] = {4065, 3840, 2540, 2780, 3646, 2350, 3152, 3387, 915, 225, 1219, 1158};
static const int32_t C[] = {3550, 3708, 21, 2031, 3337, 534};
#define NPF 12
#define NC 6

/* The logits after P + C decoded in one fresh context (the reference for every variant). */
static void reference(const mf_model *m, bool kv_f32, float *after_p, float *after_pc) {
    mf_context *c = make_ctx(m, 64, kv_f32);
    CHECK(feed(c, 0, P, NPF, after_p) == MF_OK);
    CHECK(feed(c, 0, C, NC, after_pc) == MF_OK);
    mf_context_free(c);
}

static void test_atomic(const mf_model *m) {
    float *ref_p = malloc((size_t)V * 4), *ref_pc = malloc((size_t)V * 4), *got = malloc((size_t)V * 4);
    reference(m, false, ref_p, ref_pc);
    /* the case: 8 cells, 6 tokens, then 4 more do not fit */
    mf_context *c = make_ctx(m, 8, false);
    CHECK(feed(c, 0, P, 6, NULL) == MF_OK);
    CHECK(feed(c, 0, P + 6, 4, NULL) == MF_ERR_RANGE && strstr(mf_last_error(), "context of 8"));
    CHECK(mf_context_seq_len(c, 0) == 6 && mf_context_seq_pos_max(c, 0) == 5 && mf_context_n_used(c) == 6);
    /* the cache is as before: the next tokens continue exactly */
    CHECK(feed(c, 0, P + 6, 2, got) == MF_OK && mf_context_seq_len(c, 0) == 8);
    mf_context *fresh = make_ctx(m, 8, false);
    float *want = malloc((size_t)V * 4);
    CHECK(feed(fresh, 0, P, 8, want) == MF_OK);
    CHECKF(same(got, want), "decoding after a failed decode differs from a fresh run");
    /* after removing a tail, the freed cells are reused and nothing stale is seen */
    CHECK(mf_context_seq_rm(c, 0, 4, -1) == MF_OK && mf_context_seq_len(c, 0) == 4);
    CHECK(feed(c, 0, P + 4, 4, got) == MF_OK && same(got, want));
    mf_context_free(fresh);

    /* bad input anywhere in a batch: nothing changes */
    mf_context_free(c);
    c = make_ctx(m, 64, false);
    CHECK(feed(c, 0, P, 3, NULL) == MF_OK);
    int32_t bad[3] = {P[3], V, P[4]};
    CHECK(feed(c, 0, bad, 3, NULL) == MF_ERR_ARG && mf_context_n_used(c) == 3);
    int32_t pos_dup[2] = {3, 3}, pos_old[2] = {2, 3}, toks2[2] = {P[3], P[4]}, seqs[2] = {0, 0};
    mf_batch b = {.n_tokens = 2, .tokens = toks2, .pos = pos_dup, .seq = seqs};
    CHECK(mf_context_decode(c, &b) == MF_ERR_ARG && strstr(mf_last_error(), "increase"));
    b.pos = pos_old;
    CHECK(mf_context_decode(c, &b) == MF_ERR_ARG && strstr(mf_last_error(), "already in the cache"));
    int32_t seq_bad[2] = {0, MF_MAX_SEQ};
    b.pos = NULL, b.seq = seq_bad;
    CHECK(mf_context_decode(c, &b) == MF_ERR_ARG && strstr(mf_last_error(), "sequence id"));
    CHECK(mf_context_n_used(c) == 3 && mf_context_seq_pos_max(c, 0) == 2);
    /* the logits of the last good decode are still there after a refused one */
    CHECK(mf_context_n_outputs(c) == 1 && mf_context_logits(c, 0) != NULL);
    CHECK(feed(c, 0, P + 3, NPF - 3, got) == MF_OK && same(got, ref_p));
    CHECK(mf_context_seq_rm(c, MF_MAX_SEQ, 0, -1) == MF_ERR_ARG && mf_context_seq_cp(c, 0, -1, 0, -1) == MF_ERR_ARG);
    mf_context_free(c);
    free(ref_p), free(ref_pc), free(got), free(want);
}

static void test_share(const mf_model *m, bool kv_f32) {
    float *ref_p = malloc((size_t)V * 4), *ref_pc = malloc((size_t)V * 4), *got = malloc((size_t)V * 4);
    reference(m, kv_f32, ref_p, ref_pc);
    mf_context *c = make_ctx(m, 64, kv_f32);
    /* another sequence first, so the shared cells are not at the start of the cache */
    CHECK(feed(c, 5, C, NC, NULL) == MF_OK);
    CHECK(feed(c, 0, P, NPF, got) == MF_OK && same(got, ref_p));
    CHECK(mf_context_seq_cp(c, 0, 1, 0, -1) == MF_OK);
    CHECK(mf_context_seq_len(c, 1) == NPF && mf_context_n_used(c) == NPF + NC);
    CHECK(feed(c, 1, C, NC, got) == MF_OK);
    CHECKF(same(got, ref_pc), "a shared prefix gives other logits than a computed one");
    /* seq 0 is untouched by seq 1's tokens: continuing it gives the reference too */
    CHECK(feed(c, 0, C, NC, got) == MF_OK && same(got, ref_pc));
    CHECK(mf_context_n_used(c) == NPF + 3 * NC);
    /* the tokens come back in position order */
    int32_t toks[64], pos[64];
    CHECK(mf_context_seq_tokens(c, 1, toks, pos, 64) == NPF + NC);
    CHECK(!memcmp(toks, P, sizeof P) && !memcmp(toks + NPF, C, sizeof C) && pos[0] == 0 && pos[NPF + NC - 1] == NPF + NC - 1);
    /* a partial share: seq 2 takes the first 6 positions, then computes the rest */
    CHECK(mf_context_seq_cp(c, 0, 2, 0, 6) == MF_OK && mf_context_seq_pos_max(c, 2) == 5);
    CHECK(feed(c, 2, P + 6, NPF - 6, got) == MF_OK && same(got, ref_p));
    /* keep one: the others' cells go, shared cells stay for the kept one */
    CHECK(mf_context_seq_keep(c, 1) == MF_OK);
    CHECK(mf_context_seq_len(c, 0) == 0 && mf_context_seq_len(c, 2) == 0 && mf_context_seq_len(c, 5) == 0);
    CHECK(mf_context_n_used(c) == NPF + NC && mf_context_seq_pos_min(c, 1) == 0);
    mf_context_free(c);
    free(ref_p), free(ref_pc), free(got);
}

static void test_state(const mf_model *m, const mf_model *other) {
    float *ref_p = malloc((size_t)V * 4), *ref_pc = malloc((size_t)V * 4), *got = malloc((size_t)V * 4);
    reference(m, false, ref_p, ref_pc);
    mf_context *a = make_ctx(m, 64, false);
    CHECK(feed(a, 3, C, 2, NULL) == MF_OK); /* another sequence, not saved */
    CHECK(feed(a, 0, P, NPF, NULL) == MF_OK);
    size_t size = 0, written = 0;
    CHECK(mf_context_seq_state_size(a, 0, &size) == MF_OK && size > (size_t)NPF * 8);
    uint8_t *img = malloc(size);
    CHECK(mf_context_seq_state_save(a, 0, img, size - 1, &written) == MF_ERR_RANGE);
    CHECK(mf_context_seq_state_save(a, 0, img, size, &written) == MF_OK && written == size);

    /* into another context's sequence 4, which held something else: continues exactly */
    mf_context *b = make_ctx(m, 64, false);
    CHECK(feed(b, 4, C, NC, NULL) == MF_OK && feed(b, 1, C, 3, NULL) == MF_OK);
    CHECK(mf_context_seq_state_load(b, 4, img, size) == MF_OK);
    CHECK(mf_context_seq_len(b, 4) == NPF && mf_context_seq_len(b, 1) == 3 && mf_context_n_used(b) == NPF + 3);
    CHECK(feed(b, 4, C, NC, got) == MF_OK);
    CHECKF(same(got, ref_pc), "a restored sequence continues differently");

    /* damaged images: refused, nothing changes */
    const int32_t used = mf_context_n_used(b);
    uint8_t *bad = malloc(size);
    const size_t flips[] = {0, 20, 60, 104 + 3, 104 + NPF * 4 + 1, size / 2, size - 1};
    for (size_t k = 0; k < sizeof flips / sizeof flips[0]; k++) {
        memcpy(bad, img, size);
        bad[flips[k]] ^= 0x10;
        CHECKF(mf_context_seq_state_load(b, 4, bad, size) == MF_ERR_FORMAT, "flip at %zu: %s", flips[k], mf_last_error());
    }
    CHECK(mf_context_seq_state_load(b, 4, img, size - 7) == MF_ERR_FORMAT && strstr(mf_last_error(), "truncated"));
    CHECK(mf_context_seq_state_load(b, 4, img, 50) == MF_ERR_FORMAT);
    CHECK(mf_context_seq_state_load(b, MF_MAX_SEQ, img, size) == MF_ERR_ARG);
    CHECK(mf_context_n_used(b) == used && mf_context_seq_len(b, 4) == NPF + NC);
    /* another model, another KV type: refused by name */
    mf_context *o = make_ctx(other, 64, false);
    CHECK(mf_context_seq_state_load(o, 0, img, size) == MF_ERR_ARG && strstr(mf_last_error(), "another model"));
    mf_context *f32 = make_ctx(m, 64, true);
    CHECK(mf_context_seq_state_load(f32, 0, img, size) == MF_ERR_ARG && strstr(mf_last_error(), "KV cache"));
    /* no room: a context of 16 cells holding 10 of another sequence */
    mf_context *small = make_ctx(m, 16, false);
    CHECK(feed(small, 1, P, 10, NULL) == MF_OK);
    CHECK(mf_context_seq_state_load(small, 0, img, size) == MF_ERR_RANGE && mf_context_n_used(small) == 10);
    /* ... but replacing the sequence that holds them fits */
    CHECK(mf_context_seq_state_load(small, 1, img, size) == MF_OK && mf_context_seq_len(small, 1) == NPF);

    /* files: atomic, symlinks followed, directories and devices refused */
    char dir[] = "/tmp/minfer-test-seq-XXXXXX", path[256], link[256];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/state.bin", dir);
    snprintf(link, sizeof link, "%s/current", dir);
    CHECK(symlink("state.bin", link) == 0);
    CHECK(mf_context_seq_state_save_file(a, 0, link) == MF_OK);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode) && stat(path, &st) == 0 && (size_t)st.st_size == size);
    mf_context_clear(b);
    CHECK(mf_context_seq_state_load_file(b, 2, path) == MF_OK);
    CHECK(feed(b, 2, C, NC, got) == MF_OK && same(got, ref_pc));
    CHECK(mf_context_seq_state_save_file(a, 0, dir) == MF_ERR_IO && strstr(mf_last_error(), "directory"));
    CHECK(mf_context_seq_state_save_file(a, 0, "/dev/null") == MF_ERR_IO && strstr(mf_last_error(), "device"));
    CHECK(mf_context_seq_state_load_file(b, 2, "/nonexistent/state") == MF_ERR_IO);
    /* a truncated file on disk: refused */
    CHECK(truncate(path, (off_t)size - 100) == 0);
    CHECK(mf_context_seq_state_load_file(b, 2, path) == MF_ERR_FORMAT);
    /* an empty sequence saves and restores as empty */
    CHECK(mf_context_seq_state_save_file(a, 9, path) == MF_OK);
    CHECK(mf_context_seq_state_load_file(b, 2, path) == MF_OK && mf_context_seq_len(b, 2) == 0);
    unlink(path), unlink(link), rmdir(dir);

    mf_context_free(small), mf_context_free(f32), mf_context_free(o), mf_context_free(b), mf_context_free(a);
    free(bad), free(img), free(ref_p), free(ref_pc), free(got);
}

int main(void) {
    mf_model *m = NULL, *other = NULL;
    mf_status st = mf_model_load(fixture("models/mini-qwen2.Q8_0.gguf"), &m);
    if (!st) st = mf_model_load(fixture("models/mini-qwen2.Q4_0.gguf"), &other);
    CHECKF(st == MF_OK, "%s", mf_last_error());
    if (st) return test_summary("test_model_seq");
    V = mf_model_n_vocab(m);
    CHECK(strlen(mf_model_fingerprint(m)) == 32 && strcmp(mf_model_fingerprint(m), mf_model_fingerprint(other)));
    test_atomic(m);
    test_share(m, false);
    test_share(m, true);
    test_state(m, other);
    mf_model_free(other);
    mf_model_free(m);
    return test_summary("test_model_seq");
}
