/* ccow.c: CCoW's driver. pthread_atfork handlers notice a fork in the
 * parent; a background thread (started at the first fork that needs it)
 * then tracks every heap hugepage that held live data at the fork: it
 * scans coverage from pagemap, pre-copies regions that reach T (hottest
 * first, throttled by HPM_CCOW_RATE), and when no region is shared any
 * more (the child exited, or everything was copied) collapses regions that
 * CoW left split, so the parent's heap is huge again. Tracking also ends
 * when nothing changed for CCOW_QUIET_NS. Counters go to _hpm_stats.
 * History mode instead pre-copies, at each fork, the regions written
 * densely while the last children lived (a per-region table, see
 * history_choose and history_finish).
 *
 * Invariant: only this thread copies or collapses, one region at a time,
 * under the guards of ccow_copy.c; a new fork restarts the period. When
 * pagemap or the mechanism (MADV_COLLAPSE) is missing, CCoW turns itself
 * off and ccow_state says why. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "ccow/ccow.h"

#define CCOW_QUIET_NS (3000000000ull)
#define CCOW_SCAN_MIN_NS (10000000ull)
#define CCOW_SPARES 16
#define CCOW_CONTROL_EVERY 8        /* adaptive: every 8th region is a control */
#define CCOW_ADAPTIVE_START_T 80
#define CCOW_DEFAULT_OPT CCOW_OPT_OFF   /* with HPM_CCOW unset; docs/ccow.md says why */
#define CCOW_HISTORY_RATE_MIB_S 1024   /* history's pace when HPM_CCOW_RATE is 0 */
#define CCOW_HISTORY_EXTRA_PCT 5       /* history: extra memory a period's pre-copies may cost, % of the heap */

typedef struct {
    uintptr_t addr;
    uint16_t present, excl;
    uint8_t cov_last, cov_cross;   /* percent */
    bool precopied, crossed, control, huge;
    bool settled;                  /* private for good: no need to scan again this period */
    bool observed;                 /* cov_last was seen while the child lived */
    bool copied;                   /* pre-copied successfully this period */
    bool chosen;                   /* history mode: to pre-copy this period */
    ccow_hist_t *hist;             /* history mode: this region's entry */
} ccow_region_t;

static struct {
    _Atomic long opt;
    _Atomic long rate_mib_s;
    ccow_mech_t mech;
    uint32_t t_pct;                /* adaptive mode's current T */
    _Atomic int disabled;
    _Atomic uint32_t fork_gen;     /* futex word: bumped by each fork in the parent */
    _Atomic uint64_t fork_ns;
    atomic_bool thread_started;   /* cleared by the thread itself when it steps aside (no /proc) */
    bool probed;
    uintptr_t *list;
    ccow_region_t *regions;
    size_t cap;
    ccow_adapt_t adapt;
    ccow_hist_t *hist;             /* history mode: per-region written share */
    size_t hist_cap;               /* slots, a power of two */
} S;

static void stat_add(uint64_t *field, uint64_t v) { __atomic_fetch_add(field, v, __ATOMIC_RELAXED); }
static void stat_set(uint64_t *field, uint64_t v) { __atomic_store_n(field, v, __ATOMIC_RELAXED); }

/* Adaptive mode's T: the tracking thread writes it, state_publish reads it
 * from whichever thread changes the mode. */
static uint32_t t_pct_now(void) { return __atomic_load_n(&S.t_pct, __ATOMIC_RELAXED); }

static void state_publish(void) {
    if (!_hpm_stats) return;
    _Alignas(8) char buf[sizeof _hpm_stats->ccow_state];
    if (S.disabled) return;        /* the reason stays */
    ccow_mode_t m = {S.opt, S.rate_mib_s};
    _hpm_ccow_mode_name(&m, t_pct_now(), buf, sizeof buf);
    _hpm_copy_words_relaxed(_hpm_stats->ccow_state, buf, sizeof buf);
    uint32_t t = S.opt == CCOW_OPT_ADAPTIVE ? t_pct_now() : S.opt >= 1 && S.opt <= 100 ? (uint32_t)S.opt : 0;
    __atomic_store_n(&_hpm_stats->ccow_threshold_pct, t, __ATOMIC_RELAXED);
}

