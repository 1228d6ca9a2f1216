/* test_keptkick.c: the first emptied slab a heap keeps asks for the
 * background thread once a second thread has run (alloc.c,
 * free_local_slow), since its idle drain is all that gives back the kept
 * slabs of a thread that goes idle (docs/allocator.md, "Idle threads'
 * emptied slabs go back too"). A program that only ever uses small blocks
 * never caches a medium span, so nothing else need start it.
 *
 * 1. One thread only: slabs of the 256-byte class filled and emptied; the
 *    heap keeps them, and no background thread starts (a single-threaded
 *    program gets no thread of the allocator's from this).
 * 2. A second thread runs and exits; the main thread empties slabs again:
 *    the free asks for the background thread without starting it (glibc
 *    frees with its stack cache lock held when it joins threads, and
 *    pthread_create takes it), and the next malloc slow path starts it. */
#include <pthread.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"

#define BLOCK_BYTES 256
#define SLABS 3

static void *other(void *arg) {
    void *volatile p = malloc(32);   /* a heap of its own: a second thread has run */
    free(p);
    return arg;
}

/* Fills SLABS slabs of the class and frees every block in order; returns
 * the heap's kept emptied slabs after. */
static unsigned fill_and_empty(unsigned seed) {
    static void *blk[4096];
    unsigned cls = hpm_size_class(BLOCK_BYTES);
    size_t n = _hpm_classes[cls].capacity * SLABS + 1;
    if (n > sizeof blk / sizeof *blk) n = sizeof blk / sizeof *blk;
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) memset(blk[i] = malloc(BLOCK_BYTES), (int)((i + seed) & 0xff), BLOCK_BYTES);
    for (size_t i = 0; i < n; i++) {
        if (((unsigned char *)blk[i])[BLOCK_BYTES - 1] != ((i + seed) & 0xff)) bad++;
        free(blk[i]);
    }
    CHECK(bad == 0, "%u blocks changed", bad);
    return hpm_my_heap()->empty_slabs;
}

int main(void) {
    void *volatile warm = malloc(16);   /* the size classes are set up at the first malloc */
    free(warm);
    unsigned kept = fill_and_empty(1);
    CHECK(kept >= 1, "the heap keeps %u emptied slabs", kept);
    CHECK(atomic_load(&_hpm_background_started) == 0, "one thread, yet the background thread started");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other, NULL) == 0);
    pthread_join(t, NULL);
    hpm_heap_t *h = hpm_my_heap();
    _hpm_heap_release_empty(false);   /* as malloc_trim: the next emptied slab is the first kept again */
    CHECK(h->empty_slabs == 0, "after the trim the heap keeps %u emptied slabs", h->empty_slabs);
    CHECK(atomic_load(&_hpm_background_started) == 0, "the background thread started before the slabs emptied");
    kept = fill_and_empty(2);
    CHECK(kept >= 1, "the heap keeps %u emptied slabs", kept);
    /* never from the free itself (glibc may hold its stack cache lock
     * there, init.c): the free asks, the next malloc slow path starts it */
    CHECK(atomic_load(&_hpm_background_started) == 0 && atomic_load(&_hpm_background_wanted) == 1,
          "the free started the thread (%d) or did not ask for it (%d)", atomic_load(&_hpm_background_started),
          atomic_load(&_hpm_background_wanted));
    void *volatile q = malloc(3000);   /* a class not used yet: the slow path */
    free(q);
    CHECK(atomic_load(&_hpm_background_started) == 1 && atomic_load(&_hpm_background_wanted) == 0,
          "a second thread has run and a slab was kept: no background thread after a malloc");
    char why[256];
    CHECK(_hpm_check_heap(h, why), "heap: %s", why);
    return TEST_DONE();
}
