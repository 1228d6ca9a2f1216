/* mleak.c: mimalloc-bench's mleak (Daan Leijen): threads that each leave
 * one small long-lived block behind and exit. --rounds times, 10 threads
 * start; each callocs a block of 16 words (128 bytes), swaps it into a
 * random slot of a shared array of 1000, frees the block it took out,
 * and exits; at the end the main thread frees what the slots hold. An
 * allocator that keeps each dead thread's memory, or a heap a thread,
 * grows with every round ("leaks"); max RSS shows it. mimalloc-bench runs
 * `mleak 5` (mleak10: 500 rounds) and `mleak 50` (mleak100: 5000 rounds).
 *
 * Self-check: a new block must be zero (calloc); word 0 then holds a stamp
 * of its round and thread, word 1 its complement, and when a block is freed
 * both must still match and words 2..15 still be 0; blocks made = blocks
 * freed.
 * Result: RESULT bench=mleak threads=T rounds=N slots=N blocks=N wall_ms=X
 *   us_per_thread=X check=ok */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench_common.h"

#define BLOCK_WORDS 16

typedef struct {
    uint64_t round, id;
} job_t;

static const char *prog = "mleak";
static uint64_t n_slots, seed;
static _Atomic(uint64_t *) *slots;
static atomic_ullong n_made, n_freed;

static void check_and_free(uint64_t *b) {
    if (!b) return;
    if (b[1] != ~b[0]) bench_check_failed("block %p: its stamp changed (%llx, %llx)", (void *)b,
                                          (unsigned long long)b[0], (unsigned long long)b[1]);
    for (int k = 2; k < BLOCK_WORDS; k++)
        if (b[k]) bench_check_failed("block %p: word %d changed while it was live", (void *)b, k);
    free(b);
    atomic_fetch_add_explicit(&n_freed, 1, memory_order_relaxed);
}

static void *leak_main(void *arg) {
    const job_t *j = arg;
    uint64_t *b = calloc(BLOCK_WORDS, sizeof *b);
    if (!b) { fprintf(stderr, "calloc returned NULL\n"); exit(4); }
    for (int k = 0; k < BLOCK_WORDS; k++)
        if (b[k]) bench_check_failed("calloc gave a block whose word %d is not 0", k);
    atomic_fetch_add_explicit(&n_made, 1, memory_order_relaxed);
    b[0] = bench_mix64((j->round << 16) ^ j->id ^ (seed << 40)) | 1;
    b[1] = ~b[0];
    bench_rng_t r;
    bench_rng_seed(&r, seed * 1000003 + j->round * 64 + j->id);
    uint64_t *old = atomic_exchange(&slots[bench_rng_below(&r, n_slots)], b);
    check_and_free(old);
    return NULL;
}

static void usage(void) {
    printf("usage: mleak [--threads T] [--rounds N] [--slots N] [--seed S]\n"
           "  mimalloc-bench's mleak: N times, T threads each calloc a 128-byte block, swap it\n"
           "  into a random one of the shared slots, free the block taken out, and exit.\n"
           "  Defaults (mimalloc-bench's `mleak 5`, mleak10): --threads 10 --rounds 500 --slots 1000\n"
           "  (`mleak 50`, mleak100: --rounds 5000)\n"
           "  Prints: RESULT bench=mleak ... wall_ms=X us_per_thread=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 10, rounds = 500;
    n_slots = 1000;
    seed = 0;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"rounds", 1, 0, 'r'}, {"slots", 1, 0, 'n'}, {"seed", 1, 0, 's'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 1024); break;
        case 'r': rounds = bench_arg_size(prog, "--rounds", optarg, 1, 1u << 24); break;
        case 'n': n_slots = bench_arg_size(prog, "--slots", optarg, 1, 1u << 24); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    slots = bench_scratch_alloc(sizeof *slots * n_slots);   /* zero: every slot empty */
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    job_t *jobs = bench_scratch_alloc(sizeof *jobs * threads);
    uint64_t t0 = bench_now_ns();
    for (uint64_t n = 0; n < rounds; n++) {
        for (uint64_t i = 0; i < threads; i++) {
            jobs[i] = (job_t){.round = n, .id = i};
            if (pthread_create(&tid[i], NULL, leak_main, &jobs[i])) { perror("pthread_create"); return 1; }
        }
        for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    }
    for (uint64_t i = 0; i < n_slots; i++) check_and_free(atomic_exchange(&slots[i], NULL));
    uint64_t wall_ns = bench_now_ns() - t0;
    uint64_t made = atomic_load(&n_made), freed = atomic_load(&n_freed);
    if (made != threads * rounds || freed != made)
        bench_check_failed("%llu blocks made (%llu expected), %llu freed", (unsigned long long)made,
                           (unsigned long long)(threads * rounds), (unsigned long long)freed);
    bench_result("mleak", "threads=%llu rounds=%llu slots=%llu blocks=%llu wall_ms=%.3f us_per_thread=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)rounds, (unsigned long long)n_slots,
                 (unsigned long long)made, (double)wall_ns / 1e6, (double)wall_ns / 1e3 / (double)made);
    return 0;
}
