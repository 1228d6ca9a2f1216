/* stat_regions.c: the state of every 2 MiB region of a process's anonymous
 * memory. Sources:
 *  - /proc/PID/pagemap, one 64-bit entry per 4 KiB page: bit 63 present,
 *    bit 62 swapped, bit 56 exclusively mapped (clear = still shared with
 *    another process, e.g. CoW after fork), bits 0-54 the frame number
 *    (zero unless we have CAP_SYS_ADMIN);
 *  - the PAGEMAP_SCAN ioctl (Linux 6.7+) on the same file, whose
 *    PAGE_IS_HUGE category marks PMD-mapped THPs; it needs no privilege;
 *  - /proc/kpageflags (root): KPF_THP (22) tells which frames belong to a
 *    transparent huge page, KPF_ZERO_PAGE (24) the shared zero page.
 * Without PAGEMAP_SCAN, root falls back to "512 present frames, physically
 * contiguous, head flagged THP"; others cannot tell PMD mappings apart and
 * the report says so. Invariant: every region is counted in exactly one
 * state, and the map has one character per region of the mapping. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "hpm_proc.h"
#include "stat.h"

#define PM_PRESENT (1ull << 63)
#define PM_SWAPPED (1ull << 62)
#define PM_EXCLUSIVE (1ull << 56)
#define PM_PFN_MASK ((1ull << 55) - 1)
#define KPF_THP_BIT 22
#define KPF_ZERO_BIT 24
#define KPF_HEAD_BIT 15

/* PAGEMAP_SCAN (include/uapi/linux/fs.h, Linux 6.7); Debian 12's headers predate it. */
#define RG_PAGE_IS_PRESENT (1ull << 3)
#define RG_PAGE_IS_SWAPPED (1ull << 4)
#define RG_PAGE_IS_HUGE (1ull << 6)
struct rg_page_region { uint64_t start, end, categories; };
struct rg_scan_arg {
    uint64_t size, flags, start, end, walk_end, vec, vec_len, max_pages;
    uint64_t category_inverted, category_mask, category_anyof_mask, return_mask;
};
#define RG_PAGEMAP_SCAN _IOWR('f', 16, struct rg_scan_arg)

const char stat_state_char[ST_N] = {'H', 'h', 's', 'c', 'm', 'p', '.', 'e'};
const char *const stat_state_name[ST_N] = {"huge", "huge_shared", "split", "cow_shared",
                                           "mixed", "partial", "absent", "edge"};

typedef struct {
    int pm_fd, kpf_fd;
    int scan_ok;                 /* PAGEMAP_SCAN usable */
    struct rg_page_region *huge; /* PMD-mapped ranges of the current mapping */
    size_t n_huge, cap_huge;
    struct rg_page_region *mem;  /* present or swapped ranges of the current mapping */
    size_t n_mem, cap_mem, mem_at;
    uint64_t rng;
    uint64_t zero_pfn;           /* PFN of the shared zero page (root), 0 = unknown */
    uint64_t last_hp;            /* last region added to the sums (regions can span mappings) */
    int have_last;
} rg_ctx_t;

static uint64_t rg_rand(rg_ctx_t *c) {   /* xorshift64 */
    c->rng ^= c->rng << 13; c->rng ^= c->rng >> 7; c->rng ^= c->rng << 17;
    return c->rng;
}

static int rg_pread_all(int fd, void *buf, size_t bytes, off_t off) {
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = pread(fd, (char *)buf + got, bytes - got, off + (off_t)got);
        if (n < 0) { if (errno == EINTR) continue; return -errno; }
        if (n == 0) return -EIO;
        got += (size_t)n;
    }
    return 0;
}

/* Collects the ranges of [start, end) whose pages have every category in
 * mask and one in anyof (when non-zero) into *vec (grown as needed). */
static int rg_scan(rg_ctx_t *c, uint64_t start, uint64_t end, uint64_t mask, uint64_t anyof,
                   struct rg_page_region **vec, size_t *n_out, size_t *cap) {
    *n_out = 0;
    uint64_t at = start;
    while (at < end) {
        if (*n_out + 64 > *cap) {
            size_t grow = *cap ? *cap * 2 : 256;
            struct rg_page_region *g = realloc(*vec, grow * sizeof *g);
            if (!g) return -ENOMEM;
            *vec = g;
            *cap = grow;
        }
        struct rg_scan_arg a = {.size = sizeof a, .start = at, .end = end,
                                .vec = (uint64_t)(uintptr_t)(*vec + *n_out), .vec_len = *cap - *n_out,
                                .category_mask = mask, .category_anyof_mask = anyof,
                                .return_mask = mask | anyof};
        long n = ioctl(c->pm_fd, RG_PAGEMAP_SCAN, &a);
        if (n < 0) return -errno;
        *n_out += (size_t)n;
        if (a.walk_end <= at || a.walk_end >= end) break;
        at = a.walk_end;
    }
    return 0;
}

