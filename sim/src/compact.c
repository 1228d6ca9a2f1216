/* compact.c: memory compaction as in Linux 4.5's mm/compaction.c, with
 * Illuminator's change to which blocks it scans.
 *
 * A migrate scanner walks pageblocks up from low frames and isolates up to
 * 32 movable order-0 pages at a time from the first suitable block; a free
 * scanner walks pageblocks down from high frames and isolates free pages
 * (splitting buddy blocks) to copy them into. They stop when they meet, or
 * (for a huge-page request) as soon as a free block of the order exists.
 * Pages scanned, migrated, failed (no target left) and wasted (moved out of
 * a block that still holds kernel pages, so it cannot become a huge page:
 * the paper's LIU migration) are counted.
 *
 * Which blocks are scanned: under Linux and the Illuminator patch, async
 * compaction (direct compaction for a THP fault, kswapd) migrates from
 * MOVABLE-labelled blocks and sync compaction from all
 * (migrate_from_async_suitable); free targets are MOVABLE blocks, and under
 * both Illuminator variants MIXED blocks too (migrate_to_async_suitable).
 * The paper variant's migrate scanner skips every block that holds kernel
 * pages in both modes ("skip hybrid pageblocks during compaction"). Skip hints (a block that yielded nothing is skipped until
 * the scanners have met and kswapd has found free memory above the high
 * watermark again), cached scanner positions, and compaction_suitable()
 * (free >= low watermark + 2^(order+1), fragmentation index > 500) follow
 * Linux.
 *
 * Invariant: when compact_zone() returns, no frame is left isolated. */
#include "sim_internal.h"

#define COMPACT_CLUSTER_MAX 32
#define EXTFRAG_THRESHOLD 500

bool compact_free_block_ready(const sim_t *s, unsigned order) {
    for (unsigned o = order; o < SIM_MAX_ORDER; o++)
        if (s->nr_free_order[o]) return true;
    return false;
}

/* Linux's fragmentation_index(): towards 0 the failure is due to lack of
 * memory, towards 1000 to fragmentation. */
static int fragmentation_index(const sim_t *s, unsigned order) {
    uint64_t total = 0, suitable = 0;
    for (unsigned o = 0; o < SIM_MAX_ORDER; o++) {
        total += s->nr_free_order[o];
        if (o >= order) suitable += s->nr_free_order[o] << (o - order);
    }
    if (!total) return 0;
    if (suitable) return -1000;
    uint64_t requested = 1u << order;
    return (int)(1000 - (1000 + s->st.free_pages * 1000 / requested) / total);
}

typedef struct {
    bool sync, ignore_skip;
    uint32_t migrate_pfn, free_pfn;
    uint32_t n_mig, n_free;
} cc_t;

static bool migrate_source_ok(const sim_t *s, uint32_t b, bool sync) {
    const pageblock_t *p = &s->pb[b];
    if (s->cfg.policy == SIM_ILLUMINATOR_PAPER && p->kernel_pages) return false;
    return sync || p->label == SIM_MOVABLE;
}

static bool free_target_ok(const sim_t *s, uint32_t b) {
    uint32_t first = b << SIM_PAGEBLOCK_ORDER;
    uint8_t st = s->fr[first].state;
    if ((st & FR_FREE) && FR_ORDER(st) >= SIM_PAGEBLOCK_ORDER) return false;
    unsigned label = s->pb[b].label;
    return label == SIM_MOVABLE || (s->cfg.policy != SIM_LINUX && label == SIM_MIXED);
}

static void clear_skip_hints(sim_t *s) {
    for (uint32_t b = 0; b < s->nr_blocks; b++) s->pb[b].skip = 0;
}

static inline bool scanners_met(const cc_t *cc) { return pfn_block(cc->free_pfn) <= pfn_block(cc->migrate_pfn); }

/* Scans the first suitable block from cc->migrate_pfn and isolates its
 * movable order-0 pages (up to 32). Returns the number isolated. */
