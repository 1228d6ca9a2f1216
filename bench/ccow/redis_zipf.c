/* redis_zipf.c: a Redis client for the CCoW evaluation, in the research's
 * setting. It loads a redis-server (optionally starting one with --server,
 * which then runs under the same environment, LD_PRELOAD and HPM_CCOW
 * included, with `save ""` so only our BGSAVEs run) with --keys YCSB-like
 * records: a hash of 10 fields of --field random, incompressible bytes,
 * written with HSET. Then it updates one field of a key chosen by
 * Zipf(alpha) over the key ranks (unscrambled: rank r is the r-th key
 * loaded, so hot keys sit together in memory; --scrambled: rank r maps to
 * key FNV(r) mod keys, as YCSB's scrambled zipfian), pipelined, while a
 * second connection asks for BGSAVE every period (when none is running).
 *
 * Records per second: operations, the p99 of the batch round trip, the
 * RSS of the server and its child, their Pss sum, and the server's
 * huge-page coverage (AnonHugePages / Anonymous). Per BGSAVE: how long the
 * child lived, the peak parent + child Pss, the throughput meanwhile, and
 * the time from the BGSAVE until the server was back to >= 90% huge pages.
 * Each finished dump is kept (dump-N.rdb) and, after the run, read back by
 * redis-check-rdb, which must report exactly --keys keys (else exit 2).
 * Plain RESP over TCP to 127.0.0.1; no hiredis. Output: '#' lines, an
 * optional timeline CSV, one RESULT line. Protocol errors exit 3. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench_common.h"
#include "bench_mem.h"
#include "zipf.h"

#define MAX_SECONDS 3600
#define LAT_BUCKETS 4096            /* 16 us each, the last one open-ended */

typedef struct { int fd; char buf[1 << 16]; size_t len, pos; } conn_t;

#define FIELDS 10                   /* YCSB: 10 fields per record */
#define MAX_SAVES 256

typedef struct {
    double ops, p99_us, rss_mib, child_rss_mib, pair_pss_mib, huge_pct;
    int bgsave;
} sec_t;

typedef struct {
    double start_s, life_s, pair_pss_max_mib, ops_per_s, huge90_s;   /* huge90_s: -1 = not reached */
    long keys_read;                 /* from redis-check-rdb; -1 = not checked */
} save_t;

static struct {
    const char *server, *name, *timeline, *check_rdb;
    int port, pipeline, scrambled;
    uint64_t keys, field_bytes, duration_s, bgsave_s, warmup_s;
    double alpha;
} C = {NULL, "redis-zipf", NULL, "/usr/bin/redis-check-rdb", 6399, 16, 0, 1000000, 100, 60, 10, 2, 1.0};

static pid_t server_pid;
static char tmp_dir[64];

static void die(const char *what) {
    fprintf(stderr, "redis_zipf: %s\n", what);
    if (server_pid > 0) kill(server_pid, SIGKILL);
    exit(1);
}

static void conn_open(conn_t *c) {
    c->fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)C.port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&a, sizeof a) != 0) { if (c->fd >= 0) close(c->fd); c->fd = -1; return; }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->len = c->pos = 0;
}

static void conn_send(conn_t *c, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(c->fd, p, n);
        if (w <= 0) die("write to the server failed");
        p += w; n -= (size_t)w;
    }
}

static int conn_getc(conn_t *c) {
    if (c->pos == c->len) {
        ssize_t r = read(c->fd, c->buf, sizeof c->buf);
        if (r <= 0) die("the server closed the connection");
        c->len = (size_t)r; c->pos = 0;
    }
    return (unsigned char)c->buf[c->pos++];
}

/* Reads one reply line (without CRLF) into out; bulk strings are read whole
 * into out (truncated to len). Returns the type character. */
static int conn_reply(conn_t *c, char *out, size_t len) {
    size_t n = 0;
    int ch, type = conn_getc(c);
    while ((ch = conn_getc(c)) != '\r') if (n + 1 < len) out[n++] = (char)ch;
    conn_getc(c);
    out[n] = 0;
    if (type == '-') { fprintf(stderr, "redis error: %s\n", out); bench_check_failed("the server answered an error"); }
    if (type == '$') {
        long blen = atol(out);
        n = 0;
        for (long i = 0; i < blen + 2; i++) { ch = conn_getc(c); if (i < blen && n + 1 < len) out[n++] = (char)ch; }
        out[n] = 0;
    }
    return type;
}

