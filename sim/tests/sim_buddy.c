/* sim_buddy.c: buddy invariants of the simulator under random operation
 * sequences, for both policies: no frame is both free and allocated, free
 * blocks are coalesced, and the per-order, per-type and per-pageblock
 * counts match a recount (sim_check). Also exact split/merge cases and the
 * return to fully coalesced memory once everything is freed. */
#include <stdlib.h>
#include <string.h>
#include "hpmsim.h"
#include "sim_internal.h"
#include "testhelper.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return rng;
}

static sim_t *make(uint64_t mib, enum sim_policy p, int prudence) {
    char err[256];
    sim_config_t cfg = {.mem_mib = mib, .policy = p, .prudence = prudence, .rcu_grace_ops = 50};
    sim_t *s = sim_create(&cfg, err, sizeof err);
    CHECK(s != NULL, "%s", err);
    return s;
}

static void exact_split_merge(void) {
    sim_t *s = make(8, SIM_LINUX, 0);
    /* 8 MiB = 2 order-10 blocks on the MOVABLE list */
    CHECK(sim_nr_free(s, 10, SIM_MOVABLE) == 2, "boot: two order-10 blocks");
    sim_handle_t a = sim_alloc(s, 0, SIM_MOVABLE);
    CHECK(a != SIM_NO_HANDLE, "alloc");
    /* splitting 10 -> 0 leaves one free block of each order 0..9 */
    for (unsigned o = 0; o < 10; o++) CHECK(sim_nr_free(s, o, SIM_MOVABLE) == 1, "order %u", o);
    CHECK(sim_nr_free(s, 10, SIM_MOVABLE) == 1, "one order-10 left");
    sim_handle_t b = sim_alloc(s, 0, SIM_MOVABLE);
    CHECK(b != SIM_NO_HANDLE && (sim_handle_pfn(s, a) ^ sim_handle_pfn(s, b)) == 1, "the buddy comes next");
    CHECK(sim_nr_free(s, 0, SIM_MOVABLE) == 0, "order 0 used up");
    sim_free(s, a);
    CHECK(sim_nr_free(s, 0, SIM_MOVABLE) == 1, "a alone cannot merge");
    sim_free(s, b);
    CHECK(sim_nr_free(s, 0, SIM_MOVABLE) == 0 && sim_nr_free(s, 10, SIM_MOVABLE) == 2, "a+b merge back to order 10");
    char err[256] = "";
    CHECK(sim_check(s, err, sizeof err) == 0, "%s", err);
    sim_destroy(s);
}

static void random_ops(enum sim_policy p, int prudence, uint64_t seed) {
    rng = seed;
    sim_t *s = make(64, p, prudence);
    enum { N = 6000 };
    sim_handle_t *live = calloc(N, sizeof *live);
    int nlive = 0, bad = 0, checks = 0;
    char err[256] = "";
    for (int i = 0; i < 60000; i++) {
        uint64_t r = rnd() % 100;
        if (r < 50 && nlive < N) {
            unsigned order = rnd() % 8 == 0 ? (unsigned)(rnd() % 11) : (unsigned)(rnd() % 3);
            enum sim_mt t = (enum sim_mt)(rnd() % 3);
            sim_handle_t h = sim_alloc(s, order, t);
            if (h != SIM_NO_HANDLE) live[nlive++] = h;
        } else if (r < 53 && nlive < N) {
            sim_handle_t h = sim_alloc_huge(s);
            if (h != SIM_NO_HANDLE) live[nlive++] = h;
        } else if (r < 90 && nlive) {
            int k = (int)(rnd() % (uint64_t)nlive);
            if (rnd() % 4 == 0) sim_free_rcu(s, live[k]); else sim_free(s, live[k]);
            live[k] = live[--nlive];
        } else if (r < 91) {
            sim_compact_all(s);
        } else {
            sim_advance(s, rnd() % 20);
        }
        if (i % 2000 == 0) {
            checks++;
            if (sim_check(s, err, sizeof err)) { bad++; fprintf(stderr, "%s seed %llu op %d: %s\n",
                sim_policy_name(p), (unsigned long long)seed, i, err); break; }
        }
    }
    CHECK(bad == 0, "invariants held at %d checks", checks);
    /* handles still resolve to allocated frames after compaction moved them */
    sim_stats_t st;
    sim_get_stats(s, &st);
    CHECK(st.hp_requests > 0 && st.allocs > 0 && st.frees > 0, "ops ran");
    while (nlive) sim_free(s, live[--nlive]);
    sim_advance(s, 1000);
    CHECK(sim_check(s, err, sizeof err) == 0, "%s", err);
    sim_get_stats(s, &st);
    CHECK(st.free_pages == st.total_pages, "all free: %llu of %llu", (unsigned long long)st.free_pages,
          (unsigned long long)st.total_pages);
    uint64_t order10 = 0;
    for (int t = 0; t < SIM_NR_MT; t++) order10 += sim_nr_free(s, 10, (enum sim_mt)t);
    CHECK(order10 == st.total_pages / 1024, "fully coalesced: %llu order-10 blocks", (unsigned long long)order10);
    CHECK(st.hybrid_blocks == 0 && st.kernel_blocks == 0, "no kernel pages left");
    free(live);
    sim_destroy(s);
}

