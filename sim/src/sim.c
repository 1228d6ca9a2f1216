/* sim.c: the simulator's public face: creation, allocation handles,
 * allocation and free, RCU-deferred frees with their grace period,
 * Prudence (reclaiming deferred frames before a kernel fallback),
 * huge-page requests with direct compaction, and statistics.
 *
 * Time is counted in operations: every alloc, free, RCU free, huge-page
 * request and compaction advances the clock by one, sim_advance() by N. An
 * RCU-deferred allocation stays allocated until clock >= its deadline.
 * Invariant: a handle is FREE, LIVE or DEFERRED; a LIVE or DEFERRED handle
 * owns exactly the frames of its block (hd[h].pfn, hd[h].order), and at most
 * nr_frames handles exist, since each owns at least one frame. */
#include <stdlib.h>
#include <string.h>
#include "sim_internal.h"

enum { H_FREE = 0, H_LIVE = 1, H_DEFERRED = 2 };

static const char *const policy_names[SIM_NR_POLICIES] = {"linux", "illuminator", "illuminator-paper"};

const char *sim_policy_name(enum sim_policy p) { return (unsigned)p < SIM_NR_POLICIES ? policy_names[p] : "?"; }

int sim_policy_from_name(const char *name) {
    for (int i = 0; name && i < SIM_NR_POLICIES; i++)
        if (!strcmp(name, policy_names[i])) return i;
    return -1;
}

const char *sim_mt_name(enum sim_mt t) {
    static const char *names[SIM_NR_MT] = {"unmovable", "reclaimable", "movable", "mixed"};
    return (unsigned)t < SIM_NR_MT ? names[t] : "?";
}

sim_t *sim_create(const sim_config_t *cfg, char *err, size_t err_len) {
    if ((unsigned)cfg->policy >= SIM_NR_POLICIES) {
        snprintf(err, err_len, "unknown policy %d", (int)cfg->policy);
        return NULL;
    }
    if (cfg->mem_mib < 8 || cfg->mem_mib % 4 || cfg->mem_mib > (1u << 20)) {
        snprintf(err, err_len, "memory must be a multiple of 4 MiB between 8 MiB and 1 TiB (got %llu MiB)",
                 (unsigned long long)cfg->mem_mib);
        return NULL;
    }
    sim_t *s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->cfg = *cfg;
    s->nr_frames = (uint32_t)(cfg->mem_mib * 256);
    s->nr_blocks = s->nr_frames / SIM_PAGEBLOCK_PAGES;
    if (buddy_init(s)) goto oom;
    uint32_t n = s->nr_frames;
    s->hd = calloc(n, sizeof(handle_t));
    s->rcu = malloc((size_t)n * sizeof(rcu_entry_t));
    s->cc_free = malloc((size_t)(n + 1024) * sizeof(uint32_t));
    s->cc_mig = malloc(64 * sizeof(uint32_t));
    if (!s->hd || !s->rcu || !s->cc_free || !s->cc_mig) goto oom;
    for (uint32_t i = 0; i < n; i++) s->hd[i].pfn = i + 1 < n ? i + 1 : NIL;
    s->h_free = 0;
    s->cached_free_pfn = (s->nr_blocks - 1) << SIM_PAGEBLOCK_ORDER;
    /* min_free_kbytes = sqrt(16 * memory in KiB), within [128 KiB, 64 MiB];
     * low = min + min/4, high = min + min/2 (Linux 4.5) */
    uint64_t kb = cfg->mem_mib * 1024, min_kb = 1;
    while ((min_kb + 1) * (min_kb + 1) <= kb * 16) min_kb++;
    if (min_kb < 128) min_kb = 128;
    if (min_kb > 65536) min_kb = 65536;
    s->wmark[0] = min_kb / 4;
    s->wmark[1] = s->wmark[0] + s->wmark[0] / 4;
    s->wmark[2] = s->wmark[0] + s->wmark[0] / 2;
    return s;
oom:
    snprintf(err, err_len, "out of memory creating a %llu MiB simulator", (unsigned long long)cfg->mem_mib);
    sim_destroy(s);
    return NULL;
}

void sim_destroy(sim_t *s) {
    if (!s) return;
    buddy_fini(s);
    free(s->hd);
    free(s->rcu); free(s->cc_free); free(s->cc_mig);
    free(s);
}

static void release(sim_t *s, uint32_t h) {
    uint32_t pfn = s->hd[h].pfn;
    unsigned order = s->hd[h].order, type = s->hd[h].type;
    block_account(s, pfn, order, type, -1);
    s->pb[pfn_block(pfn)].alloc_heads--;
    s->fr[pfn].state = 0;
    policy_free(s, pfn, order, type);
    s->hd[h].state = H_FREE;
    s->hd[h].pfn = s->h_free;
    s->h_free = h;
}

static void rcu_reclaim_due(sim_t *s) {
    while (s->rcu_len && s->rcu[s->rcu_head].deadline <= s->st.clock_ops) {
        s->st.rcu_pending_pages -= 1u << s->hd[s->rcu[s->rcu_head].handle].order;
        release(s, s->rcu[s->rcu_head].handle);
        s->rcu_head = s->rcu_head + 1 == s->nr_frames ? 0 : s->rcu_head + 1;
        s->rcu_len--;
        s->st.rcu_reclaimed++;
    }
}

/* The clock stops at UINT64_MAX rather than wrap: a trace's `t N` may be
 * any 64-bit N, and a wrapped clock went back to 0 (RCU deadlines and the
 * sampling then saw time run backwards). */
static inline uint64_t clock_add(uint64_t clock, uint64_t ops) {
    return ops > UINT64_MAX - clock ? UINT64_MAX : clock + ops;
}

