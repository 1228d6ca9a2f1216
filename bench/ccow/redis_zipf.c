/* redis_zipf.c: a Redis client for the CCoW evaluation. It loads a
 * redis-server (optionally starting one with --server, which then runs
 * under the same environment, LD_PRELOAD and HPM_CCOW included) with
 * --keys keys of --value bytes, then updates values in place (SETRANGE of
 * 8 bytes at a random offset) choosing keys by Zipf(alpha) over the load
 * order, pipelined, while a second connection runs BGSAVE every period.
 *
 * Records per second: operations, the p99 of the batch round trip, whether
 * a BGSAVE child was alive, and the RSS of the server and its child (from
 * /proc, the child found in /proc/PID/task/PID/children), plus their Pss.
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

typedef struct {
    double ops, p99_us, rss_mib, child_rss_mib, pair_pss_mib;
    int bgsave;
} sec_t;

static struct {
    const char *server, *name, *timeline;
    int port, pipeline;
    uint64_t keys, value_bytes, duration_s, bgsave_s, warmup_s;
    double alpha;
} C = {NULL, "redis-zipf", NULL, 6399, 16, 1000000, 1000, 20, 5, 2, 1.0};

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
    char buf[512];
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
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    if (system(cmd) != 0) fprintf(stderr, "# could not remove %s\n", tmp_dir);
}

static void load_keys(conn_t *c) {
    size_t cap = 1000 * (C.value_bytes + 64) + 4096;
    char *buf = bench_scratch_alloc(cap), *val = bench_scratch_alloc(C.value_bytes + 1), key[32], reply[256];
    for (uint64_t i = 0; i < C.value_bytes; i++) val[i] = (char)('a' + i % 26);
    for (uint64_t base = 0; base < C.keys; base += 1000) {
        size_t n = 0, cnt = 0;
        for (uint64_t k = base; k < base + 1000 && k < C.keys; k++, cnt++) {
            snprintf(key, sizeof key, "key:%010llu", (unsigned long long)k);
            const char *argv[] = {"SET", key, val};
            size_t lens[] = {3, strlen(key), C.value_bytes};
            n += fmt_cmd(buf + n, cap - n, 3, argv, lens);
        }
        conn_send(c, buf, n);
        for (size_t i = 0; i < cnt; i++) conn_reply(c, reply, sizeof reply);
    }
    bench_scratch_free(buf, cap);
}

static double rng_u01(void *r) { return (double)(bench_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

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

static void proc_mem(int pid, double *rss_mib, double *pss_mib) {
    char path[64];
    const char *st[] = {"VmRSS"}, *sm[] = {"Pss"};
    long v = -1, p = -1;
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    bench_mem_read_fields(path, st, &v, 1);
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", pid);
    bench_mem_read_fields(path, sm, &p, 1);
    *rss_mib = v < 0 ? -1 : (double)v / 1024.0;
    *pss_mib = p < 0 ? -1 : (double)p / 1024.0;
}

static double lat_p99(const uint32_t *h, uint64_t total) {
    if (!total) return -1;
    uint64_t want = total - total / 100, acc = 0;
    for (int i = 0; i < LAT_BUCKETS; i++) { acc += h[i]; if (acc >= want) return (i + 1) * 16.0; }
    return LAT_BUCKETS * 16.0;
}

static void parse_args(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help")) {
            printf("usage: redis_zipf [--server /usr/bin/redis-server] [--port 6399] [--keys 1000000] [--value 1000]\n"
                   "       [--alpha 1.0] [--duration-s 20] [--bgsave-every-s 5] [--warmup-s 2] [--pipeline 16]\n"
                   "       [--name NAME] [--timeline FILE.csv]\n");
            exit(0);
        }
        if (!v) bench_usage_error("redis_zipf", "option %s needs a value", a);
        i++;
        if (!strcmp(a, "--server")) C.server = v;
        else if (!strcmp(a, "--name")) C.name = v;
        else if (!strcmp(a, "--timeline")) C.timeline = v;
        else if (!strcmp(a, "--port")) C.port = (int)bench_arg_size("redis_zipf", a, v, 1024, 65535);
        else if (!strcmp(a, "--keys")) C.keys = bench_arg_size("redis_zipf", a, v, 1000, 1ull << 32);
        else if (!strcmp(a, "--value")) C.value_bytes = bench_arg_size("redis_zipf", a, v, 16, 1u << 20);
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

int main(int argc, char **argv) {
    parse_args(argc, argv);
    if (C.server) start_server();
    conn_t *data = bench_scratch_alloc(sizeof *data), *ctl = bench_scratch_alloc(sizeof *ctl);
    conn_open(data);
    conn_open(ctl);
    if (data->fd < 0 || ctl->fd < 0) die("cannot connect to 127.0.0.1");
    long spid = info_field(ctl, "server", "process_id");
    if (spid <= 0) die("INFO server gave no process_id");
    uint64_t t0 = bench_now_ns();
    load_keys(data);
    double rss0, pss0;
    proc_mem((int)spid, &rss0, &pss0);
    printf("# loaded %llu keys of %llu bytes in %.1f s; server RSS %.0f MiB\n", (unsigned long long)C.keys,
           (unsigned long long)C.value_bytes, (double)(bench_now_ns() - t0) / 1e9, rss0);

    zipf_t z;
    zipf_init(&z, C.alpha, C.keys);
    bench_rng_t rng;
    bench_rng_seed(&rng, 42);
    sec_t *secs = bench_scratch_alloc(sizeof(sec_t) * MAX_SECONDS);
    uint32_t *hist_sec = bench_scratch_alloc(4 * LAT_BUCKETS), *hist_all = bench_scratch_alloc(4 * LAT_BUCKETS),
             *hist_bg = bench_scratch_alloc(4 * LAT_BUCKETS);
    size_t cap = (size_t)C.pipeline * 128;
    char *buf = bench_scratch_alloc(cap), reply[256], key[32], off[24];
    uint64_t n_all = 0, n_bg = 0, ops_sec = 0, lat_n_sec = 0, total_ops = 0;
    int n_secs = 0, saves = 0, bg_now = 0;
    double max_rss = 0, max_child = 0, max_pair = 0;
    uint64_t start = bench_now_ns() + C.warmup_s * 1000000000ull, end = start + C.duration_s * 1000000000ull;
    uint64_t next_sec = start + 1000000000ull, next_save = start;
    for (;;) {
        uint64_t now = bench_now_ns();
        if (now >= end) break;
        int measuring = now >= start;
        if (measuring && now >= next_save) {
            if (info_field(ctl, "persistence", "rdb_bgsave_in_progress") == 0) {
                const char *av[] = {"BGSAVE"};
                command(ctl, reply, sizeof reply, 1, av);
                saves++;
            }
            next_save += C.bgsave_s * 1000000000ull;
        }
        size_t n = 0;
        for (int i = 0; i < C.pipeline; i++) {
            uint64_t k = zipf_sample(&z, rng_u01, &rng) - 1;
            snprintf(key, sizeof key, "key:%010llu", (unsigned long long)k);
            snprintf(off, sizeof off, "%llu", (unsigned long long)bench_rng_below(&rng, C.value_bytes - 8));
            const char *av[] = {"SETRANGE", key, off, "ccowccow"};
            size_t lens[] = {8, strlen(key), strlen(off), 8};
            n += fmt_cmd(buf + n, cap - n, 4, av, lens);
        }
        uint64_t t_send = bench_now_ns();
        conn_send(data, buf, n);
        for (int i = 0; i < C.pipeline; i++)
            if (conn_reply(data, reply, sizeof reply) != ':') bench_check_failed("SETRANGE gave no integer reply");
        if (!measuring) continue;
        uint64_t us = (bench_now_ns() - t_send) / 1000, b = us / 16 < LAT_BUCKETS ? us / 16 : LAT_BUCKETS - 1;
        hist_sec[b]++; hist_all[b]++; n_all++; lat_n_sec++;
        if (bg_now) { hist_bg[b]++; n_bg++; }
        ops_sec += (uint64_t)C.pipeline;
        total_ops += (uint64_t)C.pipeline;
        if (bench_now_ns() >= next_sec && n_secs < MAX_SECONDS) {
            sec_t *s = &secs[n_secs++];
            s->ops = (double)ops_sec;
            s->p99_us = lat_p99(hist_sec, lat_n_sec);
            double pss_p, pss_c = 0;
            proc_mem((int)spid, &s->rss_mib, &pss_p);
            int child = child_of((pid_t)spid);
            s->child_rss_mib = -1;
            if (child > 0) proc_mem(child, &s->child_rss_mib, &pss_c);
            s->bgsave = bg_now || child > 0;
            s->pair_pss_mib = pss_p + (pss_c > 0 ? pss_c : 0);
            if (s->rss_mib > max_rss) max_rss = s->rss_mib;
            if (s->child_rss_mib > max_child) max_child = s->child_rss_mib;
            if (s->pair_pss_mib > max_pair) max_pair = s->pair_pss_mib;
            bg_now = child > 0;
            memset(hist_sec, 0, 4 * LAT_BUCKETS);
            ops_sec = lat_n_sec = 0;
            next_sec += 1000000000ull;
        }
    }
    double ops_bg = 0, ops_quiet = 0;
    int n_bgs = 0, n_q = 0;
    for (int i = 0; i < n_secs; i++) {
        if (secs[i].bgsave) { ops_bg += secs[i].ops; n_bgs++; } else { ops_quiet += secs[i].ops; n_q++; }
    }
    if (C.timeline) {
        FILE *f = fopen(C.timeline, "w");
        if (!f) die("cannot write the timeline");
        fprintf(f, "name,t_s,ops_per_s,p99_us,bgsave,server_rss_mib,child_rss_mib,pair_pss_mib\n");
        for (int i = 0; i < n_secs; i++)
            fprintf(f, "%s,%d,%.0f,%.0f,%d,%.0f,%.0f,%.0f\n", C.name, i + 1, secs[i].ops, secs[i].p99_us,
                    secs[i].bgsave, secs[i].rss_mib, secs[i].child_rss_mib, secs[i].pair_pss_mib);
        fclose(f);
    }
    double secs_total = (double)(bench_now_ns() - start) / 1e9;
    stop_server(ctl);
    bench_result(C.name, "alpha=%.2f keys=%llu value=%llu ops_per_s=%.0f ops_bgsave_per_s=%.0f ops_quiet_per_s=%.0f "
                 "p99_us=%.0f p99_bgsave_us=%.0f bgsaves=%d server_rss_max_mib=%.0f child_rss_max_mib=%.0f pair_pss_max_mib=%.0f",
                 C.alpha, (unsigned long long)C.keys, (unsigned long long)C.value_bytes, (double)total_ops / secs_total,
                 n_bgs ? ops_bg / n_bgs : -1, n_q ? ops_quiet / n_q : -1, lat_p99(hist_all, n_all), lat_p99(hist_bg, n_bg),
                 saves, max_rss, max_child, max_pair);
    return 0;
}