static void bad_input(void) {
    char err[256] = "";
    sim_config_t cfg = {.mem_mib = 6, .policy = SIM_LINUX};
    CHECK(sim_create(&cfg, err, sizeof err) == NULL && strstr(err, "multiple of 4"), "%s", err);
    sim_t *s = make(8, SIM_LINUX, 0);
    CHECK(sim_alloc(s, 11, SIM_MOVABLE) == SIM_NO_HANDLE, "order 11 refused");
    CHECK(sim_alloc(s, 0, SIM_MIXED) == SIM_NO_HANDLE, "MIXED is not a request type");
    sim_free(s, 12345);  /* not live: ignored */
    sim_handle_t big = sim_alloc(s, 10, SIM_MOVABLE), big2 = sim_alloc(s, 10, SIM_MOVABLE);
    CHECK(big != SIM_NO_HANDLE && big2 != SIM_NO_HANDLE, "two order-10");
    CHECK(sim_alloc(s, 0, SIM_UNMOVABLE) == SIM_NO_HANDLE, "memory full");
    sim_free(s, big);
    sim_free(s, big);  /* double free ignored */
    CHECK(sim_check(s, err, sizeof err) == 0, "%s", err);
    sim_destroy(s);
}

/* page_owner's mixed count: a block holding an allocation whose type
 * differs from its label, U and R told apart; and the recount agrees. */
static void owner_mixed_counts(void) {
    char err[256] = "";
    sim_t *s = make(8, SIM_LINUX, 0);
    sim_stats_t st;
    sim_handle_t m = sim_alloc(s, 0, SIM_MOVABLE);
    sim_get_stats(s, &st);
    CHECK(st.owner_mixed_blocks == 0 && st.hybrid_blocks == 0, "movable page in a MOVABLE block: not mixed");
    sim_handle_t u = sim_alloc(s, 0, SIM_UNMOVABLE);   /* steals block 0's order-9 buddy half? */
    uint32_t bu = sim_handle_pfn(s, u) / SIM_PAGEBLOCK_PAGES, bm = sim_handle_pfn(s, m) / SIM_PAGEBLOCK_PAGES;
    sim_block_info_t bi;
    sim_block_info(s, bu, &bi);
    sim_get_stats(s, &st);
    CHECK(bi.label == SIM_UNMOVABLE, "linux claims a whole free block for the unmovable page (%s)", sim_mt_name(bi.label));
    CHECK(bu != bm && st.owner_mixed_blocks == 0, "its own block, labelled to match: not mixed (%u)", st.owner_mixed_blocks);
    sim_handle_t r = sim_alloc(s, 0, SIM_RECLAIMABLE);   /* R falls back to the U block's free pages */
    sim_block_info(s, sim_handle_pfn(s, r) / SIM_PAGEBLOCK_PAGES, &bi);
    sim_get_stats(s, &st);
    CHECK(bi.reclaimable_pages == 1, "the reclaimable page is counted as such");
    CHECK(st.owner_mixed_blocks == (bi.label != SIM_RECLAIMABLE || bi.kernel_pages > 1 ? 1u : 0u),
          "a reclaimable page in a block labelled %s: %u mixed", sim_mt_name(bi.label), st.owner_mixed_blocks);
    CHECK(st.hybrid_blocks == 0, "but no block holds kernel and movable pages");
    CHECK(sim_check(s, err, sizeof err) == 0, "%s", err);
    sim_destroy(s);
}

/* The checker itself must catch corruption, or the tests above prove nothing. */
static void checker_catches(void) {
    char err[256] = "";
    sim_t *s = make(8, SIM_LINUX, 0);
    sim_handle_t h = sim_alloc(s, 0, SIM_UNMOVABLE);
    uint32_t pfn = sim_handle_pfn(s, h);
    s->pb[pfn_block(pfn)].kernel_pages++;
    CHECK(sim_check(s, err, sizeof err) != 0 && strstr(err, "pageblock"), "counter corruption: %s", err);
    s->pb[pfn_block(pfn)].kernel_pages--;
    s->fr[pfn].state |= FR_FREE;
    CHECK(sim_check(s, err, sizeof err) != 0 && strstr(err, "both free and allocated"), "free+alloc: %s", err);
    s->fr[pfn].state &= (uint8_t)~FR_FREE;
    s->nr_free[3][SIM_MOVABLE]++;
    CHECK(sim_check(s, err, sizeof err) != 0, "list count: %s", err);
    s->nr_free[3][SIM_MOVABLE]--;
    CHECK(sim_check(s, err, sizeof err) == 0, "restored: %s", err);
    sim_free(s, h);
    /* two free buddies left unmerged */
    sim_handle_t a = sim_alloc(s, 0, SIM_MOVABLE), b = sim_alloc(s, 0, SIM_MOVABLE);
    uint32_t pa = sim_handle_pfn(s, a), pb = sim_handle_pfn(s, b);
    block_account(s, pa, 0, SIM_MOVABLE, -1); block_account(s, pb, 0, SIM_MOVABLE, -1);
    s->fr[pa].state = s->fr[pb].state = 0;
    s->hd[a].state = s->hd[b].state = 0;
    list_add(s, pa, 0, SIM_MOVABLE, false); list_add(s, pb, 0, SIM_MOVABLE, false);
    CHECK(sim_check(s, err, sizeof err) != 0 && strstr(err, "not coalesced"), "uncoalesced: %s", err);
    sim_destroy(s);
}

int main(void) {
    checker_catches();
    owner_mixed_counts();
    exact_split_merge();
    bad_input();
    for (uint64_t seed = 1; seed <= 4; seed++) {
        random_ops(SIM_LINUX, 0, seed * 7919);
        random_ops(SIM_ILLUMINATOR, 1, seed * 7919);
        random_ops(SIM_ILLUMINATOR, 0, seed * 104729);
        random_ops(SIM_LINUX, 1, seed * 104729);
        random_ops(SIM_ILLUMINATOR_PAPER, 1, seed * 7919);
        random_ops(SIM_ILLUMINATOR_PAPER, 0, seed * 104729);
    }
    return TEST_DONE();
}
