/* hugepage.c: the pageheap, which keeps the heap as a set of 2 MiB
 * hugepages and decides where every span goes.
 *
 * Placement (docs/allocator.md, "Placement"): a span goes to the most used partial
 * hugepage of its own set that fits (filler.c), then to a hybrid, then to
 * an empty hugepage (newest cached first, then released, then new address
 * space), and only then pollutes the other set. Large spans take whole
 * hugepages; the tail of the last one joins the filler. Empty hugepages go
 * to a cache and are released whole by release.c.
 *
 * New hugepages come from the end of the last arena (arena.c), or from a
 * new arena when it is full; a large request commits its new hugepages
 * with one call, so the kernel judges the whole request. A zeroing large
 * request clears or gives back only the pages that may hold data.
 *
 * Invariants: an ACTIVE hugepage has used_pages in 1..512 and is in exactly
 * one filler set; a CACHED one is on the cache list, a RELEASED one on the
 * released list; the page map (hpm_hp_map, _hpm_l1) gives the span owning
 * each page or NULL; hugepage i lies in the arena that holds index i, at
 * hp->addr. Every function here runs with ph->lock held, except init.
 * The first hugepages start on 4 KiB pages (THP mode, hp_committed);
 * collapse.c makes them huge, without the lock. */
#include <errno.h>
#include <string.h>
#include "internal.h"

hpm_pageheap_t _hpm_ph;

static inline hpm_hp_t *hp_at(hpm_pageheap_t *ph, size_t idx) { return &ph->hps[idx]; }

/* The page modes whose hugepages are plain anonymous memory, committed by
 * range (THP or 4 KiB pages), not hugetlb pages mapped one by one. */
static inline bool ph_pages_anon(const hpm_pageheap_t *ph) {
    return ph->page_mode == PAGES_THP || ph->page_mode == PAGES_OFF;
}

/* Hugepage indices the heap may ever use: 16 times memory plus swap, 1 to
 * 64 TiB, and no more than RLIMIT_AS allows at start (a heap can grow past
 * its first arena up to this; the descriptors are reserved, not used). */
static size_t index_cap_hp(const hpm_os_t *os, size_t first_bytes) {
    size_t machine = os->machine_bytes ? os->machine_bytes() : 0;
    size_t cap = machine > ((size_t)4 << 40) ? ((size_t)64 << 40) : machine * 16;
    if (cap < ((size_t)1 << 40)) cap = (size_t)1 << 40;
    if (cap < first_bytes) cap = first_bytes;
    size_t limit = os->as_limit_bytes ? os->as_limit_bytes() : SIZE_MAX;
    if (limit != SIZE_MAX && cap > limit) cap = limit < HPM_GB_BYTES ? HPM_GB_BYTES : limit;
    return cap >> HPM_HP_SHIFT;
}

/* The descriptor region and the first arena, if not there yet (init, or
 * a later request when they could not be reserved at init). */
static int ph_reserve(hpm_pageheap_t *ph) {
    if (!ph->hps) {
        size_t hp_bytes = ph->index_cap_hp * sizeof(hpm_hp_t), got = 0;
        /* the descriptors of the whole cap, or as many as the room allows */
        void *hps = _hpm_reserve_sized(ph->os, (hp_bytes + HPM_HP_BYTES - 1) & ~(HPM_HP_BYTES - 1), HPM_HP_BYTES,
                                       HPM_HP_BYTES, &got);
        if (!hps) return ENOMEM;
        ph->hp_region = (hpm_meta_region_t){.base = (uintptr_t)hps, .limit = got};
        ph->index_cap_hp = got / sizeof(hpm_hp_t);
        if (ph->first_arena_hp > ph->index_cap_hp) ph->first_arena_hp = ph->index_cap_hp;
        __atomic_store_n(&ph->hps, (hpm_hp_t *)hps, __ATOMIC_RELEASE);
    }
    if (ph->n_arenas == 0 && _hpm_arena_add(ph, 1, ph->page_mode == PAGES_1G ? HPM_PAGES_PER_HP : 1)) return ENOMEM;
    return 0;
}

/* The pageheap lock spins a little before it sleeps (glibc's adaptive
 * mutex): it is held for a few list steps, and two threads that refill
 * and drain medium spans at once met in futex waits, a sleep and a wake-up
 * each (a medium churn of two threads spent 7.6% of its time in futex
 * calls with the plain mutex). */
void _hpm_ph_lock_init(hpm_pageheap_t *ph) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ADAPTIVE_NP);
    pthread_mutex_init(&ph->lock, &attr);
    pthread_mutexattr_destroy(&attr);
}

int _hpm_ph_init(hpm_pageheap_t *ph, const hpm_os_t *os, size_t reserve_bytes, int page_mode) {
    memset(ph, 0, sizeof *ph);
    _hpm_ph_lock_init(ph);
    ph->os = os;
    ph->page_mode = page_mode;
    ph->thp_always = hpm_os_thp_always(os);
    ph->thp_never = os->thp_mode && os->thp_mode() == HPM_THP_NEVER;
    ph->release_delay_ms = 1000;
    ph->cache_keep_hp = 2;
    size_t align = page_mode == PAGES_1G ? HPM_GB_BYTES : HPM_HP_BYTES;
    reserve_bytes &= ~(align - 1);
    if (reserve_bytes < align) reserve_bytes = align;
    ph->first_arena_hp = reserve_bytes >> HPM_HP_SHIFT;
    ph->index_cap_hp = index_cap_hp(os, reserve_bytes);
    return ph_reserve(ph);   /* on failure the pageheap works, empty, and tries again when asked */
}

static uintptr_t index_addr(hpm_pageheap_t *ph, size_t idx) {
    hpm_arena_t *a = _hpm_arena_of_index(ph, idx);
    return a ? a->base + ((uintptr_t)(idx - a->first_hp) << HPM_HP_SHIFT) : 0;
}


/* ---- backing ---- */

/* A hugepage that was just committed (4 KiB or transparent huge pages). */
static void hp_committed(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    void *addr = (void *)hpm_hp_addr(ph, hp);
    hp->backing = BACK_THP;
    /* A heap starts small: its first HPM_SMALL_START_HP hugepages stay on
     * 4 KiB pages until one more is needed, so a program that allocates a
     * few MiB pays neither 2 MiB faults nor 2 MiB of RSS per hugepage it
     * touches a little (python3 -c pass: issue 11 item 6). Then they are
     * advised and queued for the collapse, and every hugepage after them
     * is huge from the start. */
    if (hpm_ph_small_start(ph)) {
        /* With THP "always" the kernel would back them huge unasked:
         * MADV_NOHUGEPAGE, until the advice below replaces it. */
        if (hp->index < HPM_SMALL_START_HP) {
            if (ph->thp_always) ph->os->thp_advise(addr, HPM_HP_BYTES, false);
            return;
        }
        ph->huge_started = true;
        for (size_t i = 0; i < HPM_SMALL_START_HP && i < ph->top_hp; i++) {
            hpm_hp_t *first = hp_at(ph, i);
            if (first->backing != BACK_THP) continue;
            ph->os->thp_advise((void *)hpm_hp_addr(ph, first), HPM_HP_BYTES, true);
            if (first->state != HP_ACTIVE || ph->thp_never) continue;
            ph->collapse_want |= (uint16_t)(1u << i);
            ph->collapse_ripe &= (uint16_t)~(1u << i);   /* collapsed as they are now */
        }
        _hpm_ph_collapse_queued(ph);
    }
    ph->os->thp_advise(addr, HPM_HP_BYTES, ph->page_mode != PAGES_OFF);
}

