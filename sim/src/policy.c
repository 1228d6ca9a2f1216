/* policy.c: where an allocation comes from, and what a free does to the
 * labels, under Linux 4.5's anti-fragmentation rules and under the two
 * Illuminator variants. docs/sim.md cites the source of every rule.
 *
 * Linux (mm/page_alloc.c, v4.5): __rmqueue_smallest on the requested type;
 * else __rmqueue_fallback: orders from the largest down, the first block on
 * a fallback type's list (U->{R,M}, R->{U,M}, M->{R,U}); can_steal_fallback
 * (found order >= 4, or a kernel request) lets steal_suitable_fallback move
 * the pageblock's free pages to the requested type and relabel it when at
 * least half of it was free (order >= 9: relabelled outright).
 *
 * Illuminator, the patch (apanwariisc/Illuminator, mm/page_alloc.c):
 * own type; a whole free pageblock of the other class (the "steal full
 * before mixed" order, issue 10; with cfg.mixed_before_full this step is
 * skipped, as in the stored commits); the MIXED lists (__rmqueue); kernel
 * requests then the other kernel type and the MOVABLE block whose pageblock
 * has the most free pages among the first few list entries per order
 * (__rmqueue_fallback_OPBS); movable requests the first block at the
 * largest order of the R then U lists (__rmqueue_user_fallback). A steal
 * moves the block's free pages to the requested type's lists when at least
 * half of it is free, else to the MIXED lists (move_freepages), and always
 * labels the block MIXED (steal_suitable_fallback has no `else`). A MIXED
 * block becomes MOVABLE again only when it is whole and free
 * (__free_one_page).
 *
 * Illuminator, the paper: MIXED before any free block for kernel requests
 * ("existing hybrid pageblocks are utilized to prevent pollution"), and
 * labels that follow the contents ("manages hybrid pageblocks explicitly"):
 * a block holding kernel and movable pages is MIXED, and a MIXED block whose
 * last kernel page goes is MOVABLE again. Otherwise as the patch.
 *
 * With Prudence on, a kernel request whose own type is empty first
 * reclaims the RCU-deferred frames and retries, before any fallback. */
#include "sim_internal.h"

static const uint8_t linux_fallbacks[3][2] = {
    [SIM_UNMOVABLE] = {SIM_RECLAIMABLE, SIM_MOVABLE},
    [SIM_RECLAIMABLE] = {SIM_UNMOVABLE, SIM_MOVABLE},
    [SIM_MOVABLE] = {SIM_RECLAIMABLE, SIM_UNMOVABLE},
};

static void relabel_range(sim_t *s, uint32_t pfn, unsigned order, unsigned label) {
    uint32_t first = pfn_block(pfn), n = order > SIM_PAGEBLOCK_ORDER ? 1u << (order - SIM_PAGEBLOCK_ORDER) : 1;
    for (uint32_t b = first; b < first + n; b++) block_set_label(s, b, label);
}

/* Takes free block pfn (found on list `from`) for a request of `type` and
 * order, splitting the rest onto `type`'s lists (expand), and counts where
 * the allocation was placed: the other mobility class is a fallback. */
static uint32_t take_block(sim_t *s, uint32_t pfn, unsigned found_order, unsigned order, unsigned type, unsigned from) {
    if (from == SIM_MIXED) s->st.mixed_allocs++;
    else if (mt_is_kernel(from) != mt_is_kernel(type)) s->st.fallbacks++;
    else if (from != type) s->st.kernel_cross++;
    list_del(s, pfn);
    buddy_expand(s, pfn, order, found_order, type);
    return pfn;
}

static uint32_t take_smallest(sim_t *s, unsigned order, unsigned list_type, unsigned type) {
    for (unsigned o = order; o < SIM_MAX_ORDER; o++)
        if (s->head[o][list_type] != NIL) return take_block(s, s->head[o][list_type], o, order, type, list_type);
    return NIL;
}

/* ---- Linux 4.5 ---------------------------------------------------------- */

static bool can_steal_fallback(unsigned found_order, unsigned start_type) {
    return found_order >= SIM_PAGEBLOCK_ORDER / 2 || mt_is_kernel(start_type);
}

