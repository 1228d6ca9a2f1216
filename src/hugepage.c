/* hugepage.c: the pageheap, which keeps the heap as a set of 2 MiB
 * hugepages and decides where every span goes.
 *
 * Placement (DESIGN.md rules 3-4): a span goes to the most used partial
 * hugepage of its own set that fits (filler.c), then to a hybrid, then to
 * an empty hugepage (newest cached first, then released, then new address
 * space), and only then pollutes the other set. Large spans take whole
 * hugepages; the tail of the last one joins the filler. Empty hugepages go
 * to a cache and are released whole by release.c.
 *
 * Invariants: an ACTIVE hugepage has used_pages in 1..512 and is in exactly
 * one filler set; a CACHED one is on the cache list, a RELEASED one on the
 * released list; page_map[i] is the span owning page i or NULL. Every
 * function here runs with ph->lock held, except init. */
#include <errno.h>
#include <string.h>
#include "internal.h"

hpm_pageheap_t _hpm_ph;
hpm_map_t _hpm_map;

static inline hpm_hp_t *hp_at(hpm_pageheap_t *ph, size_t idx) { return &ph->hps[idx]; }
int _hpm_ph_init(hpm_pageheap_t *ph, const hpm_os_t *os, size_t reserve_bytes, int page_mode) {
    memset(ph, 0, sizeof *ph);
    pthread_mutex_init(&ph->lock, NULL);
    ph->os = os;
    ph->page_mode = page_mode;
    size_t align = page_mode == PAGES_1G ? HPM_GB_BYTES : HPM_HP_BYTES;
    reserve_bytes &= ~(align - 1);
    void *base = NULL;
    while (reserve_bytes >= HPM_GB_BYTES && !(base = os->reserve(reserve_bytes, align))) reserve_bytes /= 2;
    if (!base) return ENOMEM;
    ph->base = (uintptr_t)base;
    ph->reserved_hp = reserve_bytes >> HPM_HP_SHIFT;
    if (_hpm_meta_region_init(&ph->hp_region, ph->reserved_hp * sizeof(hpm_hp_t)) ||
        _hpm_meta_region_init(&ph->map_region, (reserve_bytes >> HPM_PAGE_SHIFT) * sizeof(hpm_span_t *)))
        return ENOMEM;
    ph->hps = (hpm_hp_t *)ph->hp_region.base;
    ph->page_map = (hpm_span_t **)ph->map_region.base;
    if (ph == &_hpm_ph) {
        _hpm_map.base = ph->base;
        _hpm_map.page_map = ph->page_map;
        _hpm_map.top_bytes = 0;
    }
    for (int s = 0; s < SET_COUNT; s++) memset(&ph->sets[s], 0, sizeof ph->sets[s]);
    ph->release_delay_ms = 1000;
    ph->cache_keep_hp = 2;
    return 0;
}

/* ---- backing ---- */

/* Give a hugepage memory (or at least access) according to the page mode. */
static int hp_back(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->backing != BACK_NONE) return 0;
    void *addr = (void *)hpm_hp_addr(ph, hp);
    if (ph->page_mode == PAGES_HUGETLB && ph->os->map_hugetlb(addr, HPM_HP_BYTES, HPM_HP_BYTES) == 0) {
        hp->backing = BACK_HUGETLB;
        _hpm_stats->hp_hugetlb++;
        return 0;
    }
    if (ph->page_mode == PAGES_HUGETLB) _hpm_stats->hp_fallback++;
    int e = ph->os->commit(addr, HPM_HP_BYTES);
    if (e) return e;
    hp->backing = BACK_THP;
    /* A heap starts small: its first HPM_SMALL_START_HP hugepages stay on
     * 4 KiB pages until one more is needed, so a program that allocates a
     * few MiB pays neither 2 MiB faults nor 2 MiB of RSS per hugepage it
     * touches a little (python3 -c pass: issue 11 item 6). Then they are
     * advised and collapsed, and every hugepage after them is huge from
     * the start. */
    if (ph->page_mode == PAGES_THP && !ph->huge_started) {
        if (hp->index < HPM_SMALL_START_HP) return 0;
        ph->huge_started = true;
        for (size_t i = 0; i < HPM_SMALL_START_HP && i < ph->top_hp; i++) {
            hpm_hp_t *first = hp_at(ph, i);
            if (first->backing != BACK_THP) continue;
            void *first_addr = (void *)hpm_hp_addr(ph, first);
            ph->os->thp_advise(first_addr, HPM_HP_BYTES, true);
            if (first->state == HP_ACTIVE) ph->os->collapse(first_addr, HPM_HP_BYTES);
        }
    }
    ph->os->thp_advise(addr, HPM_HP_BYTES, ph->page_mode != PAGES_OFF);
    return 0;
}

