/* Keeping a mapped model's page cache in 2 MiB pages.
 *
 * Decoding streams every weight once per token. Through 4 KiB pages that is a TLB miss every 4 KiB,
 * and the hardware prefetchers stop at each page boundary; through 2 MiB pages decode runs 12-40 %
 * faster on the machines we measured. Linux gives a mapped file 2 MiB pages only where its page cache
 * holds the file in 2 MiB folios, and which folios the cache holds is decided when the file is read
 * in: written in small pieces (a download, a copy) or read by small reads, it stays in small folios
 * until the cache drops it, however often it is mapped afterwards.
 *
 * mf_gguf_settle_pages looks at two 2 MiB windows of each mapped part's data and, when the cache
 * holds them in small folios but the file system can give this file large ones, drops the file from
 * the cache once so that the next read, through the 2 MiB-aligned mapping that asks for huge pages
 * (gguf.c), brings it back in 2 MiB folios. Every later load of the file, by any program, then finds
 * it that way. Nothing changes in the data: the mapping is read-only and refaults from the file. */
#include "gguf/gguf.h"
#include "gguf/gguf_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__linux__)
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* kB that the page tables map with 2 MiB entries in the mapping starting at addr (FilePmdMapped in
 * /proc/self/smaps), or -1 when that cannot be read. */
static long pmd_mapped_kb(const void *addr) {
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f) return -1;
    char line[512];
    bool in_vma = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long start, end;
        char dash;
        if (sscanf(line, "%lx%c%lx ", &start, &dash, &end) == 3 && dash == '-') {
            if (in_vma) break; /* the next mapping: ours had no such line */
            in_vma = start == (unsigned long)(uintptr_t)addr;
        } else if (in_vma && sscanf(line, "FilePmdMapped: %ld kB", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb;
}

/* Whether the page cache holds the 2 MiB of the file at off (a multiple of 2 MiB) in one 2 MiB folio:
 * maps just that window at an aligned address asking for huge pages, reads it in (from the cache,
 * or from the disk into a folio of the kind asked for), and asks the kernel how it mapped it.
 * 1 yes, 0 no, -1 cannot tell. */
static int window_is_huge(int fd, uint64_t off) {
    const size_t huge = MF_GGUF_HUGE_PAGE;
    uint8_t *r = mmap(NULL, 2 * huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED) return -1;
    uint8_t *a = (uint8_t *)(((uintptr_t)r + huge - 1) & ~(uintptr_t)(huge - 1));
    int verdict = -1;
    if (mmap(a, huge, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, (off_t)off) != MAP_FAILED) {
#if defined(MADV_HUGEPAGE)
        madvise(a, huge, MADV_HUGEPAGE);
#endif
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < huge; i += 4096) sink ^= a[i];
        (void)sink;
        const long kb = pmd_mapped_kb(a);
        if (kb >= 0) verdict = (size_t)kb * 1024 >= huge;
    }
    munmap(r, 2 * huge);
    return verdict;
}

/* Bytes of memory the kernel could give without swapping (MemAvailable), or 0 when unknown. */
static uint64_t mem_available(void) {
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f) return 0;
    char line[128];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

