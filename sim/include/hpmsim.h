/* hpmsim.h: the public API of hpm's physical-memory fragmentation simulator.
 *
 * The simulator models one memory zone of 4 KiB frames as the Linux buddy
 * allocator does: free lists per order (0..10) and per migratetype, 2 MiB
 * pageblocks (order 9) that carry a migratetype label, the Linux 4.5
 * fallback and steal rules, and compaction. Illuminator (ASPLOS 2018) comes
 * in two variants: "illuminator", the rules of its public patch on Linux
 * 4.5, and "illuminator-paper", the paper's description where the two
 * differ (docs/sim.md lists every rule and its source). Frames are identified by
 * number (pfn); an allocation is identified by a handle, because compaction
 * moves movable allocations to other frames.
 *
 * Layers (each uses only those above it in this list): buddy (frames, free
 * lists, pageblock counters), policy (where an allocation comes from),
 * compact (migration and free scanners), sim (handles, RCU deferral,
 * Prudence, huge-page requests), trace/driver (ids, text traces, sampling),
 * workload (fragmenter, server, replay), report (table, CSV, plots).
 * Nothing here depends on the hpmalloc allocator. */
#ifndef HPMSIM_H
#define HPMSIM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SIM_MAX_ORDER 11            /* orders 0..10, as Linux's MAX_ORDER */
#define SIM_PAGEBLOCK_ORDER 9       /* 2 MiB pageblocks of 4 KiB frames */
#define SIM_PAGEBLOCK_PAGES 512u
#define SIM_HUGE_ORDER 9

enum sim_mt { SIM_UNMOVABLE = 0, SIM_RECLAIMABLE = 1, SIM_MOVABLE = 2, SIM_MIXED = 3, SIM_NR_MT = 4 };
enum sim_policy { SIM_LINUX = 0, SIM_ILLUMINATOR = 1, SIM_ILLUMINATOR_PAPER = 2, SIM_NR_POLICIES = 3 };

typedef struct sim sim_t;
typedef uint32_t sim_handle_t;
#define SIM_NO_HANDLE UINT32_MAX

typedef struct {
    uint64_t mem_mib;          /* simulated memory; a multiple of 4 MiB, >= 8 */
    enum sim_policy policy;
    int prudence;              /* 1: reclaim RCU-deferred frames before a kernel fallback */
    uint64_t rcu_grace_ops;    /* grace period of an RCU-deferred free, in operations */
    int mixed_before_full;     /* illuminator (patch): 1 takes the MIXED lists before a whole
                                  free pageblock, as the stored commits 077fe37 and 6d526ae;
                                  0 (default) the later "steal full before using mixed" */
} sim_config_t;

typedef struct {
    uint64_t clock_ops;        /* simulated time: operations applied plus ticks */
    uint64_t allocs, alloc_fails, frees;
    uint64_t rcu_deferred, rcu_reclaimed, prudence_flushes, prudence_frees;
    uint64_t fallbacks;        /* allocations placed in the other mobility class's free
                                  lists (kernel from MOVABLE, movable from U/R) */
    uint64_t kernel_cross;     /* kernel allocations served by the other kernel type (U<->R) */
    uint64_t mixed_allocs;     /* allocations served from the MIXED lists (Illuminator) */
    uint64_t block_relabels;   /* pageblock label changes */
    uint64_t hp_requests, hp_success, hp_from_free, hp_after_compact;
    uint64_t compact_runs, compact_success, compact_skipped;
    uint64_t kswapd_compactions;
    uint64_t compact_produced_hp; /* free order-9 blocks compaction made (direct, kswapd, whole) */
    uint64_t compact_mig_scanned, compact_free_scanned;
    uint64_t compact_migrated;   /* pages moved by compaction */
    uint64_t compact_failed;     /* isolated pages that could not be moved (no target) */
    uint64_t compact_wasted;     /* moved out of a block that keeps kernel pages (LIU) */
    uint64_t total_pages, free_pages;
    uint32_t nr_blocks;
    uint32_t hybrid_blocks;      /* blocks holding both kernel and movable pages now */
    uint32_t kernel_blocks;      /* blocks holding at least one kernel page now */
    uint32_t label_blocks[SIM_NR_MT];
    uint32_t owner_mixed_blocks; /* page_owner's "mixed": a block holding an allocation whose
                                    type differs from the block's label (U, R and M distinct) */
    uint64_t rcu_pending_pages;  /* frames waiting for their RCU grace period now */
    uint64_t kernel_pages;       /* allocated UNMOVABLE + RECLAIMABLE frames now */
    uint64_t reclaimable_pages;  /* of which RECLAIMABLE */
} sim_stats_t;

