/* cache_scratch.c: Berger's cache-scratch test of passive false sharing
 * (from the Hoard benchmarks). The main thread allocates one small object
 * (--objsize bytes) per thread back to back, so they likely share cache
 * lines, and hands object i to thread i. Each thread frees its object,
 * then --iters times mallocs an object of the same size, writes every byte
 * of it --repeat times and frees it. An allocator that gives a thread
 * memory on a cache line another thread writes makes the threads fight
 * over that line (false sharing), which shows as a much longer time.
 *
 * mimalloc-bench runs `cache-scratch T 1000 1 2000000 T`: here
 * `--threads T --iters 1000 --objsize 1 --repetitions 2000000`, where
 * --repetitions is split over the threads as in the original (--repeat is
 * per thread).
 *
 * Self-check: after the writes every byte must hold the expected value.
 * Result: RESULT bench=cache_scratch threads=T objsize=B iters=N repeat=R
 *         wall_ms=X ns_per_iter=X check=ok (ns_per_iter: wall / iters). */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

typedef struct {
    int id;
    unsigned char *handed;    /* allocated by the main thread */
    uint64_t objsize, iters, repeat;
    pthread_barrier_t *start;
} scratch_t;

static const char *prog = "cache_scratch";

static void *worker_main(void *arg) {
    scratch_t *s = arg;
    pthread_barrier_wait(s->start);
    free(s->handed);
    unsigned char want = (unsigned char)(s->repeat + (uint64_t)s->id);
    for (uint64_t i = 0; i < s->iters; i++) {
        volatile unsigned char *p = bench_xmalloc(s->objsize);
        for (uint64_t k = 0; k < s->objsize; k++) p[k] = (unsigned char)s->id;
        for (uint64_t r = 0; r < s->repeat; r++)
            for (uint64_t k = 0; k < s->objsize; k++) p[k] = (unsigned char)(p[k] + 1);
        for (uint64_t k = 0; k < s->objsize; k++)
            if (p[k] != want) bench_check_failed("thread %d: byte %llu of its object is %u, expected %u", s->id,
                                                 (unsigned long long)k, p[k], want);
        free((void *)p);
    }
    return NULL;
}

static void usage(void) {
    printf("usage: cache_scratch [--threads T] [--objsize B] [--iters N] [--repeat R | --repetitions R]\n"
           "                     [--seed S]\n"
           "  Passive false sharing: objects allocated by one thread, freed by T workers that\n"
           "  then malloc, write R times and free objects of the same size N times.\n"
           "  --repetitions R: R/T writes per thread (the original's argument).\n"
           "  Defaults: --threads 2 --objsize 8 --iters 20000 --repeat 500\n"
           "  Published (mimalloc-bench): --iters 1000 --objsize 1 --repetitions 2000000\n"
           "  --seed is accepted for uniformity; the benchmark is deterministic.\n"
           "  Prints: RESULT bench=cache_scratch ... wall_ms=X ns_per_iter=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 2, objsize = 8, iters = 20000, repeat = 500, seed = 1, total_reps = 0;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"objsize", 1, 0, 'o'}, {"iters", 1, 0, 'i'}, {"repeat", 1, 0, 'r'},
        {"repetitions", 1, 0, 'R'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'o': objsize = bench_arg_size(prog, "--objsize", optarg, 1, 1u << 20); break;
        case 'i': iters = bench_arg_size(prog, "--iters", optarg, 1, 1ull << 40); break;
        case 'r': repeat = bench_arg_size(prog, "--repeat", optarg, 0, 1ull << 30); break;
        case 'R': total_reps = bench_arg_size(prog, "--repetitions", optarg, 1, 1ull << 40); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    (void)seed;
    if (total_reps) repeat = total_reps / threads;
    scratch_t *s = bench_scratch_alloc(sizeof *s * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++) {
        s[i] = (scratch_t){.id = (int)i, .handed = bench_xmalloc(objsize), .objsize = objsize, .iters = iters,
                           .repeat = repeat, .start = &start};
        memset(s[i].handed, 0, objsize);
    }
    for (uint64_t i = 0; i < threads; i++)
        if (pthread_create(&tid[i], NULL, worker_main, &s[i])) { perror("pthread_create"); return 1; }
    pthread_barrier_wait(&start);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    uint64_t wall_ns = bench_now_ns() - t0;
    bench_result("cache_scratch", "threads=%llu objsize=%llu iters=%llu repeat=%llu wall_ms=%.3f ns_per_iter=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)objsize, (unsigned long long)iters,
                 (unsigned long long)repeat, (double)wall_ns / 1e6, (double)wall_ns / (double)iters);
    return 0;
}
