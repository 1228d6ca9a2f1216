/* bench_ccow.c: the `hpm bench ccow` suite. Runs bench/ccow/ccow_zipf
 * under hpmalloc in every configuration of the CCoW evaluation (cow =
 * MADV_NOHUGEPAGE table, cow-thp = huge pages and the kernel's CoW,
 * ccow-50/70/80/90, ccow-all, ccow-throttled = all at a rate of half a
 * table per half period, ccow-adaptive, ccow-history) for Zipf alpha 0.9,
 * 1.0 and 1.1, interleaved (every configuration once per repetition), then
 * the Redis client (bench/ccow/redis_zipf starting /usr/bin/redis-server
 * loaded with YCSB records, 1 GiB in --quick, 4 GiB in --full) with CCoW
 * off, history and all (paced), unscrambled and scrambled Zipf 1.0,
 * interleaved. Writes ccow_summary.csv, ccow_timeline.csv,
 * ccow_redis.csv, gnuplot PNGs (ccow_fig5_a*.png, ccow_cdf.png,
 * ccow_after_fork.png) and a REPORT.md section with the targets.
 * Every figure is a median over the successful repetitions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "bench.h"

#define N_CFG 10
#define N_ALPHA 3
#define MAX_REPS 9
#define CFG_COWTHP 1       /* the library's default is CCoW off: cow-thp (docs/ccow.md) */

typedef struct { const char *name, *ccow, *thp; int throttled; } cfg_t;

static const cfg_t cfgs[N_CFG] = {
    {"cow", "off", "off", 0},      {"cow-thp", "off", "keep", 0},  {"ccow-50", "50", "keep", 0},
    {"ccow-70", "70", "keep", 0},  {"ccow-80", "80", "keep", 0},   {"ccow-90", "90", "keep", 0},
    {"ccow-all", "all", "keep", 0}, {"ccow-throttled", "all", "keep", 1}, {"ccow-adaptive", "adaptive", "keep", 0},
    {"ccow-history", "history", "keep", 0},
};
#define CFG_HISTORY 9
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
               "names = 'cow cow-thp ccow-50 ccow-70 ccow-80 ccow-90 ccow-all ccow-throttled ccow-adaptive ccow-history'\n"
               "plot for [i=0:%d] 'ccow_cdf.dat' index i using 1:2 with lines lw 2 title word(names, i + 1)\n", N_CFG - 1);
    fprintf(g, "unset title\nset output 'ccow_after_fork.png'\nset multiplot layout 2,1 title 'After a fork, alpha 1.0'\n"
               "set xlabel 'seconds since the fork'\nset ylabel 'writes/s'\nset yrange [0:*]\nset style data points\n"
               "plot for [n in 'cow-thp ccow-all ccow-throttled ccow-history'] 'ccow_timeline.csv' using "
               "(strcol(1) eq n && $2==1.0 ? $8 : 1/0):4 pt 7 ps 0.6 title n\n"
               "set ylabel 'huge-page coverage %%'\nset yrange [0:105]\n"
               "plot for [n in 'cow-thp ccow-all ccow-throttled ccow-history'] 'ccow_timeline.csv' using "
               "(strcol(1) eq n && $2==1.0 ? $8 : 1/0):5 pt 7 ps 0.6 title n\nunset multiplot\n");
    fclose(g);
    /* CDF data: per configuration, sorted per-bin writes/s at alpha 1.0. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && for c in cow cow-thp ccow-50 ccow-70 ccow-80 ccow-90 ccow-all ccow-throttled ccow-adaptive ccow-history; do "
             "awk -F, -v c=$c '$1==c && $2==\"1.00\" {print $4}' ccow_timeline.csv | sort -n | "
             "awk '{v[NR]=$1} END {for (i=1;i<=NR;i++) print v[i] \",\" i/NR}'; echo; echo; done > ccow_cdf.dat && "
             "gnuplot ccow_plots.gp 2>ccow_plots.log", ctx->out_dir);
    if (system(cmd) != 0) ctx->progress(ctx, "ccow: gnuplot failed (see ccow_plots.log)");
}

/* ---- Redis ---- */

