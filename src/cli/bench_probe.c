/* bench_probe.c: the machine-limit probes of `minfer bench` (see bench_probe.h). Threads start
 * together at a barrier; the limit is the work of all threads over the wall time from the barrier to
 * the last join, best of a few runs (a loaded machine only ever makes a run slower). The int8 kernels
 * keep a dozen independent accumulators in registers so the instruction's latency is hidden and only
 * its throughput counts. */
#include "bench_probe.h"
#include "cli.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define BENCH_X86 1
#endif

#define MEM_PROBE_BYTES ((size_t)256 << 20) /* well past any last-level cache */
#define MEM_PROBE_SWEEPS 4
#define PROBE_RUNS 3
#define MAX_PROBE_THREADS 256

typedef struct probe_job probe_job;
typedef uint64_t (*probe_fn)(probe_job *job);

struct probe_job {
    pthread_barrier_t *start;
    probe_fn fn;
    const uint64_t *mem; /* memory probe: this thread's part */
    size_t n_words;
    uint64_t iters; /* int8 probe: loop trips */
    uint64_t work;  /* bytes read or MACs done */
    uint64_t sink;  /* keeps results alive */
};

static void *probe_thread(void *arg) {
    probe_job *j = arg;
    pthread_barrier_wait(j->start);
    j->work = j->fn(j);
    return NULL;
}

/* Run fn on n threads at once; returns work per second (sum over threads), 0 on failure. */
static double run_threads(int32_t n, probe_job *jobs) {
    pthread_t tid[MAX_PROBE_THREADS];
    pthread_barrier_t start;
    if (pthread_barrier_init(&start, NULL, (unsigned)n + 1) != 0) return 0;
    int32_t made = 0;
    for (; made < n; made++) {
        jobs[made].start = &start;
        if (pthread_create(&tid[made], NULL, probe_thread, &jobs[made]) != 0) break;
    }
    if (made < n) { /* cannot start them all: release the ones waiting with a trivial job */
        for (int32_t i = 0; i < made; i++) jobs[i].n_words = 0, jobs[i].iters = 0;
        for (int32_t i = made; i <= n; i++) pthread_barrier_wait(&start);
    } else {
        pthread_barrier_wait(&start);
    }
    double t0 = mf_time_s();
    uint64_t work = 0;
    for (int32_t i = 0; i < made; i++) {
        pthread_join(tid[i], NULL);
        work += jobs[i].work;
    }
    double dt = mf_time_s() - t0;
    pthread_barrier_destroy(&start);
    return made == n && dt > 0 ? (double)work / dt : 0;
}

/* Eight independent sums: the compiler vectorizes the loop, so loads, not adds, set the pace. */
static uint64_t mem_read(probe_job *j) {
    uint64_t s[8] = {0};
    const uint64_t *p = j->mem;
    for (int sweep = 0; sweep < MEM_PROBE_SWEEPS; sweep++)
        for (size_t i = 0; i + 8 <= j->n_words; i += 8)
            for (int k = 0; k < 8; k++) s[k] += p[i + k];
    for (int k = 0; k < 8; k++) j->sink += s[k];
    return (uint64_t)MEM_PROBE_SWEEPS * (j->n_words / 8 * 8) * sizeof(uint64_t);
}

static double probe_mem_bw(int32_t n_threads) {
    if (n_threads < 1 || n_threads > MAX_PROBE_THREADS) return 0;
    uint64_t *buf = malloc(MEM_PROBE_BYTES);
    probe_job *jobs = calloc((size_t)n_threads, sizeof *jobs);
    double best = 0;
    if (buf && jobs) {
        memset(buf, 1, MEM_PROBE_BYTES); /* fault the pages in before timing */
        size_t per = MEM_PROBE_BYTES / sizeof(uint64_t) / (size_t)n_threads;
        for (int run = 0; run < PROBE_RUNS; run++) {
            for (int32_t i = 0; i < n_threads; i++)
                jobs[i] = (probe_job){.fn = mem_read, .mem = buf + (size_t)i * per, .n_words = per};
            best = CLI_MAX(best, run_threads(n_threads, jobs));
        }
    }
    free(jobs);
    free(buf);
    return best / 1e9;
}

