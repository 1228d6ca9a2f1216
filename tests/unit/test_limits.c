/* test_limits.c: the heap under address-space and commit limits (issue 13,
 * items 2 and 3). Each case runs in a child that re-executes this program,
 * so that the allocator starts under the limit being tested:
 *   overcommit  malloc(100 GiB) on a machine the kernel would refuse it on
 *               gives NULL and ENOMEM, and the heap keeps working;
 *   as1g        under RLIMIT_AS of 1 GiB: allocate until NULL (at least
 *               920 MiB of 1 MiB blocks), free, and allocate again (as
 *               much again), 8 MiB blocks as many before and after small
 *               blocks; at NULL the caches (a parked thread's too) have
 *               been given back;
 *   late        a limit set after start is honoured when the heap grows;
 *   many        300 blocks of 1 GiB, one byte touched in each (more than
 *               the first reservation), then all freed;
 *   shrink1g    HPM_PAGES=1g, a limit set after start that the process is
 *               over: the arena gives back its unused part in whole
 *               GiBs, and blocks past the first GiB are backed;
 *   tight       the heap starts under a limit that leaves it almost no
 *               room: a try that fails keeps no address space, and once
 *               the program frees its own the heap starts and works.
 * Nothing here touches more than a few hundred MiB. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "hpmalloc.h"
#include "parked_cache.h"
#include "testhelper.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)
#define HPM_TEST_STRIDE ((size_t)2 << 20)   /* a byte per 2 MiB page */

static int child_overcommit(void) {
    size_t huge = 100 * GIB;
    void *probe = mmap(NULL, huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe != MAP_FAILED) {
        munmap(probe, huge);
        printf("note: the kernel accepts a 100 GiB private mapping here (overcommit policy): skipped\n");
        CHECK(1);
        return TEST_DONE();
    }
    void *small = malloc(100);
    CHECK(small != NULL);
    errno = 0;
    void *p = malloc(huge);
    CHECK(p == NULL && errno == ENOMEM, "malloc(100 GiB) = %p errno %d", p, errno);
    errno = 0;
    void *c = calloc(1, huge);
    CHECK(c == NULL && errno == ENOMEM, "calloc(100 GiB) = %p errno %d", c, errno);
    errno = 0;
    void *a = aligned_alloc(GIB, huge);
    CHECK(a == NULL && errno == ENOMEM, "aligned_alloc(1 GiB, 100 GiB) = %p errno %d", a, errno);
    /* the heap still works, large and small, and has no hole */
    for (int i = 0; i < 3; i++) {
        char *b = malloc(GIB);
        CHECK(b != NULL, "1 GiB after the refusal");
        if (b) { b[0] = 1; b[GIB - 1] = 2; free(b); }
    }
    char *s = malloc(5000);
    CHECK(s != NULL);
    if (s) memset(s, 3, 5000);
    free(s);
    free(small);
    return TEST_DONE();
}

/* Allocates blocks of block_bytes (written at both ends) until NULL or
 * cap_bytes; returns the count and leaves the pointers in v. */
static size_t fill(void **v, size_t max, size_t block_bytes, size_t cap_bytes, int *bad_errno) {
    size_t n = 0;
    while (n < max && n * block_bytes < cap_bytes) {
        errno = 0;
        char *p = malloc(block_bytes);
        if (!p) { if (errno != ENOMEM) *bad_errno = errno; break; }
        p[0] = (char)n;
        p[block_bytes - 1] = (char)n;
        v[n++] = p;
    }
    return n;
}

static void empty(void **v, size_t n, size_t block_bytes, int *corrupt) {
    for (size_t i = 0; i < n; i++) {
        char *p = v[i];
        if (p[0] != (char)i || p[block_bytes - 1] != (char)i) (*corrupt)++;
        free(p);
    }
}

