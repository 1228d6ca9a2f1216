/* heap.c: per-thread heaps, the lock-free front end (docs/allocator.md, "Threads").
 *
 * Each thread owns a heap: per size class a current slab, whose free
 * blocks the fast path pops from the heap's hand (hand_take), a list of
 * slabs with free blocks (avail) and a list of slabs that were full when
 * last looked at (full). Frees by the owner push onto the slab's free
 * list, or onto the hand while the slab is current (the span's push_to).
 * Frees by other threads never touch the
 * slab: they travel as batched messages to the owner's inbox (remote.c),
 * and the owner frees them locally on its slow paths, so a full slab
 * becomes available again without any handshake.
 * At thread exit the heap's empty slabs go back to the pageheap at once and
 * the others are abandoned to per-class lists (those with free blocks, and
 * the full ones); a thread that needs a slab of that class takes over
 * (adopts) one with a free block, and a thread that frees a block into an
 * abandoned slab adopts it. A full abandoned slab is left to the frees:
 * the thread that frees its blocks is the one to own it. A
 * free into an abandoned slab that cannot be adopted (an exiting or
 * coloured heap) goes into the slab under the list's lock, and the slab
 * returns to the pageheap when that empties it.
 *
 * The background thread gives back the slabs of an owner that sleeps
 * while its blocks wait in its inbox (remote.c, "An asleep owner's
 * inbox"): it takes them off the avail and full lists while the owner is
 * outside its slab gate (slab_gate_enter), which the owner's slow paths
 * pass.
 *
 * Invariant: a slab is on exactly one of: a heap's current/avail/full, an
 * abandoned list of its class (owner NULL, under abandoned_lock[class]),
 * or none while it is moved. Only the owner, or the holder of the class's
 * abandoned lock for an abandoned slab, writes s->free and s->credit (the
 * asleep drain reads the credit), except that a drain inside the owner's
 * closed gate (the idle drain's kept slabs, the asleep drain) moves the
 * slabs it gives back off their lists, which writes their credit, list
 * and push_to. A slab becomes a heap's only inside that heap's slab
 * gate. */
#include <errno.h>
#include <string.h>
#include "gate.h"
#include "internal.h"

hpm_span_t _hpm_empty_span;
const hpm_heap_t _hpm_no_heap = {.current = {[0 ... HPM_CLASSES - 1] = &_hpm_empty_span}};
__thread hpm_heap_t *_hpm_tls_heap = (hpm_heap_t *)&_hpm_no_heap;
__thread bool _hpm_tls_exited;

static pthread_mutex_t heaps_lock = PTHREAD_MUTEX_INITIALIZER;
static hpm_heap_t *heaps_all, *heaps_free;
/* Held shared by a thread from the start of its exit (heap_thread_exit)
 * until its heap is on heaps_free, and exclusive by fork's prepare handler
 * before any other lock: so no fork finds a heap half abandoned, whose
 * slabs of the class being abandoned (and the batch of its emptied ones)
 * lie only on the vanished thread's stack (session 49's review: a leak in
 * the child). Writers first, so that a stream of exiting threads cannot
 * hold a fork back. Taken before every other lock; not a ranked mutex. */
static pthread_rwlock_t exit_lock = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
void (*_hpm_abandon_test_hook)(unsigned cls);
static bool heap_given;   /* a heap was ever handed to a thread (heaps_lock) */
/* Heaps in use by threads (heaps_lock), and whether they are many: more
 * than many_heaps_over, HPM_MANY_HEAPS_PER_CPU per CPU the process may
 * run on, at least HPM_MANY_HEAPS_MIN (read without the lock). */
static unsigned heaps_in_use, many_heaps_over = HPM_MANY_HEAPS_MIN;
static bool many_heaps;

/* Many heaps in use, on pages backed whole (with HPM_PAGES=off a slab
 * page that holds no block costs nothing). THP's small start counts as
 * whole: the slabs made in it are collapsed into huge pages when the heap
 * outgrows it (500 threads with 5 classes each: 35.5 MB of RSS when only
 * the slabs made after the small start were small, 21.2 MB with all). */
static bool many_heaps_backed_whole(void) {
    return __atomic_load_n(&many_heaps, __ATOMIC_RELAXED) && _hpm_ph.page_mode != PAGES_OFF;
}

bool _hpm_one_heap = true;
uint32_t _hpm_gone_hint, _hpm_asleep_hint, _hpm_bg_wake;

bool _hpm_own_thread_steps_aside(void) {   /* hooks.h: the background thread's and CCoW's */
    return __atomic_load_n(&_hpm_ph.heaps_live, __ATOMIC_RELAXED) == 0 && _hpm_os->threads_uncountable &&
           _hpm_os->threads_uncountable();
}

void _hpm_background_wake(void) {
    __atomic_add_fetch(&_hpm_bg_wake, 1, __ATOMIC_RELEASE);
    if (_hpm_os->wake_word) _hpm_os->wake_word(&_hpm_bg_wake);
}

static void heaps_in_use_set(unsigned n) {   /* heaps_lock held, or the only thread (fork child) */
    heaps_in_use = n;
    __atomic_store_n(&_hpm_ph.heaps_live, n, __ATOMIC_RELAXED);
    __atomic_store_n(&many_heaps, n > many_heaps_over, __ATOMIC_RELAXED);
    __atomic_store_n(&_hpm_one_heap, n <= 1, __ATOMIC_RELAXED);
}
static pthread_mutex_t abandoned_lock[HPM_CLASSES] = {[0 ... HPM_CLASSES - 1] = PTHREAD_MUTEX_INITIALIZER};
static hpm_span_t *abandoned[HPM_CLASSES];        /* LIST_ABANDONED: slabs that had free blocks, or may have */
static hpm_span_t *abandoned_full[HPM_CLASSES];   /* LIST_ABANDONED_FULL: found full; only frees reach them */
static pthread_key_t heap_key;
static bool heap_key_ok;

