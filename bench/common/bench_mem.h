/* bench_mem.h: a benchmark's view of its own memory, read from procfs:
 * resident set size (VmRSS from /proc/self/status), and from
 * /proc/self/smaps_rollup the Rss, Anonymous and AnonHugePages totals
 * from which huge-page coverage (AnonHugePages / Anonymous) follows.
 * Values are in KiB; -1 means the file or field could not be read.
 * Header-only (static inline); allocates nothing. */
#ifndef HPM_BENCH_MEM_H
#define HPM_BENCH_MEM_H
#include "../../tools/proc/hpm_proc.h"

typedef struct {
    long vm_rss_kib;          /* /proc/self/status VmRSS */
    long rss_kib;             /* smaps_rollup Rss */
    long anon_kib;            /* smaps_rollup Anonymous */
    long anon_huge_kib;       /* smaps_rollup AnonHugePages */
} bench_mem_t;

/* Reads "Name:   123 kB" fields named in `names` from path into vals
 * (-1 when missing), through the shared reader (tools/proc/hpm_proc.h). */
static inline void bench_mem_read_fields(const char *path, const char *const *names, long *vals, int n) {
    hpm_proc_fields_kb(path, names, vals, n);
}

static inline bench_mem_t bench_mem_read(void) {
    bench_mem_t m;
    const char *st[] = {"VmRSS"};
    bench_mem_read_fields("/proc/self/status", st, &m.vm_rss_kib, 1);
    const char *sm[] = {"Rss", "Anonymous", "AnonHugePages"};
    long v[3];
    bench_mem_read_fields("/proc/self/smaps_rollup", sm, v, 3);
    m.rss_kib = v[0];
    m.anon_kib = v[1];
    m.anon_huge_kib = v[2];
    return m;
}

/* Huge-page coverage in percent, or -1 when unknown. */
static inline double bench_mem_thp_pct(const bench_mem_t *m) {
    if (m->anon_kib <= 0 || m->anon_huge_kib < 0) return -1.0;
    return 100.0 * (double)m->anon_huge_kib / (double)m->anon_kib;
}
#endif
