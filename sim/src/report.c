/* report.c: the side-by-side summary table, the CSV time series and the
 * gnuplot plots of hpm sim results (one column or line per policy).
 *
 * Pageblocks are counted under three definitions, each at the end, as the
 * mean over the samples and at the peak: hybrid (holding kernel and
 * movable pages), page_owner's mixed (holding a page whose type differs
 * from the block's label, as /proc/pagetypeinfo's mixed count) and
 * kernel-polluted (holding any kernel page: unusable for a huge page); huge-page success is cumulative in the table and per sampling
 * window in the plot; compaction cost per huge page is (pages scanned by
 * both scanners + failed + wasted migrations) / huge pages that compaction
 * produced. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "hpmsim.h"

static double pct(double a, double b) { return b > 0 ? 100.0 * a / b : 0; }

enum { HYB_CONTENT, HYB_OWNER, HYB_KERNEL };

static uint32_t sample_blocks(const sim_sample_t *x, int which) {
    return which == HYB_CONTENT ? x->hybrid_blocks : which == HYB_OWNER ? x->owner_mixed_blocks : x->kernel_blocks;
}

/* One definition of hybrid (or polluted) blocks over a run: at the end,
 * the mean over the samples and the peak, as % of all pageblocks. */
static void block_summary(const sim_result_t *r, int which, double out[3]) {
    double blocks = r->stats.nr_blocks, sum = 0, mx = 0;
    for (size_t i = 0; i < r->series.n; i++) {
        double h = sample_blocks(&r->series.v[i], which);
        sum += h;
        if (h > mx) mx = h;
    }
    const sim_stats_t *st = &r->stats;
    out[0] = pct(which == HYB_CONTENT ? st->hybrid_blocks : which == HYB_OWNER ? st->owner_mixed_blocks : st->kernel_blocks,
                 blocks);
    out[1] = r->series.n ? pct(sum / (double)r->series.n, blocks) : out[0];
    out[2] = pct(mx, blocks);
}

static double mean_free_mib(const sim_result_t *r) {
    double sum = 0;
    for (size_t k = 0; k < r->series.n; k++) sum += (double)r->series.v[k].free_pages;
    return r->series.n ? sum / (double)r->series.n / 256.0 : (double)r->stats.free_pages / 256.0;
}

#define COL 18

/* Ratios are to the first result when it is Linux's. */
static void print_row(FILE *f, const char *label, const double *v, const sim_result_t *r, int n, const char *fmt,
                      bool ratio) {
    fprintf(f, "%-46s", label);
    for (int i = 0; i < n; i++) {
        char cell[32];
        if (v[i] < 0) snprintf(cell, sizeof cell, "-");
        else snprintf(cell, sizeof cell, fmt, v[i]);
        fprintf(f, " %*s", COL, cell);
    }
    for (int i = 1; i < n && r[0].policy == SIM_LINUX; i++) {
        char cell[32] = "";
        if (ratio && v[0] > 0 && v[i] >= 0) snprintf(cell, sizeof cell, "%.3fx", v[i] / v[0]);
        else if (ratio) snprintf(cell, sizeof cell, "-");
        fprintf(f, " %*s", COL, cell);
    }
    fputc('\n', f);
}

static void print_header(FILE *f, const sim_result_t *r, int n) {
    fprintf(f, "%-46s", "");
    for (int i = 0; i < n; i++) fprintf(f, " %*s", COL, sim_policy_name(r[i].policy));
    for (int i = 1; i < n && r[0].policy == SIM_LINUX; i++) {
        char h[48];
        snprintf(h, sizeof h, "%s/linux", r[i].policy == SIM_ILLUMINATOR_PAPER ? "paper" :
                 r[i].policy == SIM_ILLUMINATOR ? "patch" : "linux");
        fprintf(f, " %*s", COL, h);
    }
    fputc('\n', f);
}

static void print_blocks(FILE *f, const sim_result_t *r, int n) {
    static const char *const names[3] = {"hybrid (kernel + movable pages)", "page_owner mixed (type != label)",
                                         "kernel-polluted (any kernel page)"};
    static const char *const when[3] = {"end", "mean", "peak"};
    for (int which = 0; which < 3; which++)
        for (int k = 0; k < 3; k++) {
            double v[SIM_NR_POLICIES + 1], sm[3];
            char label[80];
            for (int i = 0; i < n; i++) { block_summary(&r[i], which, sm); v[i] = sm[k]; }
            snprintf(label, sizeof label, "%s %s %%", names[which], when[k]);
            print_row(f, label, v, r, n, "%.2f", true);
        }
}

static double per_produced(const sim_stats_t *s, uint64_t what) {
    return s->compact_produced_hp ? (double)what / (double)s->compact_produced_hp : -1;
}

