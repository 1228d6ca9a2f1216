/* alloc.c: the public allocation API (hpm_*) and the libc names.
 *
 * Small requests (<= 8 KiB) go to the calling thread's heap; medium ones
 * (up to 1 MiB) are page spans placed by the pageheap; larger ones take
 * whole hugepages. Every free is checked (docs/allocator.md, "Checks"): the page map
 * says whether the pointer belongs to a live span, the size class says
 * whether it is a block start, and the free-block cookie catches double
 * frees. A bad pointer stops the process with one line on stderr.
 * Errors follow C/POSIX: NULL with errno ENOMEM or EINVAL. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"

/* ---- errors ---- */

static void bad_pointer(const char *fn, const void *p) {
    if (_hpm_ph_owns(p))
        _hpm_fatal(fn, p, "pointer into free memory of the hpmalloc heap (double free or dangling pointer)");
    _hpm_fatal(fn, p, "pointer was not allocated by hpmalloc (wild pointer)");
}

/* ---- allocation ---- */

/* NULL after the thread's exit (its callers go on without a heap, or
 * through after_exit_done), or when metadata ran out. */
static inline hpm_heap_t *heap_get(void) {
    hpm_heap_t *h = hpm_my_heap();
    return likely(h != NULL) ? h : _hpm_tls_exited ? NULL : _hpm_heap_acquire();
}

/* An allocation after this thread's heap was given back (a program's key
 * destructor that glibc runs after hpmalloc's) takes a heap for itself
 * and gives it back before it returns (heap.c, _hpm_heap_call_done): no
 * destructor may come to give back a heap it kept. */
static __attribute__((noinline, cold)) void after_exit_done(void) {
    int saved = errno;   /* the call's answer, not the give-back's */
    _hpm_heap_call_done();
    errno = saved;
}

/* The background thread (init.c) releases what waits in the pageheap's
 * and the central caches and drains idle threads' caches; nothing else
 * reaches them once the program stops calling the allocator. It starts
 * from malloc's slow paths, never from a free (glibc frees with a lock
 * held that pthread_create takes, init.c): once a second thread has run
 * (span caches, kept slabs, idle threads), or once the pageheap backs
 * more hugepages than its cache keeps (a free can then leave some for
 * the release tick), checked after the slow path's growth. */
static __attribute__((noinline, cold)) void background_maybe_start(void) {
    if (atomic_load_explicit(&_hpm_ready, memory_order_acquire) != 2) return;   /* a thread's first malloc, maybe before the set-up */
    if (__atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED) ||
        __atomic_load_n(&_hpm_stats->hp_backed, __ATOMIC_RELAXED) > (uint64_t)_hpm_ph.cache_keep_hp)
        _hpm_background_kick();
}

static inline void background_check(void) {
    if (unlikely(!atomic_load_explicit(&_hpm_background_started, memory_order_relaxed))) background_maybe_start();
}

/* Out of memory (the pageheap could not grow: an address-space or commit
 * limit): before a request fails, the empty slabs this thread keeps, its
 * span cache, every other thread's (the idle drain's gate, at once) and
 * the central caches go back to the pageheap, and the request is tried
 * once more. Under a 1 GiB RLIMIT_AS, 1 MiB blocks allocated to the limit
 * and freed left 16 hugepages in those caches, and each round of fills
 * lost an 8 MiB block to them. False when this thread has no heap yet. */
static __attribute__((noinline, cold)) bool reclaim_for_retry(void) {
    if (_hpm_tls_heap == &_hpm_no_heap) return false;
    _hpm_heap_release_empty(false);
    _hpm_heaps_drain_idle(0);
    _hpm_transfer_release(false);
    return true;
}

/* A class's empty hand, out of line: the check above inline in
 * alloc_class made malloc's fast path save and restore a register. The
 * check comes after the refill, which may have grown the heap (a new
 * slab): a program that stops calling the allocator right after that
 * growth still gets the thread that releases what it frees later. */
static __attribute__((noinline)) void *alloc_class_slow(hpm_heap_t *h, unsigned cls) {
    if (unlikely(h == &_hpm_no_heap) && _hpm_tls_exited) {   /* after the thread's exit: a heap for this call */
        hpm_heap_t *own = _hpm_heap_acquire();
        void *p = own ? _hpm_heap_alloc_slow(own, cls) : NULL;
        if (!own) errno = ENOMEM;
        after_exit_done();
        return p;
    }
    void *p = _hpm_heap_alloc_slow(h, cls);
    if (unlikely(!p) && reclaim_for_retry()) p = _hpm_heap_alloc_slow(_hpm_tls_heap, cls);
    background_check();
    return p;
}

/* The hand's slot is read and written through a pointer held in a
 * register (the empty asm keeps the compiler from folding it back into an
 * indexed address): x86 cores forward a store to the next load of the
 * same base register and offset at no latency (memory renaming), but not
 * for an indexed address, and consecutive mallocs of a class chain
 * through that slot. Indexed, a pure malloc loop took 2.5 ns a call, 1.7
 * through the register (docs/allocator.md, "The hand's slot through a register"). */