#ifdef BENCH_X86
/* Twelve accumulators; the empty asm hides the constant operands from the optimizer so the loop
 * stays a loop of dot-product instructions. MACs per trip: 12 x 64 (u8 x s8 -> s32, 4 per lane). */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static uint64_t int8_avx512vnni(probe_job *j) {
    __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(5);
    __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0,
            c8 = c0, c9 = c0, c10 = c0, c11 = c0;
    for (uint64_t i = 0; i < j->iters; i++) {
        __asm__ volatile("" : "+v"(a), "+v"(b));
        c0 = _mm512_dpbusd_epi32(c0, a, b), c1 = _mm512_dpbusd_epi32(c1, a, b);
        c2 = _mm512_dpbusd_epi32(c2, a, b), c3 = _mm512_dpbusd_epi32(c3, a, b);
        c4 = _mm512_dpbusd_epi32(c4, a, b), c5 = _mm512_dpbusd_epi32(c5, a, b);
        c6 = _mm512_dpbusd_epi32(c6, a, b), c7 = _mm512_dpbusd_epi32(c7, a, b);
        c8 = _mm512_dpbusd_epi32(c8, a, b), c9 = _mm512_dpbusd_epi32(c9, a, b);
        c10 = _mm512_dpbusd_epi32(c10, a, b), c11 = _mm512_dpbusd_epi32(c11, a, b);
    }
    __m512i s = _mm512_add_epi32(_mm512_add_epi32(_mm512_add_epi32(c0, c1), _mm512_add_epi32(c2, c3)),
                                 _mm512_add_epi32(_mm512_add_epi32(c4, c5), _mm512_add_epi32(c6, c7)));
    s = _mm512_add_epi32(s, _mm512_add_epi32(_mm512_add_epi32(c8, c9), _mm512_add_epi32(c10, c11)));
    uint32_t lanes[16]; /* summed as unsigned: the accumulators wrap by design */
    _mm512_storeu_si512(lanes, s);
    for (int k = 0; k < 16; k++) j->sink += lanes[k];
    return j->iters * 12 * 64;
}

/* AVX2 has no int8 dot product: u8 x s8 pairs to s16 (maddubs), then pairs to s32 (madd), then an
 * add; 32 MACs per three instructions. Twelve chains. */
__attribute__((target("avx2"))) static uint64_t int8_avx2(probe_job *j) {
    __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(5), one = _mm256_set1_epi16(1);
    __m256i c[12];
    for (int k = 0; k < 12; k++) c[k] = _mm256_setzero_si256();
    for (uint64_t i = 0; i < j->iters; i++) {
        __asm__ volatile("" : "+x"(a), "+x"(b));
        for (int k = 0; k < 12; k++)
            c[k] = _mm256_add_epi32(c[k], _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), one));
    }
    __m256i s = c[0];
    for (int k = 1; k < 12; k++) s = _mm256_add_epi32(s, c[k]);
    j->sink = (uint64_t)(uint32_t)_mm256_extract_epi32(s, 0);
    return j->iters * 12 * 32;
}
#endif

static double probe_int8_gmacs(int32_t n_threads, const char **isa) {
    probe_fn fn = NULL;
    *isa = "none";
#ifdef BENCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw")) {
        fn = int8_avx512vnni;
        *isa = "AVX-512 VNNI";
    } else if (__builtin_cpu_supports("avx2")) {
        fn = int8_avx2;
        *isa = "AVX2";
    }
#endif
    if (!fn || n_threads < 1 || n_threads > MAX_PROBE_THREADS) return 0;
    probe_job *jobs = calloc((size_t)n_threads, sizeof *jobs);
    if (!jobs) return 0;
    /* Calibrate on one thread to about 0.1 s per run. */
    probe_job cal = {.fn = fn, .iters = 1u << 16};
    double t0 = mf_time_s();
    fn(&cal);
    double dt = CLI_MAX(mf_time_s() - t0, 1e-6);
    uint64_t iters = (uint64_t)((double)cal.iters * 0.1 / dt) + 1;
    double best = 0;
    for (int run = 0; run < PROBE_RUNS; run++) {
        for (int32_t i = 0; i < n_threads; i++) jobs[i] = (probe_job){.fn = fn, .iters = iters};
        best = CLI_MAX(best, run_threads(n_threads, jobs));
    }
    free(jobs);
    return best / 1e9;
}

/* The child writes {bw, gmacs, isa index} into a pipe and exits; the ISA names are static strings
 * shared by both processes, so an index carries the name. */
static const char *const isa_names[] = {"none", "AVX-512 VNNI", "AVX2"};

void cli_bench_probe_limits(int32_t n_threads, bool want_bw, bool want_gmacs, double *mem_bw, double *gmacs,
                            const char **isa) {
    *mem_bw = 0, *gmacs = 0, *isa = isa_names[0];
    int fd[2];
    if (pipe(fd) != 0) return;
    fflush(NULL); /* the child must not write the parent's buffered output again */
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        double msg[3] = {0, 0, 0};
        const char *name = isa_names[0];
        if (want_bw) msg[0] = probe_mem_bw(n_threads);
        if (want_gmacs) msg[1] = probe_int8_gmacs(n_threads, &name);
        for (size_t i = 0; i < CLI_ARRAY_LEN(isa_names); i++)
            if (!strcmp(name, isa_names[i])) msg[2] = (double)i;
        ssize_t w = write(fd[1], msg, sizeof msg);
        _exit(w == (ssize_t)sizeof msg ? 0 : 1);
    }
    close(fd[1]);
    if (pid > 0) {
        double msg[3];
        ssize_t got = 0, r;
        while (got < (ssize_t)sizeof msg && (r = read(fd[0], (char *)msg + got, sizeof msg - (size_t)got)) > 0)
            got += r;
        waitpid(pid, NULL, 0);
        if (got == (ssize_t)sizeof msg) {
            *mem_bw = msg[0], *gmacs = msg[1];
            size_t k = (size_t)msg[2];
            *isa = isa_names[k < CLI_ARRAY_LEN(isa_names) ? k : 0];
        }
    }
    close(fd[0]);
}
