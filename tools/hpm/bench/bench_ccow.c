/* bench_ccow.c: the `hpm bench ccow` suite. Runs bench/ccow/ccow_zipf
 * under hpmalloc in every configuration of the CCoW evaluation (cow =
 * MADV_NOHUGEPAGE table, cow-thp = huge pages and the kernel's CoW,
 * ccow-50/70/80/90, ccow-all, ccow-throttled = all at a rate of half a
 * table per half period, ccow-adaptive) for Zipf alpha 0.9, 1.0 and 1.1,
 * interleaved (every configuration once per repetition), then the Redis
 * client (bench/ccow/redis_zipf starting /usr/bin/redis-server) with CCoW
 * off and at the default. Writes ccow_summary.csv, ccow_timeline.csv,
 * ccow_redis.csv, gnuplot PNGs (ccow_fig5_a*.png, ccow_cdf.png,
 * ccow_after_fork.png) and a REPORT.md section with the targets.
 * Every figure is a median over the successful repetitions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench.h"

#define N_CFG 9
#define N_ALPHA 3
#define MAX_REPS 9
#define CFG_COWTHP 1       /* the library's default is CCoW off: cow-thp (docs/ccow.md) */
#define CFG_RECOMMENDED 7  /* ccow-throttled: the mode docs/ccow.md recommends for rewrite-heavy snapshots */

typedef struct { const char *name, *ccow, *thp; int throttled; } cfg_t;

static const cfg_t cfgs[N_CFG] = {
    {"cow", "off", "off", 0},      {"cow-thp", "off", "keep", 0},  {"ccow-50", "50", "keep", 0},
    {"ccow-70", "70", "keep", 0},  {"ccow-80", "80", "keep", 0},   {"ccow-90", "90", "keep", 0},
    {"ccow-all", "all", "keep", 0}, {"ccow-throttled", "all", "keep", 1}, {"ccow-adaptive", "adaptive", "keep", 0},
};
static const double alphas[N_ALPHA] = {0.9, 1.0, 1.1};

enum { M_WPS, M_MINFLT, M_PSS, M_DIRTY, M_THP, M_RECOVERED, M_RECOVER_S, M_FORKS, M_N };
static const char *const metric_keys[M_N] = {"writes_per_s", "minflt", "mem_pss_mib", "mem_dirty_mib",
                                             "thp_avg_pct", "recovered", "recover_s", "forks"};

typedef struct { double v[M_N][MAX_REPS]; int n; double med[M_N]; } cell_t;

static int result_num(const char *line, const char *key, double *v) { return hpm_bench_result_num(line, key, v); }

static double median_of(double *v, int n) { return n > 0 ? hpm_bench_median(v, n) : NAN; }

static double pct(double v, double base) { return base > 0 && isfinite(v) ? 100.0 * (v - base) / base : NAN; }

static const hpm_bench_alloc_t *find_alloc(const hpm_bench_ctx_t *ctx, const char *name) {
    for (int i = 0; i < ctx->n_allocs; i++)
        if (!strcmp(ctx->allocs[i].name, name) && ctx->allocs[i].available) return &ctx->allocs[i];
    return NULL;
}

typedef struct { unsigned long long size_mib, period_ms, duration_s; } scale_t;

static scale_t scale_of(const hpm_bench_ctx_t *ctx) {
    if (ctx->tiny) return (scale_t){64, 500, 2};
    if (ctx->quick) return (scale_t){1024, 2000, 6};
    return (scale_t){8192, 5000, 30};
}

/* Appends a run's timeline (without its header after the first) to all. */
static void timeline_append(const char *one, FILE *all, int *header_done) {
    FILE *f = fopen(one, "r");
    if (!f) return;
    char line[512];
    int first = 1;
    while (fgets(line, sizeof line, f)) {
        if (first) { first = 0; if (*header_done) continue; *header_done = 1; }
        fputs(line, all);
    }
    fclose(f);
    unlink(one);
}