static inline void *alloc_class(hpm_heap_t *h, unsigned cls) {
    void ***slot = &h->hand[cls];
    __asm__("" : "+r"(slot));
    void **b = *slot;
    if (likely(b != NULL)) {
        void **next = b[0];
        *slot = next;
        __builtin_prefetch(next, 1);   /* the next malloc of this class reads and writes it */
        hpm_block_set_mark(b, 0);
        hpm_used_add(h, _hpm_class_block_bytes[cls]);
        return b;
    }
    return alloc_class_slow(h, cls);   /* sets errno when it fails; a tail call keeps the fast path free of saved registers */
}

/* A medium or large request, out of line (it needs the thread's real heap). */
static __attribute__((noinline)) void *alloc_span_any(size_t size, bool zero);

/* Medium or large: a span of its own, start aligned to align_bytes. */
static inline __attribute__((always_inline)) void *alloc_span_once(hpm_heap_t *h, size_t size, size_t align_bytes,
                                                                     bool zero) {
    size_t pages = (size + HPM_PAGE_BYTES - 1) >> HPM_PAGE_SHIFT;
    hpm_span_t *s = align_bytes <= HPM_PAGE_BYTES ? _hpm_spancache_get(h, pages) : NULL;
    hpm_collapse_poll();   /* a refill from the pageheap may have queued it */
    if (s) {
        background_check();
        hpm_used_add(h, (int64_t)s->n_pages << HPM_PAGE_SHIFT);
        if (zero && !s->clean) memset((void *)s->start, 0, size);   /* the request, not the class's rounded pages */
        return (void *)s->start;
    }
    pthread_mutex_lock(&_hpm_ph.lock);
    if (pages >= HPM_LARGE_MIN_PAGES || align_bytes > HPM_HP_BYTES / 2)
        s = _hpm_ph_alloc_large_zero(&_hpm_ph, pages,
                                     align_bytes <= HPM_PAGE_BYTES ? HPM_PAGE_BYTES   /* none asked: see find_end_run */
                                     : align_bytes > HPM_HP_BYTES ? align_bytes : HPM_HP_BYTES, zero);
    else if (align_bytes > HPM_PAGE_BYTES)
        s = _hpm_ph_alloc_aligned(&_hpm_ph, pages, align_bytes);
    else
        s = _hpm_ph_alloc_span_for(&_hpm_ph, pages, SPAN_MEDIUM, 0, h);
    hpm_ph_unlock(&_hpm_ph);
    hpm_collapse_poll();
    background_check();   /* after the growth: a large block freed next is released */
    if (!s) { errno = ENOMEM; return NULL; }
    hpm_used_add(h, (int64_t)s->n_pages << HPM_PAGE_SHIFT);
    if (zero && !s->clean) memset((void *)s->start, 0, size);
    return (void *)s->start;
}

/* The second try, out of line: called as a function, the first took
 * glibc-bench large 2% longer (11 pairs). */
static __attribute__((noinline, cold)) void *alloc_span_retry(hpm_heap_t *h, size_t size, size_t align_bytes, bool zero) {
    return reclaim_for_retry() ? alloc_span_once(h, size, align_bytes, zero) : NULL;
}

/* The largest request served: a span's page count is 32 bits
 * (hpm_span_t n_pages), so 2^32 pages less a hugepage (a large span
 * rounds up to whole hugepages), just under 16 TiB. Above it, ENOMEM:
 * the count would wrap and the rest of the span leak. */
#define MAX_REQUEST_BYTES (((size_t)1 << (32 + HPM_PAGE_SHIFT)) - HPM_HP_BYTES)

static void *alloc_span(hpm_heap_t *h, size_t size, size_t align_bytes, bool zero) {
    if (size > MAX_REQUEST_BYTES) { errno = ENOMEM; return NULL; }
    void *p = alloc_span_once(h, size, align_bytes, zero);
    if (unlikely(!p)) p = alloc_span_retry(h, size, align_bytes, zero);
    return p;
}

static inline __attribute__((always_inline)) void *alloc_any(size_t size, bool zero) {
    hpm_heap_t *h = _hpm_tls_heap;   /* &_hpm_no_heap before the first malloc: its slow path makes the heap */
    unsigned cls;
    if (likely(size <= 1024)) cls = hpm_size_class_tiny(size);   /* one size test for the common case */
    else if (size <= HPM_SMALL_MAX_BYTES) cls = hpm_size_class(size);
    else return alloc_span_any(size, zero);
    void *p = alloc_class(h, cls);
    if (zero && p) memset(p, 0, size);
    return p;
}

