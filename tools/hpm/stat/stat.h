/* stat.h: the pieces of `hpm stat` and what they share. A report is built
 * in steps, each in its own file: the mappings and their counters from
 * /proc/PID/smaps (stat_maps.c), the state of every 2 MiB region from
 * /proc/PID/pagemap and /proc/kpageflags (stat_regions.c), hot/cold memory
 * from clear_refs + Referenced (stat_hot.c), the counters an hpmalloc
 * process publishes (stat_alloc.c), and the printers (stat_print.c).
 * stat.c parses the command line and drives the rounds; colour_probe.c is
 * `hpm stat --colours`. Sizes are bytes unless the name says _pages/_hp. */
#ifndef HPM_STAT_H
#define HPM_STAT_H
#include <stdint.h>
#include <stdio.h>
#include "hpmalloc.h"

#define STAT_HP_BYTES (2ul << 20)
#define STAT_PAGE_BYTES 4096ul
#define STAT_PAGES_PER_HP 512
#define STAT_HOT_CLASSES 5
#define STAT_MAX_ROUNDS 64
#define STAT_MISSING_MAX 8
#define STAT_COST_BUDGET 0.018  /* auto interval: at most 1.8% of one core */

/* Region states, one character each in the map. */
enum {
    ST_HUGE,        /* 'H' PMD-mapped huge page, not shared */
    ST_HUGE_SHARED, /* 'h' PMD-mapped huge page still CoW-shared after fork */
    ST_SPLIT,       /* 's' every page present, 4 KiB mappings, exclusive */
    ST_SHARED,      /* 'c' present 4 KiB pages, all CoW-shared */
    ST_MIXED,       /* 'm' some pages copied (exclusive), some still shared */
    ST_PARTIAL,     /* 'p' some pages present, some not */
    ST_ABSENT,      /* '.' nothing present */
    ST_EDGE,        /* 'e' region cut by the mapping's ends (cannot be huge) */
    ST_N
};
extern const char stat_state_char[ST_N];
extern const char *const stat_state_name[ST_N];

/* One 2 MiB region (clipped to its mapping), for --detail. */
typedef struct {
    uint64_t addr;           /* 2 MiB-aligned start (may lie before the mapping) */
    uint16_t pages, present, exclusive, shared, swapped;
    uint16_t thp_pages;      /* present pages that are part of a THP (root) */
    uint16_t zero_pages;     /* present pages mapping the zero page (root) */
    uint8_t pmd_huge;        /* 1 when PMD-mapped */
    uint8_t state;
} stat_region_t;

typedef struct {
    uint64_t start, end;
    char perms[8];
    char name[160];
    uint64_t size_bytes, rss_bytes, anon_bytes, thp_bytes, ref_bytes, swap_bytes;
    int anon;                /* 1 for anonymous memory (no file, or heap/stack) */
    /* regions (filled by stat_regions.c, only for anonymous mappings) */
    uint32_t state_count[ST_N];
    uint32_t n_regions, n_scanned;
    char *map;               /* one char per region ('?' = not sampled); malloc'd */
    stat_region_t *regions;  /* n_regions entries when --detail; malloc'd */
    /* hot/cold (stat_hot.c) */
    double ref_frac[STAT_MAX_ROUNDS];  /* Referenced/Rss per interval */
    int n_rounds;
    double class_bytes[STAT_HOT_CLASSES];
} stat_mapping_t;

typedef struct {
    uint64_t pages_present, pages_exclusive, pages_shared, pages_swapped;
    uint64_t pages_thp, pages_zero, pages_pmd;
    uint32_t state_count[ST_N];
    uint32_t regions, regions_scanned;
} stat_region_sum_t;

typedef struct {
    int pid;
    char comm[64];
    int is_root;             /* effective uid 0: PFNs and kpageflags visible */
    int pagemap_scan;        /* PAGEMAP_SCAN ioctl worked (PMD mapping visible) */
    int kpageflags;          /* /proc/kpageflags readable */
    stat_mapping_t *maps;
    int n_maps;
    uint64_t anon_bytes, thp_bytes;          /* sums over smaps */
    uint64_t rollup_anon, rollup_thp;        /* smaps_rollup, for comparison */
    stat_region_sum_t rsum;
    /* hot/cold */
    int rounds;                              /* intervals measured */
    int rounds_wanted;                       /* intervals asked for (--rounds) */
    int exited;                              /* the process exited during the hot/cold rounds:
                                                hot/cold is incomplete, the rest was measured */
    double interval_s;
    double class_bytes[STAT_HOT_CLASSES];
    double wpd;                              /* -1 when not measured */
    /* hpmalloc counters */
    int has_alloc;
    hpm_stats_t alloc;
    char alloc_how[96];                      /* how they were read, or why not */
    /* cost of this hpm stat */
    double cost_cpu_s, cost_wall_s;
    double sample_pct;
    char missing[STAT_MISSING_MAX][200];     /* what we could not see, and why */
    int n_missing;
} stat_report_t;

typedef struct {
    int json, detail, colours;
    int prometheus;          /* Prometheus text format (stat_prom.c) */
    const char *textfile_dir; /* write DIR/hpm_stat_PID.prom atomically instead of stdout */
    double interval_s;       /* hot/cold interval */
    int interval_auto;       /* no --interval: raise it to keep the cost within budget */
    int rounds;              /* hot/cold intervals per report (0 = skip) */
    double sample_pct;       /* percentage of 2 MiB regions scanned */
    double watch_s;          /* 0 = one report */
    int count;               /* reports in watch mode, 0 = until the process exits */
    int top;                 /* mappings shown with a map */
} stat_opts_t;

/* stat_maps.c */
int stat_read_smaps(int pid, stat_mapping_t **out, int *n_out);   /* 0, or -errno */
int stat_read_maps(stat_report_t *r);                /* 0, or -errno */
int stat_read_rollup(stat_report_t *r);              /* 0, or -errno */
void stat_free_maps(stat_report_t *r);
void stat_note_missing(stat_report_t *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int stat_process_alive(int pid);
int stat_process_kthread(int pid);                   /* 1 for a kernel thread (no user memory) */
/* stat_regions.c */
int stat_scan_regions(stat_report_t *r, const stat_opts_t *o);   /* 0, or -errno */
/* stat_hot.c */
int stat_clear_refs(int pid);                        /* 0, or -errno */
int stat_hot_round(stat_report_t *r);                /* reads Referenced; 0 or -errno */
void stat_hot_classify(stat_report_t *r);
extern const char *const stat_hot_name[STAT_HOT_CLASSES];
extern const double stat_hot_weight[STAT_HOT_CLASSES];
/* stat_alloc.c */
int stat_read_alloc(stat_report_t *r);               /* 1 found, 0 not an hpmalloc process */
/* stat_print.c */
void stat_print_text(FILE *f, const stat_report_t *r, const stat_opts_t *o);
void stat_print_json(FILE *f, const stat_report_t *r, const stat_opts_t *o);
/* stat_prom.c */
void stat_print_prom(FILE *f, const stat_report_t *r);
int stat_write_textfile(const char *dir, const stat_report_t *r);   /* 0, or -errno */
/* colour_probe.c */
int hpm_colour_probe(int json) __attribute__((weak));   /* weak: the command builds without it */
#endif
