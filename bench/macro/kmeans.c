/* kmeans.c: pthreads k-means over generated points (after the Phoenix /
 * COZ kmeans the research ran). Every point and every centroid is its own
 * malloc'd vector of --dims int32 coordinates; every iteration starts
 * --threads workers, each of which allocates its partial sums, assigns its
 * share of the points to the nearest centroid and adds them up; the main
 * thread merges the sums into new centroids. Arithmetic is integer only, so
 * the result is exact and independent of thread count and scheduling: the
 * final assignment checksum must be identical under every allocator (the
 * driver compares it across allocators).
 *
 * Self-check: when the loop ends, every point's cluster must be its nearest
 * centroid (recomputed serially, ties to the lowest index) and the cluster
 * sizes must add up to the number of points.
 *
 * --sweep runs cluster counts 16, 64, 256, 1000, 2000 (or --sweep-list).
 * Result: RESULT bench=kmeans points=N dims=D threads=T ks=K1,K2,...
 *         ms_kK=X iters_kK=N ... total_ms=X checksum=HEX check=ok */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

#define MAX_K_LIST 16
#define COORD_RANGE 1000

typedef struct {
    int32_t **points, **means;
    int *cluster;
    int n_points, dims, k, threads;
} problem_t;

typedef struct {
    const problem_t *pb;
    int first, last;          /* points [first, last) */
    int64_t *sums;            /* k * dims, malloc'd by the worker */
    int64_t *counts;          /* k */
    int changed;
} worker_t;

static const char *prog = "kmeans";

static inline int nearest(const problem_t *pb, const int32_t *pt) {
    int best = 0;
    int64_t best_d = INT64_MAX;
    for (int c = 0; c < pb->k; c++) {
        const int32_t *m = pb->means[c];
        int64_t d = 0;
        for (int j = 0; j < pb->dims; j++) { int64_t t = pt[j] - m[j]; d += t * t; }
        if (d < best_d) { best_d = d; best = c; }
    }
    return best;
}

static void *worker_main(void *arg) {
    worker_t *w = arg;
    const problem_t *pb = w->pb;
    w->sums = calloc((size_t)pb->k * (size_t)pb->dims, sizeof *w->sums);
    w->counts = calloc((size_t)pb->k, sizeof *w->counts);
    if (!w->sums || !w->counts) { fprintf(stderr, "kmeans: out of memory\n"); exit(4); }
    w->changed = 0;
    for (int i = w->first; i < w->last; i++) {
        int c = nearest(pb, pb->points[i]);
        if (c != pb->cluster[i]) { pb->cluster[i] = c; w->changed++; }
        int64_t *s = w->sums + (size_t)c * (size_t)pb->dims;
        for (int j = 0; j < pb->dims; j++) s[j] += pb->points[i][j];
        w->counts[c]++;
    }
    return NULL;
}

/* One assignment step in parallel; then (if update) new means. Returns the
 * number of points whose cluster changed. */
static int step(problem_t *pb, int update) {
    worker_t w[64];
    pthread_t tid[64];
    int per = (pb->n_points + pb->threads - 1) / pb->threads;
    for (int t = 0; t < pb->threads; t++) {
        int first = t * per, last = first + per > pb->n_points ? pb->n_points : first + per;
        w[t] = (worker_t){.pb = pb, .first = first < last ? first : last, .last = last};
        if (pthread_create(&tid[t], NULL, worker_main, &w[t])) { perror("pthread_create"); exit(1); }
    }
    int changed = 0;
    for (int t = 0; t < pb->threads; t++) { pthread_join(tid[t], NULL); changed += w[t].changed; }
    if (update) {
        for (int c = 0; c < pb->k; c++) {
            int64_t cnt = 0;
            for (int t = 0; t < pb->threads; t++) cnt += w[t].counts[c];
            if (cnt == 0) continue;   /* an empty cluster keeps its centroid */
            for (int j = 0; j < pb->dims; j++) {
                int64_t s = 0;
                for (int t = 0; t < pb->threads; t++) s += w[t].sums[(size_t)c * (size_t)pb->dims + (size_t)j];
                pb->means[c][j] = (int32_t)(s / cnt);
            }
        }
    }
    for (int t = 0; t < pb->threads; t++) { free(w[t].sums); free(w[t].counts); }
    return changed;
}

static int32_t **gen_points(int n, int dims, uint64_t seed) {
    bench_rng_t rng;
    bench_rng_seed(&rng, seed);
    int n_blobs = 37;
    int32_t centers[37][64];
    for (int b = 0; b < n_blobs; b++)
        for (int j = 0; j < dims; j++) centers[b][j] = (int32_t)bench_rng_below(&rng, COORD_RANGE);
    int32_t **pts = bench_xmalloc(sizeof *pts * (size_t)n);
    for (int i = 0; i < n; i++) {
        pts[i] = bench_xmalloc(sizeof **pts * (size_t)dims);
        int b = (int)bench_rng_below(&rng, (uint64_t)n_blobs);
        for (int j = 0; j < dims; j++) {
            int32_t v = centers[b][j] + (int32_t)bench_rng_below(&rng, 121) - 60;
            pts[i][j] = v < 0 ? 0 : v >= COORD_RANGE ? COORD_RANGE - 1 : v;
        }
    }
    return pts;
}

