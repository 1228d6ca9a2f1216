/* stat_states.c: a helper for tests/scripts/stat_states.sh. It puts one
 * 2 MiB region into each state that `hpm stat` reports, on purpose, prints
 * "NAME 0xADDR" for each and then "READY", and sleeps (at most 120 s) so
 * that hpm stat can look at it:
 *   huge      MADV_HUGEPAGE + touch (+ MADV_COLLAPSE), MADV_DONTFORK: PMD-mapped, exclusive
 *   split     as huge, then MADV_NOHUGEPAGE on its first half: 4 KiB pieces
 *   hshared   huge, then fork (the child sleeps): PMD-mapped, CoW-shared
 *   mixed     huge, fork, then one write: 1 page exclusive, the rest shared
 *   excl      4 KiB pages, fork, then a write to every page: all exclusive again
 *   shared    4 KiB pages, fork, no write: all CoW-shared
 *   absent    huge, then MADV_DONTNEED on all of it
 *   partial   4 KiB pages, then MADV_DONTNEED on half
 * It exits on SIGTERM; the child dies with it (PR_SET_PDEATHSIG). */
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define HP (2ul << 20)

enum { R_HUGE, R_SPLIT, R_HSHARED, R_MIXED, R_EXCL, R_SHARED, R_ABSENT, R_PARTIAL, R_N };
static const char *names[R_N] = {"huge", "split", "hshared", "mixed", "excl", "shared", "absent", "partial"};

static void touch(char *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i += 4096) p[i] = (char)(i >> 12 | 1);
}

int main(void) {
    /* one guard-separated block: a spare region on each side */
    size_t total = (R_N + 2) * HP;
    char *raw = mmap(NULL, total + HP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { perror("mmap"); return 1; }
    char *base = (char *)(((uintptr_t)raw + HP - 1) & ~(HP - 1)) + HP;
    char *r[R_N];
    for (int i = 0; i < R_N; i++) r[i] = base + (size_t)i * HP;
    int huge_kind[R_N] = {1, 1, 1, 1, 0, 0, 1, 0};
    for (int i = 0; i < R_N; i++) madvise(r[i], HP, huge_kind[i] ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    madvise(r[R_HUGE], 2 * HP, MADV_DONTFORK);   /* huge and split stay exclusive */
    for (int i = 0; i < R_N; i++) touch(r[i], HP);
    for (int i = 0; i < R_N; i++) if (huge_kind[i]) madvise(r[i], HP, MADV_COLLAPSE);
    madvise(r[R_SPLIT], HP / 2, MADV_NOHUGEPAGE);
    madvise(r[R_ABSENT], HP, MADV_DONTNEED);
    madvise(r[R_PARTIAL], HP / 2, MADV_DONTNEED);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) { perror("fork"); return 1; }
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(0);
        for (int i = 0; i < 120; i++) sleep(1);
        _exit(0);
    }
    r[R_MIXED][4096 * 7] = 42;           /* one CoW copy */
    touch(r[R_EXCL], HP);                /* every page copied */
    for (int i = 0; i < R_N; i++) printf("%s %p\n", names[i], (void *)r[i]);
    printf("child %d\nREADY\n", (int)child);
    fflush(stdout);
    for (int i = 0; i < 120; i++) sleep(1);
    kill(child, SIGKILL);
    return 0;
}
