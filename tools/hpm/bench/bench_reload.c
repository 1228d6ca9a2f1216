/* bench_reload.c: reads a runs.csv back into runs, for `hpm bench --report
 * DIR`, which rewrites summary.csv, the plots and REPORT.md of an earlier
 * evaluation from its runs.csv alone (after a change to the report, or to
 * compare with another baseline) without running anything again. Columns
 * are found by their header names, so files with extra columns still load;
 * "n/a" reads back as "not measured". Invariant: a row that cannot be
 * parsed stops the load with its line number; nothing is guessed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_int.h"

enum { C_SUITE, C_BENCH, C_ALLOC, C_REP, C_OK, C_EXIT, C_SIGNAL, C_WALL, C_USER, C_SYS, C_MAXRSS, C_MINFLT,
       C_MAJFLT, C_ANON, C_THPK, C_THPP, C_LOAD, C_RESULT, C_ERROR, C_N };

static const char *const col_names[C_N] = {
    "suite", "bench", "alloc", "rep", "ok", "exit_code", "signal", "wall_s", "user_s", "sys_s", "maxrss_kib", "minflt",
    "majflt", "anon_peak_kib", "thp_peak_kib", "thp_peak_pct", "load1", "result", "error"};

#define MAX_COLS 64

static double num(const char *s) {
    if (!s || !*s || !strcmp(s, "n/a")) return -1;
    char *end;
    double v = strtod(s, &end);
    return *end ? -2 : v;
}

static int fill_run(hpm_bench_run_t *r, char **f, const int *col, const int *perf_col) {
    memset(r, 0, sizeof *r);
    hpm_bench_copy(r->suite, sizeof r->suite, f[col[C_SUITE]]);
    hpm_bench_copy(r->bench, sizeof r->bench, f[col[C_BENCH]]);
    hpm_bench_copy(r->alloc, sizeof r->alloc, f[col[C_ALLOC]]);
    hpm_bench_copy(r->result, sizeof r->result, f[col[C_RESULT]]);
    hpm_bench_copy(r->error, sizeof r->error, f[col[C_ERROR]]);
    double v[C_N];
    for (int c = C_REP; c <= C_LOAD; c++) {
        v[c] = col[c] >= 0 ? num(f[col[c]]) : -1;
        if (v[c] == -2) return -1;
    }
    r->rep = (int)v[C_REP];
    r->ok = v[C_OK] == 1;
    r->exit_code = (int)v[C_EXIT];
    r->term_signal = (int)v[C_SIGNAL];
    r->wall_s = v[C_WALL];
    r->user_s = v[C_USER];
    r->sys_s = v[C_SYS];
    r->maxrss_kib = (long)v[C_MAXRSS];
    r->minflt = (long)v[C_MINFLT];
    r->majflt = (long)v[C_MAJFLT];
    r->anon_peak_kib = (long)v[C_ANON];
    r->thp_peak_kib = (long)v[C_THPK];
    r->thp_peak_pct = v[C_THPP];
    r->load1 = v[C_LOAD];
    for (int k = 0; k < HPM_PERF_N; k++) {
        double p = perf_col[k] >= 0 ? num(f[perf_col[k]]) : -1;
        if (p == -2) return -1;
        r->perf[k] = p < 0 ? -1 : (int64_t)p;
    }
    return r->rep >= 1 && r->bench[0] && r->alloc[0] ? 0 : -1;
}

/* Finds the columns by their header names; 0, or -1 (reported) when a
 * needed one is missing. */
static int read_header(const char *path, char **fields, int n, int *col, int *perf_col) {
    int rc = 0;
    for (int c = 0; c < C_N; c++) {
        col[c] = -1;
        for (int i = 0; i < n; i++) if (!strcmp(fields[i], col_names[c])) col[c] = i;
    }
    for (int k = 0; k < HPM_PERF_N; k++) {
        perf_col[k] = -1;
        for (int i = 0; i < n; i++) if (!strcmp(fields[i], hpm_bench_perf_names[k])) perf_col[k] = i;
    }
    for (int c = 0; c <= C_WALL; c++)
        if (col[c] < 0) { fprintf(stderr, "hpm bench: %s has no column '%s'\n", path, col_names[c]); rc = -1; }
    if (col[C_RESULT] < 0 || col[C_ERROR] < 0) { fprintf(stderr, "hpm bench: %s lacks result/error\n", path); rc = -1; }
    return rc;
}

int hpm_bench_load_runs(const char *path, hpm_bench_state_t *st) {
    FILE *f = fopen(path, "re");
    if (!f) { fprintf(stderr, "hpm bench: cannot read %s\n", path); return -1; }
    char *line = NULL, *fields[MAX_COLS];
    size_t cap = 0;
    int col[C_N], perf_col[HPM_PERF_N], n_cols = 0, lineno = 0, rc = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        int n = hpm_bench_csv_split(line, fields, MAX_COLS);
        if (lineno == 1) {
            n_cols = n;
            if ((rc = read_header(path, fields, n, col, perf_col)) != 0) break;
            continue;
        }
        hpm_bench_run_t r;
        if (n != n_cols || fill_run(&r, fields, col, perf_col) != 0) {
            fprintf(stderr, "hpm bench: %s line %d: not a run row\n", path, lineno);
            rc = -1;
            break;
        }
        if (st->n_runs == st->cap_runs) {
            int new_cap = st->cap_runs ? st->cap_runs * 2 : 256;
            hpm_bench_run_t *nr = realloc(st->runs, sizeof *nr * (size_t)new_cap);
            if (!nr) { rc = -1; break; }
            st->runs = nr;
            st->cap_runs = new_cap;
        }
        st->runs[st->n_runs++] = r;
    }
    free(line);
    fclose(f);
    if (rc == 0 && lineno == 0) { fprintf(stderr, "hpm bench: %s is empty\n", path); rc = -1; }
    return rc;
}