static void *alloc_span_any(size_t size, bool zero) {
    bool exited = _hpm_tls_exited && !hpm_my_heap();   /* a heap for this call (after_exit_done) */
    hpm_heap_t *h = exited ? _hpm_heap_acquire() : heap_get();
    void *p = h ? alloc_span(h, size, HPM_PAGE_BYTES, zero) : NULL;
    if (!h) errno = ENOMEM;   /* metadata ran out */
    if (unlikely(exited)) after_exit_done();
    return p;
}

/* size 0 is served as 1: a unique block, as malloc(0). A span of 0
 * pages would own no page, and its start would be another span's (or
 * the page after it), which a free of it would then free. */
static void *alloc_aligned(size_t alignment, size_t size) {
    if (unlikely(_hpm_tls_exited) && !hpm_my_heap()) {   /* after the thread's exit: a heap for this call */
        void *p = NULL;
        if (_hpm_heap_acquire()) p = alloc_aligned(alignment, size);
        else errno = ENOMEM;
        after_exit_done();
        return p;
    }
    hpm_heap_t *h = heap_get();
    if (unlikely(!h)) { errno = ENOMEM; return NULL; }
    if (size == 0) size = 1;
    if (alignment <= sizeof(void *)) return alloc_any(size, false);   /* every block is 8-aligned; 16 needs the class loop below (24, 40, 56) */
    if (alignment <= HPM_PAGE_BYTES && size <= HPM_SMALL_MAX_BYTES) {
        unsigned cls = hpm_size_class(size > alignment ? size : alignment);
        while (cls < HPM_CLASSES && _hpm_classes[cls].block_bytes % alignment) cls++;
        if (cls < HPM_CLASSES) return alloc_class(h, cls);
    }
    return alloc_span(h, size, alignment, false);
}

/* ---- free ---- */

static void span_to_pageheap(hpm_span_t *s) {
    pthread_mutex_lock(&_hpm_ph.lock);
    _hpm_ph_free_span(&_hpm_ph, s);
    hpm_ph_unlock(&_hpm_ph);
}

static void free_span(hpm_heap_t *h, hpm_span_t *s, void *p, const char *fn) {
    if ((uintptr_t)p != s->start) _hpm_fatal(fn, p, "interior pointer (not the start of an allocation)");
    if (hpm_span_cached(s)) _hpm_fatal(fn, p, "double free (allocation is already free)");
    hpm_used_add_any(h, -((int64_t)s->n_pages << HPM_PAGE_SHIFT));
    if (h && _hpm_spancache_put(h, s)) return;   /* kept for this thread */
    span_to_pageheap(s);
}

/* The checks of a block start that failed: say which. */
static __attribute__((noinline, cold, noreturn)) void free_bad_block(hpm_span_t *s, void *p, const char *fn) {
    uintptr_t off = (uintptr_t)p - s->start;
    uint32_t idx = (uint32_t)((off * s->recip) >> 32);
    if ((uintptr_t)idx * s->block_bytes != off) _hpm_fatal(fn, p, "interior pointer (not the start of a block)");
    if (idx >= hpm_slab_fresh(s)) bad_pointer(fn, p);   /* a block never handed out */
    _hpm_fatal(fn, p, "double free (block is already free)");
}

/* b is a formatted block's start and not already free. b lies in the
 * slab's granule or pages, so b >= start and the offset is under 2^32,
 * where off * div_magic is k * div_step for block k's start and at least
 * div_magic otherwise (hpm_class_t): one compare with fresh_lim tests
 * "a block start" and "formatted" together. */
static inline bool block_ok_at(const hpm_span_t *s, void **b, uintptr_t off, uint64_t fresh_lim) {
    return off * s->div_magic < fresh_lim && (uint64_t)b[1] != hpm_cookie(b);   /* b is the caller's: a plain read */
}
static inline bool block_ok(const hpm_span_t *s, void **b) {
    return block_ok_at(s, b, (uintptr_t)b - s->start, __atomic_load_n(&s->fresh_lim, __ATOMIC_RELAXED));
}

/* The block test spelled out, for a block that failed the fast one: a
 * block start, formatted, not on a page the slab gave back, not marked
 * free. A slab with pages given back (slab.c, _hpm_slab_shed) fails the
 * fast test for every block: its fresh_lim is 0 while it has any, since
 * a held block's page reads as zero, free mark included, and the fast
 * test took a second free of it for a live block (session 50's review:
 * the block was then handed out twice). A block's mark lies on its first
 * page, so that page alone decides. */
static __attribute__((noinline)) bool block_live_exact(const hpm_span_t *s, void **b) {
    uintptr_t off = (uintptr_t)b - s->start;
    uint32_t idx = (uint32_t)((off * s->recip) >> 32);
    if ((uintptr_t)idx * s->block_bytes > off) idx--;
    if ((uintptr_t)idx * s->block_bytes != off || idx >= hpm_slab_fresh(s)) return false;
    if ((__atomic_load_n(&s->held_pages_mask, __ATOMIC_RELAXED) >> (off >> HPM_PAGE_SHIFT)) & 1) return false;
    return hpm_block_mark(b) != hpm_cookie(b);
}

