/* check.c: sim_check(), the full recount of the simulator's invariants.
 * It walks every frame once, so it is O(frames); tests call it after
 * random operation sequences. It checks that every frame belongs to
 * exactly one free or allocated block (never both), that free blocks are
 * aligned, listed on the list their frame says and fully coalesced, that
 * the list lengths and per-order/per-type counts agree, and that the
 * per-pageblock counters, label counts and hybrid/kernel totals match. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sim_internal.h"

static int fail(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && len) vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

typedef struct { uint32_t free_pages, kernel_pages, movable_pages, reclaimable_pages, heads; } recount_t;

/* kind: 0 free, 1 kernel, 2 movable, 3 reclaimable (kernel too) */
static void add_pages(recount_t *rc, uint32_t pfn, unsigned order, int kind) {
    uint32_t left = 1u << order;
    for (uint32_t b = pfn_block(pfn); left; b++) {
        uint32_t n = left < SIM_PAGEBLOCK_PAGES ? left : SIM_PAGEBLOCK_PAGES;
        if (kind == 0) rc[b].free_pages += n;
        else if (kind == 2) rc[b].movable_pages += n;
        else rc[b].kernel_pages += n;
        if (kind == 3) rc[b].reclaimable_pages += n;
        left -= n;
    }
}

static int check_block_frames(const sim_t *s, uint32_t pfn, unsigned order, char *err, size_t len) {
    uint32_t n = 1u << order;
    if (pfn & (n - 1)) return fail(err, len, "block at pfn %u of order %u is misaligned", pfn, order);
    if ((uint64_t)pfn + n > s->nr_frames) return fail(err, len, "block at pfn %u of order %u overruns memory", pfn, order);
    for (uint32_t i = 1; i < n; i++)
        if (s->fr[pfn + i].state)
            return fail(err, len, "frame %u is inside the block at %u and also a head (state %#x)", pfn + i, pfn,
                        s->fr[pfn + i].state);
    return 0;
}

static int check_frames(const sim_t *s, recount_t *rc, uint64_t counts[SIM_MAX_ORDER][SIM_NR_MT], char *err, size_t len) {
    uint32_t pfn = 0;
    while (pfn < s->nr_frames) {
        uint8_t st = s->fr[pfn].state;
        unsigned order = FR_ORDER(st);
        if ((st & FR_FREE) && (st & FR_ALLOC)) return fail(err, len, "frame %u is both free and allocated", pfn);
        if (!(st & (FR_FREE | FR_ALLOC))) return fail(err, len, "frame %u belongs to no block", pfn);
        if (order >= SIM_MAX_ORDER) return fail(err, len, "frame %u has order %u", pfn, order);
        if (check_block_frames(s, pfn, order, err, len)) return -1;
        if (st & FR_FREE) {
            unsigned t = s->fr[pfn].type;
            if (t >= SIM_NR_MT) return fail(err, len, "free block %u on list type %u", pfn, t);
            counts[order][t]++;
            add_pages(rc, pfn, order, 0);
            uint32_t buddy = pfn ^ (1u << order);
            if (order < SIM_MAX_ORDER - 1 && buddy < s->nr_frames && s->fr[buddy].state == (FR_FREE | order))
                return fail(err, len, "free blocks %u and %u of order %u are buddies but not coalesced", pfn, buddy, order);
        } else {
            uint32_t h = s->fr[pfn].owner;
            if (h >= s->nr_frames || s->hd[h].state == 0 || s->hd[h].pfn != pfn || s->hd[h].order != order)
                return fail(err, len, "allocated block %u has a bad owner handle %u", pfn, h);
            unsigned t = s->fr[pfn].type;
            add_pages(rc, pfn, order, t == SIM_RECLAIMABLE ? 3 : t == SIM_UNMOVABLE ? 1 : 2);
            rc[pfn_block(pfn)].heads++;
        }
        pfn += 1u << order;
    }
    return 0;
}