/* ---- doubly linked slab lists ---- */

static void slist_push(hpm_span_t **head, hpm_span_t *s, int list) {
    s->prev = NULL;
    s->next = *head;
    if (*head) (*head)->prev = s;
    __atomic_store_n(head, s, __ATOMIC_RELAXED);   /* heap_adopt peeks at the head without the lock */
    hpm_slab_set_list(s, (unsigned)list);
}

static void slist_remove(hpm_span_t **head, hpm_span_t *s) {
    if (s->prev) s->prev->next = s->next; else __atomic_store_n(head, s->next, __ATOMIC_RELAXED);
    if (s->next) s->next->prev = s->prev;
    s->next = s->prev = NULL;
    hpm_slab_set_list(s, LIST_NONE);
}

static hpm_span_t *slist_pop(hpm_span_t **head) {
    hpm_span_t *s = *head;
    if (s) slist_remove(head, s);
    return s;
}

/* The avail list is a queue: slabs join at the tail and are taken from
 * the head, so a slab that left the full list is reused only after the
 * others, by which time it has gathered more frees. (A stack would hand
 * out a slab with one free block, which fills again at once: one slow
 * path per allocation in a random free pattern such as alloc-test.) */
static void avail_append(hpm_heap_t *h, unsigned cls, hpm_span_t *s) {
    hpm_span_t *tail = h->avail_tail[cls];
    s->next = NULL;
    s->prev = tail;
    if (tail) tail->next = s; else __atomic_store_n(&h->avail[cls], s, __ATOMIC_RELAXED);
    h->avail_tail[cls] = s;
    hpm_slab_set_list(s, LIST_AVAIL);
}

static void avail_remove(hpm_heap_t *h, unsigned cls, hpm_span_t *s) {
    if (h->avail_tail[cls] == s) h->avail_tail[cls] = s->prev;
    slist_remove(&h->avail[cls], s);
}

static hpm_span_t *avail_pop(hpm_heap_t *h, unsigned cls) {
    hpm_span_t *s = h->avail[cls];
    if (s) avail_remove(h, cls, s);
    return s;
}

/* The slab gate (gate.h, slab_state): the owner is inside it wherever it
 * moves slabs between its lists or works on a slab that is not current,
 * so that the asleep drain (remote.c) may take slabs off those lists
 * while it is outside. The slow paths nest (a free slow path under the
 * inbox's drain under the allocation slow path): the depth counts. */
static inline void slab_gate_enter(hpm_heap_t *h) {
    if (h->slab_gate_depth++ == 0) (void)hpm_gate_enter(h, &h->slab_state);
}

static inline void slab_gate_leave(hpm_heap_t *h) {
    if (--h->slab_gate_depth == 0) hpm_gate_leave(&h->slab_state, atomic_load_explicit(&h->slab_state, memory_order_relaxed));
}

void _hpm_heap_slab_gate_enter(hpm_heap_t *h) { slab_gate_enter(h); }
void _hpm_heap_slab_gate_leave(hpm_heap_t *h) { slab_gate_leave(h); }

/* ---- slabs to and from the pageheap ---- */

/* Slabs back to the pageheap, n of them under one acquisition of its lock. */
static void slabs_release(hpm_span_t *const *v, unsigned n) {
    size_t held = 0;
    for (unsigned i = 0; i < n; i++) {
        atomic_store_explicit(&v[i]->owner, NULL, memory_order_relaxed);
        held += (size_t)__builtin_popcount(v[i]->held_pages_mask);
    }
    if (held) __atomic_sub_fetch(&_hpm_slab_held_pages, held, __ATOMIC_RELAXED);
    pthread_mutex_lock(&_hpm_ph.lock);
    for (unsigned i = 0; i < n; i++) _hpm_ph_free_span(&_hpm_ph, v[i]);
    hpm_ph_unlock(&_hpm_ph);
}

static void slab_release(hpm_span_t *s) { slabs_release(&s, 1); }

/* The colours h's slabs of class cls must lie on: 0 for any (an
 * uncoloured heap, or a class over HPM_COLOUR_MAX_BLOCK). A coloured
 * class's slabs are single pages of those colours (slab_new). */
static uint64_t class_colours(const hpm_heap_t *h, unsigned cls) {
    return _hpm_classes[cls].block_bytes <= HPM_COLOUR_MAX_BLOCK ? h->colour_mask : 0;
}

/* A new slab of class cls, owned by h. A heap's first slab of a class is
 * small (at least 4 blocks), so a program that uses many classes a little
 * still fits one hugepage: while the program is small and
 * single-threaded for every class, and in every heap for blocks over
 * HPM_SMALL_FIRST_ALWAYS_BYTES; for every class again while many heaps
 * are in use (many_heaps: a pool of threads larger than the CPUs can run
 * at once, where each thread's first slabs, 32 KiB each, would add up to
 * more than its blocks). A small slab goes on a granule boundary where
 * its hugepage has one free, for its granule's slot (hugepage.c,
 * first_fit), so its frees take the fast path; a thread's rarely used
 * large classes cost a whole slab each otherwise (glibc-bench with 16
 * threads: 37.7 -> 21.0 MB of max RSS, docs/allocator.md). One at a
 * time: taking several under one lock
 * for a heap that had given slabs back (an allocation wave) halved the
 * pageheap lock rate again, but the spare slabs opened a hugepage of
 * their own (alloc-test, one thread: max RSS 12.0 -> 14.0 MB), so no. */
