/* testhelper.h: a tiny check library for hpmalloc's tests.
 * CHECK(cond, fmt, ...) counts a pass or prints the failure with its place
 * (the message is optional); th_field_kb reads a /proc field; TEST_DONE() prints the closing line
 * "N passed, N failed" and gives the exit status (1 when anything failed).
 * Single-threaded use; stress tests count in their own threads and report
 * once. */
#ifndef HPM_TESTHELPER_H
#define HPM_TESTHELPER_H
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../tools/proc/hpm_proc.h"

static int th_passed __attribute__((unused)), th_failed __attribute__((unused));

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

/* A "Name:  N kB" field of a /proc file (smaps_rollup, meminfo, status),
 * or -1 when it is not there (the shared reader, tools/proc/hpm_proc.h). */
static inline long th_field_kb(const char *path, const char *name) { return hpm_proc_field_kb(path, name); }

#define TEST_DONE() (printf("%d passed, %d failed\n", th_passed, th_failed), fflush(stdout), th_failed ? 1 : 0)
#endif