void sim_report_table(FILE *f, const sim_result_t *r, int n) {
    double v[SIM_NR_POLICIES + 1] = {0};
    if (n > SIM_NR_POLICIES + 1) n = SIM_NR_POLICIES + 1;
    print_header(f, r, n);
    print_blocks(f, r, n);
#define ROW(label, fmt, expr, ratio) do { for (int i = 0; i < n; i++) { const sim_result_t *x = &r[i]; \
        const sim_stats_t *s = &x->stats; (void)s; (void)x; v[i] = (expr); } print_row(f, label, v, r, n, fmt, ratio); } while (0)
    ROW("huge-page requests", "%.0f", (double)s->hp_requests, false);
    ROW("huge-page success (%)", "%.2f", pct(s->hp_success, s->hp_requests), true);
    ROW("  from free lists", "%.0f", (double)s->hp_from_free, false);
    ROW("  right after direct compaction", "%.0f", (double)s->hp_after_compact, false);
    ROW("huge blocks produced by compaction", "%.0f", (double)s->compact_produced_hp, true);
    ROW("compaction runs (direct + kswapd + whole)", "%.0f", (double)s->compact_runs, false);
    ROW("kswapd compaction requests", "%.0f", (double)s->kswapd_compactions, false);
    ROW("compactions skipped (free memory, fragindex)", "%.0f", (double)s->compact_skipped, false);
    ROW("pages scanned (migrate + free scanner)", "%.0f", (double)(s->compact_mig_scanned + s->compact_free_scanned), true);
    ROW("  by the migrate scanner", "%.0f", (double)s->compact_mig_scanned, true);
    ROW("  by the free scanner", "%.0f", (double)s->compact_free_scanned, true);
    ROW("pages migrated", "%.0f", (double)s->compact_migrated, true);
    ROW("failed migrations (no target)", "%.0f", (double)s->compact_failed, true);
    ROW("wasted (LIU) migrations", "%.0f", (double)s->compact_wasted, true);
    ROW("per huge page produced: scanned", "%.1f", per_produced(s, s->compact_mig_scanned + s->compact_free_scanned), true);
    ROW("per huge page produced: migrated", "%.1f", per_produced(s, s->compact_migrated), true);
    ROW("per huge page produced: failed+wasted", "%.1f", per_produced(s, s->compact_failed + s->compact_wasted), true);
    ROW("compaction cost per huge page produced", "%.1f", sim_cost_per_hp(s), true);
    ROW("compaction cost per huge-page request", "%.1f", s->hp_requests ? (double)(s->compact_mig_scanned +
        s->compact_free_scanned + s->compact_failed + s->compact_wasted) / (double)s->hp_requests : -1, true);
    ROW("free memory, end (MiB)", "%.1f", (double)s->free_pages / 256.0, false);
    ROW("free memory, mean over time (MiB)", "%.1f", mean_free_mib(x), false);
    ROW("kernel memory, end (MiB)", "%.1f", (double)s->kernel_pages / 256.0, false);
    ROW("  of which reclaimable (MiB)", "%.1f", (double)s->reclaimable_pages / 256.0, false);
    ROW("fallbacks (placed in the other class)", "%.0f", (double)s->fallbacks, true);
    ROW("kernel allocs served by the other kernel type", "%.0f", (double)s->kernel_cross, false);
    ROW("allocations served from MIXED lists", "%.0f", (double)s->mixed_allocs, false);
    ROW("RCU-deferred frees", "%.0f", (double)s->rcu_deferred, false);
    ROW("  reclaimed early by Prudence", "%.0f", (double)s->prudence_frees, false);
    ROW("frees of unbound ids (skipped)", "%.0f", (double)x->skipped_frees, false);
    ROW("operations (simulated time)", "%.0f", (double)s->clock_ops, false);
    ROW("wall time (s)", "%.2f", x->wall_s, false);
    ROW("operations per second (millions)", "%.2f", x->wall_s > 0 ? (double)s->clock_ops / x->wall_s / 1e6 : -1, false);
#undef ROW
}

int sim_report_csv(const char *path, const sim_result_t *r, int n, char *err, size_t len) {
    FILE *f = fopen(path, "w");
    if (!f) { snprintf(err, len, "%s: %s", path, strerror(errno)); return -1; }
    fprintf(f, "policy,t_ops,hybrid_blocks,hybrid_pct,kernel_blocks,free_pages,free_pct,hp_requests,hp_success,"
               "hp_success_pct_cum,hp_success_pct_window,compact_scanned,compact_migrated,compact_failed,compact_wasted,"
               "owner_mixed_blocks\n");
    for (int i = 0; i < n; i++) {
        const sim_stats_t *s = &r[i].stats;
        for (size_t k = 0; k < r[i].series.n; k++) {
            const sim_sample_t *x = &r[i].series.v[k], *prev = k ? &r[i].series.v[k - 1] : NULL;
            uint64_t dreq = x->hp_requests - (prev ? prev->hp_requests : 0);
            uint64_t dok = x->hp_success - (prev ? prev->hp_success : 0);
            char window[32] = "";
            if (dreq) snprintf(window, sizeof window, "%.3f", pct((double)dok, (double)dreq));
            fprintf(f, "%s,%llu,%u,%.3f,%u,%llu,%.3f,%llu,%llu,%.3f,%s,%llu,%llu,%llu,%llu,%u\n", sim_policy_name(r[i].policy),
                    (unsigned long long)x->t_ops, x->hybrid_blocks, pct(x->hybrid_blocks, s->nr_blocks), x->kernel_blocks,
                    (unsigned long long)x->free_pages, pct((double)x->free_pages, (double)s->total_pages),
                    (unsigned long long)x->hp_requests, (unsigned long long)x->hp_success,
                    pct((double)x->hp_success, (double)x->hp_requests), window,
                    (unsigned long long)x->compact_scanned, (unsigned long long)x->compact_migrated,
                    (unsigned long long)x->compact_failed, (unsigned long long)x->compact_wasted, x->owner_mixed_blocks);
        }
    }
    if (fclose(f)) { snprintf(err, len, "%s: %s", path, strerror(errno)); return -1; }
    return 0;
}

