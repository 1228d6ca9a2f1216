/* collapse.c: the collapse of the small start's hugepages (THP mode).
 * A heap's first HPM_SMALL_START_HP hugepages start on 4 KiB pages
 * (hugepage.c, hp_committed). They become huge with MADV_COLLAPSE in two
 * ways: all at once when the heap outgrows them, or one by one as each
 * ripens (nearly full and nearly all resident) while the heap is still
 * small. A collapse takes 0.5-10 ms per hugepage here, too long for the
 * pageheap lock, so the pageheap queues it under the lock and it runs
 * after the unlock, in a thread of the library's own for the process's
 * pageheap (docs/allocator.md, "What alloc-test's remaining gap is"),
 * which defers an outgrown small start (outgrown_wait).
 *
 * Invariant: the queue (collapse_want, collapse_ripe) and the thread's
 * state (collapse_running) are read and written under ph->lock only; at
 * most one collapse thread runs, and it exits only with the queue empty.
 * A ripe hugepage is advised huge only under the lock, while the heap is
 * still small and the hugepage in use, and loses that advice when it is
 * released whole (ripe_advised). */
#include <errno.h>
#include "internal.h"

/* A hugepage of the small start that a span has just filled to
 * HPM_RIPE_PAGES used pages: once that many are resident too, it is
 * collapsed alone, before the heap outgrows the small start. That costs
 * at most 32 pages of RSS (128 KiB) and backs the rest with one huge page:
 * a program whose heap stays under 16 MiB and is dense (alloc-test: 5
 * hugepages with 456 to 512 pages resident each) gets the shorter page
 * walks without the small start's RSS losses. Each is queued at most
 * HPM_RIPE_TRIES times, while it is not advised or queued already. */
void _hpm_ph_ripe(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->index >= HPM_SMALL_START_HP || hp->backing != BACK_THP || !ph->os->resident_pages || ph->ripe_off || ph->thp_never)
        return;
    uint16_t bit = (uint16_t)(1u << hp->index);
    if (((ph->collapse_want | ph->ripe_advised) & bit) || ph->ripe_tries[hp->index] >= HPM_RIPE_TRIES) return;
    ph->ripe_tries[hp->index]++;
    ph->collapse_want |= bit;
    ph->collapse_ripe |= bit;
    _hpm_ph_collapse_queued(ph);
}

/* A hugepage released whole (release.c): one that a ripe collapse
 * advised while the heap is still small starts small again, like the
 * others of the small start, the next time it is used. */
void _hpm_ph_released_unripe(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->index >= HPM_SMALL_START_HP || !(ph->ripe_advised & (1u << hp->index))) return;
    ph->ripe_advised &= (uint16_t)~(1u << hp->index);
    if (hpm_ph_small_start(ph)) ph->os->thp_advise((void *)hpm_hp_addr(ph, hp), HPM_HP_BYTES, false);
}

/* ---- the queue and the collapse thread ----
 * The queue is a bit per hugepage of the small start (collapse_want),
 * written and taken under the lock. A collapse runs without the lock: in
 * the thread that unlocks (hpm_ph_unlock) or, for the process's pageheap
 * (collapse_later), in a thread of its own, started by whichever malloc
 * polls first (hpm_collapse_poll); that thread takes what is queued until
 * the queue is empty, so one runs at a time. A hugepage released in
 * between is skipped, or at worst faulted back as zeros, which a
 * released hugepage may hold. */

typedef struct {
    unsigned n;
    uintptr_t addr[HPM_SMALL_START_HP];
    bool ripe[HPM_SMALL_START_HP];
} collapse_batch_t;

/* Take the queue (ph->lock held). */
static void collapse_take(hpm_pageheap_t *ph, collapse_batch_t *b) {
    b->n = 0;
    for (unsigned i = 0; i < HPM_SMALL_START_HP; i++) {
        if (!(ph->collapse_want & (1u << i))) continue;
        b->addr[b->n] = hpm_hp_addr(ph, &ph->hps[i]);
        b->ripe[b->n++] = (ph->collapse_ripe >> i) & 1;
    }
    ph->collapse_want = ph->collapse_ripe = 0;
}

/* Whether the hugepage at addr is still in use (one queued for the
 * collapse may have been emptied and released since) and, for a ripe
 * one, whether it may still be collapsed alone (the heap is still small).
 * With advise set, such a ripe one is advised huge too (under the lock,
 * so that a release cannot come in between). */
