/* sim_policy.c: unit tests of the Linux 4.5 policy and both Illuminator
 * variants (patch, paper) on small hand-built memories, one per rule of
 * docs/sim.md: Linux's steals; rule 1, the order of the fallback steps;
 * rule 2, movable steals; rule 3, when MIXED becomes MOVABLE again; rule 4,
 * which blocks compaction migrates from (async, sync) and into; rules 5
 * and 6, what counts as a fallback and the three block counts; RCU grace
 * periods and Prudence. */
#include <stdlib.h>
#include <string.h>
#include "hpmsim.h"
#include "testhelper.h"

typedef struct {
    sim_t *s;
    sim_handle_t *h;   /* one movable order-0 handle per frame, or NO_HANDLE once freed */
    uint32_t n;
} mem_t;

static int mixed_before_full;   /* the patch's order for the next fill() */

static mem_t fill(uint64_t mib, enum sim_policy p, int prudence, uint64_t grace) {
    char err[256];
    sim_config_t cfg = {.mem_mib = mib, .policy = p, .prudence = prudence, .rcu_grace_ops = grace,
                        .mixed_before_full = mixed_before_full};
    mem_t m = {.s = sim_create(&cfg, err, sizeof err)};
    m.n = (uint32_t)(mib * 256);
    m.h = malloc(m.n * sizeof *m.h);
    for (uint32_t i = 0; i < m.n; i++) m.h[i] = sim_alloc(m.s, 0, SIM_MOVABLE);
    sim_stats_t st;
    sim_get_stats(m.s, &st);
    CHECK(st.free_pages == 0, "memory filled with movable pages");
    return m;
}

static void done(mem_t *m) {
    char err[256] = "";
    CHECK(sim_check(m->s, err, sizeof err) == 0, "%s", err);
    sim_destroy(m->s);
    free(m->h);
}

/* Frees `count` movable pages of pageblock `block`; returns how many. */
static uint32_t free_in_block(mem_t *m, uint32_t block, uint32_t count) {
    uint32_t freed = 0;
    for (uint32_t i = 0; i < m->n && freed < count; i++) {
        if (m->h[i] == SIM_NO_HANDLE || sim_handle_pfn(m->s, m->h[i]) / SIM_PAGEBLOCK_PAGES != block) continue;
        sim_free(m->s, m->h[i]);
        m->h[i] = SIM_NO_HANDLE;
        freed++;
    }
    return freed;
}

static sim_block_info_t info(const mem_t *m, uint32_t block) {
    sim_block_info_t bi;
    sim_block_info(m->s, block, &bi);
    return bi;
}

static uint32_t block_of(const mem_t *m, sim_handle_t h) { return sim_handle_pfn(m->s, h) / SIM_PAGEBLOCK_PAGES; }

static void linux_steal_relabels(void) {
    mem_t m = fill(8, SIM_LINUX, 0, 100);
    CHECK(free_in_block(&m, 0, 300) == 300, "freed 300");
    sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    CHECK(u != SIM_NO_HANDLE && block_of(&m, u) == 0, "unmovable went to the only free pages");
    CHECK(info(&m, 0).label == SIM_UNMOVABLE, "300 of 512 free: the steal relabels block 0 (label %s)",
          sim_mt_name(info(&m, 0).label));
    uint64_t on_unmovable = 0;
    for (unsigned o = 0; o < SIM_MAX_ORDER; o++) on_unmovable += sim_nr_free(m.s, o, SIM_UNMOVABLE) << o;
    CHECK(on_unmovable == 299, "the block's other free pages moved to the unmovable lists (%llu)",
          (unsigned long long)on_unmovable);
    done(&m);

    m = fill(8, SIM_LINUX, 0, 100);
    free_in_block(&m, 1, 100);
    u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    CHECK(u != SIM_NO_HANDLE && block_of(&m, u) == 1, "unmovable in block 1");
    sim_block_info_t bi = info(&m, 1);
    CHECK(bi.label == SIM_MOVABLE, "100 of 512 free: block 1 keeps its MOVABLE label (%s)", sim_mt_name(bi.label));
    CHECK(bi.kernel_pages == 1 && bi.movable_pages == 412, "and is now hybrid (%u kernel, %u movable)",
          bi.kernel_pages, bi.movable_pages);
    sim_stats_t st;
    sim_get_stats(m.s, &st);
    CHECK(st.hybrid_blocks == 1, "one hybrid block counted (%u)", st.hybrid_blocks);
    done(&m);
}

