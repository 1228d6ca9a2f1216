/* spancache.c: the per-thread cache of medium spans (8 KiB to 1 MiB), so
 * that programs that churn medium objects take no lock for most mallocs
 * and frees. Medium requests are rounded up to one of HPM_MEDIUM_CLASSES
 * page counts (4 per power of two, internal.h); per class the thread
 * keeps a LIFO list of free spans. An empty list refills with a batch
 * from the central cache (transfer.c), which refills from the pageheap
 * (the first refills of a class with 1, 2, 4, ... spans: slow start); a
 * list longer than two batches, or a cache over HPM_SPANCACHE_MAX_BYTES,
 * drains a batch back. Thread exit returns the cache to the central
 * cache; malloc_trim/hpm_trim return it to the pageheap.
 *
 * The lists link spans by cache_next and mark them with cached, both on
 * the first line of the record, where start, kind and n_pages are: a
 * medium malloc or free served here reads and writes that one line, and
 * a malloc prefetches the line of the span it leaves at the head (the
 * pop of a cold record was a third of this file's time in glibc-bench
 * large; with both, 80.9 -> 76.6 ns per iteration, 9 interleaved rounds).
 *
 * Invariant: a span on a thread's list is SPAN_MEDIUM with exactly its
 * class's page count, keeps its pages and page-map entries, and has
 * cached set, so free() reports a double free of it and hpm_range()
 * treats it as free; span_cache_n and span_cache_bytes count the lists.
 * Owner thread only. */
#include "internal.h"

static inline bool is_medium_pages(size_t n_pages) {
    return n_pages >= 3 && n_pages < HPM_LARGE_MIN_PAGES;
}

/* Takes up to n spans off the thread's list of cls, as a chain. */
static hpm_span_t *take(hpm_heap_t *h, unsigned cls, unsigned n, unsigned *got) {
    hpm_span_t *chain = h->span_cache[cls], *s = chain, *last = NULL;
    unsigned k = 0;
    for (; s && k < n; k++) { last = s; s = s->cache_next; }
    if (last) last->cache_next = NULL;
    h->span_cache[cls] = s;
    h->span_cache_n[cls] = (uint8_t)(h->span_cache_n[cls] - k);
    h->span_cache_bytes -= (size_t)k * (hpm_medium_pages(cls) << HPM_PAGE_SHIFT);
    *got = k;
    return k ? chain : NULL;
}

/* A batch (or all) of the thread's spans of cls to the central cache. */
static void drain(hpm_heap_t *h, unsigned cls, unsigned n) {
    unsigned got;
    hpm_span_t *chain = take(h, cls, n, &got);
    if (chain) _hpm_transfer_put(cls, chain, got);
}

/* Until the heap first grows past HPM_SMALL_HEAP_PAGES, and while only
 * one thread allocates, medium spans are not cached at all: each is taken
 * from and given back to the pageheap (one uncontended lock), where a
 * freed span's pages, already written, serve the next span of any size,
 * as glibc's free lists do. Per-class caches would hold one or two written
 * spans of every class used once: python3 -c pass freed spans of some 15
 * classes after start-up, 0.7 MiB of written pages left in the thread's
 * cache (issue 11 item 6: a heap under a few MiB costs no more than
 * glibc's plus 1 MiB). A second thread turns the caches on, so that
 * threads never meet at the pageheap lock per medium object (item 7). The
 * switch is one-way, so a program whose heap shrinks and grows again
 * (threads that come and go: mstress) keeps its caches. */
static inline bool medium_caching_on(void) { return __atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED); }

hpm_span_t *_hpm_spancache_get(hpm_heap_t *h, size_t n_pages) {
    if (!is_medium_pages(n_pages)) return NULL;
    unsigned cls = hpm_medium_class(n_pages);
    hpm_span_t *s = h->span_cache[cls];
    if (unlikely(!s)) {
        if (!medium_caching_on()) return NULL;   /* the caller takes an exact span from the pageheap */
        /* Slow start: the first refills of a class take 1, 2, 4, ... spans,
         * up to the full batch, so a program that asks for a medium size
         * once or twice (python3 -c pass) does not hold a whole batch of
         * it (a batch of the largest classes is 2 MiB). */
        unsigned got, want = hpm_medium_batch(cls), r = h->span_refills[cls];
        if (r < 8 && (1u << r) < want) want = 1u << r;
        if (r < 255) h->span_refills[cls] = (uint8_t)(r + 1);
        s = _hpm_transfer_get(cls, want, &got);
        if (!s) return NULL;
        hpm_span_t *rest = s->cache_next;
        size_t bytes = hpm_medium_pages(cls) << HPM_PAGE_SHIFT;
        for (hpm_span_t *r = rest; r; r = r->cache_next) r->cached = 1;
        h->span_cache[cls] = rest;
        h->span_cache_n[cls] = (uint8_t)(got - 1);
        h->span_cache_bytes += (size_t)(got - 1) * bytes;
        s->cache_next = NULL;
        return s;
    }
    hpm_span_t *next = s->cache_next;
    h->span_cache[cls] = next;
    __builtin_prefetch(next, 1);   /* the next medium malloc of this class reads and writes its first line */
    h->span_cache_n[cls]--;
    h->span_cache_bytes -= (size_t)s->n_pages << HPM_PAGE_SHIFT;
    s->cache_next = NULL;
    s->cached = 0;
    return s;
}

int _hpm_spancache_put(hpm_heap_t *h, hpm_span_t *s) {
    size_t n = s->n_pages;
    if (s->kind != SPAN_MEDIUM || !is_medium_pages(n)) return 0;
    unsigned cls = hpm_medium_class(n);
    if (hpm_medium_pages(cls) != n) return 0;   /* an aligned span of another size */
    if (!medium_caching_on()) return 0;
    s->cached = 1;
    s->clean = 0;
    s->cache_next = h->span_cache[cls];
    h->span_cache[cls] = s;
    h->span_cache_n[cls]++;
    h->span_cache_bytes += n << HPM_PAGE_SHIFT;
    unsigned batch = hpm_medium_batch(cls);
    if (likely(h->span_cache_n[cls] <= 2 * batch && h->span_cache_bytes <= HPM_SPANCACHE_MAX_BYTES)) return 1;
    if (h->span_cache_n[cls] > 2 * batch) drain(h, cls, batch);
    /* over the byte bound: the largest classes go first */
    for (unsigned c = HPM_MEDIUM_CLASSES; h->span_cache_bytes > HPM_SPANCACHE_MAX_BYTES && c-- > 0;)
        drain(h, c, hpm_medium_batch(c));
    return 2;
}

void _hpm_spancache_flush(hpm_heap_t *h) {
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES && h->span_cache_bytes; c++) drain(h, c, 255);
}
