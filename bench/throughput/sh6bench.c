/* sh6bench.c: MicroQuill's SmartHeap benchmark 6 (sh6bench), as
 * mimalloc-bench runs it (`sh6bench 2*procs`: its patch sets the call
 * count to 10000, takes the thread count from the command line and
 * writes the first and last byte of every block). hpmalloc's own
 * program of the same pattern, written from the published description:
 *
 * The call count is split over the threads. Each thread keeps an array of
 * that many block pointers (malloc'd, as the original does) and repeats,
 * count times: for size bases 1, 2, 4, 7, 11, ... (b -> b * 3 / 2 + 1, below
 * --max, 1000), for each size from the base down to 1 by halving, malloc
 * 250 blocks of a size under 100 bytes, 50 under 1000, 10 under 10000, 1
 * above, each into the next slot of the array. A fifth of the array is
 * kept from one fill to the next (the window moves a fifth each fill) and
 * skipped while filling; when the array is full, the slots below the
 * window are freed in the order they were filled and those above it in
 * reverse. So: small blocks of mixed sizes, thousands freed at a time,
 * FIFO and LIFO, all by the thread that made them.
 *
 * The original's window also starts at slot 0 every fifth fill, where
 * its skip test (made after the store) cannot skip it: that fill
 * overwrites the kept pointers, so a fifth of the array is never freed
 * every five fills, and the benchmark's heap grows through the run (on a
 * 2-core machine with 4 threads, about 2.3 million blocks a thread). This
 * program keeps that behaviour, since the published figures include it
 * (max RSS above all), and counts the blocks so left behind.
 *
 * Self-check: each block's first and last byte hold a stamp (its malloc
 * number mod 251, plus 1), checked before it is freed and when its pointer
 * is overwritten: two live blocks that overlap, or a block handed out
 * twice, are caught. Mallocs = frees + blocks left behind + blocks live at
 * the end (freed then, as the original does).
 * Result: RESULT bench=sh6bench threads=T calls=N max=B mallocs=N leaked=N
 *   wall_ms=X ns_per_malloc=X check=ok */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/sysinfo.h>
#include "bench_common.h"

static const char *prog = "sh6bench";

typedef struct {
    BENCH_THREAD_RECORD uint64_t calls;   /* slots in the array, and repeats; the record starts on its own lines */
    uint64_t max_bytes;     /* sizes below it */
    uint64_t mallocs, frees, leaked;
} worker_t;

/* The blocks of one thread: the pointers (in a malloc'd array, as the
 * original), and beside them, outside the allocator, each slot's size
 * and stamp. */
typedef struct {
    char **ptr;
    uint16_t *size;
    uint8_t *stamp;
    uint64_t n;
} slots_t;

static void stamp_check(const slots_t *sl, uint64_t i, const char *when) {
    const char *p = sl->ptr[i];
    size_t size = sl->size[i];
    uint8_t want = sl->stamp[i];
    if ((uint8_t)p[0] != want || (uint8_t)p[size - 1] != want)
        bench_check_failed("slot %llu (%zu bytes at %p) changed while live (%s): %u/%u, stamp %u",
                           (unsigned long long)i, size, (void *)p, when, (unsigned)(uint8_t)p[0],
                           (unsigned)(uint8_t)p[size - 1], (unsigned)want);
}

static void slot_free(worker_t *w, const slots_t *sl, uint64_t i) {
    stamp_check(sl, i, "freed");
    free(sl->ptr[i]);
    w->frees++;
}

/* Slot i gets a new block; live[i] says whether it held one still live
 * (the original's overwrite: that block is left behind). */
