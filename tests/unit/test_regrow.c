/* test_regrow.c: realloc of large blocks in place (_hpm_ph_grow_large,
 * _hpm_ph_shrink_span; docs/allocator.md, "realloc").
 *
 * 1. A block of 3 MiB grown 30 times by 212 KiB, with nothing allocated
 *    between the steps, never moves: the pages after it are free (the
 *    free end of its hugepage, then empty or new hugepages). Its contents
 *    survive every step, its usable size and hpm_range follow, and the
 *    pageheap stays consistent.
 * 2. Of two large blocks side by side, the first cannot grow over the
 *    second: it moves, with its contents.
 * 3. Once the second is freed, the first grows over its pages in place.
 * 4. A shrink that stays large keeps the pointer and gives the tail back
 *    (the pageheap's used pages drop); one below the large sizes moves.
 * 5. Two threads grow and shrink buffers at random among other large
 *    blocks, and a third queries them with hpm_range, all at once.
 * 6. Afterwards every page comes home: the pageheap's used pages and the
 *    bytes in use are what they were before the test (within a page).
 * 7. A medium buffer grown by an eighth at a time from 9,000 bytes to
 *    1.5 MB (a string builder's chain), with the span caches on (a
 *    second thread has run): its contents survive every step, usable size
 *    and hpm_range follow, it grows in place at half the steps or more (it
 *    moves twice here: the pages after it are free), and the spans
 *    it leaves go back to the pageheap, not into the thread's cache or
 *    the central one: once the buffer is freed, the pageheap has no more
 *    pages in use than before it (_hpm_ph_grow_medium, realloc_medium_grow).
 * 8. A medium block of 900 KB shrunk to 100 KB keeps its start and its
 *    first 100 KB, and its tail pages go back to the pageheap (its usable
 *    size is its new class's, the used pages drop by the difference);
 *    grown back to 200 KB it stays where it is, over the pages it gave
 *    back. The library before moved it.
 * Before in-place growth, part 1 failed at its first step (every realloc
 * of a large block moved); before medium growth, part 7 found 26 moves
 * in 44 steps and the thread's cache grown from 640 to 916 KiB. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "check.h"
#include "testhelper.h"
#include "heaptest.h"

#define MIB ((size_t)1 << 20)

/* One byte at each multiple of 4 KiB in [from, to). */
static void fill(unsigned char *p, size_t from, size_t to, unsigned seed) {
    for (size_t k = (from + 4095) & ~(size_t)4095; k < to; k += 4096) p[k] = (unsigned char)(seed + k / 4096);
}
/* The bytes fill wrote over [0, n). */
static bool intact(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t k = 0; k < n; k += 4096) if (p[k] != (unsigned char)(seed + k / 4096)) return false;
    return true;
}

static size_t used_pages(void) {
    pthread_mutex_lock(&_hpm_ph.lock);
    size_t n = _hpm_ph.used_pages_total;
    pthread_mutex_unlock(&_hpm_ph.lock);
    return n;
}

static uint64_t bytes_in_use(void) {
    hpm_stats_t st;
    hpm_stats_get(&st);
    return st.bytes_in_use;
}

static void test_grow_alone(void) {
    char why[256] = "";
    size_t n = 3 * MIB + 1234;
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    fill(p, 0, n, 1);
    int moved = 0;
    for (int step = 0; step < 30; step++) {
        size_t m = n + 212 * 1024;
        uintptr_t was = (uintptr_t)p;
        unsigned char *q = realloc(p, m);
        CHECK(q != NULL, "realloc to %zu", m);
        if ((uintptr_t)q != was) moved++;
        CHECK(intact(q, n, 1), "step %d: contents lost", step);
        fill(q, n, m, 1);
        void *base = NULL;
        size_t len = 0;
        CHECK(hpm_range(q + m - 1, &base, &len) && base == q && len >= m, "step %d: hpm_range of the last byte", step);
        CHECK(malloc_usable_size(q) >= m && malloc_usable_size(q) < m + 4096, "step %d: usable %zu for %zu", step,
              malloc_usable_size(q), m);
        p = q;
        n = m;
    }
    CHECK(moved == 0, "the block moved at %d of 30 steps with free pages after it", moved);
    CHECK(intact(p, n, 1), "contents after growth");
    CHECK(ht_pageheap_sound(why), "pageheap after growth: %s", why);
    free(p);
    CHECK(ht_pageheap_sound(why), "pageheap after the free: %s", why);
}

