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
 * class's page count, keeps its pages and page-map entries, and is marked
 * LIST_CACHED (so free() reports a double free of it); the lists hold at
 * most HPM_TRANSFER_MAX_BYTES in all and 8 batches per class. Each class
 * lock is a leaf: nothing else is taken while it is held. Release ticks
 * give back classes nobody took from since the tick before; trim gives
 * back everything, so whole hugepages can still be released. */
#include "internal.h"

typedef struct {
    pthread_mutex_t lock;
    hpm_span_t *head;
    unsigned n;
    bool taken;                 /* a thread took from it since the last tick */
} __attribute__((aligned(64))) central_t;

static central_t central[HPM_MEDIUM_CLASSES] = {[0 ... HPM_MEDIUM_CLASSES - 1] = {.lock = PTHREAD_MUTEX_INITIALIZER}};
static size_t central_bytes;    /* atomic: bytes on all lists */

static size_t medium_class_bytes(unsigned cls) { return hpm_medium_pages(cls) << HPM_PAGE_SHIFT; }

/* A chain back to the pageheap, one lock hold. */
static void chain_free(hpm_span_t *chain) {
    if (!chain) return;
    pthread_mutex_lock(&_hpm_ph.lock);
    for (hpm_span_t *s = chain, *next; s; s = next) {
        next = s->next;
        s->next = NULL;
        s->list = LIST_NONE;
        _hpm_ph_free_span(&_hpm_ph, s);
    }
    pthread_mutex_unlock(&_hpm_ph.lock);
}

hpm_span_t *_hpm_transfer_get(unsigned cls, unsigned want, unsigned *got) {
    central_t *c = &central[cls];
    hpm_span_t *chain = NULL;
    unsigned n = 0;
    if (__atomic_load_n(&c->head, __ATOMIC_RELAXED)) {
        pthread_mutex_lock(&c->lock);
        while (n < want && c->head) {
            hpm_span_t *s = c->head;
            c->head = s->next;
            s->next = chain;
            chain = s;
            n++;
        }
        c->n -= n;
        c->taken = true;
        pthread_mutex_unlock(&c->lock);
        __atomic_sub_fetch(&central_bytes, n * medium_class_bytes(cls), __ATOMIC_RELAXED);
    }
    if (n == 0) {
        size_t pages = hpm_medium_pages(cls);
        pthread_mutex_lock(&_hpm_ph.lock);
        for (; n < want; n++) {
            hpm_span_t *s = _hpm_ph_alloc_span(&_hpm_ph, pages, SPAN_MEDIUM, 0);
            if (!s) break;
            s->next = chain;
            chain = s;
        }
        pthread_mutex_unlock(&_hpm_ph.lock);
    }
    for (hpm_span_t *s = chain; s; s = s->next) s->list = LIST_NONE;
    *got = n;
    return chain;
}

void _hpm_transfer_put(unsigned cls, hpm_span_t *chain, unsigned n) {
    central_t *c = &central[cls];
    size_t bytes = n * medium_class_bytes(cls);
    bool room = false;
    if (__atomic_add_fetch(&central_bytes, bytes, __ATOMIC_RELAXED) <= HPM_TRANSFER_MAX_BYTES) {
        pthread_mutex_lock(&c->lock);
        room = c->n + n <= 8u * hpm_medium_batch(cls);
        if (room) {
            hpm_span_t *tail = chain;
            while (tail->next) tail = tail->next;
            tail->next = c->head;
            c->head = chain;
            c->n += n;
        }
        pthread_mutex_unlock(&c->lock);
    }
    if (room) return;
    __atomic_sub_fetch(&central_bytes, bytes, __ATOMIC_RELAXED);
    chain_free(chain);
}

void _hpm_transfer_release(bool idle_only) {
    for (unsigned cls = 0; cls < HPM_MEDIUM_CLASSES; cls++) {
        central_t *c = &central[cls];
        if (!__atomic_load_n(&c->head, __ATOMIC_RELAXED)) continue;
        pthread_mutex_lock(&c->lock);
        hpm_span_t *chain = NULL;
        unsigned n = 0;
        if (!idle_only || !c->taken) {
            chain = c->head;
            n = c->n;
            c->head = NULL;
            c->n = 0;
        }
        c->taken = false;
        pthread_mutex_unlock(&c->lock);
        __atomic_sub_fetch(&central_bytes, n * medium_class_bytes(cls), __ATOMIC_RELAXED);
        chain_free(chain);
    }
}

size_t _hpm_transfer_bytes(void) { return __atomic_load_n(&central_bytes, __ATOMIC_RELAXED); }

void _hpm_transfer_fork_prepare(void) {
    for (unsigned cls = 0; cls < HPM_MEDIUM_CLASSES; cls++) pthread_mutex_lock(&central[cls].lock);
}

void _hpm_transfer_fork_parent(void) {
    for (unsigned cls = 0; cls < HPM_MEDIUM_CLASSES; cls++) pthread_mutex_unlock(&central[cls].lock);
}

void _hpm_transfer_fork_child(void) {
    for (unsigned cls = 0; cls < HPM_MEDIUM_CLASSES; cls++) pthread_mutex_init(&central[cls].lock, NULL);
}