typedef struct {
    enum sim_mt label;
    uint32_t free_pages, kernel_pages, movable_pages;
    uint32_t reclaimable_pages;   /* the RECLAIMABLE part of kernel_pages */
} sim_block_info_t;

/* --- the simulator (sim.c) --------------------------------------------- */
sim_t *sim_create(const sim_config_t *cfg, char *err, size_t err_len);
void sim_destroy(sim_t *s);
/* Allocates 2^order frames of type (UNMOVABLE, RECLAIMABLE or MOVABLE); one
 * operation. Returns SIM_NO_HANDLE when no free block can serve it. */
sim_handle_t sim_alloc(sim_t *s, unsigned order, enum sim_mt type);
/* A transparent-huge-page request: order 9 MOVABLE from the free lists,
 * else async direct compaction and one retry. */
sim_handle_t sim_alloc_huge(sim_t *s);
void sim_free(sim_t *s, sim_handle_t h);
/* Frees after the RCU grace period (the frames stay allocated till then). */
void sim_free_rcu(sim_t *s, sim_handle_t h);
void sim_advance(sim_t *s, uint64_t ops);
/* Whole-zone synchronous compaction (as /proc/sys/vm/compact_memory). */
void sim_compact_all(sim_t *s);
/* kswapd's background compaction for order 9 (async, compact_pgdat). */
void sim_compact_kswapd(sim_t *s);
uint32_t sim_handle_pfn(const sim_t *s, sim_handle_t h);
void sim_get_stats(const sim_t *s, sim_stats_t *st);
uint64_t sim_now(const sim_t *s);          /* the clock, in operations */
uint64_t sim_free_pages(const sim_t *s);
/* Linux 4.5's zone watermarks for this memory size, in pages. */
void sim_watermarks(const sim_t *s, uint64_t *min_pages, uint64_t *low_pages, uint64_t *high_pages);
void sim_block_info(const sim_t *s, uint32_t block, sim_block_info_t *out);
uint64_t sim_nr_free(const sim_t *s, unsigned order, enum sim_mt type);
/* Full recount of every invariant; 0 when all hold, else -1 and a message. */
int sim_check(const sim_t *s, char *err, size_t err_len);
const char *sim_policy_name(enum sim_policy p);
/* The policy named s ("linux", "illuminator", "illuminator-paper"), or -1. */
int sim_policy_from_name(const char *s);
const char *sim_mt_name(enum sim_mt t);

/* --- operations, traces and the driver (trace.c, driver.c) -------------- */
typedef struct {
    char kind;        /* 'a' alloc, 'f' free, 'r' RCU free, 'h' huge, 'c' compact, 'k' kswapd compact, 't' tick */
    uint8_t order;
    uint8_t type;     /* enum sim_mt for 'a' */
    uint32_t id;      /* for a f r h */
    uint64_t n;       /* for t */
} sim_op_t;

#define SIM_ID_MAX 0xfffffffeu
/* Parses one trace line. Returns 1 for an op, 0 for a blank or comment line,
 * -1 for a malformed line (with the reason in err). */
