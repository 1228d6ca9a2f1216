/* bench_main.c: `hpm bench [SUITE...] [--alloc LIST] [--baseline NAME]
 * [--quick|--full|--tiny] [--reps N] [--out DIR]`, the evaluation. It picks
 * the cases of the named suites (default: micro, macro, throughput, real), the
 * allocators (default: every known one; missing ones are listed as
 * skipped), runs every case under every allocator with repetitions
 * interleaved (rep 1: case A under allocators 1..n, case B ...; then rep
 * 2), shows progress and an ETA on stderr, runs the ccow/color suites
 * when asked and built, then writes runs.csv, summary.csv, the plots and
 * REPORT.md into DIR/<time>/ and points DIR/latest at it.
 * Exit status: 0 all runs succeeded, 1 some run failed (the report is
 * still written and says which), 2 bad usage or setup. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "args.h"
#include "bench_common.h"   /* bench_rng_t, the programs' seeded generator */
#include "bench_int.h"
#include "bench_warm.h"   /* the warm-up before each run */
#include "hpm.h"
#include "hpm_proc.h"

#define MAX_ARGS 48

static const char *const default_suites[] = {"micro", "macro", "throughput", "real"};

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
        "  SUITE: micro, macro, throughput, real (the default four), ccow, color, all;\n"
        "         or case names (see --list).\n"
        "  --alloc LIST     comma-separated: glibc,glibc-thp,jemalloc,jemalloc-thp,tcmalloc,\n"
        "                   mimalloc,mimalloc-large,hpmalloc (default: all; missing = skipped);\n"
        "                   NAME=LIB.so[,VAR=VALUE] adds an allocator (e.g. a peer of\n"
        "                   ../shared/peers, or a second hpmalloc build)\n"
        "  --baseline NAME  the allocator the others are compared with (default jemalloc)\n"
        "  --quick          3 repetitions, about 12-16 minutes on 2 cores (default)\n"
        "  --full           7 repetitions, larger sizes, under an hour\n"
        "  --tiny           1 repetition at the smallest sizes (for tests)\n"
        "  --reps N         override the number of repetitions\n"
        "  --out DIR        results folder (default: results)\n"
        "  --list           list the cases and allocators and exit\n"
        "  --selftest       check the driver's parsing and arithmetic, then exit\n"
        "  --report RUNDIR  rewrite summary.csv, plots and REPORT.md of an earlier run\n"
        "                   from its runs.csv (nothing is run; --baseline may change)\n"
        "  --help, --version\n"
        "  Options and suites may come in any order; -- ends the options.\n"
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

enum { B_QUICK, B_FULL, B_TINY, B_LIST, B_SELFTEST, B_ALLOC, B_BASELINE, B_OUT, B_REPORT, B_REPS, B_N };
static const hpm_opt_t bench_options[B_N] = {
    [B_QUICK] = {"--quick", 0, 0}, [B_FULL] = {"--full", 0, 0},         [B_TINY] = {"--tiny", 0, 0},
    [B_LIST] = {"--list", 0, 0},   [B_SELFTEST] = {"--selftest", 0, 0}, [B_ALLOC] = {"--alloc", 0, 1},
    [B_BASELINE] = {"--baseline", 0, 1}, [B_OUT] = {"--out", 0, 1},     [B_REPORT] = {"--report", 0, 1},
    [B_REPS] = {"--reps", 0, 1},
};

static int bench_option(void *ctx, int id, const char *val) {
    opts_t *o = ctx;
    switch (id) {
    case B_QUICK: o->scale = HPM_SCALE_QUICK; return 0;
    case B_FULL: o->scale = HPM_SCALE_FULL; return 0;
    case B_TINY: o->scale = HPM_SCALE_TINY; return 0;
    case B_LIST: o->list = 1; return 0;
    case B_SELFTEST: o->selftest = 1; return 0;
    case B_ALLOC: o->alloc_list = val; return 0;
    case B_BASELINE: o->baseline = val; o->baseline_given = 1; return 0;
    case B_OUT: o->out_root = val; return 0;
    case B_REPORT: o->report_dir = val; return 0;
    case B_REPS: return hpm_parse_int(val, 1, 50, &o->reps);
    }
    return -1;
}