static void run_zipf(const hpm_bench_ctx_t *ctx, const hpm_bench_alloc_t *hpm, scale_t sc, int c, int a, int rep,
                     cell_t *cell, FILE *tl_all, int *tl_header) {
    char prog[1024], size[32], period[32], dur[32], alpha[16], tl[1200], rate_env[64], ccow_env[64], bench[64];
    snprintf(prog, sizeof prog, "%s/ccow_zipf", ctx->bench_dir);
    snprintf(size, sizeof size, "%lluM", sc.size_mib);
    snprintf(period, sizeof period, "%llu", sc.period_ms);
    snprintf(dur, sizeof dur, "%llu", sc.duration_s);
    snprintf(alpha, sizeof alpha, "%.1f", alphas[a]);
    snprintf(tl, sizeof tl, "%s/ccow_tl_tmp.csv", ctx->out_dir);
    snprintf(ccow_env, sizeof ccow_env, "HPM_CCOW=%s", cfgs[c].ccow);
    /* throttled: the whole table in half a period */
    snprintf(rate_env, sizeof rate_env, "HPM_CCOW_RATE=%llu", cfgs[c].throttled ? sc.size_mib * 2000 / sc.period_ms : 0);
    snprintf(bench, sizeof bench, "%s@a%.1f", cfgs[c].name, alphas[a]);
    char *const argv[] = {prog, "--size", size, "--alpha", alpha, "--period-ms", period, "--duration-s", dur,
                          "--thp", (char *)cfgs[c].thp, "--name", (char *)cfgs[c].name, "--timeline", tl, NULL};
    const char *const env[] = {ccow_env, rate_env, NULL};
    hpm_bench_run_t out;
    if (ctx->run(ctx, "ccow", bench, hpm, rep, argv, env, (double)sc.duration_s * 4 + 120, &out) != 0) return;
    double v[M_N];
    for (int m = 0; m < M_N; m++)
        if (result_num(out.result, metric_keys[m], &v[m]) != 0) return;
    for (int m = 0; m < M_N; m++) cell->v[m][cell->n] = v[m];
    cell->n++;
    if (rep == 1) timeline_append(tl, tl_all, tl_header);
    else unlink(tl);
}

static void write_summary(const hpm_bench_ctx_t *ctx, cell_t cells[N_ALPHA][N_CFG]) {
    char path[1200];
    snprintf(path, sizeof path, "%s/ccow_summary.csv", ctx->out_dir);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "alpha,config,runs");
    for (int m = 0; m < M_N; m++) fprintf(f, ",%s", metric_keys[m]);
    fprintf(f, ",wps_vs_cow_pct,wps_vs_cowthp_pct,pss_vs_cow_pct\n");
    for (int a = 0; a < N_ALPHA; a++)
        for (int c = 0; c < N_CFG; c++) {
            cell_t *x = &cells[a][c];
            fprintf(f, "%.1f,%s,%d", alphas[a], cfgs[c].name, x->n);
            for (int m = 0; m < M_N; m++) fprintf(f, ",%.4g", x->med[m]);
            fprintf(f, ",%.1f,%.1f,%.1f\n", pct(x->med[M_WPS], cells[a][0].med[M_WPS]),
                    pct(x->med[M_WPS], cells[a][1].med[M_WPS]), pct(x->med[M_PSS], cells[a][0].med[M_PSS]));
        }
    fclose(f);
    for (int a = 0; a < N_ALPHA; a++) {   /* one small file per alpha for Figure 5 */
        snprintf(path, sizeof path, "%s/ccow_fig5_a%.1f.dat", ctx->out_dir, alphas[a]);
        if (!(f = fopen(path, "w"))) continue;
        for (int c = 0; c < N_CFG; c++) fprintf(f, "%s,%.0f,%.0f\n", cfgs[c].name, cells[a][c].med[M_WPS], cells[a][c].med[M_PSS]);
        fclose(f);
    }
}

