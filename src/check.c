/* check.c: invariant checkers for the debug tier (debug.h) and the tests.
 *
 * Each checker recounts a structure from its primary data (bitmaps, the
 * page map, the lists) and compares it with what the allocator keeps
 * incrementally; it returns true when they agree, and otherwise writes the
 * first disagreement into why (HPM_WHY_BYTES) and returns false. None of
 * them changes anything or allocates. Who may call which:
 *   _hpm_check_hugepage, _hpm_check_pageheap: with the pageheap's lock held
 *     (or on a private pageheap, as tests/unit/test_policy.c does);
 *   _hpm_check_span: a slab by its owner thread only (free and used are
 *     owner-only), a medium or large span by the thread that holds it;
 *   _hpm_check_heap: the heap's own thread, inside its gates (gate.h: the
 *     idle drain may be taking its span cache meanwhile, the asleep drain
 *     its slabs).
 * The invariants are the ones the file comments of hugepage.c, filler.c,
 * release.c, slab.c, heap.c and spancache.c state. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "internal.h"

void _hpm_assert_fail(const char *file, int line, const char *func, const char *what) {
    char buf[HPM_WHY_BYTES + 160];
    int n = snprintf(buf, sizeof buf, "hpmalloc: assertion failed: %s (%s:%d, %s)\n", what, file, line, func);
    _hpm_os->write_err(buf, n > 0 && (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
    abort();
}

static bool bad(char *why, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(char *why, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, HPM_WHY_BYTES, fmt, ap);
    va_end(ap);
    return false;
}

static unsigned bits_count(const uint64_t bits[8]) { return _hpm_bits_count_range(bits, 0, HPM_PAGES_PER_HP); }

static bool bits_subset(const uint64_t a[8], const uint64_t b[8]) {   /* a is a subset of b */
    for (int w = 0; w < 8; w++) if (a[w] & ~b[w]) return false;
    return true;
}

static int expected_set(const hpm_hp_t *hp) {
    bool slab = hp->slab_pages > 0, other = hp->used_pages > hp->slab_pages;
    return slab && other ? SET_HYBRID : slab ? SET_SLAB : SET_OTHER;
}

/* The page map of hp's pages agrees with its free bits and slab count. */
static bool check_hp_map(const hpm_pageheap_t *ph, const hpm_hp_t *hp, char *why) {
    unsigned slab = 0;
    for (unsigned i = 0; i < HPM_PAGES_PER_HP; i++) {
        const hpm_span_t *s = hpm_span_of((const void *)(hpm_hp_addr(ph, hp) + ((uintptr_t)i << HPM_PAGE_SHIFT)));
        bool is_free = (hp->free_bits[i >> 6] >> (i & 63)) & 1;
        if (is_free) {
            if (s) return bad(why, "hugepage %u page %u is free but mapped to a span", hp->index, i);
            continue;
        }
        if (!s) return bad(why, "hugepage %u page %u is used but maps to no span", hp->index, i);
        uintptr_t addr = hpm_hp_addr(ph, hp) + ((uintptr_t)i << HPM_PAGE_SHIFT);
        if (s->kind == SPAN_NONE || s->kind > SPAN_LARGE)
            return bad(why, "hugepage %u page %u maps to a span of kind %u", hp->index, i, s->kind);
        if (addr < s->start || addr >= s->start + ((uintptr_t)s->n_pages << HPM_PAGE_SHIFT))
            return bad(why, "hugepage %u page %u maps to a span that does not cover it", hp->index, i);
        if (s->kind == SPAN_SLAB) slab++;
    }
    if (slab != hp->slab_pages)
        return bad(why, "hugepage %u counts %u slab pages, its page map %u", hp->index, hp->slab_pages, slab);
    return true;
}