static void test_neighbours(void) {
    char why[256] = "";
    enum { K = 8 };
    unsigned char *b[K];
    for (int i = 0; i < K; i++) {
        b[i] = malloc(4 * MIB);
        CHECK(b[i] != NULL, "malloc 4 MiB #%d", i);
        fill(b[i], 0, 4 * MIB, (unsigned)(10 + i));
    }
    int pair = -1;   /* b[pair] ends where b[pair + 1] starts */
    for (int i = 0; i + 1 < K && pair < 0; i++)
        if (b[i] + 4 * MIB == b[i + 1]) pair = i;
    CHECK(pair >= 0, "no two of %d blocks of 4 MiB side by side", K);
    if (pair < 0) return;
    /* 2: the neighbour is live: the block moves */
    uintptr_t was = (uintptr_t)b[pair];
    unsigned char *q = realloc(b[pair], 5 * MIB);
    CHECK(q != NULL && (uintptr_t)q != was, "realloc over a live neighbour stayed at %#lx", (unsigned long)was);
    CHECK(q && intact(q, 4 * MIB, (unsigned)(10 + pair)), "contents after the move");
    CHECK(intact(b[pair + 1], 4 * MIB, (unsigned)(11 + pair)), "the neighbour changed");
    CHECK(ht_pageheap_sound(why), "pageheap after the move: %s", why);
    /* 3: the neighbour of the moved block's old place is freed; grow the
     * one before the neighbour over it (use a fresh pair: b[pair + 1]
     * follows the place the moved block left, so the same pair again) */
    b[pair] = q;
    unsigned char *r = malloc(4 * MIB);   /* takes the freed place or another */
    CHECK(r != NULL, "malloc 4 MiB");
    fill(r, 0, 4 * MIB, 77);
    int left = -1;   /* a block whose right neighbour we may free */
    for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++)
            if (left < 0 && i != j && b[i] + 4 * MIB == b[j]) { left = i; pair = j; }
    CHECK(left >= 0, "no pair side by side any more");
    if (left >= 0) {
        free(b[pair]);
        b[pair] = NULL;
        uintptr_t at = (uintptr_t)b[left];
        unsigned char *g = realloc(b[left], 7 * MIB);
        CHECK((uintptr_t)g == at, "growth over a freed neighbour moved (%#lx -> %p)", (unsigned long)at, (void *)g);
        CHECK(g && intact(g, 4 * MIB, (unsigned)(10 + left)), "contents after growth over the neighbour");
        if (g) b[left] = g;
        CHECK(ht_pageheap_sound(why), "pageheap after growth over the neighbour: %s", why);
    }
    CHECK(intact(r, 4 * MIB, 77), "the block between changed");
    free(r);
    for (int i = 0; i < K; i++) free(b[i]);
    CHECK(ht_pageheap_sound(why), "pageheap after the frees: %s", why);
}

static void test_shrink(void) {
    char why[256] = "";
    unsigned char *p = malloc(8 * MIB);
    CHECK(p != NULL, "malloc 8 MiB");
    fill(p, 0, 8 * MIB, 30);
    size_t before = used_pages();
    uintptr_t was = (uintptr_t)p;
    unsigned char *q = realloc(p, 2 * MIB);
    CHECK((uintptr_t)q == was, "a shrink that stays large moved (%#lx -> %p)", (unsigned long)was, (void *)q);
    CHECK(malloc_usable_size(q) == 2 * MIB, "usable %zu after the shrink to 2 MiB", malloc_usable_size(q));
    CHECK(intact(q, 2 * MIB, 30), "contents after the shrink");
    CHECK(used_pages() == before - 6 * MIB / 4096, "used pages %zu after the shrink, expected %zu", used_pages(),
          before - 6 * MIB / 4096);
    CHECK(ht_pageheap_sound(why), "pageheap after the shrink: %s", why);
    /* grow it back: the tail it gave back is free again */
    was = (uintptr_t)q;
    unsigned char *g = realloc(q, 6 * MIB);
    CHECK((uintptr_t)g == was, "growth back over its own tail moved");
    CHECK(g && intact(g, 2 * MIB, 30), "contents after the growth back");
    if (g) q = g;
    was = (uintptr_t)q;
    unsigned char *m = realloc(q, 600 * 1024);   /* below the large sizes: a medium span elsewhere */
    CHECK(m != NULL && (uintptr_t)m != was, "a shrink to a medium size stayed");
    CHECK(m && intact(m, 600 * 1024, 30), "contents after the shrink to a medium size");
    free(m);
    CHECK(ht_pageheap_sound(why), "pageheap at the end: %s", why);
}

