/* glibc_bench.c: glibc's benchtests/bench-malloc-thread, as mimalloc-bench
 * runs it ("glibc-thread": `glibc-thread T`, 2 seconds). Each of T threads
 * keeps a working set of --blocks (1024) slots, all empty at the start, and
 * until the time is up repeatedly takes the next slot from a fixed random
 * sequence of 4 * --blocks offsets, frees its block (free(NULL) the first
 * time), mallocs a block of the next size from a fixed random sequence of
 * 8000 sizes, and writes every byte of it. Sizes in [--min, --max]:
 * --dist invsq (the original: inverse-square law, 4..32768 bytes, mostly
 * small) or uniform. The "large" variant of issue 11 is
 * `--min 1K --max 64K --dist uniform --touch page`: medium blocks, of which
 * only one byte per 4 KiB page and the last byte are written (writing all
 * of 32 KiB on average would hide the allocator behind memory traffic).
 *
 * Self-check: each block holds byte i = (i + slot) & 255; before a block is
 * freed its first, middle and last byte are checked; at the end every block
 * is checked completely and freed.
 * Result: RESULT bench=glibc_bench threads=T min=B max=B dist=D touch=T blocks=N
 *   seconds=S iters=N mops=X ns_per_iter=X check=ok
 * ns_per_iter = wall time / iterations of all threads (mimalloc-bench's
 * time for glibc-thread is 1e9 / iterations, the same up to a constant). */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

#define N_SIZES 8000

typedef struct {
    int id;
    uint64_t n_slots, iters;
    pthread_barrier_t *start;
} worker_t;

static const char *prog = "glibc_bench";
static uint32_t size_seq[N_SIZES];
static uint32_t *offset_seq;      /* 4 * n_slots offsets */
static uint64_t n_offsets;
static atomic_int time_up;
static int touch_all = 1;         /* 0: --touch page */

static inline unsigned char pattern(size_t i, uint64_t slot) { return (unsigned char)(i + slot); }

/* Writes the block's bytes: all of them, or (--touch page) the first, one
 * per 4 KiB page and the last. */
static void touch(unsigned char *p, size_t s, uint64_t slot) {
    if (touch_all) {
        for (size_t i = 0; i < s; i++) p[i] = pattern(i, slot);
        return;
    }
    for (size_t i = 0; i < s; i += 4096) p[i] = pattern(i, slot);
    p[s - 1] = pattern(s - 1, slot);
}

static void check_block(const unsigned char *p, size_t size, uint64_t slot, int id, int full) {
    size_t probe[3] = {0, size - 1, size / 2};
    for (int k = 0; k < (touch_all ? 3 : 2); k++)
        if (p[probe[k]] != pattern(probe[k], slot))
            bench_check_failed("thread %d: block of %zu bytes at %p (slot %llu) was overwritten", id, size,
                               (const void *)p, (unsigned long long)slot);
    for (size_t i = 0; full && i < size; i += touch_all ? 1 : 4096)
        if (p[i] != pattern(i, slot)) bench_check_failed("thread %d: byte %zu of a block was overwritten", id, i);
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    unsigned char **blk = bench_scratch_alloc(w->n_slots * sizeof *blk);
    uint32_t *size = bench_scratch_alloc(w->n_slots * sizeof *size);
    uint64_t off_i = 0, size_i = 0, iters = 0;
    pthread_barrier_wait(w->start);
    while (!atomic_load_explicit(&time_up, memory_order_relaxed)) {
        off_i = off_i + 1 >= n_offsets ? 0 : off_i + 1;
        size_i = size_i + 1 >= N_SIZES ? 0 : size_i + 1;
        uint64_t slot = offset_seq[off_i];
        if (blk[slot]) check_block(blk[slot], size[slot], slot, w->id, 0);
        free(blk[slot]);
        size_t s = size_seq[size_i];
        unsigned char *p = blk[slot] = bench_xmalloc(s);
        size[slot] = (uint32_t)s;
        touch(p, s, slot);
        iters++;
    }
    for (uint64_t i = 0; i < w->n_slots; i++)
        if (blk[i]) { check_block(blk[i], size[i], i, w->id, 1); free(blk[i]); }
    w->iters = iters;
    return NULL;
}