/* True when some page of [lo, hi) is present or swapped (regions are asked
 * in ascending order; c->mem_at is the cursor). */
static int rg_has_memory(rg_ctx_t *c, uint64_t lo, uint64_t hi) {
    while (c->mem_at < c->n_mem && c->mem[c->mem_at].end <= lo) c->mem_at++;
    return c->mem_at < c->n_mem && c->mem[c->mem_at].start < hi;
}

static int rg_is_pmd_huge(const rg_ctx_t *c, uint64_t hp) {
    for (size_t i = 0; i < c->n_huge; i++)
        if (c->huge[i].start <= hp && c->huge[i].end >= hp + STAT_HP_BYTES) return 1;
    return 0;
}

/* Root: reads kpageflags of the present pages in runs of consecutive
 * PFNs (a frame alone cannot belong to a PMD-sized THP, so runs of one are
 * skipped: that keeps 4 KiB-mapped memory cheap), counting THP frames;
 * zero pages are recognised by their PFN. Returns 1 when the region looks
 * like one PMD-sized THP (used when PAGEMAP_SCAN is missing). */
static int rg_kpageflags(rg_ctx_t *c, const uint64_t *pm, int n, stat_region_t *g) {
    uint64_t flags[STAT_PAGES_PER_HP];
    int contiguous = n == STAT_PAGES_PER_HP;
    for (int i = 0; i < n;) {
        uint64_t pfn = pm[i] & PM_PFN_MASK;
        if (!(pm[i] & PM_PRESENT) || !pfn) { contiguous = 0; i++; continue; }
        if (c->zero_pfn && pfn == c->zero_pfn) g->zero_pages++;
        int j = i + 1;
        while (j < n && (pm[j] & PM_PRESENT) && (pm[j] & PM_PFN_MASK) == (pm[j - 1] & PM_PFN_MASK) + 1) j++;
        if (i != 0 || j != n) contiguous = 0;
        if (j - i >= 2 && rg_pread_all(c->kpf_fd, flags, (size_t)(j - i) * 8, (off_t)(pfn * 8)) == 0) {
            for (int k = 0; k < j - i; k++) {
                g->thp_pages += (flags[k] >> KPF_THP_BIT) & 1;
                g->zero_pages += (flags[k] >> KPF_ZERO_BIT) & 1;
            }
            if (i == 0 && !((flags[0] >> KPF_HEAD_BIT) & 1)) contiguous = 0;
        } else {
            contiguous = 0;
        }
        i = j;
    }
    return contiguous && g->thp_pages == STAT_PAGES_PER_HP;
}

static uint8_t rg_state(const stat_region_t *g, int clipped) {
    if (g->present == 0) return ST_ABSENT;
    if (g->pmd_huge) return g->shared ? ST_HUGE_SHARED : ST_HUGE;
    if (clipped) return ST_EDGE;
    if (g->present < g->pages) return ST_PARTIAL;
    if (g->shared && g->exclusive) return ST_MIXED;
    if (g->shared) return ST_SHARED;
    return ST_SPLIT;
}

/* A PMD-mapped region has one entry's worth of information: read the
 * first pagemap entry and (root) the head frame's flags only. */
static int rg_region_pmd(rg_ctx_t *c, uint64_t hp, stat_region_t *g) {
    uint64_t e, flags;
    int err = rg_pread_all(c->pm_fd, &e, 8, (off_t)(hp / STAT_PAGE_BYTES * 8));
    if (err) return err;
    g->present = STAT_PAGES_PER_HP;
    if (e & PM_EXCLUSIVE) g->exclusive = STAT_PAGES_PER_HP; else g->shared = STAT_PAGES_PER_HP;
    g->pmd_huge = 1;
    uint64_t pfn = e & PM_PFN_MASK;
    if (c->kpf_fd >= 0 && pfn && rg_pread_all(c->kpf_fd, &flags, 8, (off_t)(pfn * 8)) == 0) {
        if ((flags >> KPF_THP_BIT) & 1) g->thp_pages = STAT_PAGES_PER_HP;
        if ((flags >> KPF_ZERO_BIT) & 1) g->zero_pages = STAT_PAGES_PER_HP;   /* the huge zero page */
    }
    g->state = rg_state(g, 0);
    return 0;
}