static int child_as(void) {
    static void *v[1 << 18];
    int bad_errno = 0, corrupt = 0;
    void *first = malloc(64);
    pthread_t other;
    CHECK(park_start(&other, 64 * 1024) == 0);   /* a small stack: under the limit it counts whole */
    CHECK(first != NULL, "a first malloc under RLIMIT_AS 1 GiB");
    size_t n1 = fill(v, 1 << 18, MIB, 2 * GIB, &bad_errno);
    CHECK(n1 >= 400, "1 MiB blocks under a 1 GiB limit: %zu", n1);
    /* 927-929 here; 915-917 while each arena reserved a 2 MiB map chunk
     * region even in a GiB whose chunk another arena had published */
    CHECK(n1 >= 920, "the heap's metadata leaves room for the blocks: %zu MiB of 1 MiB blocks", n1);
    CHECK(n1 < 1024, "the limit holds: %zu MiB", n1);
    printf("under RLIMIT_AS 1 GiB: %zu blocks of 1 MiB\n", n1);
    CHECK(bad_errno == 0, "errno on failure %d", bad_errno);
    empty(v, n1, MIB, &corrupt);
    size_t n2 = fill(v, 1 << 18, MIB, 2 * GIB, &bad_errno);
    CHECK(n2 + 16 >= n1, "after freeing, as much again: %zu then %zu", n1, n2);
    empty(v, n2, MIB, &corrupt);
    /* 8 MiB blocks fill the heap but for what an 8 MiB block cannot use:
     * under the limit the heap is eight arenas, each half the room left
     * (476, 232, 114, ... MiB), and a block does not span two */
    size_t n8 = fill(v, 1 << 18, 8 * MIB, 2 * GIB, &bad_errno);
    CHECK(n8 * 8 + 96 >= n1, "8 MiB blocks: %zu MiB, against %zu MiB of 1 MiB blocks", n8 * 8, n1);
    empty(v, n8, 8 * MIB, &corrupt);
    size_t n3 = fill(v, 1 << 18, 3000, 2 * GIB, &bad_errno);
    CHECK(n3 * 3000 >= 200 * MIB, "small blocks: %zu MiB", n3 * 3000 / MIB);
    empty(v, n3, 3000, &corrupt);
    size_t n4 = fill(v, 1 << 18, 8 * MIB, 2 * GIB, &bad_errno);
    hpm_stats_t st;
    hpm_stats_get(&st);
    printf("%zu blocks of 8 MiB, then %zu MiB of small blocks, then %zu blocks of 8 MiB (VmSize %ld KiB, %llu hugepages in use)\n", n8, n3 * 3000 / MIB, n4,
           th_field_kb("/proc/self/status", "VmSize"), (unsigned long long)st.hp_in_use);
    CHECK(n4 + 2 >= n8, "large blocks after small ones: %zu of 8 MiB, %zu before them", n4, n8);
    /* before a malloc fails, the caches give back what they hold: the 1 MiB
     * spans of this thread's span cache, of the parked thread's and of the
     * central cache, the kept slabs (each 8 MiB block covers 4 hugepages, 5
     * if it starts inside one; `first` holds one more): 16 more without
     * the reclaim, 8 more without the other thread's */
    CHECK(st.hp_in_use <= n4 * 4 + 4, "at NULL, %llu hugepages in use for %zu blocks of 8 MiB and one of 64 bytes",
          (unsigned long long)st.hp_in_use, n4);
    empty(v, n4, 8 * MIB, &corrupt);
    CHECK(corrupt == 0, "%d blocks lost their contents", corrupt);
    CHECK(park_end(other) == 0);
    free(first);
    return TEST_DONE();
}

static long vm_kb(void) { return th_field_kb("/proc/self/status", "VmSize"); }