static void linux_steal(sim_t *s, uint32_t pfn, unsigned found_order, unsigned start_type) {
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
        unsigned from = s->fr[pfn].type;
        if (can_steal_fallback((unsigned)o, start_type)) linux_steal(s, pfn, (unsigned)o, start_type);
        return take_block(s, pfn, (unsigned)o, order, start_type, from);
    }
    return NIL;
}

/* ---- Illuminator: steps shared by both variants ------------------------ */

/* The patch's steal_suitable_fallback + move_freepages: order >= 9 is
 * claimed outright; otherwise the pageblock's free pages go to the
 * requested type's lists if at least half of it is free, else to the MIXED
 * lists, and the block is labelled MIXED. The paper variant then sets the
 * label by contents (illum_label_by_contents). */
static void illum_steal(sim_t *s, uint32_t pfn, unsigned found_order, unsigned type) {
    if (found_order >= SIM_PAGEBLOCK_ORDER) {
        relabel_range(s, pfn, found_order, type);
        return;
    }
    uint32_t b = pfn_block(pfn);
    buddy_move_block_free(s, b, s->pb[b].free_pages >= SIM_PAGEBLOCK_PAGES / 2 ? type : SIM_MIXED);
    block_set_label(s, b, SIM_MIXED);
}

/* Paper: labels follow the contents. After a request of `type` lands in
 * the block of pfn, it is MIXED when it also holds the other kind, else
 * labelled `type`. */
static void illum_label_by_contents(sim_t *s, uint32_t pfn, unsigned type) {
    const pageblock_t *p = &s->pb[pfn_block(pfn)];
    bool other_kind = mt_is_kernel(type) ? p->movable_pages != 0 : p->kernel_pages != 0;
    block_set_label(s, pfn_block(pfn), other_kind ? SIM_MIXED : type);
}

static uint32_t illum_steal_take(sim_t *s, uint32_t pfn, unsigned found, unsigned order, unsigned type, bool steal) {
    unsigned from = s->fr[pfn].type;
    if (steal) illum_steal(s, pfn, found, type);
    if (s->cfg.policy == SIM_ILLUMINATOR_PAPER && found < SIM_PAGEBLOCK_ORDER) illum_label_by_contents(s, pfn, type);
    return take_block(s, pfn, found, order, type, from);
}

/* A whole free pageblock (a free block of order >= 9) on the other
 * class's lists, largest first, claimed for `type`. */
static uint32_t illum_take_full(sim_t *s, unsigned order, unsigned type) {
    static const uint8_t kernel_from[1] = {SIM_MOVABLE}, movable_from[2] = {SIM_RECLAIMABLE, SIM_UNMOVABLE};
    const uint8_t *from = mt_is_kernel(type) ? kernel_from : movable_from;
    int nfrom = mt_is_kernel(type) ? 1 : 2;
    for (int o = SIM_MAX_ORDER - 1; o >= (int)order && o >= SIM_PAGEBLOCK_ORDER; o--)
        for (int i = 0; i < nfrom; i++)
            if (s->head[o][from[i]] != NIL) return illum_steal_take(s, s->head[o][from[i]], (unsigned)o, order, type, true);
    return NIL;
}

/* get_fallback_level + arr_fallback_count: how many MOVABLE list entries
 * the OPBS search looks at per order, by the request's order. */
static unsigned opbs_lookup(unsigned order) {
    if (order >= SIM_PAGEBLOCK_ORDER) return 2;
    if (order > 6) return 8;
    if (order > 3) return 32;
    return 64;
}

/* __rmqueue_fallback_OPBS: from the largest order holding a MOVABLE free
 * block down to the request's, the entry whose pageblock has the most free
 * pages among the first lookup+1 of each list (ties: the larger order). */
static uint32_t opbs_pick(const sim_t *s, unsigned order, unsigned *found) {
    uint32_t best = NIL;
    int best_free = 0;
    unsigned lookup = opbs_lookup(order);
    for (int o = SIM_MAX_ORDER - 1; o >= (int)order; o--) {
        uint32_t h = s->head[o][SIM_MOVABLE], p = h;
        if (h == NIL) continue;
        unsigned n = 0;
        do {
            int f = s->pb[pfn_block(p)].free_pages;
            if (f > best_free) { best_free = f; best = p; *found = (unsigned)o; }
            p = s->fr[p].next;
        } while (p != h && n++ < lookup);
    }
    return best;
}

