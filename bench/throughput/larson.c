/* larson.c: Larson and Krishnan's server benchmark, as mimalloc-bench runs
 * it (`larson 5 8 1000 5000 100 4141 T`: 5 seconds, sizes 8..1000 bytes,
 * 5000 blocks per thread, 100 rounds, seed 4141, T threads).
 *
 * The main thread first allocates T * --blocks blocks (sizes uniform in
 * [--min, --max)), shuffles them and replaces 4 * T * --blocks random ones
 * (the warm-up), then hands slice i to lane i. A lane's thread replaces a
 * random block of its slice (free, malloc a new size, write it)
 * --rounds * --blocks times; then it starts a new thread for its lane and
 * exits, so the next thread frees the blocks the previous one allocated
 * (the "hand-over": threads come and go with their live blocks, as in a
 * server whose connections move between threads). After --seconds the
 * main thread stops the lanes; the result is replacements per second.
 * As in the original, finished threads are never joined, so their stacks
 * stay mapped and each new thread gets a fresh one (--detach detaches
 * them instead); unlike it, a stop that races with a hand-over cannot hang.
 *
 * Self-check: every block carries a stamp that is checked before it is
 * freed; at the end every live block is checked again and freed, and the
 * replacements counted by the lanes must equal frees and mallocs.
 * Result: RESULT bench=larson threads=T blocks=N min=B max=B rounds=R
 *   seconds=S ops=N threads_made=N mops=X ns_per_op=X check=ok
 * ns_per_op is wall time / replacements: mimalloc-bench's "relative time"
 * (1e9 / throughput). */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "bench_common.h"
#include "bench_stamp.h"

typedef struct {
    BENCH_THREAD_RECORD int lane;   /* the record starts on its own lines */
    void **blk;
    size_t *size;
    uint64_t *tag;
    uint64_t n_slots, min_b, max_b, per_thread;
    uint64_t allocs, frees, threads;   /* written only by the lane's current thread */
    atomic_int done;                   /* 1 when the lane stopped for good */
    bench_rng_t rng;
} lane_t;

static const char *prog = "larson";
static atomic_int stop_flag;
static int detach;

static size_t pick_size(bench_rng_t *r, uint64_t min_b, uint64_t max_b) {
    return (size_t)(max_b == min_b ? min_b : min_b + bench_rng_below(r, max_b - min_b));
}

static void new_block(void **blk, size_t *size, uint64_t *tag, bench_rng_t *r, uint64_t min_b, uint64_t max_b) {
    *size = pick_size(r, min_b, max_b);
    *tag = bench_rng_next(r);
    *blk = bench_xmalloc(*size);
    bench_stamp(*blk, *size, *tag);
}

static void check_block(void *blk, size_t size, uint64_t tag, int lane) {
    if (!bench_stamp_ok(blk, size, tag))
        bench_check_failed("lane %d: block of %zu bytes at %p was overwritten", lane, size, blk);
}

static void *lane_main(void *arg);

static void start_lane_thread(lane_t *l) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (detach) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, lane_main, l)) { perror("pthread_create"); exit(1); }
    pthread_attr_destroy(&attr);
}

static void *lane_main(void *arg) {
    lane_t *l = arg;
    l->threads++;
    for (uint64_t i = 0; i < l->per_thread; i++) {
        uint64_t j = bench_rng_below(&l->rng, l->n_slots);
        check_block(l->blk[j], l->size[j], l->tag[j], l->lane);
        free(l->blk[j]);
        l->frees++;
        new_block(&l->blk[j], &l->size[j], &l->tag[j], &l->rng, l->min_b, l->max_b);
        l->allocs++;
        if (atomic_load_explicit(&stop_flag, memory_order_relaxed)) break;
    }
    if (atomic_load(&stop_flag)) atomic_store(&l->done, 1);
    else start_lane_thread(l);   /* the hand-over: a new thread takes the lane */
    return NULL;
}

