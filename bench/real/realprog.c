/* realprog.c: real programs from Debian's packages as benchmark rows.
 *
 * mimalloc-bench times real programs beside its synthetic ones (cfrac,
 * espresso, barnes, redis, lean, z3, ...). Debian ships none of the first
 * three as sources, so this launcher times programs Debian does ship, each
 * on an allocation-heavy job of ours or, for Redis, mimalloc-bench's own
 * command:
 *   lua     lua5.4 bench/real/binary_trees.lua DEPTH STRINGS
 *   sqlite  sqlite3 :memory: < bench/real/table_churn.sql (N rows)
 *   python  /usr/bin/python3 bench/real/json_roundtrip.py N (--python PATH)
 *   perl    perl bench/real/hash_churn.pl N
 *   redis   redis-server under the allocator, then, not under it,
 *           redis-benchmark -r 1000000 -n N -P 8 -q lpush a 1 2 3 4 5 6 7 8 9 10 lrange a 1 10
 *           (mimalloc-bench's bench.sh; redis-benchmark sends everything
 *           after the options as one command, so each request pushes 14
 *           values onto the list "a").
 *
 * The allocator goes into the program alone: when started with LD_PRELOAD
 * (as bench/scripts/standard.sh and `hpm bench` start every program) the
 * launcher runs itself again without it and hands it to the program
 * only, never to redis-benchmark or redis-cli. GLIBC_TUNABLES and the
 * allocators' own variables pass through unchanged.
 *
 * Self-check: every answer the program prints is compared with its closed
 * form (node counts, string lengths, row counts and byte sums; Redis: the
 * list's length is 14 * N), and the program must exit 0.
 * Result: RESULT bench=realprog program=P size=N wall_ms=X
 *   [ns_per_req=X] maxrss_kib=X check=ok, where wall_ms is the program's
 *   run from start to exit (Redis: redis-benchmark's run), ns_per_req is
 *   Redis's requests per second as time, and maxrss_kib the program's (the
 *   server's) peak RSS. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "bench_common.h"

static const char *prog = "realprog";
static const char *preload;   /* the allocator meant for the program, or NULL */

enum { OUT_CAP = 1 << 16 };

typedef struct {
    char out[OUT_CAP];   /* its standard output, cut at OUT_CAP - 1 bytes */
    double ms;           /* start to exit */
    long maxrss_kib;
    int status;          /* as waitpid gives it */
} run_t;

/* Starts argv[0] (a path) with stdin from in_path (or /dev/null), stdout
 * to the pipe *out_fd (or /dev/null when out_fd is NULL), stderr passed
 * through, and LD_PRELOAD set when with_alloc. */
static pid_t start(char *const argv[], const char *in_path, int *out_fd, int with_alloc) {
    int fds[2] = {-1, -1};
    if (out_fd && pipe(fds) != 0) { perror("pipe"); exit(1); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(1); }
    if (pid == 0) {
        int in = open(in_path ? in_path : "/dev/null", O_RDONLY);
        int out = out_fd ? fds[1] : open("/dev/null", O_WRONLY);
        if (in < 0 || out < 0) { perror(in_path ? in_path : "/dev/null"); _exit(127); }
        dup2(in, 0);
        dup2(out, 1);
        if (out_fd) close(fds[0]);
        if (with_alloc && preload) setenv("LD_PRELOAD", preload, 1);
        execv(argv[0], argv);
        fprintf(stderr, "%s: cannot run %s\n", prog, argv[0]);
        _exit(127);
    }
    if (out_fd) { close(fds[1]); *out_fd = fds[0]; }
    return pid;
}

/* Reads fd to its end into buf (NUL-terminated). */
static void slurp(int fd, char *buf, size_t cap) {
    size_t len = 0;
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n > 0 && len + (size_t)n < cap - 1) { len += (size_t)n; continue; }
        if (n > 0) { len += (size_t)n; char sink[4096]; while (read(fd, sink, sizeof sink) > 0) {} }
        break;
    }
    buf[len] = 0;
    close(fd);
}

static void finish(pid_t pid, run_t *r, uint64_t t0) {
    struct rusage ru;
    if (wait4(pid, &r->status, 0, &ru) != pid) { perror("wait4"); exit(1); }
    r->ms = (double)(bench_now_ns() - t0) / 1e6;
    r->maxrss_kib = ru.ru_maxrss;
}