static uint64_t free_on(const mem_t *m, enum sim_mt t) {
    uint64_t n = 0;
    for (unsigned o = 0; o < SIM_MAX_ORDER; o++) n += sim_nr_free(m->s, o, t) << o;
    return n;
}

/* Block 0 holds one unmovable page and 50 free pages (on the MIXED lists
 * under Illuminator), block 3 is entirely free, nothing else is free. */
static void order_setup(mem_t *m) {
    free_in_block(m, 0, 1);
    sim_handle_t u1 = sim_alloc(m->s, 0, SIM_UNMOVABLE);
    CHECK(u1 != SIM_NO_HANDLE && block_of(m, u1) == 0, "first unmovable in block 0");
    free_in_block(m, 0, 50);
    CHECK(free_in_block(m, 3, 512) == 512, "block 3 emptied");
    CHECK(free_on(m, SIM_UNMOVABLE) == 0 && free_on(m, SIM_RECLAIMABLE) == 0, "no kernel free pages");
}

/* Rule 1: the patch takes a whole free pageblock before the MIXED lists
 * (issue 10: "Update fallback to steal full before using mixed"); the paper
 * variant uses the hybrid block first; Linux steals the largest block. */
static void rule1_order(enum sim_policy p) {
    mem_t m = fill(8, p, 0, 100);
    order_setup(&m);
    const char *name = sim_policy_name(p);
    if (p != SIM_LINUX) CHECK(info(&m, 0).label == SIM_MIXED && free_on(&m, SIM_MIXED) == 50, "%s: block 0 MIXED", name);
    sim_stats_t before, after;
    sim_get_stats(m.s, &before);
    sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    sim_get_stats(m.s, &after);
    bool mixed_first = p == SIM_ILLUMINATOR_PAPER || (p == SIM_ILLUMINATOR && mixed_before_full);
    uint32_t want = mixed_first ? 0 : 3;
    CHECK(u != SIM_NO_HANDLE && block_of(&m, u) == want, "%s: the unmovable page goes to block %u (%u)", name, want,
          block_of(&m, u));
    if (want == 3) {
        CHECK(info(&m, 3).label == SIM_UNMOVABLE, "%s: block 3 claimed whole, relabelled unmovable", name);
        CHECK(after.fallbacks == before.fallbacks + 1, "%s: one fallback (kernel page in a movable block)", name);
    } else {
        CHECK(info(&m, 3).label == SIM_MOVABLE && info(&m, 3).free_pages == 512, "%s: block 3 stays clean", name);
        CHECK(after.fallbacks == before.fallbacks && after.mixed_allocs == before.mixed_allocs + 1,
              "%s: served from MIXED, not a fallback", name);
    }
    done(&m);
}

/* Allocates n pages of type t, keeping their handles in out. */
static void alloc_n(mem_t *m, enum sim_mt t, uint32_t n, sim_handle_t *out) {
    for (uint32_t i = 0; i < n; i++) CHECK((out[i] = sim_alloc(m->s, 0, t)) != SIM_NO_HANDLE, "alloc %u", i);
}

/* Frees the handles of hs whose frame offset in its pageblock is in [lo, hi) and
 * (when step > 1) a multiple of step. */
static void free_range(mem_t *m, sim_handle_t *hs, uint32_t n, uint32_t block, uint32_t lo, uint32_t hi, uint32_t step) {
    for (uint32_t i = 0; i < n; i++) {
        uint32_t pfn = sim_handle_pfn(m->s, hs[i]);
        if (hs[i] == SIM_NO_HANDLE || pfn / SIM_PAGEBLOCK_PAGES != block) continue;
        uint32_t off = pfn % SIM_PAGEBLOCK_PAGES;
        if (off >= lo && off < hi && off % step == 0) { sim_free(m->s, hs[i]); hs[i] = SIM_NO_HANDLE; }
    }
}

