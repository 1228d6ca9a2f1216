/* bench_warm.h: warms the machine's free memory right before a measured
 * run, so that no allocator meets cold memory that another did not.
 *
 * Why: this VM's guest reports free 2 MiB blocks to the host (free page
 * reporting, /sys/module/page_reporting/parameters/page_reporting_order
 * is 9) about 2 s after they are freed, and the host drops their backing.
 * A huge-page fault on such a block then costs 6-9 ms (the host backs it
 * again 4 KiB at a time) instead of 0.25-0.4 ms, while 4 KiB faults mostly
 * find recently freed, unreported pages (about 1 ms per 2 MiB either way).
 * Before this warm-up, whether a run under a huge-page allocator paid the
 * cold price depended on what had run just before it (measured: glibc
 * bench large, 45 huge-page faults, 0.30-0.41 s of system time of 2 CPU
 * seconds under hpmalloc against 0.04-0.11 s under mimalloc's 4 KiB
 * pages).
 *
 * How: map `bytes` with MADV_HUGEPAGE, write one byte per 4 KiB page, and
 * unmap. The freed blocks stay unreported for about 2 s, long enough for
 * the first faults of the run that follows, whichever page size its
 * allocator uses. Costs up to about 0.5 s of system time for 128 MiB when the
 * memory was cold. Header-only; bytes == 0 does nothing. */
#ifndef HPM_BENCH_WARM_H
#define HPM_BENCH_WARM_H
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define BENCH_WARM_DEFAULT_MIB 128   /* the largest quick-scale run faults about 125 MB (glibc-bench large) */

/* A size in MiB, 0..65536, as text: 0 and *mib set, or -1 for bad text. */
static inline int bench_warm_parse_mib(const char *text, size_t *mib) {
    char *end;
    if (!text || !*text) return -1;
    unsigned long v = strtoul(text, &end, 10);
    if (*end != '\0' || v > 65536) return -1;
    *mib = v;
    return 0;
}

/* The warm-up size: HPM_BENCH_WARM_MIB when set and valid (0 turns it off), else dflt. */
static inline size_t bench_warm_bytes(size_t dflt_mib) {
    size_t mib = dflt_mib;
    (void)bench_warm_parse_mib(getenv("HPM_BENCH_WARM_MIB"), &mib);
    return mib << 20;
}

static inline void bench_warm_memory(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes == 0) return;
    bytes = (bytes + huge - 1) & ~(huge - 1);
    char *map = mmap(NULL, bytes + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return;   /* a warm-up that cannot run changes nothing */
    volatile char *p = (char *)(((uintptr_t)map + huge - 1) & ~(uintptr_t)(huge - 1));
    madvise((void *)p, bytes, MADV_HUGEPAGE);
    for (size_t off = 0; off < bytes; off += 4096) p[off] = 1;
    munmap(map, bytes + huge);
}
#endif
