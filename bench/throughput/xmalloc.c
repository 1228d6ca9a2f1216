/* xmalloc.c: producer/consumer allocation (after Lever and Boreham's
 * xmalloc-test): --threads producer threads malloc blocks of sizes uniform
 * in [--min, --max], stamp them and pass them in malloc'd batches of
 * --batch pointers through a bounded shared queue to --threads consumer
 * threads, which check and free them. Every block and every batch is freed
 * by a different thread from the one that allocated it: the remote-free
 * path of the allocator.
 *
 * Self-check: consumers check each stamp; the number of blocks freed and
 * the sum of their tags must equal what the producers made.
 * Result: RESULT bench=xmalloc threads=T blocks=N batch=B min=B max=B
 *         mops=X ns_per_block=X check=ok
 * (mops: blocks per wall-clock microsecond; ns_per_block: wall / blocks). */
#include <getopt.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "bench_common.h"
#include "bench_stamp.h"

typedef struct batch {
    struct batch *next;
    uint64_t n;
    void *blk[];              /* n blocks; block i's size and tag are in its stamp */
} batch_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    batch_t *head, *tail;
    uint64_t queued, max_queued;
    int producers_left;
} queue_t;

typedef struct {
    queue_t *q;
    int id;
    uint64_t n_blocks, batch, min_b, max_b, seed;
    uint64_t tag_sum, count;   /* made (producer) or freed (consumer) */
} actor_t;

static const char *prog = "xmalloc";

/* A block carries its size in its first 8 bytes (blocks are >= 16 bytes)
 * and a stamp over the rest, so the consumer can check it. */
static void *make_block(size_t size, uint64_t tag) {
    unsigned char *p = bench_xmalloc(size);
    uint64_t sz = size;
    memcpy(p, &sz, 8);
    bench_stamp(p + 8, size - 8, tag);
    return p;
}

static uint64_t check_block(void *blk, int id) {
    unsigned char *p = blk;
    uint64_t size, tag;
    memcpy(&size, p, 8);
    memcpy(&tag, p + 8, 8);
    if (size < 16 || size > (1u << 30) || !bench_stamp_ok(p + 8, size - 8, tag))
        bench_check_failed("consumer %d: block at %p was overwritten", id, blk);
    return tag;
}

static void *producer_main(void *arg) {
    actor_t *a = arg;
    bench_rng_t rng;
    bench_rng_seed(&rng, a->seed * 7 + (uint64_t)a->id);
    for (uint64_t done = 0; done < a->n_blocks;) {
        uint64_t n = a->n_blocks - done < a->batch ? a->n_blocks - done : a->batch;
        batch_t *b = bench_xmalloc(sizeof *b + n * sizeof(void *));
        b->n = n;
        b->next = NULL;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t tag = bench_rng_next(&rng);
            b->blk[i] = make_block((size_t)bench_rng_range(&rng, a->min_b, a->max_b), tag);
            a->tag_sum += tag;
        }
        done += n;
        a->count += n;
        pthread_mutex_lock(&a->q->mu);
        while (a->q->queued >= a->q->max_queued) pthread_cond_wait(&a->q->not_full, &a->q->mu);
        if (a->q->tail) a->q->tail->next = b; else a->q->head = b;
        a->q->tail = b;
        a->q->queued++;
        pthread_cond_signal(&a->q->not_empty);
        pthread_mutex_unlock(&a->q->mu);
    }
    pthread_mutex_lock(&a->q->mu);
    a->q->producers_left--;
    pthread_cond_broadcast(&a->q->not_empty);
    pthread_mutex_unlock(&a->q->mu);
    return NULL;
}

static void *consumer_main(void *arg) {
    actor_t *a = arg;
    for (;;) {
        pthread_mutex_lock(&a->q->mu);
        while (!a->q->head && a->q->producers_left > 0) pthread_cond_wait(&a->q->not_empty, &a->q->mu);
        batch_t *b = a->q->head;
        if (b) {
            a->q->head = b->next;
            if (!a->q->head) a->q->tail = NULL;
            a->q->queued--;
            pthread_cond_signal(&a->q->not_full);
        }
        pthread_mutex_unlock(&a->q->mu);
        if (!b) return NULL;
        for (uint64_t i = 0; i < b->n; i++) {
            a->tag_sum += check_block(b->blk[i], a->id);
            free(b->blk[i]);
        }
        a->count += b->n;
        free(b);
    }
}

static void usage(void) {
    printf("usage: xmalloc [--threads T] [--blocks N] [--batch B] [--min BYTES] [--max BYTES] [--seed S]\n"
           "  T producers malloc N blocks each and hand them in batches of B to T consumers\n"
           "  that free them (frees across threads).\n"
           "  Defaults: --threads 1 --blocks 2M --batch 256 --min 16 --max 256 --seed 1\n"
           "  Prints: RESULT bench=xmalloc ... mops=X ns_per_block=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 1, blocks = 2u << 20, batch = 256, min_b = 16, max_b = 256, seed = 1;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"blocks", 1, 0, 'n'}, {"batch", 1, 0, 'B'}, {"min", 1, 0, 'a'},
        {"max", 1, 0, 'b'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 128); break;
        case 'n': blocks = bench_arg_size(prog, "--blocks", optarg, 1, 1ull << 40); break;
        case 'B': batch = bench_arg_size(prog, "--batch", optarg, 1, 1u << 20); break;
        case 'a': min_b = bench_arg_size(prog, "--min", optarg, 16, 1u << 30); break;
        case 'b': max_b = bench_arg_size(prog, "--max", optarg, 16, 1u << 30); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);
    if (min_b > max_b) bench_usage_error(prog, "--min is larger than --max");

    queue_t q = {.max_queued = 64, .producers_left = (int)threads};
    pthread_mutex_init(&q.mu, NULL);
    pthread_cond_init(&q.not_empty, NULL);
    pthread_cond_init(&q.not_full, NULL);
    actor_t *a = bench_scratch_alloc(sizeof *a * 2 * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * 2 * threads);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < 2 * threads; i++) {
        a[i] = (actor_t){.q = &q, .id = (int)(i % threads), .n_blocks = blocks, .batch = batch,
                         .min_b = min_b, .max_b = max_b, .seed = seed};
        if (pthread_create(&tid[i], NULL, i < threads ? producer_main : consumer_main, &a[i])) {
            perror("pthread_create");
            return 1;
        }
    }
    for (uint64_t i = 0; i < 2 * threads; i++) pthread_join(tid[i], NULL);
    uint64_t wall_ns = bench_now_ns() - t0;
    uint64_t made = 0, freed = 0, made_sum = 0, freed_sum = 0;
    for (uint64_t i = 0; i < threads; i++) { made += a[i].count; made_sum += a[i].tag_sum; }
    for (uint64_t i = threads; i < 2 * threads; i++) { freed += a[i].count; freed_sum += a[i].tag_sum; }
    if (made != blocks * threads || freed != made || freed_sum != made_sum)
        bench_check_failed("made %llu blocks, freed %llu, tag sums %016llx vs %016llx", (unsigned long long)made,
                           (unsigned long long)freed, (unsigned long long)made_sum, (unsigned long long)freed_sum);
    bench_result("xmalloc", "threads=%llu blocks=%llu batch=%llu min=%llu max=%llu mops=%.3f ns_per_block=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)made, (unsigned long long)batch,
                 (unsigned long long)min_b, (unsigned long long)max_b, (double)made * 1e3 / (double)wall_ns,
                 (double)wall_ns / (double)made);
    return 0;
}
