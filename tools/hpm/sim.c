/* sim.c: `hpm sim`, the command-line face of the fragmentation simulator
 * in sim/ (libhpmsim). It parses the options, runs the chosen workload
 * under each policy asked for (same seed, fresh memory each), and prints
 * the side-by-side table; --csv, --plot and --record write files, --bench
 * measures the raw allocator speed. Bad options exit with status 2 and a
 * message; a failed run (a malformed trace line) exits with status 1. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hpm.h"
#include "hpmsim.h"

static void usage(FILE *f) {
    fputs(
        "usage: hpm sim [fragmenter|server|trace FILE|FILE] [options]\n"
        "Replays a workload on a simulated buddy allocator under Linux 4.5's\n"
        "anti-fragmentation policy and under Illuminator's, side by side.\n\n"
        "  --workload NAME     fragmenter, server or trace (default server)\n"
        "  --trace FILE        replay FILE (format in docs/sim.md)\n"
        "  --policy P          linux, illuminator or both (default both)\n"
        "  --mem MIB           simulated memory, multiple of 4 (default 4096,\n"
        "                      or the mem_mib= of a recorded trace)\n"
        "  --seed N            random seed (default 1)\n"
        "  --prudence P        auto (on for illuminator only), on, off\n"
        "  --grace N           RCU grace period in operations (default 20000)\n"
        "  --rounds R          fragmenter rounds (default 10)\n"
        "  --kernel-pct P      fragmenter: % of free memory the kernel allocates (80)\n"
        "  --keep N            fragmenter: kernel pages kept per pageblock (2)\n"
        "  --ops N             server: operations to run (default 20M)\n"
        "  --hp-every N        server: a huge-page request every N operations (2000)\n"
        "  --rcu-pct P         server: % of slab frees that are RCU-deferred (50)\n"
        "  --sample N          sample every N operations (default: 1/400 of the run)\n"
        "  --csv FILE          write the time series as CSV\n"
        "  --plot DIR          write hybrid.png, hugepage.png, free.png into DIR\n"
        "  --record FILE       write the operations issued as a trace (first policy)\n"
        "  --bench             measure allocator operations per second and exit\n"
        "Numbers accept k, M, G suffixes (powers of 1000).\n", f);
}

static int parse_num(const char *opt, const char *s, uint64_t *out) {
    char *end;
    errno = 0;
    if (!s || !*s || *s == '-') goto bad;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) goto bad;
    uint64_t mul = 1;
    if (*end == 'k' || *end == 'K') mul = 1000, end++;
    else if (*end == 'm' || *end == 'M') mul = 1000000, end++;
    else if (*end == 'g' || *end == 'G') mul = 1000000000, end++;
    if (*end || (mul > 1 && v > UINT64_MAX / mul)) goto bad;
    *out = v * mul;
    return 0;
bad:
    fprintf(stderr, "hpm sim: %s wants a non-negative number, not '%s'\n", opt, s ? s : "");
    return -1;
}

typedef struct {
    sim_workload_t w;
    int policies[2], npolicies;
    int prudence;              /* -1 auto */
    uint64_t mem_mib, grace;
    int mem_given;
    const char *csv, *plot, *record;
    int bench;
} opts_t;

static int parse_policy(const char *s, opts_t *o) {
    if (s && !strcmp(s, "linux")) { o->policies[0] = SIM_LINUX; o->npolicies = 1; return 0; }
    if (s && !strcmp(s, "illuminator")) { o->policies[0] = SIM_ILLUMINATOR; o->npolicies = 1; return 0; }
    if (s && !strcmp(s, "both")) { o->policies[0] = SIM_LINUX; o->policies[1] = SIM_ILLUMINATOR; o->npolicies = 2; return 0; }
    fprintf(stderr, "hpm sim: --policy wants linux, illuminator or both, not '%s'\n", s ? s : "");
    return -1;
}

static int set_workload(opts_t *o, const char *name) {
    if (!strcmp(name, "fragmenter") || !strcmp(name, "server") || !strcmp(name, "trace")) { o->w.name = name; return 0; }
    fprintf(stderr, "hpm sim: unknown workload '%s' (want fragmenter, server or trace)\n", name);
    return -1;
}