/* The rare frees that are not a local free into a slab: spans, a thread
 * without a heap, abandoned slabs, a slab that came to this thread since
 * free_checked looked, bad pointers. */
static __attribute__((noinline)) void free_rare(hpm_heap_t *h, hpm_span_t *s, void *p, const char *fn) {
    if (unlikely(s == NULL)) bad_pointer(fn, p);
    if (h == &_hpm_no_heap) h = _hpm_tls_exited ? NULL : _hpm_heap_acquire();   /* NULL: metadata ran out, or after the thread's exit */
    if (s->kind != SPAN_SLAB) { free_span(h, s, p, fn); return; }
    void **b = p;
    if (unlikely(!block_ok(s, b)) && !block_live_exact(s, b)) free_bad_block(s, p, fn);
    hpm_block_set_free(b);
    if (h) {
        hpm_used_sub(h, s->block_bytes);
        hpm_remote_poll(h);
    } else {
        _hpm_heapless_used_add(-(int64_t)s->block_bytes);
    }
    _hpm_free_other_in(h, s, b);
}

/* A local free into a slab that is not current. */
static __attribute__((noinline)) void free_local_slow(hpm_heap_t *h, hpm_span_t *s) {
    _hpm_heap_free_slow(h, s);
    hpm_remote_poll(h);
}

static __attribute__((noinline)) void free_mapped(hpm_heap_t *h, void *p, const char *fn);

/* free_checked's guess failed the block test: a bad pointer if it lies in
 * the guessed slab, else a block of another span in a granule that a
 * small slab starts (internal.h, "Slab records at fixed places"). The
 * guessed slab is ours, but a drain on another thread (the idle drain's
 * kept slabs, the asleep drain's) may be giving it back meanwhile, so
 * the slot is read as another thread's would be (hpm_slot_holds: its
 * owner and page count, atomically; TSan caught the plain read beside a
 * trim's idle drain in test_rangerace). */
static __attribute__((noinline, cold)) void free_guess_missed(hpm_heap_t *h, hpm_span_t *s, void *p, const char *fn) {
    hpm_heap_t *owner;
    if (hpm_slot_holds(s, p, &owner) && owner == h) free_rare(h, s, p, fn);   /* a bad pointer, or a slab with pages given back */
    else free_mapped(h, p, fn);
}

/* Whether guessed slot s, whose owner read h before its fields were
 * read, still does: a drain (the idle drain's kept slabs, the asleep
 * drain) may give the slab back meanwhile and another thread format a
 * new one in the slot, so the fields read may be half the new slab's
 * (review, session 49: a block of another span pushed onto that slab's
 * list). The slot's owner changes away from h before any of them
 * (slabs_release, then slot_record_clear) and no other thread makes a
 * slot h's again, so an owner still h, read after the fields, means they
 * were h's slab's. The empty asm makes the owner's address wait for the
 * last field read (dep; the block test's fields feed a branch before
 * it), so the compiler loads it after them, and x86 keeps loads in
 * order; unlike a fence, it makes the compiler load nothing else again
 * (a fence cost two more instructions: the cookie secret reloaded). */
static inline bool guess_still_mine(const hpm_span_t *s, const hpm_heap_t *h, uintptr_t dep) {
    __asm__("" : "+r"(s) : "r"(dep));
    return atomic_load_explicit(&s->owner, memory_order_relaxed) == h;
}

/* A free into slab s, which this thread owns: the block-start and
 * double-free checks, the push. off is p's offset in s; guessed: s is
 * free_checked's guess, which p may lie past. The owner is the only
 * writer of fresh_lim while the slab is its own: a plain read, which the
 * compiler folds into the compare (a guess is checked again after). */
static inline __attribute__((always_inline)) void free_local(hpm_heap_t *h, hpm_span_t *s, void *p, uintptr_t off,
                                                             bool guessed, const char *fn) {
    void **b = p;
    if (unlikely(!block_ok_at(s, b, off, s->fresh_lim))) {
        if (guessed) free_guess_missed(h, s, p, fn);
        else free_rare(h, s, p, fn);   /* a bad pointer, or a slab with pages given back */
        return;
    }
    void ***to = s->push_to;   /* the slab's list, or this thread's hand when the slab is current */
    if (guessed && unlikely(!guess_still_mine(s, h, (uintptr_t)to))) {
        free_guess_missed(h, s, p, fn);
        return;
    }
    hpm_block_set_free(b);
    b[0] = *to;
    *to = b;
    hpm_used_sub(h, s->block_bytes);
    if (unlikely(hpm_slab_count_free(s))) free_local_slow(h, s);
}

/* A free that is not a local free into its slab's granule slot: s and
 * its owner known. The common case, a block of another live thread's
 * slab, joins the outbox batch for that owner; only tail calls, so no
 * registers saved (xmalloc-test's releaser spends most of its allocator
 * time here). */
