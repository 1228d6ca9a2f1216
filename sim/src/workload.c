/* workload.c: runs a workload (fragmenter, server, or a trace replay) on a
 * fresh simulator and collects its result: final statistics, the sampled
 * time series and the wall time. Also the helpers the generators share.
 *
 * A trace is validated completely before anything runs, so a malformed
 * line is reported (with its line number) without partial results. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "workload.h"

int w_alloc(wctx_t *w, unsigned order, enum sim_mt type, uint32_t *id, uint32_t *pfn) {
    sim_op_t op = {.kind = 'a', .order = (uint8_t)order, .type = (uint8_t)type, .id = w->next_id++};
    int r = sim_driver_apply(w->drv, &op, pfn, w->err, w->err_len);
    if (r < 0) w->error = 1;
    if (id) *id = op.id;
    return r > 0;
}

int w_huge(wctx_t *w, uint32_t *id) {
    sim_op_t op = {.kind = 'h', .id = w->next_id++};
    int r = sim_driver_apply(w->drv, &op, NULL, w->err, w->err_len);
    if (r < 0) w->error = 1;
    if (id) *id = op.id;
    return r > 0;
}

static void w_op(wctx_t *w, char kind, uint32_t id, uint64_t n) {
    sim_op_t op = {.kind = kind, .id = id, .n = n};
    if (sim_driver_apply(w->drv, &op, NULL, w->err, w->err_len) < 0) w->error = 1;
}

void w_free(wctx_t *w, uint32_t id) { w_op(w, 'f', id, 0); }
void w_free_rcu(wctx_t *w, uint32_t id) { w_op(w, 'r', id, 0); }
void w_tick(wctx_t *w, uint64_t n) { w_op(w, 't', 0, n); }
void w_kswapd_compact(wctx_t *w) { w_op(w, 'k', 0, 0); }

uint64_t w_free_pages(const wctx_t *w) { return sim_free_pages(w->sim); }

int idvec_push(wctx_t *w, idvec_t *v, uint32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 1024;
        uint32_t *p = realloc(v->v, cap * sizeof *p);
        if (!p) { snprintf(w->err, w->err_len, "out of memory"); w->error = 1; return -1; }
        v->v = p; v->cap = cap;
    }
    v->v[v->n++] = id;
    return 0;
}

uint32_t idvec_take(idvec_t *v, size_t i) {
    uint32_t id = v->v[i];
    v->v[i] = v->v[--v->n];
    return id;
}

void idvec_free(idvec_t *v) { free(v->v); memset(v, 0, sizeof *v); }

/* Reads the whole trace once: validates every line and counts the
 * operations. Returns -1 with "PATH:LINE: reason" on the first bad line. */
static int trace_validate(const char *path, uint64_t *ops, uint64_t *mem_mib_hint, char *err, size_t len) {
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(err, len, "%s: cannot open", path); return -1; }
    char *line = NULL, why[160];
    size_t cap = 0;
    uint64_t lineno = 0, n = 0;
    int r = 0;
    while (getline(&line, &cap, f) != -1) {
        lineno++;
        sim_op_t op;
        int p = sim_trace_parse_line(line, &op, why, sizeof why);
        if (p < 0) { snprintf(err, len, "%s:%llu: %s", path, (unsigned long long)lineno, why); r = -1; break; }
        if (p == 0) {
            const char *m = strstr(line, "mem_mib=");
            if (lineno == 1 && m && mem_mib_hint) *mem_mib_hint = strtoull(m + 8, NULL, 10);
            continue;
        }
        n++;
    }
    /* a directory opens, and its first read fails with EISDIR: it was
     * replayed as an empty trace, with a table of zeros */
    if (!r && ferror(f)) { snprintf(err, len, "%s: cannot read: %s", path, strerror(errno)); r = -1; }
    free(line);
    fclose(f);
    *ops = n;
    return r;
}

