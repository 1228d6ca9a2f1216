/* alloc_test.c: OLogN's allocator tester ("alloc-test" in mimalloc-bench,
 * run there as `alloc-test 1` and `alloc-test T`): each of T threads owns
 * 2^18 / T slots and makes --iters random operations on them.
 *
 * A thread first fills about half of its slots (each slot with 50%).
 * Then, --iters times, it picks a slot with an 80/20 Pareto law over 7
 * bands (a few slots are very hot, most are cold); an empty slot gets a
 * new block, a full one is read completely and freed. Sizes follow the
 * original's "stats-adjusted" law up to 2^--max-exp bytes (1 KiB): the band
 * (2^k, 2^(k+1)] for k = 2..9 has probability 2^-(k-1), so half the blocks
 * are 5..8 bytes. Every new block is memset completely with its size's low
 * byte (the original's "full" memory access). At the end every block is read
 * and freed. The original has no realloc; neither has this.
 *
 * Self-check: the words read before a free must add up to what the memset
 * wrote (a full-content check at no extra memory traffic); the operations
 * of every thread must add up to --iters.
 * Result: RESULT bench=alloc_test threads=T slots=N iters=N wall_ms=X
 *   ns_per_op=X check=ok (ns_per_op = wall time / operations of one thread,
 *   so it compares across thread counts like the original's ms per million). */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

typedef struct {
    unsigned char *ptr;
    uint32_t size;
} slot_t;

typedef struct {
    BENCH_THREAD_RECORD int id;   /* the record starts on its own lines */
    uint64_t n_slots, iters, max_exp, seed, ops;
    pthread_barrier_t *start;
} worker_t;

static const char *prog = "alloc_test";
static const double pareto[7] = {0.262144, 0.393216, 0.245760, 0.081920, 0.015360, 0.001536, 0.000064};

/* A size in (2^k, 2^(k+1)], band k = 2 + (trailing zeros of a random
 * number in [1, 2^(max_exp-3)]), so each band is half as likely as the
 * one below. */
static size_t pick_size(bench_rng_t *r, uint64_t max_exp) {
    uint64_t x = bench_rng_next(r), bits = max_exp - 3;
    uint64_t base = (x & ((1ull << bits) - 1)) + 1;
    x >>= bits;
    unsigned k = (unsigned)__builtin_ctzll(base) + 2;
    return (size_t)((x & ((1ull << k) - 1)) + 1 + (1ull << k));
}

/* Band b of the Pareto law: probability pareto[b], covering a share
 * pareto[6 - b] of the slots (the likeliest bands cover the fewest). */
typedef struct { uint64_t cut[6]; uint64_t off[8]; } pareto_t;

static void pareto_init(pareto_t *p, uint64_t n) {
    double acc = 0;
    for (int b = 0; b < 6; b++) { acc += pareto[b]; p->cut[b] = (uint64_t)(acc * 4294967296.0); }
    p->off[0] = 0;
    for (int b = 0; b < 6; b++) p->off[b + 1] = p->off[b] + (uint64_t)((double)n * pareto[6 - b]);
    p->off[7] = n;
}

static uint64_t pareto_pick(const pareto_t *p, bench_rng_t *r) {
    uint64_t x = bench_rng_next(r), u = x >> 32;
    int b = 0;
    while (b < 6 && u >= p->cut[b]) b++;
    uint64_t range = p->off[b + 1] - p->off[b];
    return p->off[b] + (range ? (x & 0xffffffffu) % range : 0);
}

static void fill(slot_t *s, size_t size) {
    s->ptr = bench_xmalloc(size);
    s->size = (uint32_t)size;
    memset(s->ptr, (unsigned char)size, size);
}

