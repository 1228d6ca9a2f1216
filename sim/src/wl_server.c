/* wl_server.c: a long-running server whose kernel memory keeps changing:
 *   - anonymous memory (MOVABLE) whose target swings between 10% and 60%
 *     of memory, three times over the run ("load"); it grows by
 *     transparent-huge-page requests every hp_every_ops operations (falling
 *     back to 512 order-0 pages) and by order-0 faults, and shrinks by
 *     freeing random entries; one UNMOVABLE page-table page per 2 MiB;
 *   - a page cache of file pages (MOVABLE, as Linux allocates page cache
 *     with __GFP_MOVABLE), grown by reads and reclaimed oldest first;
 *   - a dentry/inode cache (RECLAIMABLE slab pages) that grows through the
 *     run, from 0.5% of memory to dcache_end_pct (the server keeps touching
 *     new files); reclaim shrinks it too (one slab page per 32 file pages
 *     reclaimed, a random one: a slab page is freed when its last object
 *     goes, whatever its age), and dentries and inodes are freed after an
 *     RCU grace period (d_free and destroy_inode use call_rcu);
 *   - kernel slab (UNMOVABLE, orders 0-3: kmalloc, sockets, files) whose
 *     target follows the load, from 2% to 8% of memory, and churns: every
 *     slab allocation is matched by the free of a random slab page when
 *     above target, rcu_pct% of them RCU-deferred (file_free, for one);
 *   - kswapd: when free memory falls below the low watermark, reclaim until
 *     the high one; a failed huge-page request wakes it to reclaim until
 *     compaction would be suitable and then to compact for order 9 in the
 *     background; an allocation that fails reclaims and retries once.
 * Sizes are fractions of the simulated memory, so the shape does not
 * depend on --mem. */
#include <math.h>
#include <stdlib.h>
#include "workload.h"

#define SLAB_PER_RECLAIM 32   /* file pages reclaimed per dentry/inode slab page shrunk */

typedef struct {
    idvec_t anon, slab, dcache, pt;
    uint32_t *cache;                /* FIFO ring of page-cache ids */
    size_t cache_head, cache_n, ring_cap;
    uint64_t anon_pages, frames, wm_low, wm_high, reclaimed;
} server_t;

static void shrink_dcache(wctx_t *w, server_t *sv) {
    if (!sv->dcache.n) return;
    w_free_rcu(w, idvec_take(&sv->dcache, w_below(w, sv->dcache.n)));
}

static void reclaim(wctx_t *w, server_t *sv, uint64_t goal_free) {
    while (w_free_pages(w) < goal_free && sv->cache_n && !w->error) {
        w_free(w, sv->cache[sv->cache_head]);
        sv->cache_head = (sv->cache_head + 1) % sv->ring_cap;
        sv->cache_n--;
        if (++sv->reclaimed % SLAB_PER_RECLAIM == 0) shrink_dcache(w, sv);
    }
}

static void kswapd(wctx_t *w, server_t *sv) {
    if (w_free_pages(w) < sv->wm_low) reclaim(w, sv, sv->wm_high);
}

/* An allocation with one direct-reclaim retry. */
static int alloc_retry(wctx_t *w, server_t *sv, unsigned order, enum sim_mt type, uint32_t *id) {
    if (w_alloc(w, order, type, id, NULL)) return 1;
    reclaim(w, sv, sv->wm_high + (1u << order));
    return w_alloc(w, order, type, id, NULL);
}

static void anon_add(wctx_t *w, server_t *sv, uint32_t id, unsigned pages) {
    if (id & 0x80000000u) {   /* the top bit marks huge entries */
        snprintf(w->err, w->err_len, "server: more than 2^31 ids; run fewer --ops");
        w->error = 1;
        return;
    }
    idvec_push(w, &sv->anon, pages == 512 ? id | 0x80000000u : id);
    sv->anon_pages += pages;
}

/* A failed THP allocation wakes kswapd for order 9: it reclaims until
 * compaction would be suitable (free >= low + 2^10) and the high watermark
 * is met (Linux 4.5 kswapd_shrink_zone), then, having reclaimed something,
 * compacts for order 9 (compact_pgdat); the fault takes 512 base pages. */
static void thp_fallback(wctx_t *w, server_t *sv) {
    uint64_t goal = sv->wm_low + (2u << SIM_HUGE_ORDER), before = w_free_pages(w);
    reclaim(w, sv, goal > sv->wm_high ? goal : sv->wm_high);
    if (w_free_pages(w) > before) w_kswapd_compact(w);
    uint32_t id;
    for (int i = 0; i < 512 && !w->error; i++) {
        if (!alloc_retry(w, sv, 0, SIM_MOVABLE, &id)) return;
        anon_add(w, sv, id, 1);
    }
}