/* gnuplot: Figure 5 (throughput and memory per configuration, one PNG per
 * alpha), Figure 6 (CDF of per-bin throughput at alpha 1.0) and the
 * throughput/coverage against time after a fork. */
static void plots(const hpm_bench_ctx_t *ctx) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) { ctx->progress(ctx, "ccow: gnuplot missing, no plots"); return; }
    char path[1200], cmd[2600];
    snprintf(path, sizeof path, "%s/ccow_plots.gp", ctx->out_dir);
    FILE *g = fopen(path, "w");
    if (!g) return;
    fprintf(g, "set datafile separator ','\nset terminal pngcairo size 1000,520\nset key outside\nset grid y\n");
    for (int a = 0; a < N_ALPHA; a++) {
        fprintf(g, "set output 'ccow_fig5_a%.1f.png'\nset title 'CCoW, Zipf alpha %.1f: writes/s (bars) and parent+child Pss (points)'\n"
                   "set style data histograms\nset style fill solid 0.6\nset ylabel 'writes/s'\nset y2label 'MiB'\n"
                   "set ytics nomirror\nset y2tics\nset xtics rotate by -30\nset yrange [0:*]\nset y2range [0:*]\n"
                   "plot 'ccow_fig5_a%.1f.dat' using 2:xtic(1) title 'writes/s' axes x1y1, "
                   "'' using 0:3 with points pt 7 ps 1.5 title 'Pss MiB' axes x1y2\n",
                alphas[a], alphas[a], alphas[a]);
    }
    fprintf(g, "unset y2tics\nunset y2label\nset xtics norotate\nset style data lines\n"
               "set output 'ccow_cdf.png'\nset title 'Throughput CDF, alpha 1.0 (every bin of every run)'\n"
               "set xlabel 'writes/s'\nset ylabel 'cumulative share'\nset yrange [0:1]\n"
               "names = 'cow cow-thp ccow-50 ccow-70 ccow-80 ccow-90 ccow-all ccow-throttled ccow-adaptive'\n"
               "plot for [i=0:%d] 'ccow_cdf.dat' index i using 1:2 with lines lw 2 title word(names, i + 1)\n", N_CFG - 1);
    fprintf(g, "unset title\nset output 'ccow_after_fork.png'\nset multiplot layout 2,1 title 'After a fork, alpha 1.0'\n"
               "set xlabel 'seconds since the fork'\nset ylabel 'writes/s'\nset yrange [0:*]\nset style data points\n"
               "plot for [n in 'cow-thp ccow-80 ccow-all ccow-throttled'] 'ccow_timeline.csv' using "
               "(strcol(1) eq n && $2==1.0 ? $8 : 1/0):4 pt 7 ps 0.6 title n\n"
               "set ylabel 'huge-page coverage %%'\nset yrange [0:105]\n"
               "plot for [n in 'cow-thp ccow-80 ccow-all ccow-throttled'] 'ccow_timeline.csv' using "
               "(strcol(1) eq n && $2==1.0 ? $8 : 1/0):5 pt 7 ps 0.6 title n\nunset multiplot\n");
    fclose(g);
    /* CDF data: per configuration, sorted per-bin writes/s at alpha 1.0. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for c in cow cow-thp ccow-50 ccow-70 ccow-80 ccow-90 ccow-all ccow-throttled ccow-adaptive; do "
             "awk -F, -v c=$c '$1==c && $2==\"1.00\" {print $4}' ccow_timeline.csv | sort -n | "
             "awk '{v[NR]=$1} END {for (i=1;i<=NR;i++) print v[i] \",\" i/NR}'; echo; echo; done > ccow_cdf.dat && "
             "gnuplot ccow_plots.gp 2>ccow_plots.log", ctx->out_dir);
    if (system(cmd) != 0) ctx->progress(ctx, "ccow: gnuplot failed (see ccow_plots.log)");
}

typedef struct { double ops, ops_bg, p99, p99_bg, rss, child, pss; int ok; } redis_t;

static void run_redis(const hpm_bench_ctx_t *ctx, const hpm_bench_alloc_t *hpm, const char *mode, long rate, int rep,
                      redis_t *r) {
    memset(r, 0, sizeof *r);
    if (access("/usr/bin/redis-server", X_OK) != 0) return;
    char prog[1024], keys[32], dur[32], port[16], ccow_env[64], rate_env[64], bench[64];
    snprintf(prog, sizeof prog, "%s/redis_zipf", ctx->bench_dir);
    snprintf(keys, sizeof keys, "%d", ctx->tiny ? 20000 : ctx->quick ? 1000000 : 3000000);
    snprintf(dur, sizeof dur, "%d", ctx->tiny ? 4 : ctx->quick ? 20 : 60);
    snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 20000));
    snprintf(ccow_env, sizeof ccow_env, "HPM_CCOW=%s", mode);
    snprintf(rate_env, sizeof rate_env, "HPM_CCOW_RATE=%ld", rate);
    snprintf(bench, sizeof bench, "redis-ccow-%s", mode);
    char *const argv[] = {prog, "--server", "/usr/bin/redis-server", "--port", port, "--keys", keys, "--value", "1000",
                          "--duration-s", dur, "--bgsave-every-s", ctx->tiny ? "2" : "5", "--name", bench, NULL};
    const char *const env[] = {ccow_env, rate_env, NULL};
    hpm_bench_run_t out;
    if (ctx->run(ctx, "ccow", bench, hpm, rep, argv, env, 600, &out) != 0) return;
    r->ok = result_num(out.result, "ops_per_s", &r->ops) == 0 && result_num(out.result, "ops_bgsave_per_s", &r->ops_bg) == 0 &&
            result_num(out.result, "p99_us", &r->p99) == 0 && result_num(out.result, "p99_bgsave_us", &r->p99_bg) == 0 &&
            result_num(out.result, "server_rss_max_mib", &r->rss) == 0 &&
            result_num(out.result, "child_rss_max_mib", &r->child) == 0 &&
            result_num(out.result, "pair_pss_max_mib", &r->pss) == 0;
}

static size_t md_zipf_tables(char *md, size_t cap, cell_t cells[N_ALPHA][N_CFG]) {
    size_t n = 0;
    for (int a = 0; a < N_ALPHA; a++) {
        n += (size_t)snprintf(md + n, cap - n,
                              "\n**alpha %.1f** (medians)\n\n| config | runs | writes/s | vs cow | vs cow-thp | minor faults | "
                              "Pss parent+child MiB | vs cow | Private_Dirty MiB | THP avg %% | forks back to 90%% huge | "
                              "mean time to 90%% s |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n", alphas[a]);
        for (int c = 0; c < N_CFG && n < cap; c++) {
            cell_t *x = &cells[a][c];
            /* recover_s is -1 for a run where no fork recovered: a median with it means nothing */
            double rec = x->med[M_RECOVER_S];
            char rec_s[32];
            if (rec >= 0) snprintf(rec_s, sizeof rec_s, "%.2f", rec);
            else snprintf(rec_s, sizeof rec_s, "-");
            n += (size_t)snprintf(md + n, cap - n, "| %s | %d | %.0f | %+.1f%% | %+.1f%% | %.0f | %.0f | %+.1f%% | %.0f | %.1f | %.0f/%.0f | %s |\n",
                                  cfgs[c].name, x->n, x->med[M_WPS], pct(x->med[M_WPS], cells[a][0].med[M_WPS]),
                                  pct(x->med[M_WPS], cells[a][1].med[M_WPS]), x->med[M_MINFLT], x->med[M_PSS],
                                  pct(x->med[M_PSS], cells[a][0].med[M_PSS]), x->med[M_DIRTY], x->med[M_THP],
                                  x->med[M_RECOVERED], x->med[M_FORKS], rec_s);
        }
    }
    return n;
}