static int trace_replay(wctx_t *w, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) { snprintf(w->err, w->err_len, "%s: cannot open", path); return -1; }
    char *line = NULL, why[160];
    size_t cap = 0;
    uint64_t lineno = 0;
    int r = 0;
    while (getline(&line, &cap, f) != -1) {
        lineno++;
        sim_op_t op;
        int p = sim_trace_parse_line(line, &op, why, sizeof why);
        if (p == 0) continue;
        if (p < 0 || sim_driver_apply(w->drv, &op, NULL, why, sizeof why) < 0) {
            snprintf(w->err, w->err_len, "%s:%llu: %s", path, (unsigned long long)lineno, why);
            r = -1;
            break;
        }
    }
    free(line);
    fclose(f);
    return r;
}

int sim_trace_check(const char *path, uint64_t *ops, uint64_t *mem_mib_hint, char *err, size_t err_len) {
    return trace_validate(path, ops, mem_mib_hint, err, err_len);
}

/* A recorded trace's header names the sampling interval it was run with,
 * so that its replay samples at the same times. */
static void trace_header_sample(const char *path, uint64_t *every) {
    FILE *f = fopen(path, "r");
    char line[256];
    if (!f) return;
    if (fgets(line, sizeof line, f) && line[0] == '#') {
        const char *p = strstr(line, "sample_every=");
        uint64_t v = p ? strtoull(p + 13, NULL, 10) : 0;
        if (v) *every = v;
    }
    fclose(f);
}

static uint64_t default_sample_every(const sim_config_t *cfg, const sim_workload_t *w, uint64_t trace_ops) {
    if (w->sample_every_ops) return w->sample_every_ops;
    uint64_t total = trace_ops;
    if (!strcmp(w->name, "server")) total = w->ops;
    else if (!strcmp(w->name, "fragmenter")) total = wl_fragmenter_ops_estimate(cfg, w);
    uint64_t every = total / 400;
    return every ? every : 1;
}

/* Runs the workload (or the replay) and measures its wall time. */
static int run_timed(wctx_t *wc, const sim_workload_t *w, double *wall_s) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int r;
    if (!strcmp(w->name, "trace")) r = trace_replay(wc, w->trace_path);
    else if (!strcmp(w->name, "fragmenter")) r = wl_fragmenter(wc, w);
    else r = wl_server(wc, w);
    if (wc->error) r = -1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *wall_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return r;
}

int sim_run_workload(const sim_config_t *cfg, const sim_workload_t *w, FILE *record, sim_result_t *out, char *err,
                     size_t err_len) {
    memset(out, 0, sizeof *out);
    bool is_trace = !strcmp(w->name, "trace");
    if (!is_trace && strcmp(w->name, "fragmenter") && strcmp(w->name, "server")) {
        snprintf(err, err_len, "unknown workload '%s' (want fragmenter, server or trace)", w->name);
        return -1;
    }
    uint64_t trace_ops = 0;
    if (is_trace && trace_validate(w->trace_path, &trace_ops, NULL, err, err_len)) return -1;
    sim_t *s = sim_create(cfg, err, err_len);
    if (!s) return -1;
    uint64_t every = default_sample_every(cfg, w, trace_ops);
    if (is_trace && !w->sample_every_ops) trace_header_sample(w->trace_path, &every);
    sim_driver_t *d = sim_driver_create(s, every, record);
    if (!d) { sim_destroy(s); snprintf(err, err_len, "out of memory"); return -1; }
    if (record)
        fprintf(record, "# hpm sim trace v1 mem_mib=%llu workload=%s seed=%llu sample_every=%llu\n",
                (unsigned long long)cfg->mem_mib, w->name, (unsigned long long)w->seed, (unsigned long long)every);
    wctx_t wc = {.sim = s, .drv = d, .rng = w->seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull,
                 .err = err, .err_len = err_len};
    int r = run_timed(&wc, w, &out->wall_s);
    sim_driver_finish(d);
    out->policy = cfg->policy;
    out->prudence = cfg->prudence;
    out->mem_mib = cfg->mem_mib;
    sim_get_stats(s, &out->stats);
    out->series = sim_driver_take_series(d);
    out->skipped_frees = sim_driver_skipped_frees(d);
    sim_driver_destroy(d);
    sim_destroy(s);
    return r;
}

void sim_result_free(sim_result_t *r) {
    free(r->series.v);
    memset(&r->series, 0, sizeof r->series);
}
