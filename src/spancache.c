/* spancache.c: the per-thread cache of medium spans (8 KiB to 1 MiB), so
 * that programs that churn medium objects take no lock for most mallocs
 * and frees. Medium requests are rounded up to one of HPM_MEDIUM_CLASSES
 * page counts (4 per power of two, internal.h); per class the thread
 * keeps a stack (an array) of free spans, newest on top. An empty stack
 * first takes a span of the next two classes up (borrow_up), then
 * refills with a batch from the central cache (transfer.c), which refills
 * from the pageheap (the first refills of a class with 1, 2, 4, ... spans:
 * slow start); a stack over HPM_SPANCACHE_BATCHES (8) batches (one
 * batch in a thread that only frees the class: cache_put), or a cache over
 * its byte bound (cache_bound: a quarter of the heap, 1 to 16 MiB; all of
 * it, up to 16 MiB, for a busy thread), drains its oldest batch back.
 * Thread exit returns the cache to the central cache; malloc_trim and
 * hpm_trim return it to the pageheap.
 *
 * Stacks of pointers, not lists through the span records: a batch moves
 * by copying pointers, without reading a record (a record on a list had
 * to be read for its link, a miss on a record last touched a working set
 * ago: the walks of the central lists were three quarters of
 * _hpm_transfer_get's time in glibc-bench large). A span's cached mark is
 * on the first line of its record, with start and n_pages, so a medium
 * malloc or free served here touches that one line; a malloc prefetches
 * the line of the span left on top.
 *
 * Invariant: a span in a thread's stack is SPAN_MEDIUM with exactly its
 * class's page count, keeps its pages and page-map entries, and has
 * cached set, so free() reports a double free of it and hpm_range()
 * treats it as free; span_cache_n and span_cache_bytes count the stacks.
 * Owner thread only, but for the idle drain (below), which the owner's
 * gate keeps out while the owner is inside (the gate also keeps the
 * heap's emptied slabs, heap.c). */
#include <string.h>
#include "gate.h"
#include "internal.h"

_Static_assert(HPM_SPANCACHE_BATCHES * 16 + 1 <= 255, "span_cache_n counts a stack in 8 bits");

static inline bool is_medium_pages(size_t n_pages) {
    return n_pages >= 3 && n_pages < HPM_LARGE_MIN_PAGES;
}

static inline hpm_span_t **stack_of(hpm_heap_t *h, unsigned cls) { return h->span_stack + _hpm_medium_slot0[cls]; }

/* The oldest n (or all, if fewer) of the thread's spans of cls to the
 * central cache. They leave the stack (and its counts) before they reach
 * the central cache: a fork may stop this thread anywhere outside the
 * central lock, and the child drains a vanished thread's stacks again
 * (heap.c, heap_repair), so spans already central but still counted in
 * the stack went to the central cache twice and were handed out twice
 * (a forktest child under the debug build, about one in 80: "double
 * free"). Stopped in between, they are only lost to the child. */
static void drain(hpm_heap_t *h, unsigned cls, unsigned n) {
    unsigned have = h->span_cache_n[cls];
    if (n > have) n = have;
    if (n == 0) return;
    hpm_span_t **st = stack_of(h, cls), *out[HPM_SPANCACHE_BATCHES * 16 + 1];   /* a stack holds at most 8 batches of 16, + 1 */
    hpm_assert_internal(n <= sizeof out / sizeof *out);
    memcpy(out, st, n * sizeof *st);
    memmove(st, st + n, (have - n) * sizeof *st);
    h->span_cache_n[cls] = (uint8_t)(have - n);
    h->span_cache_bytes -= (size_t)n * hpm_medium_bytes(cls);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);   /* the counts are written before the spans go (a fork is a signal-like stop) */
    _hpm_transfer_put(cls, out, n);
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
 * (threads that come and go: mstress) keeps its caches.
 *
 * A thread that churns medium blocks in a small heap turns them on too:
 * once it has freed HPM_SPANCACHE_BUSY_FREES (1024) medium spans (python3
 * -c pass frees 69 blocks over 8 KiB and reallocs 31 under pyenv's
 * build, 32 and 2 under Debian's; Python's JSON run 118 and 561).
 * glibc-bench large with one thread (hpm bench's glibc-large: 200 blocks
 * of 1-64 KiB, a heap of 6.5 MB) spent 250 ns an operation in the
 * pageheap, mimalloc 2.0.9 55. */