static bool hp_still(hpm_pageheap_t *ph, uintptr_t addr, bool ripe, bool advise) {
    pthread_mutex_lock(&ph->lock);
    hpm_hp_t *hp = hpm_hp_of_addr(ph, addr);
    bool ok = hp->state == HP_ACTIVE && (!ripe || (hpm_ph_small_start(ph) && hp->backing == BACK_THP));
    if (ok && advise) {
        ph->os->thp_advise((void *)addr, HPM_HP_BYTES, true);
        ph->ripe_advised |= (uint16_t)(1u << hp->index);
    }
    pthread_mutex_unlock(&ph->lock);   /* not hpm_ph_unlock: this runs inside a collapse */
    return ok;
}

/* A ripe hugepage: wait (patient: 1, 2, 4 ... 512 ms, ten looks) until
 * HPM_RIPE_PAGES of its pages are resident, then advise it. The wait
 * ends early when the heap outgrows the small start (that queues the
 * hugepage again, to be collapsed as it is, which the thread then takes
 * without waiting out these looks) or the hugepage is emptied. */
static bool ripe_ready(hpm_pageheap_t *ph, uintptr_t addr, bool patient) {
    uint64_t wait_ns = 1000000;
    for (unsigned looks = 1; ph->os->resident_pages((void *)addr, HPM_HP_BYTES) < HPM_RIPE_PAGES; looks++) {
        if (!patient || looks == 10) return false;
        ph->os->sleep_ns(wait_ns);
        wait_ns *= 2;
        if (!hp_still(ph, addr, true, false)) return false;
    }
    return hp_still(ph, addr, true, true);
}

/* An outgrown small start waits, in the collapse thread, until
 * HPM_COLLAPSE_DEFER_NS have passed or the heap holds HPM_COLLAPSE_AT_ONCE_HP
 * hugepages. A collapse copies 2 MiB while it holds the process's mmap
 * lock for writing (0.5-30 ms here), and every mmap, mprotect and madvise
 * of the program meanwhile waits behind it, the heap's own growth and
 * glibc's thread stacks included: mstress (threads that come and go, 0.1 s
 * in all) took 7% longer with its eight collapses than without (11
 * pairs; docs/allocator.md, after "Locks a malloc or free can take"). A
 * short program now ends before them; a long one pays them once, later. */
static void outgrown_wait(hpm_pageheap_t *ph) {
    for (uint64_t waited_ns = 0; waited_ns < HPM_COLLAPSE_DEFER_NS; waited_ns += HPM_COLLAPSE_LOOK_NS) {
        pthread_mutex_lock(&ph->lock);
        size_t backed_hp = ph->active_count + ph->cache_count;
        pthread_mutex_unlock(&ph->lock);
        if (backed_hp >= HPM_COLLAPSE_AT_ONCE_HP) return;
        ph->os->sleep_ns(HPM_COLLAPSE_LOOK_NS);
    }
}

/* One MADV_COLLAPSE. It faults in every page of the hugepage, the ones
 * that a trim gave back inside it (subrel_bits) too: once it succeeds
 * they are resident again and are forgotten, so that a later trim gives
 * them back again (session 50's review: they stayed counted as given
 * back, and about 10 MiB stayed resident through later trims). While it
 * runs, subrelease leaves the hugepage alone (collapsing_hp). */
static int collapse_one(hpm_pageheap_t *ph, uintptr_t addr) {
    pthread_mutex_lock(&ph->lock);
    hpm_hp_t *hp = hpm_hp_of_addr(ph, addr);
    ph->collapsing_hp = (uint8_t)(hp->index + 1);
    pthread_mutex_unlock(&ph->lock);   /* not hpm_ph_unlock: this runs inside a collapse */
    int e = ph->os->collapse((void *)addr, HPM_HP_BYTES);
    pthread_mutex_lock(&ph->lock);
    ph->collapsing_hp = 0;
    if (e == 0) _hpm_ph_subrel_forget(ph, hp);
    pthread_mutex_unlock(&ph->lock);
    return e;
}

