/* bench_probe.h: measured machine limits for `minfer bench`: memory read bandwidth and int8
 * multiply-accumulate peak, each for a number of threads, so a benchmark can say which fraction of
 * the machine it reached. Each probe runs for about a quarter of a second. */
#ifndef MF_CLI_BENCH_PROBE_H
#define MF_CLI_BENCH_PROBE_H

#include <stdint.h>

#include <stdbool.h>

/* Probe in a child process, so the probe's buffer and threads never count in the caller's peak RSS.
 * want_bw: *mem_bw = read bandwidth in GB/s (1e9 bytes/s) of n_threads threads streaming disjoint
 * parts of a buffer far larger than the caches, best of a few passes.
 * want_gmacs: *gmacs = int8 multiply-accumulate peak in GMAC/s of n_threads threads with the widest
 * int8 dot-product instruction this CPU has (AVX-512 VNNI or AVX2 on x86), *isa its name (static).
 * A value that could not be measured is 0 (no instruction known, no memory, no child process). */
void cli_bench_probe_limits(int32_t n_threads, bool want_bw, bool want_gmacs, double *mem_bw, double *gmacs,
                            const char **isa);

#endif /* MF_CLI_BENCH_PROBE_H */