static void anon_grow(wctx_t *w, server_t *sv, bool huge) {
    uint32_t id;
    if ((sv->anon_pages / 512 + 1) > sv->pt.n) {
        if (!alloc_retry(w, sv, 0, SIM_UNMOVABLE, &id)) return;
        idvec_push(w, &sv->pt, id);
    }
    if (!huge) {
        if (alloc_retry(w, sv, 0, SIM_MOVABLE, &id)) anon_add(w, sv, id, 1);
        return;
    }
    if (w_huge(w, &id)) anon_add(w, sv, id, 512);
    else thp_fallback(w, sv);
}

static void anon_shrink(wctx_t *w, server_t *sv) {
    if (!sv->anon.n) return;
    uint32_t e = idvec_take(&sv->anon, w_below(w, sv->anon.n));
    w_free(w, e & 0x7fffffffu);
    sv->anon_pages -= (e & 0x80000000u) ? 512 : 1;
    while (sv->pt.n > sv->anon_pages / 512 + 1) w_free(w, sv->pt.v[--sv->pt.n]);
}

static void cache_read(wctx_t *w, server_t *sv) {
    uint32_t id;
    if (!alloc_retry(w, sv, 0, SIM_MOVABLE, &id) || sv->cache_n == sv->ring_cap) return;
    sv->cache[(sv->cache_head + sv->cache_n) % sv->ring_cap] = id;
    sv->cache_n++;
}

static void dcache_grow(wctx_t *w, server_t *sv, double progress, const sim_workload_t *c) {
    double pct = 0.5 + ((double)c->dcache_end_pct - 0.5) * progress;
    uint32_t id;
    if ((double)sv->dcache.n < (double)sv->frames * pct / 100.0 && alloc_retry(w, sv, 0, SIM_RECLAIMABLE, &id))
        idvec_push(w, &sv->dcache, id);
}

static void slab_churn(wctx_t *w, server_t *sv, double load, const sim_workload_t *c) {
    uint64_t r = w_below(w, 100);
    unsigned order = r < 85 ? 0 : r < 93 ? 1 : r < 97 ? 2 : 3;
    uint32_t id;
    if (alloc_retry(w, sv, order, SIM_UNMOVABLE, &id)) idvec_push(w, &sv->slab, id);
    double target = (double)sv->frames * (0.02 + 0.06 * load) / 2;   /* mean 2 pages a slab entry */
    if ((double)sv->slab.n > target) {
        uint32_t victim = idvec_take(&sv->slab, w_below(w, sv->slab.n));
        if (w_below(w, 100) < c->rcu_pct) w_free_rcu(w, victim); else w_free(w, victim);
    }
}

static void server_step(wctx_t *w, server_t *sv, const sim_workload_t *c, uint64_t now, uint64_t *next_hp) {
    uint64_t period = c->ops / 3 ? c->ops / 3 : 1;
    double load = 0.5 - 0.5 * cos(6.283185307179586 * (double)(now % period) / (double)period);
    uint64_t anon_target = (uint64_t)((double)sv->frames * (0.10 + 0.50 * load));
    if (sv->anon_pages < anon_target) {
        bool huge = c->hp_every_ops && now >= *next_hp;
        if (huge) *next_hp = now + c->hp_every_ops;
        anon_grow(w, sv, huge);
    } else if (sv->anon_pages > anon_target + 512) {
        anon_shrink(w, sv);
    }
    cache_read(w, sv);
    dcache_grow(w, sv, (double)now / (double)(c->ops ? c->ops : 1), c);
    slab_churn(w, sv, load, c);
    kswapd(w, sv);
}

int wl_server(wctx_t *w, const sim_workload_t *c) {
    sim_stats_t st;
    sim_get_stats(w->sim, &st);
    server_t sv = {.frames = st.total_pages, .ring_cap = st.total_pages};
    uint64_t wmin, next_hp = c->hp_every_ops;
    sim_watermarks(w->sim, &wmin, &sv.wm_low, &sv.wm_high);
    sv.cache = malloc(sv.ring_cap * sizeof(uint32_t));
    if (!sv.cache) { snprintf(w->err, w->err_len, "out of memory"); w->error = 1; }
    for (uint64_t now; !w->error && (now = sim_now(w->sim)) < c->ops;) server_step(w, &sv, c, now, &next_hp);
    idvec_free(&sv.anon); idvec_free(&sv.slab); idvec_free(&sv.dcache); idvec_free(&sv.pt);
    free(sv.cache);
    return w->error ? -1 : 0;
}
