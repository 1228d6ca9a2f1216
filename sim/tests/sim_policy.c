/* sim_policy.c: unit tests of the Linux 4.5 and Illuminator policies on
 * small hand-built memories: steals that relabel (or not) under Linux, an
 * unmovable request going to a MIXED block first under Illuminator while
 * Linux pollutes a clean block, MIXED returning to MOVABLE, compaction
 * trying hybrid blocks under Linux (wasted migrations) and skipping them
 * under Illuminator, RCU grace periods and Prudence. */
#include <stdlib.h>
#include <string.h>
#include "hpmsim.h"
#include "testhelper.h"

typedef struct {
    sim_t *s;
    sim_handle_t *h;   /* one movable order-0 handle per frame, or NO_HANDLE once freed */
    uint32_t n;
} mem_t;

static mem_t fill(uint64_t mib, enum sim_policy p, int prudence, uint64_t grace) {
    char err[256];
    sim_config_t cfg = {.mem_mib = mib, .policy = p, .prudence = prudence, .rcu_grace_ops = grace};
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

/* Both policies: block 0 hybrid with free pages on the movable/mixed lists,
 * block 3 entirely free; then one unmovable request. */
static sim_handle_t mixed_first_setup(mem_t *m) {
    free_in_block(m, 0, 100);
    sim_handle_t u1 = sim_alloc(m->s, 0, SIM_UNMOVABLE);
    CHECK(u1 != SIM_NO_HANDLE && block_of(m, u1) == 0, "first unmovable in block 0");
    for (int i = 0; i < 99; i++) CHECK(sim_alloc(m->s, 0, SIM_MOVABLE) != SIM_NO_HANDLE, "refill %d", i);
    free_in_block(m, 0, 50);
    CHECK(free_in_block(m, 3, 512) == 512, "block 3 emptied");
    return u1;
}

static void illuminator_mixed_first(void) {
    mem_t m = fill(8, SIM_ILLUMINATOR, 0, 100);
    sim_handle_t u1 = mixed_first_setup(&m);
    CHECK(info(&m, 0).label == SIM_MIXED, "illuminator: block 0 is MIXED (%s)", sim_mt_name(info(&m, 0).label));
    for (int i = 0; i < 20; i++) {
        sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
        CHECK(u != SIM_NO_HANDLE && block_of(&m, u) == 0, "illuminator: unmovable %d goes to the MIXED block (%u)", i,
              block_of(&m, u));
    }
    sim_block_info_t b3 = info(&m, 3);
    CHECK(b3.label == SIM_MOVABLE && b3.free_pages == 512, "the free block stays clean");
    /* MIXED returns to MOVABLE when its last kernel page goes */
    (void)u1;
    done(&m);

    m = fill(8, SIM_LINUX, 0, 100);
    mixed_first_setup(&m);
    sim_handle_t u = sim_alloc(m.s, 0, SIM_UNMOVABLE);
    CHECK(u != SIM_NO_HANDLE && block_of(&m, u) == 3, "linux: the largest block is stolen instead (block %u)",
          block_of(&m, u));
    CHECK(info(&m, 3).label == SIM_UNMOVABLE, "linux: block 3 relabelled unmovable");
    done(&m);
}

static void illuminator_mixed_returns(void) {
    mem_t m = fill(8, SIM_ILLUMINATOR, 0, 100);
    free_in_block(&m, 2, 10);
    sim_handle_t a = sim_alloc(m.s, 0, SIM_UNMOVABLE), b = sim_alloc(m.s, 0, SIM_RECLAIMABLE);
    CHECK(block_of(&m, a) == 2 && block_of(&m, b) == 2, "kernel pages in block 2");
    CHECK(info(&m, 2).label == SIM_MIXED, "block 2 MIXED");
    sim_free(m.s, a);
    CHECK(info(&m, 2).label == SIM_MIXED, "still one kernel page: MIXED");
    sim_free(m.s, b);
    CHECK(info(&m, 2).label == SIM_MOVABLE, "no kernel page left: MOVABLE again (%s)", sim_mt_name(info(&m, 2).label));
    uint64_t on_mixed = 0;
    for (unsigned o = 0; o < SIM_MAX_ORDER; o++) on_mixed += sim_nr_free(m.s, o, SIM_MIXED);
    CHECK(on_mixed == 0, "its free pages left the MIXED lists");
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

static void compaction_skips_hybrids(void) {
    sim_block_info_t lb, la, ib, ia;
    sim_handle_t lh, ih;
    sim_stats_t ls = compaction_case(SIM_LINUX, &lb, &la, &lh);
    sim_stats_t is = compaction_case(SIM_ILLUMINATOR, &ib, &ia, &ih);
    CHECK(lh != SIM_NO_HANDLE && ih != SIM_NO_HANDLE, "both produce the huge page by compaction");
    CHECK(ls.hp_after_compact == 1 && is.hp_after_compact == 1, "after compaction");
    CHECK(lb.label == SIM_MOVABLE && ib.label == SIM_MIXED, "block 0: linux MOVABLE, illuminator MIXED");
    CHECK(la.movable_pages < lb.movable_pages, "linux migrated pages out of the hybrid block (%u -> %u)",
          lb.movable_pages, la.movable_pages);
    CHECK(ls.compact_wasted == lb.movable_pages - la.movable_pages && ls.compact_wasted > 0,
          "linux: those migrations are counted as wasted (%llu)", (unsigned long long)ls.compact_wasted);
    CHECK(ia.movable_pages == ib.movable_pages, "illuminator left the MIXED block alone");
    CHECK(is.compact_wasted == 0, "illuminator: no wasted migration (%llu)", (unsigned long long)is.compact_wasted);
    CHECK(is.compact_mig_scanned < ls.compact_mig_scanned, "illuminator scanned less (%llu < %llu)",
          (unsigned long long)is.compact_mig_scanned, (unsigned long long)ls.compact_mig_scanned);
    CHECK(ls.compact_migrated > is.compact_migrated, "linux migrated more (%llu > %llu)",
          (unsigned long long)ls.compact_migrated, (unsigned long long)is.compact_migrated);
    CHECK(sim_cost_per_hp(&ls) > sim_cost_per_hp(&is), "cost per huge page higher under linux (%.0f > %.0f)",
          sim_cost_per_hp(&ls), sim_cost_per_hp(&is));
}

/* Block 0 relabelled UNMOVABLE by a Linux steal still holds movable pages:
 * async compaction leaves it (not MOVABLE), sync whole-memory compaction
 * migrates them out in vain; Illuminator skips it in both modes. */
static void sync_compaction(enum sim_policy p) {
    mem_t m = fill(16, p, 0, 100);
    free_in_block(&m, 0, 300);
    sim_alloc(m.s, 0, SIM_UNMOVABLE);
    for (uint32_t b = 5; b < 8; b++) free_in_block(&m, b, 500);
    sim_block_info_t before = info(&m, 0);
    sim_compact_all(m.s);
    sim_block_info_t after = info(&m, 0);
    sim_stats_t st;
    sim_get_stats(m.s, &st);
    if (p == SIM_LINUX) {
        CHECK(before.label == SIM_UNMOVABLE && before.movable_pages == 212, "linux: block 0 unmovable with movable pages");
        CHECK(after.movable_pages == 0 && st.compact_wasted >= 212, "linux sync compaction emptied it in vain (%u left, %llu wasted)",
              after.movable_pages, (unsigned long long)st.compact_wasted);
    } else {
        CHECK(before.label == SIM_MIXED, "illuminator: block 0 MIXED");
        CHECK(after.movable_pages == before.movable_pages && st.compact_wasted == 0, "illuminator sync compaction skipped it");
    }
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
    illuminator_mixed_first();
    illuminator_mixed_returns();
    compaction_skips_hybrids();
    sync_compaction(SIM_LINUX);
    sync_compaction(SIM_ILLUMINATOR);
    rcu_and_prudence(0);
    rcu_and_prudence(1);
    return TEST_DONE();
}