bool _hpm_check_hugepage(const hpm_pageheap_t *ph, const hpm_hp_t *hp, char *why) {
    size_t idx = (size_t)(hp - ph->hps);
    if (idx >= ph->top_hp || hp->index != idx)
        return bad(why, "hugepage record %zu has index %u (top %zu)", idx, hp->index, ph->top_hp);
    unsigned free_pages = bits_count(hp->free_bits);
    if (hp->used_pages + free_pages != HPM_PAGES_PER_HP)
        return bad(why, "hugepage %zu: %u used + %u free bits != 512", idx, hp->used_pages, free_pages);
    if (hp->slab_pages > hp->used_pages)
        return bad(why, "hugepage %zu: %u slab pages > %u used", idx, hp->slab_pages, hp->used_pages);
    if (!bits_subset(hp->subrel_bits, hp->free_bits))
        return bad(why, "hugepage %zu: a page is subreleased but not free", idx);
    if (bits_count(hp->subrel_bits) != hp->subrel_pages)
        return bad(why, "hugepage %zu: subrel_pages %u, bits %u", idx, hp->subrel_pages, bits_count(hp->subrel_bits));
    unsigned longest = _hpm_bits_longest_run(hp->free_bits, NULL);
    if (hp->longest_free_pages != longest)
        return bad(why, "hugepage %zu: longest free run recorded %u, recount %u", idx, hp->longest_free_pages, longest);
    if (longest && (hp->longest_free_start + longest > HPM_PAGES_PER_HP ||
                    _hpm_bits_count_range(hp->free_bits, hp->longest_free_start, longest) != longest))
        return bad(why, "hugepage %zu: the longest run at %u is not free", idx, hp->longest_free_start);
    switch (hp->state) {
    case HP_ACTIVE: {
        uint64_t used[8];
        for (int w = 0; w < 8; w++) used[w] = ~hp->free_bits[w];
        if (hp->used_pages == 0) return bad(why, "hugepage %zu is active and empty", idx);
        if (hp->backing == BACK_NONE) return bad(why, "hugepage %zu is active and not backed", idx);
        if (!bits_subset(used, hp->dirty_bits)) return bad(why, "hugepage %zu: a used page is not marked dirty", idx);
        if (hp->set != expected_set(hp))
            return bad(why, "hugepage %zu is in set %u, its pages say %d", idx, hp->set, expected_set(hp));
        bool binned = longest > 0 && longest < HPM_BINS;
        if (hp->bin_linked != binned) return bad(why, "hugepage %zu: bin_linked %u with longest run %u", idx, hp->bin_linked, longest);
        return check_hp_map(ph, hp, why);
    }
    case HP_CACHED:
    case HP_RELEASED:
        if (hp->used_pages != 0) return bad(why, "hugepage %zu is empty (state %u) with %u used pages", idx, hp->state, hp->used_pages);
        if (hp->set != SET_NONE || hp->bin_linked) return bad(why, "hugepage %zu is empty and in filler set %u", idx, hp->set);
        if (hp->state == HP_CACHED && hp->backing == BACK_NONE) return bad(why, "hugepage %zu is cached and not backed", idx);
        return check_hp_map(ph, hp, why);
    default:
        return bad(why, "hugepage %zu below top has state %u", idx, hp->state);
    }
}

/* A doubly linked hugepage list: links agree, every member has state, count. */
static bool check_hp_list(const hpm_hp_t *head, const hpm_hp_t *tail, int state, size_t count, const char *name, char *why) {
    size_t n = 0;
    const hpm_hp_t *prev = NULL;
    for (const hpm_hp_t *hp = head; hp; prev = hp, hp = hp->next) {
        if (++n > count) return bad(why, "%s list is longer than its count %zu", name, count);
        if (hp->prev != prev) return bad(why, "%s list: hugepage %u has a wrong prev link", name, hp->index);
        if (hp->state != state) return bad(why, "%s list holds hugepage %u in state %u", name, hp->index, hp->state);
        if (state == HP_CACHED && prev && prev->empty_since_ns < hp->empty_since_ns)
            return bad(why, "cache list is not newest first at hugepage %u", hp->index);
    }
    if (n != count) return bad(why, "%s list has %zu hugepages, count %zu", name, n, count);
    if (tail && prev != tail) return bad(why, "%s list tail is not its last hugepage", name);
    return true;
}

/* The filler's bins: each member is in that set and bin, the non-empty
 * bitmap agrees, and every binned hugepage is found. */