static hpm_span_t *slab_new(hpm_heap_t *h, unsigned cls) {
    const hpm_class_t *k = &_hpm_classes[cls];
    uint64_t colours = class_colours(h, cls);
    size_t first_pages = (4u * k->block_bytes + HPM_PAGE_BYTES - 1) >> HPM_PAGE_SHIFT;
    bool small_first = !h->slabs_made[cls] && (k->block_bytes > HPM_SMALL_FIRST_ALWAYS_BYTES ||
                                               !__atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED) ||
                                               many_heaps_backed_whole());
    size_t pages = colours ? 1 : small_first ? first_pages : k->slab_pages;
    if (h->slabs_made[cls] < 255) h->slabs_made[cls]++;
    pthread_mutex_lock(&_hpm_ph.lock);
    hpm_span_t *s = _hpm_ph_alloc_span(&_hpm_ph, pages, SPAN_SLAB, colours);
    hpm_ph_unlock(&_hpm_ph);
    if (!s) return NULL;
    _hpm_slab_format(s, cls);
    atomic_store_explicit(&s->owner, h, memory_order_release);
    return s;
}

/* Collects slabs to give back, HPM_SLAB_BATCH per pageheap lock. */
typedef struct { hpm_span_t *v[HPM_SLAB_BATCH]; unsigned n; } slab_batch_t;

static void batch_add(slab_batch_t *b, hpm_span_t *s) {
    b->v[b->n++] = s;
    if (b->n == HPM_SLAB_BATCH) { slabs_release(b->v, b->n); b->n = 0; }
}

static void batch_flush(slab_batch_t *b) {
    if (b->n) slabs_release(b->v, b->n);
    b->n = 0;
}

/* An own slab that became empty: kept for reuse (no pageheap lock, no
 * re-format) while the heap keeps fewer than HPM_HEAP_EMPTY_SLABS of them,
 * so that producer/consumer traffic and allocation waves that cross slab
 * boundaries do not give slabs back and take them again. Past that, it
 * goes back with HPM_SLAB_BATCH - 1 of the kept ones (its own class's
 * first), under one pageheap lock. */
static void slab_retire(hpm_heap_t *h, hpm_span_t *s) {
    if (!h->active) { slab_release(s); return; }
    uint32_t in = _hpm_heap_gate_enter(h);   /* the idle drain may take the kept ones */
    if (h->empty_slabs < HPM_HEAP_EMPTY_SLABS) {
        slist_push(&h->empty[s->class_idx], s, LIST_EMPTY);
        h->empty_slabs++;
        _hpm_heap_gate_leave(h, in);
        return;
    }
    slab_batch_t b = {.v = {s}, .n = 1};
    for (unsigned i = 0, c = s->class_idx; i < HPM_CLASSES && b.n < HPM_SLAB_BATCH; i++, c = (c + 1) % HPM_CLASSES) {
        hpm_span_t *t;
        while (b.n < HPM_SLAB_BATCH && (t = slist_pop(&h->empty[c]))) {
            h->empty_slabs--;
            b.v[b.n++] = t;   /* not batch_add: exactly one batch goes back */
        }
    }
    _hpm_heap_gate_leave(h, in);
    batch_flush(&b);
}

/* Every kept emptied slab back to the pageheap: the owner inside the
 * gate, or the idle drain with the gate closed (its count falls with an
 * atomic store: kept_take reads it outside the gate). */
static void kept_release(hpm_heap_t *h) {
    slab_batch_t b = {.n = 0};
    for (unsigned c = 0; c < HPM_CLASSES && h->empty_slabs; c++) {
        hpm_span_t *s;
        while ((s = slist_pop(&h->empty[c]))) {
            __atomic_store_n(&h->empty_slabs, h->empty_slabs - 1, __ATOMIC_RELAXED);
            batch_add(&b, s);
        }
    }
    batch_flush(&b);
}

static void heap_release_kept(hpm_heap_t *h) {
    uint32_t in = _hpm_heap_gate_enter(h);
    kept_release(h);
    _hpm_heap_gate_leave(h, in);
}

/* A kept emptied slab of another class with pages pages, or NULL. */
static hpm_span_t *kept_other(hpm_heap_t *h, uint32_t pages) {
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hpm_span_t *s = h->empty[c];
        if (s && s->n_pages == pages) return slist_pop(&h->empty[c]);
    }
    return NULL;
}

/* A kept emptied slab for class cls, or NULL: one of the class, else one
 * of another class of the same size, formatted again for cls (it holds no
 * block, and none is on its way: those count as live). Slabs come in two
 * sizes besides the small first ones (32 KiB under 4 KiB blocks, 64 KiB
 * from there: sizeclass.c), so a kept slab serves whichever class of its
 * size runs dry next, where it used to wait for its own
 * while the other took fresh pages (docs/allocator.md, "Written pages
 * first"); not a coloured class (test_colour). Only the owner adds to the count, so a 0 read outside the gate
 * is true; the gate is not entered then, and a heap that only opens new
 * slabs stays idle to the drain. */
static hpm_span_t *kept_take(hpm_heap_t *h, unsigned cls) {
    if (!__atomic_load_n(&h->empty_slabs, __ATOMIC_RELAXED)) return NULL;
    uint32_t in = _hpm_heap_gate_enter(h);
    hpm_span_t *s = slist_pop(&h->empty[cls]);
    if (!s && !class_colours(h, cls)) s = kept_other(h, _hpm_classes[cls].slab_pages);
    if (s) h->empty_slabs--;
    _hpm_heap_gate_leave(h, in);
    if (s && s->class_idx != cls) _hpm_slab_reformat(s, cls);
    return s;
}

/* Make every free block of the slab available (blocks of pages given back
 * by subrelease). True when it has a free block. */
static bool slab_gather(hpm_span_t *s) {
    if (!s->free && s->held_pages_mask) _hpm_slab_refill(s);
    if (!s->free) _hpm_slab_extend(s);   /* false when every block is formatted */
    return s->free != NULL;
}

static bool may_adopt(const hpm_heap_t *h, unsigned cls) {
    return h->active && !class_colours(h, cls);
}

static hpm_span_t **abandoned_head(const hpm_span_t *s) {
    return s->list == LIST_ABANDONED_FULL ? &abandoned_full[s->class_idx] : &abandoned[s->class_idx];
}

