/* test_gguf_write.c: the GGUF writer. Every fixture (and the merged split model) is copied through it,
 * with extra string and nested arrays, and read back: metadata equal in order and value, tensor data
 * equal byte for byte. Failures (bad order, missing data, unwritable directory, file size limit,
 * a signal mid-write) leave no file under the output's name and no temporary file. */
#include "gguf/gguf.h"
#include "core/core.h"
#include "test.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmpdir[256];

static int count_files(void) {
    DIR *d = opendir(tmpdir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void out_path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", tmpdir, name); }

/* Declares every tensor and metadata entry of g (minus split.*) plus test arrays in w. */
static mf_status fill_writer(mf_gguf_writer *w, const mf_gguf *g) {
    mf_status s = MF_OK;
    for (int64_t i = 0; s == MF_OK && i < mf_gguf_n_kv(g); i++) {
        const mf_gguf_kv *kv = mf_gguf_kv_at(g, i);
        if (!strncmp(kv->key, "split.", 6)) continue;
        s = mf_gguf_writer_set_value(w, kv->key, &kv->value);
    }
    /* [[1, 2, 3], []] of int32 and [["x", "yz"]] nested two levels */
    static const int32_t ints[3] = {1, 2, -3};
    static const mf_str strs[2] = {{"x", 1}, {"yz", 2}};
    mf_gguf_value inner[2] = {{.type = MF_GGUF_ARRAY, .arr = {.type = MF_GGUF_INT32, .n = 3, .data = ints}},
                              {.type = MF_GGUF_ARRAY, .arr = {.type = MF_GGUF_INT32, .n = 0, .data = ints}}};
    mf_gguf_value nested = {.type = MF_GGUF_ARRAY, .arr = {.type = MF_GGUF_ARRAY, .n = 2, .items = inner}};
    mf_gguf_value sarr = {.type = MF_GGUF_ARRAY, .arr = {.type = MF_GGUF_STRING, .n = 2, .strs = strs}};
    mf_gguf_value deep = {.type = MF_GGUF_ARRAY, .arr = {.type = MF_GGUF_ARRAY, .n = 1, .items = &sarr}};
    if (s == MF_OK) s = mf_gguf_writer_set_value(w, "test.nested", &nested);
    if (s == MF_OK) s = mf_gguf_writer_set_value(w, "test.strings", &sarr);
    if (s == MF_OK) s = mf_gguf_writer_set_value(w, "test.deep", &deep);
    for (int64_t i = 0; s == MF_OK && i < mf_gguf_n_tensors(g); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        s = mf_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne);
    }
    return s;
}

static mf_status copy_model(const mf_gguf *g, const char *out) {
    mf_gguf_writer *w = NULL;
    mf_status s = mf_gguf_writer_create(&w);
    if (s == MF_OK) s = fill_writer(w, g);
    if (s == MF_OK) s = mf_gguf_writer_begin(w, out);
    for (int64_t i = 0; s == MF_OK && i < mf_gguf_n_tensors(g); i++) {
        const mf_gguf_tensor *t = mf_gguf_tensor_at(g, i);
        s = mf_gguf_writer_write_tensor_data(w, i, t->data, (size_t)t->nbytes);
    }
    if (s == MF_OK) s = mf_gguf_writer_finish(w);
    mf_gguf_writer_free(w);
    return s;
}

static void compare(const char *name, const mf_gguf *a, const mf_gguf *b) {
    int64_t ka = 0;
    for (int64_t i = 0; i < mf_gguf_n_kv(a); i++) {
        const mf_gguf_kv *x = mf_gguf_kv_at(a, i);
        if (!strncmp(x->key, "split.", 6)) continue;
        const mf_gguf_kv *y = mf_gguf_kv_at(b, ka++);
        CHECKF(y && !strcmp(x->key, y->key) && mf_gguf_value_equal(&x->value, &y->value), "%s: key %s differs", name, x->key);
    }
    CHECK(mf_gguf_n_kv(b) == ka + 3);
    const mf_gguf_value *v = NULL;
    CHECK(mf_gguf_get_arr(b, "test.nested", MF_GGUF_ARRAY, &v) == MF_OK && v->arr.n == 2 && v->arr.items[0].arr.n == 3 &&
          v->arr.items[1].arr.n == 0 && v->arr.items[0].arr.type == MF_GGUF_INT32);
    int64_t third = 0;
    CHECK(v && v->arr.n == 2 && mf_gguf_arr_get_i64(&v->arr.items[0], 2, &third) && third == -3);
    CHECK(mf_gguf_get_arr(b, "test.deep", MF_GGUF_ARRAY, &v) == MF_OK && v->arr.n == 1 &&
          v->arr.items[0].arr.type == MF_GGUF_STRING && v->arr.items[0].arr.strs[1].len == 2 &&
          !memcmp(v->arr.items[0].arr.strs[1].ptr, "yz", 2));
    CHECK(mf_gguf_n_tensors(a) == mf_gguf_n_tensors(b));
    for (int64_t i = 0; i < mf_gguf_n_tensors(a) && i < mf_gguf_n_tensors(b); i++) {
        const mf_gguf_tensor *x = mf_gguf_tensor_at(a, i), *y = mf_gguf_tensor_at(b, i);
        CHECKF(!strcmp(x->name, y->name) && x->type == y->type && x->n_dims == y->n_dims &&
                   !memcmp(x->ne, y->ne, sizeof x->ne) && x->nbytes == y->nbytes && !memcmp(x->data, y->data, x->nbytes),
               "%s: tensor %s differs", name, x->name);
        CHECK(y->offset % mf_gguf_alignment(b) == 0);
    }
}

static void test_copy_fixtures(void) {
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", fixture("models"));
    DIR *d = opendir(dirbuf);
    CHECK(d != NULL);
    if (!d) return;
    int copied = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf")) continue;
        if (strstr(e->d_name, "-split-") && !strstr(e->d_name, "-00001-of-")) continue;
        char in[8192], out[512];
        snprintf(in, sizeof in, "%s/%s", dirbuf, e->d_name);
        out_path(out, sizeof out, "copy.gguf");
        mf_gguf *a = NULL, *b = NULL;
        CHECKF(mf_gguf_open(in, &a) == MF_OK, "%s: %s", in, mf_last_error());
        if (a) {
            mf_status s = copy_model(a, out);
            CHECKF(s == MF_OK, "%s: %s", in, mf_last_error());
            if (s == MF_OK) {
                CHECKF(mf_gguf_open(out, &b) == MF_OK, "copy of %s: %s", in, mf_last_error());
                if (b) compare(e->d_name, a, b), copied++;
                if (b) CHECK(mf_gguf_n_parts(b) == 1);
            }
        }
        mf_gguf_free(a);
        mf_gguf_free(b);
        unlink(out);
        CHECK(count_files() == 0);
    }
    closedir(d);
    printf("%d fixtures copied through the writer and compared\n", copied);
    CHECK(copied >= 5);
}