static bool check_filler(const hpm_pageheap_t *ph, size_t binned_expected, char *why) {
    size_t binned = 0;
    for (int set = 0; set < SET_COUNT; set++) {
        const hpm_filler_set_t *fs = &ph->sets[set];
        for (unsigned bin = 0; bin < HPM_BINS; bin++) {
            bool bit = (fs->nonempty[bin >> 6] >> (bin & 63)) & 1;
            if (bit != (fs->bins[bin] != NULL)) return bad(why, "set %d bin %u: non-empty bit %d disagrees", set, bin, bit);
            const hpm_hp_t *prev = NULL;
            for (const hpm_hp_t *hp = fs->bins[bin]; hp; prev = hp, hp = hp->next) {
                if (++binned > binned_expected) return bad(why, "filler bins hold more hugepages than are binned");
                if (hp->prev != prev) return bad(why, "set %d bin %u: hugepage %u has a wrong prev link", set, bin, hp->index);
                if (hp->set != set || hp->longest_free_pages != bin || !hp->bin_linked || hp->state != HP_ACTIVE)
                    return bad(why, "set %d bin %u holds hugepage %u (set %u, longest %u, state %u)", set, bin, hp->index,
                               hp->set, hp->longest_free_pages, hp->state);
            }
        }
    }
    if (binned != binned_expected) return bad(why, "filler bins hold %zu hugepages, %zu are binned", binned, binned_expected);
    return true;
}

/* hp on its home heap's list (hugepage.c, hp_set_home): linked both ways
 * to its neighbours, which share its home, or at the list's head; a
 * hugepage with no home is on no list, and only an active one has one. */
static bool check_home_links(const hpm_hp_t *hp, char *why) {
    if (!hp->home) {
        if (hp->home_next || hp->home_prev) return bad(why, "hugepage %u has no home but is on a home list", hp->index);
        return true;
    }
    if (hp->state != HP_ACTIVE) return bad(why, "hugepage %u has a home but is not active (state %u)", hp->index, hp->state);
    if (hp->home_prev ? hp->home_prev->home_next != hp || hp->home_prev->home != hp->home : hp->home->home_list != hp)
        return bad(why, "hugepage %u is not where its home list says", hp->index);
    if (hp->home_next && (hp->home_next->home_prev != hp || hp->home_next->home != hp->home))
        return bad(why, "hugepage %u: its next on the home list does not point back", hp->index);
    return true;
}

bool _hpm_check_pageheap(const hpm_pageheap_t *ph, char *why) {
    if (ph->top_hp > ph->reserved_hp) return bad(why, "top %zu beyond the %zu reserved hugepages", ph->top_hp, ph->reserved_hp);
    size_t active = 0, cached = 0, released = 0, used = 0, subrel = 0, idle_subrel = 0, hybrid = 0, binned = 0;
    size_t hugetlb = 0;
    size_t in_set[SET_COUNT] = {0};
    for (size_t i = 0; i < ph->top_hp; i++) {
        const hpm_hp_t *hp = &ph->hps[i];
        if (!_hpm_check_hugepage(ph, hp, why)) return false;
        active += hp->state == HP_ACTIVE;
        cached += hp->state == HP_CACHED;
        released += hp->state == HP_RELEASED;
        used += hp->used_pages;
        subrel += hp->subrel_pages;
        if (hp->state == HP_CACHED || hp->state == HP_RELEASED) idle_subrel += hp->subrel_pages;
        binned += hp->bin_linked;
        hugetlb += hp->backing == BACK_HUGETLB;
        if (hp->state == HP_ACTIVE) in_set[hp->set]++;
        if (!check_home_links(hp, why)) return false;
    }
    hybrid = in_set[SET_HYBRID];
    if (active != ph->active_count) return bad(why, "%zu active hugepages, count %zu", active, ph->active_count);
    if (used != ph->used_pages_total) return bad(why, "%zu used pages, total %zu", used, ph->used_pages_total);
    if (subrel != ph->subrel_pages) return bad(why, "%zu subreleased pages, total %zu", subrel, ph->subrel_pages);
    if (idle_subrel != ph->idle_subrel_pages)
        return bad(why, "%zu subreleased pages in empty hugepages, count %zu", idle_subrel, ph->idle_subrel_pages);
    if (ph->page_mode != PAGES_1G && hugetlb != ph->hugetlb_hp)   /* 1 GiB chunks are counted past the top too */
        return bad(why, "%zu hugepages backed by hugetlb pages, count %zu", hugetlb, ph->hugetlb_hp);
    if (hybrid != ph->hybrid_count) return bad(why, "%zu hybrid hugepages, count %zu", hybrid, ph->hybrid_count);
    for (int set = 0; set < SET_COUNT; set++)
        if (in_set[set] != ph->sets[set].count) return bad(why, "set %d holds %zu, count %zu", set, in_set[set], ph->sets[set].count);
    if (!check_hp_list(ph->cache_head, ph->cache_tail, HP_CACHED, ph->cache_count, "cache", why)) return false;
    if (!check_hp_list(ph->released_head, NULL, HP_RELEASED, ph->released_count, "released", why)) return false;
    if (cached != ph->cache_count) return bad(why, "%zu cached hugepages, count %zu", cached, ph->cache_count);
    if (released != ph->released_count) return bad(why, "%zu released hugepages, count %zu", released, ph->released_count);
    if (!check_filler(ph, binned, why)) return false;
    for (const hpm_span_t *s = ph->span_free; s; s = s->next)
        if (s->kind != SPAN_NONE || s->spaced) return bad(why, "a recycled span record has kind %u, spaced %u", s->kind, s->spaced);
    for (const hpm_span_t *s = ph->slab_rec_free; s; s = s->next)
        if (s->kind != SPAN_NONE || !s->spaced) return bad(why, "a recycled slab record has kind %u, spaced %u", s->kind, s->spaced);
    return true;
}