static inline void tick(sim_t *s) {
    s->st.clock_ops = clock_add(s->st.clock_ops, 1);
    if (s->rcu_len) rcu_reclaim_due(s);
}

void sim_advance(sim_t *s, uint64_t ops) {
    s->st.clock_ops = clock_add(s->st.clock_ops, ops);
    rcu_reclaim_due(s);
}

bool policy_prudence_flush(sim_t *s) {
    if (!s->rcu_len) return false;
    s->st.prudence_flushes++;
    while (s->rcu_len) {
        uint32_t h = s->rcu[s->rcu_head].handle;
        s->st.prudence_frees++;
        s->st.rcu_pending_pages -= 1u << s->hd[h].order;
        release(s, h);
        s->rcu_head = s->rcu_head + 1 == s->nr_frames ? 0 : s->rcu_head + 1;
        s->rcu_len--;
        s->st.rcu_reclaimed++;
    }
    return true;
}

static sim_handle_t finish_alloc(sim_t *s, uint32_t pfn, unsigned order, unsigned type) {
    uint32_t h = s->h_free;
    s->h_free = s->hd[h].pfn;
    s->hd[h].pfn = pfn;
    s->hd[h].order = (uint8_t)order;
    s->hd[h].type = (uint8_t)type;
    s->hd[h].state = H_LIVE;
    s->fr[pfn].state = (uint8_t)(FR_ALLOC | order);
    s->fr[pfn].type = (uint8_t)type;
    s->fr[pfn].owner = h;
    block_account(s, pfn, order, type, +1);
    s->pb[pfn_block(pfn)].alloc_heads++;
    return h;
}

sim_handle_t sim_alloc(sim_t *s, unsigned order, enum sim_mt type) {
    tick(s);
    s->st.allocs++;
    if (order >= SIM_MAX_ORDER || (unsigned)type > SIM_MOVABLE) { s->st.alloc_fails++; return SIM_NO_HANDLE; }
    uint32_t pfn = policy_rmqueue(s, order, type);
    if (pfn == NIL) { s->st.alloc_fails++; return SIM_NO_HANDLE; }
    return finish_alloc(s, pfn, order, type);
}

sim_handle_t sim_alloc_huge(sim_t *s) {
    tick(s);
    s->st.hp_requests++;
    uint32_t pfn = policy_rmqueue(s, SIM_HUGE_ORDER, SIM_MOVABLE);
    if (pfn != NIL) {
        s->st.hp_from_free++;
    } else {
        int r = compact_zone(s, SIM_HUGE_ORDER, false);
        if (r == COMPACT_SKIPPED) return SIM_NO_HANDLE;
        pfn = policy_rmqueue(s, SIM_HUGE_ORDER, SIM_MOVABLE);
        if (pfn == NIL) return SIM_NO_HANDLE;
        s->st.hp_after_compact++;
    }
    s->st.hp_success++;
    return finish_alloc(s, pfn, SIM_HUGE_ORDER, SIM_MOVABLE);
}

static bool handle_live(const sim_t *s, sim_handle_t h) { return h < s->nr_frames && s->hd[h].state == H_LIVE; }

void sim_free(sim_t *s, sim_handle_t h) {
    tick(s);
    if (!handle_live(s, h)) return;
    s->st.frees++;
    release(s, h);
}

void sim_free_rcu(sim_t *s, sim_handle_t h) {
    tick(s);
    if (!handle_live(s, h)) return;
    s->st.frees++;
    s->st.rcu_deferred++;
    s->st.rcu_pending_pages += 1u << s->hd[h].order;
    s->hd[h].state = H_DEFERRED;
    uint32_t slot = s->rcu_head + s->rcu_len;
    if (slot >= s->nr_frames) slot -= s->nr_frames;
    s->rcu[slot].handle = h;
    s->rcu[slot].deadline = clock_add(s->st.clock_ops, s->cfg.rcu_grace_ops);   /* stays in FIFO order */
    s->rcu_len++;
}

void sim_compact_all(sim_t *s) {
    tick(s);
    compact_zone(s, -1, true);
}

void sim_compact_kswapd(sim_t *s) {
    tick(s);
    s->st.kswapd_compactions++;
    compact_zone(s, SIM_HUGE_ORDER, false);
}

uint32_t sim_handle_pfn(const sim_t *s, sim_handle_t h) {
    return h < s->nr_frames && s->hd[h].state != H_FREE ? s->hd[h].pfn : NIL;
}

void sim_watermarks(const sim_t *s, uint64_t *min_pages, uint64_t *low_pages, uint64_t *high_pages) {
    *min_pages = s->wmark[0];
    *low_pages = s->wmark[1];
    *high_pages = s->wmark[2];
}

void sim_get_stats(const sim_t *s, sim_stats_t *st) { *st = s->st; }
uint64_t sim_now(const sim_t *s) { return s->st.clock_ops; }
uint64_t sim_free_pages(const sim_t *s) { return s->st.free_pages; }

void sim_block_info(const sim_t *s, uint32_t block, sim_block_info_t *out) {
    memset(out, 0, sizeof *out);
    if (block >= s->nr_blocks) return;
    const pageblock_t *p = &s->pb[block];
    out->label = (enum sim_mt)p->label;
    out->free_pages = p->free_pages;
    out->kernel_pages = p->kernel_pages;
    out->movable_pages = p->movable_pages;
    out->reclaimable_pages = p->reclaimable_pages;
}

uint64_t sim_nr_free(const sim_t *s, unsigned order, enum sim_mt type) {
    return order < SIM_MAX_ORDER && (unsigned)type < SIM_NR_MT ? s->nr_free[order][type] : 0;
}