/* Rule 2: a movable request falls back to the first block at the largest
 * order of the kernel lists (not the kernel block with most free pages);
 * below order 4 it does not steal, from order 4 it moves the block's free
 * pages to the MIXED lists (less than half free) and labels it MIXED. */
static void rule2_movable_steal(void) {
    mem_t m = fill(16, SIM_ILLUMINATOR, 0, 100);
    sim_handle_t *k = malloc(1024 * sizeof *k);
    free_in_block(&m, 1, 512);
    free_in_block(&m, 2, 512);
    alloc_n(&m, SIM_UNMOVABLE, 1024, k);
    CHECK(info(&m, 1).kernel_pages == 512 && info(&m, 2).kernel_pages == 512, "blocks 1 and 2 full of kernel pages");
    free_range(&m, k, 1024, 1, 0, 8, 1);      /* block 1: one order-3 free block */
    free_range(&m, k, 1024, 2, 0, 400, 2);    /* block 2: 200 scattered free pages */
    sim_handle_t a = sim_alloc(m.s, 0, SIM_MOVABLE);
    CHECK(a != SIM_NO_HANDLE && block_of(&m, a) == 1, "the largest order wins over the most free (block %u)", block_of(&m, a));
    CHECK(info(&m, 1).label == SIM_UNMOVABLE, "order 3: no steal, block 1 keeps its label (%s)", sim_mt_name(info(&m, 1).label));
    for (int i = 0; i < 7; i++) sim_alloc(m.s, 0, SIM_MOVABLE);   /* use up the order-3 block */
    free_range(&m, k, 1024, 1, 16, 32, 1);    /* an order-4 block */
    free_range(&m, k, 1024, 1, 100, 101, 1);  /* and one more free page */
    sim_handle_t b = sim_alloc(m.s, 0, SIM_MOVABLE);
    CHECK(b != SIM_NO_HANDLE && block_of(&m, b) == 1, "order 4 in block 1 taken (%u)", block_of(&m, b));
    CHECK(info(&m, 1).label == SIM_MIXED, "order 4: stolen, labelled MIXED (%s)", sim_mt_name(info(&m, 1).label));
    CHECK(free_on(&m, SIM_MIXED) == 1, "block 1's other free page moved to the MIXED lists (%llu)",
          (unsigned long long)free_on(&m, SIM_MIXED));
    CHECK(free_on(&m, SIM_MOVABLE) == 15, "the split remainder went to the movable lists (%llu)",
          (unsigned long long)free_on(&m, SIM_MOVABLE));
    free(k);
    done(&m);
}

/* Frees every other page of the first 2*n of block's pages (n isolated order-0 free pages). */
static void free_every_other(mem_t *m, uint32_t block, uint32_t n) {
    for (uint32_t i = 0; i < m->n; i++) {
        uint32_t pfn = sim_handle_pfn(m->s, m->h[i]);
        if (m->h[i] == SIM_NO_HANDLE || pfn / SIM_PAGEBLOCK_PAGES != block) continue;
        uint32_t off = pfn % SIM_PAGEBLOCK_PAGES;
        if (off < 2 * n && off % 2 == 0) { sim_free(m->s, m->h[i]); m->h[i] = SIM_NO_HANDLE; }
    }
}

/* Rule I2: a kernel request takes the MOVABLE free page whose pageblock has
 * the most free pages, among the first 65 entries of the list (an order-0
 * request); Linux takes the list's first entry. */
static void rule2_opbs(enum sim_policy p) {
    mem_t m = fill(8, p, 0, 100);
    free_every_other(&m, 2, 10);   /* 10 free pages in block 2, deeper in the list */
    free_in_block(&m, 1, 1);       /* then 1 in block 1, at the list head */
    sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    uint32_t want = p == SIM_LINUX ? 1 : 2;
    CHECK(u != SIM_NO_HANDLE && block_of(&m, u) == want, "%s: the kernel page goes to block %u (%u)", sim_policy_name(p),
          want, block_of(&m, u));
    done(&m);
    if (p == SIM_LINUX) return;
    m = fill(8, p, 0, 100);
    free_every_other(&m, 2, 200);  /* 200 free pages in block 2, beyond the window */
    free_every_other(&m, 1, 70);   /* 70 in block 1, the first 70 entries */
    u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    CHECK(u != SIM_NO_HANDLE && block_of(&m, u) == 1, "%s: the search sees 65 entries: block 1 (%u)", sim_policy_name(p),
          block_of(&m, u));
    done(&m);
}