/* 5: two threads grow and shrink their own large buffers in random steps
 * while they allocate and free other large blocks around them (the
 * pageheap lock orders them; TSan checks it), and a third asks hpm_range
 * about the buffers' last bytes all the while. */
typedef struct {
    unsigned seed;
    unsigned char *buf;   /* read by the querying thread (atomics) */
    size_t len;
    int bad, moves, steps;
} churner_t;

static int churn_done;   /* atomics */

static void *churner(void *arg) {
    churner_t *c = arg;
    unsigned r = c->seed;
    size_t n = 2 * MIB;
    unsigned char *p = malloc(n), *other[4] = {0};
    fill(p, 0, n, c->seed);
    for (int i = 0; i < 300; i++) {
        r = r * 1103515245u + 12345u;
        size_t m = (r >> 8) % 4 == 0 ? 2 * MIB : n + ((r >> 4) % 1024) * 1024 + 4096;
        if (m > 24 * MIB) m = 2 * MIB;
        uintptr_t was = (uintptr_t)p;
        unsigned char *q = realloc(p, m);
        if (!q) { c->bad++; break; }
        c->moves += (uintptr_t)q != was;
        c->steps++;
        if (!intact(q, n < m ? n : m, c->seed)) c->bad++;
        if (m > n) fill(q, n, m, c->seed);
        p = q;
        n = m;
        __atomic_store_n(&c->len, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&c->buf, p, __ATOMIC_RELAXED);
        __atomic_store_n(&c->len, n, __ATOMIC_RELAXED);
        int k = (int)((r >> 12) % 4);
        free(other[k]);
        other[k] = (r >> 16) % 2 ? malloc(MIB + ((r >> 3) % 2048) * 1024) : NULL;
    }
    __atomic_store_n(&c->len, 0, __ATOMIC_RELAXED);
    for (int k = 0; k < 4; k++) free(other[k]);
    free(p);
    return NULL;
}

static void *querier(void *arg) {
    churner_t *cs = arg;
    long answered = 0;
    while (!__atomic_load_n(&churn_done, __ATOMIC_RELAXED)) {
        for (int t = 0; t < 2; t++) {
            unsigned char *b = __atomic_load_n(&cs[t].buf, __ATOMIC_RELAXED);
            size_t len = __atomic_load_n(&cs[t].len, __ATOMIC_RELAXED);
            void *base;
            size_t size;
            if (b && len && hpm_range(b, &base, &size) && base == (void *)b) answered++;
        }
    }
    return (void *)answered;
}

