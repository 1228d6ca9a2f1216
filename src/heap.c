/* heap.c: per-thread heaps, the lock-free front end (docs/allocator.md, "Threads").
 *
 * Each thread owns a heap: per size class a current slab (the fast path
 * pops its free list), a list of slabs with free blocks (avail) and a list
 * of slabs that were full when last looked at (full). Frees by the owner
 * push onto the slab's free list; frees by other threads push onto the
 * slab's atomic xfree stack. A remote free into a parked-full slab clears
 * its parked_full flag and bumps the owner's `delayed` counter, so the
 * owner knows to move it back to avail (a Dekker-style handshake:
 * the owner sets the flag then rechecks xfree; the remote pushes then
 * checks the flag, both sequentially consistent, so no free is missed).
 * At thread exit the heap's non-empty slabs are abandoned to a global
 * per-class list; other threads adopt them when they need a slab.
 *
 * Invariant: a slab is on exactly one of: a heap's current/avail/full,
 * the abandoned list, or none (being moved by its owner). Only the owner
 * touches s->free and s->used. */
#include <errno.h>
#include <string.h>
#include "internal.h"

__thread hpm_heap_t *_hpm_tls_heap;
hpm_span_t _hpm_empty_span;

static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static hpm_heap_t *heaps_all, *heaps_free;
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static hpm_span_t *abandoned[HPM_CLASSES];
static pthread_key_t heap_key;
static bool heap_key_ok;

/* ---- doubly linked slab lists ---- */

static void slist_push(hpm_span_t **head, hpm_span_t *s, int list) {
    s->prev = NULL;
    s->next = *head;
    if (*head) (*head)->prev = s;
    *head = s;
    s->list = (uint8_t)list;
}

static void slist_remove(hpm_span_t **head, hpm_span_t *s) {
    if (s->prev) s->prev->next = s->next; else *head = s->next;
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
    s->list = LIST_NONE;
}

static hpm_span_t *slist_pop(hpm_span_t **head) {
    hpm_span_t *s = *head;
    if (s) slist_remove(head, s);
    return s;
}

/* ---- slabs to and from the pageheap ---- */

static void slab_release(hpm_span_t *s) {
    atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
    if (s->held_pages_mask)
        __atomic_sub_fetch(&_hpm_slab_held_pages, (size_t)__builtin_popcount(s->held_pages_mask), __ATOMIC_RELAXED);
    pthread_mutex_lock(&_hpm_ph.lock);
    _hpm_ph_free_span(&_hpm_ph, s);
    pthread_mutex_unlock(&_hpm_ph.lock);
}

static hpm_span_t *slab_new(hpm_heap_t *h, unsigned cls) {
    const hpm_class_t *k = &_hpm_classes[cls];
    uint64_t colours = k->block_bytes <= HPM_COLOUR_MAX_BLOCK ? h->colour_mask : 0;
    /* A heap's first slab of a class is small (at least 4 blocks), so a
     * program that uses many classes a little still fits one hugepage. */
    size_t first_pages = (4u * k->block_bytes + HPM_PAGE_BYTES - 1) >> HPM_PAGE_SHIFT;
    size_t pages = colours ? 1 : h->slabs_made[cls] ? k->slab_pages : first_pages;
    if (h->slabs_made[cls] < 255) h->slabs_made[cls]++;
    pthread_mutex_lock(&_hpm_ph.lock);
    hpm_span_t *s = _hpm_ph_alloc_span(&_hpm_ph, pages, SPAN_SLAB, colours);
    pthread_mutex_unlock(&_hpm_ph.lock);
    if (!s) return NULL;
    _hpm_slab_format(s, cls);
    atomic_store_explicit(&s->owner, h, memory_order_release);
    return s;
}

/* Make every free block of the slab available: remote frees and blocks
 * of pages given back by subrelease. True when it has a free block. */
static bool slab_gather(hpm_span_t *s) {
    _hpm_slab_collect(s);
    if (!s->free) _hpm_slab_refill(s);
    return s->free != NULL;
}