static void ccow_disable(const char *what, int err) {
    _Alignas(8) char buf[sizeof _hpm_stats->ccow_state];
    const char *name = err == ENOSYS ? "ENOSYS" : err == EINVAL ? "EINVAL" : err == EPERM ? "EPERM"
                     : err == EACCES ? "EACCES" : err == ENOENT ? "ENOENT" : err == ENOTSUP ? "ENOTSUP" : "error";
    size_t i = 0;
    for (const char *p = "disabled: "; *p && i < sizeof buf - 1; p++) buf[i++] = *p;
    for (const char *p = what; *p && i < sizeof buf - 1; p++) buf[i++] = *p;
    if (i < sizeof buf - 1) buf[i++] = ' ';
    for (const char *p = name; *p && i < sizeof buf - 1; p++) buf[i++] = *p;
    buf[i] = 0;
    S.disabled = 1;
    if (_hpm_stats) {
        _hpm_copy_words_relaxed(_hpm_stats->ccow_state, buf, sizeof buf);
        __atomic_store_n(&_hpm_stats->ccow_active, 0, __ATOMIC_RELAXED);
    }
    _hpm_message("hpmalloc: ccow turned off: %s (errno %d)\n", what, err);
}

/* ---- the tracking period ---- */

static bool period_stale(uint32_t gen) { return atomic_load_explicit(&S.fork_gen, memory_order_acquire) != gen; }

/* Grows the history table to at least 2 x n slots, keeping its entries.
 * Metadata memory is never freed: the old table is simply left behind. */
static bool history_reserve(size_t n) {
    if (S.hist_cap >= 2 * n && S.hist_cap >= 64) return true;
    size_t cap = 64;
    while (cap < 4 * n) cap *= 2;
    ccow_hist_t *t = _hpm_meta_alloc(cap * sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < S.hist_cap; i++) {
        if (!S.hist[i].addr) continue;
        ccow_hist_t *e = _hpm_ccow_history_slot(t, cap, S.hist[i].addr);
        if (e) *e = S.hist[i];
    }
    S.hist = t;
    S.hist_cap = cap;
    return true;
}

static bool regions_load(size_t *n_out) {
    size_t n = _hpm_hp_list_in_use(S.list, S.cap);
    if (n > S.cap) {
        size_t cap = n * 2 + 64;
        uintptr_t *l = _hpm_meta_alloc(cap * sizeof *l);
        ccow_region_t *r = _hpm_meta_alloc(cap * sizeof *r);
        if (!l || !r) return false;
        S.list = l; S.regions = r; S.cap = cap;
        n = _hpm_hp_list_in_use(S.list, S.cap);
        if (n > S.cap) n = S.cap;
    }
    bool history = S.opt == CCOW_OPT_HISTORY && history_reserve(n);
    for (size_t i = 0; i < n; i++) {
        S.regions[i] = (ccow_region_t){.addr = S.list[i]};
        S.regions[i].control = S.opt == CCOW_OPT_ADAPTIVE && ((S.list[i] >> HPM_HP_SHIFT) % CCOW_CONTROL_EVERY) == 0;
        if (history) S.regions[i].hist = _hpm_ccow_history_slot(S.hist, S.hist_cap, S.list[i]);
    }
    *n_out = n;
    return true;
}

/* History mode, at the start of a period: choose the dense regions,
 * densest first, while the pages they would copy that were not written
 * last time (the memory a pre-copy spends beyond plain CoW) stay within
 * CCOW_HISTORY_EXTRA_PCT of the heap's present pages. */
