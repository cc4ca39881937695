/* test_core_file.c: the public atomic file writer (minfer.h): a new file, a replaced one, a symlink
 * followed, a device and a directory refused, an aborted write and a failed one (the file size
 * limit) leave the old file exactly as it was and no temporary file behind. */
#include "test.h"

#include "minfer.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static bool read_is(const char *path, const char *want) {
    char buf[256] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    return n == strlen(want) && !memcmp(buf, want, n);
}

/* Files in dir other than the ones the test made (a temporary file left behind). */
static int stray_files(void) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp-") != NULL;
    if (d) closedir(d);
    return n;
}

static void test_file_writer(void) {
    snprintf(dir, sizeof dir, "/tmp/minfer-test-writer-%d", (int)getpid());
    mkdir(dir, 0755);
    char path[300], link[300];
    snprintf(path, sizeof path, "%s/a.txt", dir);
    snprintf(link, sizeof link, "%s/link.txt", dir);
    CHECK(mf_file_write_all(path, "one", 3) == MF_OK && read_is(path, "one"));
    CHECK(mf_file_write_all(path, "two!", 4) == MF_OK && read_is(path, "two!"));
    /* through a symlink: the link stays, its target gets the data */
    CHECK(symlink("a.txt", link) == 0);
    CHECK(mf_file_write_all(link, "three", 5) == MF_OK && read_is(path, "three"));
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    /* a device and a directory are refused, naming the path */
    mf_file_writer *w = NULL;
    CHECK(mf_file_writer_open("/dev/full", &w) == MF_ERR_IO && !w && strstr(mf_last_error(), "/dev/full"));
    CHECK(mf_file_writer_open(dir, &w) == MF_ERR_IO && strstr(mf_last_error(), "directory"));
    CHECK(mf_file_writer_open("", &w) == MF_ERR_ARG);
    /* abort: nothing changes */
    CHECK(mf_file_writer_open(path, &w) == MF_OK && mf_file_writer_write(w, "zzz", 3) == MF_OK);
    CHECK(stray_files() == 1);
    mf_file_writer_abort(w);
    mf_file_writer_abort(NULL);
    CHECK(read_is(path, "three") && stray_files() == 0);
    /* a write error (the file size limit: EFBIG) leaves the old file and no temporary file */
    struct rlimit old, lim = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    lim.rlim_max = old.rlim_max;
    signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    static char big[8192];
    CHECK(mf_file_writer_open(path, &w) == MF_OK);
    mf_status s1 = mf_file_writer_write(w, big, sizeof big);
    CHECKF(s1 == MF_ERR_IO && strstr(mf_last_error(), "a.txt"), "%s", mf_last_error());
    CHECK(mf_file_writer_write(w, "x", 1) == MF_ERR_IO);
    CHECK(mf_file_writer_commit(w) == MF_ERR_IO);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    CHECK(read_is(path, "three") && stray_files() == 0);
    unlink(link), unlink(path), rmdir(dir);
}

int main(void) {
    test_file_writer();
    return test_summary("test_core_file");
}
