/* bench_run.c: one measured run. Forks a child, gives it exactly one
 * allocator (LD_PRELOAD + its variable) and the caller's settings, sends
 * its output to a log file, opens hardware counters on it (inherit, so
 * every thread counts; enabled at exec), then lets it exec. While it runs
 * the parent samples /proc/PID/smaps_rollup about every 50 ms for the peak
 * huge-page coverage, and waits on a pidfd so that the end of the child is
 * seen at once. wait4 gives user/sys time, max RSS and faults.
 *
 * Each row is appended to runs.csv as soon as the run ends; an interrupt
 * (SIGINT/SIGTERM/SIGHUP) kills the running child's process group first.
 *
 * Invariant: a run that exits non-zero, dies on a signal, times out or
 * prints no RESULT line is a failure (ok = 0, error = status + last output
 * lines) and none of its numbers are used as a time. */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "bench_int.h"
#include "bench_warm.h"
#include "hpm_proc.h"

#define SAMPLE_MS 50

static volatile sig_atomic_t current_child;   /* pid of the running child, 0 = none */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- hardware counters ---- */

typedef struct { uint32_t type; uint64_t config; } perf_spec_t;

static uint64_t hw_cache(uint64_t cache, uint64_t op, uint64_t result) { return cache | (op << 8) | (result << 16); }

/* A dTLB-walk event exposed by the PMU in sysfs (e.g. ARM's dtlb_walk). */
static int dtlb_walk_spec(perf_spec_t *s) {
    static const char *const pmus[] = {"cpu", "cpu_core", "armv8_pmuv3", "armv8_pmuv3_0"};
    static const char *const names[] = {"dtlb_walk", "dtlb_load_misses.walk_completed"};
    for (size_t i = 0; i < sizeof pmus / sizeof pmus[0]; i++) {
        for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
            char path[256], buf[128];
            snprintf(path, sizeof path, "/sys/bus/event_source/devices/%s/events/%s", pmus[i], names[j]);
            FILE *f = fopen(path, "re");
            if (!f) continue;
            int got = fgets(buf, sizeof buf, f) != NULL;
            fclose(f);
            unsigned ev = 0, umask = 0;
            if (!got || sscanf(buf, "event=%x", &ev) != 1) continue;
            char *u = strstr(buf, "umask=");
            if (u) sscanf(u, "umask=%x", &umask);
            snprintf(path, sizeof path, "/sys/bus/event_source/devices/%s/type", pmus[i]);
            f = fopen(path, "re");
            if (!f) continue;
            unsigned type = 0;
            got = fscanf(f, "%u", &type) == 1;
            fclose(f);
            if (!got) continue;
            *s = (perf_spec_t){type, ev | ((uint64_t)umask << 8)};
            return 0;
        }
    }
    return -1;
}

/* Test hook: HPM_BENCH_PERF_TEST=sw puts software events in the counter
 * columns (cycles <- task-clock ns, instructions <- page faults,
 * dtlb_load_misses <- minor faults; the rest n/a), so that the counter
 * path (open on the child, inherit, enable on exec, read after exit) can be
 * tested on machines without a PMU. Never set in normal use. */
static int perf_test_sw(void) {
    const char *t = getenv("HPM_BENCH_PERF_TEST");
    return t && !strcmp(t, "sw");
}

static int perf_spec(int which, perf_spec_t *s) {
    if (perf_test_sw()) {
        switch (which) {
        case HPM_PERF_CYCLES: *s = (perf_spec_t){PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK}; return 0;
        case HPM_PERF_INSTRUCTIONS: *s = (perf_spec_t){PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS}; return 0;
        case HPM_PERF_DTLB_LOAD_MISSES: *s = (perf_spec_t){PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN}; return 0;
        default: return -1;
        }
    }
    switch (which) {
    case HPM_PERF_CYCLES: *s = (perf_spec_t){PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES}; return 0;
    case HPM_PERF_INSTRUCTIONS: *s = (perf_spec_t){PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS}; return 0;
    case HPM_PERF_DTLB_LOAD_MISSES:
        *s = (perf_spec_t){PERF_TYPE_HW_CACHE, hw_cache(PERF_COUNT_HW_CACHE_DTLB, PERF_COUNT_HW_CACHE_OP_READ,
                                                         PERF_COUNT_HW_CACHE_RESULT_MISS)};
        return 0;
    case HPM_PERF_DTLB_WALKS: return dtlb_walk_spec(s);
    case HPM_PERF_ITLB_MISSES:
        *s = (perf_spec_t){PERF_TYPE_HW_CACHE, hw_cache(PERF_COUNT_HW_CACHE_ITLB, PERF_COUNT_HW_CACHE_OP_READ,
                                                         PERF_COUNT_HW_CACHE_RESULT_MISS)};
        return 0;
    case HPM_PERF_LLC_READ_MISSES:
        *s = (perf_spec_t){PERF_TYPE_HW_CACHE, hw_cache(PERF_COUNT_HW_CACHE_LL, PERF_COUNT_HW_CACHE_OP_READ,
                                                         PERF_COUNT_HW_CACHE_RESULT_MISS)};
        return 0;
    }
    return -1;
}