/* Give a hugepage memory (or at least access) according to the page mode. */
static int hp_back(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->backing != BACK_NONE) return 0;
    void *addr = (void *)hpm_hp_addr(ph, hp);
    if (ph->page_mode == PAGES_HUGETLB && ph->os->map_hugetlb(addr, HPM_HP_BYTES, HPM_HP_BYTES) == 0) {
        hp->backing = BACK_HUGETLB;
        ph->hugetlb_hp++;
        return 0;
    }
    if (ph->page_mode == PAGES_HUGETLB) ph->fallback_total++;
    int e = ph->os->commit(addr, HPM_HP_BYTES);
    if (e) return e;
    hp_committed(ph, hp);
    return 0;
}

/* Commit the unbacked hugepages of [first, first + n) with one call per
 * run of them, so that the kernel sees the whole request (a request it
 * would refuse to mmap is refused here too). THP and off modes only;
 * hugetlb modes back hugepage by hugepage. */
static int run_commit(hpm_pageheap_t *ph, size_t first, size_t n) {
    if (!ph_pages_anon(ph)) return 0;
    for (size_t i = 0; i < n; ) {
        if (hp_at(ph, first + i)->backing != BACK_NONE) { i++; continue; }
        size_t j = i;
        while (j < n && hp_at(ph, first + j)->backing == BACK_NONE) j++;
        int e = ph->os->commit((void *)hpm_hp_addr(ph, hp_at(ph, first + i)), (j - i) << HPM_HP_SHIFT);
        if (e) return e;
        for (; i < j; i++) hp_committed(ph, hp_at(ph, first + i));
    }
    return 0;
}

/* In 1g mode, back a whole 1 GiB chunk of 512 hugepages at once. */
static int chunk_back_1g(hpm_pageheap_t *ph, size_t first_idx) {
    void *addr = (void *)index_addr(ph, first_idx);
    int back = BACK_1G;
    if (ph->os->map_hugetlb(addr, HPM_GB_BYTES, HPM_GB_BYTES) != 0) {
        ph->fallback_total++;
        int e = ph->os->commit(addr, HPM_GB_BYTES);
        if (e) return e;
        ph->os->thp_advise(addr, HPM_GB_BYTES, true);
        back = BACK_THP;
    }
    for (size_t i = 0; i < HPM_PAGES_PER_HP; i++) hp_at(ph, first_idx + i)->backing = (uint8_t)back;
    if (back == BACK_1G) ph->hugetlb_hp += HPM_PAGES_PER_HP;   /* counted in 2 MiB units */
    return 0;
}

/* Under RLIMIT_AS, growing by grow_hp must keep the process inside the
 * limit, counting the heap's unused reservation as free: a limit set
 * after start is honoured here. When the process is over the limit, the
 * unused tail of the last arena is given back, so that the program (and
 * the next arena) can map memory again. */
static int limit_check(hpm_pageheap_t *ph, size_t grow_hp) {
    size_t limit = ph->os->as_limit_bytes ? ph->os->as_limit_bytes() : SIZE_MAX;
    if (limit == SIZE_MAX) return 0;
    hpm_arena_t *last = &ph->arenas[ph->n_arenas - 1];
    size_t tail_hp = ph->reserved_hp - ph->top_hp;
    size_t used = ph->os->as_used_bytes ? ph->os->as_used_bytes() : 0, tail = tail_hp << HPM_HP_SHIFT;
    size_t effective = used > tail ? used - tail : 0;
    if (effective + (grow_hp << HPM_HP_SHIFT) <= limit) return 0;
    if (used > limit && tail_hp > 0 && tail_hp < last->n_hp) {
        /* In 1g mode the arena keeps whole GiBs: chunk_back_1g backs the
         * 512 indices from a multiple of 512, which must be one GiB of one
         * arena (a cut at the top made the next arena start mid-chunk, and
         * its hugepages were counted as backed by the first GiB's
         * commit: a write to them faulted). */
        size_t keep_hp = ph->top_hp - last->first_hp;
        if (ph->page_mode == PAGES_1G) keep_hp = (keep_hp + HPM_PAGES_PER_HP - 1) & ~(size_t)(HPM_PAGES_PER_HP - 1);
        size_t cut_hp = last->n_hp - keep_hp;
        if (keep_hp < last->n_hp &&
            ph->os->unreserve((void *)(last->base + (keep_hp << HPM_HP_SHIFT)), cut_hp << HPM_HP_SHIFT) == 0) {
            last->n_hp = keep_hp;
            ph->reserved_hp = last->first_hp + keep_hp;
        }
    }
    return ENOMEM;
}

/* Descriptors for hugepages [from, to), which are reserved address space. */
static void hp_init_range(hpm_pageheap_t *ph, size_t from, size_t to) {
    for (size_t i = from; i < to; i++) {
        hpm_hp_t *hp = hp_at(ph, i);
        hp->index = (uint32_t)i;
        hp->addr = index_addr(ph, i);
        hp->set = SET_NONE;
        hp->state = HP_UNUSED;
        memset(hp->free_bits, 0xff, sizeof hp->free_bits);
        hp->longest_free_pages = HPM_PAGES_PER_HP;
        hp->longest_free_start = 0;
    }
}

/* Extend the used part of the last arena by n_hp hugepages (metadata
 * first); the caller has made sure the arena holds them. new_space: they
 * count as new address space for RLIMIT_AS (not the tail of an arena
 * that is left for the next). */
static int arena_grow(hpm_pageheap_t *ph, size_t n_hp, bool new_space) {
    size_t new_top = ph->top_hp + n_hp;
    if (new_top > ph->reserved_hp) return ENOMEM;
    if (new_space && limit_check(ph, n_hp)) return ENOMEM;
    size_t meta_hp = ph->page_mode == PAGES_1G ? (new_top + 511) / 512 * 512 : new_top;   /* whole 1 GiB chunks */
    hpm_arena_t *a = _hpm_arena_of_index(ph, new_top - 1);
    uintptr_t from = index_addr(ph, ph->top_hp), to = index_addr(ph, new_top - 1) + HPM_HP_BYTES;
    if (_hpm_meta_region_ensure(&ph->hp_region, meta_hp * sizeof(hpm_hp_t)) || _hpm_map_cover(ph, a, from, to))
        return ENOMEM;
    if (ph->page_mode == PAGES_1G) {
        size_t chunks_needed = (new_top + HPM_PAGES_PER_HP - 1) / HPM_PAGES_PER_HP;
        for (size_t c = ph->committed_hp / HPM_PAGES_PER_HP; c < chunks_needed; c++) {
            int e = chunk_back_1g(ph, c * HPM_PAGES_PER_HP);
            if (e) return e;
            ph->committed_hp = (c + 1) * HPM_PAGES_PER_HP;
        }
    }
    hp_init_range(ph, ph->top_hp, new_top);
    __atomic_store_n(&ph->top_hp, new_top, __ATOMIC_RELEASE);
    return 0;
}

/* Room for n_hp hugepages from index start (>= top) in the last arena, or
 * a new arena (then returns its first index, aligned to align_hp): the
 * unused end of the old one becomes released hugepages first. -1 if none. */
static long arena_room(hpm_pageheap_t *ph, size_t start, size_t n_hp, size_t align_hp) {
    if (ph_reserve(ph)) return -1;
    if (start + n_hp <= ph->reserved_hp) return (long)start;
    size_t old_top = ph->top_hp, old_reserved = ph->reserved_hp;
    if (old_reserved > old_top) {
        if (arena_grow(ph, old_reserved - old_top, false)) return -1;
        for (size_t i = old_top; i < old_reserved; i++) _hpm_ph_push_released(ph, hp_at(ph, i));
    }
    if (_hpm_arena_add(ph, n_hp, align_hp)) return -1;
    if (ph->page_mode == PAGES_1G) ph->committed_hp = old_reserved;
    return (long)old_reserved;
}

/* ---- empty hugepage lists ---- */