/* k-means for one cluster count; returns iterations; folds into *sum. */
static int run_k(int32_t **pts, int n, int dims, int k, int threads, int max_iters, uint64_t *sum) {
    problem_t pb = {.points = pts, .n_points = n, .dims = dims, .k = k, .threads = threads};
    pb.means = bench_xmalloc(sizeof *pb.means * (size_t)k);
    pb.cluster = bench_xmalloc(sizeof *pb.cluster * (size_t)n);
    for (int c = 0; c < k; c++) {
        pb.means[c] = bench_xmalloc(sizeof **pb.means * (size_t)dims);
        memcpy(pb.means[c], pts[(int64_t)c * n / k], sizeof **pb.means * (size_t)dims);
    }
    for (int i = 0; i < n; i++) pb.cluster[i] = -1;
    int it = 0;
    while (it < max_iters) {
        it++;
        int changed = step(&pb, it < max_iters);
        if (changed == 0) break;
    }
    /* self-check: every point sits in its nearest cluster */
    int64_t total = 0;
    int64_t *sizes = calloc((size_t)k, sizeof *sizes);
    if (!sizes) { fprintf(stderr, "kmeans: out of memory\n"); exit(4); }
    for (int i = 0; i < n; i++) {
        int c = nearest(&pb, pts[i]);
        if (c != pb.cluster[i]) bench_check_failed("k=%d: point %d is in cluster %d, nearest is %d", k, i,
                                                   pb.cluster[i], c);
        sizes[c]++;
    }
    for (int c = 0; c < k; c++) total += sizes[c];
    if (total != n) bench_check_failed("k=%d: cluster sizes add up to %lld, not %d", k, (long long)total, n);
    uint64_t h = bench_mix64((uint64_t)k);
    for (int i = 0; i < n; i++) h = bench_mix64(h ^ (uint64_t)pb.cluster[i] ^ ((uint64_t)i << 32));
    for (int c = 0; c < k; c++)
        for (int j = 0; j < dims; j++) h = bench_mix64(h + (uint64_t)(uint32_t)pb.means[c][j]);
    *sum ^= h;
    free(sizes);
    for (int c = 0; c < k; c++) free(pb.means[c]);
    free(pb.means);
    free(pb.cluster);
    return it;
}

static void usage(void) {
    printf("usage: kmeans [--points N] [--dims D] [--clusters K | --sweep | --sweep-list K1,K2,...]\n"
           "              [--threads T] [--iters MAX] [--seed S]\n"
           "  Integer k-means with pthreads; each point and centroid is its own malloc'd vector.\n"
           "  --sweep  cluster counts 16,64,256,1000,2000\n"
           "  Defaults: --points 16384 --dims 8 --clusters 256 --threads 2 --iters 10 --seed 1\n"
           "  Prints: RESULT bench=kmeans ... ms_kK=X ... total_ms=X checksum=HEX check=ok\n");
}

static int parse_k_list(const char *s, int *ks) {
    int n = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_K_LIST) bench_usage_error(prog, "at most %d cluster counts", MAX_K_LIST);
        ks[n++] = (int)bench_arg_size(prog, "--sweep-list", tok, 1, 1000000);
    }
    if (n == 0) bench_usage_error(prog, "--sweep-list is empty");
    return n;
}

int main(int argc, char **argv) {
    uint64_t n = 16384, dims = 8, threads = 2, iters = 10, seed = 1;
    int ks[MAX_K_LIST] = {256}, n_k = 1;
    static const struct option opts[] = {
        {"points", 1, 0, 'n'}, {"dims", 1, 0, 'd'}, {"clusters", 1, 0, 'k'}, {"sweep", 0, 0, 'S'},
        {"sweep-list", 1, 0, 'L'}, {"threads", 1, 0, 't'}, {"iters", 1, 0, 'i'}, {"seed", 1, 0, 's'},
        {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': n = bench_arg_size(prog, "--points", optarg, 2, 100000000); break;
        case 'd': dims = bench_arg_size(prog, "--dims", optarg, 1, 64); break;
        case 'k': ks[0] = (int)bench_arg_size(prog, "--clusters", optarg, 1, 1000000); n_k = 1; break;
        case 'S': n_k = parse_k_list("16,64,256,1000,2000", ks); break;
        case 'L': n_k = parse_k_list(optarg, ks); break;
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 64); break;
        case 'i': iters = bench_arg_size(prog, "--iters", optarg, 1, 100000); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    for (int i = 0; i < n_k; i++)
        if ((uint64_t)ks[i] > n) bench_usage_error(prog, "%d clusters for %llu points", ks[i], (unsigned long long)n);

    int32_t **pts = gen_points((int)n, (int)dims, seed);
    char line[4096], klist[256];
    int len = 0, kl = 0;
    line[0] = klist[0] = 0;
    uint64_t checksum = 0, t_all = bench_now_ns();
    for (int i = 0; i < n_k; i++) {
        uint64_t t0 = bench_now_ns();
        int it = run_k(pts, (int)n, (int)dims, ks[i], (int)threads, (int)iters, &checksum);
        double ms = (double)(bench_now_ns() - t0) / 1e6;
        printf("# kmeans k=%d iterations=%d ms=%.3f\n", ks[i], it, ms);
        len += snprintf(line + len, sizeof line - (size_t)len, " ms_k%d=%.3f iters_k%d=%d", ks[i], ms, ks[i], it);
        kl += snprintf(klist + kl, sizeof klist - (size_t)kl, "%s%d", i ? "," : "", ks[i]);
    }
    double total_ms = (double)(bench_now_ns() - t_all) / 1e6;
    for (uint64_t i = 0; i < n; i++) free(pts[i]);
    free(pts);
    bench_result("kmeans", "points=%llu dims=%llu threads=%llu ks=%s%s total_ms=%.3f checksum=%016llx check=ok",
                 (unsigned long long)n, (unsigned long long)dims, (unsigned long long)threads, klist, line,
                 total_ms, (unsigned long long)checksum);
    return 0;
}
