/* colour_probe.c: `hpm stat --colours`, which measures whether page
 * colours can control the caches on this machine.
 *
 * Inside a 2 MiB huge page, address bits 12..20 equal the physical bits
 * only if the memory is physically contiguous, which in a VM depends on
 * how the host backs the guest. We test it by timing pointer chases:
 *  - L1 (sanity): 2x ways lines 4 KiB apart share an L1 set (L1 is
 *    virtually indexed, so this always conflicts) against lines in
 *    different L1 sets. If this shows no slowdown the timer cannot see set
 *    conflicts and the verdict is "inconclusive".
 *  - L2: 2x ways lines one L2 way-size apart (same virtual bits 6..way)
 *    against lines whose bits 12..way differ; every line shares one L1
 *    set in both, so only the L2 set can differ. Conflicts appear only if
 *    the physical bits follow the virtual ones.
 *  - LLC: 2x ways lines at the same offset in different huge pages (same
 *    bits 6..20) against lines whose bits 16..20 differ; both share one L2
 *    set, so only the LLC set can differ.
 * Each test takes the median of many interleaved trials; a ratio
 * (same-set / different-set) of at least 1.5 is a conflict, at most 1.2
 * none, and in between it measures again with more trials. The huge pages
 * are checked to be PMD-mapped (PAGEMAP_SCAN, else smaps) before any
 * timing. Result: which address bits are physically controllable. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <unistd.h>
#include "hpm_proc.h"
#include "stat.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#define CP_HP (2ul << 20)
#define CP_CONFLICT 1.5
#define CP_NONE 1.2
#define CP_LOADS 200000

typedef struct { int level; long size_bytes, ways, line_bytes, sets; } cp_cache_t;

typedef struct {
    const char *name;
    int lines, applicable;
    long stride_bytes;
    double same_ns, diff_ns, ratio;
    int trials;
    char bits[32];           /* the address bits this level's test probes */
} cp_test_t;

/* ---- geometry ---- */
static long cp_read_long(const char *dir, const char *file) {
    char path[256], buf[64];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long v = -1;
    if (fgets(buf, sizeof buf, f)) {
        char *end;
        v = strtol(buf, &end, 10);
        if (*end == 'K') v *= 1024;
        else if (*end == 'M') v *= 1024 * 1024;
    }
    fclose(f);
    return v;
}

static void cp_keep(cp_cache_t c, cp_cache_t *l1, cp_cache_t *l2, cp_cache_t *llc) {
    if (c.level == 1) *l1 = c;
    if (c.level == 2) *l2 = c;
    if (c.level >= 2 && c.level >= llc->level) *llc = c;
}

/* Where the kernel does not publish the caches in sysfs (seen on a KVM
 * guest whose cpu0 has no cache directory), the CPU's own description:
 * CPUID leaf 4 (Intel) or 0x8000001D (AMD), one subleaf per cache, in
 * the same format. Returns levels found; 0 elsewhere. */
static int cp_geometry_cpuid(cp_cache_t *l1, cp_cache_t *l2, cp_cache_t *llc) {
    int found = 0;
#if defined(__x86_64__) || defined(__i386__)
    static const unsigned leaves[2] = {4u, 0x8000001Du};
    for (int l = 0; l < 2 && !found; l++) {
        unsigned max = (unsigned)__get_cpuid_max(leaves[l] & 0x80000000u, NULL);
        if (max < leaves[l]) continue;
        for (unsigned sub = 0; sub < 16; sub++) {
            unsigned a, b, c, d;
            __cpuid_count(leaves[l], sub, a, b, c, d);
            unsigned type = a & 31u;
            if (type == 0) break;        /* no more caches */
            if (type == 2) continue;     /* instruction cache */
            cp_cache_t k = {(int)((a >> 5) & 7u), 0, (long)(b >> 22) + 1, (long)(b & 0xfffu) + 1, (long)c + 1};
            k.size_bytes = k.ways * ((long)((b >> 12) & 0x3ffu) + 1) * k.line_bytes * k.sets;
            found++;
            cp_keep(k, l1, l2, llc);
        }
    }
    /* Older AMD leaves (a KVM guest may offer only these): L1D in
     * 0x80000005, L2 and L3 in 0x80000006, ways as an encoded field. */
    if (!found && (unsigned)__get_cpuid_max(0x80000000u, NULL) >= 0x80000006u) {
        static const long ways_of[16] = {0, 1, 2, 3, 4, 6, 8, 0, 16, 0, 32, 48, 64, 96, 128, 0};   /* 0: not encoded here */
        unsigned a, b, c, d;
        __cpuid(0x80000005u, a, b, c, d);
        cp_cache_t k1 = {1, (long)(c >> 24) << 10, (long)((c >> 16) & 0xffu), (long)(c & 0xffu), 0};
        __cpuid(0x80000006u, a, b, c, d);
        cp_cache_t k2 = {2, (long)(c >> 16) << 10, ways_of[(c >> 12) & 0xfu], (long)(c & 0xffu), 0};
        cp_cache_t k3 = {3, (long)(d >> 18) << 19, ways_of[(d >> 12) & 0xfu], (long)(d & 0xffu), 0};
        cp_cache_t *all[3] = {&k1, &k2, &k3};
        for (int i = 0; i < 3; i++) {
            cp_cache_t *k = all[i];
            if (k->size_bytes <= 0 || k->ways <= 0 || k->ways == 0xff || k->line_bytes <= 0) continue;
            k->sets = k->size_bytes / (k->ways * k->line_bytes);
            if (k->sets <= 0) continue;
            found++;
            cp_keep(*k, l1, l2, llc);
        }
    }
#else
    (void)l1; (void)l2; (void)llc;
#endif
    return found;
}