/* Take over an abandoned slab of class cls with a free block (returned,
 * to become current) or NULL. The full ones it meets on the way (up to 8)
 * move to the full list: they cannot serve this malloc, their blocks belong
 * to whoever frees them, and adopting them would make each of those frees
 * a remote free. */
static hpm_span_t *heap_adopt(hpm_heap_t *h, unsigned cls) {
    if (!__atomic_load_n(&abandoned[cls], __ATOMIC_RELAXED) || !may_adopt(h, cls)) return NULL;
    hpm_span_t *got = NULL;
    pthread_mutex_lock(&abandoned_lock[cls]);
    for (int tries = 0; tries < 8 && !got; tries++) {
        hpm_span_t *s = slist_pop(&abandoned[cls]);
        if (!s) break;
        if (!slab_gather(s)) { slist_push(&abandoned_full[cls], s, LIST_ABANDONED_FULL); continue; }
        atomic_store_explicit(&s->owner, h, memory_order_relaxed);
        got = s;
    }
    pthread_mutex_unlock(&abandoned_lock[cls]);
    return got;
}

/* A free into an abandoned slab. The freeing thread takes the slab over
 * when it may, so that its later frees there are local (larson-like
 * servers, where a new thread inherits the blocks of one that exited).
 * False when the slab was adopted meanwhile (the caller routes again). */
static bool free_abandoned(hpm_heap_t *h, hpm_span_t *s, void **b) {
    unsigned cls = s->class_idx;
    bool gated = h && may_adopt(h, cls);   /* a slab becomes h's only inside h's slab gate (remote.c's drain) */
    if (gated) slab_gate_enter(h);
    pthread_mutex_lock(&abandoned_lock[cls]);
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) != NULL ||
        (s->list != LIST_ABANDONED && s->list != LIST_ABANDONED_FULL)) {
        pthread_mutex_unlock(&abandoned_lock[cls]);
        if (gated) slab_gate_leave(h);
        return false;
    }
    b[0] = s->free;
    s->free = b;
    s->credit--;
    bool empty = hpm_slab_used(s) == 0, adopt = !empty && h && may_adopt(h, cls);   /* decided under the lock */
    if (empty || adopt) slist_remove(abandoned_head(s), s);
    else if (s->list == LIST_ABANDONED_FULL) {   /* it has a free block now */
        slist_remove(&abandoned_full[cls], s);
        slist_push(&abandoned[cls], s, LIST_ABANDONED);
    }
    if (adopt) atomic_store_explicit(&s->owner, h, memory_order_relaxed);
    pthread_mutex_unlock(&abandoned_lock[cls]);
    if (empty) slab_release(s);   /* no live block left: nobody else can reach it */
    else if (adopt) avail_append(h, cls, s);
    if (gated) slab_gate_leave(h);
    return true;
}

void _hpm_free_other(hpm_heap_t *h, void **b) { _hpm_free_other_in(h, hpm_span_of(b), b); }

void _hpm_free_other_in(hpm_heap_t *h, hpm_span_t *s, void **b) {
    for (;;) {
        hpm_heap_t *owner = atomic_load_explicit(&s->owner, memory_order_acquire);
        if (owner != NULL && owner == h) { hpm_slab_free_local(h, s, b); return; }
        if (owner != NULL) { _hpm_remote_push(h, owner, b); return; }
        if (free_abandoned(h, s, b)) return;
    }
}

/* The current slab's free list becomes the hand, and the slab's local
 * frees go to the hand from now on (push_to), so a block just freed is
 * the next one handed out, as before. While the slab is in the hand its
 * own list stays empty and its count is not kept (frees still decrement
 * it, mallocs do not touch the slab): it is set again, exactly, whenever
 * the hand is empty or given back. */
static inline void hand_take(hpm_heap_t *h, hpm_span_t *s) {
    h->hand[s->class_idx] = s->free;
    s->free = NULL;
    s->push_to = &h->hand[s->class_idx];
    hpm_slab_set_used(s, hpm_slab_fresh(s) - s->held_blocks);   /* slab.c's invariant with an empty free list */
}

static inline void *hand_pop(hpm_heap_t *h, unsigned cls) {
    void **b = h->hand[cls];
    h->hand[cls] = b[0];
    hpm_block_set_mark(b, 0);
    hpm_used_add(h, _hpm_class_block_bytes[cls]);
    return b;
}

/* The hand goes back: the current slab's blocks on its own list, which
 * counts its live blocks again (the slab stays current), and blocks of
 * other slabs (kept for stalled owners, remote.c) freed as any block of
 * theirs would be. For trim, thread exit, fork, and the allocation slow
 * path (where the hand is empty). At most 2^24 blocks are walked: a
 * thread that vanished at fork may have left the hand in any state a
 * fast path leaves it, which is a valid list. */
static void hand_return(hpm_heap_t *h, unsigned cls) {
    hpm_span_t *s = h->current[cls];
    void **b = h->hand[cls];
    h->hand[cls] = NULL;
    h->kept_blocks[cls] = 0;   /* the kept blocks go back below; on the slow path the hand ran dry, so it is drawn from */
    if (s == &_hpm_empty_span || s->push_to != &h->hand[cls]) return;
    uint32_t n = 0;
    void **own = NULL, **foreign = NULL;
    for (void **next; b && n + 1 < (1u << 24); b = next) {
        next = b[0];
        if ((uintptr_t)b - s->start < ((uintptr_t)s->n_pages << HPM_PAGE_SHIFT)) { b[0] = own; own = b; n++; }
        else { b[0] = foreign; foreign = b; }
    }
    s->free = own;
    s->push_to = (void ***)&s->free;
    hpm_slab_set_used(s, hpm_slab_fresh(s) - s->held_blocks - n);
    for (void **next; foreign; foreign = next) {
        next = foreign[0];
        _hpm_free_other(h, foreign);
    }
}

