/* test_idledrain.c: the background thread drains the medium span cache
 * of a thread that has gone idle (spancache.c, "the idle drain's gate";
 * heap.c, _hpm_heaps_drain_idle), and never one whose owner is inside it.
 *
 * 1. A thread fills its cache with 2 MiB of 64 KiB spans and waits. The
 *    drain leaves it alone until the thread has been idle for the calls
 *    asked (2), then empties it once; the spans reach the central cache
 *    or the pageheap, every byte of them, the heap stays sound, and the thread, woken, uses
 *    medium blocks again with their contents intact.
 * 2. A thread that churns medium blocks (contents checked on every free)
 *    while the main thread forces drains in a loop: the gate keeps them
 *    apart (run under TSan and ASan by sanitize.sh), some drains find it
 *    outside and empty it, and its heap is sound at the end.
 * 3. A thread frees more small blocks than its slabs hold and waits: it
 *    keeps up to HPM_HEAP_EMPTY_SLABS emptied slabs, which the drain gives back
 *    to the pageheap, every page of them, once the thread is idle; woken,
 *    it allocates and checks small blocks again.
 * The busy thread of 2 also fills and empties small slabs in waves, so
 * that the drains meet its emptied-slab list too.
 * Where the kernel refuses membarrier, the drain must say so and change
 * nothing. */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

#define SPANS 32   /* 8 batches of the 16-page class: the most its stack keeps */
#define SPAN_BYTES (64 << 10)

static sem_t filled, wake, done;
static hpm_heap_t *idle_heap;
static size_t idle_cached;
static int idle_bad;
static char why[256];
static bool idle_heap_ok;

static void fill_pattern(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 512) p[i] = (unsigned char)(seed + i / 512);
    p[n - 1] = (unsigned char)seed;
}
static int pattern_bad(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i += 512) if (p[i] != (unsigned char)(seed + i / 512)) return 1;
    return p[n - 1] != (unsigned char)seed;
}

static void *idle_thread(void *arg) {
    (void)arg;
    void *p[SPANS];
    for (int r = 0; r < 2; r++) {
        for (int i = 0; i < SPANS; i++) fill_pattern(p[i] = malloc(SPAN_BYTES), SPAN_BYTES, (unsigned)i);
        for (int i = 0; i < SPANS; i++) { idle_bad += pattern_bad(p[i], SPAN_BYTES, (unsigned)i); free(p[i]); }
    }
    idle_heap = hpm_my_heap();
    idle_cached = idle_heap->span_cache_bytes;
    sem_post(&filled);
    sem_wait(&wake);   /* idle */
    for (int i = 0; i < SPANS; i++) fill_pattern(p[i] = malloc(SPAN_BYTES), SPAN_BYTES, (unsigned)i + 7);
    for (int i = 0; i < SPANS; i++) { idle_bad += pattern_bad(p[i], SPAN_BYTES, (unsigned)i + 7); free(p[i]); }
    idle_heap_ok = _hpm_check_heap(idle_heap, why);
    sem_post(&done);
    return NULL;
}

#define SMALL_BLOCKS 20000   /* 64-byte blocks: far more slabs than a heap keeps empty */
static hpm_heap_t *small_heap;
static unsigned small_kept;
static size_t small_kept_pages;
static int small_bad;
static bool small_heap_ok;
static char small_why[256];

/* n blocks of size bytes, each filled with its index, then checked and freed */
static int small_wave(void **p, unsigned n, size_t size, unsigned seed) {
    int bad = 0;
    for (unsigned i = 0; i < n; i++) memset(p[i] = malloc(size), (int)((i + seed) & 0xff), size);
    for (unsigned i = 0; i < n; i++) {
        const unsigned char *b = p[i];
        for (size_t k = 0; k < size; k++) if (b[k] != ((i + seed) & 0xff)) { bad++; break; }
        free(p[i]);
    }
    return bad;
}

