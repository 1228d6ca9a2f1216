/* churn.c: thread generations under mimalloc's test-stress pattern, with
 * max RSS watched. Usage: churn [THREADS [SCALE [ITER]]] (default 2 25 1000).
 *
 * ITER generations; each starts THREADS threads and joins them. A thread
 * allocates (calloc, sizes 8 B .. 1 KiB mostly, 1% ten to a thousand times
 * larger), keeps half of them for its whole life, frees two thirds of the
 * rest at random, and swaps a quarter with a shared transfer array of 1000
 * slots (atomic exchange). So every generation frees objects of threads
 * that exited (through the transfer array), its own objects are freed by
 * the next generation after it exits, and slabs taken over from dead
 * threads are abandoned again when the taking thread exits in turn. After
 * each generation the main thread frees half of the transfer slots.
 *
 * Checks: every object carries its pattern until freed (calloc reads zero);
 * the live data is bounded (at most 1000 transfer objects), so max RSS
 * (VmHWM) at the end must stay within 1.5x + 8 MiB of VmHWM after the
 * first tenth of the run: memory of exited threads is reused, not leaked.
 * Prints the RSS figures and "N passed, N failed". Plain C: any malloc. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testhelper.h"

#define TRANSFERS 1000
static _Atomic(uintptr_t *) transfer[TRANSFERS];
static int scale = 25;
static atomic_long bad_objects;
static const uintptr_t cookie = 0xbf58476d1ce4e5b9ull;

static uintptr_t pick(uintptr_t *r) {
    uintptr_t x = *r;
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    *r = x;
    return x;
}

static int chance(unsigned pct, uintptr_t *r) { return pick(r) % 100 < pct; }

/* An object of n words: word 0 holds n, the rest a pattern of n and i. */
static uintptr_t *alloc_items(size_t n, uintptr_t *r) {
    if (chance(1, r)) n *= chance(10, r) ? 1000 : 100;
    if (n == 0) n = 1;
    uintptr_t *p = calloc(n, sizeof *p);
    if (!p) { atomic_fetch_add(&bad_objects, 1); return NULL; }
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) { atomic_fetch_add(&bad_objects, 1); break; }
    }
    p[0] = n;
    for (size_t i = 1; i < n; i++) p[i] = (n - i) ^ cookie;
    return p;
}

static void free_items(uintptr_t *p) {
    if (!p) return;
    size_t n = p[0];
    for (size_t i = 1; i < n; i++) {
        if (p[i] != ((n - i) ^ cookie)) { atomic_fetch_add(&bad_objects, 1); break; }
    }
    free(p);
}

static void *stress(void *arg) {
    intptr_t tid = (intptr_t)arg;
    uintptr_t r = (uintptr_t)(tid + 1) * 43;
    size_t allocs = 100 * (size_t)scale * (size_t)(tid % 8 + 1);
    size_t retain = allocs / 2;
    uintptr_t **data = calloc(allocs, sizeof *data);
    uintptr_t **retained = calloc(retain + 1, sizeof *retained);
    size_t data_top = 0, retain_top = 0;
    while (allocs > 0 || retain > 0) {
        if (retain == 0 || (chance(50, &r) && allocs > 0)) {
            allocs--;
            data[data_top++] = alloc_items((size_t)1 << (pick(&r) % 5), &r);
        } else {
            retained[retain_top++] = alloc_items((size_t)1 << (pick(&r) % 7), &r);
            retain--;
        }
        if (chance(66, &r) && data_top > 0) {
            size_t i = pick(&r) % data_top;
            free_items(data[i]);
            data[i] = NULL;
        }
        if (chance(25, &r) && data_top > 0) {
            size_t i = pick(&r) % data_top, t = pick(&r) % TRANSFERS;
            data[i] = atomic_exchange(&transfer[t], data[i]);
        }
    }
    for (size_t i = 0; i < retain_top; i++) free_items(retained[i]);
    for (size_t i = 0; i < data_top; i++) free_items(data[i]);
    free(retained);
    free(data);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2;
    scale = argc > 2 ? atoi(argv[2]) : 25;
    int iters = argc > 3 ? atoi(argv[3]) : 1000;
    if (threads < 1 || threads > 256 || scale < 1 || iters < 10) {
        fprintf(stderr, "usage: churn [THREADS(1..256) [SCALE [ITER(>=10)]]]\n");
        return 2;
    }
    uintptr_t r = 12345;
    long hwm_early = -1;
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    for (int n = 0; n < iters; n++) {
        int started = 0;
        for (int t = 0; t < threads; t++)
            if (pthread_create(&tids[t], NULL, stress, (void *)(intptr_t)(n * threads + t)) == 0) started++;
        CHECK(started == threads, "generation %d: started %d of %d threads", n, started, threads);
        for (int t = 0; t < started; t++) pthread_join(tids[t], NULL);
        for (int i = 0; i < TRANSFERS; i++)
            if (chance(50, &r) || n + 1 == iters) free_items(atomic_exchange(&transfer[i], NULL));
        if (n + 1 == iters / 10) hwm_early = th_field_kb("/proc/self/status", "VmHWM");
    }
    long hwm_end = th_field_kb("/proc/self/status", "VmHWM");
    long rss_end = th_field_kb("/proc/self/status", "VmRSS");
    printf("churn %d threads, scale %d, %d generations: VmHWM %ld kB after %d, %ld kB at the end; VmRSS %ld kB\n",
           threads, scale, iters, hwm_early, iters / 10, hwm_end, rss_end);
    CHECK(atomic_load(&bad_objects) == 0, "%ld objects failed their pattern or calloc zero check",
          atomic_load(&bad_objects));
    CHECK(hwm_early > 0 && hwm_end > 0, "VmHWM readable");
    CHECK(hwm_end <= hwm_early * 3 / 2 + 8192,
          "max RSS grew with the generations: %ld kB after %d, %ld kB after %d (memory of exited threads kept)",
          hwm_early, iters / 10, hwm_end, iters);
    free(tids);
    return TEST_DONE();
}
