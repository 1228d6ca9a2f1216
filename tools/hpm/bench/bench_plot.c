/* bench_plot.c: the report's four figures, drawn by gnuplot from data
 * files written next to them (so each plot can be redrawn or checked):
 *   pct_diff.png   percentage difference against the baseline per case,
 *                  grouped bars, one panel per metric (headline, wall
 *                  time, max RSS, and hardware counters when measured);
 *   memaccess.png  ns per node against working-set size (log x), one line
 *                  per allocator, one panel per order and allocation mode;
 *   kmeans.png     percentage difference against the baseline per cluster
 *                  count;
 *   memory.png     peak RSS and peak huge-page coverage per allocator on
 *                  the memory-heavy cases (and aging's RSS at its end).
 * Missing values are written as "?" and left out of the plot. Every
 * allocator keeps one colour in all of them, hpmalloc first and
 * highlighted (bench_style.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_int.h"

static FILE *open_in(const hpm_bench_ctx_t *ctx, const char *name) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", ctx->out_dir, name);
    return fopen(path, "w");
}

static void put_val(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, " %.6g", v);
    else fprintf(f, " ?");
}

static const char *headline(const hpm_bench_case_t *c, char *buf, size_t len) {
    size_t n = strcspn(c->metrics, ",");
    snprintf(buf, len, "%.*s", (int)(n < len - 1 ? n : len - 1), c->metrics);
    return buf;
}

static int has_runs(const hpm_bench_state_t *st, const char *bench) {
    for (int i = 0; i < st->n_runs; i++)
        if (!strcmp(st->runs[i].bench, bench)) return 1;
    return 0;
}

/* The header line "first alloc1 alloc2 ..." in plot order; returns the count. */
static int put_header(FILE *f, const hpm_bench_ctx_t *ctx, const char *first, int skip_baseline, int *idx) {
    int n = hpm_bench_plot_order(ctx, skip_baseline, idx);
    fprintf(f, "%s", first);
    for (int k = 0; k < n; k++) fprintf(f, " %s", ctx->allocs[idx[k]].name);
    fprintf(f, "\n");
    return n;
}

/* pct_<metric>.dat: rows = cases, columns = non-baseline allocators. */
static int write_pct(const hpm_bench_ctx_t *ctx, const char *file, const char *metric) {
    const hpm_bench_state_t *st = ctx->priv;
    FILE *f = open_in(ctx, file);
    if (!f) return -1;
    int idx[HPM_BENCH_MAX_ALLOCS], n = put_header(f, ctx, "case", 1, idx);
    int rows = 0;
    for (int i = 0; i < hpm_bench_n_cases; i++) {
        const hpm_bench_case_t *c = &hpm_bench_cases[i];
        if (!has_runs(st, c->name)) continue;
        char hb[48];
        const char *m = metric ? metric : headline(c, hb, sizeof hb);
        double base = hpm_bench_cell(st, c->name, ctx->baseline, m, NULL, NULL, NULL);
        fprintf(f, "%s", c->name);
        for (int k = 0; k < n; k++)
            put_val(f, hpm_bench_pct_diff(hpm_bench_cell(st, c->name, ctx->allocs[idx[k]].name, m, NULL, NULL, NULL), base));
        fprintf(f, "\n");
        rows++;
    }
    fclose(f);
    return rows;
}

/* memaccess_<case>_<mode>.dat: ws_bytes, then one column per allocator. */
static int write_memaccess(const hpm_bench_ctx_t *ctx, const char *bench, const char *mode, char *file, size_t len) {
    const hpm_bench_state_t *st = ctx->priv;
    snprintf(file, len, "memaccess_%s_%s.dat", bench, mode);
    double sizes[48];
    int n_sizes = 0;
    for (double ws = 1024; ws <= 1024.0 * 1024 * 1024 * 64 && n_sizes < 48; ws *= 2) {
        char key[64];
        snprintf(key, sizeof key, "%s_ns@%.0f", mode, ws);
        int any = 0;
        for (int a = 0; a < ctx->n_allocs && !any; a++) {
            int n;
            hpm_bench_cell(st, bench, ctx->allocs[a].name, key, &n, NULL, NULL);
            any = n > 0;
        }
        if (any) sizes[n_sizes++] = ws;
    }
    if (n_sizes < 2) return 0;
    FILE *f = open_in(ctx, file);
    if (!f) return 0;
    int idx[HPM_BENCH_MAX_ALLOCS], n = put_header(f, ctx, "ws_bytes", 0, idx);
    for (int s = 0; s < n_sizes; s++) {
        char key[64];
        snprintf(key, sizeof key, "%s_ns@%.0f", mode, sizes[s]);
        fprintf(f, "%.0f", sizes[s]);
        for (int k = 0; k < n; k++)
            put_val(f, hpm_bench_cell(st, bench, ctx->allocs[idx[k]].name, key, NULL, NULL, NULL));
        fprintf(f, "\n");
    }
    fclose(f);
    return 1;
}