static void *small_thread(void *arg) {
    (void)arg;
    static void *p[SMALL_BLOCKS];
    small_bad += small_wave(p, SMALL_BLOCKS, 64, 1);
    small_heap = hpm_my_heap();
    small_kept = small_heap->empty_slabs;
    for (unsigned c = 0; c < HPM_CLASSES; c++)
        for (hpm_span_t *s = small_heap->empty[c]; s; s = s->next) small_kept_pages += s->n_pages;
    sem_post(&filled);
    sem_wait(&wake);   /* idle */
    small_bad += small_wave(p, SMALL_BLOCKS, 64, 2);
    small_heap_ok = _hpm_check_heap(small_heap, small_why);
    sem_post(&done);
    return NULL;
}

static atomic_int churn_stop;
static int churn_bad;
static bool churn_heap_ok;
static char churn_why[256];

static void *churn_thread(void *arg) {
    (void)arg;
    uint64_t x = 88172645463325252ull;
    void *p[8] = {0};
    size_t sz[8] = {0};
    static void *small[1500];
    for (unsigned long it = 0; !atomic_load(&churn_stop) || it < 20000; it++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        unsigned k = (unsigned)(x % 8);
        if (p[k]) { churn_bad += pattern_bad(p[k], sz[k], k + (unsigned)sz[k]); free(p[k]); }
        sz[k] = ((size_t)(3 + (x >> 8) % 60)) << 12;   /* 12 KiB .. 252 KiB: medium */
        fill_pattern(p[k] = malloc(sz[k]), sz[k], k + (unsigned)sz[k]);
        if (it % 512 == 0) usleep(50);   /* outside the cache for a while: a drain can take it */
        if (it % 256 == 0) churn_bad += small_wave(small, 1500, 256, (unsigned)it);   /* slabs emptied, kept, taken again */
        if (it > 2000000) break;
    }
    for (unsigned k = 0; k < 8; k++) if (p[k]) { churn_bad += pattern_bad(p[k], sz[k], k + (unsigned)sz[k]); free(p[k]); }
    churn_heap_ok = _hpm_check_heap(hpm_my_heap(), churn_why);
    return NULL;
}

