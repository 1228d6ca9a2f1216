/* stats.c: the counters. The pageheap keeps its own counts; this layer
 * pulls them into *_hpm_stats (the published area) whenever they change
 * (the pageheap's on_change hook, set by _hpm_stats_watch) and on every
 * full refresh (hpm_stats_get, the background tick); bytes in use is
 * summed over the thread heaps on every 16th change and on each full
 * refresh. It only reads the layers below (heaps, slabs, pageheap,
 * metadata) and never writes them; the API (hpm_stats_get/print, the
 * HPM_STATS report) is in control.c. */
#include "internal.h"

static hpm_stats_t stats_static;
hpm_stats_t *_hpm_stats = &stats_static;

/* Counters are read live by other threads (hpm_stats_get, hpm stat):
 * every store is a relaxed atomic. */
static inline void set(uint64_t *field, uint64_t v) { __atomic_store_n(field, v, __ATOMIC_RELAXED); }

/* Pulls the pageheap's counts into the counters (hpm stat reads them
 * live). The caller holds ph->lock. The sum over thread heaps (bytes in
 * use) is taken on every 16th change only, and by every full refresh. */
static void stats_pull(const hpm_pageheap_t *ph, bool sum_heaps) {
    hpm_stats_t *s = _hpm_stats;
    set(&s->hp_in_use, ph->active_count);
    set(&s->hp_cached, ph->cache_count);
    set(&s->hp_backed, ph->active_count + ph->cache_count);
    set(&s->hp_released, ph->released_total);
    set(&s->hp_hybrid, ph->hybrid_count);
    set(&s->hp_hugetlb, ph->hugetlb_hp);
    set(&s->hp_fallback, ph->fallback_total);
    set(&s->large_allocs, ph->large_allocs_total);
    set(&s->pages_subreleased, ph->subrel_pages + __atomic_load_n(&_hpm_slab_held_pages, __ATOMIC_RELAXED));
    set(&s->bytes_mapped, (uint64_t)ph->top_hp << HPM_HP_SHIFT);
    set(&s->bytes_metadata, _hpm_meta_committed_bytes());
    if (sum_heaps) {
        int64_t used = _hpm_heaps_used_bytes();
        set(&s->bytes_in_use, used > 0 ? (uint64_t)used : 0);
    }
}

static void stats_on_change(const hpm_pageheap_t *ph) {
    static unsigned calls;
    stats_pull(ph, (calls++ & 15) == 0);
}

void _hpm_stats_watch(hpm_pageheap_t *ph) {
    pthread_mutex_lock(&ph->lock);
    ph->on_change = stats_on_change;
    stats_pull(ph, false);   /* the heaps are not set up yet */
    hpm_ph_unlock(ph);
}

/* Refresh every counter that is computed rather than kept. */
void _hpm_stats_refresh(void) {
    hpm_pageheap_t *ph = &_hpm_ph;
    pthread_mutex_lock(&ph->lock);
    stats_pull(ph, true);
    hpm_ph_unlock(ph);
}

void _hpm_stats_refresh_light(void) { if (atomic_load(&_hpm_ready) == 2) _hpm_stats_refresh(); }
