/* forktest.c: fork while other threads allocate. Usage: forktest [FORKS [THREADS]]
 * (defaults 200 and 3).
 *
 * THREADS background threads allocate, hand blocks to each other through a
 * shared array (so frees cross threads) and free, with sizes from 8 bytes to
 * 4 MiB, without pause. Meanwhile the main thread forks FORKS times. Each
 * child, single-threaded in a heap whose locks may have been held by a
 * thread that does not exist in it:
 *   - checks and frees half of the blocks the main thread allocated before
 *     the fork;
 *   - allocates, fills, reallocs, checks and frees a mix of sizes;
 *   - starts a thread that does the same, joins it; every tenth child also
 *     forks a grandchild that allocates and exits;
 *   - exits through exit() with 0 when every check passed.
 * An alarm kills a child that hangs (a deadlock after fork). The parent
 * checks every child's exit status, then its own blocks and the background
 * threads' blocks. Prints "N passed, N failed"; plain C, runs on any malloc. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pattern.h"

#define SHARED_SLOTS 64
#define MAIN_BLOCKS 256
#define CHILD_ALARM_S 20

static _Atomic(void *) shared[SHARED_SLOTS];
static atomic_int stop_threads;
static atomic_ulong bg_bad, bg_ops;
static atomic_long bg_started;   /* background threads that have begun running */
static void *main_blocks[MAIN_BLOCKS];

static size_t pick_size(pat_rng_t *r)
{
    uint64_t x = pat_rand(r);
    unsigned kind = (unsigned)(x % 200);
    x >>= 8;
    if (kind == 0) return (size_t)(2u << 20) + (size_t)(x % (2u << 20));
    if (kind < 10) return (size_t)4096 + (size_t)(x % (512u << 10));
    return 8 + (size_t)(x % 512);
}

/* Returns 1 when the block at p holds its pattern (0 also for NULL). */
static int block_ok(const void *p)
{
    if (!p) return 0;
    size_t size = pat_size(p, (uintptr_t)p);
    return size >= 8 && size <= (8u << 20) && pat_check(p, (uintptr_t)p, size, size) < 0;
}

static void *new_block(pat_rng_t *r)
{
    size_t size = pick_size(r);
    void *p = malloc(size);
    if (p) pat_fill(p, size);
    return p;
}

static void *background_main(void *arg)
{
    atomic_fetch_add(&bg_started, 1);
    pat_rng_t r;
    pat_rng_seed(&r, (uint64_t)(uintptr_t)arg);
    void *ring[32] = { 0 };
    for (unsigned long i = 0; !atomic_load_explicit(&stop_threads, memory_order_relaxed); i++) {
        unsigned j = (unsigned)(i % 32);
        if (ring[j] && !block_ok(ring[j])) atomic_fetch_add(&bg_bad, 1);
        free(ring[j]);
        ring[j] = new_block(&r);
        if ((i & 3) == 0) {
            void *got = atomic_exchange(&shared[pat_rand(&r) % SHARED_SLOTS], ring[j]);
            ring[j] = NULL;
            if (got && !block_ok(got)) atomic_fetch_add(&bg_bad, 1);
            free(got);
        }
        atomic_fetch_add_explicit(&bg_ops, 1, memory_order_relaxed);
    }
    for (unsigned j = 0; j < 32; j++) {
        if (ring[j] && !block_ok(ring[j])) atomic_fetch_add(&bg_bad, 1);
        free(ring[j]);
    }
    return NULL;
}

/* Allocation work done in the child (by its main thread and a new thread).
 * Returns the number of failed checks. */
static int child_work(uint64_t seed)
{
    pat_rng_t r;
    pat_rng_seed(&r, seed);
    void *blocks[200];
    int bad = 0;
    for (int i = 0; i < 200; i++) {
        blocks[i] = new_block(&r);
        if (!blocks[i]) bad++;
    }
    for (int i = 0; i < 200; i += 3) {
        if (!blocks[i]) continue;
        size_t old = pat_size(blocks[i], (uintptr_t)blocks[i]), size = pick_size(&r);
        uintptr_t old_addr = (uintptr_t)blocks[i];
        void *q = realloc(blocks[i], size);
        if (!q) { bad++; continue; }
        if (pat_check(q, old_addr, old, size) >= 0) bad++;
        pat_fill(q, size);
        blocks[i] = q;
    }
    void *z = calloc(1000, 8);
    if (!z) bad++;
    else for (int i = 0; i < 8000; i++) if (((unsigned char *)z)[i]) { bad++; break; }
    free(z);
    for (int i = 0; i < 200; i++) {
        if (blocks[i] && !block_ok(blocks[i])) bad++;
        free(blocks[i]);
    }
    return bad;
}

static void *child_thread_main(void *arg)
{
    return (void *)(intptr_t)child_work((uint64_t)(uintptr_t)arg);
}