static size_t fmt_cmd(char *buf, size_t cap, int argc, const char *const *argv, const size_t *lens) {
    size_t n = (size_t)snprintf(buf, cap, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++) {
        n += (size_t)snprintf(buf + n, cap - n, "$%zu\r\n", lens[i]);
        memcpy(buf + n, argv[i], lens[i]);
        n += lens[i];
        buf[n++] = '\r'; buf[n++] = '\n';
    }
    return n;
}

static void command(conn_t *c, char *reply, size_t len, int argc, const char *const *argv) {
    char buf[1024];
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    conn_send(c, buf, fmt_cmd(buf, sizeof buf, argc, argv, lens));
    conn_reply(c, reply, len);
}

static long info_field(conn_t *c, const char *section, const char *field) {
    static char info[1 << 15];
    const char *argv[] = {"INFO", section};
    command(c, info, sizeof info, 2, argv);
    char *p = strstr(info, field);
    return p ? atol(p + strlen(field) + 1) : -1;
}

static void start_server(void) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/hpm-redis.XXXXXX");
    if (!mkdtemp(tmp_dir)) die("mkdtemp failed");
    char port[16], logfile[96];
    snprintf(port, sizeof port, "%d", C.port);
    snprintf(logfile, sizeof logfile, "%s/redis.log", tmp_dir);
    server_pid = fork();
    if (server_pid == 0) {
        execl(C.server, C.server, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
              "--dir", tmp_dir, "--protected-mode", "no", "--loglevel", "warning", "--logfile", logfile, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) {
        conn_t c;
        conn_open(&c);
        if (c.fd >= 0) { close(c.fd); return; }
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    die("the server did not start");
}

static void stop_server(conn_t *ctl) {
    if (server_pid <= 0) return;
    const char *argv[] = {"SHUTDOWN", "NOSAVE"};
    char buf[512];
    size_t lens[2] = {8, 6};
    conn_send(ctl, buf, fmt_cmd(buf, sizeof buf, 2, argv, lens));
    waitpid(server_pid, NULL, 0);
    server_pid = 0;
}

static void remove_tmp_dir(void) {
    if (!tmp_dir[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", tmp_dir);
}

static double rng_u01(void *r) { return (double)(bench_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

/* Random bytes: incompressible, so the dump is as large as the data. */
static void fill_random(bench_rng_t *rng, char *p, size_t n) {
    for (size_t i = 0; i < n; i += 8) {
        uint64_t x = bench_rng_next(rng);
        memcpy(p + i, &x, n - i < 8 ? n - i : 8);
    }
}

static size_t key_name(char *key, size_t cap, uint64_t k) {
    return (size_t)snprintf(key, cap, "user%010llu", (unsigned long long)k);
}

static void load_keys(conn_t *c, bench_rng_t *rng) {
    enum { BATCH = 200 };
    size_t per = 64 + FIELDS * (C.field_bytes + 32), cap = BATCH * per + 4096;
    char *buf = bench_scratch_alloc(cap), key[32], reply[256], fname[FIELDS][8];
    char *vals = bench_scratch_alloc(FIELDS * C.field_bytes + 8);
    for (int f = 0; f < FIELDS; f++) snprintf(fname[f], sizeof fname[f], "field%d", f);
    for (uint64_t base = 0; base < C.keys; base += BATCH) {
        size_t n = 0, cnt = 0;
        for (uint64_t k = base; k < base + BATCH && k < C.keys; k++, cnt++) {
            const char *argv[2 + 2 * FIELDS];
            size_t lens[2 + 2 * FIELDS];
            argv[0] = "HSET"; lens[0] = 4;
            lens[1] = key_name(key, sizeof key, k); argv[1] = key;
            fill_random(rng, vals, FIELDS * C.field_bytes);
            for (int f = 0; f < FIELDS; f++) {
                argv[2 + 2 * f] = fname[f]; lens[2 + 2 * f] = strlen(fname[f]);
                argv[3 + 2 * f] = vals + (size_t)f * C.field_bytes; lens[3 + 2 * f] = C.field_bytes;
            }
            n += fmt_cmd(buf + n, cap - n, 2 + 2 * FIELDS, argv, lens);
        }
        conn_send(c, buf, n);
        for (size_t i = 0; i < cnt; i++) conn_reply(c, reply, sizeof reply);
    }
    bench_scratch_free(buf, cap);
}

/* YCSB's scrambled zipfian: FNV-1a 64 of the rank's 8 bytes, mod keys. */
static uint64_t scramble(uint64_t rank) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (int i = 0; i < 8; i++) { h ^= (rank >> (8 * i)) & 0xff; h *= 0x100000001B3ull; }
    return h % C.keys;
}

static int child_of(pid_t pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int child = -1;
    if (fgets(buf, sizeof buf, f)) child = atoi(buf);
    fclose(f);
    return child > 0 ? child : -1;
}

/* RSS and Pss in MiB; huge_pct = AnonHugePages / Anonymous (may be NULL). */
static void proc_mem(int pid, double *rss_mib, double *pss_mib, double *huge_pct) {
    char path[64];
    const char *st[] = {"VmRSS"}, *sm[] = {"Pss", "Anonymous", "AnonHugePages"};
    long v = -1, p[3];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    bench_mem_read_fields(path, st, &v, 1);
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
    bench_mem_read_fields(path, sm, p, 3);
    *rss_mib = v < 0 ? -1 : (double)v / 1024.0;
    *pss_mib = p[0] < 0 ? -1 : (double)p[0] / 1024.0;
    if (huge_pct) *huge_pct = p[1] > 0 && p[2] >= 0 ? 100.0 * (double)p[2] / (double)p[1] : -1;
}

static double lat_p99(const uint32_t *h, uint64_t total) {
    if (!total) return -1;
    uint64_t want = total - total / 100, acc = 0;
    for (int i = 0; i < LAT_BUCKETS; i++) { acc += h[i]; if (acc >= want) return (i + 1) * 16.0; }
    return LAT_BUCKETS * 16.0;
}

/* Keeps the dump that BGSAVE number i just finished. */
static void keep_dump(int i) {
    char from[128], to[128];
    snprintf(from, sizeof from, "%s/dump.rdb", tmp_dir);
    snprintf(to, sizeof to, "%s/dump-%d.rdb", tmp_dir, i);
    if (rename(from, to) != 0) fprintf(stderr, "# BGSAVE %d left no dump.rdb\n", i);
}

/* redis-check-rdb loads every key of the dump; returns the keys it read. */
static long check_dump(int i) {
    char cmd[512], line[512];
    snprintf(cmd, sizeof cmd, "'%s' '%s/dump-%d.rdb' 2>&1", C.check_rdb, tmp_dir, i);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    long keys = -1;
    int ok = 0;
    while (fgets(line, sizeof line, p)) {
        char *k = strstr(line, " keys read");
        if (k) { while (k > line && k[-1] >= '0' && k[-1] <= '9') k--; keys = atol(k); }
        if (strstr(line, "RDB looks OK")) ok = 1;
    }
    int st = pclose(p);
    char path[128];
    snprintf(path, sizeof path, "%s/dump-%d.rdb", tmp_dir, i);
    unlink(path);
    return ok && st == 0 ? keys : -1;
}

static void parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: redis_zipf [--server /usr/bin/redis-server] [--port 6399] [--keys 1000000] [--field 100]\n"
                   "       [--alpha 1.0] [--scrambled] [--duration-s 60] [--bgsave-every-s 10] [--warmup-s 2]\n"
                   "       [--pipeline 16] [--check-rdb /usr/bin/redis-check-rdb|none] [--name NAME] [--timeline FILE.csv]\n"
                   "A record is a hash of 10 fields of --field random bytes (YCSB); --keys records are loaded.\n");
            exit(0);
        }
        if (!strcmp(a, "--scrambled")) { C.scrambled = 1; continue; }
        if (!v) bench_usage_error("redis_zipf", "option %s needs a value", a);
        i++;
        if (!strcmp(a, "--server")) C.server = v;
        else if (!strcmp(a, "--name")) C.name = v;
        else if (!strcmp(a, "--timeline")) C.timeline = v;
        else if (!strcmp(a, "--check-rdb")) C.check_rdb = strcmp(v, "none") ? v : NULL;
        else if (!strcmp(a, "--port")) C.port = (int)bench_arg_size("redis_zipf", a, v, 1024, 65535);
        else if (!strcmp(a, "--keys")) C.keys = bench_arg_size("redis_zipf", a, v, 1000, 1ull << 32);
        else if (!strcmp(a, "--field")) C.field_bytes = bench_arg_size("redis_zipf", a, v, 8, 1u << 16);
        else if (!strcmp(a, "--duration-s")) C.duration_s = bench_arg_size("redis_zipf", a, v, 1, MAX_SECONDS);
        else if (!strcmp(a, "--bgsave-every-s")) C.bgsave_s = bench_arg_size("redis_zipf", a, v, 1, MAX_SECONDS);
        else if (!strcmp(a, "--warmup-s")) C.warmup_s = bench_arg_size("redis_zipf", a, v, 0, 600);
        else if (!strcmp(a, "--pipeline")) C.pipeline = (int)bench_arg_size("redis_zipf", a, v, 1, 1024);
        else if (!strcmp(a, "--alpha")) {
            char *end;
            C.alpha = strtod(v, &end);
            if (*end || !(C.alpha > 0 && C.alpha <= 5)) bench_usage_error("redis_zipf", "--alpha needs a number in (0, 5]");
        } else bench_usage_error("redis_zipf", "unknown option %s", a);
    }
}

