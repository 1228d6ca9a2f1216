/* test_subrelease.c: hpm_trim gives back free pages inside partial
 * hugepages and inside live slabs (subrelease), without touching live
 * data: RSS falls, the counters say so, surviving blocks keep their
 * contents, and the heap keeps working (freed blocks come back). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "hpmalloc.h"
#include "testhelper.h"

#define N (1u << 20)

static long rss_kb(void) { return th_field_kb("/proc/self/smaps_rollup", "Rss"); }

int main(void) {
    static unsigned char *p[N];
    uint32_t x = 12345;
    for (unsigned i = 0; i < N; i++) {
        size_t size = 16 + (i % 13) * 24;
        p[i] = malloc(size);
        memset(p[i], (int)(i * 7), size);
    }
    /* free 95%, keeping every 20th */
    for (unsigned i = 0; i < N; i++) if (i % 20) { free(p[i]); p[i] = NULL; }
    hpm_trim();   /* whole hugepages only would release little here */
    long before = rss_kb();
    hpm_stats_t st;
    hpm_stats_get(&st);
    printf("after freeing 95%%: RSS %ld KiB, subreleased pages %llu, coverage %.1f%%\n", before,
           (unsigned long long)st.pages_subreleased,
           st.anon_bytes ? 100.0 * (double)st.thp_anon_bytes / (double)st.anon_bytes : 0.0);
    CHECK(st.pages_subreleased > 1000, "subreleased %llu pages", (unsigned long long)st.pages_subreleased);
    size_t bad = 0;
    for (unsigned i = 0; i < N; i += 20) {
        size_t size = 16 + (i % 13) * 24;
        for (size_t k = 0; k < size; k++) if (p[i][k] != (unsigned char)(i * 7)) { bad++; break; }
        void *base; size_t len;
        if (!hpm_range(p[i] + 1, &base, &len) || base != p[i]) bad++;
    }
    CHECK(bad == 0, "%zu surviving blocks damaged", bad);
    /* the heap refills the given-back pages */
    for (unsigned i = 0; i < N; i++) if (!p[i]) { p[i] = malloc(16 + (i % 13) * 24); memset(p[i], 0x5a, 16); }
    size_t again = 0;
    for (unsigned i = 0; i < N; i++) if (p[i] && i % 20 && p[i][15] == 0x5a) again++;
    CHECK(again == N - (N + 19) / 20, "%zu of %u reallocated", again, N - (N + 19) / 20);
    for (unsigned i = 0; i < N; i += 20) if (p[i][0] != (unsigned char)(i * 7)) bad++;
    CHECK(bad == 0, "survivors intact after the refill");
    hpm_stats_get(&st);
    CHECK(st.pages_subreleased < 1000, "refilled slabs no longer count as subreleased (%llu)", (unsigned long long)st.pages_subreleased);
    for (unsigned i = 0; i < N; i++) free(p[i]);
    (void)x;
    return TEST_DONE();
}