static size_t md_targets(char *md, size_t cap, cell_t cells[N_ALPHA][N_CFG]) {
    int best = 2;
    for (int c = 2; c < N_CFG; c++) if (cells[1][c].med[M_WPS] > cells[1][best].med[M_WPS]) best = c;
    int low = cells[0][6].med[M_WPS] >= cells[0][2].med[M_WPS] ? 6 : 2;
    cell_t *b = &cells[1][best];
    return (size_t)snprintf(md, cap,
        "\nTargets (issue 6):\n\n"
        "- alpha 1.0: best CCoW mode **%s**: %+.1f%% writes/s vs cow-thp (target >= +5%%), %+.1f%% vs cow (target >= +10%%); "
        "Pss %+.1f%% vs cow (target <= +10%%).\n"
        "- alpha 0.9: %s %+.1f%% vs cow (target > 0; the research reports +15%%).\n"
        "- alpha 1.1: the default is CCoW off (= cow-thp, +0%%); the recommended ccow-throttled %+.1f%% vs cow-thp.\n"
        "- coverage: forks whose heap was back to 90%% huge before the next fork, alpha 1.0: ccow-throttled %.0f of %.0f "
        "(mean %.2f s), ccow-all %.0f of %.0f, cow-thp %.0f of %.0f.\n",
        cfgs[best].name, pct(b->med[M_WPS], cells[1][1].med[M_WPS]), pct(b->med[M_WPS], cells[1][0].med[M_WPS]),
        pct(b->med[M_PSS], cells[1][0].med[M_PSS]), cfgs[low].name, pct(cells[0][low].med[M_WPS], cells[0][0].med[M_WPS]),
        pct(cells[2][CFG_RECOMMENDED].med[M_WPS], cells[2][CFG_COWTHP].med[M_WPS]), cells[1][CFG_RECOMMENDED].med[M_RECOVERED],
        cells[1][CFG_RECOMMENDED].med[M_FORKS], cells[1][CFG_RECOMMENDED].med[M_RECOVER_S], cells[1][6].med[M_RECOVERED],
        cells[1][6].med[M_FORKS], cells[1][1].med[M_RECOVERED], cells[1][1].med[M_FORKS]);
}