/* The whole free pageblock before the MIXED lists (the patch's default). */
static bool full_first(const sim_t *s) { return s->cfg.policy == SIM_ILLUMINATOR && !s->cfg.mixed_before_full; }

static uint32_t illum_kernel_fallback(sim_t *s, unsigned order, unsigned type) {
    unsigned other = type == SIM_UNMOVABLE ? SIM_RECLAIMABLE : SIM_UNMOVABLE;
    uint32_t pfn = take_smallest(s, order, other, type);   /* __rmqueue_kernel_fallback */
    if (pfn != NIL) {
        if (s->cfg.policy == SIM_ILLUMINATOR_PAPER) illum_label_by_contents(s, pfn, type);
        return pfn;
    }
    /* OPBS takes a whole free pageblock when there is one (it has the most
     * free pages, and the order-9/10 lists are searched first) */
    unsigned found = 0;
    pfn = opbs_pick(s, order, &found);
    return pfn == NIL ? NIL : illum_steal_take(s, pfn, found, order, type, true);
}

/* __rmqueue_user_fallback: the first block at the largest order of the R,
 * then U lists; stealing only for a block of order >= 4. */
static uint32_t illum_movable_fallback(sim_t *s, unsigned order) {
    for (int o = SIM_MAX_ORDER - 1; o >= (int)order; o--) {
        uint32_t pfn = s->head[o][SIM_RECLAIMABLE];
        if (pfn == NIL) pfn = s->head[o][SIM_UNMOVABLE];
        if (pfn == NIL) continue;
        return illum_steal_take(s, pfn, (unsigned)o, order, SIM_MOVABLE, can_steal_fallback((unsigned)o, SIM_MOVABLE));
    }
    return NIL;
}

static uint32_t illum_rmqueue(sim_t *s, unsigned order, unsigned type) {
    uint32_t pfn;
    if (full_first(s) && (pfn = illum_take_full(s, order, type)) != NIL) return pfn;
    if ((pfn = take_smallest(s, order, SIM_MIXED, type)) != NIL) {
        if (s->cfg.policy == SIM_ILLUMINATOR_PAPER) illum_label_by_contents(s, pfn, type);
        return pfn;
    }
    return mt_is_kernel(type) ? illum_kernel_fallback(s, order, type) : illum_movable_fallback(s, order);
}

/* ---- both ------------------------------------------------------------- */

uint32_t policy_rmqueue(sim_t *s, unsigned order, unsigned type) {
    uint32_t pfn = buddy_take_smallest(s, order, type);
    if (pfn != NIL) return pfn;
    if (s->cfg.prudence && mt_is_kernel(type) && policy_prudence_flush(s)) {
        pfn = buddy_take_smallest(s, order, type);
        if (pfn != NIL) return pfn;
    }
    return s->cfg.policy == SIM_LINUX ? linux_fallback(s, order, type) : illum_rmqueue(s, order, type);
}

void policy_free(sim_t *s, uint32_t pfn, unsigned order, unsigned type) {
    unsigned merged;
    uint32_t head = buddy_free(s, pfn, order, &merged), b = pfn_block(pfn);
    if (s->cfg.policy == SIM_LINUX) return;
    /* __free_one_page: a free block of order >= 9 in a MIXED block goes to
     * the MOVABLE list and its pageblocks are MOVABLE again (both variants) */
    if (merged >= SIM_PAGEBLOCK_ORDER && s->pb[b].label == SIM_MIXED) {
        list_del(s, head);
        list_add(s, head, merged, SIM_MOVABLE, false);
        relabel_range(s, head, merged, SIM_MOVABLE);
        return;
    }
    /* paper: a MIXED block without kernel pages is no longer hybrid */
    if (s->cfg.policy == SIM_ILLUMINATOR_PAPER && mt_is_kernel(type) && s->pb[b].label == SIM_MIXED &&
        s->pb[b].kernel_pages == 0) {
        block_set_label(s, b, SIM_MOVABLE);
        buddy_move_block_free(s, b, SIM_MOVABLE);
    }
}