/* Rule 3: the patch relabels a MIXED block MOVABLE only when it is whole
 * and free; the paper variant as soon as its last kernel page goes. */
static void rule3_mixed_returns(enum sim_policy p) {
    mem_t m = fill(8, p, 0, 100);
    free_in_block(&m, 2, 10);
    sim_handle_t a = sim_alloc(m.s, 0, SIM_UNMOVABLE), b = sim_alloc(m.s, 0, SIM_RECLAIMABLE);
    CHECK(block_of(&m, a) == 2 && block_of(&m, b) == 2, "kernel pages in block 2");
    CHECK(info(&m, 2).label == SIM_MIXED, "block 2 MIXED");
    sim_free(m.s, a);
    CHECK(info(&m, 2).label == SIM_MIXED, "still one kernel page: MIXED");
    sim_free(m.s, b);
    if (p == SIM_ILLUMINATOR_PAPER) {
        CHECK(info(&m, 2).label == SIM_MOVABLE, "paper: no kernel page left, MOVABLE (%s)", sim_mt_name(info(&m, 2).label));
        CHECK(free_on(&m, SIM_MIXED) == 0, "paper: its free pages left the MIXED lists");
    } else {
        CHECK(info(&m, 2).label == SIM_MIXED, "patch: movable pages remain, still MIXED (%s)", sim_mt_name(info(&m, 2).label));
        CHECK(free_on(&m, SIM_MIXED) == 10, "patch: its free pages stay on the MIXED lists (%llu)",
              (unsigned long long)free_on(&m, SIM_MIXED));
        free_in_block(&m, 2, 512);
        CHECK(info(&m, 2).label == SIM_MOVABLE && info(&m, 2).free_pages == 512, "patch: whole and free, MOVABLE (%s)",
              sim_mt_name(info(&m, 2).label));
        CHECK(free_on(&m, SIM_MIXED) == 0 && sim_nr_free(m.s, 9, SIM_MOVABLE) + sim_nr_free(m.s, 10, SIM_MOVABLE) == 1,
              "patch: the free block is on the MOVABLE list");
    }
    done(&m);
}

/* Rule 5 and 6: a fallback is a page placed in the other mobility class;
 * U<->R use is counted apart. The three block counts differ as defined. */
static void counting(enum sim_policy p) {
    mem_t m = fill(8, p, 0, 100);
    free_in_block(&m, 1, 512);
    free_in_block(&m, 2, 100);
    sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    sim_stats_t st;
    sim_get_stats(m.s, &st);
    CHECK(block_of(&m, u) == 1 && st.fallbacks == 1, "%s: unmovable claims free block 1: one fallback (%llu)",
          sim_policy_name(p), (unsigned long long)st.fallbacks);
    sim_handle_t r = sim_alloc(m.s, 0, SIM_RECLAIMABLE);
    sim_get_stats(m.s, &st);
    CHECK(block_of(&m, r) == 1 && st.fallbacks == 1 && st.kernel_cross == 1,
          "%s: reclaimable from the unmovable lists: not a fallback (%llu, cross %llu)", sim_policy_name(p),
          (unsigned long long)st.fallbacks, (unsigned long long)st.kernel_cross);
    CHECK(st.kernel_blocks == 1 && st.hybrid_blocks == 0 && st.owner_mixed_blocks == 1,
          "%s: block 1 kernel-polluted, not hybrid, mixed by page_owner (R page in a U block): %u %u %u",
          sim_policy_name(p), st.kernel_blocks, st.hybrid_blocks, st.owner_mixed_blocks);
    done(&m);
}

/* Rule 4 (free side): MIXED blocks are free-scanner targets under both
 * Illuminator variants, never under Linux (there it is UNMOVABLE). */