static int child_late(void) {
    static void *v[1 << 16];
    int bad_errno = 0, corrupt = 0;
    void *first = malloc(64);
    CHECK(first != NULL);
    size_t n0 = fill(v, 1 << 16, MIB, 8 * MIB, &bad_errno);
    empty(v, n0, MIB, &corrupt);
    /* a limit of 2 GiB, set after start: VmSize (the heap's reservations
     * included) may be far above it, which setrlimit accepts */
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = 2 * GIB;
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
    size_t n = fill(v, 1 << 16, MIB, 3 * GIB, &bad_errno);   /* capped: each block touches a hugepage */
    CHECK(n < 2048, "a limit set after start holds: %zu MiB allocated under a 2 GiB limit", n);
    CHECK(n >= 256, "but the heap still grows: %zu MiB", n);
    CHECK(bad_errno == 0, "errno %d", bad_errno);
    long vm = vm_kb();
    CHECK(vm > 0 && (size_t)vm * 1024 <= 2 * GIB, "the process is inside its limit again: VmSize %ld MiB", vm / 1024);
    empty(v, n, MIB, &corrupt);
    size_t n2 = fill(v, 1 << 16, MIB, 3 * GIB, &bad_errno);
    CHECK(n2 + 16 >= n, "after freeing, as much again: %zu then %zu", n, n2);
    empty(v, n2, MIB, &corrupt);
    CHECK(corrupt == 0);
    free(first);
    return TEST_DONE();
}

static int child_many(void) {
    enum { N = 300 };
    static char *v[N];
    size_t n = 0;
    while (n < N) {
        char *p = malloc(GIB);
        if (!p) break;
        p[(n * 4096) % GIB] = (char)(n + 1);
        v[n++] = p;
    }
    CHECK(n == N, "%zu of %d blocks of 1 GiB", n, N);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i][(i * 4096) % GIB] != (char)(i + 1)) bad++;
        free(v[i]);
    }
    CHECK(bad == 0, "%d blocks lost their byte", bad);
    char *again = malloc(GIB);
    CHECK(again != NULL);
    free(again);
    return TEST_DONE();
}

/* In 1g mode (each GiB falls back to THP when the pool has no 1 GiB
 * page) under a limit set after start that the process is over, as in
 * late: a request that does not fit makes the arena give back its unused
 * part. It must keep whole GiBs: cut at the top, the next arena began in
 * the middle of a GiB's 512 indices, the first GiB was committed again
 * for them, and their own memory never was (a write to the next block
 * faulted). Then 20 blocks of 64 MiB, more than the GiB kept. */
static int child_shrink1g(void) {
    char *first = malloc(100);
    CHECK(first != NULL);
    if (!first) return TEST_DONE();
    memset(first, 5, 100);
    hpm_stats_t st;
    hpm_stats_get(&st);
    size_t tail = st.arena_reserved_bytes - st.bytes_mapped;   /* one arena so far */
    long vm = vm_kb();
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = (size_t)vm * 1024 - tail + 4 * GIB;
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
    errno = 0;
    void *big = malloc(8 * GIB);
    CHECK(big == NULL && errno == ENOMEM, "8 GiB under a 4 GiB room: %p errno %d", big, errno);
    static char *v[20];
    size_t n = 0;
    for (; n < 20; n++) {
        v[n] = malloc(64 * MIB);
        if (!v[n]) break;
        for (size_t off = 0; off < 64 * MIB; off += HPM_TEST_STRIDE) v[n][off] = (char)(n + 1);   /* faults here without the fix */
    }
    CHECK(n == 20, "%zu blocks of 64 MiB under a 4 GiB room", n);
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t off = 0; off < 64 * MIB; off += HPM_TEST_STRIDE) bad += v[i][off] != (char)(i + 1);
        free(v[i]);
    }
    CHECK(bad == 0, "%d places lost their byte", bad);
    CHECK(first[0] == 5 && first[99] == 5);
    free(first);
    return TEST_DONE();
}

/* The room under the limit grows 1 MiB at a time (the program unmaps
 * its own mapping piece by piece), and at each step malloc is tried three
 * times until one works: a failed try must not keep address space, or
 * the room that a later try needs goes with it. (An arena whose slab
 * record region could not be reserved kept its page map's reservation,
 * 2 MiB a try, and the heap never started, not even with 64 MiB of room
 * once the program had unmapped all of its own.) Reads /proc
 * with open and read only: nothing allocates before the limit is set. */
