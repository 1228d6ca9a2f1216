/* hpmalloc.h: the one public header of hpmalloc, a huge-page-aware malloc.
 *
 * Every heap byte lives in a 2 MiB-aligned hugepage; metadata lives out of
 * band. Besides the standard allocation functions (which the shared library
 * also exports under their libc names), this header offers range queries
 * (hpm_range), counters (hpm_stats_get/print), explicit release (hpm_trim),
 * runtime options, post-fork CCoW control and page colouring.
 *
 * Units are in the names: _bytes, _pages (4 KiB), _hp (2 MiB hugepages). */
#ifndef HPMALLOC_H
#define HPMALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HPM_VERSION "0.1.0"

/* ---- allocation (same contracts as the C/POSIX functions) ---- */
void *hpm_malloc(size_t size);
void *hpm_calloc(size_t count, size_t size);
void *hpm_realloc(void *p, size_t size);
void *hpm_reallocarray(void *p, size_t count, size_t size);
void hpm_free(void *p);
void hpm_free_sized(void *p, size_t size);
void hpm_free_aligned_sized(void *p, size_t alignment, size_t size);
void *hpm_aligned_alloc(size_t alignment, size_t size);
void *hpm_memalign(size_t alignment, size_t size);
int hpm_posix_memalign(void **out, size_t alignment, size_t size);
size_t hpm_usable_size(const void *p);

/* From any address inside a live allocation (interior pointers included),
 * give its base and usable size in O(1). Returns false for anything else:
 * a pointer outside the heap, a free block, or NULL. base/size may be NULL.
 * Safe from any thread at any time, also while other threads allocate and
 * free; a query that races with the free of the same allocation gets
 * either answer. For a small block it reads the block's second word (its
 * free mark), so a query of a block that another thread is writing at
 * that moment is a data race on that word, as any read of it would be. */
bool hpm_range(const void *p, void **base, size_t *size);

/* ---- counters ---- */
typedef struct hpm_stats_s {
    uint64_t magic;                /* HPM_STATS_MAGIC once published */
    uint32_t version;              /* HPM_STATS_VERSION */
    int32_t pid;                   /* process that owns these counters */
    uint64_t arena_base;           /* address range of the hugepage heap */
    uint64_t arena_reserved_bytes;
    uint64_t bytes_in_use;         /* usable bytes of live allocations */
    uint64_t bytes_mapped;         /* committed heap bytes (all hugepages ever committed, minus unmapped) */
    uint64_t bytes_metadata;       /* committed out-of-band metadata */
    uint64_t hp_backed;            /* hugepages holding data or cached (backed by memory) */
    uint64_t hp_in_use;            /* hugepages with at least one live page */
    uint64_t hp_cached;            /* empty hugepages kept backed for reuse */
    uint64_t hp_released;          /* cumulative whole-hugepage releases */
    uint64_t hp_hybrid;            /* hugepages mixing small-object slabs and large spans */
    uint64_t hp_hugetlb;           /* hugepages backed by the hugetlbfs pool */
    uint64_t hp_fallback;          /* hugetlb/1g requests that fell back to THP */
    uint64_t pages_subreleased;    /* 4 KiB pages currently given back inside partial hugepages */
    uint64_t large_allocs;         /* cumulative allocations of whole hugepages */
    uint64_t thp_anon_bytes;       /* AnonHugePages of the process (smaps_rollup), filled by hpm_stats_get */
    uint64_t anon_bytes;           /* Anonymous of the process (smaps_rollup) */
    char page_mode[16];            /* thp, hugetlb, 1g, off */
    char thp_system[16];           /* system THP mode: always, madvise, never, unknown */
    /* CCoW (post-fork pre-copy) */
    uint64_t ccow_forks;
    uint64_t ccow_regions_precopied;
    uint64_t ccow_bytes_precopied;
    uint64_t ccow_faults_avoided;  /* estimated CoW faults avoided */
    uint64_t ccow_recover_us;      /* fork -> heap back to >= 90% huge, last fork; 0 = not yet */
    uint32_t ccow_threshold_pct;   /* current T (adaptive mode changes it) */
    uint32_t ccow_active;          /* 1 while tracking a fork period */
    char ccow_state[32];           /* off, T=80, all, adaptive, disabled: <reason> */
    uint64_t reserved[16];
} hpm_stats_t;

#define HPM_STATS_MAGIC 0x68706d7374617431ull /* "hpmstat1" */
#define HPM_STATS_VERSION 1u