static void list_unlink(hpm_hp_t **head, hpm_hp_t **tail, hpm_hp_t *hp) {
    if (hp->prev) hp->prev->next = hp->next; else *head = hp->next;
    if (hp->next) hp->next->prev = hp->prev; else if (tail) *tail = hp->prev;
    hp->next = hp->prev = NULL;
}

/* Take an empty hugepage out of whichever list holds it. */
static void hp_take_empty(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->state == HP_CACHED) {
        list_unlink(&ph->cache_head, &ph->cache_tail, hp);
        ph->cache_count--;
    } else if (hp->state == HP_RELEASED) {
        list_unlink(&ph->released_head, NULL, hp);
        ph->released_count--;
    }
    if (hp->state == HP_CACHED || hp->state == HP_RELEASED) ph->idle_subrel_pages -= hp->subrel_pages;
    hp->state = HP_ACTIVE;
    ph->active_count++;
}

void _hpm_ph_push_released(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    hp->state = HP_RELEASED;
    hp->prev = NULL;
    hp->next = ph->released_head;
    if (hp->next) hp->next->prev = hp;
    ph->released_head = hp;
    ph->released_count++;
}

/* An empty hugepage, active and backed: newest cached, then released, then new. */
static hpm_hp_t *hp_get_empty(hpm_pageheap_t *ph) {
    hpm_hp_t *hp = ph->cache_head ? ph->cache_head : ph->released_head;
    if (!hp) {
        if (arena_room(ph, ph->top_hp, 1, 1) < 0 || arena_grow(ph, 1, true)) return NULL;
        hp = hp_at(ph, ph->top_hp - 1);
        _hpm_ph_push_released(ph, hp);   /* so that a failed backing loses nothing */
    }
    if (hp_back(ph, hp)) return NULL;
    hp_take_empty(ph, hp);
    return hp;
}

/* ---- spans ---- */

static hpm_span_t *span_new(hpm_pageheap_t *ph) {
    hpm_span_t *s = ph->span_free;
    if (s) ph->span_free = s->next;
    else if (!(s = _hpm_meta_alloc(sizeof *s))) return NULL;
    hpm_record_zero(s, sizeof *s);
    return s;
}

/* The record of a slab that has no granule slot (a small slab, or one
 * that found no granule boundary): alone in a cell of HPM_SLOT_BYTES, as
 * a slot would be. Pooled records lie 128 bytes apart, and slabs of
 * different threads are taken one after another, so with 128-byte
 * records two threads' frees traded the record lines (the cause of the
 * 512-byte slots; docs/allocator.md, "A granule's slot is 512 bytes"):
 * glibc-bench with every heap's first slabs small ran 1.32x the time on
 * two cores and 1.06x with both threads on one. Only once a second thread
 * has taken a heap (or the heap grew past 8 MiB: medium_caching): a
 * single-threaded program trades no lines, and python3 -c pass, some 50
 * small slabs, would pay about 60 KiB of max RSS for the cells. NULL when
 * metadata ran out. */
static hpm_span_t *slab_record_spaced(hpm_pageheap_t *ph) {
    if (!__atomic_load_n(&ph->medium_caching, __ATOMIC_RELAXED)) return span_new(ph);
    hpm_span_t *s = ph->slab_rec_free;
    if (s) ph->slab_rec_free = s->next;
    else if (!(s = _hpm_meta_alloc(HPM_SLOT_BYTES))) return NULL;
    hpm_record_zero(s, sizeof *s);
    s->spaced = 1;
    return s;
}

/* The record of a slab placed at page first of hp: its granule's slot
 * when it starts on a granule boundary, else a spaced pooled one. A slab
 * is placed on a boundary where the hugepage has room (first_fit); a
 * shorter one (a heap's small first ones) then leaves the rest of its
 * granule to other spans (internal.h, "Slab records at fixed places").
 * Off a boundary: where the hugepage had none free, a coloured page, a
 * written place in the small start (small_start_written). NULL when
 * metadata ran out. */
static hpm_span_t *slab_record_new(hpm_pageheap_t *ph, hpm_hp_t *hp, unsigned first) {
    uintptr_t start = hp->addr + ((uintptr_t)first << HPM_PAGE_SHIFT);
    hpm_arena_t *a = _hpm_arena_of_addr(ph, start);
    if (!a || first % HPM_GRANULE_PAGES) return slab_record_spaced(ph);
    size_t slot = (start - a->base) >> HPM_GRANULE_SHIFT;
    if (_hpm_meta_region_ensure(&a->rec_region, (slot + 1) * HPM_SLOT_BYTES)) return slab_record_spaced(ph);
    hpm_span_t *s = hpm_arena_slot(a, start);
    hpm_assert_internal(s->kind == SPAN_NONE && atomic_load_explicit(&s->owner, memory_order_relaxed) == NULL);
    hpm_record_zero(s, sizeof *s);   /* atomically: other threads' frees behind a short slab read the
                                      * owner (NULL already) and the page count at any time (hpm_slot_holds),
                                      * hpm_range any field it reads */
    s->fixed = 1;
    return s;
}

/* A record no span uses any more. A slot keeps its place, with no owner,
 * so that free's guess (hpm_slab_guess) fails on it. */
static void span_delete(hpm_pageheap_t *ph, hpm_span_t *s) {
    atomic_store_explicit(&s->owner, NULL, memory_order_relaxed);
    __atomic_store_n(&s->kind, SPAN_NONE, __ATOMIC_RELAXED);   /* hpm_range reads it */
    if (s->fixed) return;
    hpm_span_t **list = s->spaced ? &ph->slab_rec_free : &ph->span_free;
    s->next = *list;
    *list = s;
}

/* Mark pages [first, first+n) of hp used by span s (all in one hugepage). */
static void hp_use_pages(hpm_pageheap_t *ph, hpm_hp_t *hp, unsigned first, unsigned n, hpm_span_t *s) {
    _hpm_filler_remove(ph, hp);
    if (_hpm_bits_any_range(hp->dirty_bits, first, n)) s->clean = 0;
    unsigned subrel = hp->subrel_pages ? _hpm_bits_count_range(hp->subrel_bits, first, n) : 0;
    if (subrel) {
        _hpm_bits_set_range(hp->subrel_bits, first, n, false);
        hp->subrel_pages -= (uint16_t)subrel;
        ph->subrel_pages -= subrel;
    }
    _hpm_bits_set_range(hp->free_bits, first, n, false);
    _hpm_bits_set_range(hp->dirty_bits, first, n, true);
    hp->used_pages += (uint16_t)n;
    if (unlikely(hp->used_pages >= HPM_RIPE_PAGES) && hpm_ph_small_start(ph)) _hpm_ph_ripe(ph, hp);
    if (s->kind == SPAN_SLAB) hp->slab_pages += (uint16_t)n;
    __atomic_store_n(&ph->used_pages_total, ph->used_pages_total + n, __ATOMIC_RELAXED);   /* spancache.c reads it without the lock */
    if (unlikely(!__atomic_load_n(&ph->medium_caching, __ATOMIC_RELAXED)) && ph->used_pages_total >= HPM_SMALL_HEAP_PAGES)
        __atomic_store_n(&ph->medium_caching, true, __ATOMIC_RELAXED);
    unsigned ls = hp->longest_free_start, ll = hp->longest_free_pages;
    if (first < ls + ll && ls < first + n) {   /* cut into the longest run: find the new one */
        hp->longest_free_pages = (uint16_t)_hpm_bits_longest_run(hp->free_bits, &ls);
        hp->longest_free_start = (uint16_t)ls;
    }
    _hpm_filler_insert(ph, hp);
    hpm_span_t **map = hpm_hp_map(hp) + first;
    for (unsigned i = 0; i < n; i++) __atomic_store_n(&map[i], s, __ATOMIC_RELAXED);   /* hpm_span_of */
}

/* hp's home heap, h or NULL: hp leaves its old home's list and joins h's
 * (pageheap lock). */