static inline bool medium_caching_on(void) { return __atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED); }

/* ---- the idle drain ----
 * A thread's cache is its own, and a thread that freed a few MiB of
 * medium blocks and went idle kept them (64 idle threads: 134.6 MB of RSS
 * after 3 s; docs/allocator.md, "Medium sizes"). The background thread
 * drains the cache of a heap whose owner made no cache operation for a
 * release window, through the owner's gate (gate.h, sc_state). */
static inline uint32_t gate_enter(hpm_heap_t *h) { return hpm_gate_enter(h, &h->sc_state); }
static inline void gate_leave(hpm_heap_t *h, uint32_t in) { hpm_gate_leave(&h->sc_state, in); }

/* The same gate keeps the heap's emptied slabs (heap.c, slab_retire):
 * the owner's cold paths enter it through these. */
uint32_t _hpm_heap_gate_enter(hpm_heap_t *h) { return gate_enter(h); }
void _hpm_heap_gate_leave(hpm_heap_t *h, uint32_t in) { gate_leave(h, in); }

void _hpm_heap_gate_close(hpm_heap_t *h) { atomic_store_explicit(&h->sc_drainer, 1, memory_order_relaxed); }
void _hpm_heap_gate_open(hpm_heap_t *h) { atomic_store_explicit(&h->sc_drainer, 0, memory_order_release); }

static void cache_flush(hpm_heap_t *h) {
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES && h->span_cache_bytes; c++) drain(h, c, 255);
}

bool _hpm_spancache_drain_closed(hpm_heap_t *h, bool fenced) {
    bool drained = fenced && hpm_gate_owner_out(&h->sc_state);
    if (drained) cache_flush(h);
    return drained;
}

/* ---- the trim ----
 * A busy thread's stacks hold what its busiest moments needed: git
 * repack's delta threads kept 4-7 MB of free medium spans at the peak of
 * the process's RSS (the bounds are 16 MiB per thread for glibc-bench
 * large's random walks; docs/allocator.md, "Medium sizes"). Each stack
 * keeps its low-water mark: the fewest spans it held since the last
 * trim. The bottom ones under the mark were not touched since, so a trim
 * sends half of them, at least one, to the central cache, oldest first,
 * whose own idle release gives them back if no thread takes them. A
 * class in steady use reaches the bottom of its stack often (a mark near
 * 0) and keeps its spans. A thread trims at most once per
 * HPM_SPANCACHE_TRIM_NS, looking at the clock at every 64th operation on
 * its cache (the gate's count); an idle thread's cache is the idle
 * drain's. */
static __attribute__((noinline, cold)) void cache_trim(hpm_heap_t *h) {
    uint64_t now = _hpm_ph.os->now_ns();
    if (now - h->span_trim_ns < HPM_SPANCACHE_TRIM_NS) return;
    h->span_trim_ns = now;
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES && h->span_cache_bytes; c++) {
        unsigned low = h->span_low[c];
        if (low > h->span_cache_n[c]) low = h->span_cache_n[c];   /* drained since (the bounds, the idle drain) */
        if (low) drain(h, c, (low + 1) / 2);
    }
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES; c++) h->span_low[c] = h->span_cache_n[c];
}

/* The top (newest) span of cls's stack, which is not empty. */
static hpm_span_t *pop(hpm_heap_t *h, unsigned cls) {
    hpm_span_t **st = stack_of(h, cls);
    unsigned k = h->span_cache_n[cls] - 1u;
    hpm_span_t *s = st[k];
    if (k < h->span_low[cls]) h->span_low[cls] = (uint8_t)k;
    if (k) __builtin_prefetch(st[k - 1], 1);   /* the next medium malloc of this class reads and writes its first line */
    h->span_cache_n[cls] = (uint8_t)k;
    h->span_cache_bytes -= hpm_medium_bytes(cls);
    hpm_span_set_cached(s, false);
    return s;
}

