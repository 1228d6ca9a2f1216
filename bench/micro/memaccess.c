/* memaccess.c: the MemAccess benchmark (after Alex Bordei's): builds a
 * circular doubly linked list of 64-byte nodes and walks it, for working
 * sets that double from --min to --max, and reports the time per node
 * visited at each size: the curve that shows each cache and TLB level.
 *
 * The nodes come either from one calloc of the whole working set (as the
 * original does: --alloc calloc) or from one malloc per node (--alloc
 * nodes, where the allocator's layout shows); --alloc both runs both. The
 * list follows allocation order (--order seq) or a random permutation
 * (--order rand). With --work N each visit also does N multiply-adds on
 * the node's payload. With --threads T each thread builds and walks its own
 * list of ws/T bytes at the same time.
 *
 * One size, e.g. --ws 1G --alloc nodes --order rand, is the "TLB reach"
 * random walk over a list of malloc'd 64-byte nodes.
 *
 * Self-check: the walk's sum of node ids must equal the sum predicted from
 * the permutation, and a full pass must find every node once with
 * next->prev == self.
 *
 * Result: RESULT bench=memaccess order=O alloc=A threads=T work=W visits=N
 *         [nodes_ns@BYTES=X ...] [nodes_ns_gmean=X] [calloc_ns@BYTES=X ...]
 *         [calloc_ns_gmean=X] check=ok
 * where BYTES is the working-set size and X is ns per node visited. */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

#define NODE_BYTES 64
#define MAX_SIZES 40

typedef struct node {
    struct node *next, *prev;
    uint64_t id;
    uint64_t payload[5];
} node_t;

_Static_assert(sizeof(node_t) == NODE_BYTES, "node is 64 bytes");

typedef struct {
    int id, use_calloc, random_order;
    uint64_t n_nodes, visits, work, seed;
    pthread_barrier_t *ready, *done;
    double ns_per_visit;
} walker_t;

static const char *prog = "memaccess";

/* Allocates n nodes into arr[] (allocation order), ids 0..n-1. */
static node_t *build_nodes(node_t **arr, uint64_t n, int use_calloc) {
    node_t *block = NULL;
    if (use_calloc) {
        block = calloc(n, sizeof(node_t));
        if (!block) { fprintf(stderr, "calloc(%llu nodes) failed\n", (unsigned long long)n); exit(4); }
        for (uint64_t i = 0; i < n; i++) arr[i] = &block[i];
    } else {
        for (uint64_t i = 0; i < n; i++) arr[i] = bench_xmalloc(sizeof(node_t));
    }
    for (uint64_t i = 0; i < n; i++) {
        arr[i]->id = i;
        for (int k = 0; k < 5; k++) arr[i]->payload[k] = i + (uint64_t)k;
    }
    return block;
}

/* Links arr[] (after an optional shuffle) into a circular list. */
static void link_list(node_t **arr, uint64_t n, int random_order, bench_rng_t *rng) {
    if (random_order)
        for (uint64_t i = n - 1; i > 0; i--) {
            uint64_t j = bench_rng_below(rng, i + 1);
            node_t *t = arr[i]; arr[i] = arr[j]; arr[j] = t;
        }
    for (uint64_t i = 0; i < n; i++) {
        arr[i]->next = arr[(i + 1) % n];
        arr[i]->prev = arr[(i + n - 1) % n];
    }
}

static inline uint64_t walk(node_t *head, uint64_t steps, uint64_t work, node_t **end) {
    uint64_t sum = 0;
    node_t *p = head;
    for (uint64_t s = 0; s < steps; s++) {
        sum += p->id;
        for (uint64_t k = 0; k < work; k++)
            p->payload[k % 5] = p->payload[k % 5] * 6364136223846793005ull + p->id;
        p = p->next;
    }
    *end = p;
    return sum;
}

/* Checks the timed walk against the sum predicted from the list order and
 * that the list is intact: every node once, next/prev consistent (read in
 * list order from arr[], so the check is not itself a long pointer chase). */