static void usage(void) {
    printf("usage: larson [--threads T] [--seconds S] [--min BYTES] [--max BYTES] [--blocks N]\n"
           "              [--rounds R] [--detach] [--seed S]\n"
           "  Larson's server benchmark: T lanes of N live blocks; a lane's thread replaces\n"
           "  R*N random blocks, then a new thread takes the lane over (frees the previous\n"
           "  thread's blocks); runs for S seconds (fractions allowed). Finished threads are\n"
           "  never joined, as in the original (--detach: detached).\n"
           "  Defaults (mimalloc-bench's `larson 5 8 1000 5000 100 4141 T`):\n"
           "    --threads 2 --seconds 5 --min 8 --max 1000 --blocks 5000 --rounds 100 --seed 4141\n"
           "  Prints: RESULT bench=larson ... mops=X ns_per_op=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 2, slots = 5000, min_b = 8, max_b = 1000, rounds = 100, seed = 4141;
    double seconds = 5.0;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"blocks", 1, 0, 'n'}, {"min", 1, 0, 'a'}, {"max", 1, 0, 'b'},
        {"rounds", 1, 0, 'r'}, {"seconds", 1, 0, 'S'}, {"detach", 0, 0, 'd'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'n': slots = bench_arg_size(prog, "--blocks", optarg, 1, 10000000); break;
        case 'a': min_b = bench_arg_size(prog, "--min", optarg, 1, 1ull << 30); break;
        case 'b': max_b = bench_arg_size(prog, "--max", optarg, 1, 1ull << 30); break;
        case 'r': rounds = bench_arg_size(prog, "--rounds", optarg, 1, 1ull << 30); break;
        case 'd': detach = 1; break;
        case 'S': seconds = bench_arg_seconds(prog, "--seconds", optarg); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (min_b > max_b) bench_usage_error(prog, "--min is larger than --max");

    /* Warm-up by the main thread: allocate, shuffle, churn. */
    uint64_t n = threads * slots;
    void **blk = bench_scratch_alloc(sizeof *blk * n);
    size_t *size = bench_scratch_alloc(sizeof *size * n);
    uint64_t *tag = bench_scratch_alloc(sizeof *tag * n);
    bench_rng_t rng;
    bench_rng_seed(&rng, seed);
    for (uint64_t i = 0; i < n; i++) new_block(&blk[i], &size[i], &tag[i], &rng, min_b, max_b);
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = bench_rng_below(&rng, i);
        void *b = blk[j]; blk[j] = blk[i - 1]; blk[i - 1] = b;
        size_t s = size[j]; size[j] = size[i - 1]; size[i - 1] = s;
        uint64_t t = tag[j]; tag[j] = tag[i - 1]; tag[i - 1] = t;
    }
    for (uint64_t k = 0; k < 4 * n; k++) {
        uint64_t j = bench_rng_below(&rng, n);
        check_block(blk[j], size[j], tag[j], -1);
        free(blk[j]);
        new_block(&blk[j], &size[j], &tag[j], &rng, min_b, max_b);
    }

    lane_t *lanes = bench_scratch_alloc(sizeof *lanes * threads);
    for (uint64_t i = 0; i < threads; i++) {
        lane_t *l = &lanes[i];
        l->lane = (int)i;
        l->blk = blk + i * slots;
        l->size = size + i * slots;
        l->tag = tag + i * slots;
        l->n_slots = slots;
        l->min_b = min_b;
        l->max_b = max_b;
        l->per_thread = rounds * slots;
        bench_rng_seed(&l->rng, bench_rng_next(&rng));
    }
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < threads; i++) start_lane_thread(&lanes[i]);
    bench_sleep_s(seconds);
    atomic_store(&stop_flag, 1);
    for (uint64_t i = 0; i < threads; i++)
        while (!atomic_load(&lanes[i].done)) usleep(100);
    uint64_t wall_ns = bench_now_ns() - t0;

    uint64_t ops = 0, frees = 0, made = 0;
    for (uint64_t i = 0; i < threads; i++) {
        ops += lanes[i].allocs;
        frees += lanes[i].frees;
        made += lanes[i].threads;
    }
    for (uint64_t i = 0; i < n; i++) { check_block(blk[i], size[i], tag[i], (int)(i / slots)); free(blk[i]); }
    if (ops != frees || ops == 0)
        bench_check_failed("%llu mallocs but %llu frees", (unsigned long long)ops, (unsigned long long)frees);
    bench_result("larson", "threads=%llu blocks=%llu min=%llu max=%llu rounds=%llu seconds=%.3f ops=%llu "
                 "threads_made=%llu mops=%.3f ns_per_op=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)slots, (unsigned long long)min_b,
                 (unsigned long long)max_b, (unsigned long long)rounds, seconds, (unsigned long long)ops,
                 (unsigned long long)made, (double)ops * 1e3 / (double)wall_ns, (double)wall_ns / (double)ops);
    return 0;
}
