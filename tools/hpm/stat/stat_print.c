/* stat_print.c: the two forms of an `hpm stat` report: text for people
 * (summary, a one-character-per-region map of the largest mappings, hot and
 * cold memory, the allocator's counters, what could not be seen, the cost)
 * and one JSON object for programs and tests. Both print only what the
 * report holds; a value that was not measured is omitted or null. */
#include <stdlib.h>
#include <string.h>
#include "stat.h"

#define MAP_LINE_CHARS 64
#define MAP_MAX_CHARS 512

static double mib(uint64_t b) { return (double)b / (1024.0 * 1024.0); }
static double pct(uint64_t a, uint64_t b) { return b ? 100.0 * (double)a / (double)b : 0.0; }

/* Indexes of anonymous mappings, largest first (at most max). */
static int print_largest(const stat_report_t *r, int *idx, int max) {
    int n = 0;
    for (; n < max; n++) {
        int best = -1;
        for (int i = 0; i < r->n_maps; i++) {
            if (!r->maps[i].anon || !r->maps[i].map) continue;
            int taken = 0;
            for (int k = 0; k < n; k++) taken |= idx[k] == i;
            if (!taken && (best < 0 || r->maps[i].size_bytes > r->maps[best].size_bytes)) best = i;
        }
        if (best < 0) break;
        idx[n] = best;
    }
    return n;
}

/* The map, grouped when long: each char is the most common state of its group. */
static void print_map(FILE *f, const stat_mapping_t *m) {
    uint32_t group = (m->n_regions + MAP_MAX_CHARS - 1) / MAP_MAX_CHARS;
    if (group > 1) fprintf(f, "      (1 char = %u regions, the most common state)\n", group);
    int col = 0;
    for (uint32_t g = 0; g < m->n_regions; g += group) {
        char best = '?';
        int best_n = 0;
        for (int s = 0; s <= ST_N; s++) {
            char c = s < ST_N ? stat_state_char[s] : '?';
            int n = 0;
            for (uint32_t k = g; k < g + group && k < m->n_regions; k++) n += m->map[k] == c;
            if (n > best_n) { best_n = n; best = c; }
        }
        if (col == 0) fprintf(f, "      ");
        fputc(best, f);
        if (++col == MAP_LINE_CHARS) { fputc('\n', f); col = 0; }
    }
    if (col) fputc('\n', f);
}

static void print_regions_text(FILE *f, const stat_report_t *r) {
    const stat_region_sum_t *s = &r->rsum;
    fprintf(f, "2 MiB regions of anonymous memory: %u", s->regions_scanned);
    if (s->regions_scanned != s->regions) fprintf(f, " sampled of %u (--sample %.3g%%)", s->regions, r->sample_pct);
    fprintf(f, "\n ");
    for (int i = 0; i < ST_N; i++) fprintf(f, " %c %s %u", stat_state_char[i], stat_state_name[i], s->state_count[i]);
    fprintf(f, "\n  4 KiB pages: present %llu, exclusive %llu, CoW-shared %llu, swapped %llu, PMD-mapped %llu",
            (unsigned long long)s->pages_present, (unsigned long long)s->pages_exclusive,
            (unsigned long long)s->pages_shared, (unsigned long long)s->pages_swapped,
            (unsigned long long)s->pages_pmd);
    if (r->kpageflags)
        fprintf(f, ", in THPs %llu, zero page %llu", (unsigned long long)s->pages_thp, (unsigned long long)s->pages_zero);
    fprintf(f, "\n");
}

