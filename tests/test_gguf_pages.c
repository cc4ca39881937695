/* test_gguf_pages.c: the 2 MiB-aligned model mapping and the page cache check (gguf_pages.c).
 *
 * A model written by the GGUF writer (2 MiB writes) and a copy of it written 4 KiB at a time: the
 * copy's page cache starts in small pages, so mf_gguf_settle_pages must drop and re-read it, after
 * which the mapping takes 2 MiB page table entries (read back from /proc/self/smaps) and a second
 * look finds it in huge pages; then the same copy with its middle dropped from the cache and
 * written again in small pieces (its first and last 2 MiB still in huge pages) must be re-read too.
 * The data reads back unchanged throughout. Where the kernel or file
 * system gives files no 2 MiB pages at all, the copy reports "small" ("n/a" without transparent huge
 * pages) and only the data is checked. */
#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"
#include "test.h"

#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

#define N_FLOATS ((int64_t)5 << 20) /* 20 MiB of data: several whole 2 MiB pages */

static char dir[256];
static bool thp; /* the system has 2 MiB transparent huge pages (else every state is n/a) */

static float pattern(int64_t i) { return (float)((i * 2654435761u) % 1000003u); }

static void write_model(const char *path) {
    float *data = malloc((size_t)N_FLOATS * sizeof *data);
    for (int64_t i = 0; i < N_FLOATS; i++) data[i] = pattern(i);
    mf_gguf_writer *w = NULL;
    const int64_t ne[2] = {1024, N_FLOATS / 1024};
    CHECK(mf_gguf_writer_create(&w) == MF_OK);
    CHECK(mf_gguf_writer_set_str(w, "general.architecture", "test") == MF_OK);
    CHECK(mf_gguf_writer_add_tensor(w, "w", MF_TYPE_F32, 2, ne) == MF_OK);
    CHECK(mf_gguf_writer_begin(w, path) == MF_OK);
    CHECK(mf_gguf_writer_write_tensor_data(w, 0, data, (size_t)N_FLOATS * sizeof *data) == MF_OK);
    CHECK(mf_gguf_writer_finish(w) == MF_OK);
    mf_gguf_writer_free(w);
    free(data);
}

/* dst as a copy of src written 4 KiB at a time (left unsynced: the check must cope with dirty pages). */
static void copy_in_small_writes(const char *src, const char *dst) {
    int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(in >= 0 && out >= 0);
    char buf[4096];
    ssize_t n;
    bool ok = true;
    while ((n = read(in, buf, sizeof buf)) > 0) ok &= write(out, buf, (size_t)n) == n;
    CHECK(ok && n == 0);
    close(in);
    close(out);
}

static bool data_intact(const mf_gguf *g) {
    const mf_gguf_tensor *t = mf_gguf_find_tensor(g, "w");
    if (!t) return false;
    const float *f = t->data;
    for (int64_t i = 0; i < N_FLOATS; i += 997)
        if (f[i] != pattern(i)) return false;
    return f[N_FLOATS - 1] == pattern(N_FLOATS - 1);
}

/* kB of the mapping at addr that the page tables map with 2 MiB entries (FilePmdMapped), -1 unknown. */
static long pmd_kb(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    bool in = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &a, &dash, &b) == 3 && dash == '-') {
            if (in) break;
            in = a == (unsigned long)(uintptr_t)addr;
        } else if (in && sscanf(line, "FilePmdMapped: %ld kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb;
}

/* The check on a file held in small pages: it must re-read it (or find that the system gives none),
 * the data unchanged; after a re-read the mapping takes 2 MiB entries and a second look is content. */
static mf_gguf_pages settle_small(mf_gguf *g) {
    const mf_gguf_pages s = mf_gguf_settle_pages(g);
    CHECKF(s == MF_GGUF_PAGES_RELOADED || s == MF_GGUF_PAGES_SMALL || (s == MF_GGUF_PAGES_NA && !thp), "%s",
           mf_gguf_pages_name(s));
    CHECK(data_intact(g));
    if (s == MF_GGUF_PAGES_RELOADED) {
        const long kb = pmd_kb(g->parts[0].base);
        CHECKF(kb >= (long)(N_FLOATS * 4 / 1024) - 4096, "FilePmdMapped %ld kB after the reload", kb);
        CHECK(mf_gguf_settle_pages(g) == MF_GGUF_PAGES_HUGE); /* nothing more to do */
    }
    return s;
}

static void test_small_copy_is_reloaded(const char *written, const char *copy) {
    copy_in_small_writes(written, copy);
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open(copy, &g) == MF_OK);
    if (!g) return;
    CHECK(((uintptr_t)g->parts[0].base & (MF_GGUF_HUGE_PAGE - 1)) == 0); /* aligned, so 2 MiB entries can fit */
    CHECK(data_intact(g));
    const mf_gguf_pages first = settle_small(g);
    if (first == MF_GGUF_PAGES_RELOADED) {
        mf_gguf *again = NULL;
        CHECK(mf_gguf_open(copy, &again) == MF_OK);
        CHECK(mf_gguf_settle_pages(again) == MF_GGUF_PAGES_HUGE); /* a later load finds it so too */
        CHECK(data_intact(again));
        mf_gguf_free(again);
    } else {
        printf("test_gguf_pages: no 2 MiB pages for files here (%s); checked the data only\n",
               mf_gguf_pages_name(first));
    }
    mf_gguf_free(g);
}

