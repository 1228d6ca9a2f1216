/* bench_alloc.c: the allocators `hpm bench` knows, how to find them and
 * how to select one for a child process. Each allocator is a shared
 * library to LD_PRELOAD (none for glibc) plus at most one environment
 * setting for its huge-page mode. A library that is not installed makes
 * the allocator unavailable; the report then names the Debian package
 * that brings it. Versions come from dpkg-query (the library's package),
 * and for hpmalloc from its header. Invariant: a child gets exactly one
 * allocator: every other allocator's variable is removed from its
 * environment before the chosen one is set. */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench_int.h"
#include "hpmalloc.h"

typedef struct {
    const char *name;
    const char *lib;          /* file name in the library folders, NULL = glibc */
    const char *env;          /* "NAME=VALUE" or NULL */
    const char *package;      /* Debian package */
} known_t;

static const known_t known[] = {
    {"glibc", NULL, NULL, "libc6"},
    {"glibc-thp", NULL, "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "libc6"},
    {"jemalloc", "libjemalloc.so.2", NULL, "libjemalloc2"},
    {"jemalloc-thp", "libjemalloc.so.2", "MALLOC_CONF=thp:always,metadata_thp:always", "libjemalloc2"},
    {"tcmalloc", "libtcmalloc_minimal.so.4", NULL, "libtcmalloc-minimal4"},
    {"mimalloc", "libmimalloc.so.2", NULL, "libmimalloc2.0"},
    {"mimalloc-large", "libmimalloc.so.2", "MIMALLOC_LARGE_OS_PAGES=1", "libmimalloc2.0"},
    {"hpmalloc", NULL, NULL, "build it: make (build/libhpmalloc.so)"},
};

/* Variables that select or tune one of the allocators above. */
static const char *const alloc_vars[] = {"LD_PRELOAD", "GLIBC_TUNABLES", "MALLOC_CONF", "MIMALLOC_LARGE_OS_PAGES"};

static const char *const lib_dirs[] = {
#if defined(__x86_64__)
    "/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu",
#elif defined(__aarch64__)
    "/usr/lib/aarch64-linux-gnu", "/lib/aarch64-linux-gnu",
#endif
    "/usr/lib64", "/usr/lib", "/usr/local/lib",
};

static int find_lib(const char *file, char *out, size_t len) {
    for (size_t i = 0; i < sizeof lib_dirs / sizeof lib_dirs[0]; i++) {
        snprintf(out, len, "%s/%s", lib_dirs[i], file);
        if (access(out, R_OK) == 0) return 0;
    }
    out[0] = 0;
    return -1;
}

/* Installed version of a Debian package, or "" when unknown. */
static void package_version(const char *pkg, char *out, size_t len) {
    out[0] = 0;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "dpkg-query -W -f='${Version}' '%s' 2>/dev/null", pkg);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(out, (int)len, p)) out[0] = 0;
    pclose(p);
    out[strcspn(out, "\r\n")] = 0;
}

int hpm_bench_allocs_detect(hpm_bench_alloc_t *out, int max, const char *hpm_lib) {
    int n = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0] && n < max; i++) {
        const known_t *k = &known[i];
        hpm_bench_alloc_t *a = &out[n++];
        memset(a, 0, sizeof *a);
        a->name = k->name;
        a->env = k->env;
        a->package = k->package;
        if (!strcmp(k->name, "hpmalloc")) {
            a->available = hpm_lib != NULL;
            if (hpm_lib) snprintf(a->preload, sizeof a->preload, "%s", hpm_lib);
            snprintf(a->version, sizeof a->version, "%s (this tree)", HPM_VERSION);
        } else if (!k->lib) {
            a->available = 1;
            package_version(k->package, a->version, sizeof a->version);
        } else {
            a->available = find_lib(k->lib, a->preload, sizeof a->preload) == 0;
            if (a->available) package_version(k->package, a->version, sizeof a->version);
        }
        if (a->available && !a->version[0]) snprintf(a->version, sizeof a->version, "unknown");
    }
    return n;
}