/* Classifies one region [lo, hi) (inside hp .. hp+2MiB). */
static int rg_region(rg_ctx_t *c, uint64_t hp, uint64_t lo, uint64_t hi, stat_region_t *g) {
    uint64_t pm[STAT_PAGES_PER_HP];
    int n = (int)((hi - lo) / STAT_PAGE_BYTES);
    memset(g, 0, sizeof *g);
    g->addr = hp;
    g->pages = (uint16_t)n;
    int clipped = n != STAT_PAGES_PER_HP;
    if (!clipped && c->scan_ok && rg_is_pmd_huge(c, hp)) return rg_region_pmd(c, hp, g);
    if (c->scan_ok && !rg_has_memory(c, lo, hi)) {   /* nothing there: no need to read */
        g->state = rg_state(g, clipped);
        return 0;
    }
    int err = rg_pread_all(c->pm_fd, pm, (size_t)n * 8, (off_t)(lo / STAT_PAGE_BYTES * 8));
    if (err) return err;
    for (int i = 0; i < n; i++) {
        if (pm[i] & PM_PRESENT) {
            g->present++;
            if (pm[i] & PM_EXCLUSIVE) g->exclusive++; else g->shared++;
        } else if (pm[i] & PM_SWAPPED) {
            g->swapped++;
        }
    }
    int contiguous_thp = 0;
    if (c->kpf_fd >= 0 && g->present) contiguous_thp = rg_kpageflags(c, pm, n, g);
    if (!clipped && g->present == STAT_PAGES_PER_HP && !c->scan_ok) g->pmd_huge = (uint8_t)contiguous_thp;
    g->state = rg_state(g, clipped);
    return 0;
}

/* The PFN of the shared zero page, learnt by reading an untouched page of
 * our own (root only; 0 when unknown). */
