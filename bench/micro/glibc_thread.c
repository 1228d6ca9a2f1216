/* glibc_thread.c: the glibc malloc benchmark pattern (the research's
 * "GLIBC" micro benchmark). Each worker keeps a working set of --blocks
 * blocks with sizes drawn uniformly from [--min, --max]. One iteration
 * allocates the whole set, frees the older half in FIFO order (oldest
 * first), allocates that half again, then frees everything in LIFO order
 * (newest first). Every block is stamped at both ends when allocated and
 * the stamp is checked before it is freed, so an allocator that hands out
 * overlapping memory fails instead of looking fast.
 *
 * Modes:
 *   st   one thread, the process stays single-threaded;
 *   mt   --threads workers at once;
 *   emu  emulated threads, after glibc's bench-malloc-simple "main arena"
 *        case: one worker, but an idle second thread exists, so the
 *        allocator cannot take its single-thread shortcuts.
 *
 * Result: RESULT bench=glibc_thread mode=M threads=N min=B max=B blocks=N
 *         iters=N pairs=N ns_per_op=X mops=X check=ok
 * ns_per_op is worker time per malloc+free pair (summed over workers);
 * mops is pairs per wall-clock microsecond. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>
#include "bench_common.h"
#include "bench_stamp.h"

typedef struct {
    int id;
    uint64_t seed, min_bytes, max_bytes, n_blocks, iters;
    uint64_t elapsed_ns, pairs;
    pthread_barrier_t *start;
} worker_t;

static const char *prog = "glibc_thread";

static inline uint64_t stamp_of(uint64_t seed, uint64_t iter, uint64_t i) {
    return bench_mix64(seed ^ (iter << 32) ^ i);
}

static inline void check_stamp(const unsigned char *p, size_t size, uint64_t tag, int id) {
    if (!bench_stamp_ok(p, size, tag))
        bench_check_failed("worker %d: block of %zu bytes at %p was overwritten", id, size, (void *)p);
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    size_t n = (size_t)w->n_blocks, half = n / 2;
    unsigned char **blk = bench_scratch_alloc(n * sizeof *blk);
    size_t *sz = bench_scratch_alloc(n * sizeof *sz);
    size_t *table = bench_scratch_alloc(2 * n * sizeof *table);
    bench_rng_t rng;
    bench_rng_seed(&rng, w->seed + 7919u * (uint64_t)w->id);
    for (size_t i = 0; i < 2 * n; i++) table[i] = (size_t)bench_rng_range(&rng, w->min_bytes, w->max_bytes);
    if (w->start) pthread_barrier_wait(w->start);
    uint64_t t0 = bench_now_ns(), pairs = 0;
    for (uint64_t it = 0; it < w->iters; it++) {
        size_t rot = (size_t)(it % n);
        for (size_t i = 0; i < n; i++) {
            sz[i] = table[(i + rot) % (2 * n)];
            blk[i] = bench_xmalloc(sz[i]);
            bench_stamp(blk[i], sz[i], stamp_of(w->seed, it, i));
        }
        for (size_t i = 0; i < half; i++) {       /* partial free, FIFO */
            check_stamp(blk[i], sz[i], stamp_of(w->seed, it, i), w->id);
            free(blk[i]);
        }
        for (size_t i = 0; i < half; i++) {       /* refill the freed half */
            sz[i] = table[n + i];
            blk[i] = bench_xmalloc(sz[i]);
            bench_stamp(blk[i], sz[i], stamp_of(w->seed, it, i) ^ 1);
        }
        for (size_t i = n; i-- > 0;) {            /* full free, LIFO */
            check_stamp(blk[i], sz[i], stamp_of(w->seed, it, i) ^ (i < half), w->id);
            free(blk[i]);
        }
        pairs += n + half;
    }
    w->elapsed_ns = bench_now_ns() - t0;
    w->pairs = pairs;
    bench_scratch_free(blk, n * sizeof *blk);
    bench_scratch_free(sz, n * sizeof *sz);
    bench_scratch_free(table, 2 * n * sizeof *table);
    return NULL;
}

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv = PTHREAD_COND_INITIALIZER;
static int idle_stop;

static void *idle_main(void *arg) {
    pthread_mutex_lock(&idle_mu);
    while (!idle_stop) pthread_cond_wait(&idle_cv, &idle_mu);
    pthread_mutex_unlock(&idle_mu);
    return arg;
}