/* In 1g mode, back a whole 1 GiB chunk of 512 hugepages at once. */
static int chunk_back_1g(hpm_pageheap_t *ph, size_t first_idx) {
    void *addr = (void *)(ph->base + ((uintptr_t)first_idx << HPM_HP_SHIFT));
    int back = BACK_1G;
    if (ph->os->map_hugetlb(addr, HPM_GB_BYTES, HPM_GB_BYTES) != 0) {
        _hpm_stats->hp_fallback++;
        int e = ph->os->commit(addr, HPM_GB_BYTES);
        if (e) return e;
        ph->os->thp_advise(addr, HPM_GB_BYTES, true);
        back = BACK_THP;
    }
    for (size_t i = 0; i < HPM_PAGES_PER_HP; i++) hp_at(ph, first_idx + i)->backing = (uint8_t)back;
    if (back == BACK_1G) _hpm_stats->hp_hugetlb += HPM_PAGES_PER_HP;   /* counted in 2 MiB units */
    return 0;
}

/* Extend the used part of the arena by n_hp hugepages (metadata first). */
static int arena_grow(hpm_pageheap_t *ph, size_t n_hp) {
    size_t new_top = ph->top_hp + n_hp;
    if (new_top > ph->reserved_hp) return ENOMEM;
    size_t meta_hp = ph->page_mode == PAGES_1G ? (new_top + 511) / 512 * 512 : new_top;   /* whole 1 GiB chunks */
    if (_hpm_meta_region_ensure(&ph->hp_region, meta_hp * sizeof(hpm_hp_t)) ||
        _hpm_meta_region_ensure(&ph->map_region, new_top * HPM_PAGES_PER_HP * sizeof(hpm_span_t *)))
        return ENOMEM;
    if (ph->page_mode == PAGES_1G) {
        size_t chunks_needed = (new_top + HPM_PAGES_PER_HP - 1) / HPM_PAGES_PER_HP;
        for (size_t c = ph->committed_hp / HPM_PAGES_PER_HP; c < chunks_needed; c++) {
            int e = chunk_back_1g(ph, c * HPM_PAGES_PER_HP);
            if (e) return e;
            ph->committed_hp = (c + 1) * HPM_PAGES_PER_HP;
        }
    }
    for (size_t i = ph->top_hp; i < new_top; i++) {
        hpm_hp_t *hp = hp_at(ph, i);
        hp->index = (uint32_t)i;
        hp->set = SET_NONE;
        hp->state = HP_UNUSED;
        memset(hp->free_bits, 0xff, sizeof hp->free_bits);
        hp->longest_free_pages = HPM_PAGES_PER_HP;
        hp->longest_free_start = 0;
    }
    __atomic_store_n(&ph->top_hp, new_top, __ATOMIC_RELEASE);
    if (ph == &_hpm_ph) __atomic_store_n(&_hpm_map.top_bytes, (uintptr_t)new_top << HPM_HP_SHIFT, __ATOMIC_RELEASE);
    return 0;
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
        if (arena_grow(ph, 1)) return NULL;
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
    memset(s, 0, sizeof *s);
    return s;
}

static void span_delete(hpm_pageheap_t *ph, hpm_span_t *s) {
    s->kind = SPAN_NONE;
    s->next = ph->span_free;
    ph->span_free = s;
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
    if (s->kind == SPAN_SLAB) hp->slab_pages += (uint16_t)n;
    ph->used_pages_total += n;
    unsigned ls = hp->longest_free_start, ll = hp->longest_free_pages;
    if (first < ls + ll && ls < first + n) {   /* cut into the longest run: find the new one */
        hp->longest_free_pages = (uint16_t)_hpm_bits_longest_run(hp->free_bits, &ls);
        hp->longest_free_start = (uint16_t)ls;
    }
    _hpm_filler_insert(ph, hp);
    hpm_span_t **map = ph->page_map + ((size_t)hp->index << 9) + first;
    for (unsigned i = 0; i < n; i++) map[i] = s;
}

