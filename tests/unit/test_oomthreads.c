/* test_oomthreads.c: out of memory while other threads allocate. The OS
 * table is replaced, before the allocator starts, by one that refuses to
 * commit heap memory past a budget (48 MiB of 2 MiB-or-larger commits), as
 * a commit limit would. Three threads churn small and medium blocks
 * (their span caches in use) while a fourth takes 4 MiB blocks until
 * NULL, frees them and starts again: each NULL is preceded by the
 * out-of-memory retry, which drains every thread's span cache and kept
 * slabs while their owners run (alloc.c, reclaim_for_retry; the idle
 * drain's gate). The program re-executes itself with HPM_BACKGROUND=0, so
 * that every drain is the retry's.
 * Checked: every failed request gives NULL and ENOMEM; every block keeps
 * its contents; the hog met the budget and the retry drained heaps
 * (_hpm_idle_drains); after the threads end, the hog gets as many 4 MiB
 * blocks as the budget holds, less what the layout splits (nothing is
 * lost to the caches). Under ThreadSanitizer the same
 * runs with no report. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

#define MIB ((size_t)1 << 20)
#define BUDGET_BYTES (48 * MIB)
#define HOG_BYTES (4 * MIB)

static atomic_size_t heap_committed_bytes;
static atomic_long refused;
static const hpm_os_t *real = &_hpm_os_linux;

/* Commits inside the heap's arenas count (hugepages, 2 MiB or more at a
 * time); metadata's pass. A released hugepage stays committed, so the
 * count only grows. */
static int budget_commit(void *p, size_t n) {
    if (_hpm_arena_of_addr(&_hpm_ph, (uintptr_t)p)) {
        size_t before = atomic_fetch_add(&heap_committed_bytes, n);
        if (before + n > BUDGET_BYTES) {
            atomic_fetch_sub(&heap_committed_bytes, n);
            atomic_fetch_add(&refused, 1);
            return ENOMEM;
        }
    }
    return real->commit(p, n);
}

static hpm_os_t budgeted;
__attribute__((constructor(101))) static void budget_install(void) {
    budgeted = _hpm_os_linux;
    budgeted.commit = budget_commit;
    _hpm_os = &budgeted;
}

static atomic_int stop, lost, bad_errno;

static unsigned next_rand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

typedef struct { unsigned char *p; size_t size; unsigned char tag; } block_t;

static void stamp(block_t *b) {
    memset(b->p, b->tag, b->size < 256 ? b->size : 256);
    b->p[b->size - 1] = b->tag;
}

static void unstamp(block_t *b) {
    size_t n = b->size < 256 ? b->size : 256;
    for (size_t i = 0; i < n; i++)
        if (b->p[i] != b->tag) { atomic_fetch_add(&lost, 1); break; }
    if (b->p[b->size - 1] != b->tag) atomic_fetch_add(&lost, 1);
    free(b->p);
    b->p = NULL;
}

/* Small and medium blocks (16 KiB .. 512 KiB go through the span cache),
 * at most 32 live; a NULL must come with ENOMEM. */
static void *churner(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    block_t live[32] = {{0}};
    while (!atomic_load(&stop)) {
        block_t *b = &live[next_rand(&seed) % 32];
        if (b->p) unstamp(b);
        unsigned r = next_rand(&seed);
        b->size = (r & 1) ? 16 + r % 2000 : (16 << 10) + (size_t)(r % (496 << 10));
        b->tag = (unsigned char)(r >> 3);
        errno = 0;
        b->p = malloc(b->size);
        if (!b->p) {
            if (errno != ENOMEM) atomic_store(&bad_errno, errno);
            continue;
        }
        stamp(b);
    }
    for (int i = 0; i < 32; i++)
        if (live[i].p) unstamp(&live[i]);
    return NULL;
}

/* 4 MiB blocks until NULL; returns how many. */
static size_t hog_round(block_t *v, size_t max, unsigned char tag) {
    size_t n = 0;
    while (n < max) {
        errno = 0;
        v[n].p = malloc(HOG_BYTES);
        if (!v[n].p) {
            if (errno != ENOMEM) atomic_store(&bad_errno, errno);
            break;
        }
        v[n].size = HOG_BYTES;
        v[n].tag = (unsigned char)(tag + n);
        stamp(&v[n]);
        n++;
    }
    for (size_t i = 0; i < n; i++) unstamp(&v[i]);
    return n;
}

static int child(void) {
    enum { THREADS = 3, MAX_HOG = 64 };
    static block_t v[MAX_HOG];
    free(malloc(64));
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, churner, (void *)(uintptr_t)(i * 7919 + 1)) == 0);
    size_t rounds = 0, met_null = 0, most = 0;
    for (; rounds < 150; rounds++) {
        size_t n = hog_round(v, MAX_HOG, (unsigned char)rounds);
        if (n < MAX_HOG) met_null++;
        if (n > most) most = n;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    uint64_t drains = _hpm_idle_drains;
    hpm_stats_t st;
    hpm_stats_get(&st);
    printf("in use %llu bytes, hugepages backed %llu in use %llu cached %llu top %zu\n", (unsigned long long)st.bytes_in_use,
           (unsigned long long)st.hp_backed, (unsigned long long)st.hp_in_use, (unsigned long long)st.hp_cached, _hpm_ph.top_hp);
    size_t after = hog_round(v, MAX_HOG, 0x5a);
    hpm_stats_get(&st);
    printf("then: hugepages backed %llu in use %llu cached %llu\n", (unsigned long long)st.hp_backed,
           (unsigned long long)st.hp_in_use, (unsigned long long)st.hp_cached);
    printf("%zu hog rounds, %zu met NULL (at most %zu blocks of 4 MiB); %llu heap drains; %ld commits refused; "
           "after the threads: %zu blocks\n",
           rounds, met_null, most, (unsigned long long)drains, atomic_load(&refused), after);
    CHECK(met_null == rounds, "every round met the budget: %zu of %zu", met_null, rounds);
    CHECK(drains > 0, "the retry drained the threads' heaps");
    CHECK(atomic_load(&lost) == 0, "%d blocks lost their contents", atomic_load(&lost));
    CHECK(atomic_load(&bad_errno) == 0, "errno %d on a failed request", atomic_load(&bad_errno));
    /* 48 MiB hold 12 blocks of 4 MiB. One hugepage stays in use (the main
     * thread's slab) and one index may be left unbacked (a refused
     * commit): each can split a run of backed hugepages into odd parts,
     * 10-11 here. Without the retry's drain the exited threads' spans
     * stay in the central cache: 0-1. */
    CHECK(after >= BUDGET_BYTES / HOG_BYTES - 3 && after < MAX_HOG, "after the threads end: %zu blocks of 4 MiB", after);
    return TEST_DONE();
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "child")) return child();
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(len > 0);
    if (len <= 0) return TEST_DONE();
    self[len] = 0;
    pid_t pid = fork();
    if (pid == 0) {
        setenv("HPM_BACKGROUND", "0", 1);
        execl(self, self, "child", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child: status 0x%x", st);
    return TEST_DONE();
}
