/* stat_prom.c: an `hpm stat` report in the Prometheus text exposition
 * format (version 0.0.4), for `hpm stat --prometheus PID` and for
 * node_exporter's textfile collector (`--textfile DIR`). Every family has
 * `# HELP` and `# TYPE`; every sample carries the labels pid and comm.
 * Families: huge-page coverage (anonymous and THP bytes, the ratio), 2 MiB
 * region states, hot/cold bytes and WPD (when measured), hpmalloc's
 * counters (when the process runs on hpmalloc: gauges for levels, counters
 * with _total for cumulative counts), and hpm stat's own cost. A textfile
 * is written to a hidden temporary name in DIR and renamed over
 * DIR/hpm_stat_PID.prom, so the collector never reads half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stat.h"

/* The label set of every sample: {pid="..",comm=".."} plus extra. */
static void prom_labels(FILE *f, const stat_report_t *r, const char *key, const char *value) {
    fprintf(f, "{pid=\"%d\",comm=\"", r->pid);
    for (const char *c = r->comm; *c; c++) {   /* escape \, " and newline */
        if (*c == '\\' || *c == '"') fputc('\\', f);
        if (*c == '\n') { fputs("\\n", f); continue; }
        fputc(*c, f);
    }
    fputc('"', f);
    if (key) fprintf(f, ",%s=\"%s\"", key, value);
    fputc('}', f);
}

