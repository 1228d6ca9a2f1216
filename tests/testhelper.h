/* testhelper.h: a tiny check library for hpmalloc's tests.
 * CHECK(cond, fmt, ...) counts a pass or prints the failure with its place
 * (the message is optional); th_field_kb reads a /proc field; TEST_DONE() prints the closing line
 * "N passed, N failed" and gives the exit status (1 when anything failed);
 * th_run_child runs a function in a forked child and collects its stderr
 * and exit status (death tests); th_run_self_with runs this test program
 * again with a setting in its environment and counts its checks here.
 * Single-threaded use; stress tests count in their own threads and report
 * once. */
#ifndef HPM_TESTHELPER_H
#define HPM_TESTHELPER_H
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
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

/* Runs fn in a forked child with stderr into buf (NUL-terminated, at most
 * size - 1 bytes); the child's wait status, or -1 when it could not run. */
static inline int th_run_child(void (*fn)(void), char *buf, size_t size) {
    int fds[2], st = 0;
    buf[0] = 0;
    if (pipe(fds)) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        fn();
        _exit(0);
    }
    close(fds[1]);
    ssize_t n = 0, k;
    while (pid > 0 && n < (ssize_t)size - 1 && (k = read(fds[0], buf + n, size - 1 - (size_t)n)) > 0) n += k;
    buf[n] = 0;
    close(fds[0]);
    if (pid < 0 || waitpid(pid, &st, 0) != pid) return -1;
    return st;
}

/* Runs this program again (argv: its own) with NAME=VALUE in its
 * environment, for checks that need a setting the library reads when it
 * starts (HPM_COLORS). Its output is shown with the setting in front of
 * each line (so tests/run.sh does not take its closing line for this
 * program's), and its "N passed, N failed" is added to this program's
 * counts; a child that ends otherwise counts as one failure. */
static inline void th_run_self_with(const char *name, const char *value, char *const argv[]) {
    int fds[2], st = 0;
    fflush(stdout);
    fflush(stderr);
    if (pipe(fds)) { th_fail(__FILE__, __LINE__, "pipe", "%s=%s", name, value); return; }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        setenv(name, value, 1);
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    close(fds[1]);
    FILE *in = fdopen(fds[0], "r");
    char line[1024];
    int passed = -1, failed = -1;
    while (in && fgets(line, sizeof line, in)) {
        int p, f;
        if (sscanf(line, "%d passed, %d failed", &p, &f) == 2) passed = p, failed = f;
        else printf("  [%s=%s] %s", name, value, line);
    }
    if (in) fclose(in);
    else close(fds[0]);
    bool waited = pid > 0 && waitpid(pid, &st, 0) == pid;
    if (passed < 0 || !waited || !WIFEXITED(st) || (WEXITSTATUS(st) != 0) != (failed > 0)) {
        th_fail(__FILE__, __LINE__, "th_run_self_with", "%s=%s: status %#x, %d passed, %d failed", name, value, st, passed, failed);
        return;
    }
    printf("  [%s=%s] %d passed, %d failed\n", name, value, passed, failed);
    th_passed += passed;
    th_failed += failed;
}

#define TEST_DONE() (printf("%d passed, %d failed\n", th_passed, th_failed), fflush(stdout), th_failed ? 1 : 0)
/* clang 14's ASan and TSan runtimes have no fork handlers: the child of a
 * threaded process can hang in their own pthread_create (docs/tests.md).
 * Fork tests start threads in their children only when TH_CHILD_THREADS. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TH_CHILD_THREADS 0
#endif
#endif
#ifndef TH_CHILD_THREADS
#define TH_CHILD_THREADS 1
#endif
#endif
