/* fuzz_gguf.c: libFuzzer target for the GGUF reader: any input is parsed as a GGUF image from memory;
 * a file that loads is then walked through every accessor and every tensor byte range. Built with
 * -DMF_FUZZ_CORPUS_MAIN instead, the same file is the seed generator: it shrinks each fixture model
 * to a few KB (arrays cut to 16 elements, tensors to one block) with the GGUF writer, so the
 * fuzzer starts from the real files' structure at a size it can mutate quickly. */
#include "gguf/gguf.h"
#include "core/core.h"

#include <stdio.h>
#include <stdlib.h>

#ifndef MF_FUZZ_CORPUS_MAIN

static volatile uint64_t sink;

static void walk_value(const mf_gguf_value *v) {
    if (v->type == MF_GGUF_STRING) {
        if (v->str.len) sink += (unsigned char)v->str.ptr[0] + (unsigned char)v->str.ptr[v->str.len - 1];
    } else if (v->type == MF_GGUF_ARRAY) {
        if (v->arr.type == MF_GGUF_STRING) {
            for (uint64_t i = 0; i < v->arr.n; i++)
                if (v->arr.strs[i].len) sink += (unsigned char)v->arr.strs[i].ptr[v->arr.strs[i].len - 1];
        } else if (v->arr.type == MF_GGUF_ARRAY) {
            for (uint64_t i = 0; i < v->arr.n; i++) walk_value(&v->arr.items[i]);
        } else if (v->arr.n) {
            int64_t x = 0;
            double d = 0;
            /* Integer and float readers each accept their own element types only. */
            MF_ASSERT(mf_gguf_arr_get_i64(v, v->arr.n - 1, &x) != mf_gguf_arr_get_f64(v, v->arr.n - 1, &d));
            MF_ASSERT(!mf_gguf_arr_get_i64(v, v->arr.n, &x));
            sink += (uint64_t)x + (uint64_t)(d != 0);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mf_gguf *g = NULL;
    if (mf_gguf_open_memory(data, size, "fuzz.gguf", &g) != MF_OK) {
        MF_ASSERT(g == NULL && mf_last_error()[0]);
        return 0;
    }
    for (int64_t i = 0; i < mf_gguf_n_kv(g); i++) {
        const mf_gguf_kv *kv = mf_gguf_kv_at(g, i);
        MF_ASSERT(mf_gguf_find_kv(g, kv->key) == kv);
        MF_ASSERT(mf_gguf_value_equal(&kv->value, &kv->value));
        walk_value(&kv->value);
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f;
        bool b;
        mf_str s;
        const mf_gguf_value *arr;
        char *dup = NULL;
        mf_gguf_get_u32(g, kv->key, &u32);
        mf_gguf_get_u64(g, kv->key, &u64);
        mf_gguf_get_i64(g, kv->key, &i64);
        mf_gguf_get_f32(g, kv->key, &f);
        mf_gguf_get_bool(g, kv->key, &b);
        mf_gguf_get_str(g, kv->key, &s);
        mf_gguf_get_arr(g, kv->key, MF_GGUF_VTYPE_COUNT, &arr);
        mf_gguf_find_str_dup(g, kv->key, &dup);
        free(dup);
    }
    for (int64_t i = 0; i < mf_gguf_n_tensors(g); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        MF_ASSERT(mf_gguf_find_tensor(g, t->name) == t);
        const uint8_t *p = t->data;
        MF_ASSERT(p >= data && t->nbytes <= size && p + t->nbytes <= data + size);
        sink += p[0] + p[t->nbytes - 1]; /* nbytes >= 1: every dimension is at least 1 */
    }
    mf_gguf_free(g);
    return 0;
}

#else /* MF_FUZZ_CORPUS_MAIN: fuzz_gguf_corpus OUT_DIR MODELS_DIR... */

#include <dirent.h>

/* v with a top-level array cut to at most 16 elements (a view into v). */
static mf_gguf_value cut(const mf_gguf_value *v) {
    mf_gguf_value c = *v;
    if (v->type == MF_GGUF_ARRAY && c.arr.n > 16) c.arr.n = 16;
    return c;
}

static int shrink(const char *in, const char *out) {
    mf_gguf *g = NULL;
    mf_gguf_writer *w = NULL;
    static uint8_t zeros[4096];
    mf_status s = mf_gguf_open(in, &g);
    if (s == MF_OK) s = mf_gguf_writer_create(&w);
    for (int64_t i = 0; s == MF_OK && i < mf_gguf_n_kv(g); i++) {
        const mf_gguf_kv *kv = mf_gguf_kv_at(g, i);
        mf_gguf_value c = cut(&kv->value);
        s = mf_gguf_writer_set_value(w, kv->key, &c);
    }
    for (int64_t i = 0; s == MF_OK && i < mf_gguf_n_tensors(g); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        int64_t ne[MF_GGUF_MAX_DIMS] = {mf_type_get_traits(t->type)->blck_size, 1, 1, 1};
        s = mf_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, ne);
    }
    if (s == MF_OK) s = mf_gguf_writer_begin(w, out);
    for (int64_t i = 0; s == MF_OK && i < mf_gguf_n_tensors(g); i++)
        s = mf_gguf_writer_write_tensor_data(w, i, zeros, mf_type_get_traits(mf_gguf_tensor_at(g, i)->type)->type_size);
    if (s == MF_OK) s = mf_gguf_writer_finish(w);
    if (s != MF_OK) fprintf(stderr, "fuzz_gguf_corpus: %s: %s\n", in, mf_last_error());
    mf_gguf_writer_free(w);
    mf_gguf_free(g);
    return s == MF_OK ? 0 : 1;
}

static int seeds_from(const char *dir, const char *out_dir, int *n) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "fuzz_gguf_corpus: cannot open %s\n", dir);
        return 1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf")) continue;
        if (strstr(e->d_name, "-split-") && !strstr(e->d_name, "-00001-of-")) continue;
        char in[4096], out[4096];
        snprintf(in, sizeof in, "%s/%s", dir, e->d_name);
        snprintf(out, sizeof out, "%s/%s", out_dir, e->d_name);
        rc |= shrink(in, out);
        (*n)++;
    }
    closedir(d);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fuzz_gguf_corpus OUT_DIR MODELS_DIR...\n");
        return 2;
    }
    int rc = 0, n = 0;
    for (int i = 2; i < argc; i++) rc |= seeds_from(argv[i], argv[1], &n);
    printf("fuzz_gguf_corpus: %d seeds in %s\n", n, argv[1]);
    return rc;
}

#endif