static void history_choose(size_t n, size_t present_pages) {
    double budget = (double)present_pages * CCOW_HISTORY_EXTRA_PCT / 100.0, spent = 0;
    for (int pct = 100; pct >= CCOW_HISTORY_DENSE_PCT; pct--)
        for (size_t i = 0; i < n; i++) {
            ccow_region_t *r = &S.regions[i];
            if (!r->hist || r->hist->written_pct != pct || !_hpm_ccow_history_dense(r->hist)) continue;
            double extra = (double)r->present * (100 - pct) / 100.0;
            if (spent + extra > budget) return;
            spent += extra;
            r->chosen = true;
        }
}

/* History mode, at the end of a period (or when a new fork cut it short):
 * fold what this period showed into each region's written share. */
static void history_finish(size_t n) {
    for (size_t i = 0; i < n; i++) {
        ccow_region_t *r = &S.regions[i];
        if (!r->hist) continue;
        int seen = r->copied ? -1 : r->observed ? r->cov_last : -2;
        if (seen == -2) continue;          /* the child was gone before the first scan */
        r->hist->written_pct = _hpm_ccow_history_next(r->hist, seen);
        if (r->hist->periods < 255) r->hist->periods++;
    }
}

/* huge_pages / present_pages is the heap's huge-page coverage. */
typedef struct { size_t shared_pages, excl_pages, huge_pages, present_pages; } scan_sum_t;

/* Scans every region; commits cov_last only while pages are still shared
 * (the scan that sees the child gone would report 100% everywhere). */
static scan_sum_t scan_all(size_t n, uint32_t t_pct, bool full) {
    scan_sum_t sum = {0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        ccow_region_t *r = &S.regions[i];
        ccow_scan_t s = {r->present, r->excl, r->huge};
        if ((full || !r->settled) && _hpm_ccow_scan_region(r->addr, &s) != 0) {
            s.present_pages = 0; s.excl_pages = 0; s.huge = false;
        }
        r->present = s.present_pages;
        r->excl = s.excl_pages;
        r->huge = s.huge;
        /* A page once exclusive stays so until the next fork. */
        r->settled = s.present_pages == s.excl_pages;
        sum.shared_pages += (size_t)(s.present_pages - s.excl_pages);
        sum.excl_pages += s.excl_pages;
        sum.huge_pages += s.huge ? HPM_PAGES_PER_HP : 0;
        sum.present_pages += s.present_pages;
    }
    if (sum.shared_pages == 0) return sum;
    for (size_t i = 0; i < n; i++) {
        ccow_region_t *r = &S.regions[i];
        r->cov_last = (uint8_t)(r->present ? (uint32_t)r->excl * 100 / r->present : 0);
        r->observed = r->present > 0;
        if (r->control && !r->crossed && r->present && r->cov_last >= t_pct) { r->crossed = true; r->cov_cross = r->cov_last; }
    }
    return sum;
}

/* Sleeps up to ns in short steps; false when a new fork came meanwhile. */
static bool nap(uint64_t ns, uint32_t gen) {
    while (ns > 0) {
        uint64_t step = ns > 2000000 ? 2000000 : ns;
        _hpm_os->sleep_ns(step);
        ns -= step;
        if (period_stale(gen)) return false;
    }
    return true;
}

/* The pre-copy pace: HPM_CCOW_RATE, or history's own when that is 0. */
static long period_rate(void) {
    long rate = S.rate_mib_s;
    return rate == 0 && S.opt == CCOW_OPT_HISTORY ? CCOW_HISTORY_RATE_MIB_S : rate;
}

/* EINVAL also comes back when the heap's VMA changed under a collapse
 * (the core committing or releasing next to it): fatal only when it
 * repeats CCOW_EINVAL_FATAL times with no success in between. */
#define CCOW_EINVAL_FATAL 8
static unsigned einval_run;

static bool fatal_errno(int err) {
    if (err == EINVAL) return ++einval_run >= CCOW_EINVAL_FATAL;
    if (err == 0) einval_run = 0;
    return err == ENOSYS || err == EPERM || err == EACCES;
}

/* Does r get pre-copied in the pass for rank pct? The rank is the
 * region's coverage now, or in history mode its written share last time
 * (only dense, still shared regions). */