/* Put an exhausted slab on the full list, unless remote frees arrived. */
static void slab_park(hpm_heap_t *h, hpm_span_t *s) {
    atomic_store(&s->parked_full, 1);
    if (atomic_load(&s->xfree) != NULL) {
        atomic_store(&s->parked_full, 0);
        slist_push(&h->avail[s->class_idx], s, LIST_AVAIL);
        return;
    }
    slist_push(&h->full[s->class_idx], s, LIST_FULL);
}

/* Move full slabs that received remote frees back to avail. */
static void heap_sweep_delayed(hpm_heap_t *h) {
    atomic_store(&h->delayed, 0);
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        for (hpm_span_t *s = h->full[c], *next; s; s = next) {
            next = s->next;
            if (atomic_load(&s->parked_full)) continue;
            slist_remove(&h->full[c], s);
            slist_push(&h->avail[c], s, LIST_AVAIL);
        }
    }
}

/* Take over up to a few abandoned slabs of class cls; returns one with a
 * free block (as current) or NULL. */
static hpm_span_t *heap_adopt(hpm_heap_t *h, unsigned cls) {
    if (!__atomic_load_n(&abandoned[cls], __ATOMIC_RELAXED)) return NULL;
    if (h->colour_mask && _hpm_classes[cls].block_bytes <= HPM_COLOUR_MAX_BLOCK) return NULL;  /* colours unknown */
    hpm_span_t *got = NULL;
    pthread_mutex_lock(&abandoned_lock);
    for (int tries = 0; tries < 8 && !got; tries++) {
        hpm_span_t *s = slist_pop(&abandoned[cls]);
        if (!s) break;
        atomic_store(&s->owner, h);
        if (slab_gather(s)) got = s;
        else slab_park(h, s);
    }
    pthread_mutex_unlock(&abandoned_lock);
    return got;
}

/* A thread that frees into an abandoned slab takes it over, so that its
 * later frees there are local rather than atomic (larson-like servers,
 * where a new thread inherits the blocks of one that exited). */
void _hpm_heap_adopt_on_free(hpm_heap_t *h, hpm_span_t *s) {
    unsigned cls = s->class_idx;
    if (h->colour_mask && _hpm_classes[cls].block_bytes <= HPM_COLOUR_MAX_BLOCK) return;
    if (pthread_mutex_trylock(&abandoned_lock) != 0) return;
    if (s->list == LIST_ABANDONED && atomic_load(&s->owner) == NULL) {
        slist_remove(&abandoned[cls], s);
        atomic_store(&s->owner, h);
        _hpm_slab_collect(s);
        if (s->used == 0) slab_release(s);
        else if (s->free) slist_push(&h->avail[cls], s, LIST_AVAIL);
        else slab_park(h, s);
    }
    pthread_mutex_unlock(&abandoned_lock);
}

static inline void *slab_pop(hpm_heap_t *h, hpm_span_t *s) {
    void **b = s->free;
    s->free = b[0];
    b[1] = NULL;
    s->used++;
    h->used_bytes += s->block_bytes;
    return b;
}

void *_hpm_heap_alloc_slow(hpm_heap_t *h, unsigned cls) {
    hpm_span_t *s = h->current[cls];
    if (s != &_hpm_empty_span) {
        if (slab_gather(s)) return slab_pop(h, s);
        s->list = LIST_NONE;
        slab_park(h, s);
        h->current[cls] = &_hpm_empty_span;
    }
    if (atomic_load_explicit(&h->delayed, memory_order_relaxed)) heap_sweep_delayed(h);
    while ((s = slist_pop(&h->avail[cls]))) {
        if (slab_gather(s)) break;
        slab_park(h, s);
    }
    if (!s) s = heap_adopt(h, cls);
    if (!s) s = slab_new(h, cls);
    if (!s) return NULL;
    s->list = LIST_CURRENT;
    h->current[cls] = s;
    hpm_check_internal(_hpm_check_span, s);
    return slab_pop(h, s);
}