/* Runs argv to its exit, capturing its output. */
static void run(char *const argv[], const char *in_path, int with_alloc, run_t *r) {
    int fd;
    uint64_t t0 = bench_now_ns();
    pid_t pid = start(argv, in_path, &fd, with_alloc);
    slurp(fd, r->out, sizeof r->out);
    finish(pid, r, t0);
}

static void require_ok(const char *what, const run_t *r) {
    if (WIFEXITED(r->status) && WEXITSTATUS(r->status) == 0) return;
    if (WIFSIGNALED(r->status)) bench_check_failed("%s died of signal %d", what, WTERMSIG(r->status));
    bench_check_failed("%s exited with status %d", what, WEXITSTATUS(r->status));
}

static uint64_t digits(uint64_t i) {
    uint64_t d = 1;
    while (i >= 10) { i /= 10; d++; }
    return d;
}

static void expect(const char *what, const char *got, const char *want) {
    if (strcmp(got, want)) bench_check_failed("%s printed \"%s\", expected \"%s\"", what, got, want);
}

/* ---- the programs ---- */

typedef struct {
    const char *name, *binary, *script;
    uint64_t size, quick_size;   /* the published (or our default) size and a quick one */
    const char *size_means;
} program_t;

static const program_t programs[] = {
    {"lua", "/usr/bin/lua5.4", "binary_trees.lua", 16, 14, "tree depth (strings: 12,500 times 2^(depth-12))"},
    {"sqlite", "/usr/bin/sqlite3", "table_churn.sql", 400000, 100000, "rows"},
    {"python", "/usr/bin/python3", "json_roundtrip.py", 300000, 100000, "dict entries"},
    {"perl", "/usr/bin/perl", "hash_churn.pl", 400000, 100000, "hash keys"},
    {"redis", "/usr/bin/redis-server", NULL, 1000000, 200000, "requests (mimalloc-bench: 1,000,000)"},
};
enum { N_PROGRAMS = sizeof programs / sizeof programs[0] };

/* The strings the Lua job joins for a tree depth. */
static uint64_t lua_strings(uint64_t depth) { return 12500ull << (depth > 12 ? depth - 12 : 0); }

static void lua_expected(uint64_t depth, char *buf, size_t cap) {
    uint64_t total = 0, strings = lua_strings(depth), joined = strings ? strings - 1 : 0;
    for (uint64_t d = 4; d <= depth; d += 2) total += (1ull << (depth - d + 4)) * ((2ull << d) - 1);
    for (uint64_t i = 1; i <= strings; i++) joined += digits(i) + 1;
    snprintf(buf, cap, "%llu\t%llu\t%llu\n", (unsigned long long)total, (unsigned long long)((2ull << depth) - 1),
             (unsigned long long)joined);
}

static void sqlite_expected(uint64_t n, char *buf, size_t cap) {
    uint64_t high = 0, left = 0, bytes = 0;
    int seen[1000] = {0}, groups = 0;
    for (uint64_t i = 1; i <= n; i++) {
        if ((i * 2654435761ull) % 4294967296ull >= 0x80000000ull) high++;
        uint64_t c = i % 1000;
        if (c % 3 == 0) continue;
        left++;
        bytes += 9 + digits(i) + (c < 500);
        if (!seen[c]++) groups++;
    }
    snprintf(buf, cap, "%llu\n%llu|%llu\n%d\n", (unsigned long long)high, (unsigned long long)left,
             (unsigned long long)bytes, groups);
}

static void perl_expected(uint64_t n, char *buf, size_t cap) {
    uint64_t left = 0, len = 0;
    for (uint64_t i = 2; i <= n; i += 2) { left++; len += i % 100 + digits(i); }
    snprintf(buf, cap, "%llu %llu %llu\n", (unsigned long long)left, (unsigned long long)len, (unsigned long long)n);
}

/* A port on the loopback that nothing listens on now. */
static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || getsockname(s, (struct sockaddr *)&a, &len)) {
        perror("socket");
        exit(1);
    }
    close(s);
    return ntohs(a.sin_port);
}

static void redis_cli(const char *port, const char *cmd, const char *arg, run_t *r) {
    char *argv[] = {"/usr/bin/redis-cli", "-p", (char *)port, (char *)cmd, (char *)arg, NULL};
    run(argv, NULL, 0, r);
}