static void check_list(node_t **arr, uint64_t n, uint64_t visits, uint64_t walk_sum, int id) {
    uint64_t total = n * (n - 1) / 2, want = (visits / n) * total;
    for (uint64_t i = 0; i < visits % n; i++) want += arr[i]->id;
    if (walk_sum != want)
        bench_check_failed("walker %d: walk sum %llu, expected %llu", id,
                           (unsigned long long)walk_sum, (unsigned long long)want);
    uint64_t sum = 0, xsum = 0;
    for (uint64_t i = 0; i < n; i++) {
        const node_t *p = arr[i];
        if (p->next != arr[(i + 1) % n] || p->prev != arr[(i + n - 1) % n])
            bench_check_failed("walker %d: node %llu (list position %llu) has wrong links", id,
                               (unsigned long long)p->id, (unsigned long long)i);
        sum += p->id;
        xsum ^= bench_mix64(p->id);
    }
    uint64_t xwant = 0;
    for (uint64_t i = 0; i < n; i++) xwant ^= bench_mix64(i);
    if (sum != total || xsum != xwant)
        bench_check_failed("walker %d: the list does not hold ids 0..%llu exactly once", id,
                           (unsigned long long)(n - 1));
}

static void *walker_main(void *arg) {
    walker_t *w = arg;
    uint64_t n = w->n_nodes;
    node_t **by_alloc = bench_scratch_alloc(n * sizeof *by_alloc);
    node_t **arr = bench_scratch_alloc(n * sizeof *arr);
    bench_rng_t rng;
    bench_rng_seed(&rng, w->seed * 1000003u + (uint64_t)w->id);
    node_t *block = build_nodes(by_alloc, n, w->use_calloc);
    memcpy(arr, by_alloc, n * sizeof *arr);
    link_list(arr, n, w->random_order, &rng);
    node_t *end;
    walk(arr[0], n < w->visits / 4 ? n : w->visits / 4, 0, &end);   /* warm up */
    pthread_barrier_wait(w->ready);
    uint64_t t0 = bench_now_ns();
    uint64_t sum = walk(arr[0], w->visits, w->work, &end);
    uint64_t dt = bench_now_ns() - t0;
    pthread_barrier_wait(w->done);
    w->ns_per_visit = (double)dt / (double)w->visits;
    check_list(arr, n, w->visits, sum, w->id);
    if (block) free(block);
    else for (uint64_t i = 0; i < n; i++) free(by_alloc[i]);   /* allocation order */
    bench_scratch_free(arr, n * sizeof *arr);
    bench_scratch_free(by_alloc, n * sizeof *by_alloc);
    return NULL;
}

/* One working-set size under one allocation mode; returns ns per visit
 * (mean over threads). */
static double run_size(uint64_t ws_bytes, int use_calloc, int random_order, uint64_t threads,
                       uint64_t visits, uint64_t work, uint64_t seed) {
    walker_t w[256];
    pthread_t tid[256];
    pthread_barrier_t ready, done;
    pthread_barrier_init(&ready, NULL, (unsigned)threads);
    pthread_barrier_init(&done, NULL, (unsigned)threads);
    uint64_t per = ws_bytes / NODE_BYTES / threads;
    for (uint64_t i = 0; i < threads; i++) {
        w[i] = (walker_t){.id = (int)i, .use_calloc = use_calloc, .random_order = random_order,
                          .n_nodes = per, .visits = visits, .work = work, .seed = seed ^ ws_bytes,
                          .ready = &ready, .done = &done};
        if (i > 0 && pthread_create(&tid[i], NULL, walker_main, &w[i])) { perror("pthread_create"); exit(1); }
    }
    walker_main(&w[0]);
    double sum = w[0].ns_per_visit;
    for (uint64_t i = 1; i < threads; i++) { pthread_join(tid[i], NULL); sum += w[i].ns_per_visit; }
    pthread_barrier_destroy(&ready);
    pthread_barrier_destroy(&done);
    return sum / (double)threads;
}

