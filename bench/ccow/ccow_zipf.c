/* ccow_zipf.c: the CCoW research's micro benchmark. A table of fixed-size
 * objects (from malloc, so the allocator under test owns it) takes writes
 * whose object ranks follow Zipf(alpha) (rank 1 = object 0: hot objects sit
 * together, which is the spatial locality CCoW exploits). Every period the
 * process forks; the child holds the snapshot for --hold-ms, reading and
 * checksumming it slowly like a snapshot writer, and exits 0 only when the
 * checksum equals the one the parent had at the fork. A sampler thread
 * records, per bin, the writes per second, the parent's minor faults, its
 * huge-page coverage (AnonHugePages / Anonymous) and, while a child lives,
 * the Pss and Private_Dirty of parent plus child.
 *
 * Invariant checked: the table's word sum equals the initial sum plus every
 * writer's recorded deltas, in the child at each fork (snapshot intact) and
 * in the parent at the end (no write lost). A mismatch exits 3.
 * Output: '#' lines, an optional timeline CSV, and one RESULT line. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <dlfcn.h>
#include "bench_common.h"
#include "bench_mem.h"
#include "hpmalloc.h"
#include "zipf.h"

#define MAX_THREADS 16
#define MAX_BINS 100000
#define MAX_FORKS 4096

typedef struct {
    uint64_t size_bytes, obj_bytes, n_obj;
    double alpha;
    uint64_t period_ms, duration_ms, hold_ms, warmup_ms, bin_ms;
    int threads;
    const char *thp;            /* on, off, keep */
    const char *timeline;       /* CSV path or NULL */
    const char *name;
} cfg_t;

typedef struct {
    _Alignas(64) atomic_uint_fast64_t writes;
    uint64_t delta_sum;         /* sum of (new - old) of every word it wrote */
    bench_rng_t rng;
    int id;
} writer_t;

typedef struct {
    double t_s, writes_per_s, thp_pct, pair_pss_mib, pair_dirty_mib;
    long minflt;
    int fork_idx;
} bin_t;

static cfg_t C;
static uint64_t *table;
static uint64_t table_words;
static uint64_t initial_sum;
static writer_t writers[MAX_THREADS];
static zipf_t zipf;
static atomic_int pause_req, paused_n, stop_req;
static atomic_int child_pid;
static bin_t *bins;
static int n_bins;
static uint64_t fork_ns[MAX_FORKS];
static double fork_peak_pss[MAX_FORKS], fork_peak_dirty[MAX_FORKS], fork_recover_s[MAX_FORKS];
static int n_forks;

