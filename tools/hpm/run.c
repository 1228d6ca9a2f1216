/* run.c: `hpm run [--stats] [-e NAME=VALUE]... PROG ARGS...` runs PROG on
 * hpmalloc by putting libhpmalloc.so (beside hpm in the build tree, else
 * the installed one) first in LD_PRELOAD, then execs
 * it (so the exit status and signals are PROG's own). --stats sets
 * HPM_STATS=1, which makes the library print its counters at exit. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "args.h"
#include "hpm.h"

#ifndef HPM_MULTIARCH
#define HPM_MULTIARCH ""
#endif

/* Where the library lies relative to the directory of hpm: beside it (the
 * build tree), or ../lib, ../lib/<multiarch> (installed, Debian). */
static const char *const lib_places[] = {"libhpmalloc.so", "../lib/libhpmalloc.so.0",
                                         "../lib/" HPM_MULTIARCH "/libhpmalloc.so.0"};

const char *hpm_find_library(void) {
    static char path[PATH_MAX];
    const char *env = getenv("HPM_LIB");
    if (env && *env) return access(env, R_OK) == 0 ? env : NULL;
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return NULL;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash) return NULL;
    *slash = 0;
    for (size_t i = 0; i < sizeof lib_places / sizeof lib_places[0]; i++) {
        if (snprintf(path, sizeof path, "%s/%s", exe, lib_places[i]) >= (int)sizeof path) continue;
        if (access(path, R_OK) == 0) return path;
    }
    return NULL;
}

static void run_usage(FILE *f) {
    fprintf(f, "usage: hpm run [--stats] [-e HPM_NAME=VALUE]... [--] PROG [ARGS...]\n"
               "  Runs PROG with libhpmalloc preloaded.\n"
               "  --stats        print the allocator's counters on stderr at exit (HPM_STATS=1)\n"
               "  -e NAME=VALUE  set an option for PROG, e.g. -e HPM_PAGES=hugetlb\n"
               "  --help, --version\n"
               "  Options come before PROG (what follows PROG is its own).\n"
               "  The library is $HPM_LIB, else the one beside hpm or installed with it.\n"
               "  Exit status: PROG's; 1 when the library is missing, 2 usage, 126/127 when\n"
               "  PROG cannot be run / is not found.\n");
}

enum { R_STATS, R_ENV, R_N };
static const hpm_opt_t run_options[R_N] = {[R_STATS] = {"--stats", 0, 0}, [R_ENV] = {"--env", 'e', 1}};

static int run_option(void *ctx, int id, const char *val) {
    (void)ctx;
    if (id == R_STATS) return setenv("HPM_STATS", "1", 1);
    if (!strchr(val, '=') || val[0] == '=') return -1;
    return putenv((char *)val);
}

int hpm_cmd_run(int argc, char **argv) {
    hpm_operands_t ops;
    int st = hpm_args_parse("hpm run", argc, argv, run_options, R_N, run_option, NULL, run_usage, 1, &ops);
    if (st >= 0) return st;
    if (ops.n == 0) { hpm_args_free(&ops); return hpm_usage_error("hpm run", run_usage, "a program to run is needed"); }
    const char *lib = hpm_find_library();
    if (!lib) {
        fprintf(stderr, "hpm run: cannot find libhpmalloc.so beside hpm or in ../lib (build it with make, or set HPM_LIB)\n");
        return 1;
    }
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *pre = malloc(len);
    if (!pre) return 1;
    snprintf(pre, len, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", pre, 1);
    execvp(ops.operands[0], ops.operands);
    int err = errno;
    fprintf(stderr, "hpm run: cannot run '%s': %s\n", ops.operands[0], strerror(err));
    return err == ENOENT ? 127 : 126;
}
