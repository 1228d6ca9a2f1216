/* stat.c: the `hpm stat` command. Parses the options, then takes reports
 * of one process: `hpm stat PID` (once, or every --watch S), or
 * `hpm stat -- CMD ARGS`, which starts CMD and reports on it until it
 * exits (the last complete report is printed). One report is: mappings and
 * coverage, the 2 MiB region states, smaps_rollup, the hpmalloc counters,
 * then --rounds intervals of hot/cold sampling. The CPU time of hpm stat
 * itself is measured around each report and printed as its cost.
 * `hpm stat --colours` runs the colour probe instead (colour_probe.c).
 * A process that exits during the hot/cold rounds still gets its report:
 * what was measured, with hot/cold marked incomplete (r->exited). A kernel
 * thread (no user memory) is refused with one line.
 * Exit status: 0 ok, 1 the process is gone, exited midway (after an
 * incomplete report when that was during hot/cold) or cannot be read, or
 * is a kernel thread, 2 usage. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "args.h"
#include "hpm.h"
#include "stat.h"

enum { REPORT_OK = 0, REPORT_GONE = 1, REPORT_ERROR = 2 };

static void stat_usage(FILE *f) {
    fprintf(f,
        "usage: hpm stat [OPTIONS] PID\n"
        "       hpm stat [OPTIONS] -- CMD [ARGS...]\n"
        "       hpm stat --colours [--json]\n"
        "  Huge-page coverage, 2 MiB region states, hot/cold memory and (for\n"
        "  hpmalloc processes) the allocator's counters. See docs/stat.md.\n"
        "  --json          one JSON object per report\n"
        "  --prometheus    the Prometheus text format (coverage, region states, hot/cold,\n"
        "                  hpmalloc's counters)\n"
        "  --textfile DIR  write it to DIR/hpm_stat_PID.prom atomically (node_exporter's\n"
        "                  textfile collector), again every --watch S\n"
        "  --detail        JSON: every region, and file mappings too\n"
        "  --interval S    hot/cold sampling interval in seconds (default: 1, raised\n"
        "                  automatically so that sampling costs under 2%% of one core)\n"
        "  --rounds N      hot/cold intervals per report (default 5, 0 = skip)\n"
        "  --sample P      scan only P%% of the 2 MiB regions, chosen at random (default 100)\n"
        "  --watch S       report again every S seconds until the process exits\n"
        "  --count N       with --watch: stop after N reports\n"
        "  --top N         mappings shown with a region map (default 5)\n"
        "  --colours       probe whether page colours control the caches here\n"
        "  --help, --version\n"
        "  Options and the PID may come in any order; -- ends the options.\n"
        "  Exit status: 0 ok, 1 the process is gone (a report of what was measured\n"
        "  when it exited during hot/cold), cannot be read or is a kernel thread, 2 usage.\n");
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) * 1e-6;
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void read_comm(stat_report_t *r) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/comm", r->pid);
    FILE *f = fopen(path, "r");
    r->comm[0] = 0;
    if (f) {
        if (fgets(r->comm, sizeof r->comm, f)) r->comm[strcspn(r->comm, "\n")] = 0;
        fclose(f);
    }
}

/* Whether pid is gone, or goes within about 200 ms: a process in the
 * middle of exit has lost its memory map (a pagemap read fails with
 * EFAULT) while /proc still shows it running. */
static int gone_soon(int pid) {
    for (int i = 0; i < 10; i++) {
        if (!stat_process_alive(pid)) return 1;
        sleep_s(0.02);
    }
    return !stat_process_alive(pid);
}

/* Turns a failed step into a status and, unless quiet, a message. */
static int report_fail(const stat_report_t *r, const char *what, int err, int quiet) {
    if (err == -ESRCH || err == -ENOENT || gone_soon(r->pid)) {
        if (!quiet) fprintf(stderr, "hpm stat: process %d exited while %s\n", r->pid, what);
        return REPORT_GONE;
    }
    if (!quiet) {
        fprintf(stderr, "hpm stat: failed %s of process %d: %s\n", what, r->pid, strerror(-err));
        if (err == -EACCES || err == -EPERM)
            fprintf(stderr, geteuid() == 0
                                ? "hpm stat: the kernel refuses even root here: reading it needs CAP_SYS_PTRACE "
                                  "(missing in this container or user namespace?)\n"
                                : "hpm stat: reading another user's process needs root (or CAP_SYS_PTRACE)\n");
    }
    return REPORT_ERROR;
}

