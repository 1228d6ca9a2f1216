/* spancache.c: a small per-thread cache of freed medium spans, so that
 * programs that churn 8..64 KiB objects do not take the pageheap lock for
 * every malloc and free. A thread keeps at most HPM_SPANCACHE_DEPTH spans
 * of each page count up to HPM_SPANCACHE_MAX_PAGES (about 2 MiB in all).
 * A cached span keeps its pages and its page-map entries, marked
 * LIST_CACHED so that free() and hpm_range() treat it as free. The cache is
 * emptied at thread exit and by malloc_trim/hpm_trim. Owner thread only. */
#include "internal.h"

hpm_span_t *_hpm_spancache_get(hpm_heap_t *h, size_t n_pages) {
    if (n_pages > HPM_SPANCACHE_MAX_PAGES) return NULL;
    hpm_span_t *s = h->span_cache[n_pages];
    if (!s) return NULL;
    h->span_cache[n_pages] = s->next;
    h->span_cache_n[n_pages]--;
    h->span_cache_bytes -= n_pages << HPM_PAGE_SHIFT;
    s->next = NULL;
    s->list = LIST_NONE;
    s->clean = 0;
    return s;
}

bool _hpm_spancache_put(hpm_heap_t *h, hpm_span_t *s) {
    size_t n = s->n_pages;
    if (s->kind != SPAN_MEDIUM || n > HPM_SPANCACHE_MAX_PAGES || h->span_cache_n[n] >= HPM_SPANCACHE_DEPTH ||
        h->span_cache_bytes + (n << HPM_PAGE_SHIFT) > HPM_SPANCACHE_MAX_BYTES)
        return false;
    h->span_cache_bytes += n << HPM_PAGE_SHIFT;
    s->list = LIST_CACHED;
    s->next = h->span_cache[n];
    h->span_cache[n] = s;
    h->span_cache_n[n]++;
    return true;
}

void _hpm_spancache_flush(hpm_heap_t *h) {
    bool any = false;
    for (size_t n = 0; n <= HPM_SPANCACHE_MAX_PAGES && !any; n++) any = h->span_cache[n] != NULL;
    if (!any) return;
    pthread_mutex_lock(&_hpm_ph.lock);
    for (size_t n = 0; n <= HPM_SPANCACHE_MAX_PAGES; n++) {
        for (hpm_span_t *s = h->span_cache[n], *next; s; s = next) {
            next = s->next;
            s->next = NULL;
            s->list = LIST_NONE;
            _hpm_ph_free_span(&_hpm_ph, s);
        }
        h->span_cache[n] = NULL;
        h->span_cache_n[n] = 0;
    }
    h->span_cache_bytes = 0;
    pthread_mutex_unlock(&_hpm_ph.lock);
}
