/* test.h: the tiny test harness every tests/test_*.c uses: CHECK macros that count failures,
 * fixture paths, and a summary line ctest shows. A test program exits 1 if any check failed, 77
 * (skipped) if it ran none. */
#ifndef MF_TEST_H
#define MF_TEST_H

#include "minfer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures, test_checks;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
        }                                                                                          \
    } while (0)

#define CHECKF(cond, ...)                                                                          \
    do {                                                                                           \
        test_checks++;                                                                             \
        if (!(cond)) {                                                                             \
            test_failures++;                                                                       \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

#define CHECK_NEAR(a, b, tol) CHECKF(fabs((double)(a) - (double)(b)) <= (tol), "%g vs %g (tol %g)", (double)(a), (double)(b), (double)(tol))

/* $MINFER_FIXTURES/<rel>, in a static buffer (one at a time). */
static inline const char *fixture(const char *rel) {
    static char buf[4096];
    const char *dir = getenv("MINFER_FIXTURES");
    snprintf(buf, sizeof buf, "%s/%s", dir ? dir : "../shared/fixtures", rel);
    return buf;
}

/* Exit status: 1 if a check failed; TEST_SKIPPED if none could run here (a CPU or ISA level without
 * the kernels under test), which ctest reports as skipped (SKIP_RETURN_CODE in CMakeLists.txt). */
#define TEST_SKIPPED 77
/* The kernel level and float order a test runs under: MINFER_ISA and MINFER_ORDER from the
 * environment, as the minfer program reads them (CI runs the suite again with MINFER_ISA=avx2 on
 * AVX-512 machines); the best level and the exact order by default. */
static inline mf_isa test_isa(void) {
    const char *e = getenv("MINFER_ISA");
    mf_isa isa = MF_ISA_AUTO;
    if (e && *e && mf_isa_from_name(e, &isa) != MF_OK) fprintf(stderr, "MINFER_ISA: %s\n", mf_last_error());
    return mf_isa_resolve(isa);
}
static inline mf_float_order test_order(void) {
    const char *e = getenv("MINFER_ORDER");
    return e && !strcmp(e, "fast") ? MF_ORDER_FAST : MF_ORDER_EXACT;
}
/* Context parameters with the test's kernel level and order. */
static inline mf_context_params test_context_params(void) {
    mf_context_params p = mf_context_default_params();
    p.isa = test_isa();
    p.order = test_order();
    return p;
}

static inline int test_summary(const char *name) {
    printf("%s: %d checks, %d failed%s\n", name, test_checks, test_failures,
           test_checks ? "" : ": skipped, nothing to check here");
    return test_failures ? 1 : test_checks ? 0 : TEST_SKIPPED;
}

#endif /* MF_TEST_H */
