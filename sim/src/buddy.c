/* buddy.c: the buddy allocator's mechanism: frames, per-order per-type
 * circular free lists threaded through the frames themselves (indexed by
 * pfn, so every list operation is O(1)), splitting, coalescing, moving a
 * pageblock's free pages to another list, and the per-pageblock counters.
 * It decides nothing about policy: which list to take from is policy.c's.
 *
 * Invariant kept by every function here: the counters (nr_free per order
 * and type, per-pageblock free/kernel/movable pages, hybrid and kernel
 * block totals) always equal what a recount of the frames gives;
 * buddy_check() performs that recount. */
#include <stdlib.h>
#include <string.h>
#include "sim_internal.h"

int buddy_init(sim_t *s) {
    uint32_t n = s->nr_frames;
    s->fr = calloc(n, sizeof(frame_t));
    s->pb = calloc(s->nr_blocks, sizeof(pageblock_t));
    if (!s->fr || !s->pb) return -1;
    for (unsigned o = 0; o < SIM_MAX_ORDER; o++)
        for (unsigned t = 0; t < SIM_NR_MT; t++) s->head[o][t] = NIL;
    /* Linux marks every pageblock MOVABLE at boot and frees memory in pfn
     * order, each block going to the list head. */
    for (uint32_t b = 0; b < s->nr_blocks; b++) {
        s->pb[b].label = SIM_MOVABLE;
        s->pb[b].free_pages = SIM_PAGEBLOCK_PAGES;
    }
    s->st.label_blocks[SIM_MOVABLE] = s->nr_blocks;
    const uint32_t max_pages = 1u << (SIM_MAX_ORDER - 1);
    for (uint32_t pfn = 0; pfn < n; pfn += max_pages) list_add(s, pfn, SIM_MAX_ORDER - 1, SIM_MOVABLE, false);
    s->st.free_pages = n;
    s->st.total_pages = n;
    s->st.nr_blocks = s->nr_blocks;
    return 0;
}

void buddy_fini(sim_t *s) {
    free(s->fr);
    free(s->pb);
}

void list_add(sim_t *s, uint32_t pfn, unsigned order, unsigned type, bool tail) {
    s->fr[pfn].state = (uint8_t)(FR_FREE | order);
    s->fr[pfn].type = (uint8_t)type;
    uint32_t h = s->head[order][type];
    if (h == NIL) {
        s->fr[pfn].next = s->fr[pfn].prev = pfn;
        s->head[order][type] = pfn;
    } else {
        uint32_t last = s->fr[h].prev;
        s->fr[pfn].next = h; s->fr[pfn].prev = last;
        s->fr[last].next = pfn; s->fr[h].prev = pfn;
        if (!tail) s->head[order][type] = pfn;
    }
    s->nr_free[order][type]++;
    s->nr_free_order[order]++;
}

void list_del(sim_t *s, uint32_t pfn) {
    unsigned order = FR_ORDER(s->fr[pfn].state), type = s->fr[pfn].type;
    uint32_t nx = s->fr[pfn].next, pv = s->fr[pfn].prev;
    if (nx == pfn) {
        s->head[order][type] = NIL;
    } else {
        s->fr[pv].next = nx; s->fr[nx].prev = pv;
        if (s->head[order][type] == pfn) s->head[order][type] = nx;
    }
    s->fr[pfn].state = 0;
    s->nr_free[order][type]--;
    s->nr_free_order[order]--;
}