static uint32_t isolate_migratepages(sim_t *s, cc_t *cc) {
    uint32_t low = cc->migrate_pfn;
    for (uint32_t b = pfn_block(low); ((b + 1) << SIM_PAGEBLOCK_ORDER) <= cc->free_pfn; b++, low = b << SIM_PAGEBLOCK_ORDER) {
        if ((!cc->ignore_skip && s->pb[b].skip) || !migrate_source_ok(s, b, cc->sync)) continue;
        uint32_t end = (b + 1) << SIM_PAGEBLOCK_ORDER, isolated = 0, pfn = low;
        while (pfn < end && cc->n_mig < COMPACT_CLUSTER_MAX) {
            uint8_t st = s->fr[pfn].state;
            s->st.compact_mig_scanned++;
            if (st & FR_ALLOC) {
                if (FR_ORDER(st) == 0 && s->fr[pfn].type == SIM_MOVABLE && s->fr[pfn].owner != NIL) {
                    s->cc_mig[cc->n_mig++] = s->fr[pfn].owner;
                    isolated++;
                }
                pfn += 1u << FR_ORDER(st);
            } else if (st & FR_FREE) {
                pfn += 1u << FR_ORDER(st);
            } else {
                pfn++;
            }
        }
        if (pfn > end) pfn = end;
        if (pfn == end && !isolated && !cc->ignore_skip) s->pb[b].skip = 1;
        cc->migrate_pfn = pfn;
        return isolated;
    }
    cc->migrate_pfn = low;
    return 0;
}

/* Takes the free block at pfn out of the buddy lists as isolated order-0
 * frames (accounted as movable until used or released). */
static uint32_t isolate_free_block(sim_t *s, cc_t *cc, uint32_t pfn) {
    unsigned order = FR_ORDER(s->fr[pfn].state);
    uint32_t n = 1u << order;
    list_del(s, pfn);
    block_account(s, pfn, order, SIM_MOVABLE, +1);
    s->pb[pfn_block(pfn)].alloc_heads += (uint16_t)n;
    for (uint32_t i = 0; i < n; i++) {
        s->fr[pfn + i].state = FR_ALLOC;   /* order 0, no owner: isolated */
        s->fr[pfn + i].type = SIM_MOVABLE;
        s->fr[pfn + i].owner = NIL;
        s->cc_free[cc->n_free++] = pfn + i;
    }
    return n;
}

/* The free scanner: isolates at least `need` free frames, walking blocks
 * down from cc->free_pfn to the block above the migrate scanner. */
static void isolate_freepages(sim_t *s, cc_t *cc, uint32_t need) {
    uint32_t low_block = pfn_block(cc->migrate_pfn) + 1, start = cc->free_pfn;
    int64_t b = (int64_t)pfn_block(start);
    for (; b >= (int64_t)low_block; b--, start = (uint32_t)b << SIM_PAGEBLOCK_ORDER) {
        if ((!cc->ignore_skip && s->pb[b].skip) || !free_target_ok(s, (uint32_t)b)) continue;
        uint32_t end = ((uint32_t)b + 1) << SIM_PAGEBLOCK_ORDER, pfn = start, isolated = 0;
        if (s->pb[b].free_pages == 0 && start == ((uint32_t)b << SIM_PAGEBLOCK_ORDER)) {
            /* Nothing to isolate: count the positions the walk below would
             * visit (every head; all 512 frames of an order-10 tail half)
             * without walking them. */
            s->st.compact_free_scanned += s->pb[b].alloc_heads ? s->pb[b].alloc_heads : SIM_PAGEBLOCK_PAGES;
            pfn = end;
        }
        while (pfn < end && cc->n_free < need) {
            uint8_t st = s->fr[pfn].state;
            s->st.compact_free_scanned++;
            if (st & FR_FREE) { uint32_t n = isolate_free_block(s, cc, pfn); isolated += n; pfn += n; }
            else if (st & FR_ALLOC) pfn += 1u << FR_ORDER(st);
            else pfn++;
        }
        if (pfn > end) pfn = end;
        if (pfn == end && !isolated && !cc->ignore_skip) s->pb[b].skip = 1;
        if (cc->n_free >= need) {
            /* where to resume: here, or the block below when this one is done */
            cc->free_pfn = pfn < end ? pfn : (b > 0 ? (uint32_t)(b - 1) << SIM_PAGEBLOCK_ORDER : 0);
            return;
        }
    }
    cc->free_pfn = b < 0 ? 0 : (uint32_t)b << SIM_PAGEBLOCK_ORDER;
}

/* Moves allocation h (movable, order 0) into isolated frame dst. */
static void migrate_one(sim_t *s, uint32_t h, uint32_t dst) {
    uint32_t src = s->hd[h].pfn;
    s->fr[dst].owner = h;
    s->hd[h].pfn = dst;
    if (s->pb[pfn_block(src)].kernel_pages) s->st.compact_wasted++;
    block_account(s, src, 0, SIM_MOVABLE, -1);
    s->pb[pfn_block(src)].alloc_heads--;
    s->fr[src].state = 0;
    policy_free(s, src, 0, SIM_MOVABLE);
    s->st.compact_migrated++;
}