/* Level 3 runs this after every span operation. A whole check reads every
 * hugepage's 512 page-map entries, so on a large arena it checks every k-th
 * call instead, k = top_hp / 16 rounded up to a power of two: about the cost
 * of checking 16 hugepages per operation, whatever the arena's size. */
bool _hpm_check_pageheap_amortized(const hpm_pageheap_t *ph, char *why) {
    static unsigned long calls;
    unsigned long n = __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
    size_t every = 1;
    while (every * 16 < ph->top_hp) every <<= 1;
    return (n & (every - 1)) != 0 || _hpm_check_pageheap(ph, why);
}

/* Every page of the span maps to it, inside one arena. */
static bool check_span_map(const hpm_span_t *s, char *why) {
    hpm_pageheap_t *ph = &_hpm_ph;
    uintptr_t end = s->start + ((uintptr_t)s->n_pages << HPM_PAGE_SHIFT);
    const hpm_arena_t *a = _hpm_arena_of_addr(ph, s->start);
    if (!a || end > a->base + ((uintptr_t)a->n_hp << HPM_HP_SHIFT))
        return bad(why, "span %p of %u pages lies outside the arenas", (void *)s->start, s->n_pages);
    for (size_t i = 0; i < s->n_pages; i++)
        if (hpm_span_of((const void *)(s->start + (i << HPM_PAGE_SHIFT))) != s)
            return bad(why, "span %p: its page %zu does not map to it", (void *)s->start, i);
    return true;
}