/* Starts redis-server under the allocator on a free port (written to
 * port) and waits until it answers; another port, up to 3 times, when it
 * exits at start (someone took the port in between). */
static pid_t start_redis(char *port, size_t cap) {
    static run_t aux;
    for (int attempt = 0; attempt < 3; attempt++) {
        snprintf(port, cap, "%d", free_port());
        char *server_argv[] = {"/usr/bin/redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--daemonize", "no", NULL};
        pid_t server = start(server_argv, NULL, NULL, 1);
        int exited = 0;
        for (int i = 0; i < 200 && !exited; i++) {   /* up to 10 s */
            bench_sleep_s(0.05);
            redis_cli(port, "ping", NULL, &aux);
            if (!strcmp(aux.out, "PONG\n")) return server;
            int st;
            exited = waitpid(server, &st, WNOHANG) == server;
        }
        if (!exited) { kill(server, SIGKILL); bench_check_failed("redis-server did not answer within 10 s"); }
    }
    bench_check_failed("redis-server exited at start 3 times");
    return -1;
}

/* Server under the allocator, client not: mimalloc-bench's redis row. */
static void run_redis(uint64_t n, run_t *bench, long *server_rss_kib) {
    static run_t aux;
    char port[16], nbuf[32];
    snprintf(nbuf, sizeof nbuf, "%llu", (unsigned long long)n);
    pid_t server = start_redis(port, sizeof port);
    char *bench_argv[] = {"/usr/bin/redis-benchmark", "-p", port, "-r", "1000000", "-n", nbuf, "-P", "8", "-q",
                          "lpush", "a", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10",
                          "lrange", "a", "1", "10", NULL};
    run(bench_argv, NULL, 0, bench);
    require_ok("redis-benchmark", bench);
    redis_cli(port, "llen", "a", &aux);
    redis_cli(port, "shutdown", "nosave", &(run_t){0});
    run_t s;
    finish(server, &s, bench_now_ns());
    require_ok("redis-server", &s);
    *server_rss_kib = s.maxrss_kib;
    char want[64];
    snprintf(want, sizeof want, "%llu\n", (unsigned long long)(14 * n));
    expect("redis-cli llen a", aux.out, want);
}

static void usage(void) {
    printf("usage: realprog --program lua|sqlite|python|perl|redis [--size N] [--quick]\n"
           "                [--python PATH] [--dir DIR] [--available]\n"
           "  Times a real program from Debian's packages on an allocation-heavy job, with\n"
           "  the allocator of LD_PRELOAD in that program alone. Sizes (default, --quick):\n");
    for (int i = 0; i < N_PROGRAMS; i++)
        printf("    %-7s %llu, %llu: %s\n", programs[i].name, (unsigned long long)programs[i].size,
               (unsigned long long)programs[i].quick_size, programs[i].size_means);
    printf("  --python: the interpreter itself (pyenv: ~/.pyenv/versions/V/bin/python3.V, not its shim,\n"
           "           a shell script that would take the allocator too).\n"
           "  --dir: where the scripts are (default: bench/real beside the build folder).\n"
           "  --available: exit 0 if the program is installed, 1 if not; run nothing.\n"
           "  Prints: RESULT bench=realprog program=P size=N wall_ms=X [ns_per_req=X] maxrss_kib=X check=ok\n");
}

