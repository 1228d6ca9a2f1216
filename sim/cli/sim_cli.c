/* sim_cli.c: `hpm sim`, the command-line face of the fragmentation
 * simulator (libhpmsim). The hpm binary links this file; tools/hpm/main.c
 * dispatches `hpm sim` to hpm_cmd_sim(). It parses the options, runs the
 * chosen workload under each policy asked for (same seed, fresh memory
 * each), and prints the side-by-side table; --csv, --plot and --record
 * write files, --bench measures the raw allocator speed. Bad options exit
 * with status 2 and a message; a failed run (a malformed trace line) exits
 * with status 1. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "hpmsim.h"

int hpm_cmd_sim(int argc, char **argv);   /* declared (weak) in tools/hpm/hpm.h */

static void usage(FILE *f) {
    fputs(
        "usage: hpm sim [fragmenter|server|trace FILE|FILE] [options]\n"
        "Replays a workload on a simulated buddy allocator under Linux 4.5's\n"
        "anti-fragmentation policy and under Illuminator's (its patch, and the\n"
        "paper's description), side by side.\n\n"
        "  --workload NAME     fragmenter, server or trace (default server)\n"
        "  --trace FILE        replay FILE (format in docs/sim.md)\n"
        "  --policy P          linux, illuminator (the patch), paper (the paper's\n"
        "                      description), both (linux, illuminator) or all (default)\n"
        "  --mem MIB           simulated memory, multiple of 4 (default 4096,\n"
        "                      or the mem_mib= of a recorded trace)\n"
        "  --seed N            random seed (default 1)\n"
        "  --prudence P        auto (on for both Illuminator variants), on, off\n"
        "  --patch-order O     illuminator: full (a whole free pageblock before the\n"
        "                      MIXED lists, default) or mixed (MIXED first)\n"
        "  --grace N           RCU grace period in operations (default 200000)\n"
        "  --rounds R          fragmenter rounds (default 25)\n"
        "  --kernel-pct P      fragmenter: memory the module allocates a round, % of\n"
        "                      memory, decimals allowed (default 1.22: 300 MiB of 24 GiB)\n"
        "  --keep N            fragmenter: kernel pages kept per pageblock (2)\n"
        "  --cache-fill on|off fragmenter: fill the page cache after the rounds (on)\n"
        "  --ops N             server: operations to run (default 20M)\n"
        "  --hp-every N        server: a huge-page request every N operations (2000)\n"
        "  --rcu-pct P         server: % of unmovable slab frees that are RCU-deferred (50)\n"
        "  --dcache-pct P      server: dentry/inode cache at the end, % of memory (10)\n"
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
    /* a digit first: strtoull skips blanks and takes a sign, so ' -1'
     * was read as 2^64-1 */
    if (!s || !isdigit((unsigned char)*s)) goto bad;
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

/* A percentage with up to two decimals, in basis points (1.22 -> 122). */
static int parse_pct_bp(const char *opt, const char *s, uint32_t *bp) {
    char *end;
    errno = 0;
    double v = s && *s && *s != '-' ? strtod(s, &end) : -1;
    if (!(v >= 0 && v <= 100) || errno || end == s || *end) {   /* !(v >= 0): "nan" too */
        fprintf(stderr, "hpm sim: %s wants a percentage 0..100, not '%s'\n", opt, s ? s : "");
        return -1;
    }
    *bp = (uint32_t)(v * 100 + 0.5);
    return 0;
}

typedef struct {
    sim_workload_t w;
    int policies[SIM_NR_POLICIES], npolicies;
    int prudence;              /* -1 auto */
    int mixed_before_full;     /* --patch-order mixed */
    uint64_t mem_mib, grace;
    int mem_given;
    const char *csv, *plot, *record;
    int bench;
} opts_t;

static int parse_policy(const char *s, opts_t *o) {
    static const struct { const char *name; int n, p[SIM_NR_POLICIES]; } sets[] = {
        {"linux", 1, {SIM_LINUX}}, {"illuminator", 1, {SIM_ILLUMINATOR}},
        {"paper", 1, {SIM_ILLUMINATOR_PAPER}}, {"illuminator-paper", 1, {SIM_ILLUMINATOR_PAPER}},
        {"both", 2, {SIM_LINUX, SIM_ILLUMINATOR}}, {"all", 3, {SIM_LINUX, SIM_ILLUMINATOR, SIM_ILLUMINATOR_PAPER}},
    };
    for (size_t i = 0; s && i < sizeof sets / sizeof sets[0]; i++)
        if (!strcmp(s, sets[i].name)) {
            o->npolicies = sets[i].n;
            memcpy(o->policies, sets[i].p, sizeof o->policies);
            return 0;
        }
    fprintf(stderr, "hpm sim: --policy wants linux, illuminator, paper, both or all, not '%s'\n", s ? s : "");
    return -1;
}

static int parse_onoff(const char *opt, const char *v, int allow_auto, int *out) {
    if (v && !strcmp(v, "on")) *out = 1;
    else if (v && !strcmp(v, "off")) *out = 0;
    else if (allow_auto && v && !strcmp(v, "auto")) *out = -1;
    else { fprintf(stderr, "hpm sim: %s wants %son or off\n", opt, allow_auto ? "auto, " : ""); return -1; }
    return 0;
}

static int set_workload(opts_t *o, const char *name) {
    if (!strcmp(name, "fragmenter") || !strcmp(name, "server") || !strcmp(name, "trace")) { o->w.name = name; return 0; }
    fprintf(stderr, "hpm sim: unknown workload '%s' (want fragmenter, server or trace)\n", name);
    return -1;
}

/* The numeric options: 1 when `a` is one (and was parsed), 0 when it is
 * not, -1 on a bad value. */
static int parse_numeric(opts_t *o, const char *a, const char *v) {
    static const struct { const char *opt; size_t off; int u64; } nums[] = {
        {"--seed", offsetof(opts_t, w.seed), 1}, {"--grace", offsetof(opts_t, grace), 1},
        {"--rounds", offsetof(opts_t, w.rounds), 0}, {"--keep", offsetof(opts_t, w.keep_per_block), 0},
        {"--ops", offsetof(opts_t, w.ops), 1}, {"--hp-every", offsetof(opts_t, w.hp_every_ops), 1},
        {"--rcu-pct", offsetof(opts_t, w.rcu_pct), 0}, {"--dcache-pct", offsetof(opts_t, w.dcache_end_pct), 0},
        {"--sample", offsetof(opts_t, w.sample_every_ops), 1}, {"--mem", offsetof(opts_t, mem_mib), 1},
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++) {
        if (strcmp(a, nums[i].opt)) continue;
        uint64_t n;
        if (parse_num(a, v, &n)) return -1;
        if (!nums[i].u64 && n > UINT32_MAX) { fprintf(stderr, "hpm sim: %s is too large\n", a); return -1; }
        char *field = (char *)o + nums[i].off;
        if (nums[i].u64) memcpy(field, &n, sizeof n);
        else { uint32_t n32 = (uint32_t)n; memcpy(field, &n32, sizeof n32); }
        if (!strcmp(a, "--mem")) o->mem_given = 1;
        return 1;
    }
    return 0;
}

/* The options that take a word: 1 when `a` is one, 0 when not, -1 on error. */
static int parse_word(opts_t *o, const char *a, const char *v) {
    if (!strcmp(a, "--workload")) return v && !set_workload(o, v) ? 1 : -1;
    if (!strcmp(a, "--policy")) return parse_policy(v, o) ? -1 : 1;
    if (!strcmp(a, "--prudence")) return parse_onoff(a, v, 1, &o->prudence) ? -1 : 1;
    if (!strcmp(a, "--kernel-pct")) return parse_pct_bp(a, v, &o->w.kernel_bp) ? -1 : 1;
    if (!strcmp(a, "--patch-order")) {
        if (v && (!strcmp(v, "full") || !strcmp(v, "mixed"))) { o->mixed_before_full = !strcmp(v, "mixed"); return 1; }
        fprintf(stderr, "hpm sim: --patch-order wants full or mixed\n");
        return -1;
    }
    if (!strcmp(a, "--cache-fill")) {
        int on;
        if (parse_onoff(a, v, 0, &on)) return -1;
        o->w.cache_fill = (uint32_t)on;
        return 1;
    }
    const char **dst = !strcmp(a, "--csv") ? &o->csv : !strcmp(a, "--plot") ? &o->plot :
                       !strcmp(a, "--record") ? &o->record : !strcmp(a, "--trace") ? &o->w.trace_path : NULL;
    if (!dst) return 0;
    if (!v) { fprintf(stderr, "hpm sim: %s needs a value\n", a); return -1; }
    if (dst == &o->w.trace_path) o->w.name = "trace";
    *dst = v;
    return 1;
}

static int check_args(const opts_t *o) {
    if (o->w.rcu_pct > 100 || o->w.dcache_end_pct > 100) { fprintf(stderr, "hpm sim: percentages must be 0..100\n"); return -1; }
    if (o->w.keep_per_block > SIM_PAGEBLOCK_PAGES) { fprintf(stderr, "hpm sim: --keep must be at most 512\n"); return -1; }
    if (!strcmp(o->w.name, "trace") && !o->w.trace_path) { fprintf(stderr, "hpm sim: the trace workload needs a FILE\n"); return -1; }
    return 0;
}

/* Returns 0, 1 for --help, or -1 on a bad option. */
static int parse_args(int argc, char **argv, opts_t *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return 1;
        if (!strcmp(a, "--bench")) { o->bench = 1; continue; }
        if (!strcmp(a, "trace")) {
            if (!v) { fprintf(stderr, "hpm sim: trace needs a file\n"); return -1; }
            o->w.name = "trace"; o->w.trace_path = v; i++;
            continue;
        }
        int r = parse_numeric(o, a, v);
        if (!r) r = parse_word(o, a, v);
        if (r < 0) return -1;
        if (r > 0) { i++; continue; }
        if (a[0] == '-') { fprintf(stderr, "hpm sim: unknown option '%s'\n", a); return -1; }
        if (!strcmp(a, "fragmenter") || !strcmp(a, "server")) o->w.name = a;
        else { o->w.name = "trace"; o->w.trace_path = a; }
    }
    return check_args(o);
}

static sim_config_t config_for(const opts_t *o, int policy) {
    sim_config_t c = {.mem_mib = o->mem_mib, .policy = (enum sim_policy)policy, .rcu_grace_ops = o->grace,
                      .mixed_before_full = o->mixed_before_full};
    c.prudence = o->prudence < 0 ? policy != SIM_LINUX : o->prudence;
    return c;
}

static double seconds_between(const struct timespec *a, const struct timespec *b) {
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* 20M random order-0..3 allocations and frees around 50% occupancy. */
static void bench_loop(sim_t *s, sim_handle_t *live, uint64_t nlive, uint64_t rng) {
    for (uint64_t i = 0; i < 20000000; i += 2) {
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
}

/* Raw allocator speed of one policy, straight on the simulator API. */
static int bench_one(const opts_t *o, int policy) {
    char err[256];
    sim_config_t c = config_for(o, policy);
    sim_t *s = sim_create(&c, err, sizeof err);
    if (!s) { fprintf(stderr, "hpm sim: %s\n", err); return 1; }
    uint64_t frames = o->mem_mib * 256, nlive = 0;
    sim_handle_t *live = malloc(frames * sizeof *live);
    if (!live) { sim_destroy(s); return 1; }
    while (nlive < frames / 2) live[nlive++] = sim_alloc(s, 0, SIM_MOVABLE);
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    bench_loop(s, live, nlive, o->w.seed * 2654435761u + 1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double sec = seconds_between(&t0, &t1), cpu = seconds_between(&c0, &c1);
    printf("%-18s %12llu %10.3f %10.3f %12.2f %12.2f\n", sim_policy_name(c.policy), 20000000ull, sec, cpu,
           20e6 / sec / 1e6, 20e6 / cpu / 1e6);
    int bad = sim_check(s, err, sizeof err);
    if (bad) fprintf(stderr, "hpm sim: invariant broken after the benchmark: %s\n", err);
    free(live);
    sim_destroy(s);
    return bad ? 1 : 0;
}

static int bench(const opts_t *o) {
    printf("%-18s %12s %10s %10s %12s %12s\n", "policy", "operations", "wall_s", "cpu_s", "Mops/s_wall", "Mops/s_cpu");
    for (int p = 0; p < o->npolicies; p++)
        if (bench_one(o, o->policies[p])) return 1;
    return 0;
}

/* Runs every policy asked for; returns 0 or 1, with *n results filled. */
static int run_policies(const opts_t *o, FILE *rec, sim_result_t *res, int *n) {
    char err[512] = "";
    for (int p = 0; p < o->npolicies; p++) {
        sim_config_t c = config_for(o, o->policies[p]);
        if (sim_run_workload(&c, &o->w, p == 0 ? rec : NULL, &res[*n], err, sizeof err)) {
            fprintf(stderr, "hpm sim: %s\n", err);
            sim_result_free(&res[*n]);
            return 1;
        }
        (*n)++;
    }
    return 0;
}

static int write_outputs(const opts_t *o, const sim_result_t *res, int n) {
    char err[512] = "";
    int rc = 0;
    sim_report_table(stdout, res, n);
    if (o->csv && sim_report_csv(o->csv, res, n, err, sizeof err)) { fprintf(stderr, "hpm sim: %s\n", err); rc = 1; }
    if (o->plot && sim_report_plots(o->plot, res, n, err, sizeof err)) { fprintf(stderr, "hpm sim: %s\n", err); rc = 1; }
    return rc;
}

/* Validates a trace and takes its memory size; checks --mem. 0, 1 or 2. */
static int prepare(opts_t *o) {
    char err[512] = "";
    if (!strcmp(o->w.name, "trace")) {
        uint64_t ops, hint = 0;
        if (sim_trace_check(o->w.trace_path, &ops, &hint, err, sizeof err)) { fprintf(stderr, "hpm sim: %s\n", err); return 1; }
        if (!o->mem_given && hint) o->mem_mib = hint;
    }
    if (o->mem_mib < 8 || o->mem_mib % 4 || o->mem_mib > (1u << 20)) {
        fprintf(stderr, "hpm sim: --mem must be a multiple of 4 MiB between 8 and 1048576\n");
        return 2;
    }
    return 0;
}

static int run(const opts_t *o) {
    FILE *rec = NULL;
    if (o->record && !(rec = fopen(o->record, "w"))) { fprintf(stderr, "hpm sim: %s: %s\n", o->record, strerror(errno)); return 2; }
    if (o->w.trace_path) printf("hpm sim: trace %s, %llu MiB\n", o->w.trace_path, (unsigned long long)o->mem_mib);
    else printf("hpm sim: workload %s, %llu MiB, seed %llu\n", o->w.name, (unsigned long long)o->mem_mib,
                (unsigned long long)o->w.seed);
    sim_result_t res[SIM_NR_POLICIES];
    int n = 0, rc = run_policies(o, rec, res, &n);
    if (rec && fclose(rec)) { fprintf(stderr, "hpm sim: %s: %s\n", o->record, strerror(errno)); rc = 1; }
    if (!rc) rc = write_outputs(o, res, n);
    for (int i = 0; i < n; i++) sim_result_free(&res[i]);
    return rc;
}

int hpm_cmd_sim(int argc, char **argv) {
    opts_t o = {.w = {.name = "server", .seed = 1, .rounds = 25, .kernel_bp = 122, .keep_per_block = 2,
                      .cache_fill = 1, .ops = 20000000, .rcu_pct = 50, .hp_every_ops = 2000, .dcache_end_pct = 10},
                .policies = {SIM_LINUX, SIM_ILLUMINATOR, SIM_ILLUMINATOR_PAPER}, .npolicies = 3, .prudence = -1,
                .mem_mib = 4096, .grace = 200000};
    int pr = parse_args(argc, argv, &o);
    if (pr) { usage(pr > 0 ? stdout : stderr); return pr > 0 ? 0 : 2; }
    int rc = prepare(&o);
    if (rc) return rc;
    return o.bench ? bench(&o) : run(&o);
}