/* One data file per policy: t_ops (millions), hybrid %, windowed success %
 * (NaN where no request fell in the window), cumulative success %. */
static int write_dat(const char *dir, const sim_result_t *r, char *path, size_t path_len, char *err, size_t len) {
    snprintf(path, path_len, "%s/sim_%s.dat", dir, sim_policy_name(r->policy));
    FILE *f = fopen(path, "w");
    if (!f) { snprintf(err, len, "%s: %s", path, strerror(errno)); return -1; }
    fprintf(f, "# t_mops hybrid_pct hp_success_window_pct hp_success_cum_pct free_pct\n");
    for (size_t k = 0; k < r->series.n; k++) {
        const sim_sample_t *x = &r->series.v[k], *prev = k ? &r->series.v[k - 1] : NULL;
        uint64_t dreq = x->hp_requests - (prev ? prev->hp_requests : 0);
        uint64_t dok = x->hp_success - (prev ? prev->hp_success : 0);
        fprintf(f, "%.6f %.4f ", (double)x->t_ops / 1e6, pct(x->hybrid_blocks, r->stats.nr_blocks));
        if (dreq) fprintf(f, "%.4f ", pct((double)dok, (double)dreq)); else fprintf(f, "NaN ");
        fprintf(f, "%.4f %.4f\n", x->hp_requests ? pct((double)x->hp_success, (double)x->hp_requests) : NAN,
                pct((double)x->free_pages, (double)r->stats.total_pages));
    }
    if (fclose(f)) { snprintf(err, len, "%s: %s", path, strerror(errno)); return -1; }
    return 0;
}

static void plot_lines(FILE *g, char dat[][512], const sim_result_t *r, int n, int col, const char *style) {
    fputs("plot ", g);
    for (int i = 0; i < n; i++)
        fprintf(g, "%s'%s' using 1:%d with %s lw 2 title '%s'", i ? ", " : "", dat[i], col, style,
                sim_policy_name(r[i].policy));
    fputc('\n', g);
}

int sim_report_plots(const char *dir, const sim_result_t *r, int n, char *err, size_t len) {
    if (mkdir(dir, 0755) && errno != EEXIST) { snprintf(err, len, "%s: %s", dir, strerror(errno)); return -1; }
    char dat[SIM_NR_POLICIES + 1][512];
    if (n > SIM_NR_POLICIES + 1) n = SIM_NR_POLICIES + 1;
    for (int i = 0; i < n; i++)
        if (write_dat(dir, &r[i], dat[i], sizeof dat[i], err, len)) return -1;
    FILE *g = popen("gnuplot 2>&1", "w");
    if (!g) { snprintf(err, len, "cannot run gnuplot: %s", strerror(errno)); return -1; }
    fprintf(g, "set terminal pngcairo size 900,540 font 'sans,11'\nset grid\nset key top right\n"
               "set xlabel 'simulated time (million operations)'\n");
    fprintf(g, "set output '%s/hybrid.png'\nset title 'Hybrid pageblocks (kernel and movable pages in one block)'\n"
               "set ylabel 'hybrid pageblocks (%% of all)'\nset yrange [0:*]\n", dir);
    plot_lines(g, dat, r, n, 2, "lines");
    fprintf(g, "set output '%s/hugepage.png'\nset title 'Huge-page request success'\n"
               "set ylabel 'success (%% of requests, per sampling window)'\nset yrange [0:105]\n", dir);
    plot_lines(g, dat, r, n, 3, "linespoints pt 7 ps 0.5");
    fprintf(g, "set output '%s/free.png'\nset title 'Free memory'\nset ylabel 'free (%% of memory)'\nset yrange [0:*]\n", dir);
    plot_lines(g, dat, r, n, 5, "lines");
    int st = pclose(g);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st)) {
        snprintf(err, len, "gnuplot failed (status %d); is gnuplot with the pngcairo terminal installed?", st);
        return -1;
    }
    return 0;
}
