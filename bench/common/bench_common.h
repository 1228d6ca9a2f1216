/* bench_common.h: what every benchmark program of hpmalloc shares: a
 * monotonic clock, a seeded random generator (splitmix64, identical on
 * every allocator and run), size parsing with K/M/G suffixes, scaffolding
 * memory that does not come from malloc, and the result/failure protocol.
 *
 * The protocol, which `hpm bench` parses:
 *   - lines starting with '#' are human information;
 *   - exactly one line "RESULT bench=<name> key=value ..." (keys are
 *     [A-Za-z0-9_.@-], values have no spaces), printed last on success;
 *   - a wrong answer prints "CHECK FAILED: <why>" on stderr and exits 3;
 *   - bad arguments print a message on stderr and exit 2.
 * Header-only: every function is static inline. */
#ifndef HPM_BENCH_COMMON_H
#define HPM_BENCH_COMMON_H
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define BENCH_EXIT_USAGE 2
#define BENCH_EXIT_CHECK 3

/* Per-thread records that a thread writes on every operation (counters, its
 * random state) start on their own 128 bytes (two cache lines: the
 * adjacent-line prefetcher pairs them), so that neighbouring threads'
 * records do not share a line. Without it the benchmark measures its own
 * false sharing: larson's 104-byte lanes put lane 0's counters and lane
 * 1's pointers in one line, and two threads made half the replacements
 * per second that one thread made, under every allocator. The published
 * programs keep such state in locals or in records of about 1 KB. */
#define BENCH_THREAD_RECORD _Alignas(128)

static inline uint64_t bench_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* splitmix64: small, fast, and the same sequence everywhere. */
typedef struct { uint64_t s; } bench_rng_t;

static inline void bench_rng_seed(bench_rng_t *r, uint64_t seed) { r->s = seed * 0x9E3779B97F4A7C15ull + 1; }

static inline uint64_t bench_rng_next(bench_rng_t *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), n > 0 (multiply-shift; bias is negligible here). */
static inline uint64_t bench_rng_below(bench_rng_t *r, uint64_t n) {
    return (uint64_t)(((unsigned __int128)bench_rng_next(r) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline uint64_t bench_rng_range(bench_rng_t *r, uint64_t lo, uint64_t hi) {
    return lo + bench_rng_below(r, hi - lo + 1);
}

static inline void bench_usage_error(const char *prog, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (try --help)\n");
    exit(BENCH_EXIT_USAGE);
}

/* A wrong answer: never a time. */
static inline void bench_check_failed(const char *fmt, ...) {
    va_list ap;
    fflush(stdout);
    fprintf(stderr, "CHECK FAILED: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(BENCH_EXIT_CHECK);
}

/* Parses "123", "16K", "256M", "1G" (powers of 1024) into *out. */
static inline int bench_parse_size(const char *s, uint64_t *out) {
    if (!s || !*s || *s == '-') return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s) return -1;
    uint64_t mul = 1;
    switch (*end) {
    case 0: break;
    case 'k': case 'K': mul = 1ull << 10; end++; break;
    case 'm': case 'M': mul = 1ull << 20; end++; break;
    case 'g': case 'G': mul = 1ull << 30; end++; break;
    default: return -1;
    }
    if (*end == 'i' && end[1] == 'B') end += 2;
    else if (*end == 'B') end++;
    if (*end) return -1;
    if (v > UINT64_MAX / mul) return -1;
    *out = v * mul;
    return 0;
}

/* A size or count argument in [lo, hi], or a usage error. */
static inline uint64_t bench_arg_size(const char *prog, const char *opt, const char *val,
                                      uint64_t lo, uint64_t hi) {
    uint64_t v;
    if (bench_parse_size(val, &v) != 0 || v < lo || v > hi)
        bench_usage_error(prog, "%s needs a number in [%llu, %llu] (K/M/G allowed), got '%s'",
                          opt, (unsigned long long)lo, (unsigned long long)hi, val ? val : "");
    return v;
}

/* A duration in seconds in (0, 3600] (fractions allowed), or a usage error. */
static inline double bench_arg_seconds(const char *prog, const char *opt, const char *val) {
    char *end;
    double s = strtod(val, &end);
    if (end == val || *end || !(s > 0 && s <= 3600))
        bench_usage_error(prog, "%s needs seconds in (0, 3600], got '%s'", opt, val);
    return s;
}

/* Sleeps for s seconds (restarting after signals). */
static inline void bench_sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* Formats a byte count as "16K", "256M", "1G" when exact, else bytes. */
static inline const char *bench_fmt_size(uint64_t b, char *buf, size_t len) {
    if (b >= (1ull << 30) && b % (1ull << 30) == 0) snprintf(buf, len, "%lluG", (unsigned long long)(b >> 30));
    else if (b >= (1ull << 20) && b % (1ull << 20) == 0) snprintf(buf, len, "%lluM", (unsigned long long)(b >> 20));
    else if (b >= (1ull << 10) && b % (1ull << 10) == 0) snprintf(buf, len, "%lluK", (unsigned long long)(b >> 10));
    else snprintf(buf, len, "%llu", (unsigned long long)b);
    return buf;
}

/* Scaffolding memory (index arrays, permutations) straight from mmap, so
 * that only the memory under test comes from the allocator under test. */
static inline void *bench_scratch_alloc(size_t bytes) {
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap scratch"); exit(1); }
    return p;
}

static inline void bench_scratch_free(void *p, size_t bytes) { munmap(p, bytes ? bytes : 1); }

/* malloc that treats NULL as a fatal allocator failure (exit 4). */
static inline void *bench_xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p && n) { fprintf(stderr, "malloc(%zu) returned NULL\n", n); exit(4); }
    return p;
}

/* Prints the RESULT line: "RESULT bench=<name> " then the formatted rest. */
static inline void bench_result(const char *name, const char *fmt, ...) {
    va_list ap;
    printf("RESULT bench=%s ", name);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
}

/* 64-bit mixing for checksums that do not depend on order of addition. */
static inline uint64_t bench_mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}
#endif
