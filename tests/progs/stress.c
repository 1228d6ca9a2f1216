/* stress.c: a deterministic multi-thread stress test of the process's malloc,
 * in the style of mimalloc's test-stress. Usage: stress [THREADS [SCALE [ITER]]]
 *
 * ITER rounds; each round starts THREADS workers and joins them. A worker
 * runs SCALE*200 random steps (its own seeded generator, so the steps are
 * the same on every run): allocate (malloc, calloc, posix_memalign,
 * aligned_alloc), free, realloc, or exchange a block with a shared transfer
 * array (atomic exchange), so blocks are freed by other threads, often long
 * after the thread that allocated them exited. Every worker also starts and
 * joins short-lived churn threads (25 per worker per round), so a run
 * creates and exits thousands of threads. Sizes are mostly small, some
 * medium (up to 1 MiB), a few large (~4 MiB).
 *
 * Invariant checked: every block carries the pattern of pattern.h from the
 * moment it is written until it is freed; it is checked whenever it is
 * touched (before free, before and after realloc, when received from the
 * transfer array), calloc memory reads zero, alignments hold and
 * malloc_usable_size covers the request. When the process's malloc exports
 * hpm_range (hpmalloc, found with dlsym), every checked block is also looked
 * up from an interior address, which must give its base and a usable size
 * covering it. Prints "N passed, N failed" where
 * N counts block checks; exits 1 on any failure. Plain C + pthreads: runs
 * on any malloc (LD_PRELOAD chooses it). */
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

#define TRANSFER_SLOTS 1000
#define MAX_BLOCK_BYTES (6u << 20)
#define CHURN_PER_WORKER 25
#define MAX_FAIL_MESSAGES 20

static _Atomic(void *) transfer[TRANSFER_SLOTS];
static atomic_ulong checks_passed, checks_failed, threads_created;
static int scale;
typedef bool range_fn_t(const void *p, void **base, size_t *size);
static range_fn_t *range_fn; /* hpm_range when the allocator has one */

static void fail(const char *what, const void *p, size_t size_bytes, long off)
{
    unsigned long n = atomic_fetch_add(&checks_failed, 1);
    if (n < MAX_FAIL_MESSAGES)
        fprintf(stderr, "FAIL %s: block %p size %zu offset %ld\n", what, p, size_bytes, off);
}

static void pass(void) { atomic_fetch_add_explicit(&checks_passed, 1, memory_order_relaxed); }

/* Mostly small (8..~1 KiB, skewed low), 4% medium (up to 1 MiB), 0.1% large. */
static size_t pick_size(pat_rng_t *r)
{
    uint64_t x = pat_rand(r);
    unsigned kind = (unsigned)(x % 1000);
    x >>= 10;
    if (kind < 1) return (size_t)(3u << 20) + (size_t)(x % (2u << 20));
    if (kind < 41) return (size_t)8192 + (size_t)(x % ((1u << 20) - 8192));
    unsigned shift = (unsigned)(x % 8);
    return 8 + (size_t)((x >> 3) % (8u << shift));
}

/* Checks a whole block written at its own address; returns its size or 0. */
static size_t check_block(void *p, const char *where)
{
    size_t size = pat_size(p, (uintptr_t)p);
    if (size < 8 || size > MAX_BLOCK_BYTES) {
        fail(where, p, size, 0);
        return 0;
    }
    long bad = pat_check(p, (uintptr_t)p, size, size);
    if (bad >= 0) {
        fail(where, p, size, bad);
        return 0;
    }
    void *base = NULL;
    size_t usable = 0;
    if (range_fn && (!range_fn((char *)p + size / 2, &base, &usable) || base != p || usable < size)) {
        fail("hpm_range of the block's middle", p, size, (long)usable);
        return 0;
    }
    pass();
    return size;
}

static void check_and_free(void *p, const char *where)
{
    if (!p) return;
    check_block(p, where);
    free(p);
}

static void check_usable(void *p, size_t size)
{
    size_t usable = malloc_usable_size(p);
    if (usable < size) fail("malloc_usable_size < request", p, size, (long)usable);
    else pass();
}

static void check_zero(const unsigned char *p, size_t size)
{
    size_t step = size <= 4096 ? 1 : 61;
    for (size_t i = 0; i < size; i += step)
        if (p[i] != 0) {
            fail("calloc memory not zero", p, size, (long)i);
            return;
        }
    if (p[size - 1] != 0) {
        fail("calloc memory not zero", p, size, (long)size - 1);
        return;
    }
    pass();
}

/* A fresh block of a random size, by a random allocation function. */
static void *alloc_block(pat_rng_t *r)
{
    size_t size = pick_size(r);
    unsigned how = (unsigned)(pat_rand(r) % 16);
    void *p = NULL;
    if (how < 11) {
        p = malloc(size);
    } else if (how < 13) {
        size_t n = 1 + (size_t)(pat_rand(r) % 4), each = (size + n - 1) / n;
        size = n * each;
        p = calloc(n, each);
        if (p) check_zero(p, size);
    } else {
        size_t align = (size_t)16 << (pat_rand(r) % (how == 15 ? 13 : 9)); /* up to 64 KiB */
        if (how == 14) {
            size = (size + align - 1) / align * align; /* C11 asks for a multiple */
            p = aligned_alloc(align, size);
        } else if (posix_memalign(&p, align, size) != 0) {
            p = NULL;
        }
        if (p && (uintptr_t)p % align != 0) fail("misaligned", p, size, (long)align);
    }
    if (!p) {
        fail("allocation returned NULL", NULL, size, errno);
        return NULL;
    }
    if ((pat_rand(r) & 15) == 0) check_usable(p, size);
    pat_fill(p, size);
    return p;
}

