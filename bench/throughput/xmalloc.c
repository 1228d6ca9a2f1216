/* xmalloc.c: Lever and Boreham's xmalloc-test (malloc-test), as
 * mimalloc-bench runs it (`xmalloc-test -w T -t 5 -s 64`): T allocator
 * threads and T releaser threads for 5 seconds, objects of 64 bytes.
 *
 * An allocator thread mallocs a batch (one malloc of a struct holding
 * --batch pointers, 4096 by default: 32 KiB), fills it with --batch
 * objects of --size bytes (--size 0: sizes drawn from the original's list
 * 8..2048), writes the first min(size, 128) bytes of each, and pushes the
 * batch on a shared LIFO stack (at most 100 batches; a full stack blocks
 * the allocator). A releaser thread pops a batch and frees every object and
 * the batch. So one set of threads allocates and another frees: every free
 * is a free from another thread. After --seconds the threads stop; what is
 * left on the stack is freed by the main thread. The result is frees by the
 * releasers per second.
 *
 * Self-check: object i of a batch holds the byte (i + batch number) & 255 in
 * its written bytes; the releaser checks the first and last written byte.
 * Objects made must equal objects freed (releasers + main thread).
 * Result: RESULT bench=xmalloc threads=T size=B batch=N seconds=S frees=N
 *   mfrees_per_s=X ns_per_free=X check=ok
 * ns_per_free = wall time / frees by releasers (mimalloc-bench's rtime is
 * 100 / (million frees per second), the same up to a constant). */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_common.h"

typedef struct batch {
    struct batch *next;
    uint64_t seq;
    void *obj[];              /* --batch objects */
} batch_t;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    batch_t *top;
    int count, limit;
} batch_stack_t;

typedef struct {
    BENCH_THREAD_RECORD batch_stack_t *st;   /* the record starts on its own lines */
    int id;
    uint64_t size, batch, seed;
    uint64_t objects;          /* made (allocator) or freed (releaser) */
} actor_t;

static const char *prog = "xmalloc";
static atomic_int done_flag;
static const uint64_t sizes[] = {8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048};

static inline size_t written(size_t size) { return size > 128 ? 128 : size; }

/* size 0: random sizes, only the first byte is checked. */
static void free_batch(batch_t *b, uint64_t n, uint64_t size, int who) {
    size_t last = size ? written(size) - 1 : 0;
    for (uint64_t i = 0; i < n; i++) {
        unsigned char *p = b->obj[i];
        unsigned char want = (unsigned char)(i + b->seq);
        if (p[0] != want || p[last] != want) bench_check_failed("releaser %d: object %llu of batch %llu at %p was overwritten", who,
                                             (unsigned long long)i, (unsigned long long)b->seq, (void *)p);
        free(p);
    }
    free(b);
}

static void *allocator_main(void *arg) {
    actor_t *a = arg;
    bench_rng_t rng;
    bench_rng_seed(&rng, a->seed * 131 + (uint64_t)a->id);
    uint64_t seq = (uint64_t)a->id << 40;
    while (!atomic_load_explicit(&done_flag, memory_order_relaxed)) {
        batch_t *b = bench_xmalloc(sizeof *b + a->batch * sizeof(void *));
        b->seq = seq++;
        for (uint64_t i = 0; i < a->batch; i++) {
            size_t s = a->size ? a->size : sizes[bench_rng_below(&rng, sizeof sizes / sizeof sizes[0])];
            unsigned char *p = bench_xmalloc(s);
            memset(p, (int)(unsigned char)(i + b->seq), written(s));
            b->obj[i] = p;
        }
        a->objects += a->batch;
        batch_stack_t *st = a->st;
        pthread_mutex_lock(&st->mu);
        while (st->count >= st->limit && !atomic_load(&done_flag)) pthread_cond_wait(&st->not_full, &st->mu);
        b->next = st->top;
        st->top = b;
        st->count++;
        pthread_cond_signal(&st->not_empty);
        pthread_mutex_unlock(&st->mu);
    }
    return NULL;
}