/* kmeans.dat: k, then pct difference per non-baseline allocator. */
static int write_kmeans(const hpm_bench_ctx_t *ctx) {
    const hpm_bench_state_t *st = ctx->priv;
    char ks[128] = "";
    for (int i = 0; i < st->n_runs; i++)
        if (st->runs[i].ok && !strcmp(st->runs[i].bench, "kmeans") &&
            hpm_bench_result_get(st->runs[i].result, "ks", ks, sizeof ks) == 0) break;
    if (!ks[0]) return 0;
    FILE *f = open_in(ctx, "kmeans.dat");
    if (!f) return 0;
    int idx[HPM_BENCH_MAX_ALLOCS], n = put_header(f, ctx, "k", 1, idx);
    int rows = 0;
    for (char *save = NULL, *t = strtok_r(ks, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char key[32];
        snprintf(key, sizeof key, "ms_k%s", t);
        double base = hpm_bench_cell(st, "kmeans", ctx->baseline, key, NULL, NULL, NULL);
        fprintf(f, "%s", t);
        for (int k = 0; k < n; k++)
            put_val(f, hpm_bench_pct_diff(hpm_bench_cell(st, "kmeans", ctx->allocs[idx[k]].name, key, NULL, NULL, NULL), base));
        fprintf(f, "\n");
        rows++;
    }
    fclose(f);
    return rows;
}

/* memory.dat: rows = memory cases (+ aging-end), columns = allocators;
 * two blocks: peak RSS MiB, then peak THP %. */
static int write_memory(const hpm_bench_ctx_t *ctx) {
    const hpm_bench_state_t *st = ctx->priv;
    FILE *f = open_in(ctx, "memory.dat");
    if (!f) return 0;
    int rows = 0, idx[HPM_BENCH_MAX_ALLOCS], n = 0;
    for (int block = 0; block < 2; block++) {
        if (block) fprintf(f, "\n\n");
        n = put_header(f, ctx, "case", 0, idx);
        for (int i = 0; i < hpm_bench_n_cases; i++) {
            const hpm_bench_case_t *c = &hpm_bench_cases[i];
            if (!c->memory || !has_runs(st, c->name)) continue;
            for (int end = 0; end < (strcmp(c->name, "aging") ? 1 : 2); end++) {
                fprintf(f, "%s%s", c->name, end ? "-end" : "");
                const char *m = block == 0 ? (end ? "rss_kib" : "maxrss_kib") : (end ? "thp_pct" : "thp_peak_pct");
                for (int k = 0; k < n; k++) {
                    double v = hpm_bench_cell(st, c->name, ctx->allocs[idx[k]].name, m, NULL, NULL, NULL);
                    put_val(f, block == 0 ? v / 1024.0 : v);
                }
                fprintf(f, "\n");
                rows += block == 0;
            }
        }
    }
    fclose(f);
    return rows;
}

/* 1. percentage difference per case and metric (the headline first). */
static int plot_pct(const hpm_bench_ctx_t *ctx, FILE *g, int n_other, int case_rows) {
    const hpm_bench_state_t *st = ctx->priv;
    const char *metrics[8] = {NULL, "wall_s", "maxrss_kib"};
    int n_metrics = 3;
    if (st->perf_ok) { metrics[n_metrics++] = "cycles"; metrics[n_metrics++] = "dtlb_load_misses"; }
    if (n_other == 0 || case_rows == 0) return 0;
    fprintf(g, "set terminal pngcairo noenhanced size 1400,%d font ',10'\nset output 'pct_diff.png'\nset multiplot layout %d,1\n",
            330 * n_metrics, n_metrics);
    for (int m = 0; m < n_metrics; m++) {
        char file[64];
        snprintf(file, sizeof file, "pct_%s.dat", metrics[m] ? metrics[m] : "headline");
        write_pct(ctx, file, metrics[m]);
        fprintf(g, "set title \"%s: %% difference against %s (below 0 = less)\"\nset ylabel \"%% vs baseline\"\n",
                metrics[m] ? metrics[m] : "headline metric (see REPORT.md)", ctx->baseline);
        hpm_bench_gp_columns(g, ctx, file, 1, 0, NULL);
    }
    fprintf(g, "unset multiplot\n");
    return 1;
}

/* 2. memaccess curves: ns per node against the working set. */
static int plot_memaccess(const hpm_bench_ctx_t *ctx, FILE *g) {
    char files[4][96], titles[4][96];
    int n_mem = 0;
    const char *mem_cases[] = {"memaccess-seq", "memaccess-rand"}, *modes[] = {"nodes", "calloc"};
    for (int c = 0; c < 2; c++)
        for (int m = 0; m < 2; m++)
            if (write_memaccess(ctx, mem_cases[c], modes[m], files[n_mem], sizeof files[0])) {
                snprintf(titles[n_mem], sizeof titles[0], "%s, %s", mem_cases[c],
                         m ? "one calloc for all nodes" : "one malloc per node");
                n_mem++;
            }
    if (!n_mem) return 0;
    fprintf(g, "set terminal pngcairo noenhanced size 1400,%d font ',10'\nset output 'memaccess.png'\n"
               "set style data linespoints\nset logscale x 2\nset logscale y 10\nset xtics rotate by 0 font ',9'\n"
               "set format x '%%.0b%%BB'\nset multiplot layout %d,%d\n",
            n_mem > 2 ? 900 : 450, (n_mem + 1) / 2, n_mem > 1 ? 2 : 1);
    for (int i = 0; i < n_mem; i++) {
        fprintf(g, "set title '%s'\nset xlabel 'working set (bytes)'\nset ylabel 'ns per node'\n", titles[i]);
        hpm_bench_gp_columns(g, ctx, files[i], 0, 1, NULL);
    }
    fprintf(g, "unset multiplot\nunset logscale\nunset xlabel\nset format x '%%g'\n");
    return 1;
}

/* 3. kmeans sweep. */
static int plot_kmeans(const hpm_bench_ctx_t *ctx, FILE *g, int n_other) {
    if (n_other == 0 || write_kmeans(ctx) <= 0) return 0;
    fprintf(g, "set terminal pngcairo noenhanced size 900,500 font ',10'\nset output 'kmeans.png'\nset style data linespoints\n"
               "set logscale x 10\nset title 'kmeans: %% difference against %s per cluster count'\n"
               "set xlabel 'clusters'\nset ylabel '%% vs baseline (time)'\n", ctx->baseline);
    hpm_bench_gp_columns(g, ctx, "kmeans.dat", 1, 1, NULL);
    fprintf(g, "unset logscale\nunset xlabel\n");
    return 1;
}

/* 4. peak RSS and huge-page coverage. */
static int plot_memory(const hpm_bench_ctx_t *ctx, FILE *g, int case_rows) {
    if (case_rows == 0 || write_memory(ctx) <= 0) return 0;
    fprintf(g, "set terminal pngcairo noenhanced size 1200,800 font ',10'\nset output 'memory.png'\nset style data histograms\n"
               "set multiplot layout 2,1\nset xtics rotate by -20\n");
    fprintf(g, "set title 'peak RSS (aging-end: RSS after malloc_trim + 1.5 s)'\nset ylabel 'MiB'\n");
    hpm_bench_gp_columns(g, ctx, "memory.dat", 0, 0, "index 0");
    fprintf(g, "set title 'huge-page coverage: peak AnonHugePages / Anonymous (aging-end: at its end)'\n"
               "set ylabel '%%'\nset yrange [0:100]\n");   /* fixed: a small run may have no huge pages at all */
    hpm_bench_gp_columns(g, ctx, "memory.dat", 0, 0, "index 1");
    fprintf(g, "unset multiplot\n");
    return 1;
}

/* The markdown that embeds the PNGs that exist; returns how many. */
static int plots_note(const hpm_bench_ctx_t *ctx, int gnuplot_rc, int plots, char *note, size_t note_len) {
    static const char *const pngs[] = {"pct_diff.png", "memaccess.png", "kmeans.png", "memory.png"};
    static const char *const what[] = {"% difference against the baseline", "memaccess: ns per node against working set",
                                       "kmeans: % difference per cluster count", "RSS and huge-page coverage"};
    size_t len = 0;
    int made = 0;
    for (int i = 0; i < 4; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", ctx->out_dir, pngs[i]);
        FILE *p = fopen(path, "rb");
        if (!p) continue;
        fclose(p);
        made++;
        if (len < note_len) len += (size_t)snprintf(note + len, note_len - len, "%s![%s](%s)", len ? "\n\n" : "", what[i], pngs[i]);
    }
    if (gnuplot_rc != 0 && len < note_len)
        snprintf(note + len, note_len - len, "%sgnuplot reported errors: see plots.log.", len ? "\n\n" : "");
    if (made == 0 && plots == 0 && len < note_len) snprintf(note + len, note_len - len, "No data to plot.");
    return made;
}

int hpm_bench_write_plots(const hpm_bench_ctx_t *ctx, char *note, size_t note_len) {
    const hpm_bench_state_t *st = ctx->priv;
    note[0] = 0;
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        snprintf(note, note_len, "No plots: gnuplot is not installed (apt-get install gnuplot-nox).");
        return 0;
    }
    int n_other = 0, case_rows = 0;
    for (int a = 0; a < ctx->n_allocs; a++) n_other += strcmp(ctx->allocs[a].name, ctx->baseline) != 0;
    for (int i = 0; i < hpm_bench_n_cases; i++) case_rows += has_runs(st, hpm_bench_cases[i].name);
    FILE *g = open_in(ctx, "plots.gp");
    if (!g) { snprintf(note, note_len, "No plots: cannot write plots.gp."); return 0; }
    fprintf(g, "# gnuplot script written by hpm bench; run it in this folder.\n"
               "set datafile missing '?'\nset key outside right top\nset grid ytics\n"
               "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n"
               "set xtics rotate by -35 font ',9'\n");
    int plots = plot_pct(ctx, g, n_other, case_rows) + plot_memaccess(ctx, g) + plot_kmeans(ctx, g, n_other) +
                plot_memory(ctx, g, case_rows);
    fclose(g);
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "cd '%s' && gnuplot plots.gp >plots.log 2>&1", ctx->out_dir);
    return plots_note(ctx, system(cmd), plots, note, note_len);
}