static inline __attribute__((always_inline)) void free_other_in(hpm_heap_t *h, hpm_span_t *s, hpm_heap_t *owner, void *p,
                                                                const char *fn) {
    if (unlikely(h == &_hpm_no_heap)) { free_rare(h, s, p, fn); return; }
    if (owner == h) { free_local(h, s, p, (uintptr_t)p - s->start, false, fn); return; }   /* a slab with a pooled record */
    void **b = p;
    if (unlikely(owner == NULL || !block_ok(s, b))) { free_rare(h, s, p, fn); return; }
    hpm_block_set_free(b);
    hpm_used_sub(h, s->block_bytes);
    if (unlikely(!hpm_remote_push_open(h, owner, s, b))) { _hpm_remote_push_poll(h, owner, b); return; }
    if (unlikely(atomic_load_explicit(&h->inbox, memory_order_relaxed) != NULL)) _hpm_remote_drain(h);
}

/* The same, for a pointer whose granule's slot is not its slab: the page
 * map says which span it is in, if any. */
static __attribute__((noinline)) void free_mapped(hpm_heap_t *h, void *p, const char *fn) {
    hpm_span_t *s = hpm_span_of(p);
    if (unlikely(s == NULL)) { free_rare(h, s, p, fn); return; }
    free_other_in(h, s, atomic_load_explicit(&s->owner, memory_order_acquire), p, fn);   /* set only for slabs, as free_checked relies on */
}

/* Everything but a local free into a slab's granule slot, with the slot s
 * that free_checked read (NULL: p is outside the window, or s is known
 * not to hold it). Kept apart from free_mapped so that the remote free
 * of a block in a slot's slab runs straight through (with the map's path
 * inline it jumped out and back: xmalloc-test 1.035x the time). */
static __attribute__((noinline)) void free_other(hpm_heap_t *h, hpm_span_t *s, void *p, const char *fn) {
    if (p == NULL) return;   /* free(NULL): outside the window, so free_checked sends it here */
    hpm_heap_t *owner;
    if (unlikely(!s || !hpm_slot_holds(s, p, &owner))) { free_mapped(h, p, fn); return; }
    free_other_in(h, s, owner, p, fn);
}

/* The common case is a block of a slab this thread owns: one owner
 * compare, the block-start and double-free checks, the push, all on line
 * 0 of the slab's record, which its granule's slot holds (hpm_slab_guess:
 * no page-map load first, and the block's offset is its address's low
 * bits). Anything else, free_other looks up in the map. */
static inline void free_checked(void *p, const char *fn) {
    uintptr_t off;
    hpm_heap_t *h = _hpm_tls_heap;
    if (unlikely(!hpm_map0_offset(p, &off))) { free_other(h, NULL, p, fn); return; }
    hpm_span_t *s = hpm_slab_guess_in(off);
    if (unlikely(atomic_load_explicit(&s->owner, memory_order_relaxed) != h)) {   /* &_hpm_no_heap owns nothing */
        free_other(h, s, p, fn);
        return;
    }
    free_local(h, s, p, (uintptr_t)p & (HPM_GRANULE_BYTES - 1), true, fn);   /* s starts at p's granule */
}

/* ---- the public functions ---- */

HPM_API void *hpm_malloc(size_t size) { return alloc_any(size, false); }

HPM_API void hpm_free(void *p) {
    free_checked(p, "free");
}

HPM_API void *hpm_calloc(size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) { errno = ENOMEM; return NULL; }
    return alloc_any(total, true);
}

/* Any address, from any thread: the span's record may be changing under
 * the query (the span freed and its record reused by another thread, the
 * background thread releasing it, its owner giving pages back), so every
 * field is read atomically and the block found must lie in the span; a
 * query that races with a free of the same allocation gets either answer. */
HPM_API bool hpm_range(const void *p, void **base, size_t *size) {
    if (!p || atomic_load_explicit(&_hpm_ready, memory_order_acquire) != 2) return false;
    hpm_span_t *s = hpm_span_of(p);
    if (!s) return false;
    uintptr_t start = __atomic_load_n(&s->start, __ATOMIC_RELAXED);
    size_t len = (size_t)__atomic_load_n(&s->n_pages, __ATOMIC_RELAXED) << HPM_PAGE_SHIFT;
    uint8_t kind = __atomic_load_n(&s->kind, __ATOMIC_RELAXED);
    if ((uintptr_t)p - start >= len) return false;   /* the head pages trimmed off an aligned span, or a record reused */
    if (kind == SPAN_SLAB) {
        uintptr_t off = (uintptr_t)p - start;
        uint32_t block_bytes = __atomic_load_n(&s->block_bytes, __ATOMIC_RELAXED);
        uint32_t idx = (uint32_t)((off * __atomic_load_n(&s->recip, __ATOMIC_RELAXED)) >> 32);
        if ((uintptr_t)idx * block_bytes > off) idx--;
        if (idx >= hpm_slab_fresh(s)) return false;   /* past the end, or never handed out */
        uintptr_t b_off = (uintptr_t)idx * block_bytes;
        if (block_bytes == 0 || b_off + block_bytes > len) return false;   /* a record being formatted */
        void **b = (void **)(start + b_off);
        if ((__atomic_load_n(&s->held_pages_mask, __ATOMIC_RELAXED) >> (b_off >> HPM_PAGE_SHIFT)) & 1) return false;
        if (hpm_block_mark(b) == hpm_cookie(b)) return false;
        start = (uintptr_t)b;
        len = block_bytes;
    } else if (kind == SPAN_NONE || hpm_span_cached(s)) {
        return false;   /* a record no span uses, or a span cached for reuse */
    }
    if (base) *base = (void *)start;
    if (size) *size = len;
    return true;
}