static void *releaser_main(void *arg) {
    actor_t *a = arg;
    batch_stack_t *st = a->st;
    while (!atomic_load_explicit(&done_flag, memory_order_relaxed)) {
        pthread_mutex_lock(&st->mu);
        while (!st->top && !atomic_load(&done_flag)) pthread_cond_wait(&st->not_empty, &st->mu);
        batch_t *b = st->top;
        if (b) {
            st->top = b->next;
            st->count--;
            pthread_cond_signal(&st->not_full);
        }
        pthread_mutex_unlock(&st->mu);
        if (b) {
            free_batch(b, a->batch, a->size, a->id);
            a->objects += a->batch;
        }
    }
    return NULL;
}

static void usage(void) {
    printf("usage: xmalloc [--threads T] [--seconds S] [--size BYTES] [--batch N] [--seed S]\n"
           "  Lever and Boreham's xmalloc-test: T threads malloc objects in batches of N and\n"
           "  push the batches on a shared stack; T other threads pop and free them.\n"
           "  --size 0 draws sizes from 8..2048 (the original's -s -1).\n"
           "  Defaults (mimalloc-bench's `xmalloc-test -w T -t 5 -s 64`):\n"
           "    --threads 2 --seconds 5 --size 64 --batch 4096 --seed 1\n"
           "  Prints: RESULT bench=xmalloc ... ns_per_free=X check=ok\n");
}

int main(int argc, char **argv) {
    uint64_t threads = 2, size = 64, batch = 4096, seed = 1;
    double seconds = 5.0;
    static const struct option opts[] = {
        {"threads", 1, 0, 't'}, {"seconds", 1, 0, 'S'}, {"size", 1, 0, 'z'}, {"batch", 1, 0, 'B'},
        {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': threads = bench_arg_size(prog, "--threads", optarg, 1, 128); break;
        case 'z': size = bench_arg_size(prog, "--size", optarg, 0, 1u << 20); break;
        case 'B': batch = bench_arg_size(prog, "--batch", optarg, 1, 1u << 20); break;
        case 'S': seconds = bench_arg_seconds(prog, "--seconds", optarg); break;
        case 's': seed = bench_arg_size(prog, "--seed", optarg, 0, UINT64_MAX); break;
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    if (optind < argc) bench_usage_error(prog, "unexpected argument '%s'", argv[optind]);

    batch_stack_t st = {.limit = 100};
    pthread_mutex_init(&st.mu, NULL);
    pthread_cond_init(&st.not_empty, NULL);
    pthread_cond_init(&st.not_full, NULL);
    actor_t *a = bench_scratch_alloc(sizeof *a * 2 * threads);
    pthread_t *tid = bench_scratch_alloc(sizeof *tid * 2 * threads);
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < 2 * threads; i++) {
        a[i] = (actor_t){.st = &st, .id = (int)(i / 2), .size = size, .batch = batch, .seed = seed};
        if (pthread_create(&tid[i], NULL, i % 2 ? allocator_main : releaser_main, &a[i])) {
            perror("pthread_create");
            return 1;
        }
    }
    bench_sleep_s(seconds);
    atomic_store(&done_flag, 1);
    pthread_mutex_lock(&st.mu);
    pthread_cond_broadcast(&st.not_empty);
    pthread_cond_broadcast(&st.not_full);
    pthread_mutex_unlock(&st.mu);
    for (uint64_t i = 0; i < 2 * threads; i++) pthread_join(tid[i], NULL);
    uint64_t wall_ns = bench_now_ns() - t0;
    uint64_t made = 0, freed = 0, left = 0;
    for (uint64_t i = 0; i < 2 * threads; i++) {
        if (i % 2) made += a[i].objects;
        else freed += a[i].objects;
    }
    while (st.top) {
        batch_t *b = st.top;
        st.top = b->next;
        free_batch(b, batch, size, -1);
        left += batch;
    }
    if (made != freed + left || freed == 0)
        bench_check_failed("made %llu objects, releasers freed %llu and %llu were left", (unsigned long long)made,
                           (unsigned long long)freed, (unsigned long long)left);
    bench_result("xmalloc", "threads=%llu size=%llu batch=%llu seconds=%.3f frees=%llu mfrees_per_s=%.3f "
                 "ns_per_free=%.3f check=ok",
                 (unsigned long long)threads, (unsigned long long)size, (unsigned long long)batch, seconds,
                 (unsigned long long)freed, (double)freed * 1e3 / (double)wall_ns, (double)wall_ns / (double)freed);
    return 0;
}