static mf_gguf_pages settle_part(const mf_gguf_part *p) {
    const uint64_t huge = MF_GGUF_HUGE_PAGE;
    if (!p->mapped || !p->path) return MF_GGUF_PAGES_NA;
    const uint64_t first = (p->data_offset + huge - 1) / huge * huge, last = p->size / huge * huge - huge;
    if (p->size < huge || last < first) return MF_GGUF_PAGES_NA; /* not one whole 2 MiB page of data */
    const int fd = open(p->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MF_GGUF_PAGES_NA;
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_dev != p->dev || (uint64_t)st.st_ino != p->ino) {
        close(fd); /* the path names another file now (replaced since it was mapped): leave it be */
        return MF_GGUF_PAGES_NA;
    }
    mf_gguf_pages result;
    const uint64_t avail = mem_available();
    const bool fits = avail && p->size < avail / 2;
    int h = -1;
#if defined(MADV_POPULATE_READ)
    if (fits && madvise((void *)p->base, p->map_len, MADV_POPULATE_READ) == 0) {
        /* The whole mapping read in (as the first tokens would read it) and counted: a file can be
         * held partly in 2 MiB folios and partly in small ones (parts of it read back by small
         * reads), which two windows cannot tell (one such file: 178 of 342 MiB in 2 MiB pages, its
         * decode 15-20 % slower than the same weights in huge pages). Nine in ten of its whole
         * 2 MiB windows must be (a few small ones cost little, and a cache that cannot give every
         * window a 2 MiB folio, memory being fragmented, is not dropped and re-read at every load).
         * Where the kernel cannot populate (before Linux 5.14), the two windows decide. */
        const long kb = pmd_mapped_kb(p->base);
        const uint64_t windows = p->size / huge;
        h = kb < 0 ? -1 : (uint64_t)kb * 1024 * 10 >= windows * huge * 9;
    }
#endif
    if (h < 0) {
        h = window_is_huge(fd, first);
        if (h == 1 && last != first) h = window_is_huge(fd, last);
    }
    if (h < 0) {
        result = MF_GGUF_PAGES_NA;
    } else if (h == 1) {
        result = MF_GGUF_PAGES_HUGE;
    } else {
        /* Small folios. Drop one window from the cache (our own mapping first lets go of its pages)
         * and see whether it comes back as one 2 MiB folio; only then is dropping the whole file worth it. */
        madvise((void *)p->base, p->map_len, MADV_DONTNEED);
        fdatasync(fd); /* the cache keeps dirty pages (a file just written); a no-op when clean */
        posix_fadvise(fd, (off_t)first, (off_t)huge, POSIX_FADV_DONTNEED);
        if (window_is_huge(fd, first) != 1) {
            result = MF_GGUF_PAGES_SMALL; /* the kernel or the file system gives this file no 2 MiB pages */
        } else {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            /* Read it back now, while loading, where it fits in memory with room to spare (the
             * cache had it all a moment ago); otherwise the first tokens read it as they go. */
#if defined(MADV_POPULATE_READ)
            if (fits) madvise((void *)p->base, p->map_len, MADV_POPULATE_READ);
#endif
            result = MF_GGUF_PAGES_RELOADED;
        }
    }
    close(fd);
    return result;
}

/* Whether the system's huge page (the size one page table entry above the base pages maps) is the
 * 2 MiB this file works with: x86-64, and arm64 with 4 KiB pages; not arm64 with 16 or 64 KiB pages. */
static bool huge_page_is_2mib(void) {
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", "re");
    if (!f) return false; /* no transparent huge pages at all */
    unsigned long long size = 0;
    const bool ok = fscanf(f, "%llu", &size) == 1 && size == MF_GGUF_HUGE_PAGE;
    fclose(f);
    return ok;
}

mf_gguf_pages mf_gguf_settle_pages(mf_gguf *g) {
    if (!g || g->read_into_memory || !huge_page_is_2mib()) return MF_GGUF_PAGES_NA;
    mf_gguf_pages all = MF_GGUF_PAGES_NA;
    for (uint32_t i = 0; i < g->n_parts; i++) {
        const mf_gguf_pages s = settle_part(&g->parts[i]);
        if (s > all) all = s; /* the most telling state of any part */
    }
    return all;
}

#else

mf_gguf_pages mf_gguf_settle_pages(mf_gguf *g) {
    (void)g;
    return MF_GGUF_PAGES_NA;
}

#endif

const char *mf_gguf_pages_name(mf_gguf_pages s) {
    switch (s) {
    case MF_GGUF_PAGES_HUGE: return "huge";
    case MF_GGUF_PAGES_SMALL: return "small";
    case MF_GGUF_PAGES_RELOADED: return "reloaded";
    case MF_GGUF_PAGES_NA: break;
    }
    return "n/a";
}