/* ---- borrowing from the classes above ----
 * Each class's stack holds what that class's count of live blocks swung
 * by lately, and the swings of different classes do not add up: the
 * thread's live bytes swing far less than the sum of its stacks. So a
 * class whose stack is empty takes the newest span of the next
 * HPM_SPANCACHE_BORROW_CLASSES classes up, if one of them has a span,
 * before it takes a batch from the central cache: at most two classes,
 * so the block fills at least 40% of its span (half from 12 KiB up), and
 * only pages that sat idle in the cache. The span keeps its own class
 * (its page count): freed, it goes back to its own stack. glibc-bench large
 * (1-64 KiB, random replacement) with 2 threads kept 20 MiB of free
 * spans in the stacks beside 67 MiB live, and its max RSS was 1.13x
 * jemalloc's; with borrowing 1.00x, time unchanged (docs/allocator.md,
 * "Medium sizes"). */
static hpm_span_t *borrow_up(hpm_heap_t *h, unsigned cls) {
    for (unsigned up = cls + 1; up <= cls + HPM_SPANCACHE_BORROW_CLASSES && up < HPM_MEDIUM_CLASSES; up++)
        if (h->span_cache_n[up]) return pop(h, up);
    return NULL;
}

static hpm_span_t *cache_get(hpm_heap_t *h, size_t n_pages) {
    unsigned cls = hpm_medium_class(n_pages);
    if (unlikely(h->span_cache_n[cls] == 0)) {
        if (!medium_caching_on()) return NULL;   /* the caller takes an exact span from the pageheap */
        hpm_span_t *up = borrow_up(h, cls);
        if (up) return up;
        /* Slow start: the first refills of a class take 1, 2, 4, ... spans,
         * up to the full batch, so a program that asks for a medium size
         * once or twice (python3 -c pass) does not hold a whole batch of
         * it (a batch of the largest classes is 2 MiB). */
        unsigned want = hpm_medium_batch(cls), r = h->span_refills[cls];
        if (r < 8 && (1u << r) < want) want = 1u << r;
        if (r < 255) h->span_refills[cls] = (uint8_t)(r + 1);
        unsigned k = _hpm_transfer_get(h, cls, want, stack_of(h, cls));
        h->span_low[cls] = 0;   /* the stack ran dry */
        if (k == 0) return NULL;
        h->span_cache_n[cls] = (uint8_t)k;
        h->span_cache_bytes += (size_t)k * hpm_medium_bytes(cls);
    }
    return pop(h, cls);
}

/* gate_enter for a get or a put, which counts the operation: every 64th
 * (sc_state goes up by 2 each) looks whether it is time to trim. */
static inline uint32_t gate_enter_counted(hpm_heap_t *h) {
    uint32_t in = gate_enter(h);
    if (unlikely((in & 127) == 1)) cache_trim(h);
    return in;
}

hpm_span_t *_hpm_spancache_get(hpm_heap_t *h, size_t n_pages) {
    if (!is_medium_pages(n_pages)) return NULL;
    uint32_t in = gate_enter_counted(h);
    hpm_span_t *s = cache_get(h, n_pages);
    gate_leave(h, in);
    return s;
}

/* A thread's cache holds at most a quarter of the pageheap's used pages
 * (at least HPM_SPANCACHE_MIN_BYTES, at most HPM_SPANCACHE_MAX_BYTES).
 * The 16 MiB are for glibc-bench large's random walks over the classes
 * (2 threads, 66 MB live: 16.5 MiB a quarter), but a program with a
 * smaller heap kept up to 16 MiB of free spans beside it: Python's JSON
 * run (realprog, one thread, a heap of about 30 MB) held 52 spans,
 * 15 MB, at its peak, from the buffers its writers realloc through 20
 * classes, and its max RSS was 1.12x mimalloc 2.0.9's. With a quarter,
 * and the central cache bounded to a 16th (what a thread drains goes
 * there): 1.05x; an eighth cost glibc-bench large 6% (docs/allocator.md,
 * "Medium sizes").
 *
 * A busy thread (HPM_SPANCACHE_BUSY_FREES medium spans freed) may keep
 * all of the heap's used pages, up to 16 MiB. The used pages count the
 * cached spans, so a quarter of them shrinks with every batch drained: a
 * thread that frees its whole working set and takes it again
 * (glibc-bench's pattern) kept 1 MiB of it, and each step went back to
 * the pageheap for the rest (with two threads: 102-123 ns an operation,
 * mimalloc 2.0.9 64; with the heap, 41-47). The caches are part of the
 * used pages, so together they never hold more than the heap; a thread
 * that does not churn medium blocks keeps the quarter. */