/* Give pages [first, first+n) of hp back; an emptied hugepage goes to the cache. */
static void hp_free_pages(hpm_pageheap_t *ph, hpm_hp_t *hp, unsigned first, unsigned n, bool slab, uint64_t *now_ns) {
    hpm_span_t **map = ph->page_map + ((size_t)hp->index << 9) + first;
    for (unsigned i = 0; i < n; i++) map[i] = NULL;
    _hpm_filler_remove(ph, hp);
    _hpm_bits_set_range(hp->free_bits, first, n, true);
    hp->used_pages -= (uint16_t)n;
    if (slab) hp->slab_pages -= (uint16_t)n;
    ph->used_pages_total -= n;
    if (hp->used_pages > 0) {
        unsigned start, merged = _hpm_bits_run_around(hp->free_bits, first, n, &start);
        if (merged > hp->longest_free_pages) {
            hp->longest_free_pages = (uint16_t)merged;
            hp->longest_free_start = (uint16_t)start;
        }
        _hpm_filler_insert(ph, hp);
        return;
    }
    hp->longest_free_pages = HPM_PAGES_PER_HP;
    hp->longest_free_start = 0;
    ph->active_count--;
    hp->state = HP_CACHED;
    if (!*now_ns) *now_ns = ph->os->now_ns();   /* the clock is read only when a hugepage empties */
    hp->empty_since_ns = *now_ns;
    hp->prev = NULL;
    hp->next = ph->cache_head;
    if (hp->next) hp->next->prev = hp; else ph->cache_tail = hp;
    ph->cache_head = hp;
    ph->cache_count++;
}