/* The size of p when it is a live block of a slab this thread owns, found
 * as free finds it (its granule's slot, one owner compare, the
 * block-start and free-mark tests); 0 for anything else, which takes the
 * full lookup. realloc and malloc_usable_size meet mostly such blocks
 * (Redis calls both on every push into a list: with hpm_range for each,
 * 13% of its server's time against 6% for mimalloc's). */
static inline size_t own_block_bytes(const void *p) {
    uintptr_t off;
    if (!hpm_map0_offset(p, &off)) return 0;
    hpm_span_t *s = hpm_slab_guess_in(off);
    if (atomic_load_explicit(&s->owner, memory_order_relaxed) == _hpm_tls_heap &&   /* &_hpm_no_heap owns nothing */
        block_ok_at(s, (void **)p, (uintptr_t)p & (HPM_GRANULE_BYTES - 1), s->fresh_lim)) {
        size_t bytes = s->block_bytes;
        if (likely(guess_still_mine(s, _hpm_tls_heap, bytes))) return bytes;
    }
    /* p in a slab that does not start at p's granule (a 64 KiB slab's
     * second granule, a small first slab, or one placed off a granule
     * boundary), found in the page map as free_mapped does */
    s = hpm_span_of(p);
    if (!s || atomic_load_explicit(&s->owner, memory_order_relaxed) != _hpm_tls_heap || !block_ok(s, (void **)p))
        return 0;
    return s->block_bytes;
}

/* The size of p when it starts a live medium or large span, whoever
 * allocated it (the caller holds p, so the span cannot change under it);
 * 0 for anything else. The fields are read atomically all the same, as
 * hpm_range reads them, for a caller that passes a freed pointer. */
static inline size_t live_span_bytes(const void *p) {
    hpm_span_t *s = hpm_span_of(p);
    if (!s || __atomic_load_n(&s->kind, __ATOMIC_RELAXED) < SPAN_MEDIUM ||
        __atomic_load_n(&s->start, __ATOMIC_RELAXED) != (uintptr_t)p || hpm_span_cached(s))
        return 0;
    return (size_t)__atomic_load_n(&s->n_pages, __ATOMIC_RELAXED) << HPM_PAGE_SHIFT;
}

/* Another thread's block, or a bad pointer, for fn (malloc_usable_size
 * or realloc): the lookup that answers any address. Like free, an
 * invalid pointer stops the process (every peer crashes or aborts on one;
 * returning 0 would hide the bug). */
static __attribute__((noinline)) size_t size_slow(const void *p, const char *fn) {
    size_t size = 0;
    void *base;
    if (likely(hpm_range(p, &base, &size) && base == p)) return size;
    if (!hpm_span_of(p)) bad_pointer(fn, p);
    if (hpm_range(p, &base, &size)) _hpm_fatal(fn, p, "interior pointer (not the start of an allocation)");
    _hpm_fatal(fn, p, "pointer is not a live allocation (double free or dangling pointer)");
}

HPM_API size_t hpm_usable_size(const void *p) {
    size_t size = own_block_bytes(p);
    if (likely(size)) return size;
    size = live_span_bytes(p);
    if (likely(size)) return size;
    return p ? size_slow(p, "malloc_usable_size") : 0;
}

/* A large block grows where it is when the pages after it are free
 * (_hpm_ph_grow_large): no copy, and no fresh hugepages for a buffer that
 * grows step by step. It shrinks where it is while it stays large: its
 * last pages go back. Other blocks move (malloc, copy, free). */
static bool realloc_in_place(hpm_span_t *s, size_t size) {
    if (s->kind != SPAN_LARGE || size > MAX_REQUEST_BYTES) return false;
    size_t pages = (size + HPM_PAGE_BYTES - 1) >> HPM_PAGE_SHIFT, old_pages = s->n_pages;
    if (pages < old_pages && pages < HPM_LARGE_MIN_PAGES) return false;
    pthread_mutex_lock(&_hpm_ph.lock);
    bool done = pages < old_pages ? (_hpm_ph_shrink_span(&_hpm_ph, s, pages), true)
                                  : _hpm_ph_grow_large(&_hpm_ph, s, pages);
    hpm_ph_unlock(&_hpm_ph);
    hpm_collapse_poll();
    hpm_heap_t *h = done ? heap_get() : NULL;
    if (done) hpm_used_add_any(h, ((int64_t)pages - (int64_t)old_pages) * (int64_t)HPM_PAGE_BYTES);
    return done;
}