static void prom_family(FILE *f, const char *name, const char *type, const char *help) {
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void prom_sample(FILE *f, const stat_report_t *r, const char *name, const char *key, const char *kv,
                        double v) {
    fputs(name, f);
    prom_labels(f, r, key, kv);
    fprintf(f, " %.17g\n", v);
}

/* One family with one unlabelled (pid/comm only) sample. */
static void prom_one(FILE *f, const stat_report_t *r, const char *name, const char *type, const char *help,
                     double v) {
    prom_family(f, name, type, help);
    prom_sample(f, r, name, NULL, NULL, v);
}

static void prom_coverage(FILE *f, const stat_report_t *r) {
    prom_one(f, r, "hpm_anon_bytes", "gauge", "Anonymous memory of the process (smaps).", (double)r->anon_bytes);
    prom_one(f, r, "hpm_thp_bytes", "gauge", "Anonymous memory in transparent huge pages (AnonHugePages).",
             (double)r->thp_bytes);
    prom_one(f, r, "hpm_thp_coverage_ratio", "gauge", "AnonHugePages over Anonymous, 0 to 1.",
             r->anon_bytes ? (double)r->thp_bytes / (double)r->anon_bytes : 0.0);
    prom_family(f, "hpm_regions", "gauge", "2 MiB regions of anonymous memory scanned, by state.");
    for (int s = 0; s < ST_N; s++) prom_sample(f, r, "hpm_regions", "state", stat_state_name[s], r->rsum.state_count[s]);
    prom_one(f, r, "hpm_regions_scanned", "gauge", "2 MiB regions scanned (fewer than all with --sample).",
             r->rsum.regions_scanned);
}

static void prom_hot(FILE *f, const stat_report_t *r) {
    if (r->rounds_wanted > 0)
        prom_one(f, r, "hpm_hot_complete", "gauge",
                 "1 when every hot/cold interval was measured, 0 when the process exited before.", !r->exited);
    if (r->wpd < 0) return;   /* not measured (--rounds 0, or no access) */
    prom_family(f, "hpm_hot_bytes", "gauge", "Resident bytes by hotness class over the sampled intervals.");
    for (int c = 0; c < STAT_HOT_CLASSES; c++) prom_sample(f, r, "hpm_hot_bytes", "class", stat_hot_name[c], r->class_bytes[c]);
    prom_one(f, r, "hpm_wpd", "gauge", "Weighted page distribution (hotness score) of the process.", r->wpd);
}

typedef struct { const char *name, *type, *help; size_t offset; int is32; } prom_counter_t;
#define PC(n, t, h, field) {n, t, h, offsetof(hpm_stats_t, field), sizeof(((hpm_stats_t *)0)->field) == 4}
static const prom_counter_t prom_counters[] = {
    PC("hpmalloc_bytes_in_use", "gauge", "Usable bytes of live allocations.", bytes_in_use),
    PC("hpmalloc_bytes_mapped", "gauge", "Committed heap bytes.", bytes_mapped),
    PC("hpmalloc_bytes_metadata", "gauge", "Committed out-of-band metadata bytes.", bytes_metadata),
    PC("hpmalloc_hugepages_backed", "gauge", "Hugepages holding data or cached.", hp_backed),
    PC("hpmalloc_hugepages_in_use", "gauge", "Hugepages with at least one live page.", hp_in_use),
    PC("hpmalloc_hugepages_cached", "gauge", "Empty hugepages kept backed for reuse.", hp_cached),
    PC("hpmalloc_hugepages_hybrid", "gauge", "Hugepages mixing slabs and large spans.", hp_hybrid),
    PC("hpmalloc_hugepages_hugetlb", "gauge", "Hugepages backed by the hugetlbfs pool.", hp_hugetlb),
    PC("hpmalloc_pages_subreleased", "gauge", "4 KiB pages given back inside partial hugepages.", pages_subreleased),
    PC("hpmalloc_hugepages_released_total", "counter", "Whole-hugepage releases.", hp_released),
    PC("hpmalloc_hugetlb_fallbacks_total", "counter", "hugetlb/1g requests that fell back to THP.", hp_fallback),
    PC("hpmalloc_large_allocations_total", "counter", "Allocations of whole hugepages.", large_allocs),
    PC("hpmalloc_ccow_forks_total", "counter", "Forks seen by CCoW.", ccow_forks),
    PC("hpmalloc_ccow_regions_precopied_total", "counter", "2 MiB regions pre-copied after fork.",
       ccow_regions_precopied),
    PC("hpmalloc_ccow_bytes_precopied_total", "counter", "Bytes pre-copied after fork.", ccow_bytes_precopied),
    PC("hpmalloc_ccow_faults_avoided_total", "counter", "Estimated copy-on-write faults avoided.",
       ccow_faults_avoided),
    PC("hpmalloc_ccow_threshold_percent", "gauge", "Current CCoW threshold T.", ccow_threshold_pct),
    PC("hpmalloc_ccow_active", "gauge", "1 while CCoW tracks a fork period.", ccow_active),
};

static void prom_alloc(FILE *f, const stat_report_t *r) {
    prom_one(f, r, "hpmalloc_published", "gauge", "1 when the process publishes hpmalloc counters.", r->has_alloc);
    if (!r->has_alloc) return;
    for (size_t i = 0; i < sizeof prom_counters / sizeof prom_counters[0]; i++) {
        const prom_counter_t *c = &prom_counters[i];
        const char *p = (const char *)&r->alloc + c->offset;
        double v = c->is32 ? (double)*(const uint32_t *)p : (double)*(const uint64_t *)p;
        prom_one(f, r, c->name, c->type, c->help, v);
    }
    prom_family(f, "hpmalloc_info", "gauge", "Page mode, system THP mode and CCoW state (value 1).");
    fprintf(f, "hpmalloc_info{pid=\"%d\",page_mode=\"%s\",thp_system=\"%s\",ccow_state=\"", r->pid,
            r->alloc.page_mode, r->alloc.thp_system);
    for (const char *c = r->alloc.ccow_state; *c && c < r->alloc.ccow_state + sizeof r->alloc.ccow_state; c++) {
        if (*c == '\\' || *c == '"') fputc('\\', f);
        fputc(*c == '\n' ? ' ' : *c, f);
    }
    fprintf(f, "\"} 1\n");
}

void stat_print_prom(FILE *f, const stat_report_t *r) {
    prom_coverage(f, r);
    prom_hot(f, r);
    prom_alloc(f, r);
    prom_one(f, r, "hpm_stat_cpu_seconds", "gauge", "CPU time hpm stat spent on this report.", r->cost_cpu_s);
}

int stat_write_textfile(const char *dir, const stat_report_t *r) {
    char tmp[4096], final[4096];
    if (snprintf(final, sizeof final, "%s/hpm_stat_%d.prom", dir, r->pid) >= (int)sizeof final ||
        snprintf(tmp, sizeof tmp, "%s/.hpm_stat_%d.prom.%d.tmp", dir, r->pid, (int)getpid()) >= (int)sizeof tmp)
        return -ENAMETOOLONG;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -errno;
    FILE *f = fdopen(fd, "w");
    if (!f) { int e = errno; close(fd); unlink(tmp); return -e; }
    stat_print_prom(f, r);
    int err = ferror(f) ? EIO : 0;
    if (fflush(f) != 0 && !err) err = errno;
    if (!err && fsync(fileno(f)) != 0) err = errno;
    if (fclose(f) != 0 && !err) err = errno;
    if (!err && rename(tmp, final) != 0) err = errno;
    if (err) unlink(tmp);
    return -err;
}