static inline size_t cache_bound(const hpm_heap_t *h) {
    size_t b = hpm_heap_share_bytes(HPM_SPANCACHE_HEAP_SHIFT, HPM_SPANCACHE_MAX_BYTES);
    if (h->span_frees >= HPM_SPANCACHE_BUSY_FREES) {
        size_t used = __atomic_load_n(&_hpm_ph.used_pages_total, __ATOMIC_RELAXED) << HPM_PAGE_SHIFT;
        size_t all = used < HPM_SPANCACHE_MAX_BYTES ? used : HPM_SPANCACHE_MAX_BYTES;
        if (all > b) b = all;
    }
    return b;
}

/* A stack keeps up to HPM_SPANCACHE_BATCHES batches for a thread that
 * mallocs its class, but only one for a thread that has never refilled
 * it (span_refills 0: no malloc of the class found it empty, so the
 * thread took no batch from the central cache): such a thread frees what
 * others allocate, and spans it kept would wait there while the
 * allocating thread took new pages from the pageheap. xmalloc-test's releasers free every batch
 * array (32 KiB) that its allocators malloc, and each held up to 8
 * batches of them: 41.4 MB max RSS against 35.3 with one batch, mimalloc
 * 2.0.9 39.6 (7 interleaved runs, time level; docs/allocator.md,
 * "Medium sizes"). jemalloc and TCMalloc size a thread's lists by its
 * mallocs in the same way. */
static void cache_put(hpm_heap_t *h, hpm_span_t *s, unsigned cls, size_t n) {
    hpm_span_set_cached(s, true);
    s->clean = 0;
    unsigned k = h->span_cache_n[cls];
    stack_of(h, cls)[k++] = s;   /* k <= 8 * batch + 1: a stack over 8 * batch drained when it got there */
    h->span_cache_n[cls] = (uint8_t)k;
    h->span_cache_bytes += n << HPM_PAGE_SHIFT;
    unsigned batch = hpm_medium_batch(cls);
    size_t bound = cache_bound(h);
    unsigned keep = h->span_refills[cls] ? HPM_SPANCACHE_BATCHES * batch : batch;   /* a freer only: one batch */
    if (likely(k <= keep && h->span_cache_bytes <= bound))
        return;
    if (k > keep) drain(h, cls, batch);
    /* over the byte bound: the largest classes go first */
    for (unsigned c = HPM_MEDIUM_CLASSES; h->span_cache_bytes > bound && c-- > 0;)
        drain(h, c, hpm_medium_batch(c));
}

bool _hpm_spancache_put(hpm_heap_t *h, hpm_span_t *s) {
    size_t n = s->n_pages;
    if (s->kind != SPAN_MEDIUM || !is_medium_pages(n)) return false;
    if (h->span_frees < HPM_SPANCACHE_BUSY_FREES) h->span_frees++;
    if (!medium_caching_on()) {   /* uncached spans have their exact page counts: count them all */
        if (h->span_frees < HPM_SPANCACHE_BUSY_FREES) return false;
        __atomic_store_n(&_hpm_ph.medium_caching, true, __ATOMIC_RELAXED);
    }
    unsigned cls = hpm_medium_class(n);
    if (hpm_medium_pages(cls) != n) return false;   /* an aligned span of another size, or placed before the caches came on */
    uint32_t in = gate_enter_counted(h);
    cache_put(h, s, cls, n);
    gate_leave(h, in);
    return true;
}

void _hpm_spancache_flush(hpm_heap_t *h) {
    uint32_t in = gate_enter(h);
    cache_flush(h);
    gate_leave(h, in);
}