static void hp_set_home(hpm_hp_t *hp, hpm_heap_t *h) {
    if (hp->home == h) return;
    if (hp->home) {
        if (hp->home_prev) hp->home_prev->home_next = hp->home_next;
        else hp->home->home_list = hp->home_next;
        if (hp->home_next) hp->home_next->home_prev = hp->home_prev;
    }
    hp->home = h;
    hp->home_prev = NULL;
    hp->home_next = h ? h->home_list : NULL;
    if (h) {
        if (h->home_list) h->home_list->home_prev = hp;
        h->home_list = hp;
    }
}

/* An active hugepage that has become empty goes to the head of the cache. */
static void hp_cache_push(hpm_pageheap_t *ph, hpm_hp_t *hp, uint64_t *now_ns) {
    hp->longest_free_pages = HPM_PAGES_PER_HP;
    hp->longest_free_start = 0;
    ph->active_count--;
    hp->state = HP_CACHED;
    ph->idle_subrel_pages += hp->subrel_pages;
    hp_set_home(hp, NULL);
    if (!*now_ns) *now_ns = ph->os->now_ns();   /* the clock is read only when a hugepage empties */
    hp->empty_since_ns = *now_ns;
    hp->prev = NULL;
    hp->next = ph->cache_head;
    if (hp->next) hp->next->prev = hp; else ph->cache_tail = hp;
    ph->cache_head = hp;
    ph->cache_count++;
}

/* Give pages [first, first+n) of hp back; an emptied hugepage goes to the cache. */
static void hp_free_pages(hpm_pageheap_t *ph, hpm_hp_t *hp, unsigned first, unsigned n, bool slab, uint64_t *now_ns) {
    hpm_span_t **map = hpm_hp_map(hp) + first;
    for (unsigned i = 0; i < n; i++) __atomic_store_n(&map[i], NULL, __ATOMIC_RELAXED);   /* hpm_span_of */
    _hpm_filler_remove(ph, hp);
    _hpm_bits_set_range(hp->free_bits, first, n, true);
    hp->used_pages -= (uint16_t)n;
    if (slab) hp->slab_pages -= (uint16_t)n;
    __atomic_store_n(&ph->used_pages_total, ph->used_pages_total - n, __ATOMIC_RELAXED);
    if (hp->used_pages > 0) {
        unsigned start, merged = _hpm_bits_run_around(hp->free_bits, first, n, &start);
        if (merged > hp->longest_free_pages) {
            hp->longest_free_pages = (uint16_t)merged;
            hp->longest_free_start = (uint16_t)start;
        }
        _hpm_filler_insert(ph, hp);
        return;
    }
    hp_cache_push(ph, hp, now_ns);
}

/* Where a span lies: written atomically, since hpm_range reads both at
 * any time and other threads' frees read the page count of a slot's slab
 * (hpm_slot_holds). */
static void span_set_range(hpm_span_t *s, uintptr_t start, size_t n_pages) {
    __atomic_store_n(&s->start, start, __ATOMIC_RELAXED);
    __atomic_store_n(&s->n_pages, (uint32_t)n_pages, __ATOMIC_RELAXED);
}

/* Where in hp an n-page span goes: first fit, a slab on a granule
 * boundary when there is room there, for its granule's slot; -1 if it
 * does not fit. Also a slab shorter than a granule (a heap's small first
 * slab of a class): placed first fit off a boundary, its record was a
 * pooled one, and each free into it went through the page map (free_mapped):
 * richards, whose packets all live in the first slab of their class, took
 * 1.10x mimalloc 2.0.9's time, and 0.93 of that with the slot (9 pairs;
 * docs/allocator.md, "Slab records at fixed places"). */
static int first_fit(const hpm_hp_t *hp, size_t n_pages, int kind) {
    int first = -1;
    if (kind == SPAN_SLAB)
        first = _hpm_bits_find_aligned_run(hp->free_bits, (unsigned)n_pages, HPM_GRANULE_PAGES);
    if (first < 0) first = _hpm_bits_find_run(hp->free_bits, (unsigned)n_pages, 0);
    return first;
}

/* Place an n-page span in hp, at first (-1: first fit). */
static hpm_span_t *span_place(hpm_pageheap_t *ph, hpm_hp_t *hp, size_t n_pages, int kind, int first) {
    if (first < 0) first = first_fit(hp, n_pages, kind);
    if (first < 0) return NULL;
    hpm_span_t *s = kind == SPAN_SLAB ? slab_record_new(ph, hp, (unsigned)first) : span_new(ph);
    if (!s) {   /* out of metadata: an empty hugepage taken for it goes back */
        uint64_t now = 0;
        if (hp->used_pages == 0) { _hpm_filler_remove(ph, hp); hp_cache_push(ph, hp, &now); }
        return NULL;
    }
    __atomic_store_n(&s->kind, (uint8_t)kind, __ATOMIC_RELAXED);   /* hpm_range reads it */
    s->clean = 1;
    if (kind != SPAN_SLAB) s->home = hp->home;
    span_set_range(s, hpm_hp_addr(ph, hp) + ((uintptr_t)first << HPM_PAGE_SHIFT), n_pages);
    hp_use_pages(ph, hp, (unsigned)first, (unsigned)n_pages, s);
    return s;
}

/* A free page whose colour (index mod count) is in mask, in hp; -1 if none. */
static int colour_page(const hpm_hp_t *hp, uint64_t mask, unsigned count) {
    for (unsigned w = 0; w < 8; w++) {
        uint64_t bits = hp->free_bits[w];
        while (bits) {
            unsigned i = w * 64 + (unsigned)__builtin_ctzll(bits);
            if ((mask >> (i % count)) & 1) return (int)i;
            bits &= bits - 1;
        }
    }
    return -1;
}

static hpm_span_t *span_alloc_coloured(hpm_pageheap_t *ph, uint64_t mask, unsigned count) {
    const int order[3] = {SET_SLAB, SET_HYBRID, SET_OTHER};
    for (int k = 0; k < 3; k++) {
        hpm_filler_set_t *set = &ph->sets[order[k]];
        for (unsigned bin = 1; bin < HPM_BINS; bin++) {
            for (hpm_hp_t *hp = set->bins[bin]; hp; hp = hp->next) {
                int i = colour_page(hp, mask, count);
                if (i >= 0) return span_place(ph, hp, 1, SPAN_SLAB, i);
            }
        }
        if (k == 1) {   /* before polluting OTHER, open an empty hugepage */
            hpm_hp_t *hp = hp_get_empty(ph);
            if (hp) return span_place(ph, hp, 1, SPAN_SLAB, colour_page(hp, mask, count));
        }
    }
    return NULL;
}

/* Where n pages fit on written free pages of hp (on a granule boundary
 * when aligned), as tightly as they can: the written run whose free run
 * around it is shortest. -1 if none; *around_pages gets that length. */
static int written_fit(const hpm_hp_t *hp, unsigned n, bool aligned, unsigned *around_pages) {
    uint64_t written_free[8];
    for (unsigned w = 0; w < 8; w++) written_free[w] = hp->free_bits[w] & hp->dirty_bits[w];
    int best = -1;
    unsigned best_pages = HPM_PAGES_PER_HP + 1;
    for (int at = _hpm_bits_find_run(written_free, n, 0); at >= 0;) {
        unsigned run = _hpm_bits_run_from(written_free, (unsigned)at), place = (unsigned)at;
        if (aligned) place = (place + HPM_GRANULE_PAGES - 1) & ~(HPM_GRANULE_PAGES - 1);
        if (place + n <= (unsigned)at + run) {
            unsigned from, pages = _hpm_bits_run_around(hp->free_bits, place, n, &from);
            if (pages < best_pages) { best_pages = pages; best = (int)place; }
        }
        unsigned next = (unsigned)at + run;
        at = next < HPM_PAGES_PER_HP ? _hpm_bits_find_run(written_free, n, next) : -1;
    }
    *around_pages = best_pages;
    return best;
}