static void rule4_free_target(enum sim_policy p) {
    mem_t m = fill(16, p, 0, 100);
    free_in_block(&m, 7, 300);
    sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    CHECK(block_of(&m, u) == 7, "%s: kernel page in block 7", sim_policy_name(p));
    free_in_block(&m, 1, 400);
    sim_block_info_t before = info(&m, 7);
    sim_compact_all(m.s);
    sim_block_info_t after = info(&m, 7);
    if (p == SIM_LINUX) CHECK(before.label == SIM_UNMOVABLE && after.movable_pages == before.movable_pages,
                              "linux: block 7 (UNMOVABLE) received nothing");
    else CHECK(before.label == SIM_MIXED && after.movable_pages > before.movable_pages,
               "%s: the MIXED block 7 received migrated pages (%u -> %u)", sim_policy_name(p), before.movable_pages,
               after.movable_pages);
    done(&m);
}

static sim_stats_t compaction_case(enum sim_policy p, sim_block_info_t *b0_before, sim_block_info_t *b0_after,
                                   sim_handle_t *hp) {
    mem_t m = fill(16, p, 0, 100);
    free_in_block(&m, 0, 100);
    sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    CHECK(block_of(&m, u) == 0, "%s: unmovable page in block 0", sim_policy_name(p));
    for (uint32_t b = 5; b < 8; b++) free_in_block(&m, b, 500);
    *b0_before = info(&m, 0);
    *hp = sim_alloc_huge(m.s);
    *b0_after = info(&m, 0);
    sim_stats_t st;
    sim_get_stats(m.s, &st);
    done(&m);
    return st;
}

/* Rule 4 (migrate side), async: Linux migrates out of the hybrid
 * MOVABLE-labelled block 0 in vain; both Illuminator variants leave the
 * MIXED block alone (the patch because it is not MOVABLE). */
static void rule4_async(void) {
    sim_block_info_t lb, la, ib, ia, pb, pa;
    sim_handle_t lh, ih, ph;
    sim_stats_t ls = compaction_case(SIM_LINUX, &lb, &la, &lh);
    sim_stats_t is = compaction_case(SIM_ILLUMINATOR, &ib, &ia, &ih);
    sim_stats_t ps = compaction_case(SIM_ILLUMINATOR_PAPER, &pb, &pa, &ph);
    CHECK(lh != SIM_NO_HANDLE && ih != SIM_NO_HANDLE && ph != SIM_NO_HANDLE, "all produce the huge page by compaction");
    CHECK(ls.hp_after_compact == 1 && is.hp_after_compact == 1 && ps.hp_after_compact == 1, "after compaction");
    CHECK(lb.label == SIM_MOVABLE && ib.label == SIM_MIXED && pb.label == SIM_MIXED, "block 0: MOVABLE, MIXED, MIXED");
    CHECK(la.movable_pages < lb.movable_pages, "linux migrated pages out of the hybrid block (%u -> %u)",
          lb.movable_pages, la.movable_pages);
    CHECK(ls.compact_wasted == lb.movable_pages - la.movable_pages && ls.compact_wasted > 0,
          "linux: those migrations are counted as wasted (%llu)", (unsigned long long)ls.compact_wasted);
    CHECK(ia.movable_pages == ib.movable_pages && pa.movable_pages == pb.movable_pages, "illuminator left the MIXED block alone");
    CHECK(is.compact_wasted == 0 && ps.compact_wasted == 0, "illuminator: no wasted migration");
    CHECK(is.compact_mig_scanned < ls.compact_mig_scanned, "illuminator scanned less (%llu < %llu)",
          (unsigned long long)is.compact_mig_scanned, (unsigned long long)ls.compact_mig_scanned);
    CHECK(sim_cost_per_hp(&ls) > sim_cost_per_hp(&is), "cost per huge page higher under linux (%.0f > %.0f)",
          sim_cost_per_hp(&ls), sim_cost_per_hp(&is));
}

/* Rule 4 (migrate side), sync: Linux and the patch migrate out of the
 * polluted block 0 (UNMOVABLE or MIXED) in vain; the paper variant skips
 * every block holding kernel pages in all compaction. */