void *_hpm_heap_alloc_slow(hpm_heap_t *h, unsigned cls) {
    if (unlikely(h == &_hpm_no_heap) && !(h = _hpm_heap_acquire())) {   /* the thread's first malloc */
        errno = ENOMEM;
        return NULL;
    }
    hpm_remote_poll(h);
    if (h->outbox_blocks) _hpm_remote_flush(h);
    slab_gate_enter(h);
    hpm_span_t *s = h->current[cls];
    if (s != &_hpm_empty_span) {
        hand_return(h, cls);   /* an empty hand: every formatted block the slab does not hold is live */
        if (slab_gather(s)) {
            hand_take(h, s);
            slab_gate_leave(h);
            return hand_pop(h, cls);
        }
        h->current[cls] = &_hpm_empty_span;
        slist_push(&h->full[cls], s, LIST_FULL);
    }
    while ((s = avail_pop(h, cls))) {
        if (slab_gather(s)) break;
        slist_push(&h->full[cls], s, LIST_FULL);
    }
    if (!s) s = kept_take(h, cls);
    if (!s) s = heap_adopt(h, cls);
    if (!s) s = slab_new(h, cls);
    if (!s) {
        slab_gate_leave(h);
        errno = ENOMEM;
        return NULL;
    }
    hpm_slab_set_list(s, LIST_CURRENT);
    h->current[cls] = s;
    hpm_check_internal(_hpm_check_span, s);
    hand_take(h, s);
    slab_gate_leave(h);
    void *p = hand_pop(h, cls);
    hpm_collapse_poll();   /* slab_new may have queued it; the heap is whole again */
    return p;
}

/* A free into an own slab that is not current: a full one becomes
 * available, an empty one is kept or returns to the pageheap. The asleep
 * drain may have given the slab back between the free's count and the
 * gate (the free was of its last block outside the inbox, remote.c):
 * then it is not ours any more, and nothing is left to do. */
void _hpm_heap_free_slow(hpm_heap_t *h, hpm_span_t *s) {
    slab_gate_enter(h);
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) != h) {
        slab_gate_leave(h);
        return;
    }
    unsigned cls = s->class_idx;
    if (s->list == LIST_FULL) {
        slist_remove(&h->full[cls], s);
        avail_append(h, cls, s);
    }
    if (s->list == LIST_CURRENT) {   /* 2^30 frees into the hand: its count is not kept (hand_take) */
        hpm_slab_set_used(s, 0);
    } else if (hpm_slab_used(s) == 0 && s->list == LIST_AVAIL) {
        avail_remove(h, cls, s);
        slab_retire(h, s);
    }
    slab_gate_leave(h);
}

/* The asleep drain's slabs (remote.c): h's gate is closed and its owner
 * outside, so the lists are the drain's to change. */
void _hpm_heap_release_drained(hpm_heap_t *h, hpm_span_t *list) {
    slab_batch_t b = {.n = 0};
    for (hpm_span_t *s = list, *next; s; s = next) {
        next = s->drain_next;
        if (s->list == LIST_AVAIL) avail_remove(h, s->class_idx, s);
        else slist_remove(&h->full[s->class_idx], s);
        batch_add(&b, s);
    }
    batch_flush(&b);
}

/* ---- heap lifetime ---- */

/* Thread exit: outgoing frees sent, incoming ones freed, empty slabs back
 * to the pageheap, the rest abandoned; then the inbox is closed and what
 * arrived meanwhile goes into the abandoned slabs. */
static void heap_abandon(hpm_heap_t *h) {
    slab_gate_enter(h);
    __atomic_store_n(&h->active, false, __ATOMIC_RELAXED);
    _hpm_remote_flush(h);
    _hpm_remote_drain(h);
    _hpm_spancache_flush(h);
    heap_release_kept(h);
    /* Empty slabs go back in batches; the others of a class are abandoned
     * under one acquisition of the class's lock (larson's hand-overs
     * abandoned slab by slab: 800 class-lock acquisitions per million
     * replacements). */
    slab_batch_t b = {.n = 0};
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hand_return(h, c);
        hpm_span_t *lists[3] = {h->current[c] == &_hpm_empty_span ? NULL : h->current[c], h->avail[c], h->full[c]};
        h->current[c] = &_hpm_empty_span;
        h->avail[c] = h->avail_tail[c] = h->full[c] = NULL;
        /* chains through next, last found first: the current slab ends on
         * top of the abandoned list; the full list's slabs go to the full one */
        hpm_span_t *keep[2] = {NULL, NULL};
        for (int l = 0; l < 3; l++) {
            for (hpm_span_t *s = lists[l], *next; s; s = next) {
                next = l == 0 ? NULL : s->next;
                s->next = s->prev = NULL;
                hpm_slab_set_list(s, LIST_NONE);
                if (hpm_slab_used(s) == 0) { batch_add(&b, s); continue; }
                bool full = l == 2 && !s->held_pages_mask;   /* held pages hold free blocks (slab_gather) */
                s->next = keep[full];
                keep[full] = s;
            }
        }
        if (!keep[0] && !keep[1]) continue;
        if (unlikely(_hpm_abandon_test_hook != NULL)) _hpm_abandon_test_hook(c);
        pthread_mutex_lock(&abandoned_lock[c]);
        for (int full = 0; full < 2; full++) {
            for (hpm_span_t *s = keep[full], *next; s; s = next) {
                next = s->next;
                atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
                if (full) slist_push(&abandoned_full[c], s, LIST_ABANDONED_FULL);
                else slist_push(&abandoned[c], s, LIST_ABANDONED);
            }
        }
        pthread_mutex_unlock(&abandoned_lock[c]);
    }
    batch_flush(&b);
    _hpm_remote_close(h);
    slab_gate_leave(h);
}