/* Place an n-page span in hp, first fit inside it. */
static hpm_span_t *span_place(hpm_pageheap_t *ph, hpm_hp_t *hp, size_t n_pages, int kind, int first) {
    if (first < 0) first = _hpm_bits_find_run(hp->free_bits, (unsigned)n_pages, 0);
    if (first < 0) return NULL;
    hpm_span_t *s = span_new(ph);
    if (!s) return NULL;
    s->kind = (uint8_t)kind;
    s->clean = 1;
    s->n_pages = (uint32_t)n_pages;
    s->start = hpm_hp_addr(ph, hp) + ((uintptr_t)first << HPM_PAGE_SHIFT);
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

static hpm_span_t *span_alloc_coloured(hpm_pageheap_t *ph, uint64_t mask) {
    unsigned count = (unsigned)_hpm_option(HPM_OPT_COLOR_COUNT);
    if (count == 0 || count > 64) count = 16;
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

hpm_span_t *_hpm_ph_alloc_span(hpm_pageheap_t *ph, size_t n_pages, int kind, uint64_t colour_mask) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    if (colour_mask && n_pages == 1) return span_alloc_coloured(ph, colour_mask);
    int own = kind == SPAN_SLAB ? SET_SLAB : SET_OTHER;
    int other = kind == SPAN_SLAB ? SET_OTHER : SET_SLAB;
    hpm_hp_t *hp = _hpm_filler_find(ph, own, n_pages);
    if (!hp) hp = _hpm_filler_find(ph, SET_HYBRID, n_pages);
    /* a tiny heap (one hugepage) mixes freely rather than back a second one */
    if (!hp && ph->active_count <= HPM_TINY_HEAP_HP) hp = _hpm_filler_find(ph, other, n_pages);
    if (!hp) hp = hp_get_empty(ph);
    if (!hp) hp = _hpm_filler_find(ph, other, n_pages);   /* out of memory: pollute */
    if (!hp) return NULL;
    hpm_span_t *s = span_place(ph, hp, n_pages, kind, -1);
    _hpm_ph_publish(ph);
    hpm_check_expensive(_hpm_check_pageheap, ph);
    return s;
}

/* n_hp consecutive non-active hugepages whose start is aligned to align_hp. */
static long find_empty_run(hpm_pageheap_t *ph, size_t n_hp, size_t align_hp) {
    size_t base_hp = ph->base >> HPM_HP_SHIFT;
    size_t run = 0;
    for (size_t i = 0; i < ph->top_hp; i++) {
        if (hp_at(ph, i)->state == HP_ACTIVE) { run = 0; continue; }
        if (run == 0 && (base_hp + i) % align_hp != 0) continue;
        if (++run == n_hp) return (long)(i + 1 - n_hp);
    }
    /* extend the arena: skip to an aligned index past the last active hugepage */
    size_t start = ph->top_hp;
    while (start > 0 && hp_at(ph, start - 1)->state != HP_ACTIVE) start--;
    while ((base_hp + start) % align_hp) start++;
    if (start + n_hp > ph->top_hp) {
        size_t old_top = ph->top_hp;
        if (arena_grow(ph, start + n_hp - ph->top_hp)) return -1;
        for (size_t i = old_top; i < ph->top_hp; i++) _hpm_ph_push_released(ph, hp_at(ph, i));
    }
    return (long)start;
}

hpm_span_t *_hpm_ph_alloc_large(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    size_t n_hp = (n_pages + HPM_PAGES_PER_HP - 1) / HPM_PAGES_PER_HP;
    size_t align_hp = align_bytes > HPM_HP_BYTES ? align_bytes >> HPM_HP_SHIFT : 1;
    if (n_hp > ph->reserved_hp) return NULL;
    hpm_hp_t *single = NULL;
    long first;
    if (n_hp == 1 && align_hp == 1) {
        if (!(single = hp_get_empty(ph))) return NULL;
        first = single->index;
    } else if ((first = find_empty_run(ph, n_hp, align_hp)) < 0) {
        return NULL;
    }
    for (size_t i = 0; !single && i < n_hp; i++) {
        hpm_hp_t *hp = hp_at(ph, (size_t)first + i);
        if (hp_back(ph, hp)) {   /* out of memory: put back what we took */
            for (size_t j = 0; j < i; j++) {
                hpm_hp_t *t = hp_at(ph, (size_t)first + j);
                ph->active_count--;
                t->state = HP_CACHED;
                _hpm_ph_push_released(ph, t);
                ph->os->release((void *)hpm_hp_addr(ph, t), HPM_HP_BYTES);
            }
            return NULL;
        }
        hp_take_empty(ph, hp);
    }
    hpm_span_t *s = span_new(ph);
    if (!s) return NULL;
    s->kind = SPAN_LARGE;
    s->clean = 1;
    s->n_pages = (uint32_t)n_pages;
    s->start = ph->base + ((uintptr_t)first << HPM_HP_SHIFT);
    size_t left = n_pages;
    for (size_t i = 0; i < n_hp; i++, left -= HPM_PAGES_PER_HP) {
        unsigned n = left > HPM_PAGES_PER_HP ? HPM_PAGES_PER_HP : (unsigned)left;
        hp_use_pages(ph, hp_at(ph, (size_t)first + i), 0, n, s);
        if (left <= HPM_PAGES_PER_HP) break;
    }
    if (ph == &_hpm_ph) _hpm_stats->large_allocs++;
    _hpm_ph_publish(ph);
    hpm_check_expensive(_hpm_check_pageheap, ph);
    return s;
}

hpm_span_t *_hpm_ph_alloc_aligned(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes) {
    size_t align_pages = align_bytes >> HPM_PAGE_SHIFT;
    size_t total = n_pages + align_pages - 1;
    if (total >= HPM_LARGE_MIN_PAGES) return _hpm_ph_alloc_large(ph, n_pages, HPM_HP_BYTES);
    hpm_span_t *s = _hpm_ph_alloc_span(ph, total, SPAN_MEDIUM, 0);
    if (!s) return NULL;
    uintptr_t aligned = (s->start + align_bytes - 1) & ~(uintptr_t)(align_bytes - 1);
    hpm_hp_t *hp = hp_at(ph, (s->start - ph->base) >> HPM_HP_SHIFT);
    unsigned first = (unsigned)((s->start >> HPM_PAGE_SHIFT) & 511);
    unsigned head = (unsigned)((aligned - s->start) >> HPM_PAGE_SHIFT);
    unsigned tail = (unsigned)(total - head - n_pages);
    uint64_t now = 0;
    if (head) hp_free_pages(ph, hp, first, head, false, &now);
    if (tail) hp_free_pages(ph, hp, first + head + (unsigned)n_pages, tail, false, &now);
    s->start = aligned;
    s->n_pages = (uint32_t)n_pages;
    hpm_check_expensive(_hpm_check_pageheap, ph);
    return s;
}

void _hpm_ph_free_span(hpm_pageheap_t *ph, hpm_span_t *s) {
    hpm_assert_internal(ph != &_hpm_ph || _hpm_lock_held(HPM_LOCK_PAGEHEAP));
    hpm_assert(s->kind != SPAN_NONE && s->n_pages > 0);
    uint64_t now = 0;
    size_t idx = (s->start - ph->base) >> HPM_HP_SHIFT;
    unsigned first = (unsigned)((s->start >> HPM_PAGE_SHIFT) & 511);
    size_t left = s->n_pages;
    bool slab = s->kind == SPAN_SLAB;
    while (left > 0) {
        unsigned n = left > HPM_PAGES_PER_HP - first ? HPM_PAGES_PER_HP - first : (unsigned)left;
        hp_free_pages(ph, hp_at(ph, idx), first, n, slab, &now);
        left -= n;
        idx++;
        first = 0;
    }
    span_delete(ph, s);
    if (ph->cache_count > ph->cache_keep_hp || ph->subrelease)
        _hpm_ph_release_tick(ph, now ? now : ph->os->now_ns());
    else
        _hpm_ph_publish(ph);
    hpm_check_expensive(_hpm_check_pageheap, ph);
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
    pthread_mutex_unlock(&ph->lock);
    return n;
}
