/* larson.c: Larson and Krishnan's server-churn benchmark. --threads lanes
 * each own --slots live blocks with sizes uniform in [--min, --max]. A
 * worker thread of a lane replaces random slots (check, free, malloc a new
 * size, stamp) --rounds times, then ends; the lane's next generation is a
 * new thread that frees what the previous one allocated. So blocks are
 * freed by a different thread from the one that allocated them, as in a
 * server whose connections move between threads. The main thread fills the
 * slots first, so the first generation frees the main thread's blocks.
 *
 * Self-check: every block's stamp is checked before it is freed, and the
 * number of replacements must equal threads * generations * rounds.
 * Result: RESULT bench=larson threads=T slots=N min=B max=B rounds=R
 *         generations=G ops=N mops=X ns_per_op=X check=ok
 * mops is replacements (one free + one malloc) per wall-clock microsecond;
 * ns_per_op is wall time * threads / ops. */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench_common.h"
#include "bench_stamp.h"

typedef struct {
    int lane;
    void **blk;
    size_t *size;
    uint64_t *tag;
    uint64_t n_slots, min_b, max_b, rounds, ops;
    bench_rng_t rng;
} lane_t;

static const char *prog = "larson";

static void fill_slot(lane_t *l, uint64_t j) {
    l->size[j] = (size_t)bench_rng_range(&l->rng, l->min_b, l->max_b);
    l->tag[j] = bench_rng_next(&l->rng);
    l->blk[j] = bench_xmalloc(l->size[j]);
    bench_stamp(l->blk[j], l->size[j], l->tag[j]);
}

static void check_slot(const lane_t *l, uint64_t j) {
    if (!bench_stamp_ok(l->blk[j], l->size[j], l->tag[j]))
        bench_check_failed("lane %d slot %llu: block of %zu bytes at %p was overwritten", l->lane,
                           (unsigned long long)j, l->size[j], l->blk[j]);
}

static void *generation_main(void *arg) {
    lane_t *l = arg;
    for (uint64_t r = 0; r < l->rounds; r++) {
        uint64_t j = bench_rng_below(&l->rng, l->n_slots);
        check_slot(l, j);
        free(l->blk[j]);
        fill_slot(l, j);
        l->ops++;
    }
    return NULL;
}

static void usage(void) {
    printf("usage: larson [--threads T] [--slots N] [--min BYTES] [--max BYTES] [--rounds R]\n"
           "              [--generations G] [--seed S]\n"
           "  Server churn: T lanes of N live blocks; each generation's thread replaces R random\n"
           "  blocks, then a new thread takes the lane over (cross-thread frees).\n"
           "  Defaults: --threads 2 --slots 2000 --min 16 --max 512 --rounds 200000\n"
           "            --generations 10 --seed 1\n"
           "  Prints: RESULT bench=larson ... mops=X ns_per_op=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 2, slots = 2000, min_b = 16, max_b = 512, rounds = 200000, gens = 10, seed = 1;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"slots", 1, 0, 'n'}, {"min", 1, 0, 'a'}, {"max", 1, 0, 'b'},
        {"rounds", 1, 0, 'r'}, {"generations", 1, 0, 'g'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'},
        {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'n': slots = bench_arg_size(prog, "--slots", optarg, 1, 100000000); break;
        case 'a': min_b = bench_arg_size(prog, "--min", optarg, 1, 1ull << 30); break;
        case 'b': max_b = bench_arg_size(prog, "--max", optarg, 1, 1ull << 30); break;
        case 'r': rounds = bench_arg_size(prog, "--rounds", optarg, 1, 1ull << 40); break;
        case 'g': gens = bench_arg_size(prog, "--generations", optarg, 1, 100000); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (min_b > max_b) bench_usage_error(prog, "--min is larger than --max");

    lane_t *lanes = bench_scratch_alloc(sizeof *lanes * threads);
    for (uint64_t i = 0; i < threads; i++) {
        lane_t *l = &lanes[i];
        *l = (lane_t){.lane = (int)i, .n_slots = slots, .min_b = min_b, .max_b = max_b, .rounds = rounds};
        l->blk = bench_scratch_alloc(sizeof *l->blk * slots);
        l->size = bench_scratch_alloc(sizeof *l->size * slots);
        l->tag = bench_scratch_alloc(sizeof *l->tag * slots);
        bench_rng_seed(&l->rng, seed * 31 + i);
        for (uint64_t j = 0; j < slots; j++) fill_slot(l, j);
    }
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    uint64_t t0 = bench_now_ns();
    for (uint64_t g = 0; g < gens; g++) {
        for (uint64_t i = 0; i < threads; i++)
            if (pthread_create(&tid[i], NULL, generation_main, &lanes[i])) { perror("pthread_create"); return 1; }
        for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    }
    uint64_t wall_ns = bench_now_ns() - t0, ops = 0;
    for (uint64_t i = 0; i < threads; i++) {
        lane_t *l = &lanes[i];
        ops += l->ops;
        for (uint64_t j = 0; j < slots; j++) { check_slot(l, j); free(l->blk[j]); }
    }
    if (ops != threads * gens * rounds)
        bench_check_failed("%llu replacements, expected %llu", (unsigned long long)ops,
                           (unsigned long long)(threads * gens * rounds));
    bench_result("larson", "threads=%llu slots=%llu min=%llu max=%llu rounds=%llu generations=%llu ops=%llu "
                 "mops=%.3f ns_per_op=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)slots, (unsigned long long)min_b,
                 (unsigned long long)max_b, (unsigned long long)rounds, (unsigned long long)gens,
                 (unsigned long long)ops, (double)ops * 1e3 / (double)wall_ns,
                 (double)wall_ns * (double)threads / (double)ops);
    return 0;
}