int main(void) {
    void *volatile warm = malloc(64);
    free(warm);
    /* a thread's span cache holds at most a quarter of the heap's used
     * pages (spancache.c, cache_bound): a ballast, never written, makes
     * the heap large enough for the 2 MiB the idle thread frees */
    void *volatile ballast = malloc((size_t)64 << 20);
    CHECK(ballast != NULL);
    bool fence_ok = _hpm_ph.os->fence_all_threads() == 0;
    sem_init(&filled, 0, 0);
    sem_init(&wake, 0, 0);
    sem_init(&done, 0, 0);

    /* 1. an idle thread's cache */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, idle_thread, NULL) == 0);
    sem_wait(&filled);
    CHECK(idle_cached >= (size_t)SPANS / 2 * SPAN_BYTES, "the thread's cache holds %zu bytes", idle_cached);
    size_t central_before = _hpm_transfer_bytes();
    pthread_mutex_lock(&_hpm_ph.lock);
    size_t used_before = _hpm_ph.used_pages_total;
    pthread_mutex_unlock(&_hpm_ph.lock);
    uint64_t drains_before = _hpm_idle_drains;
    _hpm_heaps_drain_idle(2);                                    /* sees its operations: not idle yet */
    _hpm_heaps_drain_idle(2);                                    /* idle for 1 call */
    CHECK(idle_heap->span_cache_bytes == idle_cached && _hpm_idle_drains == drains_before,
          "drained before it was idle for 2 calls (%zu bytes left)", idle_heap->span_cache_bytes);
    bool said = _hpm_heaps_drain_idle(2);                        /* idle for 2: drained */
    CHECK(said == fence_ok, "the drain says %d, membarrier works: %d", said, fence_ok);
    if (fence_ok) {
        CHECK(idle_heap->span_cache_bytes == 0 && _hpm_idle_drains == drains_before + 1,
              "after the drain: %zu bytes cached, %llu drains", idle_heap->span_cache_bytes,
              (unsigned long long)(_hpm_idle_drains - drains_before));
        size_t central_after = _hpm_transfer_bytes();
        pthread_mutex_lock(&_hpm_ph.lock);
        size_t used_after = _hpm_ph.used_pages_total;
        pthread_mutex_unlock(&_hpm_ph.lock);
        size_t moved = (central_after - central_before) + ((used_before - used_after) << HPM_PAGE_SHIFT);
        CHECK(moved == idle_cached, "the spans went to the central cache (%zu -> %zu bytes) or the pageheap (%zu -> %zu pages)",
              central_before, central_after, used_before, used_after);
        _hpm_heaps_drain_idle(2);
        CHECK(_hpm_idle_drains == drains_before + 1, "drained again while still idle");
    } else {
        CHECK(idle_heap->span_cache_bytes == idle_cached, "no fence, yet the cache changed");
    }
    sem_post(&wake);
    sem_wait(&done);
    pthread_join(t, NULL);
    CHECK(idle_bad == 0, "%d blocks changed", idle_bad);
    CHECK(idle_heap_ok, "the idle thread's heap after the drain: %s", why);

    /* 3. an idle thread's emptied slabs */
    CHECK(pthread_create(&t, NULL, small_thread, NULL) == 0);
    sem_wait(&filled);
    CHECK(small_kept >= HPM_HEAP_EMPTY_SLABS / 2 && small_kept <= HPM_HEAP_EMPTY_SLABS && small_kept_pages > 0,
          "the thread keeps %u emptied slabs (%zu pages), bound %d", small_kept, small_kept_pages, HPM_HEAP_EMPTY_SLABS);
    pthread_mutex_lock(&_hpm_ph.lock);
    used_before = _hpm_ph.used_pages_total;
    pthread_mutex_unlock(&_hpm_ph.lock);
    drains_before = _hpm_idle_drains;
    _hpm_heaps_drain_idle(2);
    _hpm_heaps_drain_idle(2);
    CHECK(small_heap->empty_slabs == small_kept, "emptied slabs given back before the thread was idle for 2 calls");
    _hpm_heaps_drain_idle(2);
    pthread_mutex_lock(&_hpm_ph.lock);
    size_t used_now = _hpm_ph.used_pages_total;
    pthread_mutex_unlock(&_hpm_ph.lock);
    if (fence_ok) {
        CHECK(small_heap->empty_slabs == 0 && _hpm_idle_drains == drains_before + 1,
              "after the drain the heap keeps %u emptied slabs (%llu drains)", small_heap->empty_slabs,
              (unsigned long long)(_hpm_idle_drains - drains_before));
        CHECK(used_before - used_now == small_kept_pages, "the pageheap got %zu pages back, the kept slabs had %zu",
              used_before - used_now, small_kept_pages);
    } else {
        CHECK(small_heap->empty_slabs == small_kept && used_now == used_before, "no fence, yet the kept slabs changed");
    }
    sem_post(&wake);
    sem_wait(&done);
    pthread_join(t, NULL);
    CHECK(small_bad == 0, "%d small blocks changed", small_bad);
    CHECK(small_heap_ok, "the small thread's heap after the drain: %s", small_why);

    /* 2. forced drains against a busy owner */
    uint64_t before = _hpm_idle_drains;
    CHECK(pthread_create(&t, NULL, churn_thread, NULL) == 0);
    for (int i = 0; i < 4000; i++) {
        _hpm_heaps_drain_idle(0);
        if (i % 16 == 0) usleep(100);
    }
    atomic_store(&churn_stop, 1);
    pthread_join(t, NULL);
    CHECK(churn_bad == 0, "%d blocks changed under the drains", churn_bad);
    CHECK(churn_heap_ok, "the busy thread's heap: %s", churn_why);
    if (fence_ok) CHECK(_hpm_idle_drains > before, "no drain found the busy thread outside its cache");
    free(ballast);
    return TEST_DONE();
}
