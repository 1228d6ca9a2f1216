/* bench_main.c: `hpm bench [SUITE...] [--alloc LIST] [--baseline NAME]
 * [--quick|--full|--tiny] [--reps N] [--out DIR]`, the evaluation. It picks
 * the cases of the named suites (default: micro, macro, throughput), the
 * allocators (default: every known one; missing ones are listed as
 * skipped), runs every case under every allocator with repetitions
 * interleaved (rep 1: case A under allocators 1..n, case B ...; then rep
 * 2), shows progress and an ETA on stderr, runs the ccow/color suites
 * when asked and built, then writes runs.csv, summary.csv, the plots and
 * REPORT.md into DIR/<time>/ and points DIR/latest at it.
 * Exit status: 0 all runs succeeded, 1 some run failed (the report is
 * still written and says which), 2 bad usage or setup. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "bench_int.h"
#include "hpm.h"

#define MAX_ARGS 48

static const char *const default_suites[] = {"micro", "macro", "throughput"};

static double mono_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f) {
    fprintf(f,
        "usage: hpm bench [SUITE|CASE...] [--alloc LIST] [--baseline NAME] [--quick|--full|--tiny]\n"
        "                 [--reps N] [--out DIR] [--list] [--selftest] [--report RUNDIR]\n"
        "  Runs the benchmark programs under every allocator (LD_PRELOAD) and writes\n"
        "  DIR/<time>/{runs.csv,summary.csv,REPORT.md,*.png}; DIR/latest points at it.\n"
        "  SUITE: micro, macro, throughput (the default three), ccow, color, all;\n"
        "         or case names (see --list).\n"
        "  --alloc LIST     comma-separated: glibc,glibc-thp,jemalloc,jemalloc-thp,tcmalloc,\n"
        "                   mimalloc,mimalloc-large,hpmalloc (default: all; missing = skipped);\n"
        "                   NAME=LIB.so[,VAR=VALUE] adds an allocator (e.g. a peer of\n"
        "                   ../shared/peers, or a second hpmalloc build)\n"
        "  --baseline NAME  the allocator the others are compared with (default jemalloc)\n"
        "  --quick          3 repetitions, about 10 minutes on 2 cores (default)\n"
        "  --full           7 repetitions, larger sizes, under an hour\n"
        "  --tiny           1 repetition at the smallest sizes (for tests)\n"
        "  --reps N         override the number of repetitions\n"
        "  --out DIR        results folder (default: results)\n"
        "  --list           list the cases and allocators and exit\n"
        "  --selftest       check the driver's parsing and arithmetic, then exit\n"
        "  --report RUNDIR  rewrite summary.csv, plots and REPORT.md of an earlier run\n"
        "                   from its runs.csv (nothing is run; --baseline may change)\n"
        "  Exit status: 0 all runs succeeded, 1 some failed (see REPORT.md), 2 usage.\n"
        "  See docs/bench.md.\n");
}

static void progress(const hpm_bench_ctx_t *ctx, const char *fmt, ...) {
    (void)ctx;
    va_list ap;
    fprintf(stderr, "hpm bench: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
}

static void report_md(const hpm_bench_ctx_t *ctx, const char *md) {
    hpm_bench_state_t *st = ctx->priv;
    size_t n = strlen(md);
    char *nb = realloc(st->extra_md, st->extra_len + n + 2);
    if (!nb) return;
    st->extra_md = nb;
    memcpy(nb + st->extra_len, md, n);
    st->extra_len += n;
    if (n && md[n - 1] != '\n') nb[st->extra_len++] = '\n';
    nb[st->extra_len] = 0;
}

typedef struct {
    int scale, reps, list, selftest;
    const char *alloc_list, *baseline, *out_root, *report_dir;
    int want_case[64], want_ccow, want_color, baseline_given;
} opts_t;

/* Marks the cases of a suite or a case name; returns -1 when unknown. */
static int want_name(opts_t *o, const char *name) {
    int hit = 0;
    if (!strcmp(name, "all")) { o->want_ccow = o->want_color = 1; hit = 1; }
    if (!strcmp(name, "ccow")) { o->want_ccow = 1; return 0; }
    if (!strcmp(name, "color") || !strcmp(name, "colour")) { o->want_color = 1; return 0; }
    for (int i = 0; i < hpm_bench_n_cases; i++)
        if (!strcmp(name, "all") || !strcmp(name, hpm_bench_cases[i].suite) || !strcmp(name, hpm_bench_cases[i].name)) {
            o->want_case[i] = 1;
            hit = 1;
        }
    return hit ? 0 : -1;
}

