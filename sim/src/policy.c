/* policy.c: where an allocation comes from, under Linux 4.5's
 * anti-fragmentation rules or under Illuminator's.
 *
 * Linux (mm/page_alloc.c, v4.5): __rmqueue_smallest on the requested type;
 * else __rmqueue_fallback, which walks orders from the largest down and
 * takes the first block on a fallback type's list (U->{R,M}, R->{U,M},
 * M->{R,U}). can_steal_fallback() holds when the block found is of order
 * >= pageblock_order/2 or the request is unmovable/reclaimable; then
 * steal_suitable_fallback() moves the pageblock's free pages to the
 * requested type and relabels the block when at least half of it was free
 * (a block of order >= 9 is relabelled outright). Labels never describe
 * the contents: a block keeps one label when it becomes mixed.
 *
 * Illuminator (apanwariisc/Illuminator, mm/page_alloc.c): the requested
 * type, then MIXED blocks (__rmqueue); kernel requests then the other
 * kernel type, then a whole free pageblock, then the movable block with the
 * most free pages (__rmqueue_kernel_fallback, OPBS); movable requests then
 * the kernel block with the most free pages. Free pages move between lists
 * as in the patch (see illum_take), but labels follow the per-pageblock
 * counters: a block that holds both kernel and movable pages is MIXED, and
 * a MIXED block whose last kernel page is freed returns to MOVABLE (with its
 * free pages). With Prudence on, a kernel request whose own type is empty
 * first reclaims the RCU-deferred frames, then retries, before any
 * fallback (under either policy). */
#include "sim_internal.h"

static const uint8_t linux_fallbacks[3][2] = {
    [SIM_UNMOVABLE] = {SIM_RECLAIMABLE, SIM_MOVABLE},
    [SIM_RECLAIMABLE] = {SIM_UNMOVABLE, SIM_MOVABLE},
    [SIM_MOVABLE] = {SIM_RECLAIMABLE, SIM_UNMOVABLE},
};

#define LOOKUP_PER_LIST 16  /* Illuminator's bounded search for the best block */

static void relabel_range(sim_t *s, uint32_t pfn, unsigned order, unsigned label) {
    uint32_t first = pfn_block(pfn), n = order > SIM_PAGEBLOCK_ORDER ? 1u << (order - SIM_PAGEBLOCK_ORDER) : 1;
    for (uint32_t b = first; b < first + n; b++) block_set_label(s, b, label);
}

/* ---- Linux 4.5 ---------------------------------------------------------- */

static bool can_steal_fallback(unsigned found_order, unsigned start_type) {
    return found_order >= SIM_PAGEBLOCK_ORDER / 2 || mt_is_kernel(start_type);
}

static void steal_suitable_fallback(sim_t *s, uint32_t pfn, unsigned found_order, unsigned start_type) {
    if (found_order >= SIM_PAGEBLOCK_ORDER) {
        relabel_range(s, pfn, found_order, start_type);
        return;
    }
    uint32_t moved = buddy_move_block_free(s, pfn_block(pfn), start_type);
    if (moved >= SIM_PAGEBLOCK_PAGES / 2) block_set_label(s, pfn_block(pfn), start_type);
}

static uint32_t linux_fallback(sim_t *s, unsigned order, unsigned start_type) {
    for (int o = SIM_MAX_ORDER - 1; o >= (int)order; o--) {
        uint32_t pfn = NIL;
        for (int i = 0; i < 2 && pfn == NIL; i++) pfn = s->head[o][linux_fallbacks[start_type][i]];
        if (pfn == NIL) continue;
        if (can_steal_fallback((unsigned)o, start_type)) steal_suitable_fallback(s, pfn, (unsigned)o, start_type);
        list_del(s, pfn);
        buddy_expand(s, pfn, order, (unsigned)o, start_type);
        s->st.fallbacks++;
        return pfn;
    }
    return NIL;
}

/* ---- Illuminator -------------------------------------------------------- */

/* Takes free block pfn (of found_order, on another type's list) for a
 * request of `type`, as the patch's steal_suitable_fallback() does: a
 * block of order >= 9 is claimed outright; otherwise, when stealing is
 * allowed, the pageblock's free pages go to the requested type's lists if
 * at least half of it is free and to the MIXED lists if not. The label then
 * follows the counters: MIXED when the block will hold both kernel and
 * movable pages, else the requested type. Split remainders go to the
 * requested type's lists (expand()). */
