/* bench_report.c: turns the list of runs into summary.csv and REPORT.md.
 * Every number is a median over the successful repetitions of one
 * (benchmark, allocator) pair; min and max are kept beside it, and the
 * ratio and percentage difference are against the baseline allocator's
 * median. Failed runs never enter a median: they are listed with their
 * status and last output lines. A cell is marked "~" when the
 * allocator's min..max range overlaps the baseline's, i.e. the repetitions
 * cannot tell the two apart. The machine section records what the numbers
 * depend on: CPU, cores, kernel, THP settings, the hugetlb pool, load, the
 * allocator versions, the counters and the colour/TLB probe. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "bench_int.h"
#include "hpm_proc.h"

#define MAX_VALS 64
#define MAX_KEYS 96
#define KEY_LEN 48

double hpm_bench_cell(const hpm_bench_state_t *st, const char *bench, const char *alloc, const char *metric,
                      int *n_out, double *min, double *max) {
    double v[MAX_VALS];
    int n = 0;
    for (int i = 0; i < st->n_runs && n < MAX_VALS; i++) {
        const hpm_bench_run_t *r = &st->runs[i];
        if (!r->ok || strcmp(r->bench, bench) || strcmp(r->alloc, alloc)) continue;
        if (hpm_bench_run_metric(r, metric, &v[n]) == 0) n++;
    }
    if (n_out) *n_out = n;
    double lo, hi;
    hpm_bench_minmax(v, n, &lo, &hi);
    if (min) *min = lo;
    if (max) *max = hi;
    return hpm_bench_median(v, n);
}

int hpm_bench_check_checksums(hpm_bench_run_t *runs, int n) {
    int marked = 0;
    for (int i = 0; i < n; i++) {
        char mine[64], other[64], best[64] = "";
        if (!runs[i].ok || hpm_bench_result_get(runs[i].result, "checksum", mine, sizeof mine) != 0) continue;
        /* the value most ok runs of this bench agree on */
        int best_count = 0;
        for (int j = 0; j < n; j++) {
            if (!runs[j].ok || strcmp(runs[j].bench, runs[i].bench) ||
                hpm_bench_result_get(runs[j].result, "checksum", other, sizeof other) != 0) continue;
            int count = 0;
            for (int k = 0; k < n; k++) {
                char third[64];
                if (runs[k].ok && !strcmp(runs[k].bench, runs[i].bench) &&
                    hpm_bench_result_get(runs[k].result, "checksum", third, sizeof third) == 0 && !strcmp(third, other))
                    count++;
            }
            if (count > best_count) { best_count = count; hpm_bench_copy(best, sizeof best, other); }
        }
        if (best[0] && strcmp(mine, best)) {
            runs[i].ok = 0;
            snprintf(runs[i].error, sizeof runs[i].error, "wrong answer: checksum %s, the other runs agree on %s",
                     mine, best);
            marked++;
        }
    }
    return marked;
}

/* The distinct benches in run order. */
static int list_benches(const hpm_bench_state_t *st, const char **out, int max) {
    int n = 0;
    for (int i = 0; i < st->n_runs; i++) {
        int seen = 0;
        for (int k = 0; k < n; k++) seen |= !strcmp(out[k], st->runs[i].bench);
        if (!seen && n < max) out[n++] = st->runs[i].bench;
    }
    return n;
}

/* Result-line metrics of a bench: the case's patterns expanded over the
 * keys its ok runs printed (every numeric key for benches of other
 * suites). Returns the count; keys in pattern order. */
