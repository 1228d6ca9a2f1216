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
    fprintf(f, "usage: hpm run [--stats] [-e HPM_NAME=VALUE]... PROG [ARGS...]\n"
               "  Runs PROG with libhpmalloc preloaded.\n"
               "  --stats        print the allocator's counters on stderr at exit (HPM_STATS=1)\n"
               "  -e NAME=VALUE  set an option for PROG, e.g. -e HPM_PAGES=hugetlb\n"
               "  The library is $HPM_LIB, else the one beside hpm or installed with it.\n");
}

int hpm_cmd_run(int argc, char **argv) {
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--")) { i++; break; }
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { run_usage(stdout); return 0; }
        if (!strcmp(argv[i], "--stats")) { setenv("HPM_STATS", "1", 1); continue; }
        if (!strcmp(argv[i], "-e") && i + 1 < argc && strchr(argv[i + 1], '=')) {
            if (putenv(argv[++i]) != 0) { perror("hpm run: putenv"); return 2; }
            continue;
        }
        fprintf(stderr, "hpm run: unknown or incomplete option '%s'\n", argv[i]);
        run_usage(stderr);
        return 2;
    }
    if (i >= argc) { run_usage(stderr); return 2; }
    const char *lib = hpm_find_library();
    if (!lib) { fprintf(stderr, "hpm run: cannot find libhpmalloc.so beside hpm or in ../lib (build it with make, or set HPM_LIB)\n"); return 2; }
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(lib) + (old ? strlen(old) : 0) + 2;
    char *pre = malloc(len);
    if (!pre) return 2;
    snprintf(pre, len, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
    setenv("LD_PRELOAD", pre, 1);
    execvp(argv[i], argv + i);
    fprintf(stderr, "hpm run: cannot run '%s': %s\n", argv[i], strerror(errno));
    return 127;
}