/* Returns 0, 1 for --help, or -1 on a bad option. */
static int parse_args(int argc, char **argv, opts_t *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
#define NUM(opt, dst) else if (!strcmp(a, opt)) { if (parse_num(opt, v, &n)) return -1; dst = n; i++; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
        else if (!strcmp(a, "--bench")) o->bench = 1;
        else if (!strcmp(a, "--workload")) { if (!v || set_workload(o, v)) return -1; i++; }
        else if (!strcmp(a, "--trace") || (!strcmp(a, "trace") && a[0] != '-')) {
            if (!v) { fprintf(stderr, "hpm sim: %s needs a file\n", a); return -1; }
            o->w.name = "trace"; o->w.trace_path = v; i++;
        }
        else if (!strcmp(a, "--policy")) { if (parse_policy(v, o)) return -1; i++; }
        else if (!strcmp(a, "--prudence")) {
            if (v && !strcmp(v, "on")) o->prudence = 1;
            else if (v && !strcmp(v, "off")) o->prudence = 0;
            else if (v && !strcmp(v, "auto")) o->prudence = -1;
            else { fprintf(stderr, "hpm sim: --prudence wants auto, on or off\n"); return -1; }
            i++;
        }
        else if (!strcmp(a, "--mem")) { if (parse_num(a, v, &o->mem_mib)) return -1; o->mem_given = 1; i++; }
        NUM("--seed", o->w.seed)
        NUM("--grace", o->grace)
        NUM("--rounds", o->w.rounds)
        NUM("--kernel-pct", o->w.kernel_pct)
        NUM("--keep", o->w.keep_per_block)
        NUM("--ops", o->w.ops)
        NUM("--hp-every", o->w.hp_every_ops)
        NUM("--rcu-pct", o->w.rcu_pct)
        NUM("--sample", o->w.sample_every_ops)
        else if (!strcmp(a, "--csv")) { if (!v) goto need; o->csv = v; i++; }
        else if (!strcmp(a, "--plot")) { if (!v) goto need; o->plot = v; i++; }
        else if (!strcmp(a, "--record")) { if (!v) goto need; o->record = v; i++; }
        else if (a[0] == '-') { fprintf(stderr, "hpm sim: unknown option '%s'\n", a); return -1; }
        else if (!strcmp(a, "fragmenter") || !strcmp(a, "server")) o->w.name = a;
        else { o->w.name = "trace"; o->w.trace_path = a; }
#undef NUM
        continue;
need:
        fprintf(stderr, "hpm sim: %s needs a value\n", a);
        return -1;
    }
    if (o->w.kernel_pct > 100 || o->w.rcu_pct > 100) { fprintf(stderr, "hpm sim: percentages must be 0..100\n"); return -1; }
    if (o->w.keep_per_block > SIM_PAGEBLOCK_PAGES) { fprintf(stderr, "hpm sim: --keep must be at most 512\n"); return -1; }
    if (!strcmp(o->w.name, "trace") && !o->w.trace_path) { fprintf(stderr, "hpm sim: the trace workload needs a FILE\n"); return -1; }
    return 0;
}

static sim_config_t config_for(const opts_t *o, int policy) {
    sim_config_t c = {.mem_mib = o->mem_mib, .policy = (enum sim_policy)policy, .rcu_grace_ops = o->grace};
    c.prudence = o->prudence < 0 ? policy == SIM_ILLUMINATOR : o->prudence;
    return c;
}

/* Raw allocator speed: random order-0..3 allocs and frees around 50%
 * occupancy, straight on the simulator API. */
