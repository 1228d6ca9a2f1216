/* transfer.c: the central medium cache between threads (TCMalloc's
 * transfer cache idea). Per medium class (internal.h, hpm_medium_class) a
 * list of free spans under its own small lock. A thread's span cache
 * (spancache.c) refills from it and drains into it in batches, so a
 * thread takes a lock once per batch, not once per object; when the list
 * is empty a batch comes fresh from the pageheap under one hold of its
 * lock (_hpm_ph_alloc_span, which fills the fullest hugepage first), and
 * when it is full a batch goes back to the pageheap the same way.
 *
 * Invariant: a span on a central list is SPAN_MEDIUM, has exactly the
 * class's page count, keeps its pages and page-map entries, is linked by
 * cache_next and has cached set (so free() reports a double free of it); the lists hold at
 * most HPM_TRANSFER_MAX_BYTES in all and 8 batches per class. Each class
 * lock is a leaf (nothing else is taken while it is held, for a few list
 * steps), so it is a spinlock that yields: fork's prepare handler takes
 * all 26 without adding to the mutexes it holds (TSan's deadlock detector
 * follows at most 64). Release ticks
 * give back classes nobody took from since the tick before; trim gives
 * back everything, so whole hugepages can still be released. */
#include <sched.h>
#include "internal.h"

typedef struct {
    atomic_int lock;            /* 1: held */
    hpm_span_t *head;           /* written under the lock; peeked at without it */
    unsigned n;
    bool taken;                 /* a thread took from it since the last tick */
} __attribute__((aligned(64))) central_t;

static central_t central[HPM_MEDIUM_CLASSES];

static void central_lock(central_t *c) {
    while (atomic_exchange_explicit(&c->lock, 1, memory_order_acquire)) {
        for (int spins = 0; atomic_load_explicit(&c->lock, memory_order_relaxed); spins++)
            if (spins > 100) sched_yield();   /* the holder may have been preempted (2 cores) */
    }
}
static void central_unlock(central_t *c) { atomic_store_explicit(&c->lock, 0, memory_order_release); }
static void set_head(central_t *c, hpm_span_t *s) { __atomic_store_n(&c->head, s, __ATOMIC_RELAXED); }
static size_t central_bytes;    /* atomic: bytes on all lists */

static size_t medium_class_bytes(unsigned cls) { return hpm_medium_pages(cls) << HPM_PAGE_SHIFT; }

/* A chain back to the pageheap, one lock hold. */
static void chain_free(hpm_span_t *chain) {
    if (!chain) return;
    pthread_mutex_lock(&_hpm_ph.lock);
    for (hpm_span_t *s = chain, *next; s; s = next) {
        next = s->cache_next;
        s->cache_next = NULL;
        s->cached = 0;
        _hpm_ph_free_span(&_hpm_ph, s);
    }
    pthread_mutex_unlock(&_hpm_ph.lock);
}

hpm_span_t *_hpm_transfer_get(unsigned cls, unsigned want, unsigned *got) {
    central_t *c = &central[cls];
    hpm_span_t *chain = NULL;
    unsigned n = 0;
    if (__atomic_load_n(&c->head, __ATOMIC_RELAXED)) {
        central_lock(c);
        while (n < want && c->head) {
            hpm_span_t *s = c->head;
            set_head(c, s->cache_next);
            s->cache_next = chain;
            chain = s;
            n++;
        }
        c->n -= n;
        c->taken = true;
        central_unlock(c);
        __atomic_sub_fetch(&central_bytes, n * medium_class_bytes(cls), __ATOMIC_RELAXED);
    }
    if (n == 0) {
        size_t pages = hpm_medium_pages(cls);
        pthread_mutex_lock(&_hpm_ph.lock);
        for (; n < want; n++) {
            hpm_span_t *s = _hpm_ph_alloc_span(&_hpm_ph, pages, SPAN_MEDIUM, 0);
            if (!s) break;
            s->cache_next = chain;
            chain = s;
        }
        pthread_mutex_unlock(&_hpm_ph.lock);
    }
    for (hpm_span_t *s = chain; s; s = s->cache_next) s->cached = 0;
    *got = n;
    return chain;
}

void _hpm_transfer_put(unsigned cls, hpm_span_t *chain, unsigned n) {
    central_t *c = &central[cls];
    size_t bytes = n * medium_class_bytes(cls);
    bool room = false;
    if (__atomic_add_fetch(&central_bytes, bytes, __ATOMIC_RELAXED) <= HPM_TRANSFER_MAX_BYTES) {
        central_lock(c);
        room = c->n + n <= 8u * hpm_medium_batch(cls);
        if (room) {
            hpm_span_t *tail = chain;
            while (tail->cache_next) tail = tail->cache_next;
            tail->cache_next = c->head;
            set_head(c, chain);
            c->n += n;
        }
        central_unlock(c);
    }
    if (room) return;
    __atomic_sub_fetch(&central_bytes, bytes, __ATOMIC_RELAXED);
    chain_free(chain);
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
        if (!__atomic_load_n(&c->head, __ATOMIC_RELAXED)) continue;
        central_lock(c);
        hpm_span_t *chain = NULL;
        unsigned n = 0;
        if (!idle_only || !c->taken) {
            chain = c->head;
            n = c->n;
            set_head(c, NULL);
            c->n = 0;
        }
        c->taken = false;
        central_unlock(c);
        __atomic_sub_fetch(&central_bytes, n * medium_class_bytes(cls), __ATOMIC_RELAXED);
        chain_free(chain);
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
