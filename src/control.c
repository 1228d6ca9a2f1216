/* control.c: the public API that controls and observes the allocator:
 * options (hpm_option_get/set: a change reaches the pageheap through one
 * call, hpm_options_apply) and counters (hpm_stats_get/print, and the
 * HPM_STATS=1 report at exit), and glibc's names for the same (mallinfo,
 * mallinfo2, malloc_stats, malloc_info, mallopt), so that a program that
 * reports its heap with them reads hpmalloc's heap, not glibc's empty
 * one. It sits at the top with alloc.c: it may start the allocator
 * (hpm_ensure_init) and calls only layers below. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"

HPM_API long hpm_option_get(hpm_option_t opt) {
    if ((unsigned)opt >= HPM_OPT_COUNT) { errno = EINVAL; return -1; }
    hpm_ensure_init();
    return _hpm_option(opt);
}

/* One setter at a time: the check of a value against the others (the
 * colour mask and count), its store and the apply that reads the options
 * back are one step. Before, two setters at once could pass both colour
 * checks, or the one that applied last could apply the value it had read
 * before the other's store (session 50's review). Taken before the
 * pageheap's lock. */
static pthread_mutex_t options_lock = PTHREAD_MUTEX_INITIALIZER;

HPM_API int hpm_option_set(hpm_option_t opt, long value) {
    if (!_hpm_option_valid(opt, value)) { errno = EINVAL; return -1; }
    hpm_ensure_init();
    pthread_mutex_lock(&options_lock);
    int err = _hpm_option_store(opt, value);
    if (!err) hpm_options_apply(&_hpm_ph);
    if (!err && (opt == HPM_OPT_CCOW || opt == HPM_OPT_CCOW_RATE) && _hpm_ccow_option_set) _hpm_ccow_option_set(opt, value);
    pthread_mutex_unlock(&options_lock);
    if (err) { errno = err; return -1; }
    if (opt == HPM_OPT_RELEASE_DELAY_MS) _hpm_background_wake();   /* a shorter window counts at once */
    return 0;
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

HPM_API void hpm_stats_get(hpm_stats_t *out) {
    hpm_ensure_init();
    _hpm_stats_refresh();
    char buf[2048];
    if (_hpm_os->read_file("/proc/self/smaps_rollup", buf, sizeof buf) > 0) {
        __atomic_store_n(&_hpm_stats->thp_anon_bytes, smaps_field_kb(buf, "\nAnonHugePages") * 1024, __ATOMIC_RELAXED);
        __atomic_store_n(&_hpm_stats->anon_bytes, smaps_field_kb(buf, "\nAnonymous") * 1024, __ATOMIC_RELAXED);
    }
    _hpm_copy_words_relaxed(out, _hpm_stats, sizeof *out);
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

#ifndef HPM_NO_OVERRIDE
/* ---- glibc's introspection names (docs/allocator.md, "glibc's mallinfo
 * and mallopt") ----
 * mallinfo2's fields, from the counters: arena, the memory the heap holds
 * from the system (backed hugepages, less the 4 KiB pages given back
 * inside them; metadata is left out: it is committed far ahead of what
 * it writes, 19 MB for `python3 -c pass`); uordblks, the usable bytes of
 * live allocations (exact after the refresh); fordblks, the rest of
 * arena; keepcost, the empty hugepages kept backed for reuse. The heap
 * has no mmapped chunks apart from it (hblks, hblkhd 0) and no chunk
 * lists (ordblks, smblks, fsmblks 0). */
static struct mallinfo2 info_now(void) {
    hpm_ensure_init();
    _hpm_stats_refresh();
    hpm_stats_t s;
    _hpm_copy_words_relaxed(&s, _hpm_stats, sizeof s);
    size_t backed = (size_t)s.hp_backed << HPM_HP_SHIFT, given = (size_t)s.pages_subreleased << HPM_PAGE_SHIFT;
    struct mallinfo2 mi = {0};
    mi.arena = backed > given ? backed - given : 0;
    mi.uordblks = s.bytes_in_use < mi.arena ? s.bytes_in_use : mi.arena;
    mi.fordblks = mi.arena - mi.uordblks;
    mi.keepcost = (size_t)s.hp_cached << HPM_HP_SHIFT;
    return mi;
}

HPM_API struct mallinfo2 mallinfo2(void) { return info_now(); }

/* The old int fields saturate at INT_MAX, where glibc's wrap. */
HPM_API struct mallinfo mallinfo(void) {
    struct mallinfo2 m = info_now();
#define INT_OF(v) ((v) > (size_t)INT_MAX ? INT_MAX : (int)(v))
    struct mallinfo mi = {.arena = INT_OF(m.arena), .uordblks = INT_OF(m.uordblks), .fordblks = INT_OF(m.fordblks),
                          .keepcost = INT_OF(m.keepcost)};
#undef INT_OF
    return mi;
}

HPM_API void malloc_stats(void) { hpm_stats_print(NULL, NULL); }

/* glibc's XML shape, with hpmalloc's own elements; options must be 0. */
HPM_API int malloc_info(int options, FILE *fp) {
    if (options != 0 || !fp) { errno = EINVAL; return -1; }
    struct mallinfo2 m = info_now();
    hpm_stats_t s;
    _hpm_copy_words_relaxed(&s, _hpm_stats, sizeof s);
    fprintf(fp, "<malloc version=\"hpmalloc-%s\">\n", HPM_VERSION);
    fprintf(fp, "<total type=\"in-use\" size=\"%zu\"/>\n<total type=\"free\" size=\"%zu\"/>\n", m.uordblks, m.fordblks);
    fprintf(fp, "<total type=\"metadata\" size=\"%llu\"/>\n", (unsigned long long)s.bytes_metadata);
    fprintf(fp, "<hugepages backed=\"%llu\" in-use=\"%llu\" cached=\"%llu\" hybrid=\"%llu\" released=\"%llu\"/>\n",
            (unsigned long long)s.hp_backed, (unsigned long long)s.hp_in_use, (unsigned long long)s.hp_cached,
            (unsigned long long)s.hp_hybrid, (unsigned long long)s.hp_released);
    fprintf(fp, "<system type=\"current\" size=\"%zu\"/>\n", m.arena);
    fprintf(fp, "<aspace type=\"total\" size=\"%llu\"/>\n</malloc>\n", (unsigned long long)s.arena_reserved_bytes);
    return ferror(fp) ? -1 : 0;
}

/* glibc's tuning parameters (M_MMAP_THRESHOLD, M_ARENA_MAX, ...) are
 * accepted and ignored, and so is any other, as glibc does (1): hpmalloc's
 * own options (HPM_*) tune the heap. */
HPM_API int mallopt(int param, int value) {
    (void)param;
    (void)value;
    return 1;
}
#endif /* HPM_NO_OVERRIDE */

__attribute__((destructor)) static void stats_at_exit(void) {
    if (atomic_load(&_hpm_ready) == 2 && _hpm_option(HPM_OPT_STATS)) hpm_stats_print(NULL, NULL);
}