static int bench_metrics(const hpm_bench_state_t *st, const char *bench, char keys[][KEY_LEN], int max) {
    const hpm_bench_case_t *c = hpm_bench_case_find(bench);
    char pats[512];
    hpm_bench_copy(pats, sizeof pats, c ? c->metrics : "*");
    int n = 0;
    for (char *save = NULL, *p = strtok_r(pats, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        for (int i = 0; i < st->n_runs; i++) {
            const hpm_bench_run_t *r = &st->runs[i];
            if (!r->ok || strcmp(r->bench, bench)) continue;
            char line[1024];
            hpm_bench_copy(line, sizeof line, r->result);
            for (char *s2 = NULL, *t = strtok_r(line, " ", &s2); t; t = strtok_r(NULL, " ", &s2)) {
                char *eq = strchr(t, '=');
                double v;
                if (!eq) continue;
                *eq = 0;
                if (!hpm_bench_metric_match(p, t) || !strcmp(t, "checksum") || !strcmp(t, "bench")) continue;
                if (hpm_bench_result_num(r->result, t, &v) != 0) continue;
                int dup = 0;
                for (int k = 0; k < n; k++) dup |= !strcmp(keys[k], t);
                if (!dup && n < max) hpm_bench_copy(keys[n++], KEY_LEN, t);
            }
        }
    }
    return n;
}

static void summary_rows(FILE *f, const hpm_bench_ctx_t *ctx, const char *suite, const char *bench, const char *metric) {
    const hpm_bench_state_t *st = ctx->priv;
    double base = hpm_bench_cell(st, bench, ctx->baseline, metric, NULL, NULL, NULL);
    for (int a = 0; a < ctx->n_allocs; a++) {
        int n;
        double lo, hi, med = hpm_bench_cell(st, bench, ctx->allocs[a].name, metric, &n, &lo, &hi);
        if (n == 0) continue;
        hpm_bench_csv_field(f, suite);
        fputc(',', f);
        hpm_bench_csv_field(f, bench);
        fprintf(f, ",%s,%s,%d,%.6g,%.6g,%.6g,", ctx->allocs[a].name, metric, n, med, lo, hi);
        double ratio = hpm_bench_ratio(med, base);
        if (isfinite(base)) fprintf(f, "%.6g,", base);
        else fprintf(f, "n/a,");
        if (isfinite(ratio)) fprintf(f, "%.4f,%.2f", ratio, hpm_bench_pct_diff(med, base));
        else fprintf(f, "n/a,n/a");   /* no baseline, or a baseline of 0 */
        fprintf(f, ",%s\n", hpm_bench_metric_higher_better(metric) ? "higher" : "lower");
    }
}

int hpm_bench_write_summary(const hpm_bench_ctx_t *ctx, const char *path) {
    const hpm_bench_state_t *st = ctx->priv;
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return -1; }
    fprintf(f, "suite,bench,alloc,metric,n,median,min,max,baseline_median,ratio,pct_diff,better\n");
    const char *benches[128];
    int nb = list_benches(st, benches, 128);
    for (int b = 0; b < nb; b++) {
        const char *suite = "";
        for (int i = 0; i < st->n_runs; i++)
            if (!strcmp(st->runs[i].bench, benches[b])) { suite = st->runs[i].suite; break; }
        static char keys[MAX_KEYS][KEY_LEN];
        int nk = bench_metrics(st, benches[b], keys, MAX_KEYS);
        for (int k = 0; k < nk; k++) summary_rows(f, ctx, suite, benches[b], keys[k]);
        for (int m = 0; m < hpm_bench_n_driver_metrics; m++) summary_rows(f, ctx, suite, benches[b], hpm_bench_driver_metrics[m]);
    }
    fclose(f);
    return 0;
}

/* ---- REPORT.md ---- */


/* `hpm stat --colours --json`: the verdict and evidence, or why not. */
static void colour_probe(const hpm_bench_state_t *st, char *out, size_t len) {
    char cmd[1200], buf[4096];
    snprintf(cmd, sizeof cmd, "timeout 120 '%s' stat --colours --json 2>/dev/null", st->hpm_path);
    FILE *p = popen(cmd, "r");
    size_t n = p ? fread(buf, 1, sizeof buf - 1, p) : 0;
    int rc = p ? pclose(p) : -1;
    buf[n] = 0;
    char *v = strstr(buf, "\"verdict\":\"");
    if (rc != 0 || !v) { snprintf(out, len, "probe not available"); return; }
    v += 11;
    char verdict[128], evidence[1024] = "";
    size_t vl = strcspn(v, "\"");
    snprintf(verdict, sizeof verdict, "%.*s", (int)(vl < 127 ? vl : 127), v);
    char *e = strstr(buf, "\"evidence\":\"");
    if (e) { e += 12; size_t el = strcspn(e, "\""); snprintf(evidence, sizeof evidence, "%.*s", (int)(el < 1023 ? el : 1023), e); }
    snprintf(out, len, "**%s**%s%s", verdict, evidence[0] ? ". " : "", evidence);
}

