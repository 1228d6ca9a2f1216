/* testhelper.h: a tiny check library for hpmalloc's tests.
 * CHECK(cond, fmt, ...) counts a pass or prints the failure with its place;
 * TEST_DONE() prints the closing line "N passed, N failed" and returns the
 * exit status (1 when anything failed). Single-threaded use; stress tests
 * count in their own threads and report once. */
#ifndef HPM_TESTHELPER_H
#define HPM_TESTHELPER_H
#include <stdio.h>

static int th_passed, th_failed;

#define CHECK(cond, ...) do { \
    if (cond) { th_passed++; } else { th_failed++; \
        fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
        fprintf(stderr, "" __VA_ARGS__); fprintf(stderr, "\n"); } \
} while (0)

#define TEST_DONE() (printf("%d passed, %d failed\n", th_passed, th_failed), fflush(stdout), th_failed ? 1 : 0)
#endif