bool _hpm_check_span(const hpm_span_t *s, char *why) {
    if (s->kind == SPAN_NONE || s->kind > SPAN_LARGE) return bad(why, "span %p has kind %u", (void *)s->start, s->kind);
    if (s->n_pages == 0 || (s->start & (HPM_PAGE_BYTES - 1))) return bad(why, "span %p of %u pages", (void *)s->start, s->n_pages);
    if (s == &_hpm_empty_span) return bad(why, "the empty sentinel span is in use");
    if (!check_span_map(s, why)) return false;
    /* free's guess (hpm_slab_guess): a granule slot with an owner is the
     * record of the live slab that starts there; inside s, only s's own */
    uintptr_t end = s->start + ((uintptr_t)s->n_pages << HPM_PAGE_SHIFT), granule = (uintptr_t)1 << HPM_GRANULE_SHIFT;
    for (uintptr_t a = (s->start + granule - 1) & ~(granule - 1); a < end; a += granule) {
        hpm_span_t *slot = hpm_slab_guess((const void *)a);
        if (slot && slot != s && atomic_load_explicit(&slot->owner, memory_order_relaxed) != NULL)
            return bad(why, "span %p: the slot of its granule at %#lx has an owner", (void *)s->start, (unsigned long)a);
    }
    if (s->fixed && hpm_slab_guess((const void *)s->start) != s && hpm_slab_guess((const void *)s->start) != NULL)
        return bad(why, "slab %p: its record is not its granule's slot", (void *)s->start);
    if (s->kind != SPAN_SLAB) {   /* free's owner compare takes any span with an owner for a slab */
        if (atomic_load_explicit(&((hpm_span_t *)s)->owner, memory_order_relaxed) != NULL)
            return bad(why, "span %p of kind %u has an owner", (void *)s->start, s->kind);
        return true;
    }
    const hpm_class_t *k = &_hpm_classes[s->class_idx];
    if (s->class_idx >= HPM_CLASSES || s->block_bytes != k->block_bytes || s->recip != k->recip)
        return bad(why, "slab %p: class %u does not match its block size %u", (void *)s->start, s->class_idx, s->block_bytes);
    if (s->div_magic != k->div_magic)
        return bad(why, "slab %p: block-start constant does not match class %u", (void *)s->start, s->class_idx);
    uint32_t fresh = hpm_slab_fresh(s);
    if (s->fresh_lim != (s->held_pages_mask ? 0 : (uint64_t)fresh * k->div_step))   /* 0 while pages are held */
        return bad(why, "slab %p: free's limit %llu is not %u formatted blocks' (step %llu, held pages %#x)",
                   (void *)s->start, (unsigned long long)s->fresh_lim, fresh, (unsigned long long)k->div_step,
                   s->held_pages_mask);
    if (s->capacity != ((size_t)s->n_pages << HPM_PAGE_SHIFT) / s->block_bytes)
        return bad(why, "slab %p: capacity %u for %u pages of %u bytes", (void *)s->start, s->capacity, s->n_pages, s->block_bytes);
    uint32_t n_free = 0;
    for (void **b = s->free; b; b = b[0]) {
        uintptr_t off = (uintptr_t)b - s->start;
        if (++n_free > s->capacity) return bad(why, "slab %p: free list longer than its capacity (a cycle?)", (void *)s->start);
        if (off >= (uintptr_t)s->capacity * s->block_bytes || off % s->block_bytes)
            return bad(why, "slab %p: free list holds %p, not one of its blocks", (void *)s->start, (void *)b);
        if ((s->held_pages_mask >> (off >> HPM_PAGE_SHIFT)) & 1)
            return bad(why, "slab %p: free block %p lies on a given-back page", (void *)s->start, (void *)b);
        if ((uint64_t)b[1] != hpm_cookie(b)) return bad(why, "slab %p: free block %p lost its cookie", (void *)s->start, (void *)b);
    }
    if (fresh > s->capacity) return bad(why, "slab %p: %u blocks formatted of %u", (void *)s->start, fresh, s->capacity);
    if ((const void *)s->push_to != (const void *)&s->free) {   /* in its owner's hand: the count is set again when it leaves (heap.c) */
        if (s->list != LIST_CURRENT || n_free) return bad(why, "slab %p: in a hand, on list %u, with %u blocks on its own list", (void *)s->start, s->list, n_free);
    } else if ((uint64_t)hpm_slab_used(s) + n_free + s->held_blocks != fresh)   /* blocks past fresh were never used */
        return bad(why, "slab %p (%u pages of %u-byte blocks, given-back pages 0x%x): %u used + %u free + %u held != formatted %u",
                   (void *)s->start, s->n_pages, s->block_bytes, s->held_pages_mask, hpm_slab_used(s), n_free, s->held_blocks, fresh);
    if (!s->held_pages_mask && s->held_blocks) return bad(why, "slab %p: %u held blocks and no held page", (void *)s->start, s->held_blocks);
    return true;
}

/* The hand of a current slab: free blocks of that slab, or of other
 * slabs of its class (kept for stalled owners), which their slabs take
 * as used. */
static bool check_hand(void **hand, const hpm_span_t *cur, char *why) {
    uint32_t n = 0;
    for (void **b = hand; b; b = b[0]) {
        const hpm_span_t *s = hpm_span_of(b);
        if (++n > (1u << 24)) return bad(why, "slab %p: the hand does not end (a cycle?)", (void *)cur->start);
        if (!s || s->kind != SPAN_SLAB || s->class_idx != cur->class_idx)
            return bad(why, "slab %p: the hand holds %p, not a block of a slab of class %u", (void *)cur->start, (void *)b, cur->class_idx);
        uintptr_t off = (uintptr_t)b - s->start;
        if (off >= (uintptr_t)hpm_slab_fresh(s) * s->block_bytes || off % s->block_bytes)
            return bad(why, "slab %p: the hand holds %p, not one of the formatted blocks of slab %p", (void *)cur->start, (void *)b, (void *)s->start);
        if ((s->held_pages_mask >> (off >> HPM_PAGE_SHIFT)) & 1)
            return bad(why, "slab %p: the hand holds %p, on a given-back page", (void *)cur->start, (void *)b);
        if ((uint64_t)b[1] != hpm_cookie(b)) return bad(why, "slab %p: block %p in the hand lost its cookie", (void *)cur->start, (void *)b);
    }
    return true;
}