static uint64_t rg_zero_pfn(void) {
    volatile char *p = mmap(NULL, STAT_PAGE_BYTES, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    (void)p[0];
    uint64_t e = 0;
    int fd = hpm_proc_pagemap_open(0);
    if (fd >= 0) {
        if (hpm_proc_pagemap_read(fd, (uintptr_t)p, 1, &e) != 0) e = 0;
        close(fd);
    }
    munmap((void *)p, STAT_PAGE_BYTES);
    return (e & PM_PRESENT) ? e & PM_PFN_MASK : 0;
}

static void rg_add(stat_region_sum_t *s, stat_mapping_t *m, const stat_region_t *g) {
    m->state_count[g->state]++;
    m->n_scanned++;
    if (!s) return;   /* already counted through a previous mapping */
    s->pages_present += g->present;
    s->pages_exclusive += g->exclusive;
    s->pages_shared += g->shared;
    s->pages_swapped += g->swapped;
    s->pages_thp += g->thp_pages;
    s->pages_zero += g->zero_pages;
    s->pages_pmd += g->pmd_huge ? g->pages : 0;
    s->state_count[g->state]++;
    s->regions_scanned++;
}

/* True when anonymous mappings cover [lo, hi) without a gap, starting the
 * search at mapping i (a region may span several VMAs, e.g. after madvise
 * changed the flags of part of it). */
static int rg_covered(const stat_report_t *r, int i, uint64_t lo, uint64_t hi) {
    int j = i;
    while (r->maps[j].start > lo && j > 0 && r->maps[j - 1].end == r->maps[j].start && r->maps[j - 1].anon) j--;
    if (r->maps[j].start > lo) return 0;
    j = i;
    while (r->maps[j].end < hi && j + 1 < r->n_maps && r->maps[j + 1].start == r->maps[j].end && r->maps[j + 1].anon) j++;
    return r->maps[j].end >= hi;
}

/* PAGEMAP_SCAN over the mapping: where it is PMD-mapped, and where memory
 * is present or swapped. Turns scan_ok off where the kernel lacks it. */
static int rg_scan_mapping(rg_ctx_t *c, const stat_mapping_t *m, uint64_t first) {
    if (!c->scan_ok) return 0;
    int err = rg_scan(c, m->start, m->end, RG_PAGE_IS_HUGE | RG_PAGE_IS_PRESENT, 0, &c->huge, &c->n_huge,
                      &c->cap_huge);
    if (!err)
        err = rg_scan(c, first, first + (uint64_t)m->n_regions * STAT_HP_BYTES, 0,
                      RG_PAGE_IS_PRESENT | RG_PAGE_IS_SWAPPED, &c->mem, &c->n_mem, &c->cap_mem);
    c->mem_at = 0;
    if (err == -ENOTTY || err == -EINVAL || err == -EOPNOTSUPP) c->scan_ok = 0;
    else if (err) return err;
    return 0;
}

static int rg_mapping(rg_ctx_t *c, stat_report_t *r, int mi, const stat_opts_t *o) {
    stat_mapping_t *m = &r->maps[mi];
    uint64_t first = m->start & ~(STAT_HP_BYTES - 1);
    m->n_regions = (uint32_t)((m->end - first + STAT_HP_BYTES - 1) / STAT_HP_BYTES);
    m->map = malloc(m->n_regions + 1);
    if (o->detail) m->regions = calloc(m->n_regions, sizeof *m->regions);
    if (!m->map || (o->detail && !m->regions)) return -ENOMEM;
    int err = rg_scan_mapping(c, m, first);
    if (err) return err;
    for (uint32_t i = 0; i < m->n_regions; i++) {
        uint64_t hp = first + (uint64_t)i * STAT_HP_BYTES;
        uint64_t lo = hp < m->start ? m->start : hp;
        uint64_t hi = hp + STAT_HP_BYTES > m->end ? m->end : hp + STAT_HP_BYTES;
        if ((lo != hp || hi != hp + STAT_HP_BYTES) && rg_covered(r, mi, hp, hp + STAT_HP_BYTES)) {
            lo = hp;   /* the region continues in neighbouring anonymous mappings */
            hi = hp + STAT_HP_BYTES;
        }
        int counted = c->have_last && c->last_hp == hp;
        if (!counted) r->rsum.regions++;
        c->last_hp = hp;
        c->have_last = 1;
        if (o->sample_pct < 100 && (double)(rg_rand(c) % 10000) >= o->sample_pct * 100) {
            m->map[i] = '?';
            continue;
        }
        stat_region_t g;
        if ((err = rg_region(c, hp, lo, hi, &g)) != 0) return err;
        rg_add(counted ? NULL : &r->rsum, m, &g);
        m->map[i] = stat_state_char[g.state];
        if (m->regions) m->regions[i] = g;
    }
    m->map[m->n_regions] = 0;
    return 0;
}

int stat_scan_regions(stat_report_t *r, const stat_opts_t *o) {
    rg_ctx_t c = {.pm_fd = hpm_proc_pagemap_open(r->pid), .kpf_fd = -1, .scan_ok = 1,
                  .rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)r->pid};
    if (c.pm_fd < 0) return c.pm_fd;
    memset(&r->rsum, 0, sizeof r->rsum);
    if (r->is_root) {
        c.kpf_fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
        c.zero_pfn = rg_zero_pfn();
    }
    r->kpageflags = c.kpf_fd >= 0;
    if (!r->is_root)
        stat_note_missing(r, "frame numbers and /proc/kpageflags need root (CAP_SYS_ADMIN): "
                             "THP membership of 4 KiB-mapped pages and zero pages are not counted");
    else if (c.kpf_fd < 0)
        stat_note_missing(r, "cannot open /proc/kpageflags: %s", strerror(errno));
    int err = 0;
    for (int i = 0; i < r->n_maps && !err; i++) {
        stat_mapping_t *m = &r->maps[i];
        /* reserved, inaccessible space (---p) holds no memory: not scanned */
        if (m->anon && m->end > m->start && strncmp(m->perms, "---", 3)) err = rg_mapping(&c, r, i, o);
    }
    r->pagemap_scan = c.scan_ok;
    if (!c.scan_ok && !r->is_root)
        stat_note_missing(r, "this kernel lacks the PAGEMAP_SCAN ioctl (Linux 6.7+) and we are not root: "
                             "PMD-mapped huge pages cannot be told from split ones per region");
    free(c.huge);
    free(c.mem);
    close(c.pm_fd);
    if (c.kpf_fd >= 0) close(c.kpf_fd);
    return err;
}