static void test_alignment_and_replace(void) {
    char out[512];
    out_path(out, sizeof out, "aligned.gguf");
    mf_gguf_writer *w = NULL;
    CHECK(mf_gguf_writer_create(&w) == MF_OK);
    CHECK(mf_gguf_writer_set_str(w, "general.architecture", "test") == MF_OK);
    CHECK(mf_gguf_writer_set_u32(w, "general.alignment", 64) == MF_OK);
    CHECK(mf_gguf_writer_set_u32(w, "a.count", 1) == MF_OK);
    CHECK(mf_gguf_writer_set_f32(w, "a.eps", 1e-6f) == MF_OK);
    CHECK(mf_gguf_writer_set_bool(w, "a.flag", true) == MF_OK);
    CHECK(mf_gguf_writer_set_i32(w, "a.neg", -5) == MF_OK);
    CHECK(mf_gguf_writer_set_u64(w, "a.big", 1ull << 40) == MF_OK);
    static const float fl[2] = {1.5f, -2.5f};
    mf_gguf_value fv = {.type = MF_GGUF_ARRAY, .arr = {.type = MF_GGUF_FLOAT32, .n = 2, .data = fl}};
    CHECK(mf_gguf_writer_set_value(w, "a.floats", &fv) == MF_OK);
    CHECK(mf_gguf_writer_set_u32(w, "a.count", 7) == MF_OK); /* replaces in place */
    CHECK(mf_gguf_writer_set_u32(w, "gone", 7) == MF_OK);
    CHECK(mf_gguf_writer_remove(w, "gone") == MF_OK);
    CHECK(mf_gguf_writer_remove(w, "gone") == MF_ERR_NOT_FOUND);
    CHECK(mf_gguf_writer_set_u32(w, "", 1) == MF_ERR_ARG);
    int64_t ne1[1] = {3}, ne2[2] = {32, 2}, bad[2] = {33, 1};
    CHECK(mf_gguf_writer_add_tensor(w, "t1", MF_TYPE_F32, 1, ne1) == MF_OK);
    CHECK(mf_gguf_writer_add_tensor(w, "t2", MF_TYPE_Q8_0, 2, ne2) == MF_OK);
    CHECK(mf_gguf_writer_add_tensor(w, "t2", MF_TYPE_F32, 1, ne1) == MF_ERR_ARG);
    CHECK(mf_gguf_writer_add_tensor(w, "t3", MF_TYPE_Q8_0, 2, bad) == MF_ERR_ARG);
    CHECKF(strstr(mf_last_error(), "33 is not a multiple of Q8_0's block size 32"), "%s", mf_last_error());
    CHECK(mf_gguf_writer_add_tensor(w, "t4", (mf_type)4, 1, ne1) == MF_ERR_ARG);
    CHECK(mf_gguf_writer_begin(w, out) == MF_OK);
    CHECK(mf_gguf_writer_set_u32(w, "late", 1) == MF_ERR_ARG);
    float f[3] = {1, 2, 3};
    uint8_t q[68];
    for (int i = 0; i < 68; i++) q[i] = (uint8_t)i;
    CHECK(mf_gguf_writer_write_tensor_data(w, 0, f, sizeof f) == MF_OK);
    CHECK(mf_gguf_writer_write_tensor_data(w, 1, q, sizeof q) == MF_OK);
    CHECK(mf_gguf_writer_finish(w) == MF_OK);
    mf_gguf_writer_free(w);
    mf_gguf *g = NULL;
    CHECKF(mf_gguf_open(out, &g) == MF_OK, "%s", mf_last_error());
    if (g) {
        CHECK(mf_gguf_alignment(g) == 64);
        CHECK(mf_gguf_n_kv(g) == 8);
        CHECK(!strcmp(mf_gguf_kv_at(g, 2)->key, "a.count")); /* replaced in place, order kept */
        uint32_t u;
        int64_t i64;
        uint64_t u64;
        float x;
        bool b;
        CHECK(mf_gguf_get_u32(g, "a.count", &u) == MF_OK && u == 7);
        CHECK(mf_gguf_get_f32(g, "a.eps", &x) == MF_OK && x == 1e-6f);
        CHECK(mf_gguf_get_bool(g, "a.flag", &b) == MF_OK && b);
        CHECK(mf_gguf_get_i64(g, "a.neg", &i64) == MF_OK && i64 == -5);
        CHECK(mf_gguf_get_u32(g, "a.neg", &u) == MF_ERR_RANGE);
        CHECK(mf_gguf_get_u64(g, "a.big", &u64) == MF_OK && u64 == 1ull << 40);
        CHECK(mf_gguf_get_u32(g, "a.big", &u) == MF_ERR_RANGE);
        const mf_gguf_value *fa = NULL;
        double d0 = 0;
        CHECK(mf_gguf_get_arr(g, "a.floats", MF_GGUF_FLOAT32, &fa) == MF_OK && mf_gguf_arr_get_f64(fa, 1, &d0) && d0 == -2.5);
        const mf_gguf_tensor *t = mf_gguf_find_tensor(g, "t2");
        CHECK(t && t->offset == 64 && ((uintptr_t)t->data % 64) == 0 && !memcmp(t->data, q, 68));
        t = mf_gguf_find_tensor(g, "t1");
        CHECK(t && t->offset == 0 && !memcmp(t->data, f, 12));
    }
    mf_gguf_free(g);
    unlink(out);
}