static void *realloc_block(pat_rng_t *r, void *p)
{
    size_t old = check_block(p, "before realloc");
    if (!old) return p; /* leave the broken block alone */
    size_t size = pick_size(r);
    uintptr_t old_addr = (uintptr_t)p;
    void *q = realloc(p, size);
    if (!q) {
        fail("realloc returned NULL", p, size, errno);
        return p;
    }
    long bad = pat_check(q, old_addr, old, size);
    if (bad >= 0) fail("realloc lost contents", q, size, bad);
    else pass();
    pat_fill(q, size);
    return q;
}

/* Puts p into a random transfer slot and returns what was there, checked. */
static void *exchange_block(pat_rng_t *r, void *p)
{
    if (p) check_block(p, "before transfer");
    size_t i = (size_t)(pat_rand(r) % TRANSFER_SLOTS);
    void *got = atomic_exchange(&transfer[i], p);
    if (got) check_block(got, "received from transfer");
    return got;
}

/* A short-lived thread: a few small blocks, some handed to the transfer
 * array (to be freed by someone else after this thread is gone). */
static void *churn_main(void *arg)
{
    pat_rng_t r;
    pat_rng_seed(&r, (uint64_t)(uintptr_t)arg);
    void *mine[64];
    size_t n = 16 + (size_t)(pat_rand(&r) % 48);
    for (size_t i = 0; i < n; i++) {
        size_t size = 8 + (size_t)(pat_rand(&r) % 256);
        mine[i] = malloc(size);
        if (!mine[i]) { fail("churn malloc NULL", NULL, size, errno); continue; }
        pat_fill(mine[i], size);
    }
    for (size_t i = 0; i < n; i++) {
        if (!mine[i]) continue;
        if (i % 8 == 0) check_and_free(exchange_block(&r, mine[i]), "churn free");
        else check_and_free(mine[i], "churn free");
    }
    return NULL;
}

static void start_churn(uint64_t seed)
{
    pthread_t t;
    int err = pthread_create(&t, NULL, churn_main, (void *)(uintptr_t)seed);
    if (err) { fail("pthread_create (churn)", NULL, 0, err); return; }
    atomic_fetch_add(&threads_created, 1);
    pthread_join(t, NULL);
}

typedef struct { unsigned tid, round; } worker_arg_t;

static void *worker_main(void *argp)
{
    const worker_arg_t *arg = argp;
    pat_rng_t r;
    pat_rng_seed(&r, (uint64_t)arg->round * 1000003u + arg->tid);
    size_t nlocal = (size_t)scale * 10, steps = (size_t)scale * 200;
    void **local = calloc(nlocal, sizeof *local);
    if (!local) { fail("calloc (local table)", NULL, nlocal, errno); return NULL; }
    size_t churn_every = steps / CHURN_PER_WORKER;
    for (size_t step = 0; step < steps; step++) {
        size_t j = (size_t)(pat_rand(&r) % nlocal);
        unsigned op = (unsigned)(pat_rand(&r) % 100);
        if (op < 45) {
            check_and_free(local[j], "before free (replace)");
            local[j] = alloc_block(&r);
        } else if (op < 60) {
            check_and_free(local[j], "before free");
            local[j] = NULL;
        } else if (op < 75) {
            if (local[j]) local[j] = realloc_block(&r, local[j]);
        } else {
            local[j] = exchange_block(&r, local[j]);
        }
        if (churn_every && step % churn_every == churn_every - 1)
            start_churn(pat_rand(&r));
    }
    for (size_t j = 0; j < nlocal; j++) check_and_free(local[j], "worker exit");
    free(local);
    return NULL;
}

static int parse_arg(const char *s, const char *name, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 1 || v > max) {
        fprintf(stderr, "stress: %s must be an integer in 1..%ld, got '%s'\n", name, max, s);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    long nthreads = 4, sc = 10, iters = 20;
    if (argc > 4 || (argc > 1 && parse_arg(argv[1], "THREADS", 256, &nthreads)) ||
        (argc > 2 && parse_arg(argv[2], "SCALE", 10000, &sc)) ||
        (argc > 3 && parse_arg(argv[3], "ITER", 100000, &iters))) {
        fprintf(stderr, "usage: stress [THREADS [SCALE [ITER]]]\n");
        return 2;
    }
    scale = (int)sc;
    range_fn = (range_fn_t *)dlsym(RTLD_DEFAULT, "hpm_range");
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    worker_arg_t *args = calloc((size_t)nthreads, sizeof *args);
    if (!tids || !args) { fprintf(stderr, "stress: out of memory\n"); return 1; }
    for (long round = 0; round < iters; round++) {
        for (long t = 0; t < nthreads; t++) {
            args[t] = (worker_arg_t){ (unsigned)t, (unsigned)round };
            int err = pthread_create(&tids[t], NULL, worker_main, &args[t]);
            if (err) { fail("pthread_create (worker)", NULL, 0, err); tids[t] = 0; continue; }
            atomic_fetch_add(&threads_created, 1);
        }
        for (long t = 0; t < nthreads; t++)
            if (tids[t]) pthread_join(tids[t], NULL);
    }
    for (size_t i = 0; i < TRANSFER_SLOTS; i++)
        check_and_free(atomic_exchange(&transfer[i], NULL), "final drain");
    free(tids);
    free(args);
    printf("stress: threads=%ld scale=%ld iter=%ld: %lu threads created, %lu blocks checked%s\n",
           nthreads, sc, iters, atomic_load(&threads_created),
           atomic_load(&checks_passed) + atomic_load(&checks_failed),
           range_fn ? " (with hpm_range)" : "");
    printf("%lu passed, %lu failed\n", atomic_load(&checks_passed), atomic_load(&checks_failed));
    return atomic_load(&checks_failed) ? 1 : 0;
}