static size_t md_redis(const hpm_bench_ctx_t *ctx, char *md, size_t cap, redis_t r[2][MAX_REPS], int reps) {
    static const char *modes[2] = {"off", "all+rate"};
    size_t n = (size_t)snprintf(md, cap,
        "\n### Redis (redis-server under hpmalloc, SETRANGE updates by Zipf 1.0, BGSAVE every %s s)\n\n"
        "| HPM_CCOW | ops/s | ops/s during BGSAVE | p99 us | p99 during BGSAVE us | server RSS MiB | child RSS MiB | Pss both MiB |\n"
        "|---|---|---|---|---|---|---|---|\n", ctx->tiny ? "2" : "5");
    char path[1200];
    snprintf(path, sizeof path, "%s/ccow_redis.csv", ctx->out_dir);
    FILE *f = fopen(path, "w");
    if (f) fprintf(f, "ccow,rep,ops_per_s,ops_bgsave_per_s,p99_us,p99_bgsave_us,server_rss_mib,child_rss_mib,pair_pss_mib\n");
    for (int m = 0; m < 2; m++) {
        double v[7][MAX_REPS];
        int k = 0;
        for (int i = 0; i < reps; i++) {
            if (!r[m][i].ok) continue;
            double x[7] = {r[m][i].ops, r[m][i].ops_bg, r[m][i].p99, r[m][i].p99_bg, r[m][i].rss, r[m][i].child, r[m][i].pss};
            for (int j = 0; j < 7; j++) v[j][k] = x[j];
            if (f) fprintf(f, "%s,%d,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f,%.0f\n", modes[m], i + 1, x[0], x[1], x[2], x[3], x[4], x[5], x[6]);
            k++;
        }
        n += (size_t)snprintf(md + n, cap - n, "| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f |\n", modes[m],
                              median_of(v[0], k), median_of(v[1], k), median_of(v[2], k), median_of(v[3], k),
                              median_of(v[4], k), median_of(v[5], k), median_of(v[6], k));
    }
    if (f) fclose(f);
    return n;
}