/* -1 to go on, or the exit status (0 after --help/--version, 2 usage). */
static int parse_opts(int argc, char **argv, opts_t *o) {
    memset(o, 0, sizeof *o);
    o->scale = HPM_SCALE_QUICK;
    o->baseline = "jemalloc";
    o->out_root = "results";
    hpm_operands_t ops;
    int st = hpm_args_parse("hpm bench", argc, argv, bench_options, B_N, bench_option, o, usage, 0, &ops);
    if (st >= 0) return st;
    int named = ops.n > 0;
    for (int i = 0; i < ops.n; i++)
        if (want_name(o, ops.operands[i]) != 0) {
            st = hpm_usage_error("hpm bench", usage, "unknown suite or case '%s' (see hpm bench --list)", ops.operands[i]);
            hpm_args_free(&ops);
            return st;
        }
    hpm_args_free(&ops);
    if (!named)
        for (size_t s = 0; s < sizeof default_suites / sizeof default_suites[0]; s++) want_name(o, default_suites[s]);
    if (!o->reps) o->reps = o->scale == HPM_SCALE_FULL ? 7 : o->scale == HPM_SCALE_QUICK ? 3 : 1;
    return -1;
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

/* hpm's path, its folder and the benchmark programs' folder beside it. */
static int find_dirs(hpm_bench_state_t *st, char *hpm_dir, char *bench_dir) {
    ssize_t n = readlink("/proc/self/exe", st->hpm_path, sizeof st->hpm_path - 1);
    if (n <= 0) { fprintf(stderr, "hpm bench: cannot find the hpm binary\n"); return -1; }
    st->hpm_path[n] = 0;
    hpm_bench_copy(hpm_dir, PATH_MAX, st->hpm_path);
    char *slash = strrchr(hpm_dir, '/');
    if (slash) *slash = 0;
    if (snprintf(bench_dir, PATH_MAX, "%s/bench", hpm_dir) >= PATH_MAX) {
        fprintf(stderr, "hpm bench: path too long\n");
        return -1;
    }
    return 0;
}

/* Every selected case's program is built. */
/* Whether the real program of case c ("real-NAME") is installed:
 * "realprog --program NAME --available" exits 0. */
static int real_available(const char *prog, const hpm_bench_case_t *c) {
    const char *name = c->name + strlen("real-");
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execl(prog, prog, "--program", name, "--available", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Every wanted case's program must be built; a real program that is not
 * installed leaves its case out, with a note. */
static int check_programs(opts_t *o, const char *bench_dir) {
    for (int i = 0; i < hpm_bench_n_cases; i++) {
        char prog[PATH_MAX];
        int len = snprintf(prog, sizeof prog, "%s/%s", bench_dir, hpm_bench_cases[i].prog);
        if (o->want_case[i] && (len >= (int)sizeof prog || access(prog, X_OK) != 0)) {
            fprintf(stderr, "hpm bench: %s is missing; build the benchmarks with make\n", prog);
            return -1;
        }
        if (o->want_case[i] && !strcmp(hpm_bench_cases[i].suite, "real") && !real_available(prog, &hpm_bench_cases[i])) {
            fprintf(stderr, "hpm bench: %s left out: its program is not installed (tools/install-deps.sh bench)\n",
                    hpm_bench_cases[i].name);
            o->want_case[i] = 0;
        }
    }
    return 0;
}

/* Counts the runs, estimates the time and says so; notes the load. */
static void announce(const hpm_bench_ctx_t *ctx, const opts_t *o, hpm_bench_state_t *st) {
    int n_cases = 0;
    for (int i = 0; i < hpm_bench_n_cases; i++) {
        if (!o->want_case[i]) continue;
        n_cases++;
        st->expected_left_s += hpm_bench_cases[i].est_s[o->scale] * ctx->n_allocs * o->reps;
    }
    st->planned = n_cases * ctx->n_allocs * o->reps;
    char eta[32];
    hpm_bench_fmt_duration(st->expected_left_s, eta, sizeof eta);
    progress(ctx, "%d cases x %d allocators x %d reps = %d runs (about %s%s), baseline %s, output %s", n_cases,
             ctx->n_allocs, o->reps, st->planned, eta, o->want_ccow || o->want_color ? " plus suites" : "",
             ctx->baseline, ctx->out_dir);
    progress(ctx, "counters: %s", st->perf_note);
    hpm_proc_text("/proc/loadavg", NULL, st->load_start, sizeof st->load_start);
}

/* The order of the allocators for one case of one repetition: a shuffle
 * seeded by both, the same on every run of hpm bench. A fixed order gave
 * every allocator the same predecessor, and in this VM a run that follows
 * a run of the same kind of heap finds its memory warm (two hpmalloc
 * builds side by side: the second won mstress by 8-20% whichever it was). */
static void alloc_order(int *order, int n, int rep, int case_idx) {
    bench_rng_t rng;
    bench_rng_seed(&rng, (uint64_t)rep << 32 | (uint32_t)case_idx);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = (int)bench_rng_below(&rng, (uint64_t)i + 1), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static int alloc_index(const hpm_bench_ctx_t *ctx, const char *name) {
    for (int a = 0; a < ctx->n_allocs; a++)
        if (!strcmp(ctx->allocs[a].name, name)) return a;
    return ctx->n_allocs;
}

/* The runs of one case and repetition, [first, n_runs), put back in the
 * order of the selection, whatever order they ran in: runs.csv then lists
 * them as the live summary does, and `--report` (which takes the
 * allocators in the order they first appear in runs.csv) rebuilds the
 * same summary. */
static void runs_in_selection_order(const hpm_bench_ctx_t *ctx, hpm_bench_state_t *st, int first) {
    for (int i = first + 1; i < st->n_runs; i++) {
        hpm_bench_run_t r = st->runs[i];
        int key = alloc_index(ctx, r.alloc), j = i;
        for (; j > first && alloc_index(ctx, st->runs[j - 1].alloc) > key; j--) st->runs[j] = st->runs[j - 1];
        st->runs[j] = r;
    }
}

/* Every case under every allocator, repetitions interleaved (the
 * allocators in a new order each time), then the suites and the outputs.
 * Returns the exit status. */
static int run_all(hpm_bench_ctx_t *ctx, const opts_t *o, hpm_bench_state_t *st) {
    st->t_start_s = mono_s();
    int order[HPM_BENCH_MAX_ALLOCS];
    for (int rep = 1; rep <= o->reps; rep++)
        for (int i = 0; i < hpm_bench_n_cases; i++)
            if (o->want_case[i]) {
                int first = st->n_runs;
                alloc_order(order, ctx->n_allocs, rep, i);
                for (int a = 0; a < ctx->n_allocs; a++) run_case(ctx, &hpm_bench_cases[i], &ctx->allocs[order[a]], rep);
                runs_in_selection_order(ctx, st, first);
            }
    if (o->want_ccow) run_suite(ctx, "ccow", hpm_bench_suite_ccow);
    if (o->want_color) run_suite(ctx, "color", hpm_bench_suite_color);
    write_outputs(ctx, o->out_root);
    int failed = 0;
    for (int i = 0; i < st->n_runs; i++) failed += !st->runs[i].ok;
    char took[32];
    hpm_bench_fmt_duration(mono_s() - st->t_start_s, took, sizeof took);
    progress(ctx, "%d runs in %s, %d failed; report: %s/REPORT.md", st->n_runs, took, failed, ctx->out_dir);
    return failed ? 1 : 0;
}

/* Adds the --alloc NAME=LIB allocators to the known ones, for the report. */
static int add_custom(hpm_bench_alloc_t *all, int n_all, const hpm_bench_alloc_t *sel, int n_sel) {
    for (int k = 0; k < n_sel && n_all < HPM_BENCH_MAX_ALLOCS; k++) {
        int known = 0;
        for (int i = 0; i < n_all; i++) known |= !strcmp(all[i].name, sel[k].name);
        if (!known) all[n_all++] = sel[k];
    }
    return n_all;
}

int hpm_cmd_bench(int argc, char **argv) {
    opts_t o;
    int parsed = parse_opts(argc, argv, &o);
    if (parsed >= 0) return parsed;
    if (o.selftest) return hpm_bench_selftest();
    static hpm_bench_state_t st;
    static hpm_bench_alloc_t all[HPM_BENCH_MAX_ALLOCS], sel[HPM_BENCH_MAX_ALLOCS];
    static char hpm_dir[PATH_MAX], bench_dir[PATH_MAX], out_dir[PATH_MAX];
    if (find_dirs(&st, hpm_dir, bench_dir) != 0) return 2;
    int n_all = hpm_bench_allocs_detect(all, HPM_BENCH_MAX_ALLOCS, hpm_find_library());
    if (o.list) { list_all(all, n_all); return 0; }
    hpm_bench_ctx_t ctx = {.hpm_dir = hpm_dir, .bench_dir = bench_dir, .quick = 1, .run = hpm_bench_run_child,
                           .report_md = report_md, .progress = progress, .priv = &st};
    if (o.report_dir) {
        fill_command(&st, argc, argv);
        hpm_bench_perf_probe(&st);
        return report_again(&o, &st, all, n_all, &ctx);
    }
    int n_sel;
    if (select_allocs(&o, all, n_all, sel, &n_sel) != 0) return 2;
    n_all = add_custom(all, n_all, sel, n_sel);
    const char *baseline = pick_baseline(&o, sel, n_sel);
    if (!baseline || check_programs(&o, bench_dir) != 0 || make_out_dir(o.out_root, out_dir, sizeof out_dir) != 0)
        return 2;
    st.scale = o.scale;
    st.warm_bytes = bench_warm_bytes(o.scale == HPM_SCALE_TINY ? 0 : BENCH_WARM_DEFAULT_MIB);
    st.all_allocs = all;
    st.n_all_allocs = n_all;
    st.selected = o.alloc_list;
    hpm_bench_perf_probe(&st);
    hpm_bench_catch_signals();
    ctx.out_dir = out_dir, ctx.quick = o.scale != HPM_SCALE_FULL, ctx.tiny = o.scale == HPM_SCALE_TINY;
    ctx.reps = o.reps, ctx.baseline = baseline, ctx.n_allocs = n_sel, ctx.allocs = sel;
    announce(&ctx, &o, &st);
    fill_command(&st, argc, argv);
    return run_all(&ctx, &o, &st);
}
