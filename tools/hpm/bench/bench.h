/* bench.h: the evaluation driver `hpm bench` and the interface its suites
 * share. The driver (bench_main.c) finds the allocators, runs every
 * benchmark case under each of them in a forked child (LD_PRELOAD plus the
 * allocator's environment), measures the child (bench_run.c), appends one
 * row per run to runs.csv and writes summary.csv, REPORT.md and PNG plots
 * (bench_report.c, bench_plot.c). Pure arithmetic and parsing live in
 * bench_stats.c so that `hpm bench --selftest` can test them.
 *
 * Suites built by other files (ccow, color) receive a hpm_bench_ctx_t. They
 * run their programs through ctx->run (which measures and records a run in
 * runs.csv exactly like the driver's own) and add their text to REPORT.md
 * through ctx->report_md. They must not write into ctx->out_dir files that
 * the driver owns (runs.csv, summary.csv, REPORT.md); other file names in
 * ctx->out_dir are theirs (prefix them with the suite name). */
#ifndef HPM_BENCH_H
#define HPM_BENCH_H
#include <stdint.h>
#include <stdio.h>

/* Hardware counters recorded per run. A value < 0 means "n/a". */
enum {
    HPM_PERF_CYCLES, HPM_PERF_INSTRUCTIONS, HPM_PERF_DTLB_LOAD_MISSES,
    HPM_PERF_DTLB_WALKS, HPM_PERF_ITLB_MISSES, HPM_PERF_LLC_READ_MISSES,
    HPM_PERF_N
};

/* One allocator the driver knows. `preload` is the shared library put in
 * LD_PRELOAD (NULL for glibc, which needs none); `env` is an extra
 * "NAME=VALUE" setting (NULL for none) such as MALLOC_CONF for
 * jemalloc-thp. `available` is 0 when the library is missing; then
 * `package` names the Debian package (or build step) that provides it. */
typedef struct {
    const char *name;
    char preload[512];
    const char *env;
    const char *package;
    char version[96];
    int available;
} hpm_bench_alloc_t;

/* Everything measured about one run of one program under one allocator.
 * A run that exits non-zero, dies on a signal, or prints no RESULT line is
 * a failure: ok = 0, `error` holds the status and the last output lines,
 * and none of its times are used in any summary. */
typedef struct {
    char suite[32];
    char bench[64];          /* case name, e.g. "memaccess-rand" */
    char alloc[32];
    int rep;                 /* 1..reps */
    int ok;
    int exit_code;           /* -1 when killed by a signal */
    int term_signal;         /* 0 when it exited */
    double wall_s, user_s, sys_s;
    long maxrss_kib, minflt, majflt;
    long anon_peak_kib;      /* largest Anonymous seen in smaps_rollup */
    long thp_peak_kib;       /* largest AnonHugePages seen */
    double thp_peak_pct;     /* largest AnonHugePages/Anonymous, percent; -1 = never sampled */
    int64_t perf[HPM_PERF_N];
    double load1;            /* 1-minute load average when the run ended */
    char result[1024];       /* the program's last RESULT line, without "RESULT " */
    char error[512];         /* failure: status and last lines, one line */
} hpm_bench_run_t;

typedef struct hpm_bench_ctx hpm_bench_ctx_t;

struct hpm_bench_ctx {
    const char *out_dir;     /* results/<time>/, exists, ends without '/' */
    const char *hpm_dir;     /* folder of the running hpm (build/) */
    const char *bench_dir;   /* folder of the benchmark programs (build/bench) */
    int quick;               /* 1 for --quick (and --tiny), 0 for --full */
    int tiny;                /* 1 for --tiny: smallest sizes, for tests */
    int reps;                /* repetitions per (case, allocator) */
    const char *baseline;    /* baseline allocator name */
    int n_allocs;            /* allocators selected and available */
    const hpm_bench_alloc_t *allocs;

    /* Runs argv (argv[0] is a path) under `alloc` with the extra
     * NULL-terminated "NAME=VALUE" settings `env` (may be NULL), measures
     * it, appends the row to runs.csv and fills *out (may be NULL).
     * timeout_s > 0 kills the run after that many seconds (a failure).
     * Returns 0 when the run succeeded, -1 when it failed. */
    int (*run)(const hpm_bench_ctx_t *ctx, const char *suite, const char *bench,
               const hpm_bench_alloc_t *alloc, int rep, char *const argv[],
               const char *const env[], double timeout_s, hpm_bench_run_t *out);

    /* Appends Markdown text to REPORT.md (in a section after the driver's
     * tables; start it with "## Title\n"). */
    void (*report_md)(const hpm_bench_ctx_t *ctx, const char *markdown);

    /* Prints a progress line on stderr (printf-style). */
    void (*progress)(const hpm_bench_ctx_t *ctx, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

    void *priv;              /* the driver's own state */
};

/* Suites in other files. Absent suites are reported as "not built".
 * Each returns 0 when it ran (even if some runs failed; failures are in
 * runs.csv), non-zero when it could not run at all. */
int hpm_bench_suite_ccow(const hpm_bench_ctx_t *ctx) __attribute__((weak));
int hpm_bench_suite_color(const hpm_bench_ctx_t *ctx) __attribute__((weak));

/* ---- bench_stats.c: pure functions, tested by --selftest ---- */

/* Finds `key` in a result line "k1=v1 k2=v2 ..." and copies its value into
 * buf. Returns 0 when found, -1 otherwise. */
int hpm_bench_result_get(const char *line, const char *key, char *buf, size_t len);
/* Same, parsed as a number: returns 0 and sets *v, or -1 when missing or
 * not a number. */
int hpm_bench_result_num(const char *line, const char *key, double *v);
/* Returns the number of key=value pairs in line, or -1 when a token is
 * malformed (no '=', empty key, a key with characters other than
 * [A-Za-z0-9_.@-]). */
int hpm_bench_result_count(const char *line);
/* Median of n values (n >= 1); sorts a copy. NaN when n == 0. */
double hpm_bench_median(const double *v, int n);
/* Minimum and maximum of n values. */
void hpm_bench_minmax(const double *v, int n, double *min, double *max);
/* value / baseline, NaN when either is not finite or baseline <= 0. */
double hpm_bench_ratio(double value, double baseline);
/* 100 * (value - baseline) / baseline, NaN as in hpm_bench_ratio. */
double hpm_bench_pct_diff(double value, double baseline);
/* Writes s to f as one CSV field (RFC 4180: quoted when it holds a comma,
 * quote, CR or LF; quotes doubled). */
void hpm_bench_csv_field(FILE *f, const char *s);
/* Splits one CSV line (no trailing newline needed) into at most max
 * fields, unquoting them in place. Returns the number of fields. */
int hpm_bench_csv_split(char *line, char **fields, int max);
/* Formats a duration like "4m05s" / "12s" into buf. */
void hpm_bench_fmt_duration(double s, char *buf, size_t len);
#endif
