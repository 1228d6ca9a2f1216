/* bench_color.c: the `hpm bench color` suite. It first runs the colour
 * probe (`hpm stat --colours --json`, saved as color_probe.json). Only when
 * the probe says page colours control the caches here does it run
 * bench/color/color_interference under hpmalloc in three modes (alone,
 * shared with a streamer, partitioned by colour) and report the sensitive
 * thread's slowdown with and without partitioning. Elsewhere it writes
 * "not measurable on this machine" with the probe's evidence: never a
 * figure that the hardware cannot support. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench.h"

#define BC_MODES 3
#define BC_MAX_REPS 32
static const char *const bc_modes[BC_MODES] = {"alone", "shared", "partitioned"};

/* Copies the JSON string value of "key" from a flat JSON text. */
static int bc_json_str(const char *json, const char *key, char *out, size_t len) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *p = strstr(json, pat);
    if (!p) return -1;
    p += strlen(pat);
    size_t n = 0;
    while (*p && *p != '"' && n + 1 < len) {
        if (*p == '\\' && p[1]) p++;
        out[n++] = *p++;
    }
    out[n] = 0;
    return 0;
}

/* Runs the probe; fills verdict/bits/evidence. Returns 0 when it answered. */
static int bc_probe(const hpm_bench_ctx_t *ctx, char *verdict, char *bits, char *evidence, size_t ev_len) {
    char cmd[1024], json[8192];
    snprintf(cmd, sizeof cmd, "'%s/hpm' stat --colours --json 2>&1", ctx->hpm_dir);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    size_t n = fread(json, 1, sizeof json - 1, f);
    json[n] = 0;
    int rc = pclose(f);
    char path[1024];
    snprintf(path, sizeof path, "%s/color_probe.json", ctx->out_dir);
    FILE *out = fopen(path, "w");
    if (out) { fputs(json, out); fclose(out); }
    strcpy(verdict, "inconclusive");
    strcpy(bits, "unknown");
    snprintf(evidence, ev_len, "the probe printed no verdict (exit status %d): %.300s", rc, json);
    if (bc_json_str(json, "verdict", verdict, 64) != 0) return -1;
    bc_json_str(json, "controllable_bits", bits, 64);
    bc_json_str(json, "evidence", evidence, ev_len);
    return 0;
}

static const hpm_bench_alloc_t *bc_hpmalloc(const hpm_bench_ctx_t *ctx) {
    for (int i = 0; i < ctx->n_allocs; i++)
        if (!strcmp(ctx->allocs[i].name, "hpmalloc") && ctx->allocs[i].available) return &ctx->allocs[i];
    return NULL;
}

static void bc_not_measurable(const hpm_bench_ctx_t *ctx, const char *why, const char *verdict,
                              const char *bits, const char *evidence) {
    char md[4096];
    snprintf(md, sizeof md,
             "## Page colouring (bench/color)\n\n"
             "Not measurable on this machine: %s.\n\n"
             "- colour probe verdict: **%s**; physically controllable address bits: %s\n"
             "- evidence: %s\n"
             "- the probe's full output is in color_probe.json\n\n",
             why, verdict, bits, evidence);
    ctx->report_md(ctx, md);
    ctx->progress(ctx, "color: not measurable on this machine (%s)", verdict);
}

/* Runs the three modes, interleaved (A B C A B C), under hpmalloc; ns
 * per access of each successful run into ns[mode], counts into got. */
static void bc_run_modes(const hpm_bench_ctx_t *ctx, const hpm_bench_alloc_t *hpm, double ns[][BC_MAX_REPS],
                         int *got) {
    char prog[1024], dur[32];
    snprintf(prog, sizeof prog, "%s/color_interference", ctx->bench_dir);
    snprintf(dur, sizeof dur, "%d", ctx->tiny ? 300 : ctx->quick ? 1500 : 4000);
    int reps = ctx->reps < BC_MAX_REPS ? ctx->reps : BC_MAX_REPS;
    for (int rep = 1; rep <= reps; rep++) {
        for (int m = 0; m < BC_MODES; m++) {
            char bench[64];
            snprintf(bench, sizeof bench, "color-%s", bc_modes[m]);
            char *const argv[] = {prog, "--mode", (char *)bc_modes[m], "--duration-ms", dur, NULL};
            hpm_bench_run_t out;
            double v;
            if (ctx->run(ctx, "color", bench, hpm, rep, argv, NULL, 120, &out) == 0 &&
                hpm_bench_result_num(out.result, "ns_per_access", &v) == 0)
                ns[m][got[m]++] = v;
        }
    }
}

int hpm_bench_suite_color(const hpm_bench_ctx_t *ctx) {
    char verdict[64], bits[64], evidence[2048];
    if (bc_probe(ctx, verdict, bits, evidence, sizeof evidence) != 0) {
        bc_not_measurable(ctx, "the colour probe gave no answer", verdict, bits, evidence);
        return 0;
    }
    if (strcmp(verdict, "controllable") && strcmp(verdict, "partly controllable")) {
        bc_not_measurable(ctx, "page colours do not control the caches here, so partitioning by colour cannot "
                               "change the interference", verdict, bits, evidence);
        return 0;
    }
    const hpm_bench_alloc_t *hpm = bc_hpmalloc(ctx);
    if (!hpm) {
        bc_not_measurable(ctx, "hpmalloc is not among the selected allocators (colours need hpm_thread_colors)",
                          verdict, bits, evidence);
        return 0;
    }
    double ns[BC_MODES][BC_MAX_REPS];
    int got[BC_MODES] = {0};
    bc_run_modes(ctx, hpm, ns, got);
    double med[BC_MODES];
    for (int m = 0; m < BC_MODES; m++) med[m] = hpm_bench_median(ns[m], got[m]);
    char md[4096];
    snprintf(md, sizeof md,
             "## Page colouring (bench/color)\n\n"
             "Colour probe: **%s** (controllable bits %s).\n\n"
             "A cache-sensitive thread chases pointers over half the LLC beside a streaming thread, under hpmalloc; "
             "partitioned gives the streamer's slabs colour 0 only. Median of %d, %d, %d successful runs.\n\n"
             "| mode | ns per access | slowdown vs alone |\n|---|---|---|\n"
             "| alone | %.2f | 1.00 |\n| shared | %.2f | %.2f |\n| partitioned | %.2f | %.2f |\n\n",
             verdict, bits, got[0], got[1], got[2], med[0], med[1], med[1] / med[0], med[2], med[2] / med[0]);
    ctx->report_md(ctx, md);
    return 0;
}
