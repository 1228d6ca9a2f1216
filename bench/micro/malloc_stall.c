/* malloc_stall.c: the longest single malloc while a heap grows. One
 * thread allocates --count blocks of --size bytes, writes each one whole,
 * and times every malloc call alone. The worst call is where an allocator
 * does something slow in line: a 2 MiB first touch, a collapse of huge
 * pages, a lock held across a system call. Run it under the allocator
 * (LD_PRELOAD) in a fresh process; on this VM the first touch of memory
 * that has not been used for a while costs up to about 7 ms per 2 MiB, so
 * compare runs made in a row, interleaved.
 *
 * Self-check: every block still holds its byte at both ends at the end.
 * Result: RESULT bench=malloc_stall size=B count=N worst_ms=X worst_at_mib=X
 *   p999_us=X total_ms=X check=ok
 * (worst_at_mib: heap bytes requested before the worst call, in MiB). */
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

static const char *prog = "malloc_stall";

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void usage(void) {
    printf("usage: malloc_stall [--size B] [--count N] [--seed S]\n"
           "  times each of N mallocs of B bytes (each block written whole) and prints the worst.\n"
           "  Defaults: --size 8192 --count 4096 (32 MiB); --seed is accepted and changes nothing\n"
           "    (the work has no randomness)\n"
           "  Prints: RESULT bench=malloc_stall ... worst_ms=X ... check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t size = 8192, count = 4096;
    static const struct option opts[] = {
        {"size", 1, 0, 'b'}, {"count", 1, 0, 'n'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': size = bench_arg_size(prog, "--size", optarg, 1, 1ull << 30); break;
        case 'n': count = bench_arg_size(prog, "--count", optarg, 1, 1ull << 24); break;
        case 's': (void)bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;   /* the protocol's option */
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    unsigned char **blocks = bench_scratch_alloc(count * sizeof *blocks);
    uint64_t *ns = bench_scratch_alloc(count * sizeof *ns);
    uint64_t worst = 0, worst_i = 0, t_all = bench_now_ns();
    for (uint64_t i = 0; i < count; i++) {
        uint64_t t0 = bench_now_ns();
        unsigned char *p = malloc(size);
        ns[i] = bench_now_ns() - t0;
        if (!p) bench_check_failed("malloc(%llu) #%llu failed", (unsigned long long)size, (unsigned long long)i);
        memset(p, (int)(i & 0xff), size);
        blocks[i] = p;
        if (ns[i] > worst) { worst = ns[i]; worst_i = i; }
    }
    uint64_t total = bench_now_ns() - t_all;
    for (uint64_t i = 0; i < count; i++)
        if (blocks[i][0] != (unsigned char)(i & 0xff) || blocks[i][size - 1] != (unsigned char)(i & 0xff))
            bench_check_failed("block %llu lost its contents", (unsigned long long)i);
    for (uint64_t i = 0; i < count; i++) free(blocks[i]);
    qsort(ns, count, sizeof *ns, cmp_u64);
    bench_result(prog, "size=%llu count=%llu worst_ms=%.3f worst_at_mib=%.1f p999_us=%.1f total_ms=%.2f check=ok",
                 (unsigned long long)size, (unsigned long long)count, (double)worst / 1e6,
                 (double)(worst_i * size) / 1048576.0, (double)ns[count * 999 / 1000] / 1e3, (double)total / 1e6);
    return 0;
}