static int parse_opts(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->scale = HPM_SCALE_QUICK;
    o->baseline = "jemalloc";
    o->out_root = "results";
    int named = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
        else if (!strcmp(a, "--quick")) o->scale = HPM_SCALE_QUICK;
        else if (!strcmp(a, "--full")) o->scale = HPM_SCALE_FULL;
        else if (!strcmp(a, "--tiny")) o->scale = HPM_SCALE_TINY;
        else if (!strcmp(a, "--list")) o->list = 1;
        else if (!strcmp(a, "--selftest")) o->selftest = 1;
        else if (!strcmp(a, "--alloc") && has_val) o->alloc_list = argv[++i];
        else if (!strcmp(a, "--baseline") && has_val) { o->baseline = argv[++i]; o->baseline_given = 1; }
        else if (!strcmp(a, "--out") && has_val) o->out_root = argv[++i];
        else if (!strcmp(a, "--report") && has_val) o->report_dir = argv[++i];
        else if (!strcmp(a, "--reps") && has_val) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end || v < 1 || v > 50) { fprintf(stderr, "hpm bench: --reps needs a number in 1..50\n"); return -1; }
            o->reps = (int)v;
        } else if (a[0] == '-') {
            fprintf(stderr, "hpm bench: unknown or incomplete option '%s'\n", a);
            usage(stderr);
            return -1;
        } else {
            if (want_name(o, a) != 0) {
                fprintf(stderr, "hpm bench: unknown suite or case '%s' (see hpm bench --list)\n", a);
                return -1;
            }
            named = 1;
        }
    }
    if (!named)
        for (size_t s = 0; s < sizeof default_suites / sizeof default_suites[0]; s++) want_name(o, default_suites[s]);
    if (!o->reps) o->reps = o->scale == HPM_SCALE_FULL ? 7 : o->scale == HPM_SCALE_QUICK ? 3 : 1;
    return 0;
}

/* Chooses the allocators: sel[] gets the available ones selected. */
static int select_allocs(const opts_t *o, const hpm_bench_alloc_t *all, int n_all, hpm_bench_alloc_t *sel,
                         int *n_sel) {
    *n_sel = 0;
    if (o->alloc_list) {
        static char items[HPM_BENCH_MAX_ALLOCS][HPM_BENCH_ITEM_LEN];
        int n_items = hpm_bench_alloc_split(o->alloc_list, items, HPM_BENCH_MAX_ALLOCS);
        if (n_items < 0) return -1;
        for (int it = 0; it < n_items; it++) {
            const char *t = items[it];
            if (strchr(t, '=')) {   /* NAME=LIB.so[,VAR=VALUE] */
                if (hpm_bench_alloc_custom(t, &sel[*n_sel]) != 0) return -1;
                (*n_sel)++;
                continue;
            }
            int found = -1;
            for (int i = 0; i < n_all; i++)
                if (!strcmp(all[i].name, t)) found = i;
            if (found < 0) {
                fprintf(stderr, "hpm bench: unknown allocator '%s'; known:", t);
                for (int i = 0; i < n_all; i++) fprintf(stderr, " %s", all[i].name);
                fprintf(stderr, "\n");
                return -1;
            }
            if (!all[found].available) {
                fprintf(stderr, "hpm bench: %s is not installed: skipped (package: %s)\n", t, all[found].package);
                continue;
            }
            int dup = 0;
            for (int k = 0; k < *n_sel; k++) dup |= !strcmp(sel[k].name, t);
            if (!dup) sel[(*n_sel)++] = all[found];
        }
    } else {
        for (int i = 0; i < n_all; i++) {
            if (all[i].available) sel[(*n_sel)++] = all[i];
            else fprintf(stderr, "hpm bench: %s not found: skipped (install: %s)\n", all[i].name, all[i].package);
        }
    }
    if (*n_sel == 0) { fprintf(stderr, "hpm bench: no allocator to measure\n"); return -1; }
    return 0;
}

static const char *pick_baseline(const opts_t *o, const hpm_bench_alloc_t *sel, int n_sel) {
    for (int i = 0; i < n_sel; i++)
        if (!strcmp(sel[i].name, o->baseline)) return sel[i].name;
    if (o->baseline_given) {
        fprintf(stderr, "hpm bench: baseline '%s' is not among the measured allocators\n", o->baseline);
        return NULL;
    }
    fprintf(stderr, "hpm bench: %s is not measured; using %s as the baseline\n", o->baseline, sel[0].name);
    return sel[0].name;
}