/* During the small start a page costs RSS from its first write (4 KiB
 * pages), and a written page that is free again costs nothing more, but
 * fill before break looks only at the longest free runs. So a span in the
 * small start goes on written free pages when some fit (a slab of a
 * granule or more only on a granule boundary, for its record slot,
 * internal.h), the tightest such place first, if
 * - its free run is no longer than the one that fill before break would
 *   cut in usual, the hugepage it chose (NULL: none fits, an empty one
 *   comes next): it must not break a longer run than that, or the heap
 *   outgrows its small start sooner;
 * - its hugepage is at least half used: a sparse one is left to empty
 *   (sqlite3's sorter grows a buffer to 2 MB by realloc, and with spans
 *   kept in sparse hugepages it found no empty one and ended the small
 *   start; docs/allocator.md, "Written pages first");
 * - and not emptied: those wait in the usual order, which takes them only
 *   when no partial one fits, so that they can still be given back whole
 *   (and a block freed whole with them is not handed out again at once).
 * Returns the hugepage and *first the place; usual and its first fit when
 * there is no such place. Past the small start: usual, *first -1. */
static hpm_hp_t *small_start_written(hpm_pageheap_t *ph, hpm_hp_t *usual, size_t n_pages, int kind, int *first) {
    *first = -1;
    if (!hpm_ph_small_start(ph) || n_pages >= HPM_PAGES_PER_HP) return usual;
    unsigned limit_pages = HPM_PAGES_PER_HP, from;
    if (usual && (*first = first_fit(usual, n_pages, kind)) >= 0)
        limit_pages = _hpm_bits_run_around(usual->free_bits, (unsigned)*first, (unsigned)n_pages, &from);
    bool aligned = kind == SPAN_SLAB && n_pages >= HPM_GRANULE_PAGES;
    size_t top = ph->top_hp < HPM_SMALL_START_HP ? ph->top_hp : HPM_SMALL_START_HP;
    hpm_hp_t *best = usual;
    bool written = false;
    unsigned best_pages = limit_pages;
    for (size_t i = 0; i < top; i++) {
        hpm_hp_t *hp = hp_at(ph, i);
        if (hp->state != HP_ACTIVE || hp->backing != BACK_THP || hp->used_pages < HPM_PAGES_PER_HP / 2 ||
            hp->longest_free_pages < n_pages)   /* no free run fits, so no written one: no bitmap scan */
            continue;
        unsigned pages;
        int at = written_fit(hp, (unsigned)n_pages, aligned, &pages);
        if (at < 0 || pages > best_pages || (written && pages == best_pages && hp->used_pages <= best->used_pages)) continue;
        written = true;
        best = hp;
        best_pages = pages;
        *first = at;
    }
    return best;
}

/* Homes. Threads that share the pageheap got medium spans side by side:
 * in glibc-bench large with two threads each of 1,024 live blocks lay
 * next to the other thread's as often as to its own, and every hugepage
 * held both. Hardware that prefetches past the end of a block then pulls
 * in lines the other thread is about to write; a test without any
 * allocator (two threads rewriting 33-64 KiB blocks in 64 KiB places,
 * one byte per 4 KiB page) ran 25% slower with the places interleaved
 * per block than in two halves, 12% per 2 blocks, 5% per 4, and not at
 * all per 2 MiB, on the AMD EPYC guests (an Intel Xeon guest showed no
 * difference, and there homes neither gain nor lose time: docs/allocator.md,
 * "Homes on another host"). mimalloc, snmalloc and jemalloc keep each thread's
 * memory in regions of its own. So in a big enough heap (hpm_homes_on:
 * 32 MiB, and 16 MiB a thread) a thread heap's medium span goes, in this
 * order, into its last hugepage (home_hp) when it fits there; into the
 * most used partial hugepage that fits among those of its own (its home
 * list, home_own_fit), then of nobody or of a thread that has exited (at
 * most HOME_LOOKS looked at in the filler's bins);
 * or, before an empty hugepage is opened, into a hugepage of any set
 * open to it that is at most a quarter used (HOME_SPARSE_PAGES); or into an
 * empty hugepage. The hugepage becomes the heap's (hp->home)
 * and is nobody's again when it empties. Only when no empty hugepage can
 * be had does the span take the usual place, in any thread's hugepage.
 * The cost is a partial hugepage per thread that other threads do not
 * fill (mimalloc's segments cost the same). The sparse step (session 40):
 * without it a hugepage pinned by a few slabs, or by an exited thread's
 * last spans, stayed nearly empty while threads opened empty ones (the
 * small start's mixed hugepages in glibc-bench large: 2 to 71 pages in
 * use in 7 of them with small span caches); with it that run's max RSS
 * went from 110.5 to 108.6 MB (medians of 5 interleaved runs). */
#define HOME_LOOKS 64
#define HOME_SPARSE_PAGES (HPM_PAGES_PER_HP / 4)

/* Among h's own hugepages (its home list), the one for an n-page medium
 * span that the filler's order would pick: the shortest longest free run
 * that fits, the more used of equals; NULL if none fits (or none in the
 * first HOME_OWN_LOOKS). The filler's bins hold every thread's hugepages,
 * so a search there for h's own, limited to HOME_LOOKS, missed them once
 * other threads' hugepages filled the first bins: with 8 threads a
 * thread opened empty hugepages while its own had room, and the free
 * pages inside active hugepages grew with the run (glibc-bench large,
 * 8 threads: 86, 131 and 159 MiB at 0.4, 1 and 2.5 s). */
#define HOME_OWN_LOOKS 1024
static hpm_hp_t *home_own_fit(hpm_heap_t *h, size_t n_pages) {
    hpm_hp_t *best = NULL;
    unsigned looks = 0;
    for (hpm_hp_t *hp = h->home_list; hp && looks < HOME_OWN_LOOKS; hp = hp->home_next, looks++) {
        if (hp->state != HP_ACTIVE || hp->set == SET_SLAB || hp->longest_free_pages < n_pages) continue;
        if (!best || hp->longest_free_pages < best->longest_free_pages ||
            (hp->longest_free_pages == best->longest_free_pages && hp->used_pages > best->used_pages))
            best = hp;
    }
    return best;
}

/* The hugepage for a medium span of heap h, made h's home; *first is the
 * place in it (-1: first fit). NULL when only another live thread's
 * hugepage would do. */
static hpm_hp_t *home_choose(hpm_pageheap_t *ph, size_t n_pages, int kind, hpm_heap_t *h, int *first) {
    hpm_hp_t *hp = h->home_hp;
    if (hp && (hp->state != HP_ACTIVE || hp->home != h || hp->set == SET_SLAB || (*first = first_fit(hp, n_pages, kind)) < 0))
        hp = NULL;
    if (!hp) hp = home_own_fit(h, n_pages);
    if (!hp) hp = _hpm_filler_find_home(ph, SET_OTHER, n_pages, h, HOME_LOOKS);
    if (!hp) hp = _hpm_filler_find_home(ph, SET_HYBRID, n_pages, h, HOME_LOOKS);
    if (!hp) hp = _hpm_filler_find_sparse(ph, n_pages, h, HOME_SPARSE_PAGES);
    if (!hp) hp = hp_get_empty(ph);
    if (hp) hp_set_home(hp, h);   /* before span_place, which gives the span its hugepage's home; cleared if hp empties */
    return hp;
}

/* The usual hugepage for an n-page span: fill before break in the kind's
 * own set, then the hybrids, (mixing the sets in a tiny heap or the small
 * start; written pages first in the small start), then an empty one, and
 * the other set only when no memory can be had. NULL: none. */