static void release_isolated(sim_t *s, cc_t *cc) {
    uint32_t highest = 0;
    while (cc->n_free) {
        uint32_t pfn = s->cc_free[--cc->n_free];
        if (pfn > highest) highest = pfn;
        block_account(s, pfn, 0, SIM_MOVABLE, -1);
        s->pb[pfn_block(pfn)].alloc_heads--;
        s->fr[pfn].state = 0;
        policy_free(s, pfn, 0, SIM_MOVABLE);
    }
    if (highest > cc->free_pfn) cc->free_pfn = highest & ~(SIM_PAGEBLOCK_PAGES - 1);
}

/* Returns false when migration ran out of target frames. */
static bool migrate_isolated(sim_t *s, cc_t *cc) {
    for (uint32_t i = 0; i < cc->n_mig; i++) {
        if (!cc->n_free) isolate_freepages(s, cc, cc->n_mig - i);
        if (!cc->n_free) {
            s->st.compact_failed += cc->n_mig - i;
            cc->n_mig = 0;
            return false;
        }
        migrate_one(s, s->cc_mig[i], s->cc_free[--cc->n_free]);
    }
    cc->n_mig = 0;
    return true;
}

static int compaction_suitable(sim_t *s, int order) {
    if (order < 0) return COMPACT_COMPLETE;
    if (compact_free_block_ready(s, (unsigned)order)) return COMPACT_SUCCESS;
    if (s->st.free_pages < s->wmark[1] + (2ull << order)) return COMPACT_SKIPPED;
    int fi = fragmentation_index(s, (unsigned)order);
    if (fi >= 0 && fi <= EXTFRAG_THRESHOLD) return COMPACT_SKIPPED;
    return COMPACT_COMPLETE;
}

static uint64_t free_huge_blocks(const sim_t *s) {
    uint64_t n = 0;
    for (unsigned o = SIM_HUGE_ORDER; o < SIM_MAX_ORDER; o++) n += s->nr_free_order[o] << (o - SIM_HUGE_ORDER);
    return n;
}

static int compact_zone_run(sim_t *s, int order, bool sync);

/* order < 0: the whole zone (sync, ignoring skip hints). Counts the free
 * huge blocks compaction made: one per successful order-9 run, or the
 * increase in free huge blocks for a whole-zone run. */
int compact_zone(sim_t *s, int order, bool sync) {
    uint64_t before = free_huge_blocks(s);
    int r = compact_zone_run(s, order, sync);
    if (order < 0) {
        uint64_t after = free_huge_blocks(s);
        if (after > before) s->st.compact_produced_hp += after - before;
    } else if (r == COMPACT_SUCCESS) {
        s->st.compact_produced_hp++;
    }
    return r;
}

static int compact_zone_run(sim_t *s, int order, bool sync) {
    int r = compaction_suitable(s, order);
    if (r == COMPACT_SKIPPED) { s->st.compact_skipped++; return r; }
    if (r == COMPACT_SUCCESS) return COMPACT_COMPLETE;   /* nothing to do: not produced here */
    s->st.compact_runs++;
    uint32_t last_block_pfn = (s->nr_blocks - 1) << SIM_PAGEBLOCK_ORDER;
    cc_t cc = {.sync = sync, .ignore_skip = order < 0};
    if (order < 0) {
        clear_skip_hints(s);
        cc.migrate_pfn = 0;
        cc.free_pfn = last_block_pfn;
    } else {
        if (s->blockskip_flush && s->st.free_pages >= s->wmark[2]) {
            clear_skip_hints(s);   /* what kswapd does when it goes to sleep */
            s->blockskip_flush = false;
        }
        cc.migrate_pfn = s->cached_migrate_pfn[sync];
        cc.free_pfn = s->cached_free_pfn;
    }
    r = COMPACT_COMPLETE;
    for (;;) {
        if (scanners_met(&cc)) {
            s->cached_migrate_pfn[0] = s->cached_migrate_pfn[1] = 0;
            s->cached_free_pfn = last_block_pfn;
            s->blockskip_flush = true;
            release_isolated(s, &cc);
            return r;
        }
        if (order >= 0 && compact_free_block_ready(s, (unsigned)order)) { r = COMPACT_SUCCESS; break; }
        if (!isolate_migratepages(s, &cc)) continue;
        if (!migrate_isolated(s, &cc)) break;
    }
    release_isolated(s, &cc);
    if (order >= 0) {
        s->cached_migrate_pfn[sync] = cc.migrate_pfn;
        s->cached_free_pfn = cc.free_pfn;
    }
    if (r == COMPACT_SUCCESS) s->st.compact_success++;
    return r;
}

double sim_cost_per_hp(const sim_stats_t *st) {
    if (!st->compact_produced_hp) return -1;
    return (double)(st->compact_mig_scanned + st->compact_free_scanned + st->compact_failed + st->compact_wasted) /
           (double)st->compact_produced_hp;
}