static int perf_open(const perf_spec_t *s, pid_t pid, int on_exec) {
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = s->type;
    attr.config = s->config;
    attr.disabled = 1;
    attr.inherit = 1;
    attr.enable_on_exec = (unsigned)on_exec;
    attr.exclude_hv = 1;
    attr.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    int fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM)) {   /* unprivileged: count user space only */
        attr.exclude_kernel = 1;
        fd = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    return fd;
}

void hpm_bench_perf_probe(hpm_bench_state_t *st) {
    perf_spec_t s;
    perf_spec(HPM_PERF_CYCLES, &s);
    int fd = perf_open(&s, 0, 0);
    if (fd >= 0) {
        close(fd);
        st->perf_ok = 1;
        if (perf_test_sw())
            snprintf(st->perf_note, sizeof st->perf_note, "TEST MODE (HPM_BENCH_PERF_TEST=sw): the counter columns hold "
                     "software events (cycles = task-clock ns, instructions = page faults, dtlb_load_misses = minor faults)");
        else
            snprintf(st->perf_note, sizeof st->perf_note, "hardware counters available through perf_event_open%s",
                     dtlb_walk_spec(&s) == 0 ? "" : "; the PMU exposes no dTLB-walk event (dtlb_walks is n/a)");
        return;
    }
    int e = errno;
    st->perf_ok = 0;
    int paranoid = -99;
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
    if (f) { if (fscanf(f, "%d", &paranoid) != 1) paranoid = -99; fclose(f); }
    const char *why = e == ENOENT || e == EOPNOTSUPP ? "the CPU exposes no hardware PMU to this machine (a VM without a virtual PMU)"
                    : e == EACCES || e == EPERM ? "not permitted (perf_event_paranoid or a seccomp policy)"
                    : e == ENOSYS ? "the kernel has no perf_event_open"
                    : "the kernel refused it";
    snprintf(st->perf_note, sizeof st->perf_note, "perf_event_open(cycles) failed with %s (%s): %s; perf_event_paranoid=%d",
             strerrorname_np(e) ? strerrorname_np(e) : "?", strerror(e), why, paranoid);
}

/* ---- smaps_rollup sampling ---- */

static void sample_smaps(pid_t pid, hpm_bench_run_t *r) {
    char path[64];
    static const char *const names[] = {"Anonymous", "AnonHugePages"};
    long kib[2];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", (int)pid);
    hpm_proc_fields_kb(path, names, kib, 2);
    long anon = kib[0], huge = kib[1];
    if (anon <= 0 || huge < 0) return;
    if (anon > r->anon_peak_kib) r->anon_peak_kib = anon;
    if (huge > r->thp_peak_kib) r->thp_peak_kib = huge;
    double pct = 100.0 * (double)huge / (double)anon;
    if (pct > r->thp_peak_pct) r->thp_peak_pct = pct;
}

/* ---- the run ---- */