int hpm_bench_suite_ccow(const hpm_bench_ctx_t *ctx) {
    const hpm_bench_alloc_t *hpm = find_alloc(ctx, "hpmalloc");
    if (!hpm) {
        ctx->report_md(ctx, "## CCoW after fork (bench/ccow)\n\nNot run: hpmalloc is not among the selected allocators "
                            "(every configuration runs under hpmalloc, CCoW on or off).\n\n");
        return 0;
    }
    scale_t sc = scale_of(ctx);
    /* --quick must stay within a few minutes (27 runs of ~9 s plus Redis
     * per repetition): one repetition unless HPM_BENCH_CCOW_REPS says more. */
    int reps = ctx->reps > 0 ? ctx->reps : 1;
    if (ctx->quick) reps = 1;
    const char *env_reps = getenv("HPM_BENCH_CCOW_REPS");
    if (env_reps && atoi(env_reps) > 0) reps = atoi(env_reps);
    if (reps > MAX_REPS) reps = MAX_REPS;
    static cell_t cells[N_ALPHA][N_CFG];
    memset(cells, 0, sizeof cells);
    char path[1200];
    snprintf(path, sizeof path, "%s/ccow_timeline.csv", ctx->out_dir);
    FILE *tl = fopen(path, "w");
    if (!tl) return 1;
    int tl_header = 0;
    for (int rep = 1; rep <= reps; rep++)
        for (int a = 0; a < N_ALPHA; a++)
            for (int c = 0; c < N_CFG; c++) {
                ctx->progress(ctx, "ccow: rep %d alpha %.1f %s", rep, alphas[a], cfgs[c].name);
                run_zipf(ctx, hpm, sc, c, a, rep, &cells[a][c], tl, &tl_header);
            }
    fclose(tl);
    for (int a = 0; a < N_ALPHA; a++)
        for (int c = 0; c < N_CFG; c++)
            for (int m = 0; m < M_N; m++) cells[a][c].med[m] = median_of(cells[a][c].v[m], cells[a][c].n);
    write_summary(ctx, cells);
    plots(ctx);
    static redis_t redis[2][MAX_REPS];
    for (int rep = 1; rep <= reps; rep++) {
        ctx->progress(ctx, "ccow: redis rep %d", rep);
        run_redis(ctx, hpm, "off", 0, rep, &redis[0][rep - 1]);
        run_redis(ctx, hpm, "all", (long)(sc.size_mib * 2000 / sc.period_ms), rep, &redis[1][rep - 1]);
    }
    static char md[32768];
    size_t n = (size_t)snprintf(md, sizeof md,
        "## CCoW after fork (bench/ccow)\n\n"
        "ccow_zipf under hpmalloc: a %llu MiB table of 1 KiB objects, one writer thread, Zipf writes (rank 1 = object 0), "
        "a fork every %llu ms for %llu s; the child checksums its snapshot over 80%% of the period. "
        "Writes/s over the measured time; memory = peak Pss of parent + child per fork, averaged over forks. "
        "Plots: ccow_fig5_a*.png, ccow_cdf.png, ccow_after_fork.png; data: ccow_summary.csv, ccow_timeline.csv.\n",
        sc.size_mib, sc.period_ms, sc.duration_s);
    n += md_zipf_tables(md + n, sizeof md - n, cells);
    n += md_targets(md + n, sizeof md - n, cells);
    n += md_redis(ctx, md + n, sizeof md - n, redis, reps);
    snprintf(md + n, sizeof md - n, "\n");
    ctx->report_md(ctx, md);
    return 0;
}