/* Local free into a slab that is not current: unpark a full one, return an
 * empty one to the pageheap. */
void _hpm_heap_free_slow(hpm_heap_t *h, hpm_span_t *s) {
    unsigned cls = s->class_idx;
    if (s->list == LIST_FULL) {
        slist_remove(&h->full[cls], s);
        atomic_store(&s->parked_full, 0);
        slist_push(&h->avail[cls], s, LIST_AVAIL);
    }
    if (s->used == 0 && s->list == LIST_AVAIL && atomic_load(&s->xfree) == NULL) {
        slist_remove(&h->avail[cls], s);
        slab_release(s);
    }
}

/* ---- heap lifetime ---- */

static void heap_abandon(hpm_heap_t *h) {
    hpm_check_expensive(_hpm_check_heap, h);
    _hpm_spancache_flush(h);
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hpm_span_t *lists[3] = {h->current[c] == &_hpm_empty_span ? NULL : h->current[c], h->avail[c], h->full[c]};
        h->current[c] = &_hpm_empty_span;
        h->avail[c] = h->full[c] = NULL;
        for (int l = 0; l < 3; l++) {
            for (hpm_span_t *s = lists[l], *next; s; s = next) {
                next = l == 0 ? NULL : s->next;
                s->next = s->prev = NULL;
                _hpm_slab_collect(s);
                if (s->used == 0) { slab_release(s); continue; }
                atomic_store(&s->owner, NULL);
                atomic_store(&s->parked_full, 0);
                pthread_mutex_lock(&abandoned_lock);
                slist_push(&abandoned[c], s, LIST_ABANDONED);
                pthread_mutex_unlock(&abandoned_lock);
            }
        }
    }
    h->active = false;
}

static void heap_thread_exit(void *arg) {
    hpm_heap_t *h = arg;
    if (!h) return;
    heap_abandon(h);
    _hpm_tls_heap = NULL;
    pthread_mutex_lock(&heaps_lock);
    h->next_free = heaps_free;
    heaps_free = h;
    pthread_mutex_unlock(&heaps_lock);
}

void _hpm_heaps_init(void) {
    for (unsigned c = 0; c < HPM_CLASSES; c++) abandoned[c] = NULL;
    _hpm_lock_rank(&heaps_lock, HPM_LOCK_HEAPS);
    _hpm_lock_rank(&abandoned_lock, HPM_LOCK_ABANDONED);
    heap_key_ok = pthread_key_create(&heap_key, heap_thread_exit) == 0;
}

hpm_heap_t *_hpm_heap_acquire(void) {
    hpm_ensure_init();
    if (_hpm_tls_heap) return _hpm_tls_heap;
    pthread_mutex_lock(&heaps_lock);
    hpm_heap_t *h = heaps_free;
    if (h) heaps_free = h->next_free;
    pthread_mutex_unlock(&heaps_lock);
    if (!h) {
        h = _hpm_meta_alloc(sizeof *h);
        if (!h) return NULL;
        pthread_mutex_lock(&heaps_lock);
        h->next_all = heaps_all;
        __atomic_store_n(&heaps_all, h, __ATOMIC_RELEASE);   /* readers walk without the lock */
        pthread_mutex_unlock(&heaps_lock);
    }
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        h->current[c] = &_hpm_empty_span;
        h->avail[c] = h->full[c] = NULL;
        h->slabs_made[c] = 0;
    }
    atomic_store(&h->delayed, 0);
    h->colour_mask = (uint64_t)_hpm_option(HPM_OPT_COLORS);
    h->active = true;
    h->next_free = NULL;
    _hpm_tls_heap = h;
    if (heap_key_ok) pthread_setspecific(heap_key, h);
    return h;
}

/* Heaps are never freed and only ever pushed at the head, so the list can
 * be walked without the lock (from any lock context). */