static void child_exec(const hpm_bench_alloc_t *alloc, char *const argv[], const char *const env[], int log_fd,
                       int go_fd) {
    setpgid(0, 0);
    int null_fd = open("/dev/null", O_RDONLY);
    if (null_fd >= 0) dup2(null_fd, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    hpm_bench_alloc_apply_env(alloc);
    for (int i = 0; env && env[i]; i++) putenv((char *)env[i]);
    char c;
    if (read(go_fd, &c, 1) != 1) _exit(126);
    execv(argv[0], argv);
    dprintf(2, "hpm bench: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* The last RESULT line of the log, and its last lines for errors. */
static void read_log(const char *path, hpm_bench_run_t *r, char *tail, size_t tail_len) {
    char lines[4][256] = {{0}};
    int n = 0;
    FILE *f = fopen(path, "re");
    tail[0] = 0;
    if (!f) return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!strncmp(line, "RESULT ", 7)) hpm_bench_copy(r->result, sizeof r->result, line + 7);
        if (line[0]) hpm_bench_copy(lines[n++ % 4], sizeof lines[0], line);
    }
    fclose(f);
    int first = n > 3 ? n - 3 : 0;
    size_t len = 0;
    for (int i = first; i < n && len < tail_len; i++)
        len += (size_t)snprintf(tail + len, tail_len - len, "%s%s", i > first ? " | " : "", lines[i % 4]);
}

static void append_row(const hpm_bench_ctx_t *ctx, const hpm_bench_run_t *r);

/* v as runs.csv writes it with `digits` decimals and reads it back: the
 * same text parsed, so exactly the same double (floor(v * 1e6 + 0.5) *
 * 1e-6 could differ from it in the last bit, and a ratio that fell on a
 * rounding edge then printed differently after --report). */
static double round_to(double v, int digits) {
    if (v < 0) return v;
    char text[64];
    snprintf(text, sizeof text, "%.*f", digits, v);
    return strtod(text, NULL);
}

/* Keeps a run in memory with exactly the precision runs.csv gives it, so a
 * report regenerated from runs.csv (--report) equals the original. */
static void record(const hpm_bench_ctx_t *ctx, const hpm_bench_run_t *run) {
    hpm_bench_state_t *st = ctx->priv;
    hpm_bench_run_t rounded = *run, *r = &rounded;
    r->wall_s = round_to(r->wall_s, 6);   /* the formats of csv_row */
    r->user_s = round_to(r->user_s, 6);
    r->sys_s = round_to(r->sys_s, 6);
    r->thp_peak_pct = round_to(r->thp_peak_pct, 2);
    r->load1 = round_to(r->load1, 2);
    if (st->n_runs == st->cap_runs) {
        int cap = st->cap_runs ? st->cap_runs * 2 : 256;
        hpm_bench_run_t *nr = realloc(st->runs, sizeof *nr * (size_t)cap);
        if (!nr) { fprintf(stderr, "hpm bench: out of memory\n"); exit(1); }
        st->runs = nr;
        st->cap_runs = cap;
    }
    st->runs[st->n_runs++] = *r;
    append_row(ctx, r);
}

static void finish_status(hpm_bench_run_t *r, int status, int timed_out, double timeout_s, const char *tail) {
    char why[128];
    if (timed_out) {
        snprintf(why, sizeof why, "timed out after %.0f s", timeout_s);
        r->exit_code = -1;
        r->term_signal = SIGKILL;
    } else if (WIFSIGNALED(status)) {
        r->exit_code = -1;
        r->term_signal = WTERMSIG(status);
        snprintf(why, sizeof why, "killed by signal %d (%s)", r->term_signal, strsignal(r->term_signal));
    } else {
        r->exit_code = WEXITSTATUS(status);
        if (r->exit_code == 3) snprintf(why, sizeof why, "wrong answer (exit 3)");
        else if (r->exit_code != 0) snprintf(why, sizeof why, "exit %d", r->exit_code);
        else if (!r->result[0]) snprintf(why, sizeof why, "no RESULT line");
        else why[0] = 0;
    }
    r->ok = why[0] == 0;
    if (!r->ok) snprintf(r->error, sizeof r->error, "%s: %s", why, tail[0] ? tail : "(no output)");
}

/* A run's row before it starts: its names, and nothing measured yet. */
static void run_begin(hpm_bench_run_t *r, const char *suite, const char *bench, const char *alloc, int rep) {
    memset(r, 0, sizeof *r);
    snprintf(r->suite, sizeof r->suite, "%s", suite);
    snprintf(r->bench, sizeof r->bench, "%s", bench);
    snprintf(r->alloc, sizeof r->alloc, "%s", alloc);
    r->rep = rep;
    r->thp_peak_pct = -1;
    for (int i = 0; i < HPM_PERF_N; i++) r->perf[i] = -1;
}

/* The hardware counters on the child (-1 where not available). */
static void open_counters(const hpm_bench_state_t *st, pid_t pid, int *pfd) {
    for (int i = 0; i < HPM_PERF_N; i++) {
        perf_spec_t s;
        pfd[i] = st->perf_ok && perf_spec(i, &s) == 0 ? perf_open(&s, pid, 1) : -1;
    }
}

/* A run that could not start: record it with its error; returns -1. */
static int run_failed(const hpm_bench_ctx_t *ctx, hpm_bench_run_t *r, hpm_bench_run_t *out) {
    record(ctx, r);
    if (out) *out = *r;
    return -1;
}

/* Waits for the child (on its pidfd, sampling smaps_rollup), killing its
 * group after timeout_s. */
static void watch_child(pid_t pid, int pidfd, double t0, double timeout_s, hpm_bench_run_t *r, int *status,
                        int *timed_out, struct rusage *ru) {
    memset(ru, 0, sizeof *ru);
    for (;;) {
        if (pidfd >= 0) {
            struct pollfd p = {.fd = pidfd, .events = POLLIN};
            poll(&p, 1, SAMPLE_MS);
        } else {
            struct timespec ts = {0, 5 * 1000000L};
            nanosleep(&ts, NULL);
        }
        pid_t w = wait4(pid, status, WNOHANG, ru);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) break;
        sample_smaps(pid, r);
        if (timeout_s > 0 && now_s() - t0 > timeout_s && !*timed_out) {
            *timed_out = 1;
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
        }
    }
}

