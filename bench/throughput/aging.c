/* aging.c: a heap that ages. For --rounds rounds the heap grows until the
 * live data reaches --peak bytes, then shrinks by freeing a random 80% of
 * the live blocks, and the next round draws its block sizes from a
 * different mix (small, medium, mixed, large, in turn). Every block is
 * fully written (so it is resident) and stamped. At the end, with about
 * 20% of the peak still live, it calls malloc_trim(0) (which an
 * LD_PRELOADed allocator may define; otherwise glibc's), sleeps 1.5 s so
 * that allocators with timed release can act, and reports the resident
 * set (VmRSS, and Rss from smaps_rollup) and the huge-page coverage
 * (AnonHugePages / Anonymous from /proc/self/smaps_rollup).
 *
 * Self-check: every surviving block's stamp is checked at the end of each
 * round and before the final free; the live-byte count is recomputed.
 * Result: RESULT bench=aging peak=B rounds=N blocks=N live_bytes=B
 *         rss_kib=N vm_rss_kib=N anon_kib=N anon_huge_kib=N thp_pct=X
 *         rss_over_live=X churn_ms=X check=ok */
#include <getopt.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include "bench_common.h"
#include "bench_mem.h"
#include "bench_stamp.h"

typedef struct {
    void *p;
    uint32_t size;
    uint32_t pad;
    uint64_t tag;
} block_t;

typedef struct { const char *name; uint64_t min_b, max_b; } mix_t;

static const mix_t mixes[] = {
    {"small", 16, 256}, {"medium", 256, 4096}, {"mixed", 16, 65536}, {"large", 32768, 262144}};

static const char *prog = "aging";
static block_t *blocks;
static uint64_t n_blocks, cap_blocks;

static void push_block(void *p, uint32_t size, uint64_t tag) {
    if (n_blocks == cap_blocks) {
        uint64_t new_cap = cap_blocks ? cap_blocks * 2 : 65536;
        void *nb = cap_blocks ? mremap(blocks, cap_blocks * sizeof *blocks, new_cap * sizeof *blocks, MREMAP_MAYMOVE)
                              : bench_scratch_alloc(new_cap * sizeof *blocks);
        if (nb == MAP_FAILED) { perror("mremap"); exit(1); }
        blocks = nb;
        cap_blocks = new_cap;
    }
    blocks[n_blocks++] = (block_t){.p = p, .size = size, .tag = tag};
}

static void check_block(const block_t *b) {
    if (!bench_stamp_ok(b->p, b->size, b->tag))
        bench_check_failed("block of %u bytes at %p was overwritten", b->size, b->p);
}

static uint64_t grow(uint64_t live, uint64_t peak, const mix_t *m, bench_rng_t *rng) {
    while (live < peak) {
        uint32_t size = (uint32_t)bench_rng_range(rng, m->min_b, m->max_b);
        uint64_t tag = bench_rng_next(rng);
        void *p = bench_xmalloc(size);
        memset(p, (int)(tag & 0xff), size);
        bench_stamp(p, size, tag);
        push_block(p, size, tag);
        live += size;
    }
    return live;
}

/* Frees a random 80% of the blocks (each with probability 4/5); returns
 * the live bytes left. */
static uint64_t shrink(bench_rng_t *rng) {
    uint64_t kept = 0, live = 0;
    for (uint64_t i = 0; i < n_blocks; i++) {
        check_block(&blocks[i]);
        if (bench_rng_below(rng, 5) != 0) {
            free(blocks[i].p);
        } else {
            blocks[kept++] = blocks[i];
            live += blocks[i].size;
        }
    }
    n_blocks = kept;
    return live;
}

static void usage(void) {
    printf("usage: aging [--peak SIZE] [--rounds N] [--sleep-ms MS] [--seed S]\n"
           "  The heap grows to --peak live bytes, frees a random 80%%, changes its size mix\n"
           "  (small, medium, mixed, large), --rounds times; then malloc_trim(0), a sleep,\n"
           "  and a report of RSS and huge-page coverage.\n"
           "  Defaults: --peak 256M --rounds 4 --sleep-ms 1500 --seed 1\n"
           "  Prints: RESULT bench=aging ... rss_kib=N thp_pct=X rss_over_live=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t peak = 256ull << 20, rounds = 4, sleep_ms = 1500, seed = 1;
    static const struct option opts[] = {{"peak", 1, 0, 'p'}, {"rounds", 1, 0, 'r'}, {"sleep-ms", 1, 0, 'z'},
                                         {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': peak = bench_arg_size(prog, "--peak", optarg, 1u << 20, 1ull << 40); break;
        case 'r': rounds = bench_arg_size(prog, "--rounds", optarg, 1, 1000); break;
        case 'z': sleep_ms = bench_arg_size(prog, "--sleep-ms", optarg, 0, 60000); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);

    bench_rng_t rng;
    bench_rng_seed(&rng, seed);
    uint64_t live = 0, t0 = bench_now_ns();
    for (uint64_t r = 0; r < rounds; r++) {
        const mix_t *m = &mixes[r % (sizeof mixes / sizeof mixes[0])];
        live = grow(live, peak, m, &rng);
        bench_mem_t at_peak = bench_mem_read();
        live = shrink(&rng);
        printf("# aging round %llu mix=%s peak_rss_kib=%ld live_after_shrink=%llu\n", (unsigned long long)r, m->name,
               at_peak.vm_rss_kib, (unsigned long long)live);
    }
    double churn_ms = (double)(bench_now_ns() - t0) / 1e6;
    malloc_trim(0);
    struct timespec ts = {.tv_sec = (time_t)(sleep_ms / 1000), .tv_nsec = (long)(sleep_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    bench_mem_t end = bench_mem_read();
    uint64_t recount = 0;
    for (uint64_t i = 0; i < n_blocks; i++) { check_block(&blocks[i]); recount += blocks[i].size; }
    if (recount != live) bench_check_failed("live bytes %llu, recounted %llu", (unsigned long long)live,
                                            (unsigned long long)recount);
    uint64_t kept = n_blocks;
    for (uint64_t i = 0; i < n_blocks; i++) free(blocks[i].p);
    double thp = bench_mem_thp_pct(&end);
    bench_result("aging", "peak=%llu rounds=%llu blocks=%llu live_bytes=%llu rss_kib=%ld vm_rss_kib=%ld anon_kib=%ld "
                 "anon_huge_kib=%ld thp_pct=%.2f rss_over_live=%.3f churn_ms=%.3f check=ok",
                 (unsigned long long)peak, (unsigned long long)rounds, (unsigned long long)kept,
                 (unsigned long long)live, end.rss_kib, end.vm_rss_kib, end.anon_kib, end.anon_huge_kib, thp,
                 live ? (double)end.rss_kib * 1024.0 / (double)live : 0.0, churn_ms);
    return 0;
}
