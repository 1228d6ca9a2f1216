/* wl_server.c: a long-running server's memory, as a mixed load:
 *   - anonymous memory (MOVABLE) whose target size swings between 10% and
 *     60% of memory over the run; it grows by transparent-huge-page
 *     requests every hp_every_ops operations (falling back to 512 order-0
 *     pages) and by order-0 faults, and shrinks by freeing random entries;
 *     one UNMOVABLE page-table page per 2 MiB of it;
 *   - a page cache: file pages (MOVABLE: Linux allocates page cache with
 *     __GFP_MOVABLE) plus one RECLAIMABLE slab page (dentries, inodes) per
 *     16 of them; it grows by reads and is reclaimed oldest first;
 *   - kernel slab (UNMOVABLE, orders 0-3) held near 5% of memory and
 *     churned: every slab allocation is matched by the free of a random
 *     slab page, rcu_pct% of them RCU-deferred;
 *   - kswapd: when free memory falls below the low watermark, the oldest
 *     cache is reclaimed until it is above the high watermark again, and a
 *     failed huge-page request wakes it to reclaim until compaction would
 *     be suitable and then to compact for order 9 in the background; an
 *     allocation that fails reclaims and retries once (direct reclaim).
 * Sizes are fractions of the simulated memory, so the shape does not
 * depend on --mem. */
#include <math.h>
#include <stdlib.h>
#include "workload.h"

typedef struct {
    idvec_t anon, slab, pt;
    uint32_t *cache, *rslab;        /* FIFO rings */
    size_t cache_head, cache_n, rslab_head, rslab_n, ring_cap;
    uint64_t anon_pages, frames, wm_low, wm_high;
} server_t;

