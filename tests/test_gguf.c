/* test_gguf.c: the GGUF reader on the real fixtures: every model loads with consistent tensors and
 * metadata, typed accessors give the documented statuses, the split model equals the unsplit one,
 * and the 151,936-token vocabulary parses quickly. */
#include "gguf/gguf.h"
#include "core/core.h"
#include "test.h"

#include <dirent.h>
#include <stdint.h>

/* Invariants every well-formed file has: names index back to themselves, data inside the file,
 * sizes consistent with type and shape. */
static void check_model(const char *path, const mf_gguf *g) {
    int64_t n = mf_gguf_n_tensors(g);
    uint64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        CHECKF(mf_gguf_find_tensor(g, t->name) == t, "%s: tensor %s not found by name", path, t->name);
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        CHECKF(t->nbytes == mf_row_size(t->type, t->ne[0]) * (uint64_t)rows, "%s: %s nbytes", path, t->name);
        CHECKF(t->offset % mf_gguf_alignment(g) == 0, "%s: %s offset", path, t->name);
        CHECK(t->data != NULL);
        total += t->nbytes;
    }
    CHECKF(total <= mf_gguf_file_size(g), "%s: tensor bytes exceed file size", path);
    CHECK(mf_gguf_find_tensor(g, "no.such.tensor") == NULL);
    for (int64_t i = 0; i < mf_gguf_n_kv(g); i++) {
        const mf_gguf_kv *kv = mf_gguf_kv_at(g, i);
        CHECKF(mf_gguf_find_kv(g, kv->key) == kv, "%s: key %s not found", path, kv->key);
    }
    mf_str arch;
    CHECKF(mf_gguf_get_str(g, "general.architecture", &arch) == MF_OK, "%s: %s", path, mf_last_error());
}

static void test_all_fixtures(void) {
    const char *dir = fixture("models");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dir);
    DIR *d = opendir(dirbuf);
    CHECKF(d != NULL, "cannot open %s", dirbuf);
    if (!d) return;
    int loaded = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf")) continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dirbuf, e->d_name);
        mf_gguf *g = NULL;
        mf_status s = mf_gguf_open(path, &g);
        bool later_part = strstr(e->d_name, "-split-") && !strstr(e->d_name, "-00001-of-");
        if (later_part) {
            CHECKF(s == MF_ERR_ARG && strstr(mf_last_error(), "open part 1"), "%s: %s", path, mf_last_error());
        } else {
            CHECKF(s == MF_OK, "%s: %s", path, mf_last_error());
            if (s == MF_OK) {
                check_model(path, g);
                loaded++;
            }
        }
        mf_gguf_free(g);
    }
    closedir(d);
    CHECKF(loaded >= 30, "only %d fixtures loaded", loaded);
}