static void test_written_file_and_other_states(const char *written) {
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open(written, &g) == MF_OK);
    if (!g) return;
    const mf_gguf_pages s = mf_gguf_settle_pages(g);
    /* 2 MiB writes at 2 MiB offsets leave the cache in 2 MiB pages where the system has them. */
    CHECKF(s == MF_GGUF_PAGES_HUGE || s == MF_GGUF_PAGES_SMALL || (s == MF_GGUF_PAGES_NA && !thp), "%s",
           mf_gguf_pages_name(s));
    CHECK(data_intact(g));
    mf_gguf_free(g);

    CHECK(mf_gguf_open_ex(written, MF_GGUF_OPEN_READ, &g) == MF_OK); /* read into memory: nothing to settle */
    CHECK(g && mf_gguf_settle_pages(g) == MF_GGUF_PAGES_NA && data_intact(g));
    mf_gguf_free(g);

    CHECK(mf_gguf_open(fixture("models/mini-qwen2.Q4_0.gguf"), &g) == MF_OK); /* under one 2 MiB page of data */
    CHECK(g && mf_gguf_settle_pages(g) == MF_GGUF_PAGES_NA);
    mf_gguf_free(g);
    CHECK(mf_gguf_settle_pages(NULL) == MF_GGUF_PAGES_NA);
    CHECK(!strcmp(mf_gguf_pages_name(MF_GGUF_PAGES_RELOADED), "reloaded"));
}

/* A file held in 2 MiB pages at its ends but in small ones in the middle (that part dropped from the
 * cache and written again 4 KiB at a time): the check must see the whole mapping, not its first and
 * last 2 MiB, and re-read it. Run after test_small_copy_is_reloaded left the copy in 2 MiB pages. */
static void test_partly_small_is_reloaded(const char *copy) {
    const off_t from = 6 << 20, to = 14 << 20;
    int fd = open(copy, O_RDWR);
    CHECK(fd >= 0);
    if (fd < 0) return;
    char *buf = malloc((size_t)(to - from));
    CHECK(buf && pread(fd, buf, (size_t)(to - from), from) == to - from);
    CHECK(fdatasync(fd) == 0);
    posix_fadvise(fd, from, to - from, POSIX_FADV_DONTNEED);
    bool ok = buf != NULL;
    for (off_t o = from; ok && o < to; o += 4096) ok = pwrite(fd, buf + (o - from), 4096, o) == 4096;
    CHECK(ok);
    free(buf);
    close(fd);
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open(copy, &g) == MF_OK);
    if (!g) return;
    settle_small(g);
    mf_gguf_free(g);
}

/* A path that names another file by the time of the check (the model was replaced after it was
 * mapped) is left alone: the mapping still reads the old file, whose cache the check cannot reach. */
static void test_replaced_file(const char *written, const char *copy) {
    mf_gguf *g = NULL;
    CHECK(mf_gguf_open(copy, &g) == MF_OK);
    if (!g) return;
    char other[320];
    snprintf(other, sizeof other, "%s.new", copy);
    copy_in_small_writes(written, other);
    CHECK(rename(other, copy) == 0);
    CHECK(mf_gguf_settle_pages(g) == MF_GGUF_PAGES_NA);
    CHECK(data_intact(g));
    mf_gguf_free(g);
}

int main(void) {
    /* Beside the build, not in /tmp: the file system models live on is the one that matters. */
    snprintf(dir, sizeof dir, "minfer-gguf-pages-XXXXXX");
    if (!mkdtemp(dir)) return 1;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "r");
    unsigned long long pmd = 0;
    thp = f && fscanf(f, "%llu", &pmd) == 1 && pmd == MF_GGUF_HUGE_PAGE;
    if (f) fclose(f);
    char written[300], copy[300];
    snprintf(written, sizeof written, "%s/written.gguf", dir);
    snprintf(copy, sizeof copy, "%s/copy.gguf", dir);
    write_model(written);
    test_written_file_and_other_states(written);
    test_small_copy_is_reloaded(written, copy);
    test_partly_small_is_reloaded(copy);
    test_replaced_file(written, copy);
    unlink(written);
    unlink(copy);
    rmdir(dir);
    return test_summary("test_gguf_pages");
}
