/* test_linepairs.c: metadata that one thread writes and another reads
 * keeps whole 128-byte line pairs to itself (docs/allocator.md, "A span
 * record is two cache lines, one line pair"): Intel's L2 prefetcher
 * fetches lines in aligned pairs, and two threads' objects in one pair
 * trade lines although they share no byte.
 *
 * Two threads take slabs of many classes in turn, so that their span
 * records come from the metadata allocator interleaved, after metadata
 * objects of 64 bytes have shifted it off a 128-byte boundary. Every
 * record must start on a 128-byte boundary and be one pair long, every
 * heap (and so its inbox) must start on one, the inbox must open a pair
 * of its own, and _hpm_meta_alloc must keep the rule for any object of
 * 128 bytes or more while small ones stay 64-byte aligned. A slab record
 * in its granule's slot starts a slot of HPM_SLOT_BYTES (512) of its own:
 * records of two threads' slabs in neighbouring granules traded lines 128
 * or 256 bytes apart (internal.h, HPM_SLOT_SHIFT: most likely prefetchers
 * that reach past the pair). A slab without a slot (a heap's small first
 * slab of a class of blocks over HPM_SMALL_FIRST_ALWAYS_BYTES, small in a
 * threaded program too) has a pooled record alone in a cell of the same
 * size: none of one thread within 512 bytes of the other's. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include "internal.h"
#include "testhelper.h"

#define ROUNDS 8
#define PER_ROUND 24   /* classes touched per thread per round */

static pthread_barrier_t turn;
static void *blocks[2][ROUNDS * PER_ROUND];
static uintptr_t heaps[2];
static hpm_span_t *early[2];   /* the slab of each thread's first block, perhaps taken before the other had a heap */

static void *worker(void *arg) {
    int id = (int)(intptr_t)arg;
    void *volatile first = malloc(16);   /* volatile: the compiler may not drop the pair */
    early[id] = hpm_span_of(first);
    free(first);
    heaps[id] = (uintptr_t)hpm_my_heap();
    for (int r = 0; r < ROUNDS; r++) {
        if (id == 0) (void)_hpm_meta_alloc(64);   /* a small object between the two threads' records */
        pthread_barrier_wait(&turn);
        if ((r & 1) == id) {   /* take turns, so records alternate between the heaps */
            for (int c = 0; c < PER_ROUND; c++) blocks[id][r * PER_ROUND + c] = malloc(16 + (size_t)(r * PER_ROUND + c) * 40);
        }
        pthread_barrier_wait(&turn);
        if ((r & 1) != id) {
            for (int c = 0; c < PER_ROUND; c++) blocks[id][r * PER_ROUND + c] = malloc(24 + (size_t)(r * PER_ROUND + c) * 40);
        }
    }
    return NULL;
}

int main(void) {
    CHECK(sizeof(hpm_span_t) == 128, "a span record is %zu bytes", sizeof(hpm_span_t));
    CHECK(offsetof(hpm_heap_t, inbox) % 128 == 0, "the inbox is at offset %zu of the heap", offsetof(hpm_heap_t, inbox));
    CHECK(sizeof(hpm_heap_t) - offsetof(hpm_heap_t, inbox) >= 128, "the inbox's pair is shared with what follows");

    pthread_barrier_init(&turn, NULL, 2);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) CHECK(heaps[i] != 0 && heaps[i] % 128 == 0, "heap %d at %#lx", i, (unsigned long)heaps[i]);

    size_t spans = 0, misaligned = 0, missing = 0, off_slot = 0, small_big = 0, unspaced = 0;
    static uintptr_t fixed[2][ROUNDS * PER_ROUND], pooled[2][ROUNDS * PER_ROUND];
    size_t n_fixed[2] = {0, 0}, n_pooled[2] = {0, 0};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < ROUNDS * PER_ROUND; k++) {
            hpm_span_t *s = blocks[i][k] ? hpm_span_of(blocks[i][k]) : NULL;
            if (!s) { missing++; continue; }
            spans++;
            if ((uintptr_t)s % 128) misaligned++;
            if (s->fixed) {
                fixed[i][n_fixed[i]++] = (uintptr_t)s;
                hpm_arena_t *a = _hpm_arena_of_addr(&_hpm_ph, s->start);
                if (!a || s != hpm_arena_slot(a, s->start)) off_slot++;
            } else if (s->kind == SPAN_SLAB && s != early[0] && s != early[1]) {   /* spaced once both heaps exist */
                pooled[i][n_pooled[i]++] = (uintptr_t)s;
                if (!s->spaced) unspaced++;
            }
            if (s->kind == SPAN_SLAB && s->block_bytes > HPM_SMALL_FIRST_ALWAYS_BYTES &&
                s->n_pages < _hpm_classes[s->class_idx].slab_pages)
                small_big++;
        }
    CHECK(missing == 0, "%zu blocks have no span", missing);
    CHECK(n_fixed[0] > 0 && n_fixed[1] > 0 && off_slot == 0, "%zu records in granule slots are not their granule's slot", off_slot);
    /* the two threads' slab records, in granule slots: none within 512
     * bytes of another (their slabs sit in neighbouring granules) */
    uintptr_t closest = UINTPTR_MAX;
    for (size_t x = 0; x < n_fixed[0]; x++)
        for (size_t y = 0; y < n_fixed[1]; y++) {
            uintptr_t d = fixed[0][x] > fixed[1][y] ? fixed[0][x] - fixed[1][y] : fixed[1][y] - fixed[0][x];
            if (d != 0 && d < closest) closest = d;   /* 0: one slab, adopted by the thread that lived on */
        }
    CHECK(closest >= 512, "two threads' slab records %lu bytes apart", (unsigned long)closest);
    /* the same for pooled slab records (slabs without a slot) */
    CHECK(small_big > 0, "no small first slab of a class over %d bytes in a threaded program", HPM_SMALL_FIRST_ALWAYS_BYTES);
    CHECK(n_pooled[0] > 0 && n_pooled[1] > 0 && unspaced == 0, "pooled slab records %zu and %zu, %zu not spaced",
          n_pooled[0], n_pooled[1], unspaced);
    closest = UINTPTR_MAX;
    for (size_t x = 0; x < n_pooled[0]; x++)
        for (size_t y = 0; y < n_pooled[1]; y++) {
            uintptr_t d = pooled[0][x] > pooled[1][y] ? pooled[0][x] - pooled[1][y] : pooled[1][y] - pooled[0][x];
            if (d != 0 && d < closest) closest = d;
        }
    CHECK(closest >= 512, "two threads' pooled slab records %lu bytes apart", (unsigned long)closest);
    CHECK(spans == 2 * ROUNDS * PER_ROUND && misaligned == 0, "%zu of %zu span records off a 128-byte boundary", misaligned, spans);

    size_t small_odd = 0, big_odd = 0;
    for (int i = 0; i < 64; i++) {
        uintptr_t a = (uintptr_t)_hpm_meta_alloc(64), b = (uintptr_t)_hpm_meta_alloc(128 + 64 * (size_t)(i % 3));
        if (!a || a % 64) small_odd++;
        if (!b || b % 128) big_odd++;
    }
    CHECK(small_odd == 0, "%zu 64-byte objects misaligned", small_odd);
    CHECK(big_odd == 0, "%zu objects of 128 bytes or more off a 128-byte boundary", big_odd);

    for (int i = 0; i < 2; i++)
        for (int k = 0; k < ROUNDS * PER_ROUND; k++) free(blocks[i][k]);
    return TEST_DONE();
}