static void reclaim(wctx_t *w, server_t *sv, uint64_t goal_free) {
    while (w_free_pages(w) < goal_free && (sv->cache_n || sv->rslab_n) && !w->error) {
        for (int i = 0; i < 32 && sv->cache_n; i++) {
            w_free(w, sv->cache[sv->cache_head]);
            sv->cache_head = (sv->cache_head + 1) % sv->ring_cap;
            sv->cache_n--;
        }
        if (sv->rslab_n) {
            w_free(w, sv->rslab[sv->rslab_head]);
            sv->rslab_head = (sv->rslab_head + 1) % sv->ring_cap;
            sv->rslab_n--;
        }
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

static void ring_push(server_t *sv, uint32_t *ring, size_t head, size_t *n, uint32_t id) {
    if (*n == sv->ring_cap) return;
    ring[(head + *n) % sv->ring_cap] = id;
    (*n)++;
}

static void anon_grow(wctx_t *w, server_t *sv, bool huge) {
    uint32_t id;
    if ((sv->anon_pages / 512 + 1) > sv->pt.n) {
        if (!alloc_retry(w, sv, 0, SIM_UNMOVABLE, &id)) return;
        idvec_push(w, &sv->pt, id);
    }
    if (huge) {
        if (w_huge(w, &id)) {
            if (id & 0x80000000u) {   /* the top bit marks huge entries below */
                snprintf(w->err, w->err_len, "server: more than 2^31 ids; run fewer --ops");
                w->error = 1;
                return;
            }
            idvec_push(w, &sv->anon, id | 0x80000000u);
            sv->anon_pages += 512;
            return;
        }
        /* The failed THP allocation wakes kswapd for order 9: it reclaims
         * until compaction would be suitable (free >= low + 2^10) and the
         * high watermark is met (Linux 4.5 kswapd_shrink_zone), then, having
         * reclaimed something, compacts for order 9 (compact_pgdat). */
        uint64_t goal = sv->wm_low + (2u << SIM_HUGE_ORDER), before = w_free_pages(w);
        reclaim(w, sv, goal > sv->wm_high ? goal : sv->wm_high);
        if (w_free_pages(w) > before) w_kswapd_compact(w);
        for (int i = 0; i < 512; i++) {
            if (!alloc_retry(w, sv, 0, SIM_MOVABLE, &id)) return;
            idvec_push(w, &sv->anon, id);
            sv->anon_pages++;
        }
        return;
    }
    if (alloc_retry(w, sv, 0, SIM_MOVABLE, &id)) {
        idvec_push(w, &sv->anon, id);
        sv->anon_pages++;
    }
}

static void anon_shrink(wctx_t *w, server_t *sv) {
    if (!sv->anon.n) return;
    uint32_t e = idvec_take(&sv->anon, w_below(w, sv->anon.n));
    w_free(w, e & 0x7fffffffu);
    sv->anon_pages -= (e & 0x80000000u) ? 512 : 1;
    while (sv->pt.n > sv->anon_pages / 512 + 1) w_free(w, sv->pt.v[--sv->pt.n]);
}

static void cache_read(wctx_t *w, server_t *sv, uint64_t step) {
    uint32_t id;
    if (!alloc_retry(w, sv, 0, SIM_MOVABLE, &id)) return;
    ring_push(sv, sv->cache, sv->cache_head, &sv->cache_n, id);
    if (step % 16 == 0 && alloc_retry(w, sv, 0, SIM_RECLAIMABLE, &id))
        ring_push(sv, sv->rslab, sv->rslab_head, &sv->rslab_n, id);
}

static void slab_churn(wctx_t *w, server_t *sv, const sim_workload_t *c) {
    uint64_t r = w_below(w, 100);
    unsigned order = r < 85 ? 0 : r < 93 ? 1 : r < 97 ? 2 : 3;
    uint32_t id;
    if (alloc_retry(w, sv, order, SIM_UNMOVABLE, &id)) idvec_push(w, &sv->slab, id);
    uint64_t target = sv->frames / 20 / 2;   /* ~5% of memory at a mean of 2 pages each */
    if (sv->slab.n > target) {
        uint32_t victim = idvec_take(&sv->slab, w_below(w, sv->slab.n));
        if (w_below(w, 100) < c->rcu_pct) w_free_rcu(w, victim); else w_free(w, victim);
    }
}

int wl_server(wctx_t *w, const sim_workload_t *c) {
    sim_stats_t st;
    sim_get_stats(w->sim, &st);
    server_t sv = {.frames = st.total_pages, .ring_cap = st.total_pages};
    uint64_t wmin;
    sim_watermarks(w->sim, &wmin, &sv.wm_low, &sv.wm_high);
    sv.cache = malloc(sv.ring_cap * sizeof(uint32_t));
    sv.rslab = malloc(sv.ring_cap * sizeof(uint32_t));
    if (!sv.cache || !sv.rslab) { snprintf(w->err, w->err_len, "out of memory"); w->error = 1; }
    const double two_pi = 6.283185307179586;
    uint64_t period = c->ops / 3 ? c->ops / 3 : 1, next_hp = c->hp_every_ops;
    for (uint64_t step = 0; !w->error; step++) {
        uint64_t now = sim_now(w->sim);
        if (now >= c->ops) break;
        double phase = (double)(now % period) / (double)period;
        uint64_t anon_target = (uint64_t)((double)sv.frames * (0.35 - 0.25 * cos(two_pi * phase)));
        if (sv.anon_pages < anon_target) {
            bool huge = c->hp_every_ops && now >= next_hp;
            if (huge) next_hp = now + c->hp_every_ops;
            anon_grow(w, &sv, huge);
        } else if (sv.anon_pages > anon_target + 512) {
            anon_shrink(w, &sv);
        }
        cache_read(w, &sv, step);
        slab_churn(w, &sv, c);
        kswapd(w, &sv);
    }
    idvec_free(&sv.anon); idvec_free(&sv.slab); idvec_free(&sv.pt);
    free(sv.cache); free(sv.rslab);
    return w->error ? -1 : 0;
}
