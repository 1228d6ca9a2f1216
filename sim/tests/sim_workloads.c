/* sim_workloads.c: the workloads do what docs/sim.md says. Fragmenter: the
 * module keeps at most `keep` pages per pageblock and leaks its order-4
 * counter array every round; the user program's memory is all returned;
 * the page-cache fill stops at the high watermark with inode/dentry slab
 * beside the file pages. Server: the dentry/inode cache ends near its
 * --dcache-pct target (it grows linearly towards it), its shrinking goes
 * through RCU, and --rcu-pct defers the unmovable slab's frees. */
#include <stdlib.h>
#include <string.h>
#include "hpmsim.h"
#include "testhelper.h"

static sim_result_t run(const char *name, enum sim_policy p, sim_workload_t w) {
    char err[256] = "";
    sim_config_t cfg = {.mem_mib = 64, .policy = p, .prudence = p != SIM_LINUX, .rcu_grace_ops = 20000};
    sim_result_t r;
    w.name = name;
    CHECK(sim_run_workload(&cfg, &w, NULL, &r, err, sizeof err) == 0, "%s/%s: %s", name, sim_policy_name(p), err);
    return r;
}

static void fragmenter_module(enum sim_policy p) {
    sim_workload_t w = {.rounds = 3, .kernel_bp = 500, .keep_per_block = 2, .cache_fill = 0};
    sim_result_t r = run("fragmenter", p, w);
    const sim_stats_t *st = &r.stats;
    /* 3 leaked order-4 arrays (48 pages) plus, each round, at most 2 kept
     * pages in each block the module touched (its counts are per round) */
    CHECK(st->kernel_pages >= 48 + 2 && st->kernel_pages <= 48 + 2ull * 3 * st->kernel_blocks,
          "%s: %llu kernel pages in %u blocks", sim_policy_name(p), (unsigned long long)st->kernel_pages, st->kernel_blocks);
    CHECK(st->reclaimable_pages == 0 && st->free_pages + st->kernel_pages == st->total_pages,
          "%s: the user program freed all it had", sim_policy_name(p));
    CHECK(st->hp_requests > 3 * 10, "%s: THP faults every round (%llu)", sim_policy_name(p), (unsigned long long)st->hp_requests);
    sim_result_free(&r);
}

static void fragmenter_cache(void) {
    sim_workload_t w = {.rounds = 1, .kernel_bp = 122, .keep_per_block = 2, .cache_fill = 1};
    sim_result_t r = run("fragmenter", SIM_LINUX, w);
    uint64_t high = 384;   /* 64 MiB: min_free_kbytes = sqrt(16 * 65536) = 1024 KiB: min 256, high 384 pages */
    CHECK(r.stats.free_pages == high, "cache fill stops at the high watermark (%llu)",
          (unsigned long long)r.stats.free_pages);
    CHECK(r.stats.reclaimable_pages > 0 && r.stats.reclaimable_pages * 900 < r.stats.total_pages,
          "one inode/dentry page per 4 files of 256 pages (%llu)", (unsigned long long)r.stats.reclaimable_pages);
    sim_result_free(&r);
}

static uint64_t dcache_at(uint32_t end_pct, uint32_t rcu_pct, uint64_t *rcu_deferred) {
    sim_workload_t w = {.seed = 3, .ops = 1600000, .rcu_pct = rcu_pct, .hp_every_ops = 500, .dcache_end_pct = end_pct};
    sim_result_t r = run("server", SIM_LINUX, w);
    uint64_t n = r.stats.reclaimable_pages;
    *rcu_deferred = r.stats.rcu_deferred;
    sim_result_free(&r);
    return n;
}

static void server_dcache(void) {
    uint64_t frames = 64 * 256, rcu10, rcu2, rcu0;
    uint64_t at10 = dcache_at(10, 0, &rcu10), at2 = dcache_at(2, 0, &rcu2), at0 = dcache_at(0, 0, &rcu0);
    CHECK(at10 >= frames * 9 / 100 && at10 <= frames * 12 / 100, "--dcache-pct 10 ends near 10%% of memory (%llu of %llu)",
          (unsigned long long)at10, (unsigned long long)frames);
    CHECK(at2 >= frames / 100 && at2 <= frames * 3 / 100, "--dcache-pct 2 near 2%% (%llu)", (unsigned long long)at2);
    CHECK(at0 <= frames / 100, "--dcache-pct 0 stays at the 0.5%% start (%llu)", (unsigned long long)at0);
    CHECK(rcu10 > 0 && rcu10 >= rcu0, "with no slab RCU, the dcache shrinker's frees are RCU-deferred (%llu)",
          (unsigned long long)rcu10);
    uint64_t rcu_slab;
    dcache_at(0, 100, &rcu_slab);
    CHECK(rcu_slab > rcu0 * 10, "--rcu-pct 100 defers the unmovable slab frees too (%llu vs %llu)",
          (unsigned long long)rcu_slab, (unsigned long long)rcu0);
}

int main(void) {
    for (int p = 0; p < SIM_NR_POLICIES; p++) fragmenter_module((enum sim_policy)p);
    fragmenter_cache();
    server_dcache();
    return TEST_DONE();
}
