/* rptest.c: rpmalloc's benchmark (Mattias Jansson's rpmalloc-benchmark), as
 * mimalloc-bench runs it: `rptest T 0 1 2 500 1000 100 8 16000` = T
 * threads, random sizes with a linear drop-off in [8, 16000], a batch of
 * cross-thread frees every 2nd loop, 500 loops, 1000 live slots per
 * thread, about 100 operations per loop.
 *
 * The threads are started --runs times (2 in the original); each time
 * they wait at a start gate until all exist (the original's start flag),
 * then run 2 iterations of --loops loops. A loop: (1) takes the batches
 * other threads sent it; (2) frees 0.8 * --ops * p1 slots, walking its
 * slot ring by a prime stride; (3) frees every block of the batches taken
 * in (1); (4) replaces --ops * p2 slots (free the old block, allocate a
 * new one of the next size of the table) by another prime stride; (5)
 * every --cross-rate loops allocates a batch of --ops * p2 more blocks and
 * pushes it onto the lock-free list of the next thread, which frees them.
 * p1, p2 are percentages in [30, 99] from fixed tables and the sizes come
 * from a fixed table of 2000 (here both drawn once from --seed). As in the
 * original, blocks are zeroed (calloc) or, for one in three sizes under
 * 4 KiB, allocated 8- or 16-byte aligned (memalign) and filled; the first
 * 4 bytes hold the size, every page and the last byte are written. A
 * thread stops sending batches once any thread has finished its loops; a
 * thread that has finished keeps freeing what is sent to it, every
 * 0.1 ms, until all have; then the threads meet, free what was sent
 * to them and their own slots. (Until session 8 there was no start gate
 * and a finished thread waited at a barrier without freeing.) The peak
 * of live bytes depends on timing: a thread that falls behind holds the
 * batches sent to it (docs/bench.md).
 *
 * Self-check: the first word of each block must still hold its size (which
 * its owner knows) and its last byte 1 when it is freed; every block sent is freed exactly once
 * (counted), and the live-byte count ends at 0. Result: RESULT
 *   bench=rptest threads=T ... memops=N peak_live_kb=N mops=X
 *   ns_per_op=X check=ok (memops counts mallocs and frees; ns_per_op =
 *   wall time / memops; peak_live_kb: the most bytes the program held,
 *   counted once per loop as the original does).
 * --trace-peaks also prints, before the RESULT line, one line per run:
 *   PEAK run=R peak_kb=N loops=A,B,... (the run's own peak of live bytes
 *   and how many loops each thread had finished when it was reached), so
 *   that a high peak can be told apart as a thread that had not started
 *   (loops 0) or one that fell behind later (docs/bench.md). The highest
 *   of the runs' peaks is peak_live_kb.
 * --idle-thread MS starts one more thread before the runs, which does
 *   nothing but sleep MS milliseconds at a time (0: it never wakes), with
 *   RPTEST_IDLE_THREAD_MS as the default: how the peak depends on a
 *   process's other threads, such as an allocator's own (docs/bench.md,
 *   session 36). */
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench_common.h"

#define N_SIZES 2000
#define N_OPS 311

typedef struct sent {
    struct sent *next;
    uint64_t count;
    uint64_t first_size;      /* block k has size size_table[(first_size + k) % N_SIZES] */
    void **blk;
} sent_t;

typedef struct worker {
    BENCH_THREAD_RECORD int id;   /* the record starts on its own lines */
    struct worker *all;
    _Atomic(sent_t *) inbox;
    uint64_t memops, sent_blocks, recv_blocks;
    int64_t live_delta;       /* bytes allocated minus bytes freed since the last note_live */
    _Atomic uint64_t loops_done;   /* this run's finished loops (--trace-peaks only) */
} worker_t;

static const char *prog = "rptest";
static uint64_t n_threads, loops, slots, cross_rate, alloc_stride, free_stride;
static size_t size_table[N_SIZES];
static uint64_t alloc_ops[N_OPS], free_ops[N_OPS];
static atomic_int finished_loops;
static bool trace_peaks;