static void test_threads(void) {
    char why[256] = "";
    churner_t cs[2] = {{.seed = 101}, {.seed = 202}};
    pthread_t t[2], q;
    __atomic_store_n(&churn_done, 0, __ATOMIC_RELAXED);
    pthread_create(&q, NULL, querier, cs);
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, churner, &cs[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    __atomic_store_n(&churn_done, 1, __ATOMIC_RELAXED);
    void *answered;
    pthread_join(q, &answered);
    for (int i = 0; i < 2; i++) {
        CHECK(cs[i].bad == 0, "thread %d: %d steps lost contents or failed", i, cs[i].bad);
        CHECK(cs[i].steps == 300, "thread %d made %d of 300 steps", i, cs[i].steps);
        CHECK(cs[i].moves < cs[i].steps, "thread %d: all %d steps moved", i, cs[i].steps);
    }
    CHECK((long)answered > 0, "hpm_range never found a live buffer");
    CHECK(ht_pageheap_sound(why), "pageheap after the threads: %s", why);
}

static void *touch(void *arg) {
    free(malloc(64));
    return arg;
}

static void test_medium_chain(void) {
    char why[256] = "";
    pthread_t t;
    pthread_create(&t, NULL, touch, NULL);   /* a second heap turns the span caches on */
    pthread_join(t, NULL);
    CHECK(__atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED), "span caches off after a second thread");
    size_t n = 9000;
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    fill(p, 0, n, 5);
    hpm_heap_t *h = hpm_my_heap();
    size_t cached0 = h->span_cache_bytes, pages0 = used_pages();
    int moved = 0, steps = 0;
    while (n < 1500000) {   /* medium, then large from 1 MiB */
        size_t m = n + n / 8;
        uintptr_t was = (uintptr_t)p;
        unsigned char *q = realloc(p, m);
        CHECK(q != NULL, "realloc to %zu", m);
        if (!q) break;
        moved += (uintptr_t)q != was;
        steps++;
        CHECK(intact(q, n, 5), "step %d (%zu -> %zu): contents lost", steps, n, m);
        fill(q, n, m, 5);
        void *base = NULL;
        size_t len = 0;
        CHECK(hpm_range(q + m - 1, &base, &len) && base == q && len >= m, "step %d: hpm_range of the last byte", steps);
        CHECK(malloc_usable_size(q) >= m, "step %d: usable %zu for %zu", steps, malloc_usable_size(q), m);
        p = q;
        n = m;
    }
    CHECK(moved <= steps / 2, "moved at %d of %d steps", moved, steps);
    CHECK(h->span_cache_bytes <= cached0, "the chain left %zu bytes in the thread's span cache (%zu before)",
          h->span_cache_bytes, cached0);
    CHECK(intact(p, n, 5), "contents after the chain");
    CHECK(ht_pageheap_sound(why), "pageheap after the chain: %s", why);
    free(p);
    /* cached spans count as used pages: none of the chain's is left in any cache */
    CHECK(used_pages() <= pages0 + 16, "used pages %zu after the chain, %zu before", used_pages(), pages0);
    printf("medium chain: %d steps, %d moves, used pages %zu -> %zu\n", steps, moved, pages0, used_pages());
}

static void test_medium_shrink(void) {
    char why[256] = "";
    size_t n = 900000, m = 100000;
    unsigned char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    if (!p) return;
    fill(p, 0, n, 9);
    size_t usable0 = malloc_usable_size(p), pages0 = used_pages();
    unsigned char *q = realloc(p, m);
    CHECK(q == p, "a shrink from %zu to %zu moved the block", n, m);
    if (!q) return;
    CHECK(intact(q, m, 9), "contents after the shrink");
    size_t usable = malloc_usable_size(q);
    CHECK(usable >= m && usable < m + m / 4 + 4096, "usable %zu after the shrink to %zu", usable, m);
    CHECK(used_pages() + (usable0 - usable) / 4096 == pages0, "used pages %zu after the shrink, %zu before, %zu given back",
          used_pages(), pages0, (usable0 - usable) / 4096);
    void *base = NULL;
    size_t len = 0;
    CHECK(hpm_range(q + m - 1, &base, &len) && base == q && len == usable, "hpm_range after the shrink: %zu", len);
    CHECK(ht_pageheap_sound(why), "pageheap after the shrink: %s", why);
    unsigned char *r = realloc(q, 2 * m);
    CHECK(r == q, "growth back over the pages just given back moved the block");
    if (r) q = r;
    CHECK(intact(q, m, 9), "contents after growing back");
    CHECK(ht_pageheap_sound(why), "pageheap after growing back: %s", why);
    free(q);
}

int main(void) {
    free(malloc(1));   /* the heap exists before the baseline */
    (void)bytes_in_use();   /* and what the first hpm_stats_get keeps */
    printf("test_regrow\n");   /* and stdout's buffer */
    size_t pages0 = used_pages();
    uint64_t bytes0 = bytes_in_use();
    test_grow_alone();
    test_neighbours();
    test_shrink();
    test_threads();
    test_medium_chain();
    test_medium_shrink();
    hpm_trim();
    CHECK(used_pages() <= pages0 + 256, "used pages %zu after the test, %zu before", used_pages(), pages0);
    /* within a page: the counters' own reads (fopen of smaps_rollup) leave a few hundred bytes */
    CHECK(bytes_in_use() < bytes0 + 4096, "bytes in use %llu after the test, %llu before",
          (unsigned long long)bytes_in_use(), (unsigned long long)bytes0);
    return TEST_DONE();
}