int main(int argc, char **argv) {
    const char *pre = getenv("LD_PRELOAD");
    if (pre && *pre && !getenv("REALPROG_PRELOAD")) {   /* run again without the allocator */
        setenv("REALPROG_PRELOAD", pre, 1);
        unsetenv("LD_PRELOAD");
        execv("/proc/self/exe", argv);
        perror("realprog: exec /proc/self/exe");
        return 1;
    }
    pre = getenv("REALPROG_PRELOAD");
    preload = pre && *pre ? pre : NULL;
    unsetenv("LD_PRELOAD");

    const char *name = NULL, *dir = NULL, *python = NULL;
    uint64_t size = 0;
    int quick = 0, available = 0;
    static const struct option opts[] = {
        {"program", 1, 0, 'p'}, {"size", 1, 0, 'n'}, {"quick", 0, 0, 'q'}, {"python", 1, 0, 'y'},
        {"dir", 1, 0, 'd'}, {"available", 0, 0, 'a'}, {"seed", 1, 0, 's'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'p': name = optarg; break;
        case 'n': size = bench_arg_size(prog, "--size", optarg, 1, 1ull << 32); break;
        case 'q': quick = 1; break;
        case 'y': python = optarg; break;
        case 'd': dir = optarg; break;
        case 'a': available = 1; break;
        case 's': break;   /* accepted for uniformity: the jobs are deterministic */
        case 'h': usage(); return 0;
        default: bench_usage_error(prog, "unknown option");
        }
    }
    const program_t *p = NULL;
    for (int i = 0; name && i < N_PROGRAMS; i++)
        if (!strcmp(programs[i].name, name)) p = &programs[i];
    if (!p) bench_usage_error(prog, "--program must be lua, sqlite, python, perl or redis");
    const char *binary = python && !strcmp(p->name, "python") ? python : p->binary;
    int have = access(binary, X_OK) == 0 && (strcmp(p->name, "redis") || access("/usr/bin/redis-benchmark", X_OK) == 0);
    if (available) {
        if (!have) printf("%s: %s is not installed\n", prog, binary);
        return have ? 0 : 1;
    }
    if (!have) { fprintf(stderr, "%s: %s is not installed\n", prog, binary); return 1; }
    if (!size) size = quick ? p->quick_size : p->size;

    char script[4200] = "", self[4000];
    if (p->script) {
        if (!dir) {   /* build/bench/realprog -> bench/real */
            ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);   /* longer paths fail the access below */
            self[len > 0 ? len : 0] = 0;
            char *slash = strrchr(self, '/');
            if (slash) *slash = 0;
            snprintf(script, sizeof script, "%s/../../bench/real/%s", self, p->script);
        } else {
            snprintf(script, sizeof script, "%s/%s", dir, p->script);
        }
        if (access(script, R_OK) != 0) bench_usage_error(prog, "no script %s (use --dir)", script);
    }

    static run_t r;
    char nbuf[32], want[256], extra[64] = "";
    snprintf(nbuf, sizeof nbuf, "%llu", (unsigned long long)size);
    long rss_kib;
    if (!strcmp(p->name, "lua")) {
        char strings[32];
        snprintf(strings, sizeof strings, "%llu", (unsigned long long)lua_strings(size));
        char *a[] = {(char *)binary, script, nbuf, strings, NULL};
        run(a, NULL, 1, &r);
        lua_expected(size, want, sizeof want);
    } else if (!strcmp(p->name, "sqlite")) {
        char param[64];
        snprintf(param, sizeof param, ".parameter set @n %s", nbuf);
        char *a[] = {(char *)binary, "-cmd", param, ":memory:", NULL};
        run(a, script, 1, &r);
        sqlite_expected(size, want, sizeof want);
    } else if (!strcmp(p->name, "python")) {
        char *a[] = {(char *)binary, script, nbuf, NULL};
        run(a, NULL, 1, &r);
        snprintf(want, sizeof want, "ok %llu %llu\n", (unsigned long long)size,
                 (unsigned long long)(size * (size - 1) / 2));
    } else if (!strcmp(p->name, "perl")) {
        char *a[] = {(char *)binary, script, nbuf, NULL};
        run(a, NULL, 1, &r);
        perl_expected(size, want, sizeof want);
    } else {
        run_redis(size, &r, &rss_kib);
        const char *rps = strstr(r.out, "requests per second");
        const char *colon = rps ? memrchr(r.out, ':', (size_t)(rps - r.out)) : NULL;
        double v = colon ? strtod(colon + 1, NULL) : 0;
        if (v <= 0) bench_check_failed("no \"requests per second\" in redis-benchmark's output: %.200s", r.out);
        snprintf(extra, sizeof extra, " ns_per_req=%.1f", 1e9 / v);
    }
    if (strcmp(p->name, "redis")) {
        require_ok(p->name, &r);
        expect(p->name, r.out, want);
        rss_kib = r.maxrss_kib;
    }
    bench_result("realprog", "program=%s size=%s wall_ms=%.1f%s maxrss_kib=%ld check=ok", p->name, nbuf, r.ms, extra,
                 rss_kib);
    return 0;
}
