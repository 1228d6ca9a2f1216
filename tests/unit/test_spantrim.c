/* test_spantrim.c: a busy thread's span cache gives back the spans it
 * has not touched for a while (spancache.c, "the trim"): each stack's
 * low-water mark since the last trim says how many spans at its bottom
 * went unused, and a trim (at most every HPM_SPANCACHE_TRIM_NS, looked
 * at every 64th cache operation) sends half of them to the central
 * cache.
 *
 * The thread fills the stack of the 64 KiB class with 32 freed spans,
 * then for up to 5 s works with two other classes only: 20 KiB blocks
 * one at a time, 12 KiB blocks 8 at a time (all 8 freed each cycle).
 *   - the unused 64 KiB stack is halved trim after trim, down to at most
 *     a quarter;
 *   - the 12 KiB stack keeps at least the 8 spans each cycle takes;
 *   - every block's contents are intact, and the heap (its cache counts)
 *     sound. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "caching_on.h"
#include "internal.h"
#include "testhelper.h"

#define IDLE_SPANS 32
#define DEEP 8

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static unsigned stack_of_bytes(hpm_heap_t *h, size_t bytes) {
    return h->span_cache_n[hpm_medium_class(bytes >> HPM_PAGE_SHIFT)];
}

static int fill_check(unsigned char *p, size_t n, unsigned seed, bool check) {
    int bad = 0;
    for (size_t i = 0; i < n; i += 1024) {
        if (check) bad += p[i] != (unsigned char)(seed + i / 1024);
        else p[i] = (unsigned char)(seed + i / 1024);
    }
    return bad;
}

int main(void) {
    CHECK(caching_on_start() == 0);   /* a second thread has run: medium spans are cached from now on */
    void *volatile ballast = malloc(CACHING_BALLAST_BYTES);   /* room in the cache for the 2 MiB of 64 KiB spans below */
    CHECK(ballast != NULL);
    void *idle[IDLE_SPANS];
    for (int i = 0; i < IDLE_SPANS; i++) memset(idle[i] = malloc(64 << 10), i, 64 << 10);
    for (int i = 0; i < IDLE_SPANS; i++) free(idle[i]);
    hpm_heap_t *h = hpm_my_heap();
    unsigned idle_before = stack_of_bytes(h, 64 << 10);
    CHECK(idle_before >= IDLE_SPANS / 2, "the 64 KiB stack holds %u spans after %d frees", idle_before, IDLE_SPANS);

    int bad = 0;
    unsigned min_deep_after = ~0u;
    double start = now_s();
    unsigned cycles = 0;
    while (now_s() - start < 5.0) {
        void *one = malloc(20 << 10), *deep[DEEP];
        fill_check(one, 20 << 10, cycles, false);
        for (int i = 0; i < DEEP; i++) fill_check(deep[i] = malloc(12 << 10), 12 << 10, cycles + (unsigned)i, false);
        for (int i = 0; i < DEEP; i++) { bad += fill_check(deep[i], 12 << 10, cycles + (unsigned)i, true); free(deep[i]); }
        bad += fill_check(one, 20 << 10, cycles, true);
        free(one);
        unsigned deep_now = stack_of_bytes(h, 12 << 10);
        if (now_s() - start > 0.2 && deep_now < min_deep_after) min_deep_after = deep_now;
        cycles++;
        if (now_s() - start > 0.4 && stack_of_bytes(h, 64 << 10) <= idle_before / 4) break;
        usleep(200);
    }
    unsigned idle_after = stack_of_bytes(h, 64 << 10);
    CHECK(idle_after <= idle_before / 4, "the unused 64 KiB stack holds %u of its %u spans after %.2f s (%u cycles)",
          idle_after, idle_before, now_s() - start, cycles);
    CHECK(min_deep_after >= DEEP, "the 12 KiB stack, %d spans deep each cycle, fell to %u", DEEP, min_deep_after);
    CHECK(bad == 0, "%d blocks changed", bad);
    char why[256];
    CHECK(_hpm_check_heap(h, why), "heap: %s", why);
    free(ballast);
    return TEST_DONE();
}