/* Median, min and max of the load recorded after each run. */
static double load_stats(const hpm_bench_state_t *st, double *min, double *max) {
    double *v = malloc(sizeof *v * (size_t)(st->n_runs + 1));
    int n = 0;
    for (int i = 0; v && i < st->n_runs; i++)
        if (st->runs[i].load1 >= 0) v[n++] = st->runs[i].load1;
    hpm_bench_minmax(v, n, min, max);
    double med = hpm_bench_median(v, n);
    free(v);
    return med;
}

static void alloc_table(FILE *f, const hpm_bench_ctx_t *ctx);

static void machine_section(FILE *f, const hpm_bench_ctx_t *ctx) {
    const hpm_bench_state_t *st = ctx->priv;
    char cpu[256], thp[128], defrag[128], nr_hp[64], hp_size[64], load[128], mem[64], probe[1400];
    struct utsname u;
    hpm_proc_text("/proc/cpuinfo", "model name", cpu, sizeof cpu);
    hpm_proc_text("/sys/kernel/mm/transparent_hugepage/enabled", NULL, thp, sizeof thp);
    hpm_proc_text("/sys/kernel/mm/transparent_hugepage/defrag", NULL, defrag, sizeof defrag);
    hpm_proc_text("/proc/sys/vm/nr_hugepages", NULL, nr_hp, sizeof nr_hp);
    hpm_proc_text("/proc/meminfo", "Hugepagesize", hp_size, sizeof hp_size);
    hpm_proc_text("/proc/meminfo", "MemTotal", mem, sizeof mem);
    hpm_proc_text("/proc/loadavg", NULL, load, sizeof load);
    colour_probe(st, probe, sizeof probe);
    fprintf(f, "## Machine\n\n");
    fprintf(f, "- CPU: %s; %ld cores online\n", cpu[0] ? cpu : "unknown", sysconf(_SC_NPROCESSORS_ONLN));
    fprintf(f, "- Memory: %.1f GiB\n", atof(mem) / 1048576.0);
    if (uname(&u) == 0) fprintf(f, "- Kernel: %s %s %s\n", u.sysname, u.release, u.machine);
    fprintf(f, "- THP: enabled `%s`, defrag `%s`\n", thp[0] ? thp : "unknown", defrag[0] ? defrag : "unknown");
    fprintf(f, "- hugetlb pool: nr_hugepages %s (page size %s)\n", nr_hp[0] ? nr_hp : "?", hp_size[0] ? hp_size : "?");
    fprintf(f, "- Load average (1/5/15 min, runnable/total, last pid): at start `%s`, at end `%s`\n",
            st->load_start[0] ? st->load_start : "?", load);
    double lmin, lmax, lmed = load_stats(st, &lmin, &lmax);
    if (isfinite(lmed))
        fprintf(f, "- 1-minute load after each run: median %.2f, min %.2f, max %.2f on %ld cores%s\n", lmed, lmin, lmax,
                sysconf(_SC_NPROCESSORS_ONLN),
                lmax > (double)sysconf(_SC_NPROCESSORS_ONLN) + 1 ? " (**busy**: other work shared the CPUs; treat small "
                                                               "differences as noise)" : "");
    fprintf(f, "- Hardware counters: %s\n", st->perf_note);
    fprintf(f, "- Colour / TLB probe (`hpm stat --colours`): %s\n\n", probe);
    alloc_table(f, ctx);
}

/* One row per allocator known: measured, baseline, not selected or skipped. */
static void alloc_table(FILE *f, const hpm_bench_ctx_t *ctx) {
    const hpm_bench_state_t *st = ctx->priv;
    fprintf(f, "| allocator | status | library (LD_PRELOAD) | setting | version |\n|---|---|---|---|---|\n");
    for (int i = 0; i < st->n_all_allocs; i++) {
        const hpm_bench_alloc_t *a = &st->all_allocs[i];
        int measured = 0;
        for (int k = 0; k < ctx->n_allocs; k++) measured |= !strcmp(ctx->allocs[k].name, a->name);
        const char *status = measured ? (strcmp(a->name, ctx->baseline) ? "measured" : "measured, **baseline**")
                           : a->available ? "not selected" : "skipped: not installed";
        fprintf(f, "| %s | %s | %s | %s | %s |\n", a->name, status,
                a->available ? (a->preload[0] ? a->preload : "(libc, none)") : "-", a->env ? a->env : "-",
                a->available ? a->version : a->package);
    }
    fprintf(f, "\n");
}

