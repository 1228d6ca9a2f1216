/* glibc_simple.c: glibc's benchtests/bench-malloc-simple, as mimalloc-bench
 * runs it ("glibc-simple": the program with no argument, so blocks of 16,
 * 32 and 64 bytes). For each block size, and for each count n of 25, 100,
 * 400 and 1600, a step mallocs n blocks, writes every 4-byte word of
 * each, and frees them in the order they came; a pass repeats the step
 * --iters / n times, so about --iters malloc/free pairs a pass. Per size
 * and count the passes run: once as a warm-up, once in the main thread,
 * once in a new thread, and once more in the main thread after that
 * thread has ended (glibc's single-thread shortcut is then off). Only
 * malloc and free of one small size at a time: this is the fast path and
 * nothing else.
 *
 * Self-check: word g of block i of a step holds g + i (the original
 * writes g); before a block is freed its first and last words are
 * checked, so two live blocks that overlap are caught; the pairs of every
 * pass are counted.
 * Result: RESULT bench=glibc_simple size=B iters=N pairs=N wall_ms=X
 *   ns_per_pair=X check=ok (the wall time of everything: mimalloc-bench
 *   times the whole process). */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench_common.h"

#define N_COUNTS 4
#define MAX_BLOCKS 1600

static const char *prog = "glibc_simple";
static const unsigned counts[N_COUNTS] = {25, 100, 400, MAX_BLOCKS};

typedef struct {
    size_t size;       /* bytes a block */
    uint64_t iters;    /* pairs a pass, about */
    uint64_t pairs;    /* pairs made */
    uint32_t **arr;    /* MAX_BLOCKS slots, scaffolding */
} pass_t;

/* One pass for count n: iters / n steps of n mallocs and n frees. */
static void run_pass(pass_t *ps, unsigned n) {
    size_t words = ps->size / sizeof(uint32_t);
    uint64_t steps = ps->iters / n;
    for (uint64_t s = 0; s < steps; s++) {
        for (unsigned i = 0; i < n; i++) {
            uint32_t *b = bench_xmalloc(ps->size);
            for (size_t g = 0; g < words; g++) b[g] = (uint32_t)(g + i);
            ps->arr[i] = b;
        }
        for (unsigned i = 0; i < n; i++) {
            uint32_t *b = ps->arr[i];
            if (b[0] != i || b[words - 1] != (uint32_t)(words - 1 + i))
                bench_check_failed("block %u of a step of %u (%zu bytes) changed while live", i, n, ps->size);
            free(b);
        }
        ps->pairs += n;
    }
}

static void run_all_counts(pass_t *ps) {
    for (unsigned c = 0; c < N_COUNTS; c++) run_pass(ps, counts[c]);
}

static void *thread_main(void *arg) {
    run_all_counts(arg);
    return NULL;
}

static void usage(void) {
    printf("usage: glibc_simple [--size B] [--iters N] [--seed S]\n"
           "  glibc's bench-malloc-simple: for blocks of B, 2B and 4B bytes and steps of\n"
           "  25, 100, 400 and 1600 blocks, malloc a step's blocks, write them, free them\n"
           "  in order, about N pairs a pass; a warm-up pass, one in the main thread, one\n"
           "  in a new thread, one in the main thread again.\n"
           "  Defaults (mimalloc-bench's `glibc-simple`): --size 16 --iters 2000000\n"
           "  --seed is accepted for uniformity; the benchmark is deterministic.\n"
           "  Prints: RESULT bench=glibc_simple ... wall_ms=X ns_per_pair=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t size = 16, iters = 2000000, seed = 1;
    static const struct option opts[] = {
        {"size", 1, 0, 'b'}, {"iters", 1, 0, 'i'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': size = bench_arg_size(prog, "--size", optarg, 4, 1u << 20); break;
        case 'i': iters = bench_arg_size(prog, "--iters", optarg, MAX_BLOCKS, 1ull << 40); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    (void)seed;
    uint32_t **arr = bench_scratch_alloc(MAX_BLOCKS * sizeof *arr);
    uint64_t pairs = 0, want = 0;
    uint64_t t0 = bench_now_ns();
    for (unsigned k = 0; k < 3; k++) {
        pass_t ps = {.size = (size_t)size << k, .iters = iters, .arr = arr};
        for (unsigned c = 0; c < N_COUNTS; c++) want += 4 * (iters / counts[c]) * counts[c];
        run_all_counts(&ps);   /* the warm-up */
        run_all_counts(&ps);   /* the main thread, single-threaded */
        pthread_t t;
        if (pthread_create(&t, NULL, thread_main, &ps)) { perror("pthread_create"); return 1; }
        pthread_join(t, NULL);
        run_all_counts(&ps);   /* the main thread, after a thread */
        pairs += ps.pairs;
    }
    uint64_t wall_ns = bench_now_ns() - t0;
    if (pairs != want)
        bench_check_failed("%llu malloc/free pairs made, %llu expected", (unsigned long long)pairs,
                           (unsigned long long)want);
    bench_result("glibc_simple", "size=%llu iters=%llu pairs=%llu wall_ms=%.3f ns_per_pair=%.3f check=ok",
                 (unsigned long long)size, (unsigned long long)iters, (unsigned long long)pairs,
                 (double)wall_ns / 1e6, (double)wall_ns / (double)pairs);
    return 0;
}