void hpm_bench_alloc_apply_env(const hpm_bench_alloc_t *a) {
    for (size_t i = 0; i < sizeof alloc_vars / sizeof alloc_vars[0]; i++) unsetenv(alloc_vars[i]);
    if (a->preload[0]) setenv("LD_PRELOAD", a->preload, 1);
    if (a->env) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", a->env);
        char *eq = strchr(buf, '=');
        if (eq) {
            *eq = 0;
            setenv(buf, eq + 1, 1);
        }
    }
}

int hpm_bench_alloc_split(const char *list, char items[][HPM_BENCH_ITEM_LEN], int max) {
    char buf[1024];
    hpm_bench_copy(buf, sizeof buf, list);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        size_t var_len = strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
        int is_setting = var_len > 0 && t[var_len] == '=' && !isdigit((unsigned char)t[0]);
        if (is_setting && n > 0 && strchr(items[n - 1], '=') && !strchr(items[n - 1], ',')) {
            size_t len = strlen(items[n - 1]);
            snprintf(items[n - 1] + len, HPM_BENCH_ITEM_LEN - len, ",%s", t);
            continue;
        }
        if (n == max) {
            fprintf(stderr, "hpm bench: too many allocators in --alloc (at most %d)\n", max);
            return -1;
        }
        hpm_bench_copy(items[n++], HPM_BENCH_ITEM_LEN, t);
    }
    return n;
}

/* An absolute path for lib that keeps its file name as given (a link such
 * as libhpmalloc.so stays that, rather than the file it points to). */
static void abs_path_keep_name(const char *lib, char *out, size_t len) {
    char dir[PATH_MAX], real[PATH_MAX];
    const char *slash = strrchr(lib, '/'), *name = slash ? slash + 1 : lib;
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == lib) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - lib), lib);
    int n = realpath(dir, real) ? snprintf(out, len, "%s/%s", strcmp(real, "/") ? real : "", name) : -1;
    if (n < 0 || (size_t)n >= len) hpm_bench_copy(out, len, lib);
}

int hpm_bench_alloc_custom(const char *item, hpm_bench_alloc_t *out) {
    static char names[HPM_BENCH_MAX_ALLOCS][32], envs[HPM_BENCH_MAX_ALLOCS][256];
    static int n_custom;
    char buf[HPM_BENCH_ITEM_LEN];
    hpm_bench_copy(buf, sizeof buf, item);
    char *lib = strchr(buf, '='), *setting = strchr(buf, ',');
    if (setting) *setting++ = 0;
    if (!lib || lib == buf || !lib[1] || (setting && !strchr(setting, '='))) {
        fprintf(stderr, "hpm bench: --alloc item '%s' is not NAME=LIB.so[,VAR=VALUE]\n", item);
        return -1;
    }
    *lib++ = 0;
    if (strlen(buf) >= sizeof names[0] || strspn(buf, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(buf)) {
        fprintf(stderr, "hpm bench: allocator name '%s' must be [a-z0-9._-], under 32 characters\n", buf);
        return -1;
    }
    if (access(lib, R_OK) != 0) {
        fprintf(stderr, "hpm bench: %s: cannot read %s\n", buf, lib);
        return -1;
    }
    if (n_custom == HPM_BENCH_MAX_ALLOCS) {
        fprintf(stderr, "hpm bench: too many --alloc NAME=LIB allocators\n");
        return -1;
    }
    memset(out, 0, sizeof *out);
    hpm_bench_copy(names[n_custom], sizeof names[0], buf);
    out->name = names[n_custom];
    abs_path_keep_name(lib, out->preload, sizeof out->preload);
    if (setting) {
        hpm_bench_copy(envs[n_custom], sizeof envs[0], setting);
        out->env = envs[n_custom];
    }
    out->package = "given with --alloc";
    const char *base = strrchr(out->preload, '/');
    snprintf(out->version, sizeof out->version, "%.80s (--alloc)", base ? base + 1 : out->preload);
    out->available = 1;
    n_custom++;
    return 0;
}
