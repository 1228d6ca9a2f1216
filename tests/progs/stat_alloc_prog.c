/* stat_alloc_prog.c: a helper for tests/scripts/stat_alloc.sh, run under
 * LD_PRELOAD=libhpmalloc.so. Allocates MIB MiB in 4 KiB..64 KiB blocks
 * (kept live), forks a child that allocates as much again, prints
 * "parent PID" / "child PID" / "READY", and sleeps (at most 60 s) so that
 * `hpm stat` can read both processes' published counters.
 * Usage: stat_alloc_prog MIB */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static void **grab(size_t mib, size_t *n_out) {
    size_t n = 0, cap = mib * 64, total = 0;
    void **v = calloc(cap, sizeof *v);
    while (v && total < (mib << 20) && n < cap) {
        size_t sz = 4096u << (n % 5);   /* 4..64 KiB */
        v[n] = malloc(sz);
        if (!v[n]) break;
        memset(v[n], 1, sz);
        total += sz;
        n++;
    }
    *n_out = n;
    return v;
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 64, n;
    if (!mib) { fprintf(stderr, "usage: stat_alloc_prog MIB\n"); return 2; }
    void **mine = grab(mib, &n);
    if (!mine) return 1;
    pid_t parent = getpid(), child = fork();
    if (child < 0) { perror("fork"); return 1; }
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        size_t m;
        void **more = grab(mib, &m);
        if (!more) _exit(1);
        for (int i = 0; i < 60; i++) sleep(1);
        _exit(0);
    }
    printf("parent %d\nchild %d\nREADY\n", (int)parent, (int)child);
    fflush(stdout);
    for (int i = 0; i < 60; i++) sleep(1);
    kill(child, SIGKILL);
    return 0;
}