#define N_RMODE 3
#define N_RSCR 2
enum { R_OPS, R_OPS_BG, R_P99, R_P99_BG, R_PAIR, R_LIFE, R_H90, R_SAVES, R_H90MAX, R_RSS, R_N };
static const char *const redis_keys[R_N] = {"ops_per_s", "ops_bgsave_per_s", "p99_us", "p99_bgsave_us",
                                            "pair_pss_bgsave_mib", "child_life_s", "huge90_saves", "bgsaves",
                                            "huge90_max_s", "server_rss_max_mib"};
static const char *const redis_modes[N_RMODE] = {"off", "history", "all"};
typedef struct { double v[R_N][MAX_REPS]; int n, bad; double med[R_N]; } rcell_t;

/* Sizes: records of 10 x 100 bytes take about 2 KiB of server memory. */
typedef struct { unsigned long long keys; int duration_s, period_s; } rscale_t;

static rscale_t redis_scale(const hpm_bench_ctx_t *ctx) {
    if (ctx->tiny) return (rscale_t){20000, 6, 2};
    if (ctx->quick) return (rscale_t){524288, 80, 20};       /* 1 GiB */
    return (rscale_t){2097152, 240, 60};                    /* 4 GiB */
}

static void run_redis(const hpm_bench_ctx_t *ctx, const hpm_bench_alloc_t *hpm, int mode, int scrambled, long rate, int rep,
                      rcell_t *cell, FILE *tl_all, int *tl_header) {
    if (access("/usr/bin/redis-server", X_OK) != 0) return;
    rscale_t rs = redis_scale(ctx);
    char prog[1024], keys[32], dur[32], period[16], port[16], ccow_env[64], rate_env[64], bench[64], tl[1200];
    snprintf(prog, sizeof prog, "%s/redis_zipf", ctx->bench_dir);
    snprintf(keys, sizeof keys, "%llu", rs.keys);
    snprintf(dur, sizeof dur, "%d", rs.duration_s);
    snprintf(period, sizeof period, "%d", rs.period_s);
    snprintf(port, sizeof port, "%d", 20000 + (int)(getpid() % 20000));
    snprintf(ccow_env, sizeof ccow_env, "HPM_CCOW=%s", redis_modes[mode]);
    snprintf(rate_env, sizeof rate_env, "HPM_CCOW_RATE=%ld", rate);
    snprintf(bench, sizeof bench, "redis-%s-%s", redis_modes[mode], scrambled ? "scrambled" : "unscrambled");
    snprintf(tl, sizeof tl, "%s/ccow_redis_tl_tmp.csv", ctx->out_dir);
    char *const argv[] = {prog, "--server", "/usr/bin/redis-server", "--port", port, "--keys", keys, "--field", "100",
                          "--duration-s", dur, "--bgsave-every-s", period, "--name", bench, "--timeline", tl,
                          scrambled ? "--scrambled" : NULL, NULL};
    const char *const env[] = {ccow_env, rate_env, NULL};
    hpm_bench_run_t out;
    if (ctx->run(ctx, "ccow", bench, hpm, rep, argv, env, (double)rs.duration_s * 3 + 300, &out) != 0) { cell->bad++; return; }
    double v[R_N];
    for (int m = 0; m < R_N; m++)
        if (result_num(out.result, redis_keys[m], &v[m]) != 0) { cell->bad++; return; }
    for (int m = 0; m < R_N; m++) cell->v[m][cell->n] = v[m];
    cell->n++;
    if (rep == 1) timeline_append(tl, tl_all, tl_header);
    else unlink(tl);
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
    size_t n = (size_t)snprintf(md, cap, "\nTargets (issue 9): ccow-history against cow-thp (= CCoW off): ");
    for (int a = 0; a < N_ALPHA; a++)
        n += (size_t)snprintf(md + n, cap - n, "alpha %.1f %+.1f%%%s", alphas[a],
                              pct(cells[a][CFG_HISTORY].med[M_WPS], cells[a][CFG_COWTHP].med[M_WPS]), a + 1 < N_ALPHA ? ", " : "");
    n += (size_t)snprintf(md + n, cap - n,
        " (target: >= 0 everywhere, >= +10%% at 1.0). Forks back to 90%% huge before the next fork, alpha 1.0: "
        "ccow-history %.0f of %.0f, cow-thp %.0f of %.0f.\n",
        cells[1][CFG_HISTORY].med[M_RECOVERED], cells[1][CFG_HISTORY].med[M_FORKS], cells[1][CFG_COWTHP].med[M_RECOVERED],
        cells[1][CFG_COWTHP].med[M_FORKS]);
    return n;
}