static void rule4_sync(enum sim_policy p) {
    mem_t m = fill(16, p, 0, 100);
    free_in_block(&m, 0, 300);
    sim_alloc(m.s, 0, SIM_UNMOVABLE);
    for (uint32_t b = 5; b < 8; b++) free_in_block(&m, b, 500);
    sim_block_info_t before = info(&m, 0);
    sim_compact_all(m.s);
    sim_block_info_t after = info(&m, 0);
    sim_stats_t st;
    sim_get_stats(m.s, &st);
    CHECK(before.label == (p == SIM_LINUX ? SIM_UNMOVABLE : SIM_MIXED) && before.movable_pages == 212,
          "%s: block 0 polluted, labelled %s, with movable pages", sim_policy_name(p), sim_mt_name(before.label));
    if (p == SIM_ILLUMINATOR_PAPER)
        CHECK(after.movable_pages == before.movable_pages && st.compact_wasted == 0, "paper: sync compaction skipped it");
    else
        CHECK(after.movable_pages == 0 && st.compact_wasted >= 212, "%s: sync compaction emptied it in vain (%u left, %llu wasted)",
              sim_policy_name(p), after.movable_pages, (unsigned long long)st.compact_wasted);
    CHECK(st.compact_produced_hp > 0, "%s: whole-memory compaction produced huge blocks (%llu)", sim_policy_name(p),
          (unsigned long long)st.compact_produced_hp);
    done(&m);
}

static void rcu_and_prudence(int prudence) {
    char err[256];
    sim_config_t cfg = {.mem_mib = 8, .policy = SIM_LINUX, .prudence = prudence, .rcu_grace_ops = 1000000};
    sim_t *s = sim_create(&cfg, err, sizeof err);
    sim_handle_t k[1024];
    for (int i = 0; i < 1024; i++) k[i] = sim_alloc(s, 0, SIM_UNMOVABLE);
    while (sim_alloc(s, 0, SIM_MOVABLE) != SIM_NO_HANDLE) {}
    sim_stats_t st;
    sim_get_stats(s, &st);
    CHECK(st.free_pages == 0 && st.kernel_blocks == 2, "two kernel blocks, memory full");
    for (int i = 0; i < 10; i++) sim_free_rcu(s, k[i]);
    sim_get_stats(s, &st);
    CHECK(st.free_pages == 0, "deferred frees keep their frames during the grace period");
    /* a movable page frees up in a movable block; then an unmovable request */
    uint64_t fallbacks_before = st.fallbacks;
    sim_handle_t u = sim_alloc(s, 0, SIM_UNMOVABLE);
    sim_get_stats(s, &st);
    if (prudence) {
        CHECK(u != SIM_NO_HANDLE && st.prudence_frees == 10 && st.rcu_reclaimed == 10,
              "prudence: deferred frames reclaimed before falling back (%llu)", (unsigned long long)st.prudence_frees);
        CHECK(st.fallbacks == fallbacks_before, "prudence: no fallback");
    } else {
        CHECK(u == SIM_NO_HANDLE && st.rcu_reclaimed == 0, "no prudence: the request fails while frames wait");
        sim_advance(s, 1000000);
        sim_get_stats(s, &st);
        CHECK(st.rcu_reclaimed == 10 && st.free_pages == 10, "after the grace period the frames are free (%llu)",
              (unsigned long long)st.free_pages);
    }
    CHECK(sim_check(s, err, sizeof err) == 0, "%s", err);
    sim_destroy(s);
}

int main(void) {
    linux_steal_relabels();
    for (int p = 0; p < SIM_NR_POLICIES; p++) {
        rule1_order((enum sim_policy)p);
        rule2_opbs((enum sim_policy)p);
        counting((enum sim_policy)p);
        rule4_free_target((enum sim_policy)p);
        rule4_sync((enum sim_policy)p);
    }
    mixed_before_full = 1;   /* the order of the stored commits 077fe37, 6d526ae */
    rule1_order(SIM_ILLUMINATOR);
    mixed_before_full = 0;
    rule2_movable_steal();
    rule3_mixed_returns(SIM_ILLUMINATOR);
    rule3_mixed_returns(SIM_ILLUMINATOR_PAPER);
    rule4_async();
    rcu_and_prudence(0);
    rcu_and_prudence(1);
    return TEST_DONE();
}