static void test_qwen2_facts(void) {
    mf_gguf *g = NULL;
    CHECKF(mf_gguf_open(fixture("models/mini-qwen2.Q4_K_M.gguf"), &g) == MF_OK, "%s", mf_last_error());
    if (!g) return;
    CHECK(mf_gguf_version(g) == 3);
    CHECK(mf_gguf_n_parts(g) == 1);
    uint32_t u;
    CHECK(mf_gguf_get_u32(g, "qwen2.block_count", &u) == MF_OK && u == 2);
    CHECK(mf_gguf_get_u32(g, "qwen2.embedding_length", &u) == MF_OK && u == 256);
    CHECK(mf_gguf_get_u32(g, "qwen2.attention.head_count_kv", &u) == MF_OK && u == 2);
    float f;
    CHECK(mf_gguf_get_f32(g, "qwen2.rope.freq_base", &f) == MF_OK && f == 1e6f);
    mf_str str;
    CHECK(mf_gguf_get_str(g, "general.architecture", &str) == MF_OK && str.len == 5 && !memcmp(str.ptr, "qwen2", 5));
    const mf_gguf_value *toks;
    CHECK(mf_gguf_get_arr(g, "tokenizer.ggml.tokens", MF_GGUF_STRING, &toks) == MF_OK && toks->arr.n == 4096);
    if (toks) CHECK(toks->arr.strs[4064].len == 13 && !memcmp(toks->arr.strs[4064].ptr, "<|endoftext|>", 13));

    const mf_gguf_value *types;
    int64_t tt;
    double dd;
    CHECK(mf_gguf_get_arr(g, "tokenizer.ggml.token_type", MF_GGUF_INT32, &types) == MF_OK && types->arr.n == 4096);
    CHECK(mf_gguf_arr_get_i64(types, 0, &tt) && tt == 1);     /* normal token */
    CHECK(mf_gguf_arr_get_i64(types, 4065, &tt) && tt == 3);  /* <|im_start|>: control */
    CHECK(!mf_gguf_arr_get_i64(types, 4096, &tt));
    CHECK(!mf_gguf_arr_get_f64(types, 0, &dd));
    CHECK(!mf_gguf_arr_get_i64(toks, 0, &tt));

    /* Accessor statuses and messages. */
    CHECK(mf_gguf_get_u32(g, "general.architecture", &u) == MF_ERR_TYPE);
    CHECKF(strstr(mf_last_error(), "general.architecture") && strstr(mf_last_error(), "expected uint32, found string"),
           "%s", mf_last_error());
    CHECK(mf_gguf_get_u32(g, "no.such.key", &u) == MF_ERR_NOT_FOUND);
    CHECKF(strstr(mf_last_error(), "no.such.key"), "%s", mf_last_error());
    CHECK(mf_gguf_find_u32(g, "no.such.key", &u, 77) == MF_OK && u == 77);
    CHECK(mf_gguf_find_f32(g, "no.such.key", &f, 0.5f) == MF_OK && f == 0.5f);
    CHECK(mf_gguf_find_f32(g, "qwen2.block_count", &f, 0.5f) == MF_ERR_TYPE);
    bool b;
    CHECK(mf_gguf_find_bool(g, "no.such.key", &b, true) == MF_OK && b);
    CHECK(mf_gguf_get_arr(g, "tokenizer.ggml.tokens", MF_GGUF_INT32, &toks) == MF_ERR_TYPE);
    CHECKF(strstr(mf_last_error(), "expected array of int32, found array of string"), "%s", mf_last_error());
    char *dup = NULL;
    CHECK(mf_gguf_find_str_dup(g, "tokenizer.ggml.model", &dup) == MF_OK && dup && !strcmp(dup, "gpt2"));
    free(dup);
    CHECK(mf_gguf_find_str_dup(g, "no.such.key", &dup) == MF_OK && dup == NULL);
    uint64_t u64;
    int64_t i64;
    CHECK(mf_gguf_get_u64(g, "qwen2.context_length", &u64) == MF_OK && u64 == 4096);
    CHECK(mf_gguf_get_i64(g, "qwen2.context_length", &i64) == MF_OK && i64 == 4096);

    const mf_gguf_tensor *t = mf_gguf_find_tensor(g, "token_embd.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 4096);
    t = mf_gguf_find_tensor(g, "blk.0.attn_q.bias");
    CHECK(t && t->type == MF_TYPE_F32 && t->n_dims == 1 && t->ne[0] == 256);
    mf_gguf_free(g);
}

static void test_split_equals_unsplit(void) {
    mf_gguf *a = NULL, *b = NULL;
    CHECKF(mf_gguf_open(fixture("models/mini-qwen2.Q8_0.gguf"), &a) == MF_OK, "%s", mf_last_error());
    CHECKF(mf_gguf_open(fixture("models/mini-qwen2.Q8_0-split-00001-of-00003.gguf"), &b) == MF_OK, "%s", mf_last_error());
    if (!a || !b) goto done;
    CHECK(mf_gguf_n_parts(b) == 3);
    CHECK(mf_gguf_part_path(b, 2) && strstr(mf_gguf_part_path(b, 2), "-00003-of-00003.gguf"));
    CHECK(mf_gguf_n_tensors(a) == mf_gguf_n_tensors(b));
    bool parts_used[3] = {0};
    for (int64_t i = 0; i < mf_gguf_n_tensors(a); i++) {
        const mf_gguf_tensor *ta = mf_gguf_tensor_at(a, i), *tb = mf_gguf_find_tensor(b, ta->name);
        CHECKF(tb != NULL, "split lacks %s", ta->name);
        if (!tb) continue;
        CHECK(ta->type == tb->type && ta->n_dims == tb->n_dims && ta->nbytes == tb->nbytes);
        CHECK(!memcmp(ta->ne, tb->ne, sizeof ta->ne));
        CHECKF(!memcmp(ta->data, tb->data, ta->nbytes), "data of %s differs", ta->name);
        if (tb->part < 3) parts_used[tb->part] = true;
    }
    CHECK(parts_used[0] && parts_used[1] && parts_used[2]);
    for (int64_t i = 0; i < mf_gguf_n_kv(a); i++) {
        const mf_gguf_kv *ka = mf_gguf_kv_at(a, i), *kb = mf_gguf_find_kv(b, ka->key);
        CHECKF(kb && mf_gguf_value_equal(&ka->value, &kb->value), "metadata %s differs", ka->key);
    }
done:
    mf_gguf_free(a);
    mf_gguf_free(b);
}

/* Read into memory (MF_GGUF_OPEN_READ) instead of mapped: the same tensors, bytes and metadata,
 * split files included; data aligned as in the file; a missing part is still an error. */
static void test_read_into_memory(void) {
    const char *files[] = {"models/mini-qwen2.Q4_0.gguf", "models/mini-qwen2.Q8_0-split-00001-of-00003.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        mf_gguf *a = NULL, *b = NULL;
        CHECKF(mf_gguf_open(fixture(files[f]), &a) == MF_OK, "%s", mf_last_error());
        CHECKF(mf_gguf_open_ex(fixture(files[f]), MF_GGUF_OPEN_READ, &b) == MF_OK, "%s", mf_last_error());
        if (a && b) {
            CHECK(mf_gguf_n_parts(a) == mf_gguf_n_parts(b) && mf_gguf_n_tensors(a) == mf_gguf_n_tensors(b));
            for (int64_t i = 0; i < mf_gguf_n_tensors(a); i++) {
                const mf_gguf_tensor *ta = mf_gguf_tensor_at(a, i), *tb = mf_gguf_tensor_at(b, i);
                CHECK(!strcmp(ta->name, tb->name) && ta->nbytes == tb->nbytes && ta->data != tb->data);
                CHECKF(!memcmp(ta->data, tb->data, ta->nbytes), "%s: data of %s differs when read", files[f], ta->name);
                CHECKF((uintptr_t)tb->data % mf_gguf_alignment(b) == 0, "%s: %s misaligned", files[f], tb->name);
            }
            for (int64_t i = 0; i < mf_gguf_n_kv(a); i++) {
                const mf_gguf_kv *ka = mf_gguf_kv_at(a, i), *kb = mf_gguf_find_kv(b, ka->key);
                CHECKF(kb && mf_gguf_value_equal(&ka->value, &kb->value), "metadata %s differs", ka->key);
            }
        }
        mf_gguf_free(a);
        mf_gguf_free(b);
    }
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open_ex("/nonexistent/x.gguf", MF_GGUF_OPEN_READ, &g) == MF_ERR_IO && !g);
    CHECK(strstr(mf_last_error(), "/nonexistent/x.gguf") != NULL);
}