/* Whether a hot/cold step failed because the process exited. */
static int hot_gone(int pid, int err) { return err == -ESRCH || err == -ENOENT || gone_soon(pid); }

/* Hot/cold rounds; a process that exits midway keeps the rounds done and
 * sets r->exited (the report is printed, marked incomplete). A round is
 * counted only if the process is still alive after it: the smaps of a
 * process in exit reads empty, not as an error.
 * Without --interval the interval starts at 1 s and is raised so that the
 * whole report (region scan included) costs at most STAT_COST_BUDGET of
 * one core: interval >= (scan CPU / rounds + CPU of one round) / budget. */
static int report_hot(stat_report_t *r, const stat_opts_t *o, double scan_cpu_s, int quiet) {
    r->rounds = 0;
    r->rounds_wanted = o->rounds < STAT_MAX_ROUNDS ? o->rounds : STAT_MAX_ROUNDS;
    r->exited = 0;
    r->wpd = -1;
    double slept = 0;
    for (int k = 0; k < o->rounds && k < STAT_MAX_ROUNDS; k++) {
        double c0 = cpu_s();
        int err = stat_clear_refs(r->pid);
        if (err == -EACCES || err == -EPERM) {
            stat_note_missing(r, "cannot write /proc/%d/clear_refs (%s): hot/cold needs the process's uid or root",
                              r->pid, strerror(-err));
            return REPORT_OK;
        }
        if (err && hot_gone(r->pid, err)) { r->exited = 1; return REPORT_OK; }
        if (err) return report_fail(r, "clearing its access bits", err, quiet);
        double interval = o->interval_s;
        if (o->interval_auto) {   /* a round costs about two clear_refs-sized walks */
            double need = (scan_cpu_s / o->rounds + 2 * (cpu_s() - c0)) / STAT_COST_BUDGET;
            if (need > interval) interval = need;
        }
        sleep_s(interval);
        slept += interval;
        err = stat_hot_round(r);
        if ((err && hot_gone(r->pid, err)) || (!err && !stat_process_alive(r->pid))) { r->exited = 1; return REPORT_OK; }
        if (err) return report_fail(r, "reading Referenced from smaps", err, quiet);
        r->rounds++;
        r->interval_s = slept / r->rounds;
        stat_hot_classify(r);
    }
    return REPORT_OK;
}

static int report_once(stat_report_t *r, const stat_opts_t *o, int quiet) {
    double t0 = now_s(), c0 = cpu_s();
    r->n_missing = 0;
    r->is_root = geteuid() == 0;
    r->interval_s = o->interval_s;
    r->sample_pct = o->sample_pct;
    read_comm(r);
    int err = stat_read_maps(r);
    if (err) return report_fail(r, "reading /proc/PID/smaps", err, quiet);
    if ((err = stat_scan_regions(r, o)) != 0) return report_fail(r, "reading /proc/PID/pagemap", err, quiet);
    if ((err = stat_read_rollup(r)) != 0) return report_fail(r, "reading /proc/PID/smaps_rollup", err, quiet);
    stat_read_alloc(r);
    int st = report_hot(r, o, cpu_s() - c0, quiet);
    r->cost_wall_s = now_s() - t0;
    r->cost_cpu_s = cpu_s() - c0;
    return st;
}

/* report_once, tried up to STAT_TRIES times while it fails on a live
 * process: a process that execs (a shell's child just started, pyenv's
 * python3 shim starting the real one) changes its maps under a scan.
 * Quiet but for the last try, which says why it fails; with gone_quiet a
 * process that exits ends the tries without a word. Before, the first
 * failure was final: stat_alloc.sh's `sleep 5 & hpm stat $!` and
 * stat_states.sh's `hpm stat -- python3 ...` each found no report once,
 * in two runs of the whole suite under load (session 34; 40 tries of the
 * first alone did not fail), and the command form dropped the report of
 * the try that was to say why. */
#define STAT_TRIES 5

static int report_tries(stat_report_t *r, const stat_opts_t *o, int gone_quiet) {
    for (int k = 1; k < STAT_TRIES; k++) {
        int st = report_once(r, o, 1);
        if (st == REPORT_OK || (st == REPORT_GONE && gone_quiet)) return st;
    }
    return report_once(r, o, 0);
}