static size_t md_redis(const hpm_bench_ctx_t *ctx, char *md, size_t cap, rcell_t r[N_RSCR][N_RMODE]) {
    rscale_t rs = redis_scale(ctx);
    size_t n = (size_t)snprintf(md, cap,
        "\n### Redis (redis-server under hpmalloc, %llu YCSB records of 10 x 100 random bytes, HSET of one field by "
        "Zipf 1.0, BGSAVE every %d s, %d s)\n\n"
        "| Zipf | HPM_CCOW | runs | ops/s | during BGSAVE | vs off | p99 us | p99 during BGSAVE us | parent+child Pss "
        "during BGSAVE MiB | vs off | child life s | BGSAVEs back to 90%% huge | worst time to 90%% s |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n", rs.keys, rs.period_s, rs.duration_s);
    char path[1200];
    snprintf(path, sizeof path, "%s/ccow_redis.csv", ctx->out_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "zipf,ccow,runs,failed");
        for (int m = 0; m < R_N; m++) fprintf(f, ",%s", redis_keys[m]);
        fprintf(f, "\n");
    }
    for (int sc = 0; sc < N_RSCR; sc++)
        for (int m = 0; m < N_RMODE; m++) {
            rcell_t *x = &r[sc][m], *off = &r[sc][0];
            const char *z = sc ? "scrambled" : "unscrambled";
            if (f) {
                fprintf(f, "%s,%s,%d,%d", z, redis_modes[m], x->n, x->bad);
                for (int k = 0; k < R_N; k++) fprintf(f, ",%.4g", x->med[k]);
                fprintf(f, "\n");
            }
            char h90[32];
            if (x->med[R_H90MAX] >= 0) snprintf(h90, sizeof h90, "%.0f", x->med[R_H90MAX]);
            else snprintf(h90, sizeof h90, "never");
            n += (size_t)snprintf(md + n, cap - n, "| %s | %s | %d | %.0f | %.0f | %+.1f%% | %.0f | %.0f | %.0f | %+.1f%% | %.1f | %.0f/%.0f | %s |\n",
                                  z, redis_modes[m], x->n, x->med[R_OPS], x->med[R_OPS_BG],
                                  pct(x->med[R_OPS_BG], off->med[R_OPS_BG]), x->med[R_P99], x->med[R_P99_BG],
                                  x->med[R_PAIR], pct(x->med[R_PAIR], off->med[R_PAIR]), x->med[R_LIFE],
                                  x->med[R_H90], x->med[R_SAVES], h90);
        }
    if (f) fclose(f);
    n += (size_t)snprintf(md + n, cap - n, "\nEvery dump was read back by redis-check-rdb and held every record "
                                           "(a run whose dump did not fails and is not counted).\n");
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
    static rcell_t redis[N_RSCR][N_RMODE];
    memset(redis, 0, sizeof redis);
    snprintf(path, sizeof path, "%s/ccow_redis_timeline.csv", ctx->out_dir);
    FILE *rtl = fopen(path, "w");
    int rtl_header = 0;
    const char *env_rreps = getenv("HPM_BENCH_CCOW_REDIS_REPS");
    int rreps = env_rreps && atoi(env_rreps) > 0 ? atoi(env_rreps) : reps;
    if (rreps > MAX_REPS) rreps = MAX_REPS;
    for (int rep = 1; rep <= rreps; rep++)
        for (int scr = 0; scr < N_RSCR; scr++)
            for (int m = 0; m < N_RMODE; m++) {
                ctx->progress(ctx, "ccow: redis rep %d %s %s", rep, scr ? "scrambled" : "unscrambled", redis_modes[m]);
                run_redis(ctx, hpm, m, scr, m == 2 ? 1024 : 0, rep, &redis[scr][m], rtl, &rtl_header);
            }
    if (rtl) fclose(rtl);
    for (int scr = 0; scr < N_RSCR; scr++)
        for (int m = 0; m < N_RMODE; m++)
            for (int k = 0; k < R_N; k++) redis[scr][m].med[k] = median_of(redis[scr][m].v[k], redis[scr][m].n);
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
    n += md_redis(ctx, md + n, sizeof md - n, redis);
    snprintf(md + n, sizeof md - n, "\n");
    ctx->report_md(ctx, md);
    return 0;
}