static void test_vocab_speed(void) {
    const char *path = fixture("models/vocab-qwen2.5.gguf");
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    double best = 1e9;
    for (int rep = 0; rep < 3; rep++) {
        mf_gguf *g = NULL;
        double t0 = mf_time_s();
        mf_status s = mf_gguf_open(p, &g);
        double dt = mf_time_s() - t0;
        CHECKF(s == MF_OK, "%s", mf_last_error());
        if (dt < best) best = dt;
        const mf_gguf_value *toks = NULL, *merges = NULL;
        CHECK(g && mf_gguf_get_arr(g, "tokenizer.ggml.tokens", MF_GGUF_STRING, &toks) == MF_OK && toks->arr.n == 151936);
        CHECK(g && mf_gguf_get_arr(g, "tokenizer.ggml.merges", MF_GGUF_STRING, &merges) == MF_OK && merges->arr.n == 151387);
        CHECK(g && mf_gguf_n_tensors(g) == 0);
        mf_gguf_free(g);
    }
    printf("vocab-qwen2.5.gguf opens in %.2f ms\n", best * 1e3);
    if (!getenv("MINFER_SANITIZED")) CHECKF(best < 0.05, "open took %.1f ms", best * 1e3);
}

static void test_bad_paths(void) {
    mf_gguf *g = (mf_gguf *)1;
    CHECK(mf_gguf_open("/nonexistent/dir/x.gguf", &g) == MF_ERR_IO && g == NULL);
    CHECKF(strstr(mf_last_error(), "/nonexistent/dir/x.gguf"), "%s", mf_last_error());
    CHECK(mf_gguf_open("/", &g) == MF_ERR_IO);
    CHECKF(strstr(mf_last_error(), "not a regular file"), "%s", mf_last_error());
    mf_gguf_free(NULL);
}

int main(void) {
    test_all_fixtures();
    test_qwen2_facts();
    test_split_equals_unsplit();
    test_read_into_memory();
    test_vocab_speed();
    test_bad_paths();
    return test_summary("test_gguf");
}