static void heap_thread_exit(void *arg) {
    hpm_heap_t *h = arg;
    if (!h) return;
    bool exit_locked = pthread_rwlock_rdlock(&exit_lock) == 0;
    if (HPM_DEBUG >= 3) {   /* the span cache and slab lists are the drains' too: checked inside the gates (another thread's out-of-memory retry drains busy heaps) */
        slab_gate_enter(h);
        uint32_t in = _hpm_heap_gate_enter(h);
        hpm_check_expensive(_hpm_check_heap, h);
        _hpm_heap_gate_leave(h, in);
        slab_gate_leave(h);
    }
    heap_abandon(h);
    _hpm_tls_heap = (hpm_heap_t *)&_hpm_no_heap;
    _hpm_tls_exited = true;
    pthread_mutex_lock(&heaps_lock);
    h->next_free = heaps_free;
    heaps_free = h;
    heaps_in_use_set(heaps_in_use - 1);
    bool last = heaps_in_use == 0;
    pthread_mutex_unlock(&heaps_lock);
    if (exit_locked) pthread_rwlock_unlock(&exit_lock);
    if (last) {   /* the program's last thread may be ending: the process must exit once it has (init.c, background_sleep) */
        __atomic_add_fetch(&_hpm_gone_hint, 1, __ATOMIC_RELAXED);
        _hpm_background_wake();
    }
}

void _hpm_heaps_init(void) {
    for (unsigned c = 0; c < HPM_CLASSES; c++) abandoned[c] = abandoned_full[c] = NULL;
    _hpm_lock_rank(&heaps_lock, HPM_LOCK_HEAPS);
    /* one rank for the per-class abandoned locks: fork's prepare handler
     * holds all of them, taken in ascending order */
    _hpm_lock_rank_n(abandoned_lock, HPM_CLASSES, HPM_LOCK_ABANDONED);
    heap_key_ok = pthread_key_create(&heap_key, heap_thread_exit) == 0;
    unsigned cpus = _hpm_ph.os && _hpm_ph.os->cpu_count ? _hpm_ph.os->cpu_count() : 1;
    many_heaps_over = cpus * HPM_MANY_HEAPS_PER_CPU > HPM_MANY_HEAPS_MIN ? cpus * HPM_MANY_HEAPS_PER_CPU : HPM_MANY_HEAPS_MIN;
}

hpm_heap_t *_hpm_heap_acquire(void) {
    hpm_ensure_init();
    if (hpm_my_heap()) return _hpm_tls_heap;
    pthread_mutex_lock(&heaps_lock);
    hpm_heap_t *h = heaps_free;
    if (h) heaps_free = h->next_free;
    /* judged under the lock: two threads that start together both found
     * heaps_all empty (the first links its new heap only below), and
     * neither turned the caches on (test_linepairs under ASan and TSan) */
    bool second = heap_given;
    heap_given = true;
    heaps_in_use_set(heaps_in_use + 1);
    pthread_mutex_unlock(&heaps_lock);
    /* A second thread: medium spans are cached from now on, so that
     * threads do not meet at the pageheap lock for each one (spancache.c) */
    if (second && !__atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED))
        __atomic_store_n(&_hpm_ph.medium_caching, true, __ATOMIC_RELAXED);
    if (!h) {
        h = _hpm_meta_alloc(sizeof *h);
        pthread_mutex_lock(&heaps_lock);
        if (!h) {
            heaps_in_use_set(heaps_in_use - 1);
            pthread_mutex_unlock(&heaps_lock);
            return NULL;
        }
        h->next_all = heaps_all;
        __atomic_store_n(&heaps_all, h, __ATOMIC_RELEASE);   /* readers walk without the lock */
        pthread_mutex_unlock(&heaps_lock);
    }
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        h->current[c] = &_hpm_empty_span;
        h->hand[c] = NULL;
        h->avail[c] = h->avail_tail[c] = h->full[c] = NULL;   /* empty[c]: NULL (heap_abandon), and the idle drain's */
        h->slabs_made[c] = 0;
        h->kept_blocks[c] = 0;
    }
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES; c++) h->span_refills[c] = 0;
    _hpm_remote_open(h);
    h->colour_mask = (uint64_t)_hpm_option(HPM_OPT_COLORS);
    __atomic_store_n(&h->active, true, __ATOMIC_RELAXED);
    h->next_free = NULL;
    _hpm_tls_heap = h;
    /* After the thread's exit the heap is for one call, which gives it
     * back (_hpm_heap_call_done): glibc may run no destructor again */
    if (heap_key_ok && !_hpm_tls_exited) pthread_setspecific(heap_key, h);
    return h;
}

/* The end of a call after the thread's exit (alloc.c, after_exit): the
 * heap it took goes back as at the thread's exit. Before, the heap stayed
 * taken, its key set again so that glibc would run heap_thread_exit once
 * more; in glibc's last round of destructors (a program's destructor that
 * sets its key again, as one that wants to run last does) none came, and
 * each such thread left a heap in use and its slabs owned by no one
 * alive (session 52's review: 10,000 threads, 125 MB of RSS). */
void _hpm_heap_call_done(void) {
    hpm_heap_t *h = hpm_my_heap();
    if (h && _hpm_tls_exited) heap_thread_exit(h);
}

/* The idle drain (spancache.c): a heap whose owner made no operation on
 * its span cache or its emptied slabs for idle_ticks calls in a row (and
 * made one ever) has its cache drained and its kept emptied slabs given
 * back once, at the call that makes it idle_ticks (0: every heap, now). A
 * thread that only mallocs and frees within its slabs counts as idle
 * here, and its kept slabs go back: it has not needed them for that long.
 * In the same rounds, the asleep drain (remote.c) of a heap whose inbox
 * was found untaken and not empty at ib_wait calls in a row after the
 * first (0: every other heap with blocks in its inbox, now). Up to 64
 * heaps are closed, fenced with one membarrier and drained per round.
 * Under heaps_lock, so that no fork stops a drain halfway (fork_prepare
 * takes it first) and no heap is handed to a new thread meanwhile. */