static uint32_t illum_take(sim_t *s, uint32_t pfn, unsigned found_order, unsigned order, unsigned type) {
    uint32_t b = pfn_block(pfn);
    if (found_order >= SIM_PAGEBLOCK_ORDER) {
        relabel_range(s, pfn, found_order, type);
    } else {
        const pageblock_t *p = &s->pb[b];
        if (can_steal_fallback(found_order, type))
            buddy_move_block_free(s, b, p->free_pages >= SIM_PAGEBLOCK_PAGES / 2 ? type : SIM_MIXED);
        bool other_kind = mt_is_kernel(type) ? p->movable_pages != 0 : p->kernel_pages != 0;
        block_set_label(s, b, other_kind ? SIM_MIXED : type);
    }
    list_del(s, pfn);
    buddy_expand(s, pfn, order, found_order, type);
    s->st.fallbacks++;
    return pfn;
}

/* The free block, on one of `types`' lists, whose pageblock has the most
 * free pages; larger orders first, at most LOOKUP_PER_LIST per list. */
static uint32_t pick_most_free(const sim_t *s, unsigned order, const uint8_t *types, int ntypes, unsigned *found) {
    uint32_t best = NIL;
    int best_free = -1;
    for (int o = SIM_MAX_ORDER - 1; o >= (int)order; o--)
        for (int i = 0; i < ntypes; i++) {
            uint32_t h = s->head[o][types[i]], p = h;
            if (h == NIL) continue;
            int n = 0;
            do {
                int f = s->pb[pfn_block(p)].free_pages;
                if (f > best_free) { best_free = f; best = p; *found = (unsigned)o; }
                p = s->fr[p].next;
            } while (p != h && ++n < LOOKUP_PER_LIST);
        }
    return best;
}

static uint32_t illum_fallback(sim_t *s, unsigned order, unsigned type) {
    uint32_t pfn = buddy_take_smallest(s, order, SIM_MIXED);
    if (pfn != NIL) return pfn;   /* MIXED serves every type: not a fallback */
    unsigned found = 0;
    if (mt_is_kernel(type)) {
        unsigned other = type == SIM_UNMOVABLE ? SIM_RECLAIMABLE : SIM_UNMOVABLE;
        pfn = buddy_take_smallest(s, order, other);
        if (pfn != NIL) { s->st.fallbacks++; return pfn; }
        for (int o = SIM_MAX_ORDER - 1; o >= (int)order && o >= SIM_PAGEBLOCK_ORDER; o--)
            if (s->head[o][SIM_MOVABLE] != NIL) return illum_take(s, s->head[o][SIM_MOVABLE], (unsigned)o, order, type);
        static const uint8_t movable_only[1] = {SIM_MOVABLE};
        pfn = pick_most_free(s, order, movable_only, 1, &found);
    } else {
        static const uint8_t kernel_types[2] = {SIM_RECLAIMABLE, SIM_UNMOVABLE};
        pfn = pick_most_free(s, order, kernel_types, 2, &found);
    }
    return pfn == NIL ? NIL : illum_take(s, pfn, found, order, type);
}

/* ---- both ------------------------------------------------------------- */

uint32_t policy_rmqueue(sim_t *s, unsigned order, unsigned type) {
    uint32_t pfn = buddy_take_smallest(s, order, type);
    if (pfn != NIL) return pfn;
    if (s->cfg.prudence && mt_is_kernel(type) && policy_prudence_flush(s)) {
        pfn = buddy_take_smallest(s, order, type);
        if (pfn != NIL) return pfn;
    }
    return s->cfg.policy == SIM_ILLUMINATOR ? illum_fallback(s, order, type) : linux_fallback(s, order, type);
}

/* Illuminator: a MIXED block that holds no kernel page any more is MOVABLE. */
void policy_after_free(sim_t *s, uint32_t pfn, unsigned order, unsigned type) {
    if (s->cfg.policy != SIM_ILLUMINATOR || !mt_is_kernel(type)) return;
    uint32_t b = pfn_block(pfn);
    if (s->pb[b].label == SIM_MIXED && s->pb[b].kernel_pages == 0) {
        block_set_label(s, b, SIM_MOVABLE);
        buddy_move_block_free(s, b, SIM_MOVABLE);
    }
}
