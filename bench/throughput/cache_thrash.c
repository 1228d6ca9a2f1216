/* cache_thrash.c: Berger's cache-thrash test of active false sharing (from
 * the Hoard benchmarks; mimalloc-bench runs `cache-thrash T 1000 1 2000000 T`:
 * T threads, 1000 iterations, 1-byte objects, 2,000,000 repetitions split
 * over the threads). Each thread, --iterations times, mallocs an object of
 * --objsize bytes, writes and reads every byte of it
 * --repetitions / T times, and frees it. The threads allocate at the same
 * time; an allocator that gives two threads objects on one cache line makes
 * them fight over that line, which shows as a much longer time.
 *
 * Self-check: after the writes each byte must hold the value last written
 * (its index plus the repetition count, mod 256), and every read must have
 * returned what was just written (counted).
 * Result: RESULT bench=cache_thrash threads=T objsize=B iterations=N
 *   repetitions=N wall_ms=X ns_per_iter=X check=ok */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench_common.h"

typedef struct {
    int id;
    uint64_t objsize, iterations, repetitions, bad_reads;
    pthread_barrier_t *start;
} worker_t;

static const char *prog = "cache_thrash";

static void *worker_main(void *arg) {
    worker_t *w = arg;
    pthread_barrier_wait(w->start);
    for (uint64_t i = 0; i < w->iterations; i++) {
        volatile unsigned char *obj = bench_xmalloc(w->objsize);
        for (uint64_t r = 0; r < w->repetitions; r++)
            for (uint64_t k = 0; k < w->objsize; k++) {
                unsigned char v = (unsigned char)(k + r);
                obj[k] = v;
                if (obj[k] != v) w->bad_reads++;
            }
        if (w->repetitions)
            for (uint64_t k = 0; k < w->objsize; k++)
                if (obj[k] != (unsigned char)(k + w->repetitions - 1))
                    bench_check_failed("thread %d: byte %llu of its object changed", w->id, (unsigned long long)k);
        free((void *)obj);
    }
    return NULL;
}

static void usage(void) {
    printf("usage: cache_thrash [--threads T] [--iterations N] [--objsize B] [--repetitions R] [--seed S]\n"
           "  Active false sharing: T threads each malloc, write R/T times and free an object\n"
           "  of B bytes, N times.\n"
           "  Defaults (mimalloc-bench's `cache-thrash T 1000 1 2000000 T`):\n"
           "    --threads 2 --iterations 1000 --objsize 1 --repetitions 2000000\n"
           "  --seed is accepted for uniformity; the benchmark is deterministic.\n"
           "  Prints: RESULT bench=cache_thrash ... wall_ms=X ns_per_iter=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 2, iterations = 1000, objsize = 1, repetitions = 2000000, seed = 1;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"iterations", 1, 0, 'i'}, {"objsize", 1, 0, 'o'}, {"repetitions", 1, 0, 'r'},
        {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'i': iterations = bench_arg_size(prog, "--iterations", optarg, 1, 1ull << 40); break;
        case 'o': objsize = bench_arg_size(prog, "--objsize", optarg, 1, 1u << 20); break;
        case 'r': repetitions = bench_arg_size(prog, "--repetitions", optarg, 0, 1ull << 40); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    (void)seed;
    worker_t *w = bench_scratch_alloc(sizeof *w * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++) {
        w[i] = (worker_t){.id = (int)i, .objsize = objsize, .iterations = iterations,
                          .repetitions = repetitions / threads, .start = &start};
        if (pthread_create(&tid[i], NULL, worker_main, &w[i])) { perror("pthread_create"); return 1; }
    }
    pthread_barrier_wait(&start);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    uint64_t wall_ns = bench_now_ns() - t0, bad = 0;
    for (uint64_t i = 0; i < threads; i++) bad += w[i].bad_reads;
    if (bad) bench_check_failed("%llu reads did not return the byte just written", (unsigned long long)bad);
    bench_result("cache_thrash", "threads=%llu objsize=%llu iterations=%llu repetitions=%llu wall_ms=%.3f "
                 "ns_per_iter=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)objsize, (unsigned long long)iterations,
                 (unsigned long long)repetitions, (double)wall_ns / 1e6, (double)wall_ns / (double)iterations);
    return 0;
}