static double median_d(double *v, int n) {
    if (n <= 0) return -1;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) { double t = v[j]; v[j] = v[j - 1]; v[j - 1] = t; }
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
    parse_args(argc, argv);
    if (C.server) start_server();
    conn_t *data = bench_scratch_alloc(sizeof *data), *ctl = bench_scratch_alloc(sizeof *ctl);
    conn_open(data);
    conn_open(ctl);
    if (data->fd < 0 || ctl->fd < 0) die("cannot connect to 127.0.0.1");
    long spid = info_field(ctl, "server", "process_id");
    if (spid <= 0) die("INFO server gave no process_id");
    bench_rng_t rng;
    bench_rng_seed(&rng, 42);
    uint64_t t0 = bench_now_ns();
    load_keys(data, &rng);
    double rss0, pss0, huge0;
    proc_mem((int)spid, &rss0, &pss0, &huge0);
    printf("# loaded %llu records of %d x %llu random bytes in %.1f s; server RSS %.0f MiB, %.0f%% huge\n",
           (unsigned long long)C.keys, FIELDS, (unsigned long long)C.field_bytes, (double)(bench_now_ns() - t0) / 1e9,
           rss0, huge0);

    zipf_t z;
    zipf_init(&z, C.alpha, C.keys);
    sec_t *secs = bench_scratch_alloc(sizeof(sec_t) * MAX_SECONDS);
    save_t *saves = bench_scratch_alloc(sizeof(save_t) * MAX_SAVES);
    uint32_t *hist_sec = bench_scratch_alloc(4 * LAT_BUCKETS), *hist_all = bench_scratch_alloc(4 * LAT_BUCKETS),
             *hist_bg = bench_scratch_alloc(4 * LAT_BUCKETS);
    size_t cap = (size_t)C.pipeline * (C.field_bytes + 96);
    char *buf = bench_scratch_alloc(cap), reply[256], key[32], fname[FIELDS][8], *val = bench_scratch_alloc(C.field_bytes + 8);
    for (int f = 0; f < FIELDS; f++) snprintf(fname[f], sizeof fname[f], "field%d", f);
    uint64_t n_all = 0, n_bg = 0, ops_sec = 0, lat_n_sec = 0, total_ops = 0, ops_child = 0;
    int n_secs = 0, n_saves = 0, child = -1, tracking = -1;   /* tracking: the save whose coverage we wait for */
    double max_rss = 0, max_child = 0, max_pair = 0;
    uint64_t start = bench_now_ns() + C.warmup_s * 1000000000ull, end = start + C.duration_s * 1000000000ull;
    uint64_t next_sec = start + 1000000000ull, next_save = start, next_poll = 0, save_ns = 0;
    for (;;) {
        uint64_t now = bench_now_ns();
        if (now >= end && child < 0) break;
        int measuring = now >= start;
        if (now >= next_poll && n_saves > 0) {    /* child start/exit, every 20 ms */
            next_poll = now + 20000000ull;
            int c = child_of((pid_t)spid);
            if (c < 0 && child > 0) {
                save_t *sv = &saves[n_saves - 1];
                sv->life_s = (double)(now - save_ns) / 1e9;
                sv->ops_per_s = (double)ops_child / sv->life_s;
                keep_dump(n_saves - 1);
            }
            child = c;
        }
        if (measuring && now >= next_save && now < end && child < 0 && n_saves < MAX_SAVES) {
            if (info_field(ctl, "persistence", "rdb_bgsave_in_progress") == 0) {
                const char *av[] = {"BGSAVE"};
                command(ctl, reply, sizeof reply, 1, av);
                save_ns = bench_now_ns();
                saves[n_saves] = (save_t){(double)(save_ns - start) / 1e9, -1, 0, 0, -1, -1};
                tracking = n_saves++;
                ops_child = 0;
                child = 1;                         /* until the poll sees it gone */
                next_poll = save_ns + 20000000ull;
            }
            next_save += C.bgsave_s * 1000000000ull;
        }
        size_t n = 0;
        for (int i = 0; i < C.pipeline; i++) {
            uint64_t rank = zipf_sample(&z, rng_u01, &rng) - 1, k = C.scrambled ? scramble(rank) : rank;
            const char *av[4];
            size_t lens[4];
            av[0] = "HSET"; lens[0] = 4;
            lens[1] = key_name(key, sizeof key, k); av[1] = key;
            int f = (int)bench_rng_below(&rng, FIELDS);
            av[2] = fname[f]; lens[2] = strlen(fname[f]);
            fill_random(&rng, val, C.field_bytes);
            av[3] = val; lens[3] = C.field_bytes;
            n += fmt_cmd(buf + n, cap - n, 4, av, lens);
        }
        uint64_t t_send = bench_now_ns();
        conn_send(data, buf, n);
        for (int i = 0; i < C.pipeline; i++)
            if (conn_reply(data, reply, sizeof reply) != ':') bench_check_failed("HSET gave no integer reply");
        if (!measuring) continue;
        uint64_t us = (bench_now_ns() - t_send) / 1000, b = us / 16 < LAT_BUCKETS ? us / 16 : LAT_BUCKETS - 1;
        hist_sec[b]++; hist_all[b]++; n_all++; lat_n_sec++;
        if (child > 0) { hist_bg[b]++; n_bg++; ops_child += (uint64_t)C.pipeline; }
        ops_sec += (uint64_t)C.pipeline;
        total_ops += (uint64_t)C.pipeline;
        if (bench_now_ns() >= next_sec && n_secs < MAX_SECONDS) {
            sec_t *s = &secs[n_secs++];
            s->ops = (double)ops_sec;
            s->p99_us = lat_p99(hist_sec, lat_n_sec);
            double pss_p, pss_c = 0;
            proc_mem((int)spid, &s->rss_mib, &pss_p, &s->huge_pct);
            int c = child_of((pid_t)spid);
            s->child_rss_mib = -1;
            if (c > 0) proc_mem(c, &s->child_rss_mib, &pss_c, NULL);
            s->bgsave = child > 0 || c > 0;
            s->pair_pss_mib = pss_p + (pss_c > 0 ? pss_c : 0);
            if (s->rss_mib > max_rss) max_rss = s->rss_mib;
            if (s->child_rss_mib > max_child) max_child = s->child_rss_mib;
            if (s->pair_pss_mib > max_pair) max_pair = s->pair_pss_mib;
            if (tracking >= 0) {
                save_t *sv = &saves[tracking];
                if (s->pair_pss_mib > sv->pair_pss_max_mib) sv->pair_pss_max_mib = s->pair_pss_mib;
                double since = (double)(bench_now_ns() - save_ns) / 1e9;
                if (sv->life_s >= 0 && s->huge_pct >= 90.0) { sv->huge90_s = since; tracking = -1; }
            }
            memset(hist_sec, 0, 4 * LAT_BUCKETS);
            ops_sec = lat_n_sec = 0;
            next_sec += 1000000000ull;
        }
    }
    double secs_total = (double)(bench_now_ns() - start) / 1e9;
    stop_server(ctl);
    /* Every dump must hold every record. */
    int bad_dumps = 0, checked = 0;
    for (int i = 0; i < n_saves; i++) {
        if (saves[i].life_s < 0) continue;
        if (C.check_rdb) {
            saves[i].keys_read = check_dump(i);
            checked++;
            if (saves[i].keys_read != (long)C.keys) bad_dumps++;
        }
    }
    remove_tmp_dir();
    double ops_bg = 0, ops_quiet = 0;
    int n_bgs = 0, n_q = 0;
    for (int i = 0; i < n_secs; i++) {
        if (secs[i].bgsave) { ops_bg += secs[i].ops; n_bgs++; } else { ops_quiet += secs[i].ops; n_q++; }
    }
    if (C.timeline) {
        FILE *f = fopen(C.timeline, "w");
        if (!f) die("cannot write the timeline");
        fprintf(f, "name,t_s,ops_per_s,p99_us,bgsave,server_rss_mib,child_rss_mib,pair_pss_mib,server_huge_pct\n");
        for (int i = 0; i < n_secs; i++)
            fprintf(f, "%s,%d,%.0f,%.0f,%d,%.0f,%.0f,%.0f,%.1f\n", C.name, i + 1, secs[i].ops, secs[i].p99_us,
                    secs[i].bgsave, secs[i].rss_mib, secs[i].child_rss_mib, secs[i].pair_pss_mib, secs[i].huge_pct);
        fclose(f);
    }
    /* Per save: the child's life, peak memory, and coverage recovery. */
    double life[MAX_SAVES], pair[MAX_SAVES];
    int n_done = 0, n_huge90 = 0;
    double huge90_max = -1;
    for (int i = 0; i < n_saves; i++) {
        save_t *sv = &saves[i];
        printf("# bgsave %d at %.1f s: child lived %.2f s, %.0f ops/s meanwhile, parent+child Pss max %.0f MiB, "
               ">=90%% huge after %.0f s, dump keys %ld\n", i + 1, sv->start_s, sv->life_s, sv->ops_per_s,
               sv->pair_pss_max_mib, sv->huge90_s, sv->keys_read);
        if (sv->life_s < 0) continue;
        life[n_done] = sv->life_s;
        pair[n_done++] = sv->pair_pss_max_mib;
        if (sv->huge90_s >= 0) { n_huge90++; if (sv->huge90_s > huge90_max) huge90_max = sv->huge90_s; }
    }
    bench_result(C.name, "alpha=%.2f scrambled=%d keys=%llu field=%llu ops_per_s=%.0f ops_bgsave_per_s=%.0f ops_quiet_per_s=%.0f "
                 "p99_us=%.0f p99_bgsave_us=%.0f bgsaves=%d child_life_s=%.2f pair_pss_bgsave_mib=%.0f huge90_saves=%d "
                 "huge90_max_s=%.0f server_huge_start_pct=%.1f server_rss_max_mib=%.0f child_rss_max_mib=%.0f pair_pss_max_mib=%.0f "
                 "dumps_checked=%d dumps_bad=%d",
                 C.alpha, C.scrambled, (unsigned long long)C.keys, (unsigned long long)C.field_bytes,
                 (double)total_ops / secs_total, n_bgs ? ops_bg / n_bgs : -1, n_q ? ops_quiet / n_q : -1,
                 lat_p99(hist_all, n_all), lat_p99(hist_bg, n_bg), n_done, median_d(life, n_done), median_d(pair, n_done),
                 n_huge90, huge90_max, huge0, max_rss, max_child, max_pair, checked, bad_dumps);
    if (bad_dumps) bench_check_failed("%d of %d dumps did not reload with %llu keys", bad_dumps, checked,
                                      (unsigned long long)C.keys);
    return 0;
}
