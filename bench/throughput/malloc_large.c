/* malloc_large.c: mimalloc-bench's malloc-large (by Danila Kutenin): one
 * thread, 5000 times, allocates a block of 2 MiB, writes every byte of it
 * and frees it. An allocator that gives such a block back to the system
 * at once and maps it again pays 512 page faults (or a 2 MiB one) and the
 * zeroing each time; one that keeps the block for the next request pays
 * only the writes.
 *
 * Self-check: after the writes, one byte in every 4 KiB page and the last
 * byte of the block must hold the value written in that iteration (the
 * iteration number's low byte, plus one so it is never 0); each block must
 * start 16-byte aligned; blocks made = blocks freed.
 * Result: RESULT bench=malloc_large threads=T size=B iters=N wall_ms=X
 *   us_per_block=X check=ok (us_per_block = wall time / blocks of one
 *   thread). */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

typedef struct {
    BENCH_THREAD_RECORD int id;   /* the record starts on its own lines */
    uint64_t size, iters, made;
} worker_t;

static const char *prog = "malloc_large";

static void *worker_main(void *arg) {
    worker_t *w = arg;
    for (uint64_t i = 0; i < w->iters; i++) {
        unsigned char *p = bench_xmalloc(w->size);
        if ((uintptr_t)p & 15) bench_check_failed("block %p of %llu bytes is not 16-byte aligned", (void *)p,
                                                  (unsigned long long)w->size);
        unsigned char v = (unsigned char)(i % 255 + 1);
        memset(p, v, w->size);   /* the original's byte loop, which the compiler makes a memset */
        for (uint64_t k = 0; k < w->size; k += 4096)
            if (p[k] != v) bench_check_failed("thread %d: byte %llu of block %llu changed", w->id,
                                              (unsigned long long)k, (unsigned long long)i);
        if (p[w->size - 1] != v) bench_check_failed("thread %d: the last byte of block %llu changed", w->id,
                                                    (unsigned long long)i);
        free(p);
        w->made++;
    }
    return NULL;
}

static void usage(void) {
    printf("usage: malloc_large [--threads T] [--size B] [--iters N] [--seed S]\n"
           "  mimalloc-bench's malloc-large: each of T threads N times mallocs B bytes,\n"
           "  writes every byte and frees the block.\n"
           "  Defaults (mimalloc-bench's `malloc-large`): --threads 1 --size 2M --iters 5000\n"
           "  --seed is accepted for uniformity; the benchmark is deterministic.\n"
           "  Prints: RESULT bench=malloc_large ... wall_ms=X us_per_block=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 1, size = 2u << 20, iters = 5000, seed = 1;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"size", 1, 0, 'b'}, {"iters", 1, 0, 'i'}, {"seed", 1, 0, 's'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'b': size = bench_arg_size(prog, "--size", optarg, 1, 1ull << 34); break;
        case 'i': iters = bench_arg_size(prog, "--iters", optarg, 1, 1ull << 32); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    (void)seed;
    worker_t *w = bench_scratch_alloc(sizeof *w * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < threads; i++) {
        w[i] = (worker_t){.id = (int)i, .size = size, .iters = iters};
        if (pthread_create(&tid[i], NULL, worker_main, &w[i])) { perror("pthread_create"); return 1; }
    }
    for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    uint64_t wall_ns = bench_now_ns() - t0, made = 0;
    for (uint64_t i = 0; i < threads; i++) made += w[i].made;
    if (made != threads * iters)
        bench_check_failed("%llu blocks made, %llu expected", (unsigned long long)made,
                           (unsigned long long)(threads * iters));
    bench_result("malloc_large", "threads=%llu size=%llu iters=%llu wall_ms=%.3f us_per_block=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)size, (unsigned long long)iters,
                 (double)wall_ns / 1e6, (double)wall_ns / 1e3 / (double)iters);
    return 0;
}