static const char *headline_metric(const char *bench) {
    static char buf[KEY_LEN];
    const hpm_bench_case_t *c = hpm_bench_case_find(bench);
    if (!c) return "wall_s";
    size_t n = strcspn(c->metrics, ",");
    snprintf(buf, sizeof buf, "%.*s", (int)(n < KEY_LEN - 1 ? n : KEY_LEN - 1), c->metrics);
    return buf;
}

/* "0.93x", "0.93x~" (ranges overlap), "FAIL", "-" (no data). */
static void ratio_cell(const hpm_bench_ctx_t *ctx, const char *bench, const char *alloc, const char *metric,
                       char *out, size_t len) {
    const hpm_bench_state_t *st = ctx->priv;
    int n, nb, runs = 0, fails = 0;
    double lo, hi, blo, bhi;
    double v = hpm_bench_cell(st, bench, alloc, metric, &n, &lo, &hi);
    double b = hpm_bench_cell(st, bench, ctx->baseline, metric, &nb, &blo, &bhi);
    for (int i = 0; i < st->n_runs; i++)
        if (!strcmp(st->runs[i].bench, bench) && !strcmp(st->runs[i].alloc, alloc)) { runs++; fails += !st->runs[i].ok; }
    if (runs == 0) { snprintf(out, len, "-"); return; }
    if (n == 0) { snprintf(out, len, fails ? "FAIL" : "n/a"); return; }
    double r = hpm_bench_ratio(v, b);
    if (!isfinite(r)) { snprintf(out, len, "%.4g", v); return; }
    int overlap = nb > 0 && !(hi < blo || lo > bhi);
    snprintf(out, len, "%.2fx%s%s", r, overlap && strcmp(alloc, ctx->baseline) ? "~" : "", fails ? " (some FAIL)" : "");
}

static void headline_section(FILE *f, const hpm_bench_ctx_t *ctx, const char **benches, int nb) {
    fprintf(f, "## Headline: each allocator against %s\n\n", ctx->baseline);
    fprintf(f, "Each cell is the median of the headline metric divided by %s's median (so %s is 1.00x). "
               "\"~\" marks a difference the repetitions cannot resolve (the min..max ranges overlap).\n\n",
            ctx->baseline, ctx->baseline);
    fprintf(f, "| case | metric (better) |");
    for (int a = 0; a < ctx->n_allocs; a++) fprintf(f, " %s |", ctx->allocs[a].name);
    fprintf(f, "\n|---|---|");
    for (int a = 0; a < ctx->n_allocs; a++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int b = 0; b < nb; b++) {
        const char *m = headline_metric(benches[b]);
        fprintf(f, "| %s | %s (%s) |", benches[b], m, hpm_bench_metric_higher_better(m) ? "higher" : "lower");
        for (int a = 0; a < ctx->n_allocs; a++) {
            char cell[64];
            ratio_cell(ctx, benches[b], ctx->allocs[a].name, m, cell, sizeof cell);
            fprintf(f, " %s |", cell);
        }
        fprintf(f, "\n");
    }
    fprintf(f, "\n");
}

static void fmt_val(char *out, size_t len, double v) {
    if (!isfinite(v)) snprintf(out, len, "n/a");
    else if (fabs(v) >= 1e6) snprintf(out, len, "%.3g", v);
    else if (fabs(v) >= 100) snprintf(out, len, "%.0f", v);
    else snprintf(out, len, "%.3g", v);
}