int64_t _hpm_heaps_used_bytes(void) {
    int64_t sum = 0;
    for (hpm_heap_t *h = __atomic_load_n(&heaps_all, __ATOMIC_ACQUIRE); h; h = h->next_all)
        sum += __atomic_load_n(&h->used_bytes, __ATOMIC_RELAXED);
    return sum;
}

/* Give back the calling thread's empty slabs, current ones included (for
 * trim: a program that freed everything and went idle keeps one slab per
 * size class otherwise). */
void _hpm_heap_release_empty(bool shed) {
    hpm_heap_t *h = _hpm_tls_heap;
    if (!h) return;
    _hpm_spancache_flush(h);
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hpm_span_t *s = h->current[c];
        if (s != &_hpm_empty_span) {
            _hpm_slab_collect(s);
            if (s->used == 0) {
                h->current[c] = &_hpm_empty_span;
                s->list = LIST_NONE;
                slab_release(s);
            } else if (shed) {
                _hpm_slab_shed(s);
            }
        }
        for (s = h->avail[c]; s; ) {
            hpm_span_t *next = s->next;
            _hpm_slab_collect(s);
            if (s->used == 0) { slist_remove(&h->avail[c], s); slab_release(s); }
            else if (shed) _hpm_slab_shed(s);
            s = next;
        }
    }
}

/* Give back abandoned slabs that remote frees have emptied (for trim). */
void _hpm_heaps_reclaim_abandoned(bool shed) {
    pthread_mutex_lock(&abandoned_lock);
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        for (hpm_span_t *s = abandoned[c], *next; s; s = next) {
            next = s->next;
            _hpm_slab_collect(s);
            if (s->used) { if (shed) _hpm_slab_shed(s); continue; }
            slist_remove(&abandoned[c], s);
            slab_release(s);
        }
    }
    pthread_mutex_unlock(&abandoned_lock);
}

HPM_API int hpm_thread_colors(uint64_t mask) {
    long count = _hpm_option(HPM_OPT_COLOR_COUNT);
    hpm_heap_t *h = _hpm_heap_acquire();
    if (!h || (count < 64 && (mask >> count) != 0)) { errno = EINVAL; return -1; }
    uint64_t all = count >= 64 ? ~0ull : (1ull << count) - 1;
    h->colour_mask = (mask & all) == all ? 0 : mask;
    return 0;
}

/* ---- fork ---- */

void _hpm_heap_fork_prepare(void) {
    pthread_mutex_lock(&heaps_lock);
    pthread_mutex_lock(&abandoned_lock);
}

void _hpm_heap_fork_parent(void) {
    pthread_mutex_unlock(&abandoned_lock);
    pthread_mutex_unlock(&heaps_lock);
}

/* A thread that did not survive the fork may have stopped inside a fast
 * path, between popping or pushing a block and counting it in used: count
 * the slabs of its heap again from their free lists (which each push and
 * pop change with one store). */
static void heap_recount_dead(hpm_heap_t *h) {
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hpm_span_t *lists[3] = {h->current[c] == &_hpm_empty_span ? NULL : h->current[c], h->avail[c], h->full[c]};
        for (int l = 0; l < 3; l++) {
            for (hpm_span_t *s = lists[l]; s; s = l == 0 ? NULL : s->next) {
                uint32_t n_free = 0;
                for (void **b = s->free; b && n_free <= s->capacity; b = b[0]) n_free++;
                if (n_free + s->held_blocks <= s->capacity) s->used = s->capacity - n_free - s->held_blocks;
            }
        }
    }
}

/* In the child only this thread survives: abandon every other thread's
 * heap so its slabs can be adopted, and retire those heaps. */
void _hpm_heap_fork_child(void) {
    pthread_mutex_init(&abandoned_lock, NULL);
    pthread_mutex_init(&heaps_lock, NULL);
    for (hpm_heap_t *h = heaps_all; h; h = h->next_all) {
        if (h == _hpm_tls_heap || !h->active) continue;
        heap_recount_dead(h);
        heap_abandon(h);
        h->next_free = heaps_free;
        heaps_free = h;
    }
}
