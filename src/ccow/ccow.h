/* ccow.h: CCoW's internal types, shared by its files.
 *
 * Glossary:
 *   region     one 2 MiB heap hugepage that held live data at the fork.
 *   coverage   share of a region's present pages that are exclusively
 *              mapped (pagemap bit 56), i.e. no longer shared with a child.
 *   pre-copy   making the whole region private and PMD-mapped at once
 *              (mechanisms: swap, collapse, prefault; see ccow_copy.c).
 *   period     the time from a fork until tracking ends (every region
 *              private again, or nothing changed for a quiet while).
 *
 * Files, lowest layer first: ccow_os.c (system calls), ccow_policy.c (pure
 * decisions: mode strings, thresholds, throttle, adaptive T), ccow_scan.c
 * (pagemap reading), ccow_copy.c (mechanisms, spares, the fork guard),
 * ccow.c (atfork handlers, background thread, stats, public API). */
#ifndef HPM_CCOW_H
#define HPM_CCOW_H
#include <stdbool.h>
#include <stdint.h>
#include "hooks.h"
#include "ccow/ccow_os.h"

/* HPM_OPT_CCOW values (hpmalloc.h). */
#define CCOW_OPT_OFF (-1)
#define CCOW_OPT_ALL 101
#define CCOW_OPT_ADAPTIVE 102
#define CCOW_OPT_HISTORY 103

typedef enum { CCOW_MECH_SWAP = 0, CCOW_MECH_COLLAPSE, CCOW_MECH_PREFAULT, CCOW_MECH_N } ccow_mech_t;

typedef struct {
    long opt;                 /* -1 off, 1..100 T, 101 all, 102 adaptive, 103 history */
    long rate_mib_s;          /* 0 = unthrottled */
} ccow_mode_t;

/* ---- ccow_policy.c (pure) ---- */
/* "off" | "all" | "adaptive" | "1".."100" -> option value; -1 on bad input
 * returns false. */
bool _hpm_ccow_parse_mode(const char *s, long *opt_out);
/* Writes the ccow_state text for a mode ("off", "T=80", "all", ...). */
void _hpm_ccow_mode_name(const ccow_mode_t *m, uint32_t t_pct, char *buf, size_t len);
const char *_hpm_ccow_mech_name(ccow_mech_t m);
bool _hpm_ccow_parse_mech(const char *s, ccow_mech_t *out);
/* Does a region with excl of present pages get pre-copied now? */
bool _hpm_ccow_should_precopy(long opt, uint32_t t_pct, uint32_t excl_pages, uint32_t present_pages);

/* Token bucket for the throttle: rate 0 = unlimited. */
typedef struct {
    double tokens_bytes;
    double burst_bytes;
    uint64_t last_ns;
} ccow_bucket_t;
void _hpm_ccow_bucket_init(ccow_bucket_t *b, long rate_mib_s, uint64_t now_ns);
/* ns to wait before `bytes` may be spent (0: spend now, tokens taken). */
uint64_t _hpm_ccow_bucket_take(ccow_bucket_t *b, long rate_mib_s, double bytes, uint64_t now_ns);

/* Adaptive threshold: control regions (never pre-copied) report the
 * coverage they had when they crossed T and their final coverage. */
typedef struct {
    double useful_pct_sum;    /* sum of (final - at_cross): writes a pre-copy at T would have absorbed */
    double wasted_pct_sum;    /* sum of (100 - final): pages a pre-copy at T would have copied for nothing */
    uint32_t n_crossed;
} ccow_adapt_t;
void _hpm_ccow_adapt_note(ccow_adapt_t *a, uint32_t at_cross_pct, uint32_t final_pct);
/* New T from last period's observations (T +-5 within [30, 95]). */
uint32_t _hpm_ccow_adapt_next(const ccow_adapt_t *a, uint32_t t_pct);
/* Share (0..1) of pre-copied shared pages estimated to have been written
 * anyway; 1 when nothing was observed. */
double _hpm_ccow_adapt_useful_share(const ccow_adapt_t *a);

/* History (mode "history"): per region, the share of its present pages
 * written while the last children lived, smoothed over fork periods.
 * A region whose share is at least CCOW_HISTORY_DENSE_PCT is pre-copied at
 * the next fork, densest first; the rest is left to plain CoW. */
#define CCOW_HISTORY_DENSE_PCT 50
typedef struct {
    uintptr_t addr;           /* region start; 0 = empty slot */
    uint8_t written_pct;      /* smoothed written share */
    uint8_t periods;          /* periods observed, saturating */
} ccow_hist_t;
/* New smoothed share after a period: observed_pct is the written share
 * seen in this period, or -1 when the region was pre-copied (then nothing
 * could be seen, and the share decays by an eighth so that a region that
 * cooled down is measured again after a few periods). */
uint8_t _hpm_ccow_history_next(const ccow_hist_t *h, int observed_pct);
bool _hpm_ccow_history_dense(const ccow_hist_t *h);
/* Open-addressing table of cap_slots (a power of two) entries: the entry
 * for addr, inserted if absent; NULL when the table is full. */
ccow_hist_t *_hpm_ccow_history_slot(ccow_hist_t *table, size_t cap_slots, uintptr_t addr);

/* ---- ccow.c ---- */
/* Chooses the pre-copy mechanism (HPM_CCOW_MECH at start); for tests. */
void _hpm_ccow_set_mech(ccow_mech_t m);

/* ---- ccow_scan.c ---- */
typedef struct {
    uint16_t present_pages;
    uint16_t excl_pages;
    bool huge;                /* 512 exclusive pages on one aligned 2 MiB frame run */
} ccow_scan_t;
/* Reads the region's 512 pagemap entries; 0 or errno. */
int _hpm_ccow_scan_region(uintptr_t region, ccow_scan_t *out);
/* Probes that pagemap works and bit 56 means something: 0 or errno. */
int _hpm_ccow_scan_probe(void);

/* ---- ccow_copy.c ---- */
/* Pre-copies one region with `mech`; falls back to collapse when the swap
 * cannot be used. Returns 0, or an errno (the region is then unchanged or
 * partly private, never inconsistent). *shared_before receives the pages
 * that were still shared when the copy started. */
int _hpm_ccow_precopy(uintptr_t region, ccow_mech_t mech, uint32_t *shared_before);
/* Collapses an already-private, split region back into one huge page. */
int _hpm_ccow_repair(uintptr_t region);
/* Keeps `n` warm spares ready (swap mechanism); cheap when already full. */
void _hpm_ccow_spares_fill(unsigned n);
/* atfork: the guard keeps a fork out of the middle of a swap. */
void _hpm_ccow_guard_lock(void);
void _hpm_ccow_guard_unlock(void);
void _hpm_ccow_copy_after_fork_child(void);
#endif