static double rng_u01(void *r) { return (double)(bench_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static long minflt_now(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* ---- writers ---- */

static void writer_pause_point(void) {
    atomic_fetch_add(&paused_n, 1);
    while (atomic_load(&pause_req) && !atomic_load(&stop_req)) { /* spin: pauses last microseconds */ }
    atomic_fetch_sub(&paused_n, 1);
}

static void *writer_main(void *arg) {
    writer_t *w = arg;
    uint64_t words_per_obj = C.obj_bytes / 8, local = 0, dsum = 0;
    while (!atomic_load_explicit(&stop_req, memory_order_relaxed)) {
        for (int i = 0; i < 256; i++) {
            uint64_t k = zipf_sample(&zipf, rng_u01, &w->rng) - 1;
            uint64_t *obj = table + k * words_per_obj;
            uint64_t slot = (uint64_t)w->id % words_per_obj;
            uint64_t other = (slot + 1 + (local & 63)) % words_per_obj;
            obj[slot] += 1;
            dsum += 1;
            if (other != slot) { obj[other] += 3; dsum += 3; }
            local++;
        }
        atomic_store_explicit(&w->writes, local, memory_order_relaxed);
        w->delta_sum = dsum;
        if (atomic_load_explicit(&pause_req, memory_order_acquire)) writer_pause_point();
    }
    w->delta_sum = dsum;
    atomic_store(&w->writes, local);
    return NULL;
}

static uint64_t writes_total(void) {
    uint64_t s = 0;
    for (int i = 0; i < C.threads; i++) s += atomic_load_explicit(&writers[i].writes, memory_order_relaxed);
    return s;
}

/* Stops every writer at a batch boundary; their delta_sum is then exact. */
static void writers_pause(void) {
    atomic_store(&pause_req, 1);
    while (atomic_load(&paused_n) < C.threads) { }
}

static void writers_resume(void) { atomic_store(&pause_req, 0); }

static uint64_t expected_sum(void) {
    uint64_t s = initial_sum;
    for (int i = 0; i < C.threads; i++) s += writers[i].delta_sum;
    return s;
}

static uint64_t table_sum(void) {
    uint64_t s = 0;
    for (uint64_t i = 0; i < table_words; i++) s += table[i];
    return s;
}

/* ---- the snapshot child ---- */

static void child_main(uint64_t want_sum) {
    uint64_t chunk_words = (8u << 20) / 8, s = 0;
    uint64_t n_chunks = (table_words + chunk_words - 1) / chunk_words;
    uint64_t t0 = bench_now_ns(), hold_ns = C.hold_ms * 1000000ull;
    for (uint64_t c = 0; c < n_chunks; c++) {
        uint64_t lo = c * chunk_words, hi = lo + chunk_words > table_words ? table_words : lo + chunk_words;
        for (uint64_t i = lo; i < hi; i++) s += table[i];
        uint64_t due = t0 + hold_ns * (c + 1) / n_chunks, now = bench_now_ns();
        if (due > now) {
            struct timespec ts = {(time_t)((due - now) / 1000000000ull), (long)((due - now) % 1000000000ull)};
            nanosleep(&ts, NULL);
        }
    }
    _exit(s == want_sum ? 0 : 3);
}

static void reap_child(int wait_it) {
    int pid = atomic_load(&child_pid);
    if (pid <= 0) return;
    int st;
    if (waitpid(pid, &st, wait_it ? 0 : WNOHANG) != pid) return;
    atomic_store(&child_pid, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        bench_check_failed("snapshot child %d: checksum differs from the parent's at fork (status %d)", pid, st);
}

static void do_fork(void) {
    reap_child(1);
    writers_pause();
    uint64_t want = expected_sum();
    if (n_forks < MAX_FORKS) { fork_ns[n_forks] = bench_now_ns(); fork_recover_s[n_forks] = -1; }
    pid_t pid = fork();
    if (pid == 0) child_main(want);
    writers_resume();
    if (pid < 0) { perror("fork"); exit(1); }
    atomic_store(&child_pid, pid);
    n_forks++;
}

/* ---- sampler ---- */

static void pair_mem(int pid, double *pss_mib, double *dirty_mib) {
    const char *names[] = {"Pss", "Private_Dirty"};
    long self[2], child[2] = {0, 0};
    bench_mem_read_fields("/proc/self/smaps_rollup", names, self, 2);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
    bench_mem_read_fields(path, names, child, 2);
    if (self[0] < 0 || child[0] < 0) { *pss_mib = *dirty_mib = -1; return; }
    *pss_mib = (double)(self[0] + child[0]) / 1024.0;
    *dirty_mib = (double)(self[1] + child[1]) / 1024.0;
}

static void sample_bin(uint64_t t_start, uint64_t *last_writes, uint64_t *last_ns) {
    uint64_t now = bench_now_ns(), w = writes_total();
    bench_mem_t m = bench_mem_read();
    bin_t *b = &bins[n_bins < MAX_BINS ? n_bins : MAX_BINS - 1];
    b->t_s = (double)(now - t_start) / 1e9;
    b->writes_per_s = (double)(w - *last_writes) * 1e9 / (double)(now - *last_ns);
    b->thp_pct = bench_mem_thp_pct(&m);
    b->minflt = minflt_now();
    b->fork_idx = n_forks - 1;
    b->pair_pss_mib = b->pair_dirty_mib = -1;
    int pid = atomic_load(&child_pid), f = n_forks - 1;
    if (pid > 0) pair_mem(pid, &b->pair_pss_mib, &b->pair_dirty_mib);
    if (f >= 0 && f < MAX_FORKS) {
        if (b->pair_pss_mib > fork_peak_pss[f]) fork_peak_pss[f] = b->pair_pss_mib;
        if (b->pair_dirty_mib > fork_peak_dirty[f]) fork_peak_dirty[f] = b->pair_dirty_mib;
        if (fork_recover_s[f] < 0 && b->thp_pct >= 90.0) fork_recover_s[f] = (double)(now - fork_ns[f]) / 1e9;
    }
    if (n_bins < MAX_BINS) n_bins++;
    *last_writes = w;
    *last_ns = now;
}

/* ---- setup and report ---- */

static void usage(void) {
    printf("usage: ccow_zipf [--size 1G] [--obj 1K] [--alpha 1.0] [--period-ms 2000] [--duration-s 6]\n"
           "       [--hold-ms P*0.8] [--warmup-ms 1000] [--bin-ms 250] [--threads 1]\n"
           "       [--thp on|off|keep] [--timeline FILE.csv] [--name NAME]\n"
           "CCoW modes come from the allocator (HPM_CCOW, HPM_CCOW_RATE under libhpmalloc).\n");
}

static void parse_args(int argc, char **argv) {
    C = (cfg_t){.size_bytes = 1ull << 30, .obj_bytes = 1024, .alpha = 1.0, .period_ms = 2000,
                .duration_ms = 6000, .hold_ms = 0, .warmup_ms = 1000, .bin_ms = 250, .threads = 1,
                .thp = "keep", .name = "ccow-zipf"};
    int hold_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) { usage(); exit(0); }
        if (!v) bench_usage_error("ccow_zipf", "option %s needs a value", a);
        i++;
        if (!strcmp(a, "--size")) C.size_bytes = bench_arg_size("ccow_zipf", a, v, 4u << 20, 1ull << 40);
        else if (!strcmp(a, "--obj")) C.obj_bytes = bench_arg_size("ccow_zipf", a, v, 8, 1u << 20);
        else if (!strcmp(a, "--period-ms")) C.period_ms = bench_arg_size("ccow_zipf", a, v, 10, 1u << 30);
        else if (!strcmp(a, "--duration-s")) C.duration_ms = 1000 * bench_arg_size("ccow_zipf", a, v, 1, 1u << 20);
        else if (!strcmp(a, "--hold-ms")) { C.hold_ms = bench_arg_size("ccow_zipf", a, v, 0, 1u << 30); hold_set = 1; }
        else if (!strcmp(a, "--warmup-ms")) C.warmup_ms = bench_arg_size("ccow_zipf", a, v, 0, 1u << 30);
        else if (!strcmp(a, "--bin-ms")) C.bin_ms = bench_arg_size("ccow_zipf", a, v, 10, 60000);
        else if (!strcmp(a, "--threads")) C.threads = (int)bench_arg_size("ccow_zipf", a, v, 1, MAX_THREADS);
        else if (!strcmp(a, "--timeline")) C.timeline = v;
        else if (!strcmp(a, "--name")) C.name = v;
        else if (!strcmp(a, "--thp")) {
            if (strcmp(v, "on") && strcmp(v, "off") && strcmp(v, "keep"))
                bench_usage_error("ccow_zipf", "--thp takes on, off or keep, got '%s'", v);
            C.thp = v;
        } else if (!strcmp(a, "--alpha")) {
            char *end;
            C.alpha = strtod(v, &end);
            if (*end || !(C.alpha > 0.0 && C.alpha <= 5.0))
                bench_usage_error("ccow_zipf", "--alpha needs a number in (0, 5], got '%s'", v);
        } else bench_usage_error("ccow_zipf", "unknown option %s", a);
    }
    if (C.obj_bytes % 8) bench_usage_error("ccow_zipf", "--obj must be a multiple of 8");
    if (!hold_set) C.hold_ms = C.period_ms * 8 / 10;
    if (C.hold_ms >= C.period_ms) bench_usage_error("ccow_zipf", "--hold-ms must be shorter than --period-ms");
    C.n_obj = C.size_bytes / C.obj_bytes;
}

static void table_setup(void) {
    table = bench_xmalloc(C.size_bytes);
    table_words = C.n_obj * C.obj_bytes / 8;
    uintptr_t lo = ((uintptr_t)table + (2u << 20) - 1) & ~(uintptr_t)((2u << 20) - 1);
    uintptr_t hi = ((uintptr_t)table + C.size_bytes) & ~(uintptr_t)((2u << 20) - 1);
    if (hi > lo && strcmp(C.thp, "keep"))
        if (madvise((void *)lo, hi - lo, strcmp(C.thp, "on") ? MADV_NOHUGEPAGE : MADV_HUGEPAGE))
            perror("# madvise");
    initial_sum = 0;
    for (uint64_t i = 0; i < table_words; i++) { table[i] = bench_mix64(i) >> 8; initial_sum += table[i]; }
}

static void write_timeline(void) {
    if (!C.timeline) return;
    FILE *f = fopen(C.timeline, "w");
    if (!f) { fprintf(stderr, "ccow_zipf: cannot write %s\n", C.timeline); exit(1); }
    fprintf(f, "name,alpha,t_s,writes_per_s,thp_pct,minflt,fork_idx,since_fork_s,pair_pss_mib,pair_dirty_mib\n");
    for (int i = 0; i < n_bins; i++) {
        bin_t *b = &bins[i];
        double since = b->fork_idx >= 0 && b->fork_idx < MAX_FORKS
                           ? b->t_s - (double)(fork_ns[b->fork_idx] - fork_ns[0]) / 1e9 : -1;
        fprintf(f, "%s,%.2f,%.3f,%.0f,%.1f,%ld,%d,%.3f,%.1f,%.1f\n", C.name, C.alpha, b->t_s, b->writes_per_s,
                b->thp_pct, b->minflt, b->fork_idx, since, b->pair_pss_mib, b->pair_dirty_mib);
    }
    fclose(f);
}

/* CCoW counters when the process runs on libhpmalloc, found by name. */
static void ccow_counters(char *buf, size_t len) {
    void (*get)(hpm_stats_t *) = (void (*)(hpm_stats_t *))dlsym(RTLD_DEFAULT, "hpm_stats_get");
    buf[0] = 0;
    if (!get) return;
    hpm_stats_t s;
    memset(&s, 0, sizeof s);
    get(&s);
    char state[40];
    snprintf(state, sizeof state, "%s", s.ccow_state);
    for (char *p = state; *p; p++) if (*p == ' ' || *p == ':') *p = '_';
    snprintf(buf, len, " ccow_state=%s ccow_forks=%llu ccow_regions=%llu ccow_mib=%.0f ccow_avoided=%llu ccow_recover_ms=%.1f ccow_T=%u",
             state[0] ? state : "none", (unsigned long long)s.ccow_forks, (unsigned long long)s.ccow_regions_precopied,
             (double)s.ccow_bytes_precopied / 1048576.0, (unsigned long long)s.ccow_faults_avoided,
             (double)s.ccow_recover_us / 1000.0, s.ccow_threshold_pct);
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    bins = bench_scratch_alloc(sizeof(bin_t) * MAX_BINS);
    zipf_init(&zipf, C.alpha, C.n_obj);
    table_setup();
    pthread_t th[MAX_THREADS];
    for (int i = 0; i < C.threads; i++) {
        writers[i].id = i;
        bench_rng_seed(&writers[i].rng, 1234 + (uint64_t)i);
        if (pthread_create(&th[i], NULL, writer_main, &writers[i])) { perror("pthread_create"); return 1; }
    }
    struct timespec ws = {(time_t)(C.warmup_ms / 1000), (long)(C.warmup_ms % 1000) * 1000000};
    nanosleep(&ws, NULL);

    bench_mem_t m0 = bench_mem_read();
    printf("# before the first fork: huge-page coverage %.1f%% (AnonHugePages %ld KiB)\n", bench_mem_thp_pct(&m0),
           m0.anon_huge_kib);
    uint64_t t_start = bench_now_ns(), w0 = writes_total(), last_w = w0, last_ns = t_start;
    long flt0 = minflt_now();
    uint64_t end_ns = t_start + C.duration_ms * 1000000ull, next_fork = t_start, next_bin = t_start + C.bin_ms * 1000000ull;
    while (bench_now_ns() < end_ns) {
        uint64_t now = bench_now_ns();
        if (now >= next_fork) { do_fork(); next_fork += C.period_ms * 1000000ull; }
        if (now >= next_bin) { sample_bin(t_start, &last_w, &last_ns); next_bin += C.bin_ms * 1000000ull; }
        reap_child(0);
        uint64_t next = next_fork < next_bin ? next_fork : next_bin;
        now = bench_now_ns();
        if (next > now) {
            uint64_t d = next - now > 5000000 ? 5000000 : next - now;
            struct timespec ts = {0, (long)d};
            nanosleep(&ts, NULL);
        }
    }
    uint64_t t_end = bench_now_ns(), w_end = writes_total();
    long flt = minflt_now() - flt0;
    atomic_store(&stop_req, 1);
    for (int i = 0; i < C.threads; i++) pthread_join(th[i], NULL);
    reap_child(1);
    if (table_sum() != expected_sum()) bench_check_failed("parent table sum differs: a write was lost");
    write_timeline();

    double secs = (double)(t_end - t_start) / 1e9, pss = 0, dirty = 0, rec = 0;
    int n_pss = 0, n_rec = 0, nf = n_forks < MAX_FORKS ? n_forks : MAX_FORKS;
    for (int f = 0; f < nf; f++) {
        if (fork_peak_pss[f] > 0) { pss += fork_peak_pss[f]; dirty += fork_peak_dirty[f]; n_pss++; }
        if (fork_recover_s[f] >= 0) { rec += fork_recover_s[f]; n_rec++; }
    }
    double thp_avg = 0;
    for (int i = 0; i < n_bins; i++) thp_avg += bins[i].thp_pct;
    char extra[512], sz[32];
    ccow_counters(extra, sizeof extra);
    printf("# %s alpha=%.2f size=%s: %.0f writes/s, %ld minor faults, %d forks\n", C.name, C.alpha,
           bench_fmt_size(C.size_bytes, sz, sizeof sz), (double)(w_end - w0) / secs, flt, n_forks);
    bench_result(C.name, "alpha=%.2f size_mib=%llu period_ms=%llu writes_per_s=%.0f minflt=%ld forks=%d "
                 "mem_pss_mib=%.0f mem_dirty_mib=%.0f thp_avg_pct=%.1f recovered=%d recover_s=%.3f%s",
                 C.alpha, (unsigned long long)(C.size_bytes >> 20), (unsigned long long)C.period_ms,
                 (double)(w_end - w0) / secs, flt, n_forks, n_pss ? pss / n_pss : -1, n_pss ? dirty / n_pss : -1,
                 n_bins ? thp_avg / n_bins : -1, n_rec, n_rec ? rec / n_rec : -1, extra);
    return 0;
}