static hpm_hp_t *usual_choose(hpm_pageheap_t *ph, size_t n_pages, int kind, int *first) {
    int own = kind == SPAN_SLAB ? SET_SLAB : SET_OTHER;
    int other = kind == SPAN_SLAB ? SET_OTHER : SET_SLAB;
    hpm_hp_t *hp = _hpm_filler_find(ph, own, n_pages);
    if (!hp) hp = _hpm_filler_find(ph, SET_HYBRID, n_pages);
    /* A tiny heap (one hugepage) mixes freely rather than back a second
     * one, and so does a heap in its small start (4 KiB pages, see
     * hp_committed): there a page costs RSS from its first write, and a
     * freed medium span's written pages serve the next slab as glibc's
     * free lists would (python3 -c pass under pyenv: about 150 KiB less
     * max RSS). The sets matter once the hugepages are huge. */
    bool mix = ph->active_count <= HPM_TINY_HEAP_HP || hpm_ph_small_start(ph);
    if (!hp && mix) hp = _hpm_filler_find(ph, other, n_pages);
    hp = small_start_written(ph, hp, n_pages, kind, first);
    if (!hp) hp = hp_get_empty(ph);
    if (!hp) hp = _hpm_filler_find(ph, other, n_pages);   /* out of memory: pollute */
    return hp;
}

hpm_span_t *_hpm_ph_alloc_span(hpm_pageheap_t *ph, size_t n_pages, int kind, uint64_t colour_mask) {
    return _hpm_ph_alloc_span_for(ph, n_pages, kind, colour_mask, NULL);
}

hpm_span_t *_hpm_ph_alloc_span_for(hpm_pageheap_t *ph, size_t n_pages, int kind, uint64_t colour_mask, hpm_heap_t *home) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    hpm_assert(n_pages > 0 && n_pages <= UINT32_MAX);   /* a span owns a page at least; its count is 32 bits */
    if (colour_mask && n_pages == 1) {
        /* a thread's mask may have no colour below a count changed since
         * (options.c): then its slabs are not coloured, rather than each
         * opening a hugepage in which no page has its colour */
        unsigned count = (unsigned)_hpm_option(HPM_OPT_COLOR_COUNT);   /* 1..64 (options.c) */
        uint64_t usable = colour_mask & hpm_colours_all(count);
        if (usable) return span_alloc_coloured(ph, usable, count);
    }
    int first = -1;   /* where in hp: -1, first fit */
    hpm_hp_t *hp = NULL;
    if (home && kind == SPAN_MEDIUM && hpm_homes_on(ph)) hp = home_choose(ph, n_pages, kind, home, &first);
    if (!hp) hp = usual_choose(ph, n_pages, kind, &first);
    if (!hp) return NULL;
    hpm_span_t *s = span_place(ph, hp, n_pages, kind, first);
    if (s && home && hp->home == home) home->home_hp = hp;
    hpm_ph_changed(ph);
    hpm_check_expensive(_hpm_check_pageheap_amortized, ph);
    return s;
}

/* Commit fresh hugepages [top, top + fresh) of the last arena, which has
 * room for them: one commit before anything changes (refused, nothing is
 * left over); they join the released list. 0 or -1. */
static int grow_fresh(hpm_pageheap_t *ph, size_t fresh) {
    size_t old_top = ph->top_hp;
    bool thp = ph_pages_anon(ph);
    void *fresh_addr = (void *)index_addr(ph, old_top);
    if (thp && ph->os->commit(fresh_addr, fresh << HPM_HP_SHIFT)) return -1;
    if (arena_grow(ph, fresh, true)) {
        if (thp) ph->os->unreserve_to_reserved(fresh_addr, fresh << HPM_HP_SHIFT);
        return -1;
    }
    for (size_t i = old_top; i < ph->top_hp; i++) {
        if (thp) hp_committed(ph, hp_at(ph, i));
        _hpm_ph_push_released(ph, hp_at(ph, i));
    }
    return 0;
}

/* n_hp consecutive non-active hugepages of one arena whose start address
 * is aligned to align_hp hugepages; past the top, new hugepages (committed
 * with one call where the mode allows, see run_commit). -1 if none. */
static long find_empty_run(hpm_pageheap_t *ph, size_t n_hp, size_t align_hp) {
    size_t run = 0;
    for (size_t i = 0; i < ph->top_hp; i++) {
        hpm_hp_t *hp = hp_at(ph, i);
        if (hp->state == HP_ACTIVE || (run && hp->addr != hp_at(ph, i - 1)->addr + HPM_HP_BYTES)) run = 0;
        if (hp->state == HP_ACTIVE) continue;
        if (run == 0 && (hp->addr >> HPM_HP_SHIFT) % align_hp != 0) continue;
        if (++run == n_hp) return (long)(i + 1 - n_hp);
    }
    /* extend the last arena: from an aligned index past its last active hugepage */
    if (ph_reserve(ph)) return -1;
    hpm_arena_t *last = &ph->arenas[ph->n_arenas - 1];
    size_t start = ph->top_hp;
    while (start > last->first_hp && hp_at(ph, start - 1)->state != HP_ACTIVE) start--;
    while (((last->base >> HPM_HP_SHIFT) + (start - last->first_hp)) % align_hp) start++;
    long room = arena_room(ph, start, n_hp, align_hp);
    if (room < 0) return -1;
    start = (size_t)room;
    if (start + n_hp > ph->top_hp && grow_fresh(ph, start + n_hp - ph->top_hp)) return -1;
    return (long)start;
}

/* The free pages at the end of hugepage hp (its last used page + 1 on). */
static unsigned free_end_pages(const hpm_hp_t *hp) {
    return HPM_PAGES_PER_HP - _hpm_bits_run_back(hp->free_bits, HPM_PAGES_PER_HP);
}

/* Where a plain large span of n_pages that are not whole hugepages (q
 * whole ones and r more) can start in the free end of a hugepage in use,
 * r pages before the q empty hugepages that follow it. One pass over the
 * hugepages, lowest first, as find_empty_run: the first such hugepage, or
 * -1 with *empty_at set if q + 1 empty hugepages in a row come first;
 * when neither is there, the last hugepage in use and new ones after it
 * (grown here). -1 if none. Freed, such a span leaves its q hugepages empty (whole,
 * for the cache) and its r pages free at the end of a hugepage, where the
 * next one fits again. A span that took whole hugepages from the start
 * left its r pages at the start of its last hugepage instead, where
 * first-fit placement filled them, and that hugepage stayed in use: the
 * next large span needed new hugepages (mstress's growing arrays took 13
 * hugepages for 13.5 MB live). (The tightest free end instead of the
 * first cost a whole pass per large span: 3x the allocator's time in a
 * churn of 1..9 MiB blocks over 1,000 hugepages.) */
static long find_end_run(hpm_pageheap_t *ph, size_t n_pages, long *empty_at) {
    size_t q = n_pages / HPM_PAGES_PER_HP;
    unsigned r = (unsigned)(n_pages % HPM_PAGES_PER_HP), end = 0;
    long in_use = -1;   /* in_use: the last hugepage in use, followed by `after` empty ones */
    size_t after = 0, run = 0;     /* run: empty hugepages in a row, for *empty_at */
    for (size_t i = 0; i < ph->top_hp; i++) {
        hpm_hp_t *hp = hp_at(ph, i);
        bool follows = i > 0 && hp->addr == hp_at(ph, i - 1)->addr + HPM_HP_BYTES;
        if (hp->state == HP_ACTIVE) {
            in_use = hp->backing == BACK_THP ? (long)i : -1;
            /* the free end is at most the longest free run: most hugepages need no bitmap read */
            end = in_use >= 0 && hp->longest_free_pages >= r ? free_end_pages(hp) : 0;
            after = run = 0;
        } else {
            run = follows ? run + 1 : 1;
            if (run == q + 1) {   /* the lowest place wins, as in find_empty_run */
                *empty_at = (long)(i - q);
                return -1;
            }
            if (in_use < 0 || !follows) {
                in_use = -1;
                continue;
            }
            after++;
        }
        if (in_use >= 0 && after == q && end >= r) return in_use;
    }
    /* the last hugepage in use and the empty ones after it, then new ones in the same arena */
    if (in_use < 0 || end < r || after >= q || ph->top_hp + (q - after) > ph->reserved_hp ||
        _hpm_arena_of_index(ph, (size_t)in_use) != _hpm_arena_of_index(ph, ph->top_hp + (q - after) - 1))
        return -1;
    return grow_fresh(ph, q - after) ? -1 : in_use;
}