static int run_child(int k)
{
    alarm(CHILD_ALARM_S);
    int bad = 0;
    for (int i = k % 2; i < MAIN_BLOCKS; i += 2) {
        if (!block_ok(main_blocks[i])) bad++;
        free(main_blocks[i]);
    }
    bad += child_work(0xc0ffee + (uint64_t)k);
    /* FORKTEST_CHILD_THREAD=0 (the sanitizer runs): no thread in the child.
     * clang 14's ASan runtime takes its own locks in pthread_create and has
     * no fork handlers (it gained them in LLVM 18, llvm-project #75290), so
     * a child that starts a thread can hang inside the sanitizer itself. */
    const char *ct = getenv("FORKTEST_CHILD_THREAD");
    if (!ct || strcmp(ct, "0") != 0) {
        pthread_t t;
        void *ret = NULL;
        if (pthread_create(&t, NULL, child_thread_main, (void *)(uintptr_t)(k * 7 + 1)) != 0) bad++;
        else if (pthread_join(t, &ret) != 0) bad++;
        else bad += (int)(intptr_t)ret;
    }
    if (k % 10 == 0) {
        pid_t g = fork();
        if (g == 0) exit(child_work((uint64_t)k * 13) ? 1 : 0);
        int st = 0;
        if (g < 0 || waitpid(g, &st, 0) != g || !WIFEXITED(st) || WEXITSTATUS(st) != 0) bad++;
    }
    return bad;
}

static int parse_arg(const char *s, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 1 || v > max) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    long forks = 200, nthreads = 3;
    if (argc > 3 || (argc > 1 && parse_arg(argv[1], 100000, &forks)) ||
        (argc > 2 && parse_arg(argv[2], 64, &nthreads))) {
        fprintf(stderr, "usage: forktest [FORKS (1..100000) [THREADS (1..64)]]\n");
        return 2;
    }
    int passed = 0, failed = 0;
    pat_rng_t r;
    pat_rng_seed(&r, 42);
    for (int i = 0; i < MAIN_BLOCKS; i++) main_blocks[i] = new_block(&r);
    pthread_t tids[64];
    for (long t = 0; t < nthreads; t++)
        if (pthread_create(&tids[t], NULL, background_main, (void *)(uintptr_t)(t + 1)) != 0) {
            fprintf(stderr, "forktest: pthread_create failed\n");
            return 1;
        }
    /* Every thread past its start first: a thread still starting holds the
     * thread library's (and a sanitizer runtime's) own locks. */
    while (atomic_load(&bg_started) < nthreads) sched_yield();
    for (long k = 0; k < forks; k++) {
        unsigned long ops0 = atomic_load(&bg_ops);
        while (atomic_load(&bg_ops) < ops0 + 50) sched_yield(); /* let them run between forks */
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) exit(run_child((int)k) ? 1 : 0);
        int st = 0;
        if (pid < 0) {
            fprintf(stderr, "FAIL fork %ld: %s\n", k, strerror(errno));
            failed++;
        } else if (waitpid(pid, &st, 0) != pid) {
            fprintf(stderr, "FAIL fork %ld: waitpid: %s\n", k, strerror(errno));
            failed++;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            passed++;
        } else {
            failed++;
            if (WIFSIGNALED(st))
                fprintf(stderr, "FAIL child %ld killed by signal %d (%s)%s\n", k, WTERMSIG(st),
                        strsignal(WTERMSIG(st)),
                        WTERMSIG(st) == SIGALRM ? ": it hung, a deadlock after fork?" : "");
            else
                fprintf(stderr, "FAIL child %ld exited with %d (failed checks)\n", k, WEXITSTATUS(st));
        }
    }
    atomic_store(&stop_threads, 1);
    for (long t = 0; t < nthreads; t++) pthread_join(tids[t], NULL);
    int main_bad = 0, shared_bad = 0;
    for (int i = 0; i < MAIN_BLOCKS; i++) {
        if (!block_ok(main_blocks[i])) main_bad++;
        free(main_blocks[i]);
    }
    for (int i = 0; i < SHARED_SLOTS; i++) {
        void *p = atomic_exchange(&shared[i], NULL);
        if (p && !block_ok(p)) shared_bad++;
        free(p);
    }
    if (main_bad) fprintf(stderr, "FAIL parent: %d of its own blocks corrupted\n", main_bad);
    if (shared_bad || atomic_load(&bg_bad))
        fprintf(stderr, "FAIL parent: %d shared, %lu background blocks corrupted\n", shared_bad,
                atomic_load(&bg_bad));
    main_bad ? failed++ : passed++;
    (shared_bad || atomic_load(&bg_bad)) ? failed++ : passed++;
    printf("forktest: %ld forks with %ld allocating threads, %lu background operations\n", forks,
           nthreads, atomic_load(&bg_ops));
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