/* sign +1: 2^order frames at pfn leave the free pool as `type`; -1: back. */
void block_account(sim_t *s, uint32_t pfn, unsigned order, unsigned type, int sign) {
    uint32_t left = 1u << order;
    bool kernel = mt_is_kernel(type);
    for (uint32_t b = pfn_block(pfn); left; b++) {
        uint32_t n = left < SIM_PAGEBLOCK_PAGES ? left : SIM_PAGEBLOCK_PAGES;
        pageblock_t *p = &s->pb[b];
        bool was_hybrid = p->kernel_pages && p->movable_pages, was_kernel = p->kernel_pages != 0;
        bool was_mixed = pb_owner_mixed(p);
        uint16_t d = (uint16_t)n, recl = type == SIM_RECLAIMABLE ? d : 0;
        if (sign > 0) {
            p->free_pages -= d;
            if (kernel) { p->kernel_pages += d; p->reclaimable_pages += recl; } else p->movable_pages += d;
        } else {
            p->free_pages += d;
            if (kernel) { p->kernel_pages -= d; p->reclaimable_pages -= recl; } else p->movable_pages -= d;
        }
        bool is_hybrid = p->kernel_pages && p->movable_pages, is_kernel = p->kernel_pages != 0;
        s->st.hybrid_blocks += (int)is_hybrid - (int)was_hybrid;
        s->st.kernel_blocks += (int)is_kernel - (int)was_kernel;
        s->st.owner_mixed_blocks += (int)pb_owner_mixed(p) - (int)was_mixed;
        left -= n;
    }
    uint64_t pages = 1u << order;
    if (sign > 0) s->st.free_pages -= pages; else s->st.free_pages += pages;
    if (kernel) s->st.kernel_pages = sign > 0 ? s->st.kernel_pages + pages : s->st.kernel_pages - pages;
    if (type == SIM_RECLAIMABLE)
        s->st.reclaimable_pages = sign > 0 ? s->st.reclaimable_pages + pages : s->st.reclaimable_pages - pages;
}

/* Linux's expand(): the upper halves of a split go to `type`'s lists. */
void buddy_expand(sim_t *s, uint32_t pfn, unsigned low, unsigned high, unsigned type) {
    while (high > low) {
        high--;
        list_add(s, pfn + (1u << high), high, type, false);
    }
}

/* Linux's __rmqueue_smallest(): the smallest free block of `type` that fits. */
uint32_t buddy_take_smallest(sim_t *s, unsigned order, unsigned type) {
    for (unsigned o = order; o < SIM_MAX_ORDER; o++) {
        uint32_t pfn = s->head[o][type];
        if (pfn == NIL) continue;
        list_del(s, pfn);
        buddy_expand(s, pfn, order, o, type);
        return pfn;
    }
    return NIL;
}

static inline bool is_free_of_order(const sim_t *s, uint32_t pfn, unsigned order) {
    return pfn < s->nr_frames && s->fr[pfn].state == (FR_FREE | order);
}

/* Linux's __free_one_page(): coalesce with free buddies, then put the block
 * on the list of the pageblock's label (at the tail when the next-larger
 * buddy is free, so that it is less likely to be split soon). The caller
 * has already un-accounted the frames. */
uint32_t buddy_free(sim_t *s, uint32_t pfn, unsigned order, unsigned *order_out) {
    unsigned type = s->pb[pfn_block(pfn)].label;
    while (order < SIM_MAX_ORDER - 1) {
        uint32_t buddy = pfn ^ (1u << order);
        if (!is_free_of_order(s, buddy, order)) break;
        list_del(s, buddy);
        pfn &= buddy;
        order++;
    }
    bool tail = false;
    if (order < SIM_MAX_ORDER - 2) {
        uint32_t higher = pfn & ~((2u << order) - 1);
        uint32_t higher_buddy = higher ^ (2u << order);
        tail = is_free_of_order(s, higher_buddy, order + 1);
    }
    list_add(s, pfn, order, type, tail);
    *order_out = order;
    return pfn;
}

/* Linux's move_freepages_block(): every free block whose head lies in the
 * pageblock goes to `type`'s lists. Returns the number of free pages seen. */
uint32_t buddy_move_block_free(sim_t *s, uint32_t block, unsigned type) {
    uint32_t pfn = block << SIM_PAGEBLOCK_ORDER, end = pfn + SIM_PAGEBLOCK_PAGES, moved = 0;
    while (pfn < end) {
        uint8_t st = s->fr[pfn].state;
        if (st & FR_FREE) {
            unsigned order = FR_ORDER(st);
            if (s->fr[pfn].type != type) {
                list_del(s, pfn);
                list_add(s, pfn, order, type, false);
            }
            moved += 1u << order;
            pfn += 1u << order;
        } else if (st & FR_ALLOC) {
            pfn += 1u << FR_ORDER(st);
        } else {
            pfn++;
        }
    }
    return moved;
}

void block_set_label(sim_t *s, uint32_t block, unsigned label) {
    pageblock_t *p = &s->pb[block];
    if (p->label == label) return;
    bool was_mixed = pb_owner_mixed(p);
    s->st.label_blocks[p->label]--;
    s->st.label_blocks[label]++;
    p->label = (uint8_t)label;
    s->st.block_relabels++;
    s->st.owner_mixed_blocks += (int)pb_owner_mixed(p) - (int)was_mixed;
}