/* Before a zeroed large span uses pages [from, from + n) of hp: pages
 * that may hold data are given back (the whole hugepage, when many are) or
 * cleared, so that nothing is written that already reads as zero. */
static void hp_make_zero(hpm_pageheap_t *ph, hpm_hp_t *hp, unsigned from, unsigned n) {
    unsigned dirty = _hpm_bits_count_range(hp->dirty_bits, from, n);
    if (dirty == 0) return;
    char *base = (char *)hpm_hp_addr(ph, hp);
    if (n == HPM_PAGES_PER_HP && dirty > HPM_PAGES_PER_HP / 8 && hp->backing == BACK_THP &&
        ph->os->release(base, HPM_HP_BYTES) == 0) {
        memset(hp->dirty_bits, 0, sizeof hp->dirty_bits);
        return;
    }
    n += from;
    for (int first = _hpm_bits_find_run(hp->dirty_bits, 1, from); first >= 0 && (unsigned)first < n; ) {
        unsigned end = (unsigned)first + 1;
        while (end < n && ((hp->dirty_bits[end >> 6] >> (end & 63)) & 1)) end++;
        memset(base + ((size_t)first << HPM_PAGE_SHIFT), 0, (size_t)(end - (unsigned)first) << HPM_PAGE_SHIFT);
        _hpm_bits_set_range(hp->dirty_bits, (unsigned)first, end - (unsigned)first, false);
        if (end >= n) break;
        first = _hpm_bits_find_run(hp->dirty_bits, 1, end);
    }
}

hpm_span_t *_hpm_ph_alloc_large(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes) {
    return _hpm_ph_alloc_large_zero(ph, n_pages, align_bytes, false);
}

hpm_span_t *_hpm_ph_alloc_large_zero(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes, bool zero) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    hpm_assert(n_pages > 0 && n_pages <= UINT32_MAX);   /* a span owns a page at least; its count is 32 bits */
    size_t n_hp = (n_pages + HPM_PAGES_PER_HP - 1) / HPM_PAGES_PER_HP;
    size_t align_hp = align_bytes > HPM_HP_BYTES ? align_bytes >> HPM_HP_SHIFT : 1;
    if (n_hp > ph->index_cap_hp) return NULL;
    hpm_span_t *s = span_new(ph);   /* first: nothing to undo when metadata runs out */
    if (!s) return NULL;
    /* A plain span that is not whole hugepages puts its `head` pages at
     * the end of a hugepage: one in use (find_end_run), or else the first
     * of the empty ones it takes; its whole hugepages follow. */
    unsigned head = align_bytes <= HPM_PAGE_BYTES && ph_pages_anon(ph) ? (unsigned)(n_pages % HPM_PAGES_PER_HP) : 0;
    hpm_hp_t *single = NULL;
    long first, end_at = -1;   /* end_at: the hugepage in use whose end takes the head */
    size_t q = n_pages / HPM_PAGES_PER_HP;
    /* without new memory first: the end of one in use, or else q + 1 empty
     * ones; then past the top: the end of the last one in use and q new
     * hugepages, or else q + 1 new ones */
    long empty_at = -1;   /* the first q + 1 empty hugepages in a row, below the top */
    if (head) end_at = find_end_run(ph, n_pages, &empty_at);
    if (end_at >= 0) {
        first = end_at + 1;
        n_hp = q;   /* the empty hugepages after it */
        if (run_commit(ph, (size_t)first, n_hp)) {
            span_delete(ph, s);
            return NULL;
        }
    } else if (n_hp == 1 && align_hp == 1) {
        if (!(single = hp_get_empty(ph))) { span_delete(ph, s); return NULL; }
        first = single->index;
    } else if ((first = empty_at >= 0 ? empty_at : find_empty_run(ph, n_hp, align_hp)) < 0 ||
               run_commit(ph, (size_t)first, n_hp)) {
        span_delete(ph, s);
        return NULL;
    }
    size_t newly_backed = 0;   /* released or new hugepages taken: traded against cached ones below */
    for (size_t i = 0; !single && i < n_hp; i++) {
        hpm_hp_t *hp = hp_at(ph, (size_t)first + i);
        newly_backed += hp->state == HP_RELEASED;
        if (hp_back(ph, hp)) {   /* out of memory: put back what we took, released as release.c would */
            for (size_t j = 0; j < i; j++) {
                hpm_hp_t *t = hp_at(ph, (size_t)first + j);
                ph->active_count--;
                if (!_hpm_ph_give_back_whole(ph, t)) ph->idle_subrel_pages += t->subrel_pages;
                _hpm_ph_push_released(ph, t);
            }
            span_delete(ph, s);
            return NULL;
        }
        hp_take_empty(ph, hp);
    }
    if (head && end_at < 0) end_at = first++;   /* the first hugepage taken holds the head */
    __atomic_store_n(&s->kind, SPAN_LARGE, __ATOMIC_RELAXED);   /* hpm_range reads it */
    s->clean = 1;
    if (head) {
        hpm_hp_t *end_hp = hp_at(ph, (size_t)end_at);
        span_set_range(s, hpm_hp_addr(ph, end_hp) + ((uintptr_t)(HPM_PAGES_PER_HP - head) << HPM_PAGE_SHIFT), n_pages);
        if (zero) hp_make_zero(ph, end_hp, HPM_PAGES_PER_HP - head, head);
        hp_use_pages(ph, end_hp, HPM_PAGES_PER_HP - head, head, s);
    } else {
        span_set_range(s, hpm_hp_addr(ph, hp_at(ph, (size_t)first)), n_pages);
    }
    for (size_t i = 0, left = n_pages - head; left > 0; i++) {
        unsigned n = left > HPM_PAGES_PER_HP ? HPM_PAGES_PER_HP : (unsigned)left;
        if (zero) hp_make_zero(ph, hp_at(ph, (size_t)first + i), 0, n);
        hp_use_pages(ph, hp_at(ph, (size_t)first + i), 0, n, s);
        left -= n;
    }
    ph->large_allocs_total++;
    if (newly_backed) _hpm_ph_release_for_growth(ph, newly_backed);
    hpm_ph_changed(ph);
    hpm_check_expensive(_hpm_check_pageheap_amortized, ph);
    return s;
}

/* realloc's growth in place (docs/allocator.md, "realloc"): the free end
 * of the span's last hugepage, then whole empty hugepages that follow it
 * at the next addresses (cached, released, or new at the top of the same
 * arena, as find_end_run grows). A buffer that grows step by step (Perl's
 * stack under a long map: 800 steps of 212 KiB) then costs only its new
 * pages at each step, not a copy into fresh hugepages and the release of
 * the old ones. The last hugepage taken may be used only in part: its
 * free rest joins the filler, as a medium span's would. */
