/* testhelper.h: a tiny check library for hpmalloc's tests.
 * CHECK(cond, fmt, ...) counts a pass or prints the failure with its place
 * (the message is optional); TEST_DONE() prints the closing line
 * "N passed, N failed" and gives the exit status (1 when anything failed).
 * Single-threaded use; stress tests count in their own threads and report
 * once. */
#ifndef HPM_TESTHELPER_H
#define HPM_TESTHELPER_H
#include <stdarg.h>
#include <stdio.h>

static int th_passed, th_failed;

static inline void th_fail(const char *file, int line, const char *cond, const char *fmt, ...) {
    va_list ap;
    th_failed++;
    fprintf(stderr, "FAIL %s:%d: %s: ", file, line, cond);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

#define CHECK(cond, ...) do { \
    if (cond) th_passed++; else th_fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
} while (0)

#define TEST_DONE() (printf("%d passed, %d failed\n", th_passed, th_failed), fflush(stdout), th_failed ? 1 : 0)
#endif