static void release(slot_t *s, int id) {
    uint64_t sum = 0, n_words = s->size / 8, tail = s->size % 8, b = (unsigned char)s->size;
    const unsigned char *p = s->ptr;
    for (uint64_t i = 0; i < n_words; i++) { uint64_t w; memcpy(&w, p + 8 * i, 8); sum += w; }
    for (uint64_t i = 0; i < tail; i++) sum += p[8 * n_words + i];
    if (sum != n_words * (b * 0x0101010101010101ull) + tail * b)
        bench_check_failed("thread %d: block of %u bytes at %p was overwritten", id, s->size, (void *)s->ptr);
    free(s->ptr);
    s->ptr = NULL;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    bench_rng_t rng;
    bench_rng_seed(&rng, w->seed + (uint64_t)w->id * 7919);
    pareto_t par;
    pareto_init(&par, w->n_slots);
    if (w->start) pthread_barrier_wait(w->start);
    slot_t *slot = bench_xmalloc(w->n_slots * sizeof *slot);   /* from the allocator, as in the original */
    memset(slot, 0, w->n_slots * sizeof *slot);
    for (uint64_t i = 0; i < w->n_slots; i++)
        if (bench_rng_next(&rng) & 1) fill(&slot[i], pick_size(&rng, w->max_exp));
    for (uint64_t k = 0; k < w->iters; k++) {
        slot_t *s = &slot[pareto_pick(&par, &rng)];
        if (s->ptr) release(s, w->id);
        else fill(s, pick_size(&rng, w->max_exp));
        w->ops++;
    }
    for (uint64_t i = 0; i < w->n_slots; i++)
        if (slot[i].ptr) release(&slot[i], w->id);
    free(slot);
    return NULL;
}

static void usage(void) {
    printf("usage: alloc_test [--threads T] [--iters N] [--slots N] [--max-exp E] [--seed S]\n"
           "  OLogN's allocator tester: T threads, each N/T slots picked by an 80/20 Pareto law,\n"
           "  blocks up to 2^E bytes (small ones likeliest), memset on malloc, read before free.\n"
           "  Defaults (mimalloc-bench's `alloc-test T`): --threads 1 --iters 100M (per thread)\n"
           "    --slots 256K (in all) --max-exp 10 --seed 41\n"
           "  Prints: RESULT bench=alloc_test ... ns_per_op=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 1, iters = 100000000, slots = 1u << 18, max_exp = 10, seed = 41;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"iters", 1, 0, 'i'}, {"slots", 1, 0, 'n'}, {"max-exp", 1, 0, 'e'},
        {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 64); break;
        case 'i': iters = bench_arg_size(prog, "--iters", optarg, 1, 1ull << 40); break;
        case 'n': slots = bench_arg_size(prog, "--slots", optarg, 64, 1u << 28); break;
        case 'e': max_exp = bench_arg_size(prog, "--max-exp", optarg, 4, 30); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (slots / threads < 64) bench_usage_error(prog, "--slots must give each thread 64 slots or more");
    worker_t *w = bench_scratch_alloc(sizeof *w * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)threads + 1);
    for (uint64_t i = 0; i < threads; i++) {
        w[i] = (worker_t){.id = (int)i, .n_slots = slots / threads, .iters = iters, .max_exp = max_exp,
                          .seed = seed, .start = &start};
        if (pthread_create(&tid[i], NULL, worker_main, &w[i])) { perror("pthread_create"); return 1; }
    }
    pthread_barrier_wait(&start);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    uint64_t wall_ns = bench_now_ns() - t0, ops = 0;
    for (uint64_t i = 0; i < threads; i++) ops += w[i].ops;
    if (ops != iters * threads)
        bench_check_failed("%llu operations, expected %llu", (unsigned long long)ops, (unsigned long long)(iters * threads));
    bench_result("alloc_test", "threads=%llu slots=%llu iters=%llu max_exp=%llu wall_ms=%.3f ns_per_op=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)slots, (unsigned long long)iters,
                 (unsigned long long)max_exp, (double)wall_ns / 1e6, (double)wall_ns / (double)iters);
    return 0;
}