static bool region_wanted(const ccow_region_t *r, int pct, uint32_t t_pct) {
    if (S.opt == CCOW_OPT_HISTORY)
        return r->chosen && r->hist->written_pct == (uint8_t)pct && r->excl < r->present;
    uint32_t cov = (uint32_t)r->excl * 100 / r->present;
    return cov == (uint32_t)pct && _hpm_ccow_should_precopy(S.opt, t_pct, r->excl, r->present);
}

/* Pre-copies the candidates of this scan, hottest first. Returns -1 when
 * the period must stop (new fork, or CCoW disabled), else the count. */
static int precopy_round(size_t n, uint32_t gen, uint32_t t_pct, ccow_bucket_t *bucket, double useful_share) {
    int done = 0;
    for (int pct = 100; pct >= 0; pct--) {
        for (size_t i = 0; i < n; i++) {
            ccow_region_t *r = &S.regions[i];
            if (r->precopied || r->control || !r->present) continue;
            if (!region_wanted(r, pct, t_pct)) continue;
            uint64_t wait;
            while ((wait = _hpm_ccow_bucket_take(bucket, period_rate(), (double)HPM_HP_BYTES, _hpm_os->now_ns())) > 0)
                if (!nap(wait, gen)) return -1;
            if (period_stale(gen) || S.disabled || S.opt == CCOW_OPT_OFF) return -1;
            uint32_t shared = 0;
            int err = _hpm_ccow_precopy(r->addr, __atomic_load_n(&S.mech, __ATOMIC_ACQUIRE), &shared);
            if (fatal_errno(err)) { ccow_disable("MADV_COLLAPSE", err); return -1; }
            r->precopied = true;
            if (err) continue;   /* EAGAIN, ENOMEM, ENOENT: skip this region this period */
            r->copied = true;
            done++;
            stat_add(&_hpm_stats->ccow_regions_precopied, 1);
            stat_add(&_hpm_stats->ccow_bytes_precopied, HPM_HP_BYTES);
            stat_add(&_hpm_stats->ccow_faults_avoided, (uint64_t)((double)shared * useful_share + 0.5));
        }
    }
    return done;
}

/* After the child is gone: collapse regions CoW left split. */
static void repair_all(size_t n, uint32_t gen, ccow_bucket_t *bucket) {
    for (size_t i = 0; i < n; i++) {
        ccow_region_t *r = &S.regions[i];
        if (r->huge || r->present != HPM_PAGES_PER_HP || r->excl != HPM_PAGES_PER_HP) continue;
        uint64_t wait;
        while ((wait = _hpm_ccow_bucket_take(bucket, period_rate(), (double)HPM_HP_BYTES, _hpm_os->now_ns())) > 0)
            if (!nap(wait, gen)) return;
        if (period_stale(gen)) return;
        int err = _hpm_ccow_repair(r->addr);
        if (fatal_errno(err)) { ccow_disable("MADV_COLLAPSE", err); return; }
    }
}

static void adapt_finish(size_t n) {
    ccow_adapt_t a = {0, 0, 0};
    for (size_t i = 0; i < n; i++)
        if (S.regions[i].control && S.regions[i].crossed)
            _hpm_ccow_adapt_note(&a, S.regions[i].cov_cross, S.regions[i].cov_last);
    S.adapt = a;
    __atomic_store_n(&S.t_pct, _hpm_ccow_adapt_next(&a, t_pct_now()), __ATOMIC_RELAXED);
    state_publish();
}

static void note_recovery(scan_sum_t s, uint64_t t_fork, bool *recovered) {
    if (*recovered || s.present_pages == 0 || s.huge_pages * 10 < s.present_pages * 9) return;
    *recovered = true;
    stat_set(&_hpm_stats->ccow_recover_us, (_hpm_os->now_ns() - t_fork) / 1000);
}