/* A medium block that grows grows in place when the pages after it in
 * its hugepage are free; otherwise it moves, to a span of the pageheap's
 * (or a large one), and its old span goes back to the pageheap: neither
 * passes through the span caches. A buffer that grows by realloc (a string
 * builder, Perl's stack, CPython's writers) visits each medium class once
 * per chain, so a span it left in a class's cache waited for a chain that
 * might never come, while in the pageheap its pages serve the next,
 * larger step or any other span. Perl's hash run held 9 such spans,
 * 6.2 MiB, at its end. The new span has its class's pages, so the next
 * steps of the chain stay in it (4 classes per doubling). NULL (errno
 * set, p untouched) only when no memory is left. */
static void *realloc_medium_grow(void *p, hpm_span_t *old, size_t size) {
    hpm_heap_t *h = heap_get();
    size_t old_pages = old->n_pages;
    void *q = NULL;
    if (h && size <= ((size_t)(HPM_LARGE_MIN_PAGES - 1) << HPM_PAGE_SHIFT)) {   /* size > 8 KiB: 3 pages or more */
        size_t pages = hpm_medium_pages(hpm_medium_class((size + HPM_PAGE_BYTES - 1) >> HPM_PAGE_SHIFT));
        pthread_mutex_lock(&_hpm_ph.lock);
        bool grown = _hpm_ph_grow_medium(&_hpm_ph, old, pages);
        hpm_span_t *s = grown ? old : _hpm_ph_alloc_span_for(&_hpm_ph, pages, SPAN_MEDIUM, 0, h);
        hpm_ph_unlock(&_hpm_ph);
        hpm_collapse_poll();
        background_check();
        if (s) {
            hpm_used_add(h, (int64_t)(grown ? pages - old_pages : pages) << HPM_PAGE_SHIFT);
            if (grown) return p;
            q = (void *)s->start;
        }
    }
    if (!q) q = hpm_malloc(size);   /* a large block, or none left as a medium span: the ordinary path and its retry */
    if (!q) return NULL;
    memcpy(q, p, old_pages << HPM_PAGE_SHIFT);
    hpm_used_add_any(h, -((int64_t)old_pages << HPM_PAGE_SHIFT));
    span_to_pageheap(old);
    return q;
}

/* A medium block that shrinks to less than half, and stays medium, keeps
 * its start and gives its last pages back to the pageheap, down to its
 * new class's page count: no copy, and no span left in a cache. */
static bool realloc_medium_shrink(hpm_span_t *s, size_t size) {
    size_t pages = hpm_medium_pages(hpm_medium_class((size + HPM_PAGE_BYTES - 1) >> HPM_PAGE_SHIFT)), old_pages = s->n_pages;
    hpm_heap_t *h = heap_get();
    if (!h || pages >= old_pages) return false;
    pthread_mutex_lock(&_hpm_ph.lock);
    _hpm_ph_shrink_span(&_hpm_ph, s, pages);
    hpm_ph_unlock(&_hpm_ph);
    hpm_used_sub(h, (uint64_t)(old_pages - pages) << HPM_PAGE_SHIFT);
    return true;
}

HPM_API void *hpm_realloc(void *p, size_t size) {
    if (!p) return hpm_malloc(size);
    if (size == 0) { hpm_free(p); return NULL; }
    size_t usable = own_block_bytes(p);   /* the common case: a block of this thread's slabs */
    if (!usable) usable = live_span_bytes(p);
    if (!usable) usable = size_slow(p, "realloc");
    if (size <= usable && size >= usable / 2) return p;
    if (usable > HPM_SMALL_MAX_BYTES) {   /* a span, which live_span_bytes or size_slow found live */
        hpm_span_t *s = hpm_span_of(p);
        if (realloc_in_place(s, size)) return p;   /* large */
        if (s->kind == SPAN_MEDIUM && size > usable) return realloc_medium_grow(p, s, size);
        if (s->kind == SPAN_MEDIUM && size > HPM_SMALL_MAX_BYTES && realloc_medium_shrink(s, size)) return p;   /* under half */
    }
    void *q = hpm_malloc(size);
    if (!q) return NULL;     /* p stays valid */
    memcpy(q, p, size < usable ? size : usable);
    hpm_free(p);
    return q;
}

HPM_API void *hpm_reallocarray(void *p, size_t count, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(count, size, &total)) { errno = ENOMEM; return NULL; }
    return hpm_realloc(p, total);
}

static inline bool is_pow2(size_t x) { return x && !(x & (x - 1)); }