static int make_out_dir(const char *root, char *out, size_t len) {
    if (mkdir(root, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "hpm bench: cannot create %s: %s\n", root, strerror(errno));
        return -1;
    }
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    char stamp[32];
    strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
    for (int i = 1; i < 100; i++) {
        if (i == 1) snprintf(out, len, "%s/%s", root, stamp);
        else snprintf(out, len, "%s/%s-%d", root, stamp, i);
        if (mkdir(out, 0755) == 0) return 0;
        if (errno != EEXIST) break;
    }
    fprintf(stderr, "hpm bench: cannot create a folder in %s: %s\n", root, strerror(errno));
    return -1;
}

static void list_all(const hpm_bench_alloc_t *all, int n_all) {
    printf("cases (suite: case  program arguments at quick scale):\n");
    for (int i = 0; i < hpm_bench_n_cases; i++)
        printf("  %-10s %-15s %s %s\n", hpm_bench_cases[i].suite, hpm_bench_cases[i].name, hpm_bench_cases[i].prog,
               hpm_bench_cases[i].args[HPM_SCALE_QUICK]);
    printf("  %-10s %-15s %s\n", "ccow", "(suite)", hpm_bench_suite_ccow ? "built" : "not built");
    printf("  %-10s %-15s %s\n", "color", "(suite)", hpm_bench_suite_color ? "built" : "not built");
    printf("allocators:\n");
    for (int i = 0; i < n_all; i++)
        printf("  %-15s %s%s  %s\n", all[i].name,
               all[i].available ? (all[i].preload[0] ? all[i].preload : "(libc)") : "missing, install: ",
               all[i].available ? "" : all[i].package, all[i].env ? all[i].env : "");
}

/* Runs one case under one allocator once. */
static void run_case(const hpm_bench_ctx_t *ctx, const hpm_bench_case_t *c, const hpm_bench_alloc_t *a, int rep) {
    hpm_bench_state_t *st = ctx->priv;
    char prog[PATH_MAX], args[512], *argv[MAX_ARGS];
    int n = 0;
    snprintf(prog, sizeof prog, "%s/%s", ctx->bench_dir, c->prog);
    argv[n++] = prog;
    hpm_bench_copy(args, sizeof args, c->args[st->scale]);
    for (char *save = NULL, *t = strtok_r(args, " ", &save); t && n < MAX_ARGS - 3; t = strtok_r(NULL, " ", &save))
        argv[n++] = t;
    argv[n++] = "--seed";
    argv[n++] = "1";
    argv[n] = NULL;
    double est = c->est_s[st->scale];
    double timeout = est * 20 > 120 ? est * 20 : 120;
    hpm_bench_run_t r;
    double t0 = mono_s();
    ctx->run(ctx, c->suite, c->name, a, rep, argv, NULL, timeout, &r);
    st->done++;
    st->expected_left_s -= est;
    double spent = mono_s() - st->t_start_s, planned_est = 0;
    for (int i = 0; i < st->n_runs; i++) {
        const hpm_bench_case_t *k = hpm_bench_case_find(st->runs[i].bench);
        if (k) planned_est += k->est_s[st->scale];
    }
    double factor = planned_est > 0 ? spent / planned_est : 1;
    char eta[32];
    hpm_bench_fmt_duration(st->expected_left_s > 0 ? st->expected_left_s * factor : 0, eta, sizeof eta);
    fprintf(stderr, "hpm bench: [%3d/%d] %-14s %-15s rep %d/%d  %6.2fs  %s  ETA %s\n", st->done, st->planned, c->name,
            a->name, rep, ctx->reps, mono_s() - t0, r.ok ? "ok" : "FAILED", eta);
    if (!r.ok) fprintf(stderr, "hpm bench:        %s\n", r.error);
}

static void run_suite(const hpm_bench_ctx_t *ctx, const char *name, int (*fn)(const hpm_bench_ctx_t *)) {
    hpm_bench_state_t *st = ctx->priv;
    size_t len = strlen(st->suites_run);
    if (!fn) {
        len = strlen(st->suites_absent);
        snprintf(st->suites_absent + len, sizeof st->suites_absent - len, "%s%s", len ? ", " : "", name);
        progress(ctx, "suite %s is not built into this hpm", name);
        return;
    }
    progress(ctx, "suite %s", name);
    int rc = fn(ctx);
    snprintf(st->suites_run + len, sizeof st->suites_run - len, "%s%s%s", len ? ", " : "", name,
             rc ? " (could not run)" : "");
}