static int check_lists(const sim_t *s, uint64_t counts[SIM_MAX_ORDER][SIM_NR_MT], char *err, size_t len) {
    for (unsigned o = 0; o < SIM_MAX_ORDER; o++) {
        uint64_t order_total = 0;
        for (unsigned t = 0; t < SIM_NR_MT; t++) {
            uint64_t n = 0;
            uint32_t h = s->head[o][t], p = h;
            if (h != NIL) do {
                if (s->fr[p].state != (FR_FREE | o) || s->fr[p].type != t)
                    return fail(err, len, "list [%u][%s] holds frame %u of state %#x type %u", o, sim_mt_name(t), p,
                                s->fr[p].state, s->fr[p].type);
                if (s->fr[s->fr[p].next].prev != p) return fail(err, len, "list [%u][%u] broken at %u", o, t, p);
                if (++n > s->nr_frames) return fail(err, len, "list [%u][%u] loops", o, t);
                p = s->fr[p].next;
            } while (p != h);
            if (n != counts[o][t] || n != s->nr_free[o][t])
                return fail(err, len, "order %u type %s: list has %llu, frames say %llu, counter says %llu", o,
                            sim_mt_name(t), (unsigned long long)n, (unsigned long long)counts[o][t],
                            (unsigned long long)s->nr_free[o][t]);
            order_total += n;
        }
        if (order_total != s->nr_free_order[o]) return fail(err, len, "order %u total count is wrong", o);
    }
    return 0;
}

static int check_blocks(const sim_t *s, const recount_t *rc, char *err, size_t len) {
    uint32_t hybrid = 0, kernel = 0, mixed = 0, labels[SIM_NR_MT] = {0};
    uint64_t free_total = 0;
    for (uint32_t b = 0; b < s->nr_blocks; b++) {
        const pageblock_t *p = &s->pb[b];
        if (p->free_pages != rc[b].free_pages || p->kernel_pages != rc[b].kernel_pages ||
            p->movable_pages != rc[b].movable_pages || p->reclaimable_pages != rc[b].reclaimable_pages)
            return fail(err, len, "pageblock %u counters free/kernel/movable %u/%u/%u, recount %u/%u/%u", b,
                        p->free_pages, p->kernel_pages, p->movable_pages, rc[b].free_pages, rc[b].kernel_pages,
                        rc[b].movable_pages);
        if (p->alloc_heads != rc[b].heads)
            return fail(err, len, "pageblock %u counts %u allocated heads, recount %u", b, p->alloc_heads, rc[b].heads);
        if (p->label >= SIM_NR_MT) return fail(err, len, "pageblock %u has label %u", b, p->label);
        labels[p->label]++;
        hybrid += p->kernel_pages && p->movable_pages;
        kernel += p->kernel_pages != 0;
        mixed += pb_owner_mixed(p);
        free_total += p->free_pages;
    }
    if (mixed != s->st.owner_mixed_blocks)
        return fail(err, len, "page_owner mixed blocks %u, recount %u", s->st.owner_mixed_blocks, mixed);
    if (hybrid != s->st.hybrid_blocks) return fail(err, len, "hybrid blocks %u, recount %u", s->st.hybrid_blocks, hybrid);
    if (kernel != s->st.kernel_blocks) return fail(err, len, "kernel blocks %u, recount %u", s->st.kernel_blocks, kernel);
    if (free_total != s->st.free_pages) return fail(err, len, "free pages %llu, recount %llu",
                                                    (unsigned long long)s->st.free_pages, (unsigned long long)free_total);
    for (unsigned t = 0; t < SIM_NR_MT; t++)
        if (labels[t] != s->st.label_blocks[t]) return fail(err, len, "label count of %s is wrong", sim_mt_name(t));
    if (s->cfg.policy == SIM_ILLUMINATOR_PAPER)
        for (uint32_t b = 0; b < s->nr_blocks; b++) {
            const pageblock_t *p = &s->pb[b];
            if (p->kernel_pages && p->movable_pages && p->label != SIM_MIXED)
                return fail(err, len, "illuminator-paper: hybrid pageblock %u is labelled %s", b, sim_mt_name(p->label));
        }
    return 0;
}

int sim_check(const sim_t *s, char *err, size_t len) {
    recount_t *rc = calloc(s->nr_blocks, sizeof *rc);
    uint64_t (*counts)[SIM_NR_MT] = calloc(SIM_MAX_ORDER, sizeof *counts);
    int r = -1;
    if (!rc || !counts) { fail(err, len, "out of memory"); goto out; }
    if (check_frames(s, rc, counts, err, len)) goto out;
    if (check_lists(s, counts, err, len)) goto out;
    if (check_blocks(s, rc, err, len)) goto out;
    r = 0;
out:
    free(rc);
    free(counts);
    return r;
}