static void track_period(uint32_t gen, size_t n) {
    uint64_t t_fork = S.fork_ns;
    uint32_t t_pct = S.opt == CCOW_OPT_ADAPTIVE ? t_pct_now() : 0;
    double useful = S.opt == CCOW_OPT_ADAPTIVE ? _hpm_ccow_adapt_useful_share(&S.adapt) : 1.0;
    ccow_bucket_t bucket;
    long rate = period_rate();
    _hpm_ccow_bucket_init(&bucket, rate, _hpm_os->now_ns());
    __atomic_store_n(&_hpm_stats->ccow_active, 1, __ATOMIC_RELAXED);
    stat_set(&_hpm_stats->ccow_recover_us, 0);
    bool recovered = false, first = true;
    size_t last_excl = (size_t)-1;
    uint64_t quiet_since = _hpm_os->now_ns();
    for (;;) {
        if (period_stale(gen) || S.disabled || S.opt == CCOW_OPT_OFF) return;
        uint64_t t0 = _hpm_os->now_ns();
        scan_sum_t s = scan_all(n, t_pct, false);
        uint64_t scan_ns = _hpm_os->now_ns() - t0;
        note_recovery(s, t_fork, &recovered);
        if (first && S.opt == CCOW_OPT_HISTORY) history_choose(n, s.present_pages);
        first = false;
        if (s.shared_pages == 0) break;
        int done = precopy_round(n, gen, t_pct, &bucket, useful);
        if (done < 0) return;
        uint64_t now = _hpm_os->now_ns();
        if (done > 0 || s.excl_pages != last_excl) quiet_since = now;
        else if (now - quiet_since > CCOW_QUIET_NS) break;
        last_excl = s.excl_pages;
        if (__atomic_load_n(&S.mech, __ATOMIC_ACQUIRE) == CCOW_MECH_SWAP && done > 0) _hpm_ccow_spares_fill(CCOW_SPARES);
        /* Scanning costs a few ms per GiB: keep it under a fifth of a core.
         * History needs scans only to observe and to see the child go:
         * a twentieth of a core, at most 5 per second. */
        bool slow = S.opt == CCOW_OPT_HISTORY;
        uint64_t pause = scan_ns * (slow ? 20 : 4), floor_ns = slow ? CCOW_SCAN_MIN_NS * 20 : CCOW_SCAN_MIN_NS;
        if (pause < floor_ns) pause = floor_ns;
        if (!nap(pause, gen)) return;
    }
    if (S.opt == CCOW_OPT_ADAPTIVE) adapt_finish(n);
    repair_all(n, gen, &bucket);
    if (!period_stale(gen)) note_recovery(scan_all(n, t_pct, true), t_fork, &recovered);
}

static void run_period(uint32_t gen) {
    size_t n;
    if (!regions_load(&n) || n == 0) return;
    track_period(gen, n);
    if (S.opt == CCOW_OPT_HISTORY) history_finish(n);
}