/* A writer with one declared F32 tensor of 4 values, begun on `out`. */
static mf_gguf_writer *small_writer(const char *out, mf_status *begin) {
    mf_gguf_writer *w = NULL;
    mf_gguf_writer_create(&w);
    int64_t ne[1] = {4};
    mf_gguf_writer_set_str(w, "general.architecture", "test");
    mf_gguf_writer_add_tensor(w, "a", MF_TYPE_F32, 1, ne);
    mf_gguf_writer_add_tensor(w, "b", MF_TYPE_F32, 1, ne);
    *begin = mf_gguf_writer_begin(w, out);
    return w;
}

static void test_failures_leave_nothing(void) {
    char out[512];
    out_path(out, sizeof out, "model.gguf");
    FILE *f = fopen(out, "w"); /* an older file under the output's name survives every failure */
    fputs("old", f);
    fclose(f);
    float data[4] = {0};
    mf_status s;

    mf_gguf_writer *w = small_writer(out, &s);
    CHECK(s == MF_OK && count_files() == 2);
    CHECK(mf_gguf_writer_write_tensor_data(w, 1, data, sizeof data) == MF_ERR_ARG); /* out of order */
    CHECKF(strstr(mf_last_error(), "expected tensor 0 of 2"), "%s", mf_last_error());
    CHECK(count_files() == 1);
    CHECK(mf_gguf_writer_finish(w) == MF_ERR_ARG);
    mf_gguf_writer_free(w);

    w = small_writer(out, &s);
    CHECK(mf_gguf_writer_write_tensor_data(w, 0, data, 8) == MF_ERR_ARG); /* wrong size */
    CHECKF(strstr(mf_last_error(), "tensor 'a' needs 16 bytes, got 8"), "%s", mf_last_error());
    mf_gguf_writer_free(w);

    w = small_writer(out, &s);
    CHECK(mf_gguf_writer_write_tensor_data(w, 0, data, sizeof data) == MF_OK);
    CHECK(mf_gguf_writer_finish(w) == MF_ERR_ARG); /* tensor b missing */
    CHECKF(strstr(mf_last_error(), "after 1 of 2 tensors"), "%s", mf_last_error());
    mf_gguf_writer_free(w);

    w = small_writer(out, &s);
    CHECK(mf_gguf_writer_write_tensor_data(w, 0, data, sizeof data) == MF_OK);
    mf_gguf_writer_free(w); /* abandoned mid-write */
    CHECK(count_files() == 1);

    w = small_writer("/nonexistent-dir/x/model.gguf", &s);
    CHECK(s == MF_ERR_IO);
    CHECKF(strstr(mf_last_error(), "cannot create a temporary file beside '/nonexistent-dir/x/model.gguf'") &&
               strstr(mf_last_error(), "No such file"), "%s", mf_last_error());
    mf_gguf_writer_free(w);

    char under_file[600];
    snprintf(under_file, sizeof under_file, "%s/model.gguf/inner.gguf", tmpdir); /* its directory is a file */
    w = small_writer(under_file, &s);
    CHECKF(s == MF_ERR_IO && strstr(mf_last_error(), "Not a directory"), "%s", mf_last_error());
    mf_gguf_writer_free(w);

    char buf[8] = {0};
    f = fopen(out, "r");
    CHECK(f && fread(buf, 1, sizeof buf, f) == 3 && !strcmp(buf, "old"));
    if (f) fclose(f);
    CHECK(count_files() == 1);
    unlink(out);
}

