/* realloc_chain.c: buffers that grow by realloc, as a string builder's
 * do. Each of --chains chains mallocs --from bytes and reallocs the
 * buffer by an eighth at a time until it holds --to bytes, then frees it;
 * between two steps the program mallocs a small block (64..664 bytes) and
 * frees the one it made 64 steps before, so the heap does not stand still
 * around the buffer. Every step writes one byte in each new 4 KiB of the
 * buffer. Medium sizes (8 KiB .. 1 MiB by default) are where allocators
 * differ: a step that moves costs a copy of the whole buffer, one that
 * grows in place costs none (docs/allocator.md, "realloc").
 *
 * Self-check: after each step every byte written before is still there
 * (the bytes of the old size, one per 4 KiB, and the last one).
 * Result: RESULT bench=realloc_chain chains=N from=B to=B steps=N
 *   moves=N wall_ms=X ns_per_step=X check=ok
 * (moves: steps whose pointer changed). */
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

static const char *prog = "realloc_chain";

static void usage(void) {
    printf("usage: realloc_chain [--chains N] [--from B] [--to B] [--seed S]\n"
           "  N buffers, each grown by realloc by an eighth at a time from B to B bytes, then freed.\n"
           "  Defaults: --chains 2000 --from 9000 --to 900000; --seed is accepted and changes nothing\n"
           "    (the work has no randomness)\n"
           "  Prints: RESULT bench=realloc_chain ... wall_ms=X ... check=ok\n");
}

/* The byte step i of chain c writes at offset k. */
static inline unsigned char mark(uint64_t c, size_t k) { return (unsigned char)(c * 7 + (k >> 12) + 1); }

/* Writes the marks of [from, to): one per 4 KiB page, and the last byte. */
static void write_marks(unsigned char *p, uint64_t c, size_t from, size_t to) {
    for (size_t k = (from + 4095) & ~(size_t)4095; k < to; k += 4096) p[k] = mark(c, k);
    p[to - 1] = mark(c, to - 1);
}

static bool marks_intact(const unsigned char *p, uint64_t c, size_t n) {
    for (size_t k = 0; k < n; k += 4096)
        if (p[k] != mark(c, k)) return false;
    return p[n - 1] == mark(c, n - 1);
}

int main(int argc, char **argv) {
    uint64_t chains = 2000, from = 9000, to = 900000;
    static const struct option opts[] = {{"chains", 1, 0, 'c'}, {"from", 1, 0, 'f'}, {"to", 1, 0, 't'},
                                         {"seed", 1, 0, 's'},   {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': chains = bench_arg_size(prog, "--chains", optarg, 1, 1ull << 24); break;
        case 'f': from = bench_arg_size(prog, "--from", optarg, 1, 1ull << 30); break;
        case 't': to = bench_arg_size(prog, "--to", optarg, 1, 1ull << 32); break;
        case 's': (void)bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;   /* the protocol's option */
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (to <= from) bench_usage_error(prog, "--to must be larger than --from");
    void *side[64] = {0};
    uint64_t steps = 0, moves = 0, t0 = bench_now_ns();
    for (uint64_t i = 0; i < chains; i++) {
        size_t n = (size_t)from;
        unsigned char *p = bench_xmalloc(n);
        write_marks(p, i, 0, n);
        while (n < to) {
            size_t m = n + (n / 8 ? n / 8 : 1);
            unsigned char *q = realloc(p, m);
            if (!q) bench_check_failed("chain %llu: realloc(%zu) failed", (unsigned long long)i, m);
            if (!marks_intact(q, i, n))
                bench_check_failed("chain %llu: the step %zu -> %zu lost bytes", (unsigned long long)i, n, m);
            write_marks(q, i, n, m);
            moves += q != p;
            steps++;
            p = q;
            n = m;
            unsigned slot = (unsigned)(steps % 64);
            free(side[slot]);
            side[slot] = bench_xmalloc(64 + (steps % 7) * 100);
        }
        free(p);
    }
    uint64_t ns = bench_now_ns() - t0;
    for (unsigned k = 0; k < 64; k++) free(side[k]);
    bench_result(prog, "chains=%llu from=%llu to=%llu steps=%llu moves=%llu wall_ms=%.2f ns_per_step=%.1f check=ok",
                 (unsigned long long)chains, (unsigned long long)from, (unsigned long long)to,
                 (unsigned long long)steps, (unsigned long long)moves, (double)ns / 1e6, (double)ns / (double)steps);
    return 0;
}
