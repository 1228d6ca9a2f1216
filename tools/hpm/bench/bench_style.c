/* bench_style.c: how allocators look in the report's plots. Each
 * allocator has one colour, the same in every plot (hpmalloc always red),
 * and hpmalloc comes first in every data file and legend, drawn solid
 * (bars) or thick (lines) while the others are lighter, so the headline
 * graph reads at a glance. Allocators not in the table get a colour from
 * a fixed palette chosen by their name, so they too keep it across plots. */
#include <string.h>
#include "bench_int.h"

typedef struct { const char *name, *rgb; } alloc_colour_t;

static const alloc_colour_t colours[] = {
    {"hpmalloc", "#d62728"},     {"hpmalloc-sub", "#ff7f0e"}, {"jemalloc", "#1f77b4"},
    {"jemalloc-thp", "#17becf"}, {"glibc", "#7f7f7f"},        {"glibc-thp", "#bcbd22"},
    {"tcmalloc", "#2ca02c"},     {"mimalloc", "#9467bd"},     {"mimalloc-large", "#8c564b"},
};
static const char *const spare[] = {"#e377c2", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173"};

const char *hpm_bench_colour(const char *alloc) {
    for (size_t i = 0; i < sizeof colours / sizeof colours[0]; i++)
        if (!strcmp(colours[i].name, alloc)) return colours[i].rgb;
    unsigned h = 5381;
    for (const char *c = alloc; *c; c++) h = h * 33 + (unsigned char)*c;
    return spare[h % (sizeof spare / sizeof spare[0])];
}

static int is_ours(const char *alloc) { return !strncmp(alloc, "hpmalloc", 8); }

int hpm_bench_plot_order(const hpm_bench_ctx_t *ctx, int skip_baseline, int *idx) {
    int n = 0;
    for (int pass = 0; pass < 2; pass++)   /* hpmalloc and its variants first */
        for (int a = 0; a < ctx->n_allocs; a++) {
            const char *name = ctx->allocs[a].name;
            if ((skip_baseline && !strcmp(name, ctx->baseline)) || is_ours(name) != (pass == 0)) continue;
            idx[n++] = a;
        }
    return n;
}

void hpm_bench_gp_columns(FILE *g, const hpm_bench_ctx_t *ctx, const char *file, int skip_baseline, int lines,
                          const char *extra) {
    int idx[HPM_BENCH_MAX_ALLOCS];
    int n = hpm_bench_plot_order(ctx, skip_baseline, idx);
    fprintf(g, "plot");
    for (int k = 0; k < n; k++) {
        const char *name = ctx->allocs[idx[k]].name, *rgb = hpm_bench_colour(name);
        int ours = is_ours(name);
        fprintf(g, "%s '%s' %s using ", k ? "," : "", k ? "" : file, extra ? extra : "");
        if (lines) fprintf(g, "1:%d title columnhead lc rgb '%s' lw %d pt 7", k + 2, rgb, ours ? 3 : 1);
        else fprintf(g, "%d%s title columnhead lc rgb '%s' fs solid %s border lc rgb '%s'", k + 2,
                     k ? "" : ":xtic(1)", rgb, ours ? "1.0" : "0.45", ours ? "black" : rgb);
    }
    fprintf(g, "\n");
}