static void print_alloc_text(FILE *f, const stat_report_t *r) {
    if (!r->has_alloc) { fprintf(f, "hpmalloc counters: %s\n", r->alloc_how); return; }
    const hpm_stats_t *a = &r->alloc;
    fprintf(f, "hpmalloc counters (%s): pages %s, system THP %s\n", r->alloc_how, a->page_mode, a->thp_system);
    fprintf(f, "  hugepages: backed %llu, in use %llu, cached %llu, released %llu, hybrid %llu, hugetlb %llu\n",
            (unsigned long long)a->hp_backed, (unsigned long long)a->hp_in_use, (unsigned long long)a->hp_cached,
            (unsigned long long)a->hp_released, (unsigned long long)a->hp_hybrid, (unsigned long long)a->hp_hugetlb);
    fprintf(f, "  bytes: in use %.1f MiB, mapped %.1f MiB, metadata %.1f MiB\n",
            mib(a->bytes_in_use), mib(a->bytes_mapped), mib(a->bytes_metadata));
    fprintf(f, "  hugetlb fallbacks to THP %llu, pages subreleased %llu, large allocations %llu\n",
            (unsigned long long)a->hp_fallback, (unsigned long long)a->pages_subreleased,
            (unsigned long long)a->large_allocs);
    fprintf(f, "  CCoW: %s%s, forks %llu, regions pre-copied %llu (%.1f MiB), threshold %u%%\n",
            a->ccow_state[0] ? a->ccow_state : "?", a->ccow_active ? " (tracking a fork)" : "",
            (unsigned long long)a->ccow_forks, (unsigned long long)a->ccow_regions_precopied,
            mib(a->ccow_bytes_precopied), a->ccow_threshold_pct);
    fprintf(f, "        faults avoided ~%llu\n", (unsigned long long)a->ccow_faults_avoided);
}

void stat_print_text(FILE *f, const stat_report_t *r, const stat_opts_t *o) {
    fprintf(f, "hpm stat: pid %d (%s)%s\n", r->pid, r->comm, r->is_root ? ", as root" : "");
    fprintf(f, "huge-page coverage: %.1f of %.1f MiB anonymous memory in huge pages = %.1f%% (smaps_rollup: %.1f%%)\n",
            mib(r->thp_bytes), mib(r->anon_bytes), pct(r->thp_bytes, r->anon_bytes), pct(r->rollup_thp, r->rollup_anon));
    print_regions_text(f, r);
    int idx[64];
    int n = print_largest(r, idx, o->top < 64 ? o->top : 64);
    if (n) fprintf(f, "largest anonymous mappings (H huge, h huge CoW-shared, s split, c CoW-shared, m mixed, "
                      "p partly present, . absent, e edge, ? not sampled):\n");
    for (int k = 0; k < n; k++) {
        const stat_mapping_t *m = &r->maps[idx[k]];
        fprintf(f, "  %012llx-%012llx %s %8.1f MiB  anon %8.1f  thp %8.1f  %5.1f%%  %s\n",
                (unsigned long long)m->start, (unsigned long long)m->end, m->perms, mib(m->size_bytes),
                mib(m->anon_bytes), mib(m->thp_bytes), pct(m->thp_bytes, m->anon_bytes), m->name[0] ? m->name : "[anon]");
        print_map(f, m);
    }
    if (r->wpd >= 0) {
        fprintf(f, "hot/cold over %d intervals of %.3g s (MiB):", r->rounds, r->interval_s);
        for (int c = 0; c < STAT_HOT_CLASSES; c++) fprintf(f, " %s %.1f", stat_hot_name[c], r->class_bytes[c] / 1048576.0);
        fprintf(f, "; WPD %.3f (0.1 all very cold .. 2.0 all very hot)\n", r->wpd);
    }
    if (r->exited)
        fprintf(f, "hot/cold: INCOMPLETE, the process exited after %d of %d intervals (the rest of this report "
                   "was measured before)\n", r->rounds, r->rounds_wanted);
    print_alloc_text(f, r);
    for (int i = 0; i < r->n_missing; i++) fprintf(f, "not visible: %s\n", r->missing[i]);
    fprintf(f, "cost of this sample: %.1f ms CPU over %.2f s = %.2f%% of one core\n", r->cost_cpu_s * 1e3,
            r->cost_wall_s, r->cost_wall_s > 0 ? 100.0 * r->cost_cpu_s / r->cost_wall_s : 0.0);
}

/* ---- JSON ---- */
static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_states(FILE *f, const uint32_t *count) {
    fputc('{', f);
    for (int i = 0; i < ST_N; i++) fprintf(f, "%s\"%s\":%u", i ? "," : "", stat_state_name[i], count[i]);
    fputc('}', f);
}