uint64_t _hpm_idle_drains, _hpm_asleep_drains, _hpm_asleep_slabs;

static bool idle_due(hpm_heap_t *h, unsigned idle_ticks) {
    uint32_t st = atomic_load_explicit(&h->sc_state, memory_order_relaxed);
    if (st != h->sc_seen_state) {
        h->sc_seen_state = st;
        h->sc_idle_ticks = 0;
        if (idle_ticks) return false;
    } else if (h->sc_idle_ticks < 255) {
        h->sc_idle_ticks++;
    }
    return !idle_ticks || (h->sc_idle_ticks == idle_ticks && st != 0);   /* st 0: never used its cache */
}

#define ASLEEP_WAIT_MAX 64   /* looks between two drains of a heap whose drains free nothing: 16 s at the default window */

/* *again: the inbox was found waiting for the first time since the owner took it. */
static bool asleep_due(hpm_heap_t *h, unsigned idle_ticks, bool *again) {
    void *in = atomic_load_explicit(&h->inbox, memory_order_relaxed);
    uint32_t takes = atomic_load_explicit(&h->inbox_takes, memory_order_relaxed);
    bool waiting = in != NULL && in != HPM_INBOX_CLOSED;
    if (!waiting || takes != h->ib_seen_takes || h->ib_wait == 0) {   /* nothing waits, or the owner took some */
        h->ib_seen_takes = takes;
        h->ib_ticks = 0;
        h->ib_wait = 1;
        if (waiting) *again = true;
    } else if (h->ib_ticks < 255) {
        h->ib_ticks++;
    }
    if (!waiting || h == hpm_my_heap()) return false;   /* a caller's own inbox is its own to take */
    return !idle_ticks || (h->ib_ticks && h->ib_ticks >= h->ib_wait);
}

/* true when it gave slabs back */
static bool asleep_drain(hpm_heap_t *h) {
    unsigned freed = _hpm_remote_drain_asleep(h);
    _hpm_asleep_drains++;
    _hpm_asleep_slabs += freed;
    h->ib_ticks = 0;
    if (freed) h->ib_wait = 1;
    else if (h->ib_wait < ASLEEP_WAIT_MAX) h->ib_wait *= 2;
    return freed != 0;
}

/* The rounds of both drains (idle: the idle drain too); true when another asleep look soon is worth it. */
static bool drain_rounds(unsigned idle_ticks, bool idle, bool *fenced_out) {
    const hpm_os_t *os = _hpm_ph.os;
    *fenced_out = false;
    if (!os || !os->fence_all_threads) return false;
    bool fenced = true, again = false;
    pthread_mutex_lock(&heaps_lock);
    hpm_heap_t *h = heaps_all;
    while (h && fenced) {
        hpm_heap_t *round[64];
        uint8_t what[64];   /* 1: idle, 2: asleep */
        unsigned n = 0;
        for (; h && n < 64; h = h->next_all) {
            unsigned w = (idle && idle_due(h, idle_ticks) ? 1u : 0u) | (asleep_due(h, idle_ticks, &again) ? 2u : 0u);
            if (!w) continue;
            _hpm_heap_gate_close(h);
            what[n] = (uint8_t)w;
            round[n++] = h;
        }
        fenced = n == 0 || os->fence_all_threads() == 0;
        for (unsigned i = 0; i < n; i++) {
            hpm_heap_t *r = round[i];
            if ((what[i] & 1) && _hpm_spancache_drain_closed(r, fenced)) {
                kept_release(r);
                _hpm_idle_drains++;
            }
            if ((what[i] & 2) && fenced && hpm_gate_owner_out(&r->slab_state) && asleep_drain(r)) again = true;
            _hpm_heap_gate_open(r);
        }
    }
    pthread_mutex_unlock(&heaps_lock);
    *fenced_out = fenced;
    return again;
}

bool _hpm_heaps_drain_idle(unsigned idle_ticks) {
    bool fenced;
    (void)drain_rounds(idle_ticks, true, &fenced);
    return fenced;
}

bool _hpm_heaps_drain_asleep(void) {
    bool fenced;
    return drain_rounds(1, false, &fenced);
}

/* The bytes in use that changed hands without a heap: frees (and a
 * realloc's size changes) by a thread after its heap was given back (a
 * program's key destructor that glibc runs after hpmalloc's frees the
 * thread's data) or by a thread whose metadata ran out. The block was
 * counted in some heap when it was allocated; without this count the sum
 * stayed up by its size for good (100 threads whose destructor freed a
 * 4 MB block each: bytes in use 400 MB with nothing live). */
static int64_t heapless_used_bytes;

void _hpm_heapless_used_add(int64_t delta) { __atomic_add_fetch(&heapless_used_bytes, delta, __ATOMIC_RELAXED); }

/* Heaps are never freed and only ever pushed at the head, so the list can
 * be walked without the lock (from any lock context). */
int64_t _hpm_heaps_used_bytes(void) {
    int64_t sum = __atomic_load_n(&heapless_used_bytes, __ATOMIC_RELAXED);
    for (hpm_heap_t *h = __atomic_load_n(&heaps_all, __ATOMIC_ACQUIRE); h; h = h->next_all)
        sum += __atomic_load_n(&h->used_bytes, __ATOMIC_RELAXED);
    return sum;
}

/* Give back the calling thread's empty slabs, current ones included (for
 * trim: a program that freed everything and went idle keeps one slab per
 * size class otherwise). */