/* The largest alignment served: whole hugepages at an aligned hugepage
 * index. A larger one is valid but cannot be had: ENOMEM, as glibc
 * answers when it cannot map size + alignment (EINVAL is for an alignment
 * that is not a power of two). */
#define MAX_ALIGN_BYTES ((size_t)1 << 40)

HPM_API void *hpm_aligned_alloc(size_t alignment, size_t size) {
    if (!is_pow2(alignment)) { errno = EINVAL; return NULL; }
    if (alignment > MAX_ALIGN_BYTES) { errno = ENOMEM; return NULL; }
    return alloc_aligned(alignment, size);
}

HPM_API void *hpm_memalign(size_t alignment, size_t size) {
    if (alignment > MAX_ALIGN_BYTES) { errno = ENOMEM; return NULL; }
    size_t a = HPM_MIN_ALIGN;
    while (a < alignment) a <<= 1;
    return alloc_aligned(a, size);
}

HPM_API int hpm_posix_memalign(void **out, size_t alignment, size_t size) {
    if (!is_pow2(alignment) || alignment % sizeof(void *)) return EINVAL;
    if (alignment > MAX_ALIGN_BYTES) return ENOMEM;
    int saved = errno;
    void *p = alloc_aligned(alignment, size);
    if (!p) { errno = saved; return ENOMEM; }
    *out = p;
    return 0;
}

HPM_API void hpm_free_sized(void *p, size_t size) { (void)size; hpm_free(p); }
HPM_API void hpm_free_aligned_sized(void *p, size_t alignment, size_t size) { (void)alignment; (void)size; hpm_free(p); }

/* ---- libc names (the shared library interposes them; so does -lhpmalloc) ----
 * -DHPM_NO_OVERRIDE leaves them out, so that a sanitizer's allocator can run
 * beside the hpm_* API (make asan/ubsan/tsan, docs/tests.md). */
#ifndef HPM_NO_OVERRIDE
#define HPM_ALIAS(name) __attribute__((alias(#name), visibility("default"), used))
void *malloc(size_t) HPM_ALIAS(hpm_malloc);
void free(void *) HPM_ALIAS(hpm_free);
void *calloc(size_t, size_t) HPM_ALIAS(hpm_calloc);
void *realloc(void *, size_t) HPM_ALIAS(hpm_realloc);
void *reallocarray(void *, size_t, size_t) HPM_ALIAS(hpm_reallocarray);
void *aligned_alloc(size_t, size_t) HPM_ALIAS(hpm_aligned_alloc);
void *memalign(size_t, size_t) HPM_ALIAS(hpm_memalign);
int posix_memalign(void **, size_t, size_t) HPM_ALIAS(hpm_posix_memalign);
size_t malloc_usable_size(void *) HPM_ALIAS(hpm_usable_size);
void free_sized(void *, size_t) HPM_ALIAS(hpm_free_sized);
void free_aligned_sized(void *, size_t, size_t) HPM_ALIAS(hpm_free_aligned_sized);
void cfree(void *) HPM_ALIAS(hpm_free);

HPM_API void *valloc(size_t size) { return alloc_aligned(HPM_PAGE_BYTES, size); }

HPM_API void *pvalloc(size_t size) {
    if (size > SIZE_MAX - HPM_PAGE_BYTES) { errno = ENOMEM; return NULL; }
    return alloc_aligned(HPM_PAGE_BYTES, (size + HPM_PAGE_BYTES - 1) & ~(HPM_PAGE_BYTES - 1));
}

/* malloc_trim releases cached empty hugepages, and free pages inside
 * partial ones only when HPM_SUBRELEASE=1 (hpm_trim always does both).
 * Both first take back what every thread's caches hold (span caches and
 * kept slabs: the idle drain over every heap, as glibc's trim covers
 * every arena), then the central caches'. */
HPM_API int malloc_trim(size_t pad) {
    (void)pad;
    hpm_ensure_init();
    bool sub = _hpm_ph.subrelease;
    _hpm_heaps_reclaim_abandoned(sub);
    _hpm_heap_release_empty(sub);
    _hpm_heaps_drain_idle(0);
    _hpm_transfer_release(false);
    pthread_mutex_lock(&_hpm_ph.lock);
    size_t bytes = _hpm_ph_trim(&_hpm_ph, sub);
    hpm_ph_unlock(&_hpm_ph);
    return bytes > 0;
}
#endif /* HPM_NO_OVERRIDE */

HPM_API size_t hpm_trim(void) {
    hpm_ensure_init();
    _hpm_heaps_reclaim_abandoned(true);
    _hpm_heap_release_empty(true);
    _hpm_heaps_drain_idle(0);
    _hpm_transfer_release(false);
    pthread_mutex_lock(&_hpm_ph.lock);
    size_t bytes = _hpm_ph_trim(&_hpm_ph, true);
    hpm_ph_unlock(&_hpm_ph);
    return bytes;
}