static void json_mapping(FILE *f, const stat_mapping_t *m, const stat_opts_t *o) {
    fprintf(f, "{\"start\":\"0x%llx\",\"end\":\"0x%llx\",\"perms\":", (unsigned long long)m->start, (unsigned long long)m->end);
    json_str(f, m->perms);
    fprintf(f, ",\"name\":");
    json_str(f, m->name);
    fprintf(f, ",\"anon\":%s,\"size_bytes\":%llu,\"rss_bytes\":%llu,\"anon_bytes\":%llu,\"thp_bytes\":%llu,"
               "\"coverage_pct\":%.2f,\"referenced_bytes\":%llu",
            m->anon ? "true" : "false", (unsigned long long)m->size_bytes, (unsigned long long)m->rss_bytes,
            (unsigned long long)m->anon_bytes, (unsigned long long)m->thp_bytes, pct(m->thp_bytes, m->anon_bytes),
            (unsigned long long)m->ref_bytes);
    if (m->map) {
        fprintf(f, ",\"states\":");
        json_states(f, m->state_count);
        fprintf(f, ",\"map\":\"%s\"", m->map);
    }
    if (m->n_rounds) {
        fprintf(f, ",\"hot_bytes\":{");
        for (int c = 0; c < STAT_HOT_CLASSES; c++) fprintf(f, "%s\"%s\":%.0f", c ? "," : "", stat_hot_name[c], m->class_bytes[c]);
        fputc('}', f);
    }
    if (o->detail && m->regions) {
        fprintf(f, ",\"regions\":[");
        int first = 1;
        for (uint32_t i = 0; i < m->n_regions; i++) {
            const stat_region_t *g = &m->regions[i];
            if (m->map[i] == '?') continue;
            fprintf(f, "%s{\"addr\":\"0x%llx\",\"state\":\"%s\",\"pages\":%u,\"present\":%u,\"exclusive\":%u,"
                       "\"shared\":%u,\"swapped\":%u,\"pmd\":%u,\"thp_pages\":%u,\"zero_pages\":%u}",
                    first ? "" : ",", (unsigned long long)g->addr, stat_state_name[g->state], g->pages, g->present,
                    g->exclusive, g->shared, g->swapped, g->pmd_huge, g->thp_pages, g->zero_pages);
            first = 0;
        }
        fputc(']', f);
    }
    fputc('}', f);
}

static void json_alloc(FILE *f, const stat_report_t *r) {
    const hpm_stats_t *a = &r->alloc;
    fprintf(f, "{\"source\":");
    json_str(f, r->alloc_how);
    fprintf(f, ",\"pid\":%d,\"page_mode\":", (int)a->pid);
    json_str(f, a->page_mode);
    fprintf(f, ",\"hp_backed\":%llu,\"hp_in_use\":%llu,\"hp_cached\":%llu,\"hp_released\":%llu,\"hp_hybrid\":%llu,"
               "\"hp_hugetlb\":%llu,\"bytes_in_use\":%llu,\"bytes_mapped\":%llu,\"bytes_metadata\":%llu,"
               "\"ccow_forks\":%llu,\"ccow_regions_precopied\":%llu,\"ccow_bytes_precopied\":%llu,"
               "\"ccow_threshold_pct\":%u,\"ccow_active\":%u,\"ccow_state\":",
            (unsigned long long)a->hp_backed, (unsigned long long)a->hp_in_use, (unsigned long long)a->hp_cached,
            (unsigned long long)a->hp_released, (unsigned long long)a->hp_hybrid, (unsigned long long)a->hp_hugetlb,
            (unsigned long long)a->bytes_in_use, (unsigned long long)a->bytes_mapped,
            (unsigned long long)a->bytes_metadata, (unsigned long long)a->ccow_forks,
            (unsigned long long)a->ccow_regions_precopied, (unsigned long long)a->ccow_bytes_precopied,
            a->ccow_threshold_pct, a->ccow_active);
    json_str(f, a->ccow_state);
    fprintf(f, ",\"hp_fallback\":%llu,\"pages_subreleased\":%llu,\"large_allocs\":%llu,\"ccow_faults_avoided\":%llu,"
               "\"ccow_recover_us\":%llu,\"arena_reserved_bytes\":%llu,\"thp_system\":",
            (unsigned long long)a->hp_fallback, (unsigned long long)a->pages_subreleased,
            (unsigned long long)a->large_allocs, (unsigned long long)a->ccow_faults_avoided,
            (unsigned long long)a->ccow_recover_us, (unsigned long long)a->arena_reserved_bytes);
    json_str(f, a->thp_system);
    fputc('}', f);
}