static void bench_table(FILE *f, const hpm_bench_ctx_t *ctx, const char *bench) {
    const hpm_bench_state_t *st = ctx->priv;
    const hpm_bench_case_t *c = hpm_bench_case_find(bench);
    const char *m = headline_metric(bench);
    fprintf(f, "### %s\n\n%s%s`%s`: %s. Medians over the successful repetitions, [min..max].\n\n", bench,
            c ? c->what : "", c ? ". Headline " : "Headline ", m, hpm_bench_metric_unit(m));
    fprintf(f, "| allocator | %s | vs %s | wall s | user s | sys s | max RSS MiB | minor faults | THP peak %% | ok/runs |\n",
            m, ctx->baseline);
    fprintf(f, "|---|---|---|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < ctx->n_allocs; a++) {
        const char *al = ctx->allocs[a].name;
        int runs = 0, ok = 0;
        for (int i = 0; i < st->n_runs; i++)
            if (!strcmp(st->runs[i].bench, bench) && !strcmp(st->runs[i].alloc, al)) { runs++; ok += st->runs[i].ok; }
        if (!runs) continue;
        double lo, hi, v = hpm_bench_cell(st, bench, al, m, NULL, &lo, &hi);
        char sv[32], slo[32], shi[32], ratio[64], w[32], us[32], sy[32], rss[32], flt[32], thp[32];
        fmt_val(sv, sizeof sv, v);
        fmt_val(slo, sizeof slo, lo);
        fmt_val(shi, sizeof shi, hi);
        ratio_cell(ctx, bench, al, m, ratio, sizeof ratio);
        fmt_val(w, sizeof w, hpm_bench_cell(st, bench, al, "wall_s", NULL, NULL, NULL));
        fmt_val(us, sizeof us, hpm_bench_cell(st, bench, al, "user_s", NULL, NULL, NULL));
        fmt_val(sy, sizeof sy, hpm_bench_cell(st, bench, al, "sys_s", NULL, NULL, NULL));
        fmt_val(rss, sizeof rss, hpm_bench_cell(st, bench, al, "maxrss_kib", NULL, NULL, NULL) / 1024.0);
        fmt_val(flt, sizeof flt, hpm_bench_cell(st, bench, al, "minflt", NULL, NULL, NULL));
        fmt_val(thp, sizeof thp, hpm_bench_cell(st, bench, al, "thp_peak_pct", NULL, NULL, NULL));
        fprintf(f, "| %s | %s [%s..%s] | %s | %s | %s | %s | %s | %s | %s | %d/%d |\n", al, sv, slo, shi, ratio, w, us,
                sy, rss, flt, thp, ok, runs);
    }
    fprintf(f, "\n");
}

/* For a case whose metrics include patterns ("nodes_ns@*", "ms_k*"): one
 * row per expanded key, one column per allocator, medians. */
static void detail_table(FILE *f, const hpm_bench_ctx_t *ctx, const char *bench) {
    const hpm_bench_state_t *st = ctx->priv;
    const hpm_bench_case_t *c = hpm_bench_case_find(bench);
    if (!c || !strchr(c->metrics, '*')) return;
    static char keys[MAX_KEYS][KEY_LEN];
    int nk = bench_metrics(st, bench, keys, MAX_KEYS), rows = 0;
    for (int k = 0; k < nk; k++) {
        char pats[512];
        int patterned = 0;
        hpm_bench_copy(pats, sizeof pats, c->metrics);
        for (char *save = NULL, *p = strtok_r(pats, ",", &save); p; p = strtok_r(NULL, ",", &save))
            patterned |= strchr(p, '*') && hpm_bench_metric_match(p, keys[k]);
        if (!patterned) continue;
        if (rows++ == 0) {
            fprintf(f, "Medians per size or step (`*_ns@BYTES`: ns per node at that working set; "
                       "`ms_kK`: ms for K clusters):\n\n| metric |");
            for (int a = 0; a < ctx->n_allocs; a++) fprintf(f, " %s |", ctx->allocs[a].name);
            fprintf(f, "\n|---|");
            for (int a = 0; a < ctx->n_allocs; a++) fprintf(f, "---|");
            fprintf(f, "\n");
        }
        fprintf(f, "| %s |", keys[k]);
        for (int a = 0; a < ctx->n_allocs; a++) {
            char v[32];
            fmt_val(v, sizeof v, hpm_bench_cell(st, bench, ctx->allocs[a].name, keys[k], NULL, NULL, NULL));
            fprintf(f, " %s |", v);
        }
        fprintf(f, "\n");
    }
    if (rows) fprintf(f, "\n");
}