/* Fills l1 (data), l2 and llc (highest level) from sysfs, else from
 * CPUID; returns levels found. */
static int cp_geometry(cp_cache_t *l1, cp_cache_t *l2, cp_cache_t *llc) {
    memset(l1, 0, sizeof *l1); memset(l2, 0, sizeof *l2); memset(llc, 0, sizeof *llc);
    int found = 0;
    for (int i = 0; i < 16; i++) {
        char dir[128], type[32] = "";
        snprintf(dir, sizeof dir, "/sys/devices/system/cpu/cpu0/cache/index%d", i);
        char tpath[160];
        snprintf(tpath, sizeof tpath, "%s/type", dir);
        FILE *f = fopen(tpath, "r");
        if (!f) continue;
        if (!fgets(type, sizeof type, f)) type[0] = 0;
        fclose(f);
        if (!strncmp(type, "Instruction", 11)) continue;
        cp_cache_t c = {(int)cp_read_long(dir, "level"), cp_read_long(dir, "size"),
                        cp_read_long(dir, "ways_of_associativity"), cp_read_long(dir, "coherency_line_size"),
                        cp_read_long(dir, "number_of_sets")};
        if (c.level <= 0 || c.ways <= 0 || c.line_bytes <= 0 || c.sets <= 0) continue;
        found++;
        cp_keep(c, l1, l2, llc);
    }
    return found ? found : cp_geometry_cpuid(l1, l2, llc);
}

/* ---- memory ---- */
static int cp_is_pmd_mapped(char *p, size_t bytes) {
    struct { uint64_t start, end, cat; } vec[64];
    struct { uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages, inv, mask, anyof, ret; } a = {
        .size = sizeof a, .start = (uintptr_t)p, .end = (uintptr_t)p + bytes, .vec = (uintptr_t)vec,
        .vec_len = 64, .mask = (1ull << 6) | (1ull << 3), .ret = 1ull << 6};
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    long n = ioctl(fd, _IOWR('f', 16, a), &a);
    close(fd);
    if (n < 0) return -1;   /* no PAGEMAP_SCAN: the caller uses smaps */
    uint64_t huge = 0;
    for (long i = 0; i < n; i++) huge += vec[i].end - vec[i].start;
    return huge == bytes;
}

/* AnonHugePages of the mapping that holds p, from /proc/self/smaps. */
static long cp_smaps_thp_bytes(char *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    char line[512];
    int in = 0;
    long thp = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long long s, e;
        if (sscanf(line, "%llx-%llx ", &s, &e) == 2 && strchr(line, '-') < strchr(line, ' '))
            in = (uintptr_t)p >= s && (uintptr_t)p < e;
        else if (in && !strncmp(line, "AnonHugePages:", 14)) { thp = atol(line + 14) * 1024; break; }
    }
    fclose(f);
    return thp;
}