static void write_outputs(const hpm_bench_ctx_t *ctx, const char *out_root) {
    hpm_bench_state_t *st = ctx->priv;
    char path[PATH_MAX], note[1024];
    int bad = hpm_bench_check_checksums(st->runs, st->n_runs);
    if (bad) progress(ctx, "%d run(s) gave a checksum that differs from the other allocators: marked failed", bad);
    snprintf(path, sizeof path, "%s/runs.csv", ctx->out_dir);
    FILE *f = fopen(path, "w");
    if (f) { hpm_bench_runs_csv(f, st->runs, st->n_runs); fclose(f); }
    else progress(ctx, "cannot write %s: %s", path, strerror(errno));
    snprintf(path, sizeof path, "%s/summary.csv", ctx->out_dir);
    hpm_bench_write_summary(ctx, path);
    hpm_bench_write_plots(ctx, note, sizeof note);
    snprintf(path, sizeof path, "%s/REPORT.md", ctx->out_dir);
    hpm_bench_write_report(ctx, path, note);
    if (!out_root) return;
    snprintf(path, sizeof path, "%s/latest", out_root);
    const char *base = strrchr(ctx->out_dir, '/');
    unlink(path);
    if (symlink(base ? base + 1 : ctx->out_dir, path) != 0) progress(ctx, "cannot make %s: %s", path, strerror(errno));
}

/* The command line, for the report's first line. */
static void fill_command(hpm_bench_state_t *st, int argc, char **argv) {
    size_t len = 0;
    for (int i = 0; i < argc && len < sizeof st->command - 1; i++)
        len += (size_t)snprintf(st->command + len, sizeof st->command - len, "%s%s", i ? " " : "hpm ", argv[i]);
}

/* --report RUNDIR: everything from runs.csv, nothing run again. */
static int report_again(const opts_t *o, hpm_bench_state_t *st, const hpm_bench_alloc_t *all, int n_all,
                        hpm_bench_ctx_t *ctx) {
    static hpm_bench_alloc_t sel[HPM_BENCH_MAX_ALLOCS];
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s/runs.csv", o->report_dir) >= (int)sizeof path) return 2;
    if (hpm_bench_load_runs(path, st) != 0) return 2;
    int n_sel = 0, reps = 1;
    for (int i = 0; i < st->n_runs; i++) {
        if (st->runs[i].rep > reps) reps = st->runs[i].rep;
        int seen = 0;
        for (int k = 0; k < n_sel; k++) seen |= !strcmp(sel[k].name, st->runs[i].alloc);
        if (seen || n_sel == HPM_BENCH_MAX_ALLOCS) continue;
        hpm_bench_alloc_t a = {.name = st->runs[i].alloc, .available = 1};
        for (int k = 0; k < n_all; k++)
            if (!strcmp(all[k].name, st->runs[i].alloc)) a = all[k];
        a.available = 1;
        sel[n_sel++] = a;
    }
    const char *baseline = pick_baseline(o, sel, n_sel);
    if (!baseline) return 2;
    st->regenerated = 1;
    st->all_allocs = sel;
    st->n_all_allocs = n_sel;
    ctx->out_dir = o->report_dir;
    ctx->reps = reps;
    ctx->baseline = baseline;
    ctx->n_allocs = n_sel;
    ctx->allocs = sel;
    write_outputs(ctx, NULL);
    int failed = 0;
    for (int i = 0; i < st->n_runs; i++) failed += !st->runs[i].ok;
    progress(ctx, "%d runs read back, %d failed; report: %s/REPORT.md", st->n_runs, failed, o->report_dir);
    return 0;
}