void hpm_stats_get(hpm_stats_t *out);
typedef void hpm_output_fn(const char *line, void *arg);
/* Prints the counters one line at a time through out (stderr when NULL). */
void hpm_stats_print(hpm_output_fn *out, void *arg);

/* Gives memory back now: every cached empty hugepage (whole), the calling
 * thread's empty slabs, every thread's cached medium spans and kept empty
 * slabs, and - subrelease, which splits the hugepages it
 * touches - free 4 KiB pages of partial hugepages (emptiest first, until
 * free-but-backed pages are at most 1/16 of used ones) and pages of the
 * calling thread's slabs that hold only free blocks. malloc_trim(0) does
 * the same, with subrelease only when HPM_SUBRELEASE=1. Returns the bytes
 * of whole and partial hugepages given back. */
size_t hpm_trim(void);

/* ---- options (environment HPM_<NAME>, read once at start) ---- */
typedef enum hpm_option_e {
    HPM_OPT_PAGES = 0,          /* 0 thp, 1 hugetlb, 2 1g, 3 off           (HPM_PAGES) */
    HPM_OPT_SUBRELEASE,         /* 0/1                                       (HPM_SUBRELEASE) */
    HPM_OPT_RELEASE_DELAY_MS,   /* demand window before an empty hugepage is released (HPM_RELEASE_DELAY) */
    HPM_OPT_HP_CACHE,           /* empty hugepages always kept backed        (HPM_HP_CACHE) */
    HPM_OPT_STATS,              /* print stats at exit                       (HPM_STATS) */
    HPM_OPT_CHECK,              /* validate free/realloc pointers            (HPM_CHECK) */
    HPM_OPT_CCOW,               /* -1 off, 1..100 threshold, 101 all, 102 adaptive, 103 history (HPM_CCOW) */
    HPM_OPT_CCOW_RATE,          /* MiB/s, 0 = unthrottled                    (HPM_CCOW_RATE) */
    HPM_OPT_COLORS,             /* default colour mask for new threads, 0 = all (HPM_COLORS) */
    HPM_OPT_COLOR_COUNT,        /* number of page colours                    (HPM_COLOR_COUNT) */
    HPM_OPT_ARENA_RESERVE,      /* bytes of address space reserved for the heap (HPM_ARENA_RESERVE) */
    HPM_OPT_BACKGROUND,         /* 0/1: a background thread releases on time (HPM_BACKGROUND) */
    HPM_OPT_ALIGN16,            /* 0/1: every block 16-aligned, no 24/40/56-byte classes (HPM_ALIGN16); fixed at start */
    HPM_OPT_COUNT
} hpm_option_t;

long hpm_option_get(hpm_option_t option);
/* Returns 0, or -1 with errno EINVAL for an unknown option or bad value. */
int hpm_option_set(hpm_option_t option, long value);

/* ---- CCoW: after fork, pre-copy hot 2 MiB regions of the parent's heap ----
 * mode: "off", "T" as a percentage ("80"), "all", "adaptive".
 * rate_mib_s: throttle of the pre-copy, 0 for none. Returns 0 or -1/EINVAL. */
int hpm_ccow_config(const char *mode, long rate_mib_s);

/* ---- colouring ----
 * A colour is the value of (page index inside a hugepage) mod HPM_COLOR_COUNT.
 * hpm_thread_colors gives the calling thread a colour set (bit i = colour i,
 * 0 = every colour); its new small-object slabs use only such pages.
 * Returns 0, or -1 with errno EINVAL. */
int hpm_thread_colors(uint64_t mask);

/* A virtually contiguous range of size_bytes (rounded up to 4 KiB) built from
 * 4 KiB frames whose physical frame number mod colour_count is in colours
 * (the BPM method). Needs root for pagemap PFNs. The range is zero-filled,
 * like fresh mmap memory, and colour_count is HPM_COLOR_COUNT even on a
 * process's first call (it starts the allocator). On failure returns NULL,
 * sets errno and a reason readable with hpm_colored_map_error(). */
void *hpm_colored_map(size_t size_bytes, uint64_t colours);
/* Gives back a whole range that hpm_colored_map returned (p and the same
 * size_bytes): 0, or -1 with errno EINVAL for anything else, left mapped. */
int hpm_colored_unmap(void *p, size_t size_bytes);
const char *hpm_colored_map_error(void);

#ifdef __cplusplus
}
#endif
#endif /* HPMALLOC_H */