bool _hpm_ph_grow_large(hpm_pageheap_t *ph, hpm_span_t *s, size_t n_pages) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    if (s->kind != SPAN_LARGE || !ph_pages_anon(ph) || n_pages <= s->n_pages) return false;
    size_t extra = n_pages - s->n_pages;
    uintptr_t end = s->start + ((uintptr_t)s->n_pages << HPM_PAGE_SHIFT);
    hpm_hp_t *last = hpm_hp_of_addr(ph, end - 1);
    unsigned first = (unsigned)((end >> HPM_PAGE_SHIFT) & (HPM_PAGES_PER_HP - 1));   /* 0: the span ends with `last` */
    unsigned in_last = first == 0 ? 0 : extra < HPM_PAGES_PER_HP - first ? (unsigned)extra : HPM_PAGES_PER_HP - first;
    if (in_last && (last->backing != BACK_THP || _hpm_bits_count_range(last->free_bits, first, in_last) != in_last))
        return false;
    size_t rest = extra - in_last, n_hp = (rest + HPM_PAGES_PER_HP - 1) / HPM_PAGES_PER_HP, next = last->index + 1;
    size_t fresh = 0;   /* hugepages past the top */
    for (size_t i = 0; i < n_hp; i++) {
        if (next + i >= ph->top_hp) { fresh = n_hp - i; break; }
        hpm_hp_t *hp = hp_at(ph, next + i);
        if (hp->state == HP_ACTIVE || hp->addr != last->addr + ((uintptr_t)(i + 1) << HPM_HP_SHIFT)) return false;
    }
    if (fresh && (ph->top_hp + fresh > ph->reserved_hp || index_addr(ph, ph->top_hp) != last->addr +
                  ((uintptr_t)(ph->top_hp - last->index) << HPM_HP_SHIFT) ||
                  _hpm_arena_of_index(ph, last->index) != _hpm_arena_of_index(ph, ph->top_hp + fresh - 1)))
        return false;
    if ((fresh && grow_fresh(ph, fresh)) || run_commit(ph, next, n_hp)) return false;   /* what grew stays released */
    if (in_last) hp_use_pages(ph, last, first, in_last, s);
    size_t newly_backed = 0;
    for (size_t i = 0; i < n_hp; i++, rest -= HPM_PAGES_PER_HP) {
        hpm_hp_t *hp = hp_at(ph, next + i);
        newly_backed += hp->state == HP_RELEASED;
        hp_take_empty(ph, hp);
        hp_use_pages(ph, hp, 0, rest < HPM_PAGES_PER_HP ? (unsigned)rest : HPM_PAGES_PER_HP, s);
        if (rest < HPM_PAGES_PER_HP) break;
    }
    span_set_range(s, s->start, n_pages);
    if (newly_backed) _hpm_ph_release_for_growth(ph, newly_backed);
    hpm_ph_changed(ph);
    hpm_check_expensive(_hpm_check_pageheap_amortized, ph);
    return true;
}

/* A medium span grows in place, inside its hugepage, when the pages
 * right after it there are all free. */
bool _hpm_ph_grow_medium(hpm_pageheap_t *ph, hpm_span_t *s, size_t n_pages) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    if (s->kind != SPAN_MEDIUM || n_pages <= s->n_pages) return false;
    size_t end = ((s->start >> HPM_PAGE_SHIFT) & (HPM_PAGES_PER_HP - 1)) + s->n_pages, extra = n_pages - s->n_pages;
    if (end + extra > HPM_PAGES_PER_HP) return false;
    hpm_hp_t *hp = hpm_hp_of_addr(ph, s->start);
    if (_hpm_bits_count_range(hp->free_bits, (unsigned)end, (unsigned)extra) != extra) return false;
    hp_use_pages(ph, hp, (unsigned)end, (unsigned)extra, s);
    span_set_range(s, s->start, n_pages);
    hpm_ph_changed(ph);
    hpm_check_expensive(_hpm_check_pageheap_amortized, ph);
    return true;
}

hpm_span_t *_hpm_ph_alloc_aligned(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes) {
    hpm_assert(n_pages > 0 && n_pages <= UINT32_MAX);   /* a span owns a page at least; its count is 32 bits */
    size_t align_pages = align_bytes >> HPM_PAGE_SHIFT;
    size_t total = n_pages + align_pages - 1;
    if (total >= HPM_LARGE_MIN_PAGES) return _hpm_ph_alloc_large(ph, n_pages, HPM_HP_BYTES);
    hpm_span_t *s = _hpm_ph_alloc_span(ph, total, SPAN_MEDIUM, 0);
    if (!s) return NULL;
    uintptr_t aligned = (s->start + align_bytes - 1) & ~(uintptr_t)(align_bytes - 1);
    hpm_hp_t *hp = hpm_hp_of_addr(ph, s->start);
    unsigned first = (unsigned)((s->start >> HPM_PAGE_SHIFT) & 511);
    unsigned head = (unsigned)((aligned - s->start) >> HPM_PAGE_SHIFT);
    unsigned tail = (unsigned)(total - head - n_pages);
    uint64_t now = 0;
    if (head) hp_free_pages(ph, hp, first, head, false, &now);
    if (tail) hp_free_pages(ph, hp, first + head + (unsigned)n_pages, tail, false, &now);
    span_set_range(s, aligned, n_pages);
    hpm_check_expensive(_hpm_check_pageheap_amortized, ph);
    return s;
}

/* Free the pages [start, start + n_pages), which may cross hugepages. */
static void free_page_range(hpm_pageheap_t *ph, uintptr_t start, size_t n_pages, bool slab, uint64_t *now_ns) {
    size_t idx = hpm_hp_of_addr(ph, start)->index;
    unsigned first = (unsigned)((start >> HPM_PAGE_SHIFT) & 511);
    while (n_pages > 0) {
        unsigned n = n_pages > HPM_PAGES_PER_HP - first ? HPM_PAGES_PER_HP - first : (unsigned)n_pages;
        hp_free_pages(ph, hp_at(ph, idx), first, n, slab, now_ns);
        n_pages -= n;
        idx++;
        first = 0;
    }
}

/* After pages were freed: release what the cache holds beyond its keep. */
static void pages_freed(hpm_pageheap_t *ph, uint64_t now_ns) {
    if (ph->cache_count > ph->cache_keep_hp || ph->subrelease)
        _hpm_ph_release_tick(ph, now_ns ? now_ns : ph->os->now_ns());
    else
        hpm_ph_changed(ph);
    hpm_check_expensive(_hpm_check_pageheap_amortized, ph);
}

void _hpm_ph_free_span(hpm_pageheap_t *ph, hpm_span_t *s) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    hpm_assert(s->kind != SPAN_NONE && s->n_pages > 0);
    uint64_t now = 0;
    free_page_range(ph, s->start, s->n_pages, s->kind == SPAN_SLAB, &now);
    span_delete(ph, s);
    pages_freed(ph, now);
}

/* realloc's shrink in place: the pages past n_pages go back, the start
 * stays. The range is cut first, so that hpm_range never finds the span
 * over pages the map no longer gives it. */
void _hpm_ph_shrink_span(hpm_pageheap_t *ph, hpm_span_t *s, size_t n_pages) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    hpm_assert(((s->kind == SPAN_LARGE && n_pages >= HPM_LARGE_MIN_PAGES) || (s->kind == SPAN_MEDIUM && n_pages > 0)) &&
               n_pages < s->n_pages);
    uint64_t now = 0;
    size_t old_pages = s->n_pages;
    span_set_range(s, s->start, n_pages);
    free_page_range(ph, s->start + ((uintptr_t)n_pages << HPM_PAGE_SHIFT), old_pages - n_pages, false, &now);
    pages_freed(ph, now);
}

size_t _hpm_hp_list_in_use(uintptr_t *out, size_t max) {
    hpm_pageheap_t *ph = &_hpm_ph;
    if (atomic_load(&_hpm_ready) != 2) return 0;
    size_t n = 0;
    pthread_mutex_lock(&ph->lock);
    for (size_t i = 0; i < ph->top_hp; i++) {
        hpm_hp_t *hp = hp_at(ph, i);
        if (hp->state != HP_ACTIVE || hp->backing != BACK_THP) continue;
        if (n < max) out[n] = hpm_hp_addr(ph, hp);
        n++;
    }
    hpm_ph_unlock(ph);
    return n;
}
