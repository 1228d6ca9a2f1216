/* stats.c: the counters. The pageheap keeps its own counts; this layer
 * pulls them into *_hpm_stats (the published area) whenever they change
 * (the pageheap's on_change hook, set by _hpm_stats_watch) and on every
 * hpm_stats_get; bytes in use is summed over the thread heaps on every
 * 16th change and on each full refresh, and THP coverage is read from
 * /proc/self/smaps_rollup. Printing goes through a callback, one line at a
 * time, so nothing here uses stdio streams. HPM_STATS=1 prints at exit. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

static hpm_stats_t stats_static;
hpm_stats_t *_hpm_stats = &stats_static;

void _hpm_message(const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    _hpm_os->write_err(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static uint64_t smaps_field_kb(const char *text, const char *name) {
    const char *p = strstr(text, name);
    if (!p) return 0;
    p += strlen(name);
    while (*p == ' ' || *p == ':' || *p == '\t') p++;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
    return v;
}

/* Pulls the pageheap's counts into the counters (hpm stat reads them
 * live). The caller holds ph->lock. The sum over thread heaps (bytes in
 * use) is taken on every 16th change only, and by every full refresh. */
static void stats_pull(const hpm_pageheap_t *ph, bool sum_heaps) {
    hpm_stats_t *s = _hpm_stats;
    s->hp_in_use = ph->active_count;
    s->hp_cached = ph->cache_count;
    s->hp_backed = ph->active_count + ph->cache_count;
    s->hp_released = ph->released_total;
    s->hp_hybrid = ph->hybrid_count;
    s->hp_hugetlb = ph->hugetlb_hp;
    s->hp_fallback = ph->fallback_total;
    s->large_allocs = ph->large_allocs_total;
    s->pages_subreleased = ph->subrel_pages + __atomic_load_n(&_hpm_slab_held_pages, __ATOMIC_RELAXED);
    s->bytes_mapped = (uint64_t)ph->top_hp << HPM_HP_SHIFT;
    s->bytes_metadata = _hpm_meta_committed_bytes();
    if (sum_heaps) {
        int64_t used = _hpm_heaps_used_bytes();
        s->bytes_in_use = used > 0 ? (uint64_t)used : 0;
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
    pthread_mutex_unlock(&ph->lock);
}

/* Refresh every counter that is computed rather than kept. */
static void stats_refresh(void) {
    hpm_pageheap_t *ph = &_hpm_ph;
    pthread_mutex_lock(&ph->lock);
    stats_pull(ph, true);
    pthread_mutex_unlock(&ph->lock);
}

void _hpm_stats_refresh_light(void) { if (atomic_load(&_hpm_ready) == 2) stats_refresh(); }

HPM_API void hpm_stats_get(hpm_stats_t *out) {
    hpm_ensure_init();
    stats_refresh();
    char buf[2048];
    if (_hpm_os->read_file("/proc/self/smaps_rollup", buf, sizeof buf) > 0) {
        _hpm_stats->thp_anon_bytes = smaps_field_kb(buf, "\nAnonHugePages") * 1024;
        _hpm_stats->anon_bytes = smaps_field_kb(buf, "\nAnonymous") * 1024;
    }
    memcpy(out, _hpm_stats, sizeof *out);
}

static void print_to_stderr(const char *line, void *arg) {
    (void)arg;
    _hpm_os->write_err(line, strlen(line));
}

HPM_API void hpm_stats_print(hpm_output_fn *out, void *arg) {
    if (!out) out = print_to_stderr;
    hpm_stats_t s;
    hpm_stats_get(&s);
    char line[256];
    double cov = s.anon_bytes ? 100.0 * (double)s.thp_anon_bytes / (double)s.anon_bytes : 0.0;
#define LINE(...) do { snprintf(line, sizeof line, __VA_ARGS__); out(line, arg); } while (0)
    LINE("hpmalloc: stats for pid %d (hpmalloc %s)\n", (int)getpid(), HPM_VERSION);
    LINE("hpmalloc:   pages %s, system THP %s\n", s.page_mode, s.thp_system);
    LINE("hpmalloc:   bytes in use         %12llu\n", (unsigned long long)s.bytes_in_use);
    LINE("hpmalloc:   bytes mapped (arena) %12llu\n", (unsigned long long)s.bytes_mapped);
    LINE("hpmalloc:   bytes metadata       %12llu\n", (unsigned long long)s.bytes_metadata);
    LINE("hpmalloc:   hugepages backed     %12llu (in use %llu, cached %llu)\n", (unsigned long long)s.hp_backed,
         (unsigned long long)s.hp_in_use, (unsigned long long)s.hp_cached);
    LINE("hpmalloc:   hugepages released   %12llu\n", (unsigned long long)s.hp_released);
    LINE("hpmalloc:   hybrid hugepages     %12llu\n", (unsigned long long)s.hp_hybrid);
    LINE("hpmalloc:   hugetlb hugepages    %12llu (fallbacks to THP %llu)\n", (unsigned long long)s.hp_hugetlb,
         (unsigned long long)s.hp_fallback);
    LINE("hpmalloc:   pages subreleased    %12llu\n", (unsigned long long)s.pages_subreleased);
    LINE("hpmalloc:   large allocations    %12llu\n", (unsigned long long)s.large_allocs);
    LINE("hpmalloc:   THP coverage         %11.1f%% (AnonHugePages %llu KiB of Anonymous %llu KiB)\n", cov,
         (unsigned long long)(s.thp_anon_bytes >> 10), (unsigned long long)(s.anon_bytes >> 10));
    LINE("hpmalloc:   ccow                 %s; forks %llu, regions pre-copied %llu, bytes %llu, faults avoided ~%llu\n",
         s.ccow_state[0] ? s.ccow_state : "off", (unsigned long long)s.ccow_forks,
         (unsigned long long)s.ccow_regions_precopied, (unsigned long long)s.ccow_bytes_precopied,
         (unsigned long long)s.ccow_faults_avoided);
#undef LINE
}

__attribute__((destructor)) static void stats_at_exit(void) {
    if (atomic_load(&_hpm_ready) == 2 && _hpm_option(HPM_OPT_STATS)) hpm_stats_print(NULL, NULL);
}