/* --idle-thread: a thread that only sleeps, ms at a time (0: for good). */
static void *idle_main(void *arg) {
    uint64_t ms = *(const uint64_t *)arg;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    for (;;) {
        if (ms) nanosleep(&ts, NULL);
        else pause();
    }
    return NULL;
}
static worker_t *workers;
static pthread_barrier_t meet, start_gate;

static void *alloc_block(size_t size, uint64_t k) {
    unsigned char *p;
    static const size_t align[3] = {0, 8, 16};
    size_t a = size < 4096 ? align[k % 3] : 0;
    if (a) {
        p = memalign(a, size);
        if (p) memset(p, 0xCD, size);
    } else {
        p = calloc(1, size);
    }
    if (!p) { fprintf(stderr, "allocation of %zu bytes failed\n", size); exit(4); }
    uint32_t s32 = (uint32_t)size;
    memcpy(p, &s32, 4);
    for (size_t page = 1; page < (size - 1) / 4096; page++) p[page * 4096] = 1;
    p[size - 1] = 1;
    return p;
}

/* want: the block's size, known to its owner. */
static void free_block(worker_t *w, void *blk, size_t want) {
    unsigned char *p = blk;
    uint32_t s32;
    memcpy(&s32, p, 4);
    if (s32 != want || p[s32 - 1] != 1)
        bench_check_failed("thread %d: block of %zu bytes at %p was overwritten (size word %u)", w->id, want, blk, s32);
    free(blk);
    w->live_delta -= (int64_t)want;
    w->memops++;
}

/* Frees the batches of a list taken from an inbox. */
static void free_sent(worker_t *w, sent_t *s) {
    while (s) {
        sent_t *next = s->next;
        for (uint64_t i = 0; i < s->count; i++) free_block(w, s->blk[i], size_table[(s->first_size + i) % N_SIZES]);
        w->recv_blocks += s->count;
        free(s->blk);
        free(s);
        w->memops += 2;
        s = next;
    }
}

/* The program's live bytes, as the original counts them (once per loop,
 * not per call), and their peak: how much of max RSS the program itself
 * needs. It depends on timing (a thread that falls behind holds the
 * batches sent to it), so it varies from run to run. */
static _Atomic int64_t live_bytes, peak_live_bytes;

/* --trace-peaks: the current run's peak and each thread's loop count when
 * it was reached, set together under a lock (taken once per loop, and
 * only when tracing). */
static pthread_mutex_t run_peak_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t run_peak_bytes;
static uint64_t *run_peak_loops;

static void note_run_peak(int64_t v) {
    pthread_mutex_lock(&run_peak_lock);
    if (v > run_peak_bytes) {
        run_peak_bytes = v;
        for (uint64_t i = 0; i < n_threads; i++) run_peak_loops[i] = atomic_load(&workers[i].loops_done);
    }
    pthread_mutex_unlock(&run_peak_lock);
}

static void note_live(worker_t *w) {
    int64_t v = atomic_fetch_add(&live_bytes, w->live_delta) + w->live_delta, peak = atomic_load(&peak_live_bytes);
    w->live_delta = 0;
    while (v > peak && !atomic_compare_exchange_weak(&peak_live_bytes, &peak, v)) {}
    if (trace_peaks) note_run_peak(v);
}

/* --trace-peaks: the PEAK line of run r, then a fresh start for the next. */
static void print_run_peak(uint64_t r) {
    printf("PEAK run=%llu peak_kb=%lld loops=", (unsigned long long)r, (long long)(run_peak_bytes >> 10));
    for (uint64_t i = 0; i < n_threads; i++) {
        printf("%s%llu", i ? "," : "", (unsigned long long)run_peak_loops[i]);
        run_peak_loops[i] = 0;
        atomic_store(&workers[i].loops_done, 0);
    }
    printf("\n");
    run_peak_bytes = 0;
}

static void drain_inbox(worker_t *w) { free_sent(w, atomic_exchange(&w->inbox, NULL)); }

