/* init.c: start-up, fork handling and the background release thread.
 *
 * Initialisation is lazy (first allocation) and calls nothing that could
 * allocate before the allocator is ready; pthread_atfork, the published
 * counters and CCoW are set up just after. Fork (docs/allocator.md, "Threads"): the
 * prepare handler takes every allocator lock, the parent releases them,
 * and the child re-creates them and retires the heaps of threads that did
 * not survive. The background thread starts only once empty hugepages
 * wait in the cache; it runs the release tick every quarter window, so RSS
 * falls even when the program stops calling the allocator. */
#include <sched.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>
#include "internal.h"

atomic_int _hpm_ready;
atomic_int _hpm_background_started;   /* alloc.c tests it before calling _hpm_background_kick */

/* Lock order: exits in progress (heap.c exit_lock), heaps, abandoned lists, pageheap, metadata. */
static void fork_prepare(void) {
    _hpm_heap_fork_prepare();
    pthread_mutex_lock(&_hpm_ph.lock);
    _hpm_meta_fork_prepare();
}

static void fork_parent(void) {
    _hpm_meta_fork_parent();
    hpm_ph_unlock(&_hpm_ph);
    _hpm_heap_fork_parent();
}

static void fork_child(void) {
    /* First a page of its own for the counters: the inherited one is still
     * the parent's (shared), and what follows (abandoning the other
     * threads' heaps) changes counters (test_forkstats). */
    if (_hpm_publish_after_fork_child) {
        hpm_stats_t *pub = _hpm_publish_after_fork_child();
        if (pub) _hpm_stats = pub;
    }
    _hpm_meta_fork_child();
    /* Each lock is let go first (this thread took it in fork_prepare),
     * then made anew: ThreadSanitizer keeps a re-created mutex's owner,
     * and took the child's collapse thread, the first other thread to
     * lock the pageheap's, for a second locker. */
    pthread_mutex_unlock(&_hpm_ph.lock);
    _hpm_ph_lock_init(&_hpm_ph);
    _hpm_ph_collapse_fork_child(&_hpm_ph);
    atomic_store(&_hpm_background_started, 0);
    _hpm_os_after_fork_child();
    _hpm_heap_fork_child();
    _hpm_stats->pid = (int32_t)getpid();
}

static void init_secret(void) {
    const void *rnd = (const void *)getauxval(AT_RANDOM);   /* 16 bytes, not always 8-byte aligned */
    uint64_t r[2] = {0, 0};
    if (rnd) memcpy(r, rnd, sizeof r);
    uint64_t x = r[0] ^ r[1];
    x ^= (uintptr_t)&x * 0x9e3779b97f4a7c15ull;
    _hpm_cookie_secret = x | 1;
}

static void init_stats(void) {
    static const char *thp[] = {"always", "madvise", "never", "unknown"};
    hpm_stats_t *s = _hpm_stats;
    s->magic = HPM_STATS_MAGIC;
    s->version = HPM_STATS_VERSION;
    s->pid = (int32_t)getpid();
    s->arena_base = _hpm_ph.base;
    s->arena_reserved_bytes = _hpm_ph.n_arenas ? (uint64_t)_hpm_ph.arenas[0].n_hp << HPM_HP_SHIFT : 0;
    strncpy(s->page_mode, _hpm_page_mode_name((int)_hpm_option(HPM_OPT_PAGES)), sizeof s->page_mode - 1);
    strncpy(s->thp_system, thp[_hpm_os->thp_mode()], sizeof s->thp_system - 1);
    strncpy(s->ccow_state, "off", sizeof s->ccow_state - 1);
}