int hpm_cmd_bench(int argc, char **argv) {
    opts_t o;
    if (parse_opts(argc, argv, &o) != 0) return 2;
    if (o.selftest) return hpm_bench_selftest();

    static hpm_bench_state_t st;
    static hpm_bench_alloc_t all[HPM_BENCH_MAX_ALLOCS], sel[HPM_BENCH_MAX_ALLOCS];
    static char hpm_dir[PATH_MAX], bench_dir[PATH_MAX], out_dir[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", st.hpm_path, sizeof st.hpm_path - 1);
    if (n <= 0) { fprintf(stderr, "hpm bench: cannot find the hpm binary\n"); return 2; }
    st.hpm_path[n] = 0;
    hpm_bench_copy(hpm_dir, sizeof hpm_dir, st.hpm_path);
    char *slash = strrchr(hpm_dir, '/');
    if (slash) *slash = 0;
    if (snprintf(bench_dir, sizeof bench_dir, "%s/bench", hpm_dir) >= (int)sizeof bench_dir) {
        fprintf(stderr, "hpm bench: path too long\n");
        return 2;
    }
    int n_all = hpm_bench_allocs_detect(all, HPM_BENCH_MAX_ALLOCS, hpm_find_library());
    if (o.list) { list_all(all, n_all); return 0; }

    if (o.report_dir) {
        hpm_bench_ctx_t rctx = {.hpm_dir = hpm_dir, .bench_dir = bench_dir, .quick = 1, .run = hpm_bench_run_child,
                                .report_md = report_md, .progress = progress, .priv = &st};
        fill_command(&st, argc, argv);
        hpm_bench_perf_probe(&st);
        return report_again(&o, &st, all, n_all, &rctx);
    }
    int n_sel;
    if (select_allocs(&o, all, n_all, sel, &n_sel) != 0) return 2;
    for (int k = 0; k < n_sel && n_all < HPM_BENCH_MAX_ALLOCS; k++) {   /* --alloc NAME=LIB ones, for the report */
        int known = 0;
        for (int i = 0; i < n_all; i++) known |= !strcmp(all[i].name, sel[k].name);
        if (!known) all[n_all++] = sel[k];
    }
    const char *baseline = pick_baseline(&o, sel, n_sel);
    if (!baseline) return 2;
    for (int i = 0; i < hpm_bench_n_cases; i++) {
        char prog[PATH_MAX];
        int len = snprintf(prog, sizeof prog, "%s/%s", bench_dir, hpm_bench_cases[i].prog);
        if (o.want_case[i] && (len >= (int)sizeof prog || access(prog, X_OK) != 0)) {
            fprintf(stderr, "hpm bench: %s is missing; build the benchmarks with make\n", prog);
            return 2;
        }
    }
    if (make_out_dir(o.out_root, out_dir, sizeof out_dir) != 0) return 2;

    st.scale = o.scale;
    st.all_allocs = all;
    st.n_all_allocs = n_all;
    st.selected = o.alloc_list;
    hpm_bench_perf_probe(&st);
    hpm_bench_catch_signals();
    hpm_bench_ctx_t ctx = {.out_dir = out_dir, .hpm_dir = hpm_dir, .bench_dir = bench_dir,
                           .quick = o.scale != HPM_SCALE_FULL, .tiny = o.scale == HPM_SCALE_TINY, .reps = o.reps,
                           .baseline = baseline, .n_allocs = n_sel, .allocs = sel, .run = hpm_bench_run_child,
                           .report_md = report_md, .progress = progress, .priv = &st};
    int n_cases = 0;
    for (int i = 0; i < hpm_bench_n_cases; i++) {
        if (!o.want_case[i]) continue;
        n_cases++;
        st.expected_left_s += hpm_bench_cases[i].est_s[o.scale] * n_sel * o.reps;
    }
    st.planned = n_cases * n_sel * o.reps;
    char eta[32];
    hpm_bench_fmt_duration(st.expected_left_s, eta, sizeof eta);
    progress(&ctx, "%d cases x %d allocators x %d reps = %d runs (about %s%s), baseline %s, output %s", n_cases, n_sel,
             o.reps, st.planned, eta, o.want_ccow || o.want_color ? " plus suites" : "", baseline, out_dir);
    progress(&ctx, "counters: %s", st.perf_note);
    FILE *la = fopen("/proc/loadavg", "re");
    if (la) {
        if (!fgets(st.load_start, sizeof st.load_start, la)) st.load_start[0] = 0;
        st.load_start[strcspn(st.load_start, "\n")] = 0;
        fclose(la);
    }
    fill_command(&st, argc, argv);
    st.t_start_s = mono_s();
    for (int rep = 1; rep <= o.reps; rep++)
        for (int i = 0; i < hpm_bench_n_cases; i++)
            if (o.want_case[i])
                for (int a = 0; a < n_sel; a++) run_case(&ctx, &hpm_bench_cases[i], &sel[a], rep);
    if (o.want_ccow) run_suite(&ctx, "ccow", hpm_bench_suite_ccow);
    if (o.want_color) run_suite(&ctx, "color", hpm_bench_suite_color);
    write_outputs(&ctx, o.out_root);
    int failed = 0;
    for (int i = 0; i < st.n_runs; i++) failed += !st.runs[i].ok;
    char took[32];
    hpm_bench_fmt_duration(mono_s() - st.t_start_s, took, sizeof took);
    progress(&ctx, "%d runs in %s, %d failed; report: %s/REPORT.md", st.n_runs, took, failed, out_dir);
    return failed ? 1 : 0;
}