int sim_trace_parse_line(const char *line, sim_op_t *op, char *err, size_t err_len);
void sim_trace_write_op(FILE *f, const sim_op_t *op);

typedef struct {
    uint64_t t_ops;
    uint32_t hybrid_blocks, kernel_blocks, owner_mixed_blocks, pad;
    uint64_t free_pages;
    uint64_t hp_requests, hp_success;
    uint64_t compact_scanned, compact_migrated, compact_failed, compact_wasted;
} sim_sample_t;

typedef struct {
    sim_sample_t *v;
    size_t n, cap;
} sim_series_t;

typedef struct sim_driver sim_driver_t;
sim_driver_t *sim_driver_create(sim_t *s, uint64_t sample_every_ops, FILE *record);
void sim_driver_destroy(sim_driver_t *d);
/* Applies one op. Returns 1 when it succeeded, 0 when an allocation or
 * huge-page request failed or a free named an unbound id, -1 when the op is
 * invalid here (allocating an id that is live), with err set. For a
 * successful 'a' or 'h', *pfn_out (when not NULL) receives its frame. */
int sim_driver_apply(sim_driver_t *d, const sim_op_t *op, uint32_t *pfn_out, char *err, size_t err_len);
void sim_driver_finish(sim_driver_t *d);  /* takes the closing sample */
const sim_series_t *sim_driver_series(const sim_driver_t *d);
uint64_t sim_driver_skipped_frees(const sim_driver_t *d);
sim_series_t sim_driver_take_series(sim_driver_t *d);

/* --- workloads (workload_*.c) ------------------------------------------ */
typedef struct {
    const char *name;          /* "fragmenter", "server" or "trace" */
    const char *trace_path;
    uint64_t seed;
    uint32_t rounds;           /* fragmenter */
    uint32_t kernel_bp;        /* fragmenter: memory the module allocates a round, in
                                  basis points (1/100 %) of total memory */
    uint32_t keep_per_block;   /* fragmenter: kernel pages kept per pageblock */
    uint32_t cache_fill;       /* fragmenter: 1 to fill the page cache after the rounds */
    uint64_t ops;              /* server: operations to run */
    uint32_t rcu_pct;          /* server: share of unmovable slab frees that are RCU-deferred */
    uint32_t dcache_end_pct;   /* server: dentry/inode cache target at the end, % of memory */
    uint64_t hp_every_ops;     /* server: one huge-page request every N ops */
    uint64_t sample_every_ops; /* 0: choose from the workload size */
} sim_workload_t;

typedef struct {
    enum sim_policy policy;
    int prudence;
    uint64_t mem_mib;
    sim_stats_t stats;
    sim_series_t series;
    uint64_t skipped_frees;
    double wall_s;
} sim_result_t;

/* Runs a workload on a fresh simulator. record: where to write the trace of
 * the ops issued (or NULL). Returns 0, or -1 with a message in err. */
int sim_run_workload(const sim_config_t *cfg, const sim_workload_t *w, FILE *record,
                     sim_result_t *out, char *err, size_t err_len);
void sim_result_free(sim_result_t *r);
/* Validates a trace file: counts its operations and reads the mem_mib= of
 * a recorded trace's header line (left alone when absent). */
int sim_trace_check(const char *path, uint64_t *ops, uint64_t *mem_mib_hint, char *err, size_t err_len);

/* --- report (report.c) -------------------------------------------------- */
void sim_report_table(FILE *f, const sim_result_t *r, int n);
int sim_report_csv(const char *path, const sim_result_t *r, int n, char *err, size_t err_len);
int sim_report_plots(const char *dir, const sim_result_t *r, int n, char *err, size_t err_len);
/* Compaction cost per huge page produced by compaction: (pages scanned +
 * failed + wasted migrations) / free huge blocks compaction produced
 * (compact_produced_hp); -1 when none was produced. */
double sim_cost_per_hp(const sim_stats_t *st);
#endif
