/* release.c: when the pageheap gives memory back to the OS (docs/allocator.md, "Release").
 *
 * Empty hugepages wait in a cache (newest at the head). The release tick
 * frees, whole, those that have been empty longer than the demand window
 * (HPM_RELEASE_DELAY), keeping the newest HPM_HP_CACHE of them backed.
 * Partial hugepages are left alone unless subrelease is on (HPM_SUBRELEASE
 * or an explicit trim): then the free 4 KiB pages of the emptiest partial
 * hugepages are released first, until the free-but-backed pages are at
 * most 1/16 of the used ones, so that the fullest
 * hugepages stay whole. A subreleased hugepage loses its huge mapping; that
 * is the price in coverage. Invariant: runs with ph->lock held. */
#include <string.h>
#include "internal.h"

/* Give an empty hugepage's memory back to the OS whole, and forget what
 * its pages held: hugetlb pages go back to the pool (the hugepage becomes
 * unbacked), the others are dropped and stay mapped. The caller moves it
 * to the released list. Returns false, changing nothing, when the OS
 * refused (the hugepage stays backed and counted so) or for 1 GiB pages,
 * which stay. */
bool _hpm_ph_give_back_whole(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->backing == BACK_1G) return false;
    void *addr = (void *)hpm_hp_addr(ph, hp);
    int e = hp->backing == BACK_HUGETLB ? ph->os->unreserve_to_reserved(addr, HPM_HP_BYTES)
                                        : ph->os->release(addr, HPM_HP_BYTES);
    if (e) return false;
    _hpm_arena_release_slots(ph, (uintptr_t)addr);   /* its slabs' records, unused now */
    _hpm_ph_released_unripe(ph, hp);
    if (hp->backing == BACK_HUGETLB) {
        hp->backing = BACK_NONE;
        ph->hugetlb_hp--;
    }
    _hpm_ph_subrel_forget(ph, hp);
    memset(hp->dirty_bits, 0, sizeof hp->dirty_bits);
    return true;
}

void _hpm_ph_subrel_forget(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->subrel_pages) {
        ph->subrel_pages -= hp->subrel_pages;
        if (hp->state == HP_CACHED || hp->state == HP_RELEASED) ph->idle_subrel_pages -= hp->subrel_pages;
        hp->subrel_pages = 0;
    }
    memset(hp->subrel_bits, 0, sizeof hp->subrel_bits);
}

/* Release one cached (empty) hugepage whole. Returns false if it cannot be
 * released (1 GiB pages stay). */
static bool release_whole(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (!_hpm_ph_give_back_whole(ph, hp)) return false;
    /* unlink from the cache */
    if (hp->prev) hp->prev->next = hp->next; else ph->cache_head = hp->next;
    if (hp->next) hp->next->prev = hp->prev; else ph->cache_tail = hp->prev;
    hp->next = hp->prev = NULL;
    ph->cache_count--;
    _hpm_ph_push_released(ph, hp);
    ph->released_total++;
    return true;
}

/* Release the free, still-backed pages of one partial hugepage. */
static size_t subrelease_hp(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->backing != BACK_THP || ph->collapsing_hp == hp->index + 1) return 0;   /* a collapse would fault them back */
    uint64_t want[8];
    for (int w = 0; w < 8; w++) want[w] = hp->free_bits[w] & ~hp->subrel_bits[w];
    size_t pages = 0;
    for (int start = _hpm_bits_find_run(want, 1, 0); start >= 0; ) {
        unsigned n = 1;
        while (start + n < 512 && ((want[(start + n) >> 6] >> ((start + n) & 63)) & 1)) n++;
        if (ph->os->release((void *)(hpm_hp_addr(ph, hp) + ((uintptr_t)start << HPM_PAGE_SHIFT)),
                            (size_t)n << HPM_PAGE_SHIFT) == 0) {
            _hpm_bits_set_range(hp->subrel_bits, (unsigned)start, n, true);
            _hpm_bits_set_range(hp->dirty_bits, (unsigned)start, n, false);
            pages += n;
        }
        if (start + n >= 512) break;
        start = _hpm_bits_find_run(want, 1, start + n);
    }
    hp->subrel_pages += (uint16_t)pages;
    ph->subrel_pages += pages;
    return pages;
}

