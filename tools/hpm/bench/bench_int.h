/* bench_int.h: what the files of the `hpm bench` driver share among
 * themselves (suites in other files use only bench.h). The driver's data
 * is one list of runs kept in memory (hpm_bench_state_t, reached through
 * ctx->priv); runs.csv, summary.csv, REPORT.md and the plots are all
 * written from it, so they always agree. Layer order: bench_stats (pure) <
 * bench_alloc, bench_cases < bench_run < bench_report, bench_plot <
 * bench_main. */
#ifndef HPM_BENCH_INT_H
#define HPM_BENCH_INT_H
#include "bench.h"

#define HPM_BENCH_MAX_ALLOCS 16
#define HPM_BENCH_ITEM_LEN 768   /* one --alloc item: NAME=LIB.so[,VAR=VALUE] */

#include <string.h>
/* Copies src into dst[len], cutting it short when needed (always ends in 0). */
static inline void hpm_bench_copy(char *dst, size_t len, const char *src) {
    if (len == 0) return;
    size_t n = strlen(src);
    if (n >= len) n = len - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

/* ---- bench_alloc.c: the allocators the driver knows ---- */

/* Fills out[] with every known allocator (available or not) in report
 * order; hpm_lib is build/libhpmalloc.so or NULL. Returns the count. */
int hpm_bench_allocs_detect(hpm_bench_alloc_t *out, int max, const char *hpm_lib);
/* Applies an allocator to the current process environment (used in the
 * forked child before exec): clears other allocators' settings, sets
 * LD_PRELOAD and the allocator's own variable. */
void hpm_bench_alloc_apply_env(const hpm_bench_alloc_t *a);
/* Splits an --alloc list at commas into items; a "VAR=VALUE" token (VAR in
 * capitals) after a "name=LIB" token stays with it. Returns the count, or
 * -1 (with a message) when there are more than max. */
int hpm_bench_alloc_split(const char *list, char items[][HPM_BENCH_ITEM_LEN], int max);
/* Fills *out from an item "NAME=LIB.so[,VAR=VALUE]" (an allocator that is
 * not built in). Returns 0, or -1 with a message on stderr. */
int hpm_bench_alloc_custom(const char *item, hpm_bench_alloc_t *out);

/* ---- bench_cases.c: the benchmark cases of the default suites ---- */

enum { HPM_SCALE_TINY, HPM_SCALE_QUICK, HPM_SCALE_FULL, HPM_SCALE_N };

typedef struct {
    const char *name;        /* case name, e.g. "memaccess-rand" */
    const char *suite;       /* micro, macro or throughput */
    const char *prog;        /* program in ctx->bench_dir */
    const char *args[HPM_SCALE_N];  /* space-separated arguments per scale */
    const char *metrics;     /* result-line metrics, comma-separated; the first is the
                                headline; "prefix*" matches every key with that prefix */
    double est_s[HPM_SCALE_N];      /* expected seconds per run, for the ETA */
    int memory;              /* 1: shown in the RSS / huge-page plot */
    const char *what;        /* one line for the report */
} hpm_bench_case_t;

extern const hpm_bench_case_t hpm_bench_cases[];
extern const int hpm_bench_n_cases;
const hpm_bench_case_t *hpm_bench_case_find(const char *name);
/* 1 when a larger value of this metric is better (throughput, coverage). */
int hpm_bench_metric_higher_better(const char *metric);
/* A short unit/explanation for a metric name ("ns per malloc+free"). */
const char *hpm_bench_metric_unit(const char *metric);

/* ---- bench_stats.c (beyond bench.h) ---- */

/* The value of a metric of one run: driver metrics by name (wall_s,
 * user_s, sys_s, maxrss_kib, minflt, majflt, thp_peak_pct, cycles, ...),
 * anything else from the result line. Returns 0, or -1 when missing/n/a. */
int hpm_bench_run_metric(const hpm_bench_run_t *r, const char *metric, double *v);
extern const char *const hpm_bench_driver_metrics[];
extern const int hpm_bench_n_driver_metrics;
extern const char *const hpm_bench_perf_names[HPM_PERF_N];
/* Does key match the metric pattern ("name" or "prefix*")? */
int hpm_bench_metric_match(const char *pattern, const char *key);

/* ---- driver state (bench_main.c owns it; ctx->priv points to it) ---- */

typedef struct {
    hpm_bench_run_t *runs;
    int n_runs, cap_runs;
    char *extra_md;          /* suites' Markdown, appended to REPORT.md */
    size_t extra_len;
    int planned, done;       /* runs planned / finished, for progress */
    double t_start_s;
    double expected_left_s;  /* sum of est_s of the planned runs not yet done */
    int perf_ok;             /* hardware counters could be opened */
    char perf_note[300];     /* why counters are n/a, or which worked */
    int scale;               /* HPM_SCALE_* */
    size_t warm_bytes;       /* warmed before each run (bench_warm.h); 0: none */
    char hpm_path[1024];     /* the hpm binary, for the colour probe */
    int n_all_allocs;        /* every known allocator, selected or not */
    const hpm_bench_alloc_t *all_allocs;
    const char *selected;    /* --alloc list as given, or NULL */
    int regenerated;         /* --report: runs read back from runs.csv */
    char load_start[64];     /* /proc/loadavg when the runs started */
    char command[512];       /* the command line, for the report */
    char suites_run[256];
    char suites_absent[256];
} hpm_bench_state_t;

/* ---- bench_run.c ---- */
int hpm_bench_run_child(const hpm_bench_ctx_t *ctx, const char *suite, const char *bench,
                        const hpm_bench_alloc_t *alloc, int rep, char *const argv[],
                        const char *const env[], double timeout_s, hpm_bench_run_t *out);
/* Probes perf_event_open once (on this process) and fills st->perf_ok/note. */
void hpm_bench_perf_probe(hpm_bench_state_t *st);
void hpm_bench_runs_csv(FILE *f, const hpm_bench_run_t *runs, int n);
/* SIGINT/SIGTERM/SIGHUP kill the running child's process group first. */
void hpm_bench_catch_signals(void);

/* ---- bench_report.c / bench_plot.c ---- */
/* Marks runs whose result-line checksum disagrees with the majority of
 * their case as failures. Returns how many it marked. */
int hpm_bench_check_checksums(hpm_bench_run_t *runs, int n);
int hpm_bench_write_summary(const hpm_bench_ctx_t *ctx, const char *path);
int hpm_bench_write_report(const hpm_bench_ctx_t *ctx, const char *path, const char *plots_note);
/* Writes the plot data and script into ctx->out_dir and runs gnuplot.
 * Returns the number of PNGs made; note gets a line for the report. */
int hpm_bench_write_plots(const hpm_bench_ctx_t *ctx, char *note, size_t note_len);
/* bench_style.c: the one colour of an allocator in every plot ("#rrggbb"). */
const char *hpm_bench_colour(const char *alloc);
/* Allocator indexes in plot order (hpmalloc first), without the baseline
 * when skip_baseline; returns how many. */
int hpm_bench_plot_order(const hpm_bench_ctx_t *ctx, int skip_baseline, int *idx);
/* A gnuplot "plot" command for a data file whose columns 2.. are the
 * allocators in plot order: bars (lines = 0) or lines, each allocator in its
 * colour, hpmalloc highlighted; extra goes before each "using" (e.g. "index 0"). */
void hpm_bench_gp_columns(FILE *g, const hpm_bench_ctx_t *ctx, const char *file, int skip_baseline, int lines,
                          const char *extra);
/* Median of a metric over the ok runs of (bench, alloc); NaN if none.
 * n_out (may be NULL) gets the number of values, min/max (may be NULL) too. */
double hpm_bench_cell(const hpm_bench_state_t *st, const char *bench, const char *alloc, const char *metric,
                      int *n_out, double *min, double *max);

/* ---- bench_reload.c ---- */
/* Appends the rows of a runs.csv to st->runs. Returns 0, or -1 (with a
 * message) when the file is missing or a row cannot be parsed. */
int hpm_bench_load_runs(const char *path, hpm_bench_state_t *st);

/* ---- bench_selftest.c ---- */
int hpm_bench_selftest(void);
#endif