static void init_once(void) {
    init_secret();
    _hpm_options_init();
    _hpm_classes_init();
    int mode = (int)_hpm_option(HPM_OPT_PAGES);
    /* CCoW wraps the pageheap's releases so that none lands on a region
     * it is copying (src/ccow/ccow_copy.c) */
    const hpm_os_t *ph_os = _hpm_ccow_os_guard ? _hpm_ccow_os_guard(_hpm_os) : _hpm_os;
    /* A reservation that fails here is tried again by the next request
     * that needs it; until then requests fail with ENOMEM. */
    _hpm_meta_init(_hpm_os);
    if (_hpm_ph_init(&_hpm_ph, ph_os, (size_t)_hpm_option(HPM_OPT_ARENA_RESERVE), mode) != 0)
        _hpm_message("hpmalloc: cannot reserve address space for the heap now; requests fail until it can\n");
    hpm_options_apply(&_hpm_ph);
    _hpm_ph.collapse_later = _hpm_option(HPM_OPT_BACKGROUND) != 0;   /* a thread of its own collapses the first hugepages */
    _hpm_stats_watch(&_hpm_ph);
    _hpm_heaps_init();
    init_stats();
}

/* The thread running init may allocate while it does (pthread_atfork,
 * the published counters, CCoW): it goes on with the heap as it is, while
 * other threads wait until _hpm_ready is 2. _hpm_os and _hpm_stats take
 * their final values before that, so no thread reads them changing. */
static __thread bool init_running;

void _hpm_init_slow(void) {
    if (init_running) return;
    int expected = 0;
    if (atomic_compare_exchange_strong(&_hpm_ready, &expected, 1)) {
        init_running = true;
        init_once();
        pthread_atfork(fork_prepare, fork_parent, fork_child);
        if (_hpm_publish_init) {
            hpm_stats_t *pub = _hpm_publish_init(_hpm_stats);
            if (pub) _hpm_stats = pub;
        }
        if (_hpm_ccow_init) _hpm_ccow_init();
        init_running = false;
        atomic_store_explicit(&_hpm_ready, 2, memory_order_release);
        return;
    }
    while (atomic_load_explicit(&_hpm_ready, memory_order_acquire) != 2) sched_yield();
}

/* ---- background release ---- */

/* The background thread sleeps on _hpm_bg_wake (a futex word), which
 * any hint bumps: that the program's last thread may be ending (heap.c,
 * _hpm_gone_hint), or that a thread's inbox waits untaken (remote.c,
 * _hpm_asleep_hint). After a gone hint it looks every millisecond for a
 * while, since the ending thread is still alive while its heap is given
 * back. The *_seen values are the last it acted on, so a hint given
 * before it first waits is seen, not lost. */
static uint32_t wake_seen, gone_seen, asleep_seen;
#define GONE_SOON_NS (1ull * 1000000)   /* after a hint: a look every millisecond, */
#define GONE_SOON_LOOKS 100              /* 100 times */

static bool gone(void) { return _hpm_os->program_gone && _hpm_os->program_gone(); }

static bool gone_soon(void) {
    for (int i = 0; i < GONE_SOON_LOOKS; i++) {
        _hpm_os->sleep_ns(GONE_SOON_NS);
        if (gone()) return true;
    }
    return false;
}

enum { WOKE_GONE, WOKE_TIME, WOKE_ASLEEP, WOKE_ASIDE, WOKE_WINDOW };

/* The release window the background thread ticks by (a quarter of it):
 * HPM_RELEASE_DELAY, or 1 s when that is 0 (released at once; the tick
 * then serves the drains). */
static uint64_t window_ms(void) {
    uint64_t ms = __atomic_load_n(&_hpm_ph.release_delay_ms, __ATOMIC_RELAXED);
    return ms ? ms : 1000;
}

/* Sleeps until end_ns, looking at least every HPM_GONE_LOOK_NS, and soon
 * after a gone hint, whether the program's own threads have all ended
 * (WOKE_GONE: the library's thread then ends too, and the process exits
 * with it); WOKE_ASIDE when, after a gone hint, no thread of the program
 * holds a heap and the threads cannot be counted (no /proc:
 * _hpm_own_thread_steps_aside); WOKE_ASLEEP early on an asleep hint;
 * WOKE_WINDOW when the release window is no longer delay_ms. */