static void usage(void) {
    printf("usage: memaccess [--order seq|rand] [--alloc calloc|nodes|both] [--min SIZE] [--max SIZE]\n"
           "                 [--ws SIZE] [--visits N] [--work N] [--threads N] [--seed S]\n"
           "  Walks a circular doubly linked list of 64-byte nodes; the working set doubles\n"
           "  from --min to --max (--ws SIZE: that one size). Sizes take K/M/G.\n"
           "  --alloc calloc  one calloc for all nodes (the original MemAccess)\n"
           "          nodes   one malloc per node\n"
           "          both    both, reported separately (default)\n"
           "  --order  seq = allocation order, rand = random permutation (default rand)\n"
           "  --visits nodes visited per size and thread (default 4M)\n"
           "  --work   multiply-adds per visit (default 0)\n"
           "  Defaults: --min 16K --max 256M --threads 1 --seed 1\n"
           "  Prints: RESULT bench=memaccess ... nodes_ns@BYTES=X ... calloc_ns@BYTES=X ... check=ok\n");
}

int main(int argc, char **argv) {
    const char *order = "rand", *alloc = "both";
    uint64_t min_ws = 16 << 10, max_ws = 256ull << 20, visits = 4u << 20, work = 0, threads = 1, seed = 1;
    static const struct option opts[] = {
        {"order", 1, 0, 'o'}, {"alloc", 1, 0, 'a'}, {"min", 1, 0, 'm'}, {"max", 1, 0, 'M'},
        {"ws", 1, 0, 'w'}, {"visits", 1, 0, 'v'}, {"work", 1, 0, 'k'}, {"threads", 1, 0, 't'},
        {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': order = optarg; break;
        case 'a': alloc = optarg; break;
        case 'm': min_ws = bench_arg_size(prog, "--min", optarg, 1024, 1ull << 40); break;
        case 'M': max_ws = bench_arg_size(prog, "--max", optarg, 1024, 1ull << 40); break;
        case 'w': min_ws = max_ws = bench_arg_size(prog, "--ws", optarg, 1024, 1ull << 40); break;
        case 'v': visits = bench_arg_size(prog, "--visits", optarg, 1, 1ull << 40); break;
        case 'k': work = bench_arg_size(prog, "--work", optarg, 0, 1000); break;
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 256); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    int random_order = !strcmp(order, "rand");
    if (!random_order && strcmp(order, "seq")) bench_usage_error(prog, "unknown --order '%s'", order);
    int do_calloc = !strcmp(alloc, "calloc") || !strcmp(alloc, "both");
    int do_nodes = !strcmp(alloc, "nodes") || !strcmp(alloc, "both");
    if (!do_calloc && !do_nodes) bench_usage_error(prog, "unknown --alloc '%s'", alloc);
    if (min_ws > max_ws) bench_usage_error(prog, "--min is larger than --max");
    if (min_ws / NODE_BYTES / threads < 2) bench_usage_error(prog, "working set too small for %llu threads",
                                                             (unsigned long long)threads);

    char line[8192], sz[32];
    int len = snprintf(line, sizeof line, "order=%s alloc=%s threads=%llu work=%llu visits=%llu", order, alloc,
                       (unsigned long long)threads, (unsigned long long)work, (unsigned long long)visits);
    for (int mode = 0; mode < 2; mode++) {
        int use_calloc = mode == 1;
        if ((use_calloc && !do_calloc) || (!use_calloc && !do_nodes)) continue;
        const char *name = use_calloc ? "calloc" : "nodes";
        double log_sum = 0;
        int n_sizes = 0;
        for (uint64_t ws = min_ws; ws <= max_ws && n_sizes < MAX_SIZES; ws *= 2, n_sizes++) {
            double ns = run_size(ws, use_calloc, random_order, threads, visits, work, seed);
            printf("# memaccess alloc=%s order=%s ws=%s ns_per_node=%.3f\n", name, order,
                   bench_fmt_size(ws, sz, sizeof sz), ns);
            fflush(stdout);
            log_sum += log(ns);
            len += snprintf(line + len, sizeof line - (size_t)len, " %s_ns@%llu=%.3f", name,
                            (unsigned long long)ws, ns);
        }
        len += snprintf(line + len, sizeof line - (size_t)len, " %s_ns_gmean=%.3f", name, exp(log_sum / n_sizes));
    }
    bench_result("memaccess", "%s check=ok", line);
    return 0;
}