void _hpm_heap_release_empty(bool shed) {
    hpm_heap_t *h = hpm_my_heap();
    if (!h) return;
    slab_gate_enter(h);
    _hpm_remote_flush(h);
    _hpm_remote_drain(h);
    _hpm_spancache_flush(h);
    heap_release_kept(h);
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hand_return(h, c);
        hpm_span_t *s = h->current[c];
        if (s != &_hpm_empty_span) {
            if (hpm_slab_used(s) == 0) {
                h->current[c] = &_hpm_empty_span;
                hpm_slab_set_list(s, LIST_NONE);
                slab_release(s);
            } else {
                if (shed) _hpm_slab_shed(s);
                hand_take(h, s);
            }
        }
        for (s = h->avail[c]; s; ) {
            hpm_span_t *next = s->next;
            if (hpm_slab_used(s) == 0) { avail_remove(h, c, s); slab_release(s); }
            else if (shed) _hpm_slab_shed(s);
            s = next;
        }
    }
    _hpm_remote_flush(h);   /* blocks the hands kept for other heaps */
    slab_gate_leave(h);
}

/* Shed the free pages of abandoned slabs (for trim; an abandoned slab
 * that empties is released at once; a full one has no free page). */
void _hpm_heaps_reclaim_abandoned(bool shed) {
    if (!shed) return;
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        pthread_mutex_lock(&abandoned_lock[c]);
        for (hpm_span_t *s = abandoned[c]; s; s = s->next) _hpm_slab_shed(s);
        pthread_mutex_unlock(&abandoned_lock[c]);
    }
}

HPM_API int hpm_thread_colors(uint64_t mask) {
    long count = _hpm_option(HPM_OPT_COLOR_COUNT);
    hpm_heap_t *h = _hpm_tls_exited && !hpm_my_heap() ? NULL : _hpm_heap_acquire();   /* after its exit a thread has no heap to colour */
    uint64_t all = hpm_colours_all(count);
    if (!h || (mask & ~all) != 0) { errno = EINVAL; return -1; }
    h->colour_mask = (mask & all) == all ? 0 : mask;
    return 0;
}

/* ---- fork ---- */

void _hpm_heap_fork_prepare(void) {
    pthread_rwlock_wrlock(&exit_lock);   /* threads inside their exit finish it first */
    pthread_mutex_lock(&heaps_lock);
    for (unsigned c = 0; c < HPM_CLASSES; c++) pthread_mutex_lock(&abandoned_lock[c]);
    _hpm_transfer_fork_prepare();
}

void _hpm_heap_fork_parent(void) {
    _hpm_transfer_fork_parent();
    for (unsigned c = 0; c < HPM_CLASSES; c++) pthread_mutex_unlock(&abandoned_lock[c]);
    pthread_mutex_unlock(&heaps_lock);
    pthread_rwlock_unlock(&exit_lock);
}

/* A heap whose thread vanished at fork, maybe in the middle of a fast
 * path (every step there leaves the free list a valid list, but `used`
 * may lag one block behind, an outbox slot's count behind its list, and
 * the span cache's byte count behind a stack's count): recount what
 * abandoning it relies on. A block or span caught between a list and the
 * program stays counted as live (a leak of one, never one given out
 * twice). */
static void heap_repair(hpm_heap_t *h) {
    atomic_store_explicit(&h->sc_state, atomic_load_explicit(&h->sc_state, memory_order_relaxed) & ~1u,
                          memory_order_relaxed);   /* stopped inside its cache: out now (no drain crosses a fork: heaps_lock) */
    atomic_store_explicit(&h->slab_state, atomic_load_explicit(&h->slab_state, memory_order_relaxed) & ~1u,
                          memory_order_relaxed);   /* the same for its slab lists */
    h->slab_gate_depth = 0;
    size_t cached_bytes = 0;
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES; c++) cached_bytes += (size_t)h->span_cache_n[c] * hpm_medium_bytes(c);
    h->span_cache_bytes = cached_bytes;
    h->outbox_blocks = 0;
    for (unsigned i = 0; i < HPM_OUTBOX_SLOTS; i++) {
        hpm_outbox_t *o = &h->outbox[i];
        o->count = 0;
        if (!o->head) continue;
        if (!o->tail) o->tail = o->head;
        for (void **b = o->head; ; b = b[0]) { o->count++; if (b == o->tail || !b[0]) { o->tail = b; break; } }
        h->outbox_blocks += o->count;
    }
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hand_return(h, c);
        hpm_span_t *lists[4] = {h->current[c] == &_hpm_empty_span ? NULL : h->current[c], h->avail[c], h->full[c], h->empty[c]};
        for (int l = 0; l < 4; l++) {
            for (hpm_span_t *s = lists[l]; s; s = l == 0 ? NULL : s->next) {
                uint32_t n = 0;
                for (void **b = s->free; b && n <= s->capacity; b = b[0]) n++;
                hpm_slab_set_used(s, hpm_slab_fresh(s) - n - s->held_blocks);
            }
        }
    }
}

/* In the child only this thread survives: abandon every other thread's
 * heap so its slabs can be adopted, and retire those heaps. Every heap
 * but this thread's is then free, so the free list is made anew from all
 * of them: one that a thread had taken off the list and not yet set up
 * (heap_acquire) holds nothing, and would otherwise be lost to the child.
 * No heap is half abandoned (exit_lock). */
void _hpm_heap_fork_child(void) {
    _hpm_transfer_fork_child();
    /* let go first, then make anew: see init.c fork_child */
    for (unsigned c = 0; c < HPM_CLASSES; c++) pthread_mutex_unlock(&abandoned_lock[c]);
    pthread_mutex_unlock(&heaps_lock);
    pthread_rwlock_unlock(&exit_lock);
    for (unsigned c = 0; c < HPM_CLASSES; c++) pthread_mutex_init(&abandoned_lock[c], NULL);
    pthread_mutex_init(&heaps_lock, NULL);
    exit_lock = (pthread_rwlock_t)PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP;
    heaps_in_use_set(hpm_my_heap() ? 1 : 0);
    heaps_free = NULL;
    for (hpm_heap_t *h = heaps_all; h; h = h->next_all) {
        if (h == _hpm_tls_heap) continue;
        if (h->active) {
            heap_repair(h);
            heap_abandon(h);
        }
        h->next_free = heaps_free;
        heaps_free = h;
    }
}
