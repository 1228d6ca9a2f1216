/* transfer.c: the central medium cache between threads (TCMalloc's
 * transfer cache idea). Per medium class (internal.h, hpm_medium_class) an
 * array of free spans under its own small lock. A thread's span cache
 * (spancache.c) refills from it and drains into it in batches, so a
 * thread takes a lock once per batch, not once per object, and a batch
 * moves as a copy of pointers (a get reads no span record; a put reads
 * each span's home, on its record's second line); when the array is
 * empty a batch comes fresh from the pageheap under one hold of its lock
 * (_hpm_ph_alloc_span_for, which fills the fullest of the thread's own
 * hugepages first), and when it is full a batch goes back to the pageheap
 * the same way.
 *
 * In a big enough heap (hpm_homes_on) a thread takes from here only
 * spans whose home (the heap whose hugepage they were placed in,
 * hugepage.c "homes") is its own heap, no heap, or a heap whose thread
 * has exited; when there are none, its batch
 * comes from the pageheap. So the central cache does not move memory
 * between live threads: a span that another thread freed (a consumer's)
 * goes back to the thread whose hugepage holds it. When threads took each
 * other's spans from here, glibc-bench large with two threads had every
 * block next to the other thread's as often as to its own, and took 1.16x
 * mimalloc 2.0.9's time; taking own spans first and any other thread's
 * when none was left still left 989 of 2,047 neighbours mixed.
 *
 * Invariant: a span in a central array is SPAN_MEDIUM, has exactly the
 * class's page count, keeps its pages and page-map entries and has cached
 * set (so free() reports a double free of it); the arrays hold at most
 * HPM_TRANSFER_MAX_BYTES in all (a 16th of the heap while one thread has
 * a heap: central_bound) and 8 batches per class. Each class
 * lock is a leaf (nothing else is taken while it is held, for a copy of a
 * few pointers), so it is a spinlock that yields: fork's prepare handler
 * takes all 26 without adding to the mutexes it holds (TSan's deadlock
 * detector follows at most 64). Release ticks give back classes nobody
 * took from since the tick before, and of the others the spans that were
 * there at the tick before and nobody took since: the oldest, as taking
 * keeps the order. So a live thread's spans that wait for it go back once
 * it has not taken any for a tick, while another thread takes its own of
 * the class (session 49's review). Trim gives back everything, so whole
 * hugepages can still be released. */
#include <sched.h>
#include <string.h>
#include "internal.h"

#define CENTRAL_SLOTS 128   /* 8 batches of the largest batch (16) */

typedef struct {
    atomic_int lock;            /* 1: held */
    unsigned n;                 /* written under the lock; peeked at without it */
    bool taken;                 /* a thread took from it since the last tick */
    unsigned old_n;             /* spans [0, old_n) were here at the last tick and nobody took them since */
    hpm_span_t *spans[CENTRAL_SLOTS];
    const hpm_heap_t *home[CENTRAL_SLOTS];  /* each span's home heap (its record's), read when it was put here */
} __attribute__((aligned(128))) central_t;   /* a line pair each: the spatial prefetcher fetches lines in 128-byte pairs */

static central_t central[HPM_MEDIUM_CLASSES];

static void central_lock(central_t *c) {
    while (atomic_exchange_explicit(&c->lock, 1, memory_order_acquire)) {
        for (int spins = 0; atomic_load_explicit(&c->lock, memory_order_relaxed); spins++)
            if (spins > 100) sched_yield();   /* the holder may have been preempted (2 cores) */
    }
}
static void central_unlock(central_t *c) { atomic_store_explicit(&c->lock, 0, memory_order_release); }
static unsigned peek_n(const central_t *c) { return __atomic_load_n(&c->n, __ATOMIC_RELAXED); }
static void set_n(central_t *c, unsigned n) { __atomic_store_n(&c->n, n, __ATOMIC_RELAXED); }
static size_t central_bytes;    /* atomic: bytes in all arrays */

/* Spans back to the pageheap, one lock hold. Their `cached` mark stays
 * set until span_new reuses their records: cleared here, it left a moment
 * before the pageheap cleared their map entries in which hpm_range read
 * a freed span as live (test_rangerace). */
static void spans_free(hpm_span_t *const *spans, unsigned n) {
    if (n == 0) return;
    pthread_mutex_lock(&_hpm_ph.lock);
    for (unsigned i = 0; i < n; i++) _hpm_ph_free_span(&_hpm_ph, spans[i]);
    hpm_ph_unlock(&_hpm_ph);
}

/* Up to want spans out of c, newest first (the rest close up, in order),
 * under c's lock: those open to h (hpm_home_open_to), or any when h is
 * NULL. */
static unsigned take_for(central_t *c, const hpm_heap_t *h, unsigned want, hpm_span_t **out) {
    unsigned n = 0, lowest = c->n, old_taken = 0;
    for (unsigned i = c->n; i-- > 0 && n < want;) {
        if (h && !hpm_home_open_to(c->home[i], h)) continue;
        out[n++] = c->spans[i];
        c->spans[i] = NULL;   /* taken: closed up below */
        lowest = i;
        old_taken += i < c->old_n;
    }
    c->old_n -= old_taken;   /* the untaken old ones close up in order: still the first old_n */
    unsigned w = lowest;
    for (unsigned r = lowest; r < c->n; r++) {
        if (!c->spans[r]) continue;
        c->spans[w] = c->spans[r];
        c->home[w++] = c->home[r];
    }
    set_n(c, w);
    return n;
}