static void failures_section(FILE *f, const hpm_bench_state_t *st) {
    int n = 0;
    for (int i = 0; i < st->n_runs; i++) n += !st->runs[i].ok;
    fprintf(f, "## Failures\n\n");
    if (!n) { fprintf(f, "None: every run exited 0 with its self-check passed.\n\n"); return; }
    fprintf(f, "%d run(s) failed. A failure is never used as a time.\n\n| case | allocator | rep | status and last lines |\n"
               "|---|---|---|---|\n", n);
    for (int i = 0; i < st->n_runs; i++) {
        const hpm_bench_run_t *r = &st->runs[i];
        if (r->ok) continue;
        char err[512];
        hpm_bench_copy(err, sizeof err, r->error);
        for (char *p = err; *p; p++) if (*p == '|') *p = '/';
        fprintf(f, "| %s | %s | %d | %s |\n", r->bench, r->alloc, r->rep, err);
    }
    fprintf(f, "\n");
}

static void how_to_read(FILE *f, const hpm_bench_ctx_t *ctx, const hpm_bench_state_t *st) {
    fprintf(f, "## How to read this\n\n"
        "- Every case ran under every allocator %d time(s), interleaved (rep 1 of every case and allocator, then rep 2, ...), "
        "so slow drift of the machine hits all allocators alike. Numbers are medians; [min..max] shows the spread.\n"
        "- The headline table divides each allocator's median by the baseline's (%s). For times and RSS lower is better; "
        "for mops and huge-page coverage higher is better (the metric column says which). \"~\" means the repetitions' "
        "ranges overlap, so the difference is within noise.\n"
        "- wall/user/sys, max RSS and faults come from wait4() of the child; THP peak is the largest AnonHugePages / "
        "Anonymous seen in /proc/PID/smaps_rollup, sampled every 50 ms (n/a for runs shorter than that).\n"
        "- Before each run, %zu MiB of huge pages were written and freed (HPM_BENCH_WARM_MIB; bench/common/bench_warm.h), "
        "so that every run's first page faults find warm memory: this VM hands free 2 MiB blocks back to its host about 2 s "
        "after they are freed, and a huge-page fault on one costs 6-9 ms instead of 0.3 ms.\n"
        "- Hardware counters: %s\n"
        "- A failure (non-zero exit, signal, timeout, missing RESULT line, or a kmeans checksum that differs from the "
        "other allocators) is listed under Failures and excluded from the medians.\n"
        "- This machine's load is shared: compare the load averages above; on a busy 2-core machine differences under "
        "about 10%% are not meaningful.\n"
        "- Files: runs.csv (one row per run), summary.csv (median/min/max and ratio per case, allocator and metric), "
        "logs/ (each run's output), plot data *.dat and plots.gp.\n\n",
        ctx->reps, ctx->baseline, st->warm_bytes >> 20, st->perf_ok ? st->perf_note : "n/a on this machine, see the machine section.");
}

int hpm_bench_write_report(const hpm_bench_ctx_t *ctx, const char *path, const char *plots_note) {
    const hpm_bench_state_t *st = ctx->priv;
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); return -1; }
    time_t t = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", localtime(&t));
    static const char *const scale_names[] = {"tiny", "quick", "full"};
    if (st->regenerated)
        fprintf(f, "# hpm bench report\n\n`%s`, regenerated %s from this folder's runs.csv (nothing was run again; "
                   "the machine section describes the machine now). Up to %d repetition(s), baseline **%s**.\n\n",
                st->command, when, ctx->reps, ctx->baseline);
    else
        fprintf(f, "# hpm bench report\n\n`%s`, finished %s. Scale: %s, %d repetition(s), baseline **%s**.\n\n",
                st->command, when, scale_names[st->scale], ctx->reps, ctx->baseline);
    machine_section(f, ctx);
    const char *benches[128];
    int nb = list_benches(st, benches, 128);
    const char *driver_benches[128];
    int nd = 0;
    for (int b = 0; b < nb; b++)
        if (hpm_bench_case_find(benches[b])) driver_benches[nd++] = benches[b];
    if (nd) headline_section(f, ctx, driver_benches, nd);
    failures_section(f, st);
    if (plots_note && plots_note[0]) fprintf(f, "## Plots\n\n%s\n\n", plots_note);
    fprintf(f, "## Per benchmark\n\n");
    for (int b = 0; b < nd; b++) {
        bench_table(f, ctx, driver_benches[b]);
        detail_table(f, ctx, driver_benches[b]);
    }
    how_to_read(f, ctx, st);
    if (st->suites_absent[0]) fprintf(f, "## Suites not built\n\n%s: not built into this hpm.\n\n", st->suites_absent);
    if (st->extra_md) fputs(st->extra_md, f);
    fclose(f);
    return 0;
}