/* Hardware counters (scaled when multiplexed), times, RSS, faults, load. */
static void collect(hpm_bench_run_t *r, const int *pfd, const struct rusage *ru) {
    for (int i = 0; i < HPM_PERF_N; i++) {
        if (pfd[i] < 0) continue;
        uint64_t v[3];
        if (read(pfd[i], v, sizeof v) == (ssize_t)sizeof v && v[2] > 0)
            r->perf[i] = (int64_t)(v[2] < v[1] ? (double)v[0] * (double)v[1] / (double)v[2] : (double)v[0]);
        close(pfd[i]);
    }
    r->user_s = (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6;
    r->sys_s = (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6;
    r->maxrss_kib = ru->ru_maxrss;
    r->minflt = ru->ru_minflt;
    r->majflt = ru->ru_majflt;
    char load[64];
    hpm_proc_text("/proc/loadavg", NULL, load, sizeof load);
    r->load1 = load[0] ? atof(load) : -1;
}

/* The log file of the run and the pipe that lets the child exec; 0, or -1
 * with r->error set. */
static int open_log(const hpm_bench_ctx_t *ctx, hpm_bench_run_t *r, char *log_path, size_t len, int *log_fd,
                    int go[2]) {
    snprintf(log_path, len, "%s/logs", ctx->out_dir);
    mkdir(log_path, 0755);
    snprintf(log_path, len, "%s/logs/%s-%s-%s-%d.log", ctx->out_dir, r->suite, r->bench, r->alloc, r->rep);
    *log_fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (*log_fd >= 0 && pipe2(go, O_CLOEXEC) == 0) return 0;
    int e = errno;
    snprintf(r->error, sizeof r->error, "cannot create the log file in the output folder: %s", strerror(e));
    if (*log_fd >= 0) close(*log_fd);
    return -1;
}

int hpm_bench_run_child(const hpm_bench_ctx_t *ctx, const char *suite, const char *bench,
                        const hpm_bench_alloc_t *alloc, int rep, char *const argv[],
                        const char *const env[], double timeout_s, hpm_bench_run_t *out) {
    hpm_bench_state_t *st = ctx->priv;
    hpm_bench_run_t r;
    run_begin(&r, suite, bench, alloc->name, rep);
    char log_path[1024], tail[400];
    int log_fd, go[2];
    if (open_log(ctx, &r, log_path, sizeof log_path, &log_fd, go) != 0) return run_failed(ctx, &r, out);
    bench_warm_memory(st->warm_bytes);   /* after the log opens, so a failed open skips it */
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { close(go[1]); child_exec(alloc, argv, env, log_fd, go[0]); }
    close(go[0]);
    close(log_fd);
    if (pid < 0) {
        snprintf(r.error, sizeof r.error, "fork failed: %s", strerror(errno));
        close(go[1]);
        return run_failed(ctx, &r, out);
    }
    setpgid(pid, pid);
    current_child = pid;
    int pfd[HPM_PERF_N];
    open_counters(st, pid, pfd);
    int pidfd = (int)syscall(SYS_pidfd_open, pid, 0), status = 0, timed_out = 0;
    double t0 = now_s();
    if (write(go[1], "g", 1) != 1) kill(pid, SIGKILL);
    close(go[1]);
    struct rusage ru;
    watch_child(pid, pidfd, t0, timeout_s, &r, &status, &timed_out, &ru);
    r.wall_s = now_s() - t0;
    current_child = 0;
    if (pidfd >= 0) close(pidfd);
    collect(&r, pfd, &ru);
    read_log(log_path, &r, tail, sizeof tail);
    finish_status(&r, status, timed_out, timeout_s, tail);
    record(ctx, &r);
    if (out) *out = r;
    return r.ok ? 0 : -1;
}

/* ---- runs.csv ---- */

static void csv_num(FILE *f, double v, const char *fmt) {
    fputc(',', f);
    if (v < 0) fputs("n/a", f);
    else fprintf(f, fmt, v);
}

static void csv_header(FILE *f) {
    fprintf(f, "suite,bench,alloc,rep,ok,exit_code,signal,wall_s,user_s,sys_s,maxrss_kib,minflt,majflt,"
               "anon_peak_kib,thp_peak_kib,thp_peak_pct");
    for (int i = 0; i < HPM_PERF_N; i++) fprintf(f, ",%s", hpm_bench_perf_names[i]);
    fprintf(f, ",load1,result,error\n");
}

static void csv_row(FILE *f, const hpm_bench_run_t *r) {
    hpm_bench_csv_field(f, r->suite);
    fputc(',', f);
    hpm_bench_csv_field(f, r->bench);
    fputc(',', f);
    hpm_bench_csv_field(f, r->alloc);
    fprintf(f, ",%d,%d,%d,%d", r->rep, r->ok, r->exit_code, r->term_signal);
    fprintf(f, ",%.6f,%.6f,%.6f,%ld,%ld,%ld", r->wall_s, r->user_s, r->sys_s, r->maxrss_kib, r->minflt, r->majflt);
    csv_num(f, r->thp_peak_pct < 0 ? -1 : (double)r->anon_peak_kib, "%.0f");
    csv_num(f, r->thp_peak_pct < 0 ? -1 : (double)r->thp_peak_kib, "%.0f");
    csv_num(f, r->thp_peak_pct, "%.2f");
    for (int k = 0; k < HPM_PERF_N; k++) csv_num(f, (double)r->perf[k], "%.0f");
    csv_num(f, r->load1, "%.2f");
    fputc(',', f);
    hpm_bench_csv_field(f, r->result);
    fputc(',', f);
    hpm_bench_csv_field(f, r->error);
    fputc('\n', f);
}

void hpm_bench_runs_csv(FILE *f, const hpm_bench_run_t *runs, int n) {
    csv_header(f);
    for (int i = 0; i < n; i++) csv_row(f, &runs[i]);
}

/* Appends one row to runs.csv as soon as a run ends, so an interrupted
 * evaluation keeps what it measured; the driver rewrites the file whole
 * at the end (with the checksum cross-check applied). */
static void append_row(const hpm_bench_ctx_t *ctx, const hpm_bench_run_t *r) {
    char path[1100];
    snprintf(path, sizeof path, "%s/runs.csv", ctx->out_dir);
    FILE *f = fopen(path, "a");
    if (!f) return;
    if (ftell(f) == 0) csv_header(f);
    csv_row(f, r);
    fclose(f);
}

/* ---- interruption: a child in its own process group would outlive us ---- */

static void on_signal(int sig) {
    pid_t pid = (pid_t)current_child;
    if (pid > 0) { kill(-pid, SIGKILL); kill(pid, SIGKILL); }
    signal(sig, SIG_DFL);
    raise(sig);
}

void hpm_bench_catch_signals(void) {
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGHUP, on_signal);
}