static int background_sleep(uint64_t end_ns, uint64_t delay_ms) {
    for (;;) {
        uint64_t now = _hpm_os->now_ns();
        if (now >= end_ns) return WOKE_TIME;
        if (window_ms() != delay_ms) return WOKE_WINDOW;
        uint64_t step = end_ns - now < HPM_GONE_LOOK_NS ? end_ns - now : HPM_GONE_LOOK_NS;
        if (_hpm_os->wait_word) _hpm_os->wait_word(&_hpm_bg_wake, wake_seen, step);   /* at once if a hint came */
        else _hpm_os->sleep_ns(step);
        wake_seen = __atomic_load_n(&_hpm_bg_wake, __ATOMIC_ACQUIRE);   /* before the hints: a later one wakes the next wait */
        if (gone()) return WOKE_GONE;
        uint32_t hint = __atomic_load_n(&_hpm_gone_hint, __ATOMIC_RELAXED);
        if (hint != gone_seen) {
            gone_seen = hint;
            if (gone_soon()) return WOKE_GONE;
            if (_hpm_own_thread_steps_aside()) return WOKE_ASIDE;
        }
        hint = __atomic_load_n(&_hpm_asleep_hint, __ATOMIC_RELAXED);
        if (hint != asleep_seen) {
            asleep_seen = hint;
            return WOKE_ASLEEP;
        }
    }
}

#define ASLEEP_LOOK_NS (20ull * 1000000)   /* a second look after an asleep hint, 20 ms on */

/* Every quarter of the release window: the idle and asleep drains, the
 * central caches' and the pageheap's release ticks. After an asleep
 * hint, and 20 ms after each look that found an untaken inbox new or
 * gave slabs back: the asleep drain alone (heap.c, _hpm_heaps_drain_asleep). */
static void *background_main(void *arg) {
    (void)arg;
    if (_hpm_os->thread_lower_priority) _hpm_os->thread_lower_priority(HPM_BACKGROUND_NICE_STEPS);
    uint64_t tick_ns = 0, look_ns = 0;   /* when the next tick is due, and the next look (0: none) */
    uint64_t tick_delay_ms = 0;          /* the window that tick_ns was set for */
    for (;;) {
        uint64_t delay_ms = window_ms();
        uint64_t due_ns = _hpm_os->now_ns() + delay_ms * 1000000ull / 4;
        /* a window shortened at run time (hpm_option_set wakes this
         * thread) counts now, not at the tick the old one set */
        if (!tick_ns || (delay_ms != tick_delay_ms && due_ns < tick_ns)) tick_ns = due_ns;
        tick_delay_ms = delay_ms;
        int woke = background_sleep(look_ns && look_ns < tick_ns ? look_ns : tick_ns, delay_ms);
        if (woke == WOKE_GONE) return NULL;
        if (woke == WOKE_ASIDE) {   /* a later malloc's slow path starts it again */
            atomic_store(&_hpm_background_started, 0);
            return NULL;
        }
        uint64_t now = _hpm_os->now_ns();
        bool on = _hpm_option(HPM_OPT_BACKGROUND);
        if (woke == WOKE_ASLEEP || (look_ns && now >= look_ns)) {
            look_ns = on && _hpm_heaps_drain_asleep() ? now + ASLEEP_LOOK_NS : 0;
        }
        if (now < tick_ns) continue;
        tick_ns = 0;
        if (!on) continue;
        _hpm_heaps_drain_idle(4);   /* threads idle for a window: their span caches to the central cache */
        _hpm_transfer_release(true);
        pthread_mutex_lock(&_hpm_ph.lock);
        _hpm_ph.last_release_check_ns = 0;
        _hpm_ph_release_tick(&_hpm_ph, _hpm_os->now_ns());
        hpm_ph_unlock(&_hpm_ph);
        _hpm_stats_refresh_light();
    }
    return NULL;
}

/* From malloc's paths only, never from free's: glibc frees with its
 * stack cache lock held (pthread_join -> __nptl_free_stacks ->
 * _dl_deallocate_tls -> free), and pthread_create takes that lock. A
 * start from a free that emptied a slab hung test_manyheaps so (session
 * 29). alloc.c starts it before it can be needed instead. */
void _hpm_background_kick(void) {
    if (atomic_load_explicit(&_hpm_background_started, memory_order_relaxed) || !_hpm_option(HPM_OPT_BACKGROUND)) return;
    int expected = 0;
    if (!atomic_compare_exchange_strong(&_hpm_background_started, &expected, 1)) return;
    if (_hpm_os->thread_start(background_main, NULL) != 0) atomic_store(&_hpm_background_started, 0);
}