/* A full disk, simulated by a file size limit in a child process: writes fail with EFBIG. */
static void test_size_limit(void) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);
        struct rlimit rl = {100000, 100000};
        setrlimit(RLIMIT_FSIZE, &rl);
        mf_gguf *g = NULL;
        char out[512];
        out_path(out, sizeof out, "big.gguf");
        if (mf_gguf_open(fixture("models/mini-qwen3.Q4_0.gguf"), &g) != MF_OK) _exit(3);
        mf_status s = copy_model(g, out);
        mf_gguf_free(g);
        bool msg_ok = strstr(mf_last_error(), "File too large") && strstr(mf_last_error(), "big.gguf");
        _exit(s == MF_ERR_IO && msg_ok ? 0 : 1);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
    CHECK(count_files() == 0);
}

static void on_term(int sig) {
    mf_remove_temp_files();
    _exit(128 + sig);
}

/* A signal mid-write: the program's handler removes the temporary file. */
static void test_signal(void) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGTERM, on_term);
        char out[512];
        out_path(out, sizeof out, "sig.gguf");
        mf_status s;
        mf_gguf_writer *w = small_writer(out, &s);
        float data[4] = {0};
        mf_gguf_writer_write_tensor_data(w, 0, data, sizeof data);
        if (count_files() != 1) _exit(2);
        raise(SIGTERM);
        _exit(3);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM, "child status %d", st);
    CHECK(count_files() == 0);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/minfer-gguf-write-XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    test_copy_fixtures();
    test_alignment_and_replace();
    test_failures_leave_nothing();
    test_size_limit();
    test_signal();
    rmdir(tmpdir);
    return test_summary("test_gguf_write");
}