static void *ccow_thread(void *arg) {
    (void)arg;
    uint32_t seen = 0;
    for (;;) {
        uint32_t gen = atomic_load_explicit(&S.fork_gen, memory_order_acquire);
        if (gen == seen) {
            _hpm_ccow_os->futex_wait((uint32_t *)&S.fork_gen, gen, HPM_GONE_LOOK_NS);
            if (_hpm_os->program_gone && _hpm_os->program_gone()) break;   /* the process exits with the library's last thread */
            if (_hpm_own_thread_steps_aside()) {   /* no /proc: end, not the process; the next fork starts it again */
                atomic_store(&S.thread_started, false);
                break;
            }
            continue;
        }
        seen = gen;
        if (S.disabled || S.opt == CCOW_OPT_OFF) continue;
        if (!S.probed) {
            S.probed = true;
            int err = _hpm_ccow_scan_probe();
            if (err) { ccow_disable("pagemap", err); continue; }
            if (__atomic_load_n(&S.mech, __ATOMIC_ACQUIRE) == CCOW_MECH_SWAP) _hpm_ccow_spares_fill(CCOW_SPARES);
        }
        run_period(gen);
        if (!period_stale(gen)) __atomic_store_n(&_hpm_stats->ccow_active, 0, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* ---- fork handlers ---- */

static void atfork_prepare(void) { _hpm_ccow_guard_lock(); }

static void atfork_parent(void) {
    _hpm_ccow_guard_unlock();
    if (S.disabled || S.opt == CCOW_OPT_OFF) return;
    stat_add(&_hpm_stats->ccow_forks, 1);
    atomic_store_explicit(&S.fork_ns, _hpm_os->now_ns(), memory_order_release);
    atomic_fetch_add_explicit(&S.fork_gen, 1, memory_order_acq_rel);
    if (!atomic_load(&S.thread_started)) {
        atomic_store(&S.thread_started, true);
        int err = _hpm_os->thread_start(ccow_thread, NULL);
        if (err) { ccow_disable("thread", err); return; }
    }
    _hpm_ccow_os->futex_wake((uint32_t *)&S.fork_gen);
}

static void atfork_child(void) {
    _hpm_ccow_guard_unlock();
    atomic_store(&S.thread_started, false);
    _hpm_ccow_copy_after_fork_child();
    if (_hpm_stats) __atomic_store_n(&_hpm_stats->ccow_active, 0, __ATOMIC_RELAXED);
}

/* ---- init and public API ---- */

static void mode_store(long opt, long rate) {
    atomic_store_explicit(&S.opt, opt, memory_order_release);
    atomic_store_explicit(&S.rate_mib_s, rate < 0 ? 0 : rate, memory_order_release);
    state_publish();
}

/* HPM_CCOW's value as a mode: one it does not know is off. */
static long opt_known(long opt) { return opt == 0 || opt < -1 || opt > CCOW_OPT_HISTORY ? CCOW_OPT_OFF : opt; }

void _hpm_ccow_init(void) {
    static bool done;
    if (done) return;
    done = true;
    long opt = opt_known(_hpm_option(HPM_OPT_CCOW));
    if (!getenv("HPM_CCOW")) opt = CCOW_DEFAULT_OPT;   /* the default: see docs/ccow.md */
    __atomic_store_n(&S.t_pct, CCOW_ADAPTIVE_START_T, __ATOMIC_RELAXED);
    const char *mech = getenv("HPM_CCOW_MECH");
    S.mech = CCOW_MECH_COLLAPSE;   /* fastest measured, see docs/ccow.md */
    if (mech && *mech && !_hpm_ccow_parse_mech(mech, &S.mech))
        _hpm_message("hpmalloc: HPM_CCOW_MECH=%s is not swap, collapse or prefault; using collapse\n", mech);
    mode_store(opt, _hpm_option(HPM_OPT_CCOW_RATE));
    /* Everything that reads _hpm_os from now on goes through the guard;
     * the pageheap's own copy does once the core uses _hpm_ccow_os_guard. */
    _hpm_os = _hpm_ccow_os_guard(_hpm_os);
    int err = pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    if (err) ccow_disable("pthread_atfork", err);
}

void _hpm_ccow_option_set(hpm_option_t opt, long value) {
    _hpm_ccow_init();
    if (opt == HPM_OPT_CCOW) mode_store(opt_known(value), atomic_load_explicit(&S.rate_mib_s, memory_order_acquire));
    else if (opt == HPM_OPT_CCOW_RATE) mode_store(atomic_load_explicit(&S.opt, memory_order_acquire), value);
}

void _hpm_ccow_set_mech(ccow_mech_t m) {
    if (m < CCOW_MECH_N) __atomic_store_n(&S.mech, m, __ATOMIC_RELEASE);
}

__attribute__((visibility("default"))) int hpm_ccow_config(const char *mode, long rate_mib_s) {
    long opt;
    if (!_hpm_ccow_parse_mode(mode, &opt) || rate_mib_s < 0) { errno = EINVAL; return -1; }
    _hpm_init_slow();   /* the start-up gate: runs the core's init (and so ours) without allocating */
    _hpm_ccow_init();
    mode_store(opt, rate_mib_s);
    return 0;
}