/* One of a heap's slab lists: links, list tag, class, owner; each slab sound. */
static bool check_slab_list(const hpm_heap_t *h, const hpm_span_t *head, unsigned cls, int list, char *why) {
    const hpm_span_t *prev = NULL;
    size_t n = 0;
    for (const hpm_span_t *s = head; s; prev = s, s = s->next) {
        if (++n > ((size_t)1 << 24)) return bad(why, "class %u list %d does not end (a cycle?)", cls, list);
        if (s->prev != prev) return bad(why, "class %u list %d: slab %p has a wrong prev link", cls, list, (void *)s->start);
        if (s->list != list || s->class_idx != cls || s->kind != SPAN_SLAB)
            return bad(why, "class %u list %d holds slab %p (list %u, class %u, kind %u)", cls, list, (void *)s->start, s->list,
                       s->class_idx, s->kind);
        if (atomic_load_explicit(&s->owner, memory_order_relaxed) != h)
            return bad(why, "class %u list %d: slab %p belongs to another heap", cls, list, (void *)s->start);
        if (!_hpm_check_span(s, why)) return false;
    }
    return true;
}

bool _hpm_check_heap(const hpm_heap_t *h, char *why) {
    if (_hpm_empty_span.free || _hpm_empty_span.credit) return bad(why, "the empty sentinel span was written");
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        const hpm_span_t *cur = h->current[c];
        if (!cur) return bad(why, "class %u has no current slab (not even the sentinel)", c);
        if (cur != &_hpm_empty_span) {
            if (cur->list != LIST_CURRENT || cur->class_idx != c || atomic_load_explicit(&cur->owner, memory_order_relaxed) != h)
                return bad(why, "class %u: current slab %p has list %u class %u", c, (void *)cur->start, cur->list, cur->class_idx);
            if (!_hpm_check_span(cur, why)) return false;
            if (cur->push_to != &h->hand[c] && h->hand[c]) return bad(why, "class %u: a hand, and the current slab frees to its own list", c);
            if (!check_hand(h->hand[c], cur, why)) return false;
        } else if (h->hand[c]) {
            return bad(why, "class %u has a hand and no current slab", c);
        }
        if (!check_slab_list(h, h->avail[c], c, LIST_AVAIL, why)) return false;
        const hpm_span_t *last = h->avail[c];
        while (last && last->next) last = last->next;
        if (h->avail_tail[c] != last) return bad(why, "class %u: the avail tail is not the list's last slab", c);
        if (!check_slab_list(h, h->full[c], c, LIST_FULL, why)) return false;
    }
    size_t bytes = 0;
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES; c++) {
        size_t n = hpm_medium_pages(c);
        unsigned count = h->span_cache_n[c];
        if (count > HPM_SPANCACHE_BATCHES * hpm_medium_batch(c)) return bad(why, "span cache of %zu pages holds %u spans, over HPM_SPANCACHE_BATCHES batches", n, count);
        for (unsigned i = 0; i < count; i++) {
            const hpm_span_t *s = h->span_stack[_hpm_medium_slot0[c] + i];
            for (unsigned j = 0; j < i; j++)
                if (h->span_stack[_hpm_medium_slot0[c] + j] == s) return bad(why, "span cache of %zu pages holds span %p twice", n, (void *)s->start);
            if (s->kind != SPAN_MEDIUM || s->n_pages != n || !s->cached)
                return bad(why, "span cache of %zu pages holds a span of %u pages, kind %u, cached %u", n, s->n_pages, s->kind, s->cached);
            if (!_hpm_check_span(s, why)) return false;
            bytes += n << HPM_PAGE_SHIFT;
        }
    }
    if (bytes != h->span_cache_bytes) return bad(why, "span cache holds %zu bytes, count %zu", bytes, h->span_cache_bytes);
    return true;
}

bool _hpm_check_all(char *why) {
    if (atomic_load(&_hpm_ready) != 2) return true;
    pthread_mutex_lock(&_hpm_ph.lock);
    bool ok = _hpm_check_pageheap(&_hpm_ph, why);
    hpm_ph_unlock(&_hpm_ph);
    hpm_heap_t *h = hpm_my_heap();
    if (ok && h) {   /* inside the heap's gates: the drains may be taking its span cache or slabs */
        _hpm_heap_slab_gate_enter(h);
        uint32_t in = _hpm_heap_gate_enter(h);
        ok = _hpm_check_heap(h, why);
        _hpm_heap_gate_leave(h, in);
        _hpm_heap_slab_gate_leave(h);
    }
    return ok;
}