static void usage(void) {
    printf("usage: glibc_thread [--mode st|mt|emu] [--threads N] [--min BYTES] [--max BYTES]\n"
           "                    [--blocks N] [--iters N] [--seed S]\n"
           "  The glibc malloc benchmark pattern: allocate --blocks blocks of sizes in\n"
           "  [--min,--max], free half FIFO, reallocate it, free all LIFO; --iters times.\n"
           "  --mode st   single thread (default)\n"
           "         mt   --threads workers (default 2) in parallel\n"
           "         emu  one worker while an idle thread exists (emulated threads)\n"
           "  Defaults: --min 16 --max 1024 --blocks 1000 --iters 4000 --seed 1\n"
           "  Prints: RESULT bench=glibc_thread ... ns_per_op=X mops=X check=ok\n");
}

int main(int argc, char **argv) {
    const char *mode = "st";
    uint64_t threads = 2, min_b = 16, max_b = 1024, blocks = 1000, iters = 4000, seed = 1;
    static const struct option opts[] = {
        {"mode", 1, 0, 'm'}, {"threads", 1, 0, 't'}, {"min", 1, 0, 'a'}, {"max", 1, 0, 'b'},
        {"blocks", 1, 0, 'n'}, {"iters", 1, 0, 'i'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': mode = optarg; break;
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'a': min_b = bench_arg_size(prog, "--min", optarg, 1, 1ull << 30); break;
        case 'b': max_b = bench_arg_size(prog, "--max", optarg, 1, 1ull << 30); break;
        case 'n': blocks = bench_arg_size(prog, "--blocks", optarg, 2, 10000000); break;
        case 'i': iters = bench_arg_size(prog, "--iters", optarg, 1, 1ull << 32); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (min_b > max_b) bench_usage_error(prog, "--min %llu is larger than --max %llu",
                                         (unsigned long long)min_b, (unsigned long long)max_b);
    int is_mt = !strcmp(mode, "mt"), is_emu = !strcmp(mode, "emu");
    if (!is_mt && !is_emu && strcmp(mode, "st")) bench_usage_error(prog, "unknown --mode '%s'", mode);
    int n_workers = is_mt ? (int)threads : 1;

    worker_t *w = bench_scratch_alloc(sizeof *w * (size_t)n_workers);
    pthread_barrier_t start;
    pthread_t idle, *tid = bench_scratch_alloc(sizeof *tid * (size_t)n_workers);
    if (is_emu && pthread_create(&idle, NULL, idle_main, NULL)) { perror("pthread_create"); return 1; }
    if (is_mt) pthread_barrier_init(&start, NULL, (unsigned)n_workers + 1);
    for (int i = 0; i < n_workers; i++)
        w[i] = (worker_t){.id = i, .seed = seed, .min_bytes = min_b, .max_bytes = max_b,
                          .n_blocks = blocks, .iters = iters, .start = is_mt ? &start : NULL};
    uint64_t t0 = 0;
    if (is_mt) {
        for (int i = 0; i < n_workers; i++)
            if (pthread_create(&tid[i], NULL, worker_main, &w[i])) { perror("pthread_create"); return 1; }
        pthread_barrier_wait(&start);
        t0 = bench_now_ns();
        for (int i = 0; i < n_workers; i++) pthread_join(tid[i], NULL);
    } else {
        t0 = bench_now_ns();
        worker_main(&w[0]);
    }
    uint64_t wall_ns = bench_now_ns() - t0;
    if (is_emu) {
        pthread_mutex_lock(&idle_mu);
        idle_stop = 1;
        pthread_cond_signal(&idle_cv);
        pthread_mutex_unlock(&idle_mu);
        pthread_join(idle, NULL);
    }
    uint64_t pairs = 0, busy_ns = 0;
    for (int i = 0; i < n_workers; i++) { pairs += w[i].pairs; busy_ns += w[i].elapsed_ns; }
    uint64_t want = (uint64_t)n_workers * iters * (blocks + blocks / 2);
    if (pairs != want) bench_check_failed("%llu malloc+free pairs, expected %llu",
                                          (unsigned long long)pairs, (unsigned long long)want);
    bench_result("glibc_thread", "mode=%s threads=%d min=%llu max=%llu blocks=%llu iters=%llu pairs=%llu "
                 "ns_per_op=%.3f mops=%.3f check=ok",
                 mode, n_workers, (unsigned long long)min_b, (unsigned long long)max_b,
                 (unsigned long long)blocks, (unsigned long long)iters, (unsigned long long)pairs,
                 (double)busy_ns / (double)pairs, (double)pairs * 1e3 / (double)wall_ns);
    return 0;
}
