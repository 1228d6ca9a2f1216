/* test_kernel.c: the allocator against the real kernel. A 256 MiB heap of
 * mixed small objects must sit at least 95% in huge pages (AnonHugePages
 * over Anonymous, from /proc/self/smaps_rollup), every object keeps its
 * contents, and once everything is freed and the release window has
 * passed, RSS falls back without any further allocator call (the
 * background release thread).
 *
 * Two allowances for a loaded machine (session 52; the test once failed
 * in 16 runs while other jobs loaded it, and did not say which check):
 * the coverage may fall short by what the kernel itself could not give
 * (/proc/vmstat thp_fault_fallback during the run: memory fragmented by
 * what ran before, as tests/scripts/pages_modes.sh allows), and the
 * release is awaited for up to 10 s instead of a fixed 2 s. Every check
 * says what it measured when it fails. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <malloc.h>
#include "hpmalloc.h"
#include "testhelper.h"

static long smaps_kb(const char *field) { return th_field_kb("/proc/self/smaps_rollup", field); }

/* A counter of /proc/vmstat, or -1. */
static long vmstat_of(const char *name) {
    FILE *f = fopen("/proc/vmstat", "r");
    if (!f) return -1;
    char key[64];
    long v, found = -1;
    while (fscanf(f, "%63s %ld", key, &v) == 2)
        if (strcmp(key, name) == 0) { found = v; break; }
    fclose(f);
    return found;
}

int main(void) {
    CHECK(hpm_option_set(HPM_OPT_RELEASE_DELAY_MS, 300) == 0);
    long rss0 = smaps_kb("Rss");
    long fallback0 = vmstat_of("thp_fault_fallback");
    const size_t target = (size_t)256 << 20;
    size_t n = 0, total = 0, cap = target / 16;
    void **ptrs = malloc(cap * sizeof *ptrs);   /* itself a large allocation */
    uint32_t x = 2463534242u;
    while (total < target && n < cap) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        size_t size = 16 + (x % 8 == 0 ? x % 2048 : x % 240);
        unsigned char *p = malloc(size);
        if (!p) break;
        memset(p, (int)(n & 0xff), size);
        ptrs[n++] = p;
        total += size;
    }
    CHECK(total >= target, "allocated %zu bytes", total);
    /* The first 16 MiB (the small start) are collapsed by a thread of the
     * library's own once the heap holds 32 hugepages (collapse.c): on a fast
     * machine the loop may end before that thread does, so look again for
     * up to 3 s. */
    long anon = 0, huge = 0;
    double cov = 0;
    int looks = 0;
    do {
        if (looks) usleep(50 * 1000);
        anon = smaps_kb("Anonymous");
        huge = smaps_kb("AnonHugePages");
        cov = anon > 0 ? 100.0 * (double)huge / (double)anon : 0;
    } while (cov < 95.0 && ++looks < 60);
    printf("256 MiB mixed small objects: AnonHugePages %ld KiB of Anonymous %ld KiB = %.1f%% (after %d ms)\n", huge, anon,
           cov, looks * 50);
    /* Short of 95%, the shortfall must be the kernel's: each THP fault
     * fallback (system-wide, an upper bound on ours) cost at most one hugepage. */
    long fallbacks = vmstat_of("thp_fault_fallback") - fallback0;
    long short_kb = (long)(0.95 * (double)anon) - huge;
    if (cov < 95.0) printf("coverage %.1f%%: %ld KiB short of 95%%; kernel THP fault fallbacks: %ld\n", cov, short_kb, fallbacks);
    CHECK(cov >= 95.0 || (fallbacks > 0 && short_kb <= fallbacks * 2048), "coverage %.1f%% < 95%%, %ld KiB short, %ld fallbacks",
          cov, short_kb, fallbacks);
    hpm_stats_t st;
    hpm_stats_get(&st);
    CHECK(st.bytes_in_use >= total, "bytes_in_use %llu < %zu", (unsigned long long)st.bytes_in_use, total);
    CHECK(st.hp_in_use >= target / (2 << 20), "hugepages in use %llu", (unsigned long long)st.hp_in_use);
    /* contents survive; every interior pointer maps back to its block */
    size_t bad = 0, bad_range = 0;
    x = 2463534242u;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        size_t size = 16 + (x % 8 == 0 ? x % 2048 : x % 240);
        unsigned char *p = ptrs[i];
        if (p[0] != (unsigned char)(i & 0xff) || p[size - 1] != (unsigned char)(i & 0xff)) bad++;
        void *base; size_t usable;
        if (!hpm_range(p + size / 2, &base, &usable) || base != p || usable < size) bad_range++;
    }
    CHECK(bad == 0, "%zu blocks lost their contents", bad);
    CHECK(bad_range == 0, "%zu blocks with a wrong range", bad_range);
    long rss_full = smaps_kb("Rss");
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
    free(ptrs);
    long added = rss_full - rss0;
    /* The window is 300 ms and the background thread ticks every 75 ms, so
     * this takes about 0.4 s; up to 10 s for a loaded machine. */
    long rss_after = 0;
    int waited_ms = 0;
    do {
        usleep(100 * 1000);
        waited_ms += 100;
        rss_after = smaps_kb("Rss");
    } while (rss_after - rss0 >= added / 10 && waited_ms < 10000);
    hpm_stats_get(&st);
    printf("RSS: start %ld KiB, full %ld KiB, %d ms after freeing %ld KiB; hugepages released %llu, cached %llu\n",
           rss0, rss_full, waited_ms, rss_after, (unsigned long long)st.hp_released, (unsigned long long)st.hp_cached);
    CHECK(added > 200 * 1024, "RSS grew by %ld KiB", added);
    CHECK(rss_after - rss0 < added / 10, "RSS did not fall back: %ld KiB", rss_after);
    malloc_trim(0);   /* also gives back this thread's empty current slabs */
    long rss_trim = smaps_kb("Rss");
    printf("RSS after malloc_trim: %ld KiB\n", rss_trim);
    /* back to the start, give or take the hugepages that still hold live
     * data (stdio buffers, this test's own state): under 3% of the peak */
    CHECK(rss_trim < rss0 + 8 * 1024, "RSS after trim %ld KiB", rss_trim);
    CHECK(st.hp_released >= 100, "released %llu hugepages", (unsigned long long)st.hp_released);
    CHECK(st.hp_cached <= (uint64_t)hpm_option_get(HPM_OPT_HP_CACHE), "cached %llu", (unsigned long long)st.hp_cached);
    return TEST_DONE();
}