static int child_tight(void) {
    long vm0_kb = vm_kb();
    struct rlimit rl = {(size_t)vm0_kb * 1024 + 64 * MIB, (size_t)vm0_kb * 1024 + 64 * MIB};
    CHECK(setrlimit(RLIMIT_AS, &rl) == 0);
    size_t ballast_bytes = 62 * MIB;   /* 2 MiB of room at first */
    char *ballast = mmap(NULL, ballast_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(ballast != MAP_FAILED);
    if (ballast == MAP_FAILED) return TEST_DONE();
    char *first = NULL;
    int grew = 0;
    while (!first && ballast_bytes > 0) {
        ballast_bytes -= MIB;
        munmap(ballast + ballast_bytes, MIB);
        long before_kb = 0;
        for (int t = 0; t < 3 && !first; t++) {
            errno = 0;
            first = malloc(100);
            CHECK(first || errno == ENOMEM, "a failed malloc sets ENOMEM (%d)", errno);
            if (!first && t == 0) before_kb = vm_kb();
            if (!first && t == 2 && vm_kb() != before_kb) {
                grew++;
                printf("with %zu MiB of room, failed tries took %ld KiB more\n", (62 * MIB - ballast_bytes) / MIB + 2, vm_kb() - before_kb);
            }
        }
    }
    CHECK(grew == 0, "failed tries kept address space at %d steps", grew);
    CHECK(first != NULL, "the heap starts before the program unmaps all of its own");
    if (first) printf("the heap started with %zu MiB of room\n", (62 * MIB - ballast_bytes) / MIB + 2);
    munmap(ballast, ballast_bytes);
    if (first) memset(first, 7, 100);
    static void *v[64];
    int bad_errno = 0, corrupt = 0;
    size_t n = fill(v, 64, MIB, 64 * MIB, &bad_errno);
    CHECK(n >= 16, "then 1 MiB blocks: %zu", n);
    CHECK(bad_errno == 0, "errno %d", bad_errno);
    empty(v, n, MIB, &corrupt);
    CHECK(corrupt == 0);
    CHECK(first && first[0] == 7 && first[99] == 7);
    free(first);
    return TEST_DONE();
}

static const char *self;

/* Runs one case in a re-executed child, under an address-space limit when as_bytes > 0. */
static void run_case(const char *name, size_t as_bytes) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (as_bytes) {
            struct rlimit rl = {as_bytes, as_bytes};
            if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(99);
        }
        execl(self, self, name, (char *)NULL);
        _exit(98);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "case %s: status %#x", name, status);
    printf("case %s: %s\n", name, WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "ok" : "FAILED");
}

int main(int argc, char **argv) {
    if (argc > 1) {
        setvbuf(stdout, NULL, _IONBF, 0);
        if (!strcmp(argv[1], "overcommit")) return child_overcommit();
        if (!strcmp(argv[1], "as1g")) return child_as();
        if (!strcmp(argv[1], "late")) return child_late();
        if (!strcmp(argv[1], "many")) return child_many();
        if (!strcmp(argv[1], "tight")) return child_tight();
        if (!strcmp(argv[1], "shrink1g")) return child_shrink1g();
        return 2;
    }
    self = "/proc/self/exe";
    static char path[4096];
    ssize_t len = readlink("/proc/self/exe", path, sizeof path - 1);
    if (len > 0) { path[len] = 0; self = path; }
    run_case("overcommit", 0);
    run_case("as1g", GIB);
    run_case("late", 0);
    run_case("many", 0);
    run_case("tight", 0);
    setenv("HPM_PAGES", "1g", 1);   /* for that child only: this process's heap has started */
    run_case("shrink1g", 0);
    unsetenv("HPM_PAGES");
    return TEST_DONE();
}
