/* mstress.c: mimalloc's stress test (test/test-stress.c, "mstress" in
 * mimalloc-bench, run there as `mstress T 50 25`: T threads, scale 50, 25
 * iterations). It churns threads: each iteration starts T threads, which
 * allocate, free, keep and trade blocks, then exit; the next iteration
 * starts T new ones, with half of the traded blocks surviving in between.
 *
 * Thread t makes 100 * --scale * (t % 8 + 1) allocations. Each step
 * (while allocations or retained blocks are left): with 50% (or when the
 * retained quota is used up) it mallocs a block of 1, 2, 4, 8 or 16 words
 * into its data array (which grows by realloc in steps of 100000
 * pointers), else a retained block of 1..64 words (kept to the thread's
 * end); 1% of blocks are 100x larger, of those 10% another 10x, and 1% of
 * those 100x (up to about 5 MiB). With 66% it frees a random data block;
 * with 25% it swaps a random data block with a random slot of a shared
 * transfer array of 1000 (atomic exchange), so blocks move between threads
 * and outlive the thread that made them. After each iteration the main
 * thread frees each transfer slot with 50% (all after the last).
 *
 * This follows mimalloc-bench's bench/mstress/mstress.c (malloc, large
 * objects allowed); the random generator is ours (splitmix64), seeded from
 * (thread + 1) * 43 + --seed.
 *
 * Self-check: every word i of a block of n words holds (n - i) ^ cookie;
 * it is checked when the block is freed, as in the original. The number of
 * blocks freed must equal the number allocated.
 * Result: RESULT bench=mstress threads=T scale=N iters=N blocks=N
 *   wall_ms=X ns_per_block=X check=ok */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

#define TRANSFERS 1000
static const uint64_t cookie = 0xbf58476d1ce4e5b9ull;
static _Atomic(uint64_t *) transfer[TRANSFERS];
static atomic_ullong n_alloc, n_freed;
static uint64_t scale, seed;
static const char *prog = "mstress";

typedef bench_rng_t mrng_t;

static inline uint64_t pick(mrng_t *r) { return bench_rng_next(r); }
static inline int chance(uint64_t perc, mrng_t *r) { return pick(r) % 100 <= perc; }

static uint64_t *alloc_items(uint64_t items, mrng_t *r) {
    if (chance(1, r)) {
        if (chance(1, r)) items *= 10000;
        else if (chance(10, r)) items *= 1000;
        else items *= 100;
    }
    if (items == 40) items++;
    uint64_t *p = malloc(items * sizeof(uint64_t));
    if (!p) { fprintf(stderr, "malloc(%llu words) failed\n", (unsigned long long)items); exit(4); }
    for (uint64_t i = 0; i < items; i++) p[i] = (items - i) ^ cookie;
    return p;
}

static void free_items(uint64_t *p, uint64_t *freed) {
    if (!p) return;
    uint64_t items = p[0] ^ cookie;
    if (items == 0 || items > (1ull << 28)) bench_check_failed("block %p: size word overwritten", (void *)p);
    for (uint64_t i = 0; i < items; i++)
        if ((p[i] ^ cookie) != items - i)
            bench_check_failed("block %p of %llu words: word %llu overwritten", (void *)p, (unsigned long long)items,
                               (unsigned long long)i);
    free(p);
    (*freed)++;
}

static void *stress_main(void *arg) {
    uint64_t tid = (uint64_t)(uintptr_t)arg;
    mrng_t r;
    bench_rng_seed(&r, (tid + 1) * 43 + seed);
    uint64_t allocs = 100 * scale * (tid % 8 + 1), retain = allocs / 2, made = 0, freed = 0;
    uint64_t **data = NULL, data_size = 0, data_top = 0, retain_top = 0;
    uint64_t **retained = malloc((retain ? retain : 1) * sizeof *retained);
    if (!retained) exit(4);
    while (allocs > 0 || retain > 0) {
        if (retain == 0 || (chance(50, &r) && allocs > 0)) {
            allocs--;
            if (data_top >= data_size) {
                data_size += 100000;
                data = realloc(data, data_size * sizeof *data);
                if (!data) exit(4);
            }
            data[data_top++] = alloc_items(1ull << (pick(&r) % 5), &r);
        } else {
            retained[retain_top++] = alloc_items(1ull << (pick(&r) % 7), &r);
            retain--;
        }
        made++;
        if (chance(66, &r) && data_top > 0) {
            uint64_t idx = pick(&r) % data_top;
            free_items(data[idx], &freed);
            data[idx] = NULL;
        }
        if (chance(25, &r) && data_top > 0) {
            uint64_t di = pick(&r) % data_top, ti = pick(&r) % TRANSFERS;
            data[di] = atomic_exchange(&transfer[ti], data[di]);
        }
    }
    for (uint64_t i = 0; i < retain_top; i++) free_items(retained[i], &freed);
    for (uint64_t i = 0; i < data_top; i++) free_items(data[i], &freed);
    free(retained);
    free(data);
    atomic_fetch_add(&n_alloc, made);
    atomic_fetch_add(&n_freed, freed);
    return NULL;
}

static void usage(void) {
    printf("usage: mstress [--threads T] [--scale N] [--iters N] [--seed S]\n"
           "  mimalloc's test-stress: --iters times, T threads allocate, free and trade blocks\n"
           "  through a shared transfer array, then exit; new threads start.\n"
           "  Defaults (mimalloc-bench's `mstress T 50 25`): --threads 2 --scale 50 --iters 25 --seed 0\n"
           "  Prints: RESULT bench=mstress ... wall_ms=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 2, iters = 25;
    scale = 50;
    seed = 0;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"scale", 1, 0, 'n'}, {"iters", 1, 0, 'i'}, {"seed", 1, 0, 's'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'n': scale = bench_arg_size(prog, "--scale", optarg, 1, 1u << 20); break;
        case 'i': iters = bench_arg_size(prog, "--iters", optarg, 1, 1u << 20); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    mrng_t r;
    bench_rng_seed(&r, 43 * 43 + seed);
    uint64_t main_freed = 0;
    uint64_t t0 = bench_now_ns();
    for (uint64_t n = 0; n < iters; n++) {
        for (uint64_t i = 0; i < threads; i++)
            if (pthread_create(&tid[i], NULL, stress_main, (void *)(uintptr_t)i)) { perror("pthread_create"); return 1; }
        for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
        for (int i = 0; i < TRANSFERS; i++)
            if (chance(50, &r) || n + 1 == iters) free_items(atomic_exchange(&transfer[i], NULL), &main_freed);
    }
    uint64_t wall_ns = bench_now_ns() - t0;
    uint64_t made = atomic_load(&n_alloc), freed = atomic_load(&n_freed) + main_freed;
    if (made != freed)
        bench_check_failed("%llu blocks allocated, %llu freed", (unsigned long long)made, (unsigned long long)freed);
    bench_result("mstress", "threads=%llu scale=%llu iters=%llu blocks=%llu wall_ms=%.3f ns_per_block=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)scale, (unsigned long long)iters,
                 (unsigned long long)made, (double)wall_ns / 1e6, (double)wall_ns / (double)made);
    return 0;
}