void _hpm_hp_collapsed(uintptr_t addr) {
    hpm_pageheap_t *ph = &_hpm_ph;
    pthread_mutex_lock(&ph->lock);
    hpm_hp_t *hp = _hpm_arena_of_addr(ph, addr) ? hpm_hp_of_addr(ph, addr) : NULL;
    if (hp && hp->state == HP_ACTIVE) _hpm_ph_subrel_forget(ph, hp);
    pthread_mutex_unlock(&ph->lock);   /* not hpm_ph_unlock: CCoW's thread leaves the small start's queue alone */
}

/* Outside the lock, another thread may be writing the hugepage; the
 * kernel then answers EAGAIN (a transient failure). An impatient caller
 * (a malloc's own thread) tries once more at once. A patient one (the
 * collapse thread) waits 1, 2, 4 ... 256 ms between its 10 tries, while
 * the program writes the memory it just got, and skips a hugepage
 * released meanwhile (collapsing it would back 2 MiB of zeros). A
 * hugepage that still fails stays advised for khugepaged. */
static void collapse_run(hpm_pageheap_t *ph, const collapse_batch_t *b, bool patient) {
    bool waited = !patient;
    for (unsigned i = 0; i < b->n; i++) {
        uintptr_t addr = b->addr[i];
        if (b->ripe[i] && !ripe_ready(ph, addr, patient)) continue;
        if (!b->ripe[i] && !waited) {
            outgrown_wait(ph);
            waited = true;
        }
        uint64_t wait_ns = 1000000;
        for (unsigned tries = 1;; tries++) {
            if (patient && !hp_still(ph, addr, false, false)) break;
            if (collapse_one(ph, addr) != EAGAIN || tries == (patient ? 10u : 2u)) break;
            if (patient) ph->os->sleep_ns(wait_ns);
            wait_ns *= 2;
        }
    }
}

void _hpm_ph_unlock_collapse(hpm_pageheap_t *ph) {
    collapse_batch_t b;
    collapse_take(ph, &b);
    pthread_mutex_unlock(&ph->lock);
    collapse_run(ph, &b, false);
}

static void *collapse_main(void *arg) {
    hpm_pageheap_t *ph = arg;
    if (ph->os->thread_lower_priority) ph->os->thread_lower_priority(HPM_BACKGROUND_NICE_STEPS);
    collapse_batch_t b;
    pthread_mutex_lock(&ph->lock);
    for (;;) {
        collapse_take(ph, &b);
        if (b.n == 0) break;
        pthread_mutex_unlock(&ph->lock);
        collapse_run(ph, &b, true);
        pthread_mutex_lock(&ph->lock);
    }
    ph->collapse_running = false;
    pthread_mutex_unlock(&ph->lock);
    return NULL;
}

_Atomic unsigned char _hpm_collapse_waiting __attribute__((aligned(64)));

/* Something was queued (ph->lock held): tell the pollers, unless the
 * unlock collapses it or a running collapse thread will take it. */
void _hpm_ph_collapse_queued(hpm_pageheap_t *ph) {
    if (ph->collapse_later && ph->collapse_want && !ph->collapse_running)
        atomic_store_explicit(&_hpm_collapse_waiting, 1, memory_order_relaxed);
}

/* When no thread can be started, the caller collapses the queue itself. */
void _hpm_ph_collapse_start(hpm_pageheap_t *ph) {
    pthread_mutex_lock(&ph->lock);
    atomic_store_explicit(&_hpm_collapse_waiting, 0, memory_order_relaxed);
    bool start = ph->collapse_want && !ph->collapse_running;
    if (start) ph->collapse_running = true;
    pthread_mutex_unlock(&ph->lock);   /* not hpm_ph_unlock: the queue is for the thread */
    if (!start || ph->os->thread_start(collapse_main, ph) == 0) return;
    pthread_mutex_lock(&ph->lock);
    ph->collapse_running = false;
    _hpm_ph_unlock_collapse(ph);
}

/* A forked child has no collapse thread, even if the parent had one, and
 * collapses no ripe hugepage: its pages are the parent's until written,
 * and a collapse would copy all 512 (a prefork server's workers would
 * each pay 2 MiB for what they share). What the parent queued is the
 * parent's to do. */
void _hpm_ph_collapse_fork_child(hpm_pageheap_t *ph) {
    ph->collapse_running = false;
    ph->collapse_want = ph->collapse_ripe = 0;
    ph->collapsing_hp = 0;   /* the parent's collapse in flight is not the child's */
    ph->ripe_off = true;
}