static void send(worker_t *to, sent_t *s) {
    sent_t *old = atomic_load(&to->inbox);
    do s->next = old;
    while (!atomic_compare_exchange_weak(&to->inbox, &old, s));
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    void **slot = bench_xmalloc(sizeof(void *) * slots);
    memset(slot, 0, sizeof(void *) * slots);
    size_t *slot_size = bench_scratch_alloc(sizeof(size_t) * slots);   /* for the check only */
    uint64_t alloc_idx = 0, free_idx = 0, cross = (uint64_t)w->id;
    pthread_barrier_wait(&start_gate);   /* the original's start flag: all threads begin together */
    for (uint64_t iter = 0; iter < 2; iter++) {
        uint64_t size_idx = ((uint64_t)(w->id + 1) * ((iter + 1) * 37)) % N_SIZES;
        int do_send = 1;
        for (uint64_t loop = 0; loop < loops; loop++) {
            sent_t *got = atomic_exchange(&w->inbox, NULL);   /* taken first, freed after the own frees */
            uint64_t n_free = free_ops[(iter + loop) % N_OPS], n_alloc = alloc_ops[(iter + loop) % N_OPS];
            for (uint64_t k = 0; k < n_free; k++) {
                if (slot[free_idx]) { free_block(w, slot[free_idx], slot_size[free_idx]); slot[free_idx] = NULL; }
                free_idx = (free_idx + free_stride) % slots;
            }
            free_sent(w, got);
            for (uint64_t k = 0; k < n_alloc; k++) {
                if (slot[alloc_idx]) free_block(w, slot[alloc_idx], slot_size[alloc_idx]);
                slot_size[alloc_idx] = size_table[(size_idx + 2) % N_SIZES];
                slot[alloc_idx] = alloc_block(slot_size[alloc_idx], size_idx + k);
                w->live_delta += (int64_t)slot_size[alloc_idx];
                w->memops++;
                alloc_idx = (alloc_idx + alloc_stride) % slots;
                size_idx = (size_idx + 1) % N_SIZES;
            }
            if (cross_rate && loop % cross_rate == 0 && do_send) {
                sent_t *s = bench_xmalloc(sizeof *s);
                s->count = n_alloc;
                s->first_size = size_idx + 2;
                s->blk = bench_xmalloc(sizeof(void *) * n_alloc);
                w->memops += 2;
                for (uint64_t k = 0; k < n_alloc; k++) {
                    s->blk[k] = alloc_block(size_table[(size_idx + 2) % N_SIZES], size_idx + k);
                    w->live_delta += (int64_t)size_table[(size_idx + 2) % N_SIZES];
                    w->memops++;
                    size_idx = (size_idx + 1) % N_SIZES;
                }
                cross = (cross + 1) % n_threads;
                if (n_threads > 1 && cross == (uint64_t)w->id) cross = (cross + 1) % n_threads;
                w->sent_blocks += n_alloc;
                send(&w->all[cross], s);
            }
            if (trace_peaks) atomic_fetch_add_explicit(&w->loops_done, 1, memory_order_relaxed);
            note_live(w);
            if (atomic_load_explicit(&finished_loops, memory_order_relaxed) > 0) do_send = 0;
        }
        /* As the original, a thread that is done keeps freeing what is sent
         * to it until all are done (a thread parked at a barrier would let
         * the others' batches pile up in its inbox): every 0.1 ms, where
         * the original sleeps 1 ms, because it times only the work and we
         * time the wall clock. */
        atomic_fetch_add(&finished_loops, 1);
        while (atomic_load(&finished_loops) < (int)n_threads) {
            drain_inbox(w);
            note_live(w);
            nanosleep(&(struct timespec){0, 100000}, NULL);
        }
        pthread_barrier_wait(&meet);   /* every batch of this iteration has been sent */
        drain_inbox(w);
        for (uint64_t i = 0; i < slots; i++)
            if (slot[i]) { free_block(w, slot[i], slot_size[i]); slot[i] = NULL; }
        note_live(w);
        pthread_barrier_wait(&meet);
        if (w->id == 0) atomic_store(&finished_loops, 0);
        pthread_barrier_wait(&meet);
    }
    free(slot);
    bench_scratch_free(slot_size, sizeof(size_t) * slots);
    return NULL;
}

