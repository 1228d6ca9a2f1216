/* sim_internal.h: the simulator's state and the functions its files share.
 *
 * Glossary: a frame is one 4 KiB page (pfn = its number); a block is a
 * buddy block of 2^order frames, named by its first frame (its head); a
 * pageblock is 512 aligned frames with a migratetype label; kernel pages
 * are UNMOVABLE or RECLAIMABLE allocations.
 *
 * Invariants (checked by sim_check): every frame belongs to exactly one
 * free block, one allocated block or one isolated frame; free blocks are
 * aligned, on the free list fr_type[head] of their order, and never have a
 * free buddy of the same order; the per-order/per-type counts and the
 * per-pageblock free/kernel/movable counts match a recount; the hybrid and
 * kernel block totals match the pageblock counters. Layer order:
 * buddy.c < policy.c < compact.c < sim.c. */
#ifndef HPMSIM_INTERNAL_H
#define HPMSIM_INTERNAL_H
#include <stdbool.h>
#include "hpmsim.h"

#define NIL UINT32_MAX
#define FR_FREE 0x10u   /* head of a free block; low 4 bits: order */
#define FR_ALLOC 0x20u  /* head of an allocated block; low 4 bits: order */
#define FR_ORDER(st) ((unsigned)((st) & 0x0fu))

typedef struct {
    uint8_t label;        /* enum sim_mt */
    uint8_t skip;         /* compaction skip hint */
    uint16_t free_pages;
    uint16_t kernel_pages;       /* UNMOVABLE + RECLAIMABLE */
    uint16_t reclaimable_pages;  /* the RECLAIMABLE part of kernel_pages */
    uint16_t movable_pages;
    uint16_t alloc_heads;  /* allocated-block heads (and isolated frames) in it */
} pageblock_t;

/* One frame's record: 16 bytes, so touching a frame costs one cache line. */
typedef struct {
    uint32_t next, prev;  /* free head: circular free list links */
    uint32_t owner;       /* alloc head: its handle (NIL: isolated by compaction) */
    uint8_t state;        /* FR_FREE|order, FR_ALLOC|order, or 0 inside a block */
    uint8_t type;         /* free head: its list; alloc head: its type */
    uint8_t pad[2];
} frame_t;

typedef struct {
    uint32_t pfn;         /* live: head frame; free: next free handle */
    uint8_t order, type, state, pad;
} handle_t;

typedef struct {
    uint32_t handle, pad;
    uint64_t deadline;
} rcu_entry_t;

struct sim {
    sim_config_t cfg;
    uint32_t nr_frames, nr_blocks;
    /* frames */
    frame_t *fr;
    uint32_t head[SIM_MAX_ORDER][SIM_NR_MT];
    uint64_t nr_free[SIM_MAX_ORDER][SIM_NR_MT];
    uint64_t nr_free_order[SIM_MAX_ORDER];
    pageblock_t *pb;
    /* handles */
    handle_t *hd;
    uint32_t h_free;
    /* RCU deferred frees: a FIFO ring (deadlines are increasing) */
    rcu_entry_t *rcu;
    uint32_t rcu_head, rcu_len;
    /* compaction scanner state */
    uint32_t cached_migrate_pfn[2], cached_free_pfn;
    bool blockskip_flush;  /* scanners met: kswapd clears skip hints once free >= high */
    uint64_t wmark[3];     /* min, low, high watermarks in pages (Linux's formulas) */
    uint32_t *cc_free;    /* isolated free frames (targets) */
    uint32_t *cc_mig;     /* isolated movable handles */
    sim_stats_t st;
};

static inline bool mt_is_kernel(unsigned t) { return t == SIM_UNMOVABLE || t == SIM_RECLAIMABLE; }
/* page_owner's test (pagetypeinfo_showmixedcount_print): some allocated
 * page's type differs from the block's label. */
static inline bool pb_owner_mixed(const pageblock_t *p) {
    unsigned recl = p->reclaimable_pages, unmov = p->kernel_pages - recl;
    return (unmov && p->label != SIM_UNMOVABLE) || (recl && p->label != SIM_RECLAIMABLE) ||
           (p->movable_pages && p->label != SIM_MOVABLE);
}
static inline uint32_t pfn_block(uint32_t pfn) { return pfn >> SIM_PAGEBLOCK_ORDER; }

/* buddy.c: frames, lists and counters */
int buddy_init(sim_t *s);
void buddy_fini(sim_t *s);
void list_add(sim_t *s, uint32_t pfn, unsigned order, unsigned type, bool tail);
void list_del(sim_t *s, uint32_t pfn);
void block_account(sim_t *s, uint32_t pfn, unsigned order, unsigned type, int sign);
void buddy_expand(sim_t *s, uint32_t pfn, unsigned low, unsigned high, unsigned type);
uint32_t buddy_take_smallest(sim_t *s, unsigned order, unsigned type);
/* Returns the head of the coalesced free block; *order_out its order. */
uint32_t buddy_free(sim_t *s, uint32_t pfn, unsigned order, unsigned *order_out);
uint32_t buddy_move_block_free(sim_t *s, uint32_t block, unsigned type);
void block_set_label(sim_t *s, uint32_t block, unsigned label);

int buddy_check(const sim_t *s, char *err, size_t err_len);

/* policy.c: __rmqueue under each policy; returns the head frame or NIL */
uint32_t policy_rmqueue(sim_t *s, unsigned order, unsigned type);
/* Frees 2^order frames at pfn (already un-accounted) that held `type`,
 * with the policy's rules for labels after a free (every free, including
 * compaction's, goes through here). */
void policy_free(sim_t *s, uint32_t pfn, unsigned order, unsigned type);
bool policy_prudence_flush(sim_t *s);   /* sim.c: reclaims RCU-deferred frames */

/* compact.c */
enum { COMPACT_SKIPPED, COMPACT_COMPLETE, COMPACT_SUCCESS };
int compact_zone(sim_t *s, int order, bool sync);
bool compact_free_block_ready(const sim_t *s, unsigned order);



#endif
