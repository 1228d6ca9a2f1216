/* thread_pool.c: the memory of a pool of threads that each hold a little
 * of many sizes (docs/allocator.md, "Many threads"). --threads threads
 * start and each mallocs one block of each of --classes sizes (16 + 48 i
 * bytes, i = 0..classes-1) and writes it whole; when all have, the main
 * thread reads its RSS (VmRSS and smaps_rollup); then every thread checks
 * and frees its blocks and exits. A per-thread heap that takes a whole
 * slab per size class shows here: 500 threads hold 500 x classes blocks
 * of about a hundred bytes each.
 *
 * Self-check: each block holds its thread, class and byte index (and the
 * seed) in every byte, and is read whole before its free; blocks made = blocks freed.
 * Result: RESULT bench=thread_pool threads=T classes=K blocks=N
 *   rss_kib=X anon_huge_kib=X wall_ms=X check=ok */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench_common.h"
#include "bench_mem.h"

#define MAX_CLASSES 64

static const char *prog = "thread_pool";
static uint64_t n_classes, seed = 1;
static pthread_barrier_t all_hold, measured;
static atomic_ullong n_made, n_freed;

static size_t class_bytes(uint64_t i) { return 16 + 48 * (size_t)i; }
static unsigned char stamp(uint64_t id, uint64_t cls, size_t k) { return (unsigned char)(seed + id * 31 + cls * 7 + k); }

static void *worker(void *arg) {
    uint64_t id = (uint64_t)(uintptr_t)arg;
    unsigned char *blk[MAX_CLASSES];
    for (uint64_t c = 0; c < n_classes; c++) {
        size_t n = class_bytes(c);
        if (!(blk[c] = malloc(n))) bench_check_failed("thread %llu: malloc(%zu) failed", (unsigned long long)id, n);
        for (size_t k = 0; k < n; k++) blk[c][k] = stamp(id, c, k);
        atomic_fetch_add(&n_made, 1);
    }
    pthread_barrier_wait(&all_hold);
    pthread_barrier_wait(&measured);
    for (uint64_t c = 0; c < n_classes; c++) {
        for (size_t k = 0; k < class_bytes(c); k++)
            if (blk[c][k] != stamp(id, c, k))
                bench_check_failed("thread %llu, class %llu: byte %zu changed", (unsigned long long)id, (unsigned long long)c, k);
        free(blk[c]);
        atomic_fetch_add(&n_freed, 1);
    }
    return NULL;
}

static void usage(void) {
    printf("usage: thread_pool [--threads N] [--classes K] [--seed S]\n"
           "  N threads (default 64) each hold one block of each of K sizes (default 20;\n"
           "  16 + 48 i bytes, at most %d), all at once; the RSS then is the pool's.\n"
           "  Prints: RESULT bench=thread_pool ... rss_kib=X anon_huge_kib=X wall_ms=X check=ok\n",
           MAX_CLASSES);
}

int main(int argc, char **argv) {
    uint64_t n_threads = 64;
    n_classes = 20;
    static const struct option opts[] = {{"threads", 1, 0, 't'}, {"classes", 1, 0, 'c'}, {"seed", 1, 0, 's'},
                                         {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 't': n_threads = bench_arg_size(prog, "--threads", optarg, 1, 4096); break;
        case 'c': n_classes = bench_arg_size(prog, "--classes", optarg, 1, MAX_CLASSES); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    pthread_t *t = bench_scratch_alloc(sizeof(pthread_t) * n_threads);
    pthread_barrier_init(&all_hold, NULL, (unsigned)n_threads + 1);
    pthread_barrier_init(&measured, NULL, (unsigned)n_threads + 1);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 << 10);   /* the stacks' share of RSS stays small */
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < n_threads; i++)
        if (pthread_create(&t[i], &attr, worker, (void *)(uintptr_t)i) != 0)
            bench_check_failed("pthread_create failed at thread %llu", (unsigned long long)i);
    pthread_barrier_wait(&all_hold);
    bench_mem_t m = bench_mem_read();
    pthread_barrier_wait(&measured);
    for (uint64_t i = 0; i < n_threads; i++) pthread_join(t[i], NULL);
    double wall_ms = (double)(bench_now_ns() - t0) / 1e6;
    uint64_t made = atomic_load(&n_made), freed = atomic_load(&n_freed);
    if (made != n_threads * n_classes || freed != made)
        bench_check_failed("blocks made %llu, freed %llu, expected %llu", (unsigned long long)made,
                           (unsigned long long)freed, (unsigned long long)(n_threads * n_classes));
    bench_scratch_free(t, sizeof(pthread_t) * n_threads);
    bench_result(prog, "threads=%llu classes=%llu blocks=%llu rss_kib=%ld anon_huge_kib=%ld wall_ms=%.3f check=ok\n",
                 (unsigned long long)n_threads, (unsigned long long)n_classes, (unsigned long long)made,
                 m.vm_rss_kib, m.anon_huge_kib, wall_ms);
    return 0;
}