unsigned _hpm_transfer_get(hpm_heap_t *h, unsigned cls, unsigned want, hpm_span_t **out) {
    central_t *c = &central[cls];
    unsigned n = 0;
    if (peek_n(c)) {
        central_lock(c);
        n = take_for(c, hpm_homes_on(&_hpm_ph) ? h : NULL, want, out);   /* a small heap: any */
        if (n) c->taken = true;   /* a class nobody took from for a tick is released by it */
        central_unlock(c);
        __atomic_sub_fetch(&central_bytes, n * hpm_medium_bytes(cls), __ATOMIC_RELAXED);
    }
    if (n == 0) {
        size_t pages = hpm_medium_pages(cls);
        pthread_mutex_lock(&_hpm_ph.lock);
        for (; n < want; n++) {
            hpm_span_t *s = _hpm_ph_alloc_span_for(&_hpm_ph, pages, SPAN_MEDIUM, 0, h);
            if (!s) break;
            hpm_span_set_cached(s, true);
            out[n] = s;
        }
        hpm_ph_unlock(&_hpm_ph);
    }
    return n;
}

/* The central cache moves spans between threads. While one thread has a
 * heap it is only that thread's second tier, behind a thread cache that
 * holds a quarter of the heap (spancache.c, cache_bound), and what the
 * thread drains for its byte bound waited here instead: it holds a 16th
 * of the heap then (Python's JSON run: max RSS 138 -> 130 MB; with the
 * bound for every process, mstress with 2 threads took 1.04-1.05x the
 * time, 9 pairs, its spans crossing between threads here). */
static size_t central_bound(void) {
    if (!__atomic_load_n(&_hpm_one_heap, __ATOMIC_RELAXED)) return HPM_TRANSFER_MAX_BYTES;
    return hpm_heap_share_bytes(HPM_TRANSFER_HEAP_SHIFT, HPM_TRANSFER_MAX_BYTES);
}

/* in: oldest first. What the class has room for stays, newest first (a
 * whole stack at thread exit is more than 8 batches; the rest, and
 * everything past the byte bound, goes back to the pageheap). */
void _hpm_transfer_put(unsigned cls, hpm_span_t *const *in, unsigned n) {
    central_t *c = &central[cls];
    size_t one = hpm_medium_bytes(cls);
    unsigned kept = 0;
    if (__atomic_add_fetch(&central_bytes, n * one, __ATOMIC_RELAXED) <= central_bound()) {
        central_lock(c);
        unsigned room = 8u * hpm_medium_batch(cls) - c->n;   /* c->n never passes 8 batches */
        kept = n < room ? n : room;
        memcpy(c->spans + c->n, in + (n - kept), kept * sizeof *in);
        for (unsigned i = 0; i < kept; i++) c->home[c->n + i] = in[n - kept + i]->home;
        set_n(c, c->n + kept);
        central_unlock(c);
    }
    if (kept == n) return;
    __atomic_sub_fetch(&central_bytes, (n - kept) * one, __ATOMIC_RELAXED);
    spans_free(in, n - kept);
}

/* Releases are serialized by release_lock, held from the first list
 * taken to the last span given back: a trim in another thread (which
 * releases through here and then trims the pageheap) waits for a
 * background release in progress, whose spans, off their lists but not yet
 * in the pageheap, would otherwise empty their hugepages just after that
 * trim (test_api's trim check found 6 cached hugepages in 1 of about 50
 * debug runs). Order: release_lock, then a class lock, then the pageheap
 * lock (never a class lock under the pageheap lock: fork's prepare
 * handler takes the class locks before it). The fork child re-creates
 * release_lock. */
static pthread_mutex_t release_lock = PTHREAD_MUTEX_INITIALIZER;

void _hpm_transfer_release(bool idle_only) {
    pthread_mutex_lock(&release_lock);
    for (unsigned cls = 0; cls < HPM_MEDIUM_CLASSES; cls++) {
        central_t *c = &central[cls];
        if (!peek_n(c)) continue;
        hpm_span_t *spans[CENTRAL_SLOTS];
        unsigned n = 0;
        central_lock(c);
        n = !idle_only || !c->taken ? c->n : c->old_n;
        memcpy(spans, c->spans, n * sizeof *spans);
        memmove(c->spans, c->spans + n, (c->n - n) * sizeof *spans);
        memmove(c->home, c->home + n, (c->n - n) * sizeof *c->home);
        set_n(c, c->n - n);
        c->old_n = c->n;
        c->taken = false;
        central_unlock(c);
        __atomic_sub_fetch(&central_bytes, n * hpm_medium_bytes(cls), __ATOMIC_RELAXED);
        spans_free(spans, n);
    }
    pthread_mutex_unlock(&release_lock);
}

size_t _hpm_transfer_bytes(void) { return __atomic_load_n(&central_bytes, __ATOMIC_RELAXED); }

void _hpm_transfer_fork_prepare(void) {
    for (unsigned cls = 0; cls < HPM_MEDIUM_CLASSES; cls++) central_lock(&central[cls]);
}

/* The parent and the child (the only thread there) both let go. */
void _hpm_transfer_fork_parent(void) {
    for (unsigned cls = 0; cls < HPM_MEDIUM_CLASSES; cls++) central_unlock(&central[cls]);
}

void _hpm_transfer_fork_child(void) {
    _hpm_transfer_fork_parent();
    pthread_mutex_init(&release_lock, NULL);   /* a background release may have held it at fork */
}
