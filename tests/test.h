/* test.h: the tiny test harness every tests/test_*.c uses: CHECK macros that count failures,
 * fixture paths, and a summary line ctest shows. A test program exits non-zero if any check failed. */
#ifndef MF_TEST_H
#define MF_TEST_H

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

static inline int test_summary(const char *name) {
    printf("%s: %d checks, %d failed\n", name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

#endif /* MF_TEST_H */