/* Free pages of active hugepages that are still backed. The subreleased
 * pages of cached hugepages are not in the active count: counted here
 * (session 49's review) they made the result wrap to about 2^64 once a
 * hugepage that had given pages back emptied, and every tick then gave
 * back every free page of every partial hugepage, past the target. */
static size_t free_backed_pages(const hpm_pageheap_t *ph) {
    return ph->active_count * HPM_PAGES_PER_HP - ph->used_pages_total - (ph->subrel_pages - ph->idle_subrel_pages);
}

/* Subrelease, emptiest hugepages first, until free-backed <= target. */
static size_t subrelease_until(hpm_pageheap_t *ph, size_t target_pages) {
    size_t released = 0;
    /* Counting pass by used pages: walk the arena once per occupancy band
     * of 32 pages, lowest band first. Bounded by 16 passes over top_hp. */
    for (unsigned band = 0; band < 16 && free_backed_pages(ph) > target_pages; band++) {
        for (size_t i = 0; i < ph->top_hp && free_backed_pages(ph) > target_pages; i++) {
            hpm_hp_t *hp = &ph->hps[i];
            if (hp->state != HP_ACTIVE || hp->used_pages >= 512) continue;
            if (hp->used_pages / 32 != band) continue;
            released += subrelease_hp(ph, hp);
        }
    }
    return released;
}

void _hpm_ph_configure(hpm_pageheap_t *ph, size_t release_delay_ms, size_t cache_keep_hp, bool subrelease) {
    pthread_mutex_lock(&ph->lock);
    __atomic_store_n(&ph->release_delay_ms, release_delay_ms, __ATOMIC_RELAXED);   /* the background thread reads it */
    ph->cache_keep_hp = cache_keep_hp;
    ph->subrelease = subrelease;
    hpm_ph_unlock(ph);
}

void _hpm_ph_release_tick(hpm_pageheap_t *ph, uint64_t now_ns) {
    uint64_t delay_ns = (uint64_t)ph->release_delay_ms * 1000000ull;
    hpm_ph_changed(ph);
    if (now_ns - ph->last_release_check_ns < delay_ns / 8 && ph->cache_count <= ph->cache_keep_hp * 8) return;
    ph->last_release_check_ns = now_ns;
    while (ph->cache_count > ph->cache_keep_hp && ph->cache_tail &&
           now_ns - ph->cache_tail->empty_since_ns >= delay_ns) {
        if (!release_whole(ph, ph->cache_tail)) break;
    }
    if (ph->subrelease) subrelease_until(ph, ph->used_pages_total / 16);
    hpm_ph_changed(ph);
}

/* The cache is for the next span that fits in one of its hugepages. A
 * large span needs consecutive hugepages, and when the cached ones are
 * scattered it takes released or new ones instead: its pages fault in
 * while the cached ones stay backed, and RSS grows by both (a Lua run:
 * 2 new hugepages while 2 waited, +4 MiB of max RSS; Python's JSON run: 4
 * while 5 waited). Trading keeps the backed total level; a later span
 * that would have reused a traded hugepage faults it in again, as it
 * would after the window. */
void _hpm_ph_release_for_growth(hpm_pageheap_t *ph, size_t n_hp) {
    while (n_hp > 0 && ph->cache_tail && release_whole(ph, ph->cache_tail)) n_hp--;
}

size_t _hpm_ph_trim(hpm_pageheap_t *ph, bool subrelease) {
    size_t pages = 0;
    hpm_hp_t *hp = ph->cache_tail;
    while (hp) {
        hpm_hp_t *prev = hp->prev;
        size_t backed = HPM_PAGES_PER_HP - hp->subrel_pages;   /* pages given back before are not counted twice */
        if (release_whole(ph, hp)) pages += backed;
        hp = prev;
    }
    if (subrelease) pages += subrelease_until(ph, ph->used_pages_total / 16);
    hpm_ph_changed(ph);
    return pages << HPM_PAGE_SHIFT;
}