/* "regions":{...},"hot":{...} (null when not measured) */
static void json_regions_hot(FILE *f, const stat_report_t *r) {
    const stat_region_sum_t *s = &r->rsum;
    fprintf(f, "\"regions\":{\"total\":%u,\"scanned\":%u,\"sample_pct\":%.3g,\"states\":", s->regions,
            s->regions_scanned, r->sample_pct);
    json_states(f, s->state_count);
    fprintf(f, ",\"pages_present\":%llu,\"pages_exclusive\":%llu,\"pages_shared\":%llu,\"pages_swapped\":%llu,"
               "\"pages_pmd\":%llu,\"pages_thp\":%llu,\"pages_zero\":%llu},",
            (unsigned long long)s->pages_present, (unsigned long long)s->pages_exclusive,
            (unsigned long long)s->pages_shared, (unsigned long long)s->pages_swapped,
            (unsigned long long)s->pages_pmd, (unsigned long long)s->pages_thp, (unsigned long long)s->pages_zero);
    fprintf(f, "\"hot\":");
    if (r->wpd >= 0) {
        fprintf(f, "{\"intervals\":%d,\"intervals_wanted\":%d,\"complete\":%s,\"interval_s\":%.3f,\"wpd\":%.4f",
                r->rounds, r->rounds_wanted, r->exited ? "false" : "true", r->interval_s, r->wpd);
        for (int c = 0; c < STAT_HOT_CLASSES; c++) fprintf(f, ",\"%s_bytes\":%.0f", stat_hot_name[c], r->class_bytes[c]);
        fputc('}', f);
    } else {
        fprintf(f, "null");
    }
}

void stat_print_json(FILE *f, const stat_report_t *r, const stat_opts_t *o) {
    fprintf(f, "{\"pid\":%d,\"comm\":", r->pid);
    json_str(f, r->comm);
    fprintf(f, ",\"root\":%s,\"pagemap_scan\":%s,\"kpageflags\":%s,\"exited\":%s,", r->is_root ? "true" : "false",
            r->pagemap_scan ? "true" : "false", r->kpageflags ? "true" : "false", r->exited ? "true" : "false");
    fprintf(f, "\"coverage\":{\"anon_bytes\":%llu,\"thp_bytes\":%llu,\"pct\":%.3f,\"rollup_anon_bytes\":%llu,"
               "\"rollup_thp_bytes\":%llu,\"rollup_pct\":%.3f},",
            (unsigned long long)r->anon_bytes, (unsigned long long)r->thp_bytes, pct(r->thp_bytes, r->anon_bytes),
            (unsigned long long)r->rollup_anon, (unsigned long long)r->rollup_thp, pct(r->rollup_thp, r->rollup_anon));
    json_regions_hot(f, r);
    fprintf(f, ",\"hpmalloc\":");
    if (r->has_alloc) json_alloc(f, r); else fprintf(f, "null");
    fprintf(f, ",\"missing\":[");
    for (int i = 0; i < r->n_missing; i++) { if (i) fputc(',', f); json_str(f, r->missing[i]); }
    fprintf(f, "],\"cost\":{\"cpu_s\":%.6f,\"wall_s\":%.6f,\"pct_core\":%.4f},\"mappings\":[", r->cost_cpu_s,
            r->cost_wall_s, r->cost_wall_s > 0 ? 100.0 * r->cost_cpu_s / r->cost_wall_s : 0.0);
    int first = 1;
    for (int i = 0; i < r->n_maps; i++) {
        if (!o->detail && !r->maps[i].anon) continue;   /* file mappings only with --detail */
        if (!first) fputc(',', f);
        json_mapping(f, &r->maps[i], o);
        first = 0;
    }
    fprintf(f, "]}\n");
}