static void usage(void) {
    printf("usage: glibc_bench [--threads T] [--seconds S] [--min BYTES] [--max BYTES]\n"
           "                   [--dist invsq|uniform] [--touch all|page] [--blocks N] [--seed S]\n"
           "  glibc's bench-malloc-thread: T threads replace random blocks of a working set\n"
           "  of N slots for S seconds, writing every byte of each new block (--touch page:\n"
           "  one byte per 4 KiB page and the last).\n"
           "  Defaults (the original): --threads 1 --seconds 2 --min 4 --max 32768 --dist invsq\n"
           "    --blocks 1024 --seed 88\n"
           "  Large variant: --min 1K --max 64K --dist uniform --touch page\n"
           "  Prints: RESULT bench=glibc_bench ... ns_per_iter=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 1, min_b = 4, max_b = 32768, slots = 1024, seed = 88;
    double seconds = 2.0;
    const char *dist = "invsq";
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"seconds", 1, 0, 'S'}, {"min", 1, 0, 'a'}, {"max", 1, 0, 'b'},
        {"dist", 1, 0, 'd'}, {"touch", 1, 0, 'T'}, {"blocks", 1, 0, 'n'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'a': min_b = bench_arg_size(prog, "--min", optarg, 1, 1u << 30); break;
        case 'b': max_b = bench_arg_size(prog, "--max", optarg, 1, 1u << 30); break;
        case 'n': slots = bench_arg_size(prog, "--blocks", optarg, 1, 1u << 24); break;
        case 'd': dist = optarg; break;
        case 'T':
            if (strcmp(optarg, "all") && strcmp(optarg, "page")) bench_usage_error(prog, "--touch all|page");
            touch_all = !strcmp(optarg, "all");
            break;
        case 'S': seconds = bench_arg_seconds(prog, "--seconds", optarg); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (min_b > max_b) bench_usage_error(prog, "--min is larger than --max");
    int invsq = !strcmp(dist, "invsq");
    if (!invsq && strcmp(dist, "uniform")) bench_usage_error(prog, "unknown --dist '%s'", dist);

    bench_rng_t rng;
    bench_rng_seed(&rng, seed);
    for (int i = 0; i < N_SIZES; i++) {
        if (invsq) {   /* inverse CDF of density ~ 1/x^2 on [min, max] */
            double u = (double)bench_rng_below(&rng, 1u << 30) / (double)(1u << 30);
            double lo = 1.0 / (double)min_b, hi = 1.0 / (double)max_b;
            size_seq[i] = (uint32_t)(1.0 / (lo - u * (lo - hi)));
            if (size_seq[i] < min_b) size_seq[i] = (uint32_t)min_b;
            if (size_seq[i] > max_b) size_seq[i] = (uint32_t)max_b;
        } else {
            size_seq[i] = (uint32_t)bench_rng_range(&rng, min_b, max_b);
        }
    }
    n_offsets = 4 * slots;
    offset_seq = bench_scratch_alloc(n_offsets * sizeof *offset_seq);
    for (uint64_t i = 0; i < n_offsets; i++) offset_seq[i] = (uint32_t)bench_rng_below(&rng, slots);

    worker_t *w = bench_scratch_alloc(sizeof *w * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++) {
        w[i] = (worker_t){.id = (int)i, .n_slots = slots, .start = &start};
        if (pthread_create(&tid[i], NULL, worker_main, &w[i])) { perror("pthread_create"); return 1; }
    }
    pthread_barrier_wait(&start);
    uint64_t t0 = bench_now_ns();
    bench_sleep_s(seconds);
    atomic_store(&time_up, 1);
    uint64_t wall_ns = bench_now_ns() - t0, iters = 0;
    for (uint64_t i = 0; i < threads; i++) { pthread_join(tid[i], NULL); iters += w[i].iters; }
    if (iters == 0) bench_check_failed("no iteration finished");
    bench_result("glibc_bench", "threads=%llu min=%llu max=%llu dist=%s touch=%s blocks=%llu seconds=%.3f iters=%llu mops=%.3f "
                 "ns_per_iter=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)min_b, (unsigned long long)max_b, dist,
                 touch_all ? "all" : "page", (unsigned long long)slots, seconds, (unsigned long long)iters, (double)iters * 1e3 / (double)wall_ns,
                 (double)wall_ns / (double)iters);
    return 0;
}