static void slot_fill(worker_t *w, slots_t *sl, uint8_t *live, uint64_t i, size_t size) {
    if (live[i]) {
        stamp_check(sl, i, "left behind");
        w->leaked++;
    }
    char *p = malloc(size);
    if (!p) { fprintf(stderr, "sh6bench: out of memory\n"); exit(4); }
    uint8_t stamp = (uint8_t)(w->mallocs % 251 + 1);
    p[0] = (char)stamp;
    p[size - 1] = (char)stamp;
    sl->ptr[i] = p;
    sl->size[i] = (uint16_t)size;
    sl->stamp[i] = stamp;
    live[i] = 1;
    w->mallocs++;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    uint64_t n = w->calls, fifth = n / 5;
    slots_t sl = {.ptr = malloc(n * sizeof(char *)), .n = n};
    if (!sl.ptr) { fprintf(stderr, "sh6bench: out of memory\n"); exit(4); }
    sl.size = bench_scratch_alloc(n * sizeof *sl.size);
    sl.stamp = bench_scratch_alloc(n);
    uint8_t *live = bench_scratch_alloc(n);
    uint64_t mp = 0, save_start = n, save_end = n;   /* slot indices, as the original's pointers */
    for (uint64_t rep = 0; rep < n; rep++) {
        for (uint64_t base = 1; base < w->max_bytes; base = base * 3 / 2 + 1) {
            for (uint64_t size = base; size; size /= 2) {
                unsigned iters = size < 10000 ? 10 : 1;
                if (size < 1000) iters *= 5;
                if (size < 100) iters *= 5;
                while (iters--) {
                    slot_fill(w, &sl, live, mp++, size);
                    if (mp == save_start) mp = save_end;   /* after the store, as the original tests it */
                    if (mp < n) continue;
                    /* the array is full: move the kept window on a fifth, free below and above it */
                    mp = 0;
                    save_start = save_end;
                    if (save_start >= n) save_start = 0;
                    save_end = save_start + fifth;
                    if (save_end > n) save_end = n;
                    for (; mp < save_start; mp++) { slot_free(w, &sl, mp); live[mp] = 0; }
                    for (mp = n; mp > save_end; mp--) { slot_free(w, &sl, mp - 1); live[mp - 1] = 0; }
                    mp = 0;
                }
            }
        }
    }
    for (uint64_t i = 0; i < n; i++)   /* the residue: the original frees the slots below mp; the rest too, here */
        if (live[i]) { slot_free(w, &sl, i); live[i] = 0; }
    free(sl.ptr);
    bench_scratch_free(sl.size, n * sizeof *sl.size);
    bench_scratch_free(sl.stamp, n);
    bench_scratch_free(live, n);
    return NULL;
}

static void usage(void) {
    printf("usage: sh6bench [--threads T] [--calls N] [--max B] [--seed S]\n"
           "  MicroQuill's sh6bench as mimalloc-bench runs it: N slots split over T threads;\n"
           "  each thread, once per slot, mallocs blocks of sizes from every base below B\n"
           "  (1, 2, 4, 7, 11, ...) down to 1 by halving (more of the small ones), frees them\n"
           "  a fill at a time in order and in reverse, keeping a moving fifth.\n"
           "  Defaults (mimalloc-bench's `sh6bench 2*procs`): --threads 2 * online CPUs\n"
           "  --calls 10000 --max 1000\n"
           "  --seed is accepted for uniformity; the benchmark is deterministic.\n"
           "  Prints: RESULT bench=sh6bench ... wall_ms=X ns_per_malloc=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 2 * (uint64_t)get_nprocs(), calls = 10000, max_bytes = 1000, seed = 1;
    static const struct option opts[] = {{"threads", 1, 0, 't'}, {"calls", 1, 0, 'c'}, {"max", 1, 0, 'm'},
                                         {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 1024); break;
        case 'c': calls = bench_arg_size(prog, "--calls", optarg, 5, 1u << 24); break;
        case 'm': max_bytes = bench_arg_size(prog, "--max", optarg, 2, UINT16_MAX); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    (void)seed;
    if (calls / threads < 5) bench_usage_error(prog, "--calls must be at least 5 a thread");
    worker_t *w = bench_scratch_alloc(sizeof *w * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * threads);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < threads; i++) {
        w[i] = (worker_t){.calls = calls / threads, .max_bytes = max_bytes};
        if (pthread_create(&tid[i], NULL, worker_main, &w[i])) { perror("pthread_create"); return 1; }
    }
    for (uint64_t i = 0; i < threads; i++) pthread_join(tid[i], NULL);
    uint64_t wall_ns = bench_now_ns() - t0;
    uint64_t mallocs = 0, frees = 0, leaked = 0;
    for (uint64_t i = 0; i < threads; i++) {
        mallocs += w[i].mallocs;
        frees += w[i].frees;
        leaked += w[i].leaked;
    }
    if (mallocs == 0 || mallocs != frees + leaked)
        bench_check_failed("%llu mallocs, %llu frees and %llu blocks left behind", (unsigned long long)mallocs,
                           (unsigned long long)frees, (unsigned long long)leaked);
    bench_result("sh6bench", "threads=%llu calls=%llu max=%llu mallocs=%llu leaked=%llu wall_ms=%.3f ns_per_malloc=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)calls, (unsigned long long)max_bytes,
                 (unsigned long long)mallocs, (unsigned long long)leaked, (double)wall_ns / 1e6,
                 (double)wall_ns / (double)mallocs);
    return 0;
}