static int bench(const opts_t *o) {
    printf("%-12s %12s %10s %10s %12s %12s\n", "policy", "operations", "wall_s", "cpu_s", "Mops/s_wall", "Mops/s_cpu");
    for (int p = 0; p < o->npolicies; p++) {
        char err[256];
        sim_config_t c = config_for(o, o->policies[p]);
        sim_t *s = sim_create(&c, err, sizeof err);
        if (!s) { fprintf(stderr, "hpm sim: %s\n", err); return 1; }
        uint64_t frames = o->mem_mib * 256, live_cap = frames, nlive = 0, rng = o->w.seed * 2654435761u + 1;
        sim_handle_t *live = malloc(live_cap * sizeof *live);
        if (!live) { sim_destroy(s); return 1; }
        while (nlive < frames / 2) live[nlive++] = sim_alloc(s, 0, SIM_MOVABLE);
        const uint64_t ops = 20000000;
        struct timespec t0, t1, c0, c1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        for (uint64_t i = 0; i < ops; i += 2) {
            rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
            uint64_t k = rng % nlive;
            sim_free(s, live[k]);
            live[k] = live[--nlive];
            unsigned r = (unsigned)(rng >> 40) % 100;
            unsigned order = r < 95 ? 0 : 1 + r % 3;
            enum sim_mt t = r < 80 ? SIM_MOVABLE : r < 90 ? SIM_UNMOVABLE : SIM_RECLAIMABLE;
            sim_handle_t h = sim_alloc(s, order, t);
            if (h != SIM_NO_HANDLE) live[nlive++] = h;
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double sec = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        double cpu = (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9;
        printf("%-12s %12llu %10.3f %10.3f %12.2f %12.2f\n", sim_policy_name(c.policy), (unsigned long long)ops, sec, cpu,
               (double)ops / sec / 1e6, (double)ops / cpu / 1e6);
        int bad = sim_check(s, err, sizeof err);
        if (bad) fprintf(stderr, "hpm sim: invariant broken after the benchmark: %s\n", err);
        free(live);
        sim_destroy(s);
        if (bad) return 1;
    }
    return 0;
}

int hpm_cmd_sim(int argc, char **argv) {
    opts_t o = {.w = {.name = "server", .seed = 1, .rounds = 10, .kernel_pct = 80, .keep_per_block = 2,
                      .ops = 20000000, .rcu_pct = 50, .hp_every_ops = 2000},
                .policies = {SIM_LINUX, SIM_ILLUMINATOR}, .npolicies = 2, .prudence = -1,
                .mem_mib = 4096, .grace = 20000};
    int pr = parse_args(argc, argv, &o);
    if (pr) { usage(pr > 0 ? stdout : stderr); return pr > 0 ? 0 : 2; }
    char err[512] = "";
    if (!strcmp(o.w.name, "trace")) {
        uint64_t ops, hint = 0;
        if (sim_trace_check(o.w.trace_path, &ops, &hint, err, sizeof err)) { fprintf(stderr, "hpm sim: %s\n", err); return 1; }
        if (!o.mem_given && hint) o.mem_mib = hint;
    }
    if (o.mem_mib < 8 || o.mem_mib % 4 || o.mem_mib > (1u << 20)) {
        fprintf(stderr, "hpm sim: --mem must be a multiple of 4 MiB between 8 and 1048576\n");
        return 2;
    }
    if (o.bench) return bench(&o);
    FILE *rec = NULL;
    if (o.record && !(rec = fopen(o.record, "w"))) { fprintf(stderr, "hpm sim: %s: %s\n", o.record, strerror(errno)); return 2; }
    sim_result_t res[2];
    int n = 0, rc = 0;
    if (o.w.trace_path) printf("hpm sim: trace %s, %llu MiB\n", o.w.trace_path, (unsigned long long)o.mem_mib);
    else printf("hpm sim: workload %s, %llu MiB, seed %llu\n", o.w.name, (unsigned long long)o.mem_mib,
                (unsigned long long)o.w.seed);
    for (int p = 0; p < o.npolicies; p++) {
        sim_config_t c = config_for(&o, o.policies[p]);
        if (sim_run_workload(&c, &o.w, p == 0 ? rec : NULL, &res[n], err, sizeof err)) {
            fprintf(stderr, "hpm sim: %s\n", err);
            sim_result_free(&res[n]);
            rc = 1;
            break;
        }
        n++;
    }
    if (rec && fclose(rec)) { fprintf(stderr, "hpm sim: %s: %s\n", o.record, strerror(errno)); rc = 1; }
    if (!rc) {
        sim_report_table(stdout, res, n);
        if (o.csv && sim_report_csv(o.csv, res, n, err, sizeof err)) { fprintf(stderr, "hpm sim: %s\n", err); rc = 1; }
        if (o.plot && sim_report_plots(o.plot, res, n, err, sizeof err)) { fprintf(stderr, "hpm sim: %s\n", err); rc = 1; }
    }
    for (int i = 0; i < n; i++) sim_result_free(&res[i]);
    return rc;
}