static void usage(void) {
    printf("usage: rptest [--threads T] [--loops N] [--slots N] [--ops N] [--cross-rate N]\n"
           "              [--min BYTES] [--max BYTES] [--dist even|linear|exp] [--runs N] [--seed S]\n"
           "              [--trace-peaks] [--idle-thread MS]\n"
           "  rpmalloc's benchmark: T threads replace blocks of random size in rings of N\n"
           "  slots; every --cross-rate loops a batch of blocks goes to another thread,\n"
           "  which frees them. The threads are started --runs times (the original: 2).\n"
           "  Defaults (mimalloc-bench's `rptest T 0 1 2 500 1000 100 8 16000`):\n"
           "    --threads 2 --loops 500 --slots 1000 --ops 100 --cross-rate 2 --min 8 --max 16000\n"
           "    --dist linear --runs 2 --seed 1\n"
           "  --trace-peaks: first a line per run, PEAK run=R peak_kb=N loops=A,B,...: its peak of\n"
           "    live bytes and each thread's finished loops when it was reached.\n"
           "  --idle-thread MS: one more thread, which only sleeps MS ms at a time (0: never\n"
           "    wakes); default from RPTEST_IDLE_THREAD_MS, else none.\n"
           "  Prints: RESULT bench=rptest ... mops=X ns_per_op=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t ops = 100, min_b = 8, max_b = 16000, seed = 1, runs = 2;
    static uint64_t idle_ms;
    const char *idle_env = getenv("RPTEST_IDLE_THREAD_MS");
    bool idle = idle_env != NULL;
    if (idle) idle_ms = bench_arg_size(prog, "RPTEST_IDLE_THREAD_MS", idle_env, 0, 3600000);
    const char *dist = "linear";
    n_threads = 2; loops = 500; slots = 1000; cross_rate = 2;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"loops", 1, 0, 'l'}, {"slots", 1, 0, 'n'}, {"ops", 1, 0, 'o'},
        {"cross-rate", 1, 0, 'c'}, {"min", 1, 0, 'a'}, {"max", 1, 0, 'b'}, {"dist", 1, 0, 'd'},
        {"runs", 1, 0, 'r'}, {"seed", 1, 0, 's'}, {"trace-peaks", 0, 0, 'p'}, {"idle-thread", 1, 0, 'i'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r': runs = bench_arg_size(prog, "--runs", optarg, 1, 1u << 20); break;
        case 't': n_threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 'l': loops = bench_arg_size(prog, "--loops", optarg, 1, 1u << 24); break;
        case 'n': slots = bench_arg_size(prog, "--slots", optarg, 1, 1u << 24); break;
        case 'o': ops = bench_arg_size(prog, "--ops", optarg, 1, 1u << 24); break;
        case 'c': cross_rate = bench_arg_size(prog, "--cross-rate", optarg, 0, 1u << 24); break;
        case 'a': min_b = bench_arg_size(prog, "--min", optarg, 8, 1u << 30); break;
        case 'b': max_b = bench_arg_size(prog, "--max", optarg, 8, 1u << 30); break;
        case 'd': dist = optarg; break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'p': trace_peaks = true; break;
        case 'i': idle_ms = bench_arg_size(prog, "--idle-thread", optarg, 0, 3600000); idle = true; break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (min_b > max_b) bench_usage_error(prog, "--min is larger than --max");
    int d = !strcmp(dist, "even") ? 0 : !strcmp(dist, "linear") ? 1 : !strcmp(dist, "exp") ? 2 : -1;
    if (d < 0) bench_usage_error(prog, "unknown --dist '%s'", dist);
    if (n_threads == 1) cross_rate = 0;

    /* Strides: the first primes that do not divide the slot count. */
    static const uint64_t primes[] = {7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73};
    int ip = 0;
    while (slots % primes[ip] == 0) ip++;
    alloc_stride = primes[ip++];
    while (slots % primes[ip] == 0) ip++;
    free_stride = primes[ip];

    /* The size table: uniform, then shaped as the original's drop-offs. */
    bench_rng_t rng;
    bench_rng_seed(&rng, seed);
    double range = (double)(max_b - min_b), u[N_SIZES];
    for (int i = 0; i < N_SIZES; i++) u[i] = (double)bench_rng_below(&rng, 100000) / 100000.0;
    for (int i = 0; i < N_SIZES; i++) {
        double w0 = 1.0 - u[i], w1 = 1.0 - u[(i + 1) % N_SIZES], even = range * u[(i + 2) % N_SIZES];
        double s = d == 0 ? round(range * u[i]) : d == 1 ? even * fabs(w0 + w1 - 1.0) : even * w0 * w1;
        size_table[i] = (size_t)min_b + (size_t)s;
    }
    for (int i = 0; i < N_OPS; i++) {
        alloc_ops[i] = (uint64_t)((double)ops * (double)bench_rng_range(&rng, 30, 99) / 100.0);
        free_ops[i] = (uint64_t)(0.8 * (double)ops * (double)bench_rng_range(&rng, 30, 99) / 100.0);
    }

    worker_t *w = bench_scratch_alloc(sizeof *w * n_threads);
    workers = w;
    run_peak_loops = bench_scratch_alloc(sizeof *run_peak_loops * n_threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * n_threads);
    pthread_barrier_init(&meet, NULL, (unsigned)n_threads);
    pthread_barrier_init(&start_gate, NULL, (unsigned)n_threads);
    for (uint64_t i = 0; i < n_threads; i++) {   /* all set up before any thread sends */
        w[i].id = (int)i;
        w[i].all = w;
        atomic_init(&w[i].inbox, NULL);
        atomic_init(&w[i].loops_done, 0);
    }
    pthread_t idle_tid;
    if (idle && pthread_create(&idle_tid, NULL, idle_main, &idle_ms)) { perror("pthread_create"); return 1; }
    uint64_t t0 = bench_now_ns();
    for (uint64_t r = 0; r < runs; r++) {
        for (uint64_t i = 0; i < n_threads; i++)
            if (pthread_create(&tid[i], NULL, worker_main, &w[i])) { perror("pthread_create"); return 1; }
        for (uint64_t i = 0; i < n_threads; i++) pthread_join(tid[i], NULL);
        if (trace_peaks) print_run_peak(r);
    }
    uint64_t wall_ns = bench_now_ns() - t0, memops = 0, sent = 0, recv = 0;
    for (uint64_t i = 0; i < n_threads; i++) {
        memops += w[i].memops;
        sent += w[i].sent_blocks;
        recv += w[i].recv_blocks;
        if (atomic_load(&w[i].inbox)) bench_check_failed("thread %llu still has blocks sent to it", (unsigned long long)i);
    }
    if (atomic_load(&live_bytes) != 0)
        bench_check_failed("%lld bytes still counted live at the end", (long long)atomic_load(&live_bytes));
    if (sent != recv)
        bench_check_failed("%llu blocks sent across threads, %llu freed", (unsigned long long)sent, (unsigned long long)recv);
    bench_result("rptest", "threads=%llu loops=%llu slots=%llu ops=%llu cross_rate=%llu min=%llu max=%llu dist=%s "
                 "runs=%llu memops=%llu cross_blocks=%llu peak_live_kb=%lld mops=%.3f ns_per_op=%.3f check=ok",
                 (unsigned long long)n_threads, (unsigned long long)loops, (unsigned long long)slots,
                 (unsigned long long)ops, (unsigned long long)cross_rate, (unsigned long long)min_b,
                 (unsigned long long)max_b, dist, (unsigned long long)runs, (unsigned long long)memops, (unsigned long long)sent,
                 (long long)(atomic_load(&peak_live_bytes) >> 10), (double)memops * 1e3 / (double)wall_ns, (double)wall_ns / (double)memops);
    return 0;
}