/* Prints the report (or writes the textfile); 0, or 1 when it cannot be written. */
static int report_print(const stat_report_t *r, const stat_opts_t *o) {
    if (o->textfile_dir) {
        int err = stat_write_textfile(o->textfile_dir, r);
        if (err) fprintf(stderr, "hpm stat: cannot write %s/hpm_stat_%d.prom: %s\n", o->textfile_dir, r->pid, strerror(-err));
        return err ? 1 : 0;
    }
    if (o->prometheus) stat_print_prom(stdout, r);
    else if (o->json) stat_print_json(stdout, r, o);
    else stat_print_text(stdout, r, o);
    fflush(stdout);
    return 0;
}

static int stat_pid(int pid, const stat_opts_t *o) {
    stat_report_t r = {.pid = pid};
    char path[64];
    snprintf(path, sizeof path, "/proc/%d", pid);
    if (access(path, F_OK) != 0) {
        fprintf(stderr, "hpm stat: no process with pid %d\n", pid);
        return 1;
    }
    if (stat_process_kthread(pid)) {   /* no mm: smaps is empty, pagemap fails */
        read_comm(&r);
        fprintf(stderr, "hpm stat: process %d (%s) is a kernel thread: it has no user memory to report\n", pid, r.comm);
        return 1;
    }
    int st = REPORT_OK;
    for (int n = 0; st == REPORT_OK; n++) {
        st = report_tries(&r, o, 0);
        if (st != REPORT_OK) break;
        if (report_print(&r, o) != 0) { st = REPORT_ERROR; break; }
        if (r.exited) {
            fprintf(stderr, "hpm stat: process %d exited while hot/cold was measured (after %d of %d intervals); "
                            "the report above is incomplete\n", pid, r.rounds, r.rounds_wanted);
            st = REPORT_GONE;
            break;
        }
        if (o->watch_s <= 0 || (o->count && n + 1 >= o->count)) break;
        sleep_s(o->watch_s);
    }
    stat_free_maps(&r);
    return st == REPORT_OK ? 0 : 1;
}

/* Starts CMD and reports on it until it exits; prints the last complete
 * report (every report with --watch), or, when CMD exited during the
 * hot/cold rounds of its first report, that report marked incomplete.
 * Returns CMD's status when it failed. */
static int stat_command(char **argv, const stat_opts_t *o) {
    pid_t pid = fork();
    if (pid < 0) { perror("hpm stat: fork"); return 1; }
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "hpm stat: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    stat_report_t r = {.pid = pid}, last = {.pid = pid};
    int have_last = 0, status = 0;   /* have_last: a report is in last (complete unless last.exited) */
    sleep_s(o->interval_s < 0.05 ? o->interval_s : 0.05);   /* let it exec and start */
    while (waitpid(pid, &status, WNOHANG) == 0) {
        int st = report_tries(&r, o, 1);
        if (st == REPORT_ERROR) break;   /* the last try said why */
        if (st != REPORT_OK) continue;   /* it exited: waitpid picks it up */
        if (o->watch_s > 0) report_print(&r, o);
        if (r.exited && have_last) continue;   /* keep the last complete one */
        stat_free_maps(&last);
        last = r;
        r.maps = NULL;
        r.n_maps = 0;
        have_last = 1;
        if (o->watch_s > 0 && !r.exited) sleep_s(o->watch_s);
    }
    if (waitpid(pid, &status, 0) < 0 && errno != ECHILD) status = 0;
    int rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (!have_last) {
        fprintf(stderr, "hpm stat: '%s' exited before a report (%d rounds of %.3g s); "
                        "try --rounds 0 or a shorter --interval\n", argv[0], o->rounds, o->interval_s);
        stat_free_maps(&r);
        return rc ? rc : 1;
    }
    if (o->watch_s <= 0) report_print(&last, o);
    if (last.exited)
        fprintf(stderr, "hpm stat: '%s' exited with status %d while hot/cold was measured (after %d of %d intervals); "
                        "the report above is incomplete\n", argv[0], rc, last.rounds, last.rounds_wanted);
    else
        fprintf(stderr, "hpm stat: '%s' exited with status %d; the report above is its last complete one\n", argv[0], rc);
    stat_free_maps(&r);
    stat_free_maps(&last);
    return rc;
}