/* Maps n huge pages and checks they are PMD-mapped; NULL on failure. */
static char *cp_map_huge(int n_hp, char *why, size_t why_bytes) {
    size_t bytes = (size_t)n_hp * CP_HP;
    char *raw = mmap(NULL, bytes + CP_HP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) { snprintf(why, why_bytes, "mmap: %s", strerror(errno)); return NULL; }
    char *p = (char *)(((uintptr_t)raw + CP_HP - 1) & ~(CP_HP - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    munmap(p + bytes, (size_t)(raw + CP_HP - p));
    madvise(p, bytes, MADV_HUGEPAGE);
    memset(p, 1, bytes);
    int ok = cp_is_pmd_mapped(p, bytes);
    if (ok == 0) { madvise(p, bytes, MADV_COLLAPSE); ok = cp_is_pmd_mapped(p, bytes); }
    if (ok < 0) ok = cp_smaps_thp_bytes(p) >= (long)bytes;
    if (!ok) {
        snprintf(why, why_bytes, "could not get %d PMD-mapped huge pages (THP off or memory fragmented)", n_hp);
        munmap(p, bytes);
        return NULL;
    }
    return p;
}

/* ---- timing ---- */
static double cp_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Links the lines into one random cycle (Sattolo) and returns its start. */
static void **cp_link(char *base, const long *off, int n, uint64_t *rng) {
    int order[256];
    for (int i = 0; i < n; i++) order[i] = i;
    for (int i = n - 1; i > 0; i--) {
        *rng ^= *rng << 13; *rng ^= *rng >> 7; *rng ^= *rng << 17;
        int j = (int)(*rng % (uint64_t)i);
        int t = order[i]; order[i] = order[j]; order[j] = t;
    }
    for (int i = 0; i < n; i++) *(void **)(base + off[order[i]]) = base + off[order[(i + 1) % n]];
    return (void **)(base + off[order[0]]);
}

static volatile uintptr_t cp_sink;

static double cp_chase_ns(void **start) {
    void **p = start;
    for (int i = 0; i < CP_LOADS / 10; i++) p = (void **)*p;   /* warm up */
    double t0 = cp_now_ns();
    for (int i = 0; i < CP_LOADS; i++) p = (void **)*p;
    double t = cp_now_ns() - t0;
    cp_sink = (uintptr_t)p;
    return t / CP_LOADS;
}

static int cp_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median same-set and different-set latency over interleaved trials. */
static void cp_run_chases(cp_test_t *t, char *base, const long *same, const long *diff, int trials, uint64_t *rng) {
    double s[128], d[128];
    if (trials > 128) trials = 128;
    for (int k = 0; k < trials; k++) {
        s[k] = cp_chase_ns(cp_link(base, same, t->lines, rng));
        d[k] = cp_chase_ns(cp_link(base, diff, t->lines, rng));
    }
    qsort(s, (size_t)trials, sizeof s[0], cp_cmp);
    qsort(d, (size_t)trials, sizeof d[0], cp_cmp);
    t->same_ns = s[trials / 2];
    t->diff_ns = d[trials / 2];
    t->ratio = t->diff_ns > 0 ? t->same_ns / t->diff_ns : 0;
    t->trials = trials;
}

/* Runs one test; more trials while the ratio sits between the thresholds. */
static void cp_run(cp_test_t *t, char *base, const long *same, const long *diff, uint64_t *rng) {
    int trials = 21;
    for (int round = 0; round < 3; round++, trials *= 2) {
        cp_run_chases(t, base, same, diff, trials, rng);
        if (t->ratio >= CP_CONFLICT || t->ratio <= CP_NONE) break;
    }
}

static const char *cp_class(const cp_test_t *t) {
    if (!t->applicable) return "n/a";
    return t->ratio >= CP_CONFLICT ? "conflict" : t->ratio <= CP_NONE ? "no conflict" : "unclear";
}

static int cp_log2(long v) { int b = 0; while ((1L << (b + 1)) <= v) b++; return b; }

/* ---- the tests ---- */
static void cp_test_l1(cp_test_t *t, const cp_cache_t *c, char *base, uint64_t *rng) {
    long way = c->sets * c->line_bytes;   /* bytes between lines of one set */
    long same[256], diff[256];
    t->name = "L1";
    t->lines = (int)(2 * c->ways);
    t->stride_bytes = way;
    t->applicable = t->lines <= 256 && way * t->lines <= (long)CP_HP;
    snprintf(t->bits, sizeof t->bits, "6-%d", cp_log2(way) - 1);
    if (!t->applicable) return;
    for (int i = 0; i < t->lines; i++) {
        same[i] = i * way;
        diff[i] = i * way + (i % c->sets) * c->line_bytes;
    }
    cp_run(t, base, same, diff, rng);
}

/* Lines sharing bits [6, top) of the same-set address, in as many huge
 * pages as needed; the control varies bits [lo_bit, top_bit). */
static void cp_test_level(cp_test_t *t, const char *name, const cp_cache_t *c, long lower_way,
                          char *base, int n_hp, uint64_t *rng) {
    long way = c->sets * c->line_bytes;
    if (way > (long)CP_HP) way = (long)CP_HP;   /* bits above 20 are never controllable */
    long same[256], diff[256];
    t->name = name;
    t->lines = (int)(2 * c->ways);
    t->stride_bytes = way;
    int lo_bit = cp_log2(lower_way > 4096 ? lower_way : 4096), top_bit = cp_log2(way);
    snprintf(t->bits, sizeof t->bits, "%d-%d", lo_bit, top_bit - 1);
    long per_hp = (long)CP_HP / way;
    long variants = way / (1L << lo_bit);   /* distinct values of bits lo..top */
    t->applicable = top_bit > lo_bit && t->lines <= 256 && (t->lines + per_hp - 1) / per_hp <= n_hp;
    if (!t->applicable) return;
    for (int i = 0; i < t->lines; i++) {
        long at = (i / per_hp) * (long)CP_HP + (i % per_hp) * way;
        same[i] = at;
        /* stay inside the huge page: shift by whole lower-level ways */
        diff[i] = (i / per_hp) * (long)CP_HP + ((i % per_hp) * way + (i % variants) * (1L << lo_bit)) % (long)CP_HP;
    }
    cp_run(t, base, same, diff, rng);
}

/* Root only: the BPM question. 2x ways 4 KiB frames whose guest PFNs share
 * the L2 colour (PFN mod L2 way-size/4 KiB) against frames of mixed
 * colours, all at the same page offset (one L1 set). A conflict means
 * frame colouring (hpm_colored_map) controls the L2 here. */
static void cp_test_frames(cp_test_t *t, const cp_cache_t *c, uint64_t *rng) {
    long way = c->sets * c->line_bytes;
    long colours = way / 4096;
    t->name = "frames";
    t->lines = (int)(2 * c->ways);
    t->stride_bytes = 4096;
    snprintf(t->bits, sizeof t->bits, "pfn%%%ld", colours);
    t->applicable = 0;
    if (geteuid() != 0 || colours < 2 || t->lines > 256) return;
    size_t n_pages = (size_t)(t->lines * colours * 4);
    char *pool = mmap(NULL, n_pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pool == MAP_FAILED) return;
    madvise(pool, n_pages * 4096, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < n_pages; i++) pool[i * 4096] = 1;
    uint64_t *pfn = calloc(n_pages, sizeof *pfn);
    int fd = hpm_proc_pagemap_open(0);
    int ok = pfn && fd >= 0 && hpm_proc_pagemap_read(fd, (uintptr_t)pool, n_pages, pfn) == 0;
    if (fd >= 0) close(fd);
    long same[256], diff[256];
    int n_same = 0, n_diff = 0, per_colour[64] = {0};
    for (size_t i = 0; ok && i < n_pages; i++) {
        uint64_t f = pfn[i] & ((1ull << 55) - 1);
        if (!f) { ok = 0; break; }
        long colour = (long)(f % (uint64_t)colours);
        if (colour == (long)((pfn[0] & ((1ull << 55) - 1)) % (uint64_t)colours) && n_same < t->lines)
            same[n_same++] = (long)i * 4096;
        else if (n_diff < t->lines && colours <= 64 && per_colour[colour] < (t->lines + colours - 1) / colours) {
            per_colour[colour]++;
            diff[n_diff++] = (long)i * 4096;
        }
    }
    if (ok && n_same == t->lines && n_diff == t->lines) {
        t->applicable = 1;
        cp_run(t, pool, same, diff, rng);
    }
    free(pfn);
    munmap(pool, n_pages * 4096);
}

static void cp_json_test(const cp_test_t *t) {
    printf("\"%s\":{\"applicable\":%s,\"lines\":%d,\"stride_bytes\":%ld,\"bits\":\"%s\",\"same_set_ns\":%.3f,"
           "\"diff_set_ns\":%.3f,\"ratio\":%.3f,\"trials\":%d,\"result\":\"%s\"}",
           t->name, t->applicable ? "true" : "false", t->lines, t->stride_bytes, t->bits, t->same_ns, t->diff_ns,
           t->ratio, t->trials, cp_class(t));
}

typedef struct {
    cp_cache_t l1, l2, llc;
    cp_test_t t1, t2, t3, t4;   /* L1 (sanity), L2, LLC, 4 KiB frames */
    int n_hp;
    long llc_way;
    const char *verdict, *bits;
    char bits_buf[48], evidence[1024];
} cp_result_t;

/* The verdict from the L1 sanity test and the L2 and LLC tests. */
static void cp_verdict(cp_result_t *r) {
    const cp_test_t *t2 = &r->t2, *t3 = &r->t3;
    int l2c = t2->applicable && t2->ratio >= CP_CONFLICT, l2n = !t2->applicable || t2->ratio <= CP_NONE;
    int l3c = t3->applicable && t3->ratio >= CP_CONFLICT, l3n = !t3->applicable || t3->ratio <= CP_NONE;
    r->verdict = "inconclusive";
    r->bits = "unknown";
    if (!r->t1.applicable || r->t1.ratio < CP_CONFLICT) return;
    if (l2c && l3c) {
        r->verdict = "controllable";
        snprintf(r->bits_buf, sizeof r->bits_buf, "12-%d", cp_log2(r->llc_way < (long)CP_HP ? r->llc_way : (long)CP_HP) - 1);
        r->bits = r->bits_buf;
    } else if (l2c && l3n) {
        r->verdict = "partly controllable";
        r->bits = t2->bits;
    } else if (l2n && l3n) {
        r->verdict = "not controllable";
        r->bits = "none";
    }
}

static const char *cp_meaning(const char *verdict) {
    if (!strcmp(verdict, "not controllable"))
        return "Virtual bits 12-20 do not select cache sets: the huge pages are not physically contiguous "
               "(the host backs this guest with 4 KiB pages), so colouring by address has no effect and "
               "huge pages here do not give full TLB reach.";
    if (!strcmp(verdict, "controllable")) return "Huge pages are physically contiguous: colouring by page index works.";
    if (!strcmp(verdict, "partly controllable"))
        return "L2 sets follow the page index; no LLC conflict was seen (a hashed/sliced LLC or a smaller host page).";
    return "The measurements do not support a verdict.";
}

static void cp_write_evidence(cp_result_t *r) {
    const cp_test_t *t1 = &r->t1, *t2 = &r->t2, *t3 = &r->t3, *t4 = &r->t4;
    char frames[200];
    if (t4->applicable)
        snprintf(frames, sizeof frames, "4 KiB frames by guest PFN colour (BPM, %s) %.2f/%.2f ns = %.2fx %s", t4->bits,
                 t4->same_ns, t4->diff_ns, t4->ratio, cp_class(t4));
    else
        snprintf(frames, sizeof frames, "frame colours (BPM) not tested: needs root for PFNs");
    snprintf(r->evidence, sizeof r->evidence,
             "pointer chases inside %d verified 2 MiB huge pages, median of >=%d trials, same-set/diff-set latency: "
             "L1 (bits %s, sanity) %.2f/%.2f ns = %.2fx %s; L2 (bits %s) %.2f/%.2f ns = %.2fx %s; "
             "LLC (bits %s) %.2f/%.2f ns = %.2fx %s; %s. %s",
             r->n_hp, t1->trials, t1->bits, t1->same_ns, t1->diff_ns, t1->ratio, cp_class(t1), t2->bits, t2->same_ns,
             t2->diff_ns, t2->ratio, cp_class(t2), t3->bits, t3->same_ns, t3->diff_ns, t3->ratio, cp_class(t3), frames,
             cp_meaning(r->verdict));
}

static void cp_print_json(const cp_result_t *r) {
    printf("{\"verdict\":\"%s\",\"controllable_bits\":\"%s\",\"evidence\":\"%s\",", r->verdict, r->bits, r->evidence);
    printf("\"geometry\":{\"l1d\":\"%ldK %ld-way %ld sets\",\"l2\":\"%ldK %ld-way %ld sets\",\"llc\":\"L%d %ldK %ld-way %ld sets\"},",
           r->l1.size_bytes >> 10, r->l1.ways, r->l1.sets, r->l2.size_bytes >> 10, r->l2.ways, r->l2.sets, r->llc.level,
           r->llc.size_bytes >> 10, r->llc.ways, r->llc.sets);
    cp_json_test(&r->t1); printf(","); cp_json_test(&r->t2); printf(","); cp_json_test(&r->t3);
    printf(",\"frame_colours\":\"%s\",", !r->t4.applicable ? "untested" : r->t4.ratio >= CP_CONFLICT ? "controllable"
                                          : r->t4.ratio <= CP_NONE ? "not controllable" : "unclear");
    cp_json_test(&r->t4);
    printf("}\n");
}

static void cp_print_text(const cp_result_t *r) {
    printf("colour probe\n  caches: L1d %ld KiB %ld-way %ld sets; L2 %ld KiB %ld-way %ld sets; L%d %ld KiB %ld-way %ld sets\n",
           r->l1.size_bytes >> 10, r->l1.ways, r->l1.sets, r->l2.size_bytes >> 10, r->l2.ways, r->l2.sets, r->llc.level,
           r->llc.size_bytes >> 10, r->llc.ways, r->llc.sets);
    const cp_test_t *ts[4] = {&r->t1, &r->t2, &r->t3, &r->t4};
    for (int i = 0; i < 4; i++)
        printf("  %-4s %3d lines %7ld B apart (bits %-5s): same set %6.2f ns, different sets %6.2f ns, "
               "ratio %.2f -> %s\n", ts[i]->name, ts[i]->lines, ts[i]->stride_bytes, ts[i]->bits,
               ts[i]->same_ns, ts[i]->diff_ns, ts[i]->ratio, cp_class(ts[i]));
    printf("  verdict: %s; physically controllable address bits: %s\n  %s\n", r->verdict, r->bits, r->evidence);
}

/* Runs the chases on n_hp huge pages (and the frame test); 0, or -1 with
 * why filled when the huge pages cannot be had. */
static int cp_probe_all(cp_result_t *r, char *why, size_t why_bytes) {
    char *base = cp_map_huge(r->n_hp, why, why_bytes);
    if (!base) return -1;
    uint64_t rng = 0x2545f4914f6cdd1dull ^ (uint64_t)getpid();
    cp_test_l1(&r->t1, &r->l1, base, &rng);
    cp_test_level(&r->t2, "L2", &r->l2, r->l1.sets * r->l1.line_bytes, base, r->n_hp, &rng);
    if (r->llc.level > 2) cp_test_level(&r->t3, "LLC", &r->llc, r->l2.sets * r->l2.line_bytes, base, r->n_hp, &rng);
    else r->t3.name = "LLC";
    munmap(base, (size_t)r->n_hp * CP_HP);
    cp_test_frames(&r->t4, &r->l2, &rng);
    return 0;
}

int hpm_colour_probe(int json) {
    static cp_result_t r;
    if (cp_geometry(&r.l1, &r.l2, &r.llc) == 0 || !r.l1.sets || !r.l2.sets) {
        fprintf(stderr, "hpm stat --colours: cannot read the cache geometry (neither /sys/devices/system/cpu/cpu0/cache nor CPUID describes it)\n");
        return 1;
    }
    cpu_set_t one;   /* stay on one core so every chase sees the same L1/L2 */
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu() < 0 ? 0 : sched_getcpu(), &one);
    sched_setaffinity(0, sizeof one, &one);
    r.llc_way = r.llc.sets * r.llc.line_bytes;
    r.n_hp = (int)(2 * r.llc.ways);   /* one line per huge page in the LLC test */
    if (r.llc_way < (long)CP_HP) r.n_hp = (int)((2 * r.llc.ways * r.llc_way + CP_HP - 1) / CP_HP);
    if (r.n_hp < 2) r.n_hp = 2;
    char why[160];
    if (cp_probe_all(&r, why, sizeof why) != 0) {
        if (json) printf("{\"verdict\":\"inconclusive\",\"controllable_bits\":\"unknown\",\"evidence\":\"%s\"}\n", why);
        else printf("colour probe: inconclusive: %s\n", why);
        return 1;
    }
    cp_verdict(&r);
    cp_write_evidence(&r);
    if (json) cp_print_json(&r); else cp_print_text(&r);
    return 0;
}