enum { O_JSON, O_DETAIL, O_COLOURS, O_COLORS, O_PROM, O_TEXTFILE, O_INTERVAL, O_ROUNDS, O_SAMPLE, O_WATCH, O_COUNT,
       O_TOP, O_N };
static const hpm_opt_t stat_options[O_N] = {
    [O_JSON] = {"--json", 0, 0},        [O_DETAIL] = {"--detail", 0, 0},     [O_COLOURS] = {"--colours", 0, 0},
    [O_COLORS] = {"--colors", 0, 0},    [O_PROM] = {"--prometheus", 0, 0},   [O_TEXTFILE] = {"--textfile", 0, 1},
    [O_INTERVAL] = {"--interval", 0, 1}, [O_ROUNDS] = {"--rounds", 0, 1},    [O_SAMPLE] = {"--sample", 0, 1},
    [O_WATCH] = {"--watch", 0, 1},      [O_COUNT] = {"--count", 0, 1},       [O_TOP] = {"--top", 0, 1},
};

static int stat_option(void *ctx, int id, const char *val) {
    stat_opts_t *o = ctx;
    switch (id) {
    case O_JSON: o->json = 1; return 0;
    case O_DETAIL: o->detail = 1; return 0;
    case O_COLOURS: case O_COLORS: o->colours = 1; return 0;
    case O_PROM: o->prometheus = 1; return 0;
    case O_TEXTFILE: o->prometheus = 1; o->textfile_dir = val; return val[0] ? 0 : -1;
    case O_INTERVAL: o->interval_auto = 0; return hpm_parse_num(val, 0.001, 3600, &o->interval_s);
    case O_ROUNDS: return hpm_parse_int(val, 0, STAT_MAX_ROUNDS, &o->rounds);
    case O_SAMPLE: return hpm_parse_num(val, 0.01, 100, &o->sample_pct);
    case O_WATCH: return hpm_parse_num(val, 0.001, 86400, &o->watch_s);
    case O_COUNT: return hpm_parse_int(val, 1, 1000000000, &o->count);
    case O_TOP: return hpm_parse_int(val, 0, 64, &o->top);
    }
    return -1;
}

/* The PID operand, or -1 after a usage error. */
static long stat_parse_pid(const hpm_operands_t *ops) {
    if (ops->n == 0) { hpm_usage_error("hpm stat", stat_usage, "a PID (or -- CMD) is needed"); return -1; }
    if (ops->n > 1) {
        hpm_usage_error("hpm stat", stat_usage, "one PID expected, got %d operands", ops->n);
        return -1;
    }
    char *end;
    long pid = strtol(ops->operands[0], &end, 10);
    if (*end || end == ops->operands[0] || pid <= 0 || pid > 0x3fffffff) {
        hpm_usage_error("hpm stat", stat_usage, "'%s' is not a process id (use 'hpm stat -- CMD' to run a command)",
                        ops->operands[0]);
        return -1;
    }
    return pid;
}

int hpm_cmd_stat(int argc, char **argv) {
    stat_opts_t o = {.interval_s = 1.0, .interval_auto = 1, .rounds = 5, .sample_pct = 100, .top = 5};
    hpm_operands_t ops;
    int st = hpm_args_parse("hpm stat", argc, argv, stat_options, O_N, stat_option, &o, stat_usage, 0, &ops);
    if (st >= 0) return st;
    if (o.colours) {
        hpm_args_free(&ops);
        if (!hpm_colour_probe) { fprintf(stderr, "hpm stat: the colour probe is not built into this hpm\n"); return 2; }
        return hpm_colour_probe(o.json);
    }
    if (o.json + o.prometheus > 1) st = hpm_usage_error("hpm stat", stat_usage, "--json and --prometheus exclude each other");
    else if (ops.dashdash && ops.before_dashdash == 0 && ops.n > 0) st = stat_command(ops.operands, &o);
    else if (ops.dashdash) st = hpm_usage_error("hpm stat", stat_usage, "-- must be followed by a command, and only by it");
    else {
        long pid = stat_parse_pid(&ops);
        st = pid < 0 ? 2 : stat_pid((int)pid, &o);
    }
    hpm_args_free(&ops);
    return st;
}
