/* test_policy.c: unit tests of the hugepage policy (hugepage.c, collapse.c, filler.c,
 * release.c) against a fake OS and a fake clock. The pageheap under test
 * is a private one; its arena is reserved address space that is never
 * touched, and every OS action is recorded instead of performed. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "internal.h"
#include "testhelper.h"

/* ---- the fake OS ---- */
static uint64_t fake_now_ns;
static int commits, advises, releases, release_whole_hp, fail_commit, collapses;
static size_t released_bytes;

static void *fake_reserve(size_t size, size_t align) { return _hpm_os_linux.reserve(size, align); }
static int fake_commit(void *a, size_t n) { (void)a; (void)n; if (fail_commit) return 12; commits++; return 0; }
static int advises_off;   /* MADV_NOHUGEPAGE, counted apart */
static int fake_advise(void *a, size_t n, bool on) { (void)a; (void)n; if (on) advises++; else advises_off++; return 0; }
static hpm_thp_mode_t fake_mode = HPM_THP_MADVISE;   /* the system's THP mode, as the pageheap reads it at init */
static hpm_thp_mode_t fake_thp_mode(void) { return fake_mode; }
static int hugetlb_left;   /* hugetlb pages the fake pool still has */
static int fake_hugetlb(void *a, size_t n, size_t pg) {
    (void)a; (void)pg;
    if (hugetlb_left <= 0 || n != HPM_HP_BYTES) return 12;
    hugetlb_left--;
    return 0;
}
static hpm_pageheap_t *cur_ph;
static int slot_releases;   /* releases of a hugepage's record slots (metadata, not heap) */
static int fake_release(void *a, size_t n) {
    const hpm_meta_region_t *r = cur_ph && cur_ph->n_arenas ? &cur_ph->arenas[0].rec_region : NULL;
    if (r && (uintptr_t)a - r->base < r->limit) {
        if (n == HPM_HP_SLOT_BYTES) slot_releases++;
        return 0;
    }
    releases++;
    released_bytes += n;
    if (n == HPM_HP_BYTES && ((uintptr_t)a & (HPM_HP_BYTES - 1)) == 0) release_whole_hp++;
    return 0;
}
static int unreserves;   /* hugetlb pages given back to the pool */
static int fake_unreserve(void *a, size_t n) { (void)a; (void)n; unreserves++; return 0; }
static int eagain_left, thread_starts, fail_thread_start, sleeps;
static uint64_t slept_ns;
static int fake_collapse(void *a, size_t n) {
    (void)a; (void)n;
    collapses++;
    if (eagain_left > 0) { eagain_left--; return EAGAIN; }   /* another thread was writing the hugepage */
    return 0;
}
/* The collapse thread runs at once, in the caller (or cannot be started). */
static int fake_thread_start(void *(*fn)(void *), void *arg) {
    thread_starts++;
    if (fail_thread_start) return EAGAIN;
    fn(arg);
    return 0;
}
static void (*sleep_hook)(void);   /* what happens elsewhere while the collapse thread sleeps */
static void fake_sleep(uint64_t ns) {
    sleeps++;
    slept_ns += ns;
    if (sleep_hook) sleep_hook();
}
/* Resident pages of any hugepage: resident_seq[] one look after another
 * while it lasts, then resident_now. */
static size_t resident_now, resident_seq[4], resident_seq_n, resident_looks;
static size_t fake_resident(const void *a, size_t n) {
    (void)a; (void)n;
    size_t i = resident_looks++;
    return i < resident_seq_n ? resident_seq[i] : resident_now;
}
static uint64_t fake_now(void) { return fake_now_ns; }

static hpm_os_t fake_os;

static void reset_log(void) {
    commits = advises = advises_off = releases = release_whole_hp = collapses = slot_releases = 0;
    eagain_left = thread_starts = fail_thread_start = sleeps = 0;
    released_bytes = resident_now = resident_seq_n = resident_looks = 0;
    unreserves = hugetlb_left = 0;
    slept_ns = 0;
}

static hpm_pageheap_t *new_ph_mode(int page_mode) {
    static hpm_pageheap_t ph;
    fake_os = _hpm_os_linux;   /* meta and reserve are real; everything else fake */
    fake_os.reserve = fake_reserve;
    fake_os.commit = fake_commit;
    fake_os.thp_advise = fake_advise;
    fake_os.map_hugetlb = fake_hugetlb;
    fake_os.release = fake_release;
    fake_os.unreserve_to_reserved = fake_unreserve;
    fake_os.collapse = fake_collapse;
    fake_os.thread_start = fake_thread_start;
    fake_os.thp_mode = fake_thp_mode;
    fake_os.sleep_ns = fake_sleep;
    fake_os.resident_pages = fake_resident;
    fake_os.now_ns = fake_now;
    CHECK(_hpm_ph_init(&ph, &fake_os, (size_t)4 << 30, page_mode) == 0);
    cur_ph = &ph;
    ph.release_delay_ms = 1000;
    ph.cache_keep_hp = 1;
    fake_now_ns = 1000000000ull;
    reset_log();
    return &ph;
}

static hpm_pageheap_t *new_ph(void) { return new_ph_mode(PAGES_THP); }

static size_t hp_index(hpm_pageheap_t *ph, hpm_span_t *s) { return (s->start - ph->base) >> HPM_HP_SHIFT; }

static hpm_span_t *alloc(hpm_pageheap_t *ph, size_t pages, int kind) {
    return _hpm_ph_alloc_span(ph, pages, kind, 0);
}

/* Written pages first: during the small start a span goes on free pages
 * that a span wrote before, in a hugepage at least half used, when their
 * free run is no longer than the one fill before break would cut (a slab
 * only on a granule boundary), the tightest first; an emptied hugepage's
 * written pages wait; past the small start, fill before break alone. */
static void test_small_start_written(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *a = alloc(ph, 300, SPAN_MEDIUM);   /* hp0: 0..299 */
    hpm_span_t *c = alloc(ph, 16, SPAN_MEDIUM);    /* hp0: 300..315 */
    hpm_span_t *d = alloc(ph, 100, SPAN_MEDIUM);   /* hp0: 316..415, 96 never written after it */
    hpm_span_t *e = alloc(ph, 472, SPAN_MEDIUM);   /* hp1: 0..471, 40 never written after it */
    CHECK(a && c && d && e && hp_index(ph, d) == 0 && hp_index(ph, e) == 1);
    _hpm_ph_free_span(ph, c);                      /* hp0 300..315: written, free, between a and d */
    uintptr_t hp0 = ph->hps[0].addr, hp1 = ph->hps[1].addr;
    hpm_span_t *s = alloc(ph, HPM_GRANULE_PAGES, SPAN_SLAB);   /* fill before break: hp1's 40 */
    CHECK(s && s->start == hp0 + ((uintptr_t)304 << 12) && !s->clean && ph->hps[1].used_pages == 472,
          "a slab on written pages, at the granule boundary 304 of hp0: %#lx (hp1 %u used)",
          s ? (unsigned long)(s->start - ph->base) : 0ul, ph->hps[1].used_pages);
    hpm_span_t *m = alloc(ph, 3, SPAN_MEDIUM);      /* written 300..303 and 312..315: the first of the tightest */
    CHECK(m && m->start == hp0 + ((uintptr_t)300 << 12) && !m->clean, "a medium span on written pages 300..302 of hp0: %#lx",
          m ? (unsigned long)(m->start - ph->base) : 0ul);
    hpm_span_t *n = alloc(ph, 8, SPAN_MEDIUM);      /* no written run of 8 (303, 312..315): fill before break, hp1 */
    CHECK(n && n->start == hp1 + ((uintptr_t)472 << 12) && n->clean, "no written run fits: hp1's free end: %#lx",
          n ? (unsigned long)(n->start - ph->base) : 0ul);
    /* an emptied hugepage is not taken for its written pages while a partial one fits */
    hpm_span_t *f = alloc(ph, 400, SPAN_MEDIUM);    /* fits neither: hp2 */
    CHECK(f && hp_index(ph, f) == 2);
    _hpm_ph_free_span(ph, f);
    CHECK(ph->hps[2].state == HP_CACHED);
    hpm_span_t *g = alloc(ph, 8, SPAN_MEDIUM);      /* hp1's never-written 480..487, not hp2 */
    CHECK(g && g->start == hp1 + ((uintptr_t)480 << 12) && ph->hps[2].state == HP_CACHED, "g at %#lx",
          g ? (unsigned long)(g->start - ph->base) : 0ul);
    /* a hugepage under half used keeps its written pages for itself: they wait for it to empty */
    _hpm_ph_free_span(ph, a);                       /* hp0: 111 used, 0..299 written and free */
    hpm_span_t *h = alloc(ph, 4, SPAN_MEDIUM);      /* hp1's 488..491 (fill before break), not hp0's written 312..315 */
    CHECK(h && h->start == hp1 + ((uintptr_t)488 << 12), "h at %#lx", h ? (unsigned long)(h->start - ph->base) : 0ul);
    /* past the small start: the place fill before break takes, written or not */
    a = alloc(ph, 300, SPAN_MEDIUM);                /* hp0 0..299 again: the only fit */
    CHECK(a && a->start == hp0);
    _hpm_ph_free_span(ph, m);                       /* hp0 300..302 written and free */
    ph->huge_started = true;
    hpm_span_t *t = alloc(ph, 3, SPAN_MEDIUM);      /* hp1 has 20 free (492..511), hp0 more: hp1 */
    CHECK(t && hp_index(ph, t) == 1, "past the small start: hp1, the fullest that fits: %zu", t ? hp_index(ph, t) : 99);
}

/* Fill-before-break: a span goes to the most used hugepage that fits. */
static void test_fill_before_break(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *a = alloc(ph, 500, SPAN_MEDIUM);        /* hp0: 500 used */
    hpm_span_t *b = alloc(ph, 300, SPAN_MEDIUM);        /* hp1: 300 used (hp0 cannot fit) */
    hpm_span_t *c = alloc(ph, 400, SPAN_MEDIUM);        /* hp2 */
    CHECK(a && b && c);
    CHECK(hp_index(ph, a) == 0 && hp_index(ph, b) == 1 && hp_index(ph, c) == 2, "%zu %zu %zu", hp_index(ph, a), hp_index(ph, b), hp_index(ph, c));
    hpm_span_t *d = alloc(ph, 10, SPAN_MEDIUM);         /* fits hp0 (12 free): the fullest */
    CHECK(d && hp_index(ph, d) == 0, "d in hp %zu", d ? hp_index(ph, d) : 99);
    hpm_span_t *e = alloc(ph, 100, SPAN_MEDIUM);        /* hp2 has 112 free, hp1 212: hp2 */
    CHECK(e && hp_index(ph, e) == 2, "e in hp %zu", e ? hp_index(ph, e) : 99);
    hpm_span_t *f = alloc(ph, 200, SPAN_MEDIUM);        /* only hp1 fits */
    CHECK(f && hp_index(ph, f) == 1);
    CHECK(ph->top_hp == 3, "no new hugepage while one fits: top %zu", ph->top_hp);
    hpm_span_t *g = alloc(ph, 50, SPAN_MEDIUM);         /* nothing fits: a new hugepage */
    CHECK(g && hp_index(ph, g) == 3 && ph->top_hp == 4);
    /* spans never overlap and the page map points at the owner */
    CHECK(ph->page_map[(a->start - ph->base) >> 12] == a && ph->page_map[((d->start - ph->base) >> 12) + 9] == d);
    CHECK(ph->used_pages_total == 500 + 300 + 400 + 10 + 100 + 200 + 50);
    /* an empty cached hugepage is preferred to growing, and is the last choice after partials */
    _hpm_ph_free_span(ph, g);
    CHECK(ph->cache_count == 1);
    hpm_span_t *h = alloc(ph, 2, SPAN_MEDIUM);          /* hp0 has 2 free pages: fullest fit */
    CHECK(h && hp_index(ph, h) == 0, "h in hp %zu", h ? hp_index(ph, h) : 99);
    hpm_span_t *i = alloc(ph, 300, SPAN_MEDIUM);        /* no partial fits: the cached one */
    CHECK(i && hp_index(ph, i) == 3 && ph->cache_count == 0 && ph->top_hp == 4);
}

#define ALL_SMALL_START ((1u << HPM_SMALL_START_HP) - 1)

/* THP mode: the first HPM_SMALL_START_HP hugepages start on 4 KiB pages;
 * the next one advises and collapses them, and is advised itself. */
static void test_small_start(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *a = alloc(ph, 100, SPAN_SLAB);
    CHECK(a && commits == 1 && advises == 0 && collapses == 0, "first hugepage not advised (%d advises)", advises);
    for (unsigned i = 1; i < HPM_SMALL_START_HP; i++) {
        hpm_span_t *b = alloc(ph, 500, SPAN_SLAB);    /* does not fit: another hugepage */
        CHECK(b && hp_index(ph, b) == i && advises == 0 && collapses == 0, "hugepage %u: advises %d", i, advises);
    }
    hpm_span_t *b = alloc(ph, 500, SPAN_SLAB);
    CHECK(b && hp_index(ph, b) == HPM_SMALL_START_HP);
    /* the collapse waits for the lock to be dropped (it takes ms); the
     * hugepages that were queued as ripe (500 pages used each) are now
     * collapsed as they are, without a look at their residency */
    CHECK(advises == HPM_SMALL_START_HP + 1 && collapses == 0 && ph->collapse_want == ALL_SMALL_START &&
          ph->collapse_ripe == 0 && ph->huge_started, "advises %d collapses %d queued %#x (ripe %#x)", advises, collapses,
          ph->collapse_want, ph->collapse_ripe);
    pthread_mutex_lock(&ph->lock);
    hpm_ph_unlock(ph);
    CHECK(collapses == HPM_SMALL_START_HP && ph->collapse_want == 0 && resident_looks == 0, "collapsed after the unlock: %d",
          collapses);
    hpm_span_t *c = alloc(ph, 500, SPAN_SLAB);
    CHECK(c && advises == HPM_SMALL_START_HP + 2 && collapses == HPM_SMALL_START_HP, "later hugepages advised once each");
}

/* With THP "always" the small start must refuse huge pages itself: each of
 * the first hugepages gets MADV_NOHUGEPAGE when committed, and the rest
 * goes as in madvise mode (advised, collapsed). */
static void test_small_start_always(void) {
    fake_mode = HPM_THP_ALWAYS;
    hpm_pageheap_t *ph = new_ph();
    fake_mode = HPM_THP_MADVISE;
    CHECK(ph->thp_always, "the pageheap read the mode at init");
    for (unsigned i = 0; i < HPM_SMALL_START_HP; i++) {
        hpm_span_t *b = alloc(ph, 500, SPAN_SLAB);
        CHECK(b && hp_index(ph, b) == i && advises_off == (int)i + 1 && advises == 0, "hugepage %u: %d off, %d on", i,
              advises_off, advises);
    }
    hpm_span_t *b = alloc(ph, 500, SPAN_SLAB);
    CHECK(b && advises == HPM_SMALL_START_HP + 1 && advises_off == HPM_SMALL_START_HP && ph->collapse_want == ALL_SMALL_START,
          "then as in madvise mode: %d on, %d off, %#x queued", advises, advises_off, ph->collapse_want);
    pthread_mutex_lock(&ph->lock);
    hpm_ph_unlock(ph);
    CHECK(collapses == HPM_SMALL_START_HP);
    CHECK(!new_ph()->thp_always, "madvise mode: no refusal");
}

/* The process's pageheap (collapse_later) leaves the queue to
 * _hpm_ph_collapse_start, which hands it to a thread of its own: that
 * thread defers an outgrown small start (HPM_COLLAPSE_DEFER_NS), skips a
 * hugepage emptied meanwhile and waits 1, 2, 4 ms between
 * tries that answer EAGAIN; a second start finds nothing; a thread that
 * cannot be started leaves the collapse to the caller, which tries twice. */
static hpm_span_t *small_start_filled(hpm_pageheap_t *ph, hpm_span_t **first) {
    ph->collapse_later = true;
    for (unsigned i = 0; i < HPM_SMALL_START_HP; i++) {
        hpm_span_t *s = alloc(ph, 500, SPAN_SLAB);
        if (!s || hp_index(ph, s) != i) return NULL;
        first[i] = s;
    }
    return alloc(ph, 500, SPAN_SLAB);   /* the next one queues the small start */
}

static void test_collapse_later(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *first[HPM_SMALL_START_HP];
    hpm_span_t *b = small_start_filled(ph, first);
    CHECK(b && ph->collapse_want == ALL_SMALL_START, "queued %#x", ph->collapse_want);
    CHECK(atomic_load(&_hpm_collapse_waiting) == 1, "the flag the slow paths poll is set");
    pthread_mutex_lock(&ph->lock);
    hpm_ph_unlock(ph);
    CHECK(collapses == 0 && ph->collapse_want == ALL_SMALL_START, "the unlock left the queue: %d collapses", collapses);
    _hpm_ph_free_span(ph, first[2]);   /* hugepage 2 empties before the thread gets to it */
    CHECK(ph->hps[2].state != HP_ACTIVE);
    eagain_left = 3;                    /* hugepage 0 answers EAGAIN three times */
    _hpm_ph_collapse_start(ph);
    CHECK(thread_starts == 1 && ph->collapse_want == 0 && !ph->collapse_running, "one thread, queue taken: %d, %#x",
          thread_starts, ph->collapse_want);
    CHECK(atomic_load(&_hpm_collapse_waiting) == 0, "the polled flag is clear once the queue is taken");
    const int once_each = HPM_SMALL_START_HP - 1;   /* every hugepage but 2, hugepage 0 after 3 EAGAIN */
    CHECK(collapses == 3 + once_each, "hugepage 0 (3 EAGAIN), the others once, not 2: %d calls", collapses);
    /* first HPM_COLLAPSE_DEFER_NS in looks of HPM_COLLAPSE_LOOK_NS (9 hugepages
     * backed, under HPM_COLLAPSE_AT_ONCE_HP), then the waits between tries */
    const int defer_looks = (int)(HPM_COLLAPSE_DEFER_NS / HPM_COLLAPSE_LOOK_NS);
    CHECK(sleeps == defer_looks + 3 && slept_ns == HPM_COLLAPSE_DEFER_NS + 7000000ull,
          "the deferral, then waits of 1, 2 and 4 ms: %d, %llu ns", sleeps, (unsigned long long)slept_ns);
    _hpm_ph_collapse_start(ph);
    CHECK(thread_starts == 1 && collapses == 3 + once_each, "a second start finds the queue empty");

    ph = new_ph();
    b = small_start_filled(ph, first);
    CHECK(b && ph->collapse_want == ALL_SMALL_START);
    fail_thread_start = 1;
    eagain_left = 4;                    /* the caller tries each hugepage twice and does not wait */
    _hpm_ph_collapse_start(ph);
    CHECK(thread_starts == 1 && ph->collapse_want == 0 && !ph->collapse_running && sleeps == 0, "starts %d, sleeps %d",
          thread_starts, sleeps);
    CHECK(collapses == 2 + 2 + (HPM_SMALL_START_HP - 2), "two tries for hugepages 0 and 1, one for the others: %d",
          collapses);

    /* a heap that already holds HPM_COLLAPSE_AT_ONCE_HP hugepages when the
     * thread starts is collapsed without the deferral */
    ph = new_ph();
    b = small_start_filled(ph, first);
    for (unsigned i = HPM_SMALL_START_HP + 1; i < HPM_COLLAPSE_AT_ONCE_HP && b; i++) b = alloc(ph, 500, SPAN_SLAB);
    CHECK(b && ph->active_count == HPM_COLLAPSE_AT_ONCE_HP, "%zu hugepages in use", ph->active_count);
    int sleeps_before = sleeps, collapses_before = collapses;
    fail_thread_start = 0;
    _hpm_ph_collapse_start(ph);
    CHECK(sleeps == sleeps_before && collapses == collapses_before + HPM_SMALL_START_HP,
          "%d sleeps, %d collapses without the deferral", sleeps - sleeps_before, collapses - collapses_before);
}

/* During the small start a hugepage filled to HPM_RIPE_PAGES used pages
 * is queued for a collapse of its own, which waits until as many pages are
 * resident: an impatient unlock looks once, the collapse thread looks ten
 * times with growing waits. Once advised, or queued HPM_RIPE_TRIES times,
 * it is not queued again; released whole while the heap is still small,
 * it loses its advice; a forked child drops the parent's queue and
 * collapses nothing ripe (its pages are shared with the parent); past the small start nothing is ripe. */
static void unlock_now(hpm_pageheap_t *ph) {
    pthread_mutex_lock(&ph->lock);
    hpm_ph_unlock(ph);
}

/* What the commit that outgrows the small start does to hugepage 1 (the
 * one test_small_start_ripe's collapse thread waits for): advised, queued
 * as it is. */
static void outgrow_small_start(void) {
    sleep_hook = NULL;   /* once */
    cur_ph->huge_started = true;
    cur_ph->collapse_want |= 2;
    cur_ph->collapse_ripe &= (uint16_t)~2u;
}

static void test_small_start_ripe(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *a = alloc(ph, HPM_RIPE_PAGES - 10, SPAN_SLAB);
    CHECK(a && ph->collapse_want == 0, "%d pages used: not ripe", HPM_RIPE_PAGES - 10);
    hpm_span_t *b = alloc(ph, 20, SPAN_SLAB);   /* the fullest that fits: hugepage 0 */
    CHECK(b && hp_index(ph, b) == 0 && ph->collapse_want == 1 && ph->collapse_ripe == 1 && ph->ripe_tries[0] == 1,
          "ripe: queued %#x ripe %#x tries %u", ph->collapse_want, ph->collapse_ripe, ph->ripe_tries[0]);
    resident_now = HPM_RIPE_PAGES - 1;
    unlock_now(ph);
    CHECK(resident_looks == 1 && advises == 0 && collapses == 0 && ph->collapse_want == 0,
          "one look, too few resident: %zu looks, %d advises, %d collapses", resident_looks, advises, collapses);
    hpm_span_t *c = alloc(ph, 5, SPAN_SLAB);
    CHECK(c && ph->collapse_want == 1 && ph->ripe_tries[0] == 2, "queued again: %#x, tries %u", ph->collapse_want,
          ph->ripe_tries[0]);
    resident_now = HPM_RIPE_PAGES;
    unlock_now(ph);
    CHECK(advises == 1 && collapses == 1 && ph->ripe_advised == 1 && ph->collapse_want == 0,
          "advised and collapsed alone: %d, %d, advised %#x", advises, collapses, ph->ripe_advised);
    hpm_span_t *d = alloc(ph, 5, SPAN_SLAB);
    CHECK(d && ph->collapse_want == 0, "advised: not queued again");

    /* hugepage 1: queued at most HPM_RIPE_TRIES times */
    resident_now = 0;
    hpm_span_t *e = alloc(ph, 500, SPAN_MEDIUM);
    CHECK(e && hp_index(ph, e) == 1);
    unsigned queued = ph->collapse_want == 2;
    hpm_span_t *one[HPM_RIPE_TRIES + 2];
    for (int i = 0; i < HPM_RIPE_TRIES + 2; i++) {
        unlock_now(ph);
        one[i] = alloc(ph, 1, SPAN_MEDIUM);   /* into hugepage 0 or 1, both 500 used */
        CHECK(one[i] != NULL);
        queued += (ph->collapse_want & 2) != 0;
    }
    CHECK(queued == HPM_RIPE_TRIES && ph->ripe_tries[1] == HPM_RIPE_TRIES && collapses == 1, "queued %u times", queued);
    unlock_now(ph);

    /* hugepage 0, emptied and released, is committed again without the advice */
    hpm_span_t *f = alloc(ph, 512, SPAN_MEDIUM);   /* hugepage 2 */
    CHECK(f && hp_index(ph, f) == 2);
    _hpm_ph_free_span(ph, a);
    _hpm_ph_free_span(ph, b);
    _hpm_ph_free_span(ph, c);
    _hpm_ph_free_span(ph, d);
    for (int i = 0; i < HPM_RIPE_TRIES + 2; i++)
        if (one[i] && hp_index(ph, one[i]) == 0) _hpm_ph_free_span(ph, one[i]);
    _hpm_ph_free_span(ph, f);                       /* two cached: 0, and 2 the newest (kept) */
    fake_now_ns += 2000ull * 1000000;
    ph->last_release_check_ns = 0;
    _hpm_ph_release_tick(ph, fake_now_ns);
    CHECK(ph->hps[0].state == HP_RELEASED && advises_off == 1 && ph->ripe_advised == 0,
          "hugepage 0 released (state %u) with its advice taken back (%d)", ph->hps[0].state, advises_off);
    hpm_span_t *g = alloc(ph, 100, SPAN_SLAB), *h = alloc(ph, 512, SPAN_SLAB);
    CHECK(g && h && ph->hps[0].state == HP_ACTIVE && (ph->collapse_want & 1) && ph->ripe_tries[0] == 3,
          "used again and ripe again: queued %#x", ph->collapse_want);
    unlock_now(ph);

    /* the collapse thread (collapse_later) waits 1 and 2 ms for residency */
    ph = new_ph();
    ph->collapse_later = true;
    atomic_store(&_hpm_collapse_waiting, 0);
    CHECK(alloc(ph, 500, SPAN_SLAB) != NULL && ph->collapse_want == 1);
    CHECK(atomic_load(&_hpm_collapse_waiting) == 1, "the pollers are told");
    unlock_now(ph);
    CHECK(collapses == 0 && resident_looks == 0, "the unlock leaves it to the thread");
    resident_seq[0] = 0;
    resident_seq[1] = 100;
    resident_seq_n = 2;
    resident_now = HPM_PAGES_PER_HP;
    _hpm_ph_collapse_start(ph);
    CHECK(thread_starts == 1 && resident_looks == 3 && sleeps == 2 && slept_ns == 3000000ull && collapses == 1 &&
              advises == 1 && !ph->collapse_running,
          "%d starts, %zu looks, %d sleeps (%llu ns), %d collapses", thread_starts, resident_looks, sleeps,
          (unsigned long long)slept_ns, collapses);
    /* ... and gives up after ten looks */
    resident_now = 0;
    CHECK(alloc(ph, 500, SPAN_SLAB) != NULL && ph->collapse_want == 2);
    _hpm_ph_collapse_start(ph);
    CHECK(resident_looks == 3 + 10 && collapses == 1 && advises == 1 && ph->ripe_advised == 1,
          "%zu looks, %d collapses", resident_looks, collapses);
    /* the heap outgrows the small start while the thread waits: it stops
     * looking, and collapses hugepage 2 as it is, queued by the huge start */
    CHECK(alloc(ph, 1, SPAN_SLAB) != NULL && ph->collapse_want == 2, "queued %#x", ph->collapse_want);
    sleep_hook = outgrow_small_start;
    int sleeps_before = sleeps;
    _hpm_ph_collapse_start(ph);
    sleep_hook = NULL;
    /* one sleep for residency, then HPM_COLLAPSE_DEFER_NS of looks before
     * the outgrown hugepage's collapse (the heap holds far fewer than
     * HPM_COLLAPSE_AT_ONCE_HP hugepages) */
    int defer_looks = (int)(HPM_COLLAPSE_DEFER_NS / HPM_COLLAPSE_LOOK_NS);
    CHECK(sleeps == sleeps_before + 1 + defer_looks && resident_looks == 3 + 10 + 1 && collapses == 2 && advises == 1 &&
              ph->collapse_want == 0,
          "%d sleeps, %zu looks, %d collapses, %d advises", sleeps - sleeps_before, resident_looks, collapses, advises);
    ph->huge_started = false;
    /* a running thread takes what is queued meanwhile: nobody is told;
     * a forked child has no such thread and drops the queue */
    ph->collapse_running = true;
    atomic_store(&_hpm_collapse_waiting, 0);
    CHECK(alloc(ph, 1, SPAN_SLAB) != NULL && ph->collapse_want == 2 && atomic_load(&_hpm_collapse_waiting) == 0,
          "queued %#x for the running thread", ph->collapse_want);
    _hpm_ph_collapse_start(ph);
    CHECK(thread_starts == 3 && ph->collapse_want == 2, "a poll starts no second thread");
    _hpm_ph_collapse_fork_child(ph);
    CHECK(!ph->collapse_running && ph->collapse_want == 0 && ph->ripe_off, "the child drops the parent's queue");
    _hpm_ph_collapse_start(ph);
    CHECK(thread_starts == 3, "and starts no thread for it");
    CHECK(alloc(ph, 500, SPAN_SLAB) != NULL && ph->collapse_want == 0, "nor queues a ripe hugepage of its own");
    atomic_store(&_hpm_collapse_waiting, 0);

    /* past the small start nothing is ripe */
    ph = new_ph();
    ph->huge_started = true;
    CHECK(alloc(ph, 512, SPAN_SLAB) != NULL && ph->collapse_want == 0);
}

/* Hybrids are counted, and new mixed use goes to a hybrid before a clean
 * hugepage is polluted or a new one is opened (in a heap past its small
 * start: during it, see test_small_start_mixes). */
static void test_hybrid(void) {
    hpm_pageheap_t *ph = new_ph();
    ph->huge_started = true;
    hpm_span_t *slab_full = alloc(ph, 512, SPAN_SLAB);  /* hp0: full of slabs */
    hpm_span_t *m1 = alloc(ph, 200, SPAN_MEDIUM);       /* hp1: clean OTHER */
    CHECK(slab_full && m1 && hp_index(ph, slab_full) == 0 && hp_index(ph, m1) == 1);
    CHECK(ph->hybrid_count == 0);
    hpm_span_t *s1 = alloc(ph, 16, SPAN_SLAB);          /* no room for slabs: a new hugepage, not hp1 */
    CHECK(s1 && hp_index(ph, s1) == 2 && ph->hybrid_count == 0, "s1 in %zu", s1 ? hp_index(ph, s1) : 99);
    hpm_span_t *s1b = alloc(ph, 496, SPAN_SLAB);        /* hp2 full */
    CHECK(s1b && hp_index(ph, s1b) == 2);
    fail_commit = 1;                                     /* no new hugepage can be had */
    hpm_span_t *s2 = alloc(ph, 100, SPAN_SLAB);          /* last resort: pollute hp1 */
    fail_commit = 0;
    CHECK(s2 && hp_index(ph, s2) == 1, "s2 in %zu", s2 ? hp_index(ph, s2) : 99);
    CHECK(ph->hybrid_count == 1 && ph->sets[SET_HYBRID].count == 1, "hybrids %zu", ph->hybrid_count);
    CHECK(ph->top_hp == 4 && ph->released_count == 1, "the hugepage that failed to back is kept for later");
    hpm_span_t *m2 = alloc(ph, 100, SPAN_MEDIUM);        /* OTHER set is empty: the hybrid before a new one */
    CHECK(m2 && hp_index(ph, m2) == 1 && ph->released_count == 1, "m2 in %zu", m2 ? hp_index(ph, m2) : 99);
    hpm_span_t *s3 = alloc(ph, 50, SPAN_SLAB);           /* SLAB set full: the hybrid before a new one */
    CHECK(s3 && hp_index(ph, s3) == 1 && ph->released_count == 1);
    CHECK(ph->hps[1].slab_pages == 150 && ph->hps[1].used_pages == 450);
    _hpm_ph_free_span(ph, s2);
    CHECK(ph->hybrid_count == 1);                        /* s3 still mixes with m1, m2 */
    _hpm_ph_free_span(ph, s3);
    CHECK(ph->hybrid_count == 0 && ph->hps[1].set == SET_OTHER, "clean again");
    _hpm_ph_free_span(ph, m1);
    _hpm_ph_free_span(ph, m2);
    CHECK(ph->hps[1].state == HP_CACHED && ph->sets[SET_OTHER].count == 0);
}

/* A private pageheap past the small start with homes on: two live heaps,
 * and 17 full hugepages (8,704 pages, past HPM_HOMES_MIN_PAGES) of
 * other's medium spans, hugepages 0-16 (the 17th is other's home). */
static hpm_pageheap_t *homes_on_ph(hpm_heap_t *me, hpm_heap_t *other) {
    hpm_pageheap_t *ph = new_ph();
    ph->huge_started = true;
    __atomic_store_n(&me->active, true, __ATOMIC_RELAXED);
    __atomic_store_n(&other->active, true, __ATOMIC_RELAXED);
    for (unsigned i = 0; i < 17; i++) {
        hpm_span_t *full = _hpm_ph_alloc_span_for(ph, HPM_PAGES_PER_HP, SPAN_MEDIUM, 0, other);
        CHECK(full && hp_index(ph, full) == i);
    }
    CHECK(hpm_homes_on(ph), "homes on with %zu pages used", ph->used_pages_total);
    return ph;
}

/* Homes: in a heap big enough for them, a thread's medium span goes into
 * a hugepage at most a quarter used, of any set, that is open to it (its
 * own, nobody's, an exited thread's) before an empty hugepage is opened
 * (hugepage.c, HOME_SPARSE_PAGES); a fuller one it passes over. */
static void test_homes_sparse(void) {
    static hpm_heap_t me, other;
    hpm_pageheap_t *ph = homes_on_ph(&me, &other);
    hpm_span_t *slab = alloc(ph, 8, SPAN_SLAB);            /* hp17: 8 pages of slabs */
    CHECK(slab && hp_index(ph, slab) == 17);
    hpm_span_t *m = _hpm_ph_alloc_span_for(ph, 16, SPAN_MEDIUM, 0, &me);
    CHECK(m && hp_index(ph, m) == 17 && ph->top_hp == 18, "a span for me into the sparse slab hugepage: hp %zu, top %zu",
          m ? hp_index(ph, m) : 99, ph->top_hp);
    CHECK(ph->hps[17].home == &me && m->home == &me && ph->hps[17].set == SET_HYBRID, "it becomes my home, a hybrid");
    hpm_span_t *fill = alloc(ph, 300, SPAN_SLAB);          /* hp17: 324 used, over a quarter */
    CHECK(fill && hp_index(ph, fill) == 17 && ph->hps[17].used_pages == 324);
    hpm_span_t *n = _hpm_ph_alloc_span_for(ph, 16, SPAN_MEDIUM, 0, &other);   /* hp17 is mine, and not sparse */
    CHECK(n && hp_index(ph, n) == 18 && ph->hps[18].home == &other, "over a quarter used: an empty hugepage, hp %zu",
          n ? hp_index(ph, n) : 99);
    __atomic_store_n(&me.active, false, __ATOMIC_RELAXED);
    __atomic_store_n(&other.active, false, __ATOMIC_RELAXED);
}

/* Homes: a thread's medium span goes into the tightest of its own
 * hugepages that fits, however many hugepages of other threads come
 * first in the filler's bins (each heap keeps a list of its homes,
 * hugepage.c home_own_fit); a hugepage that empties leaves the list. With
 * the search in the shared bins alone (64 looks), 70 of another thread's
 * hugepages with a 35-page free run hid my hugepage with 40 free pages,
 * and my 30-page span opened an empty hugepage. */
static void test_homes_own_list(void) {
    static hpm_heap_t me, other;
    hpm_pageheap_t *ph = homes_on_ph(&me, &other);
    for (unsigned i = 17; i < 87; i++) {   /* 70 of other's, 35 pages free in each */
        hpm_span_t *o = _hpm_ph_alloc_span_for(ph, HPM_PAGES_PER_HP - 35, SPAN_MEDIUM, 0, &other);
        CHECK(o && hp_index(ph, o) == i && ph->hps[i].home == &other, "other's hugepage %u: %zu", i, o ? hp_index(ph, o) : 999);
    }
    hpm_span_t *m40 = _hpm_ph_alloc_span_for(ph, HPM_PAGES_PER_HP - 40, SPAN_MEDIUM, 0, &me);   /* hp87: 40 free */
    hpm_span_t *m12 = _hpm_ph_alloc_span_for(ph, HPM_PAGES_PER_HP - 12, SPAN_MEDIUM, 0, &me);   /* hp88: 12 free, my last */
    CHECK(m40 && m12 && hp_index(ph, m40) == 87 && hp_index(ph, m12) == 88 && ph->top_hp == 89);
    hpm_span_t *m = _hpm_ph_alloc_span_for(ph, 30, SPAN_MEDIUM, 0, &me);
    CHECK(m && hp_index(ph, m) == 87 && ph->top_hp == 89, "my 30 pages go into my hugepage with 40 free: hp %zu, top %zu",
          m ? hp_index(ph, m) : 999, ph->top_hp);
    unsigned mine = 0, others = 0, wrong = 0;   /* other: the 70 and the 17th full one (homes were on) */
    for (hpm_hp_t *hp = me.home_list; hp && mine < 1000; hp = hp->home_next) mine++, wrong += hp->home != &me;
    for (hpm_hp_t *hp = other.home_list; hp && others < 1000; hp = hp->home_next) others++, wrong += hp->home != &other;
    CHECK(mine == 2 && others == 71 && wrong == 0, "home lists: mine %u, other's %u, %u on the wrong list", mine, others, wrong);
    _hpm_ph_free_span(ph, m12);   /* hp88 empties: it leaves my list */
    mine = 0;
    for (hpm_hp_t *hp = me.home_list; hp && mine < 1000; hp = hp->home_next) mine++;
    CHECK(mine == 1 && me.home_list == &ph->hps[87] && ph->hps[88].home == NULL, "after hp88 emptied: %u on my list", mine);
    __atomic_store_n(&me.active, false, __ATOMIC_RELAXED);
    __atomic_store_n(&other.active, false, __ATOMIC_RELAXED);
}

/* During the small start (4 KiB pages) slabs and spans share hugepages:
 * a slab goes into a hugepage of medium spans that has room before an
 * empty hugepage is opened, and a span into a hugepage of slabs. Past the
 * small start they keep apart again. */
static void test_small_start_mixes(void) {
    hpm_pageheap_t *ph = new_ph();
    CHECK(ph->page_mode == PAGES_THP && !ph->huge_started);
    hpm_span_t *slab_full = alloc(ph, 512, SPAN_SLAB);  /* hp0: full of slabs */
    hpm_span_t *m1 = alloc(ph, 200, SPAN_MEDIUM);       /* hp1: medium */
    CHECK(slab_full && m1 && hp_index(ph, slab_full) == 0 && hp_index(ph, m1) == 1);
    hpm_span_t *s1 = alloc(ph, 16, SPAN_SLAB);          /* into hp1, not a new hugepage */
    CHECK(s1 && hp_index(ph, s1) == 1 && ph->top_hp == 2 && ph->hybrid_count == 1, "s1 in %zu, top %zu, hybrids %zu",
          s1 ? hp_index(ph, s1) : 99, ph->top_hp, ph->hybrid_count);
    _hpm_ph_free_span(ph, m1);                          /* hp1: slabs only */
    hpm_span_t *m2 = alloc(ph, 100, SPAN_MEDIUM);       /* into the slab hugepage with room */
    CHECK(m2 && hp_index(ph, m2) == 1 && ph->top_hp == 2, "m2 in %zu", m2 ? hp_index(ph, m2) : 99);
    ph->huge_started = true;                            /* past the small start: apart */
    hpm_span_t *m3 = alloc(ph, 100, SPAN_MEDIUM);
    CHECK(m3 && hp_index(ph, m3) == 1, "the hybrid first: %zu", m3 ? hp_index(ph, m3) : 99);
    _hpm_ph_free_span(ph, m2);
    _hpm_ph_free_span(ph, m3);                          /* hp1: slabs only again */
    hpm_span_t *m4 = alloc(ph, 100, SPAN_MEDIUM);
    CHECK(m4 && hp_index(ph, m4) == 2 && ph->hps[1].set == SET_SLAB, "a clean hugepage, not the slabs': %zu",
          m4 ? hp_index(ph, m4) : 99);
}

/* Hugepages are released whole, only after the window, keeping the cache. */
static void test_release_window(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *s[6];
    for (int i = 0; i < 6; i++) s[i] = alloc(ph, 512, SPAN_MEDIUM);
    CHECK(ph->top_hp == 6 && ph->active_count == 6);
    for (int i = 0; i < 6; i++) { fake_now_ns += 1000; _hpm_ph_free_span(ph, s[i]); }
    CHECK(ph->cache_count == 6 && ph->active_count == 0);
    CHECK(releases == 0, "released %d before the window", releases);
    fake_now_ns += 500ull * 1000000;                 /* half the window */
    _hpm_ph_release_tick(ph, fake_now_ns);
    CHECK(releases == 0, "released %d at half the window", releases);
    fake_now_ns += 600ull * 1000000;                 /* past the window */
    ph->last_release_check_ns = 0;
    _hpm_ph_release_tick(ph, fake_now_ns);
    CHECK(release_whole_hp == 5 && releases == 5, "whole %d of %d", release_whole_hp, releases);
    CHECK(slot_releases == 5, "the record slots of %d of 5 released hugepages went with them", slot_releases);
    CHECK(ph->cache_count == 1 && ph->released_count == 5 && ph->released_total == 5);
    /* the kept one is the newest; reuse prefers it over released ones */
    hpm_span_t *t = alloc(ph, 100, SPAN_MEDIUM);
    CHECK(t && hp_index(ph, t) == 5 && ph->cache_count == 0, "reused hp %zu", t ? hp_index(ph, t) : 99);
    /* a partial hugepage is never released by the tick (no subrelease) */
    fake_now_ns += 5000ull * 1000000;
    ph->last_release_check_ns = 0;
    reset_log();
    _hpm_ph_release_tick(ph, fake_now_ns);
    CHECK(releases == 0 && ph->subrel_pages == 0);
}

/* Subrelease gives back free pages of the emptiest hugepages first. */
static void test_subrelease_order(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *a = alloc(ph, 480, SPAN_MEDIUM);   /* hp0: 32 free */
    hpm_span_t *b = alloc(ph, 64, SPAN_MEDIUM);    /* hp1: 448 free */
    hpm_span_t *c = alloc(ph, 256, SPAN_MEDIUM);   /* hp2: 256 free? no: hp1 fits 256 -> hp1 */
    CHECK(a && b && c && hp_index(ph, c) == 1);
    hpm_span_t *d = alloc(ph, 500, SPAN_MEDIUM);   /* hp2: 12 free */
    CHECK(hp_index(ph, d) == 2);
    /* used 480+320+500 = 1300, free-backed 32+192+12 = 236, target 1300/16 = 81 */
    reset_log();
    size_t bytes = _hpm_ph_trim(ph, true);
    CHECK(ph->hps[1].subrel_pages == 192, "emptiest hp1 subreleased %u", ph->hps[1].subrel_pages);
    CHECK(ph->hps[0].subrel_pages == 0 && ph->hps[2].subrel_pages == 0, "fuller ones stay whole: %u %u",
          ph->hps[0].subrel_pages, ph->hps[2].subrel_pages);
    CHECK(bytes == 192 * HPM_PAGE_BYTES && ph->subrel_pages == 192);
    /* reusing subreleased pages un-counts them */
    hpm_span_t *e = alloc(ph, 100, SPAN_MEDIUM);
    CHECK(e && hp_index(ph, e) == 1 && ph->subrel_pages == 92, "subrel now %zu", ph->subrel_pages);
}

/* The subrelease target counts the free pages of active hugepages only
 * (review, session 49): a hugepage that gave pages back and then emptied
 * kept them counted, the free-backed count wrapped below zero, and the
 * next tick split a hugepage 500 of 512 pages used although its 12 free
 * pages were under the target. */
static void test_subrelease_target_idle(void) {
    hpm_pageheap_t *ph = new_ph();
    ph->huge_started = true;
    hpm_span_t *z = alloc(ph, 250, SPAN_MEDIUM), *z2 = alloc(ph, 250, SPAN_MEDIUM);   /* hp0: 500 used */
    hpm_span_t *w = alloc(ph, 200, SPAN_MEDIUM), *w2 = alloc(ph, 200, SPAN_MEDIUM);   /* hp1: 400 used */
    CHECK(z && z2 && w && w2 && hp_index(ph, z2) == 0 && hp_index(ph, w) == 1 && hp_index(ph, w2) == 1);
    _hpm_ph_trim(ph, true);   /* target 900/16 = 56: hp1's 112 free pages go */
    CHECK(ph->hps[1].subrel_pages == 112 && ph->hps[0].subrel_pages == 0, "hp1 %u, hp0 %u",
          ph->hps[1].subrel_pages, ph->hps[0].subrel_pages);
    _hpm_ph_free_span(ph, w);
    _hpm_ph_free_span(ph, w2);
    CHECK(ph->hps[1].state == HP_CACHED && ph->idle_subrel_pages == 112, "hp1 state %d, idle %zu",
          ph->hps[1].state, ph->idle_subrel_pages);
    ph->subrelease = true;
    _hpm_ph_release_tick(ph, fake_now_ns + 1);   /* hp0: 12 free, under the target of 500/16 = 31 */
    CHECK(ph->hps[0].subrel_pages == 0, "hp0 split: %u pages given back", ph->hps[0].subrel_pages);
    char why[256] = "";
    CHECK(_hpm_check_pageheap(ph, why), "%s", why);
    hpm_span_t *v = alloc(ph, 300, SPAN_MEDIUM);   /* hp1 again, active: its pages count again */
    CHECK(v && hp_index(ph, v) == 1 && ph->idle_subrel_pages == 0, "idle %zu", ph->idle_subrel_pages);
    CHECK(_hpm_check_pageheap(ph, why), "%s", why);
}

/* Large spans take whole hugepages; the last one's tail is reused. */
static void test_large_and_slack(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *big = _hpm_ph_alloc_large(ph, 1200, HPM_HP_BYTES);   /* 3 hugepages, 336 pages slack */
    CHECK(big && (big->start & (HPM_HP_BYTES - 1)) == 0 && ph->active_count == 3);
    CHECK(ph->hps[2].used_pages == 1200 - 1024 && ph->hps[2].longest_free_pages == 336);
    hpm_span_t *m = alloc(ph, 300, SPAN_MEDIUM);
    CHECK(m && hp_index(ph, m) == 2, "slack reused: %zu", m ? hp_index(ph, m) : 99);
    hpm_span_t *aligned = _hpm_ph_alloc_large(ph, 600, (size_t)1 << 30);
    CHECK(aligned && (aligned->start & (((size_t)1 << 30) - 1)) == 0, "1 GiB alignment");
    _hpm_ph_free_span(ph, big);
    CHECK(ph->hps[0].state == HP_CACHED && ph->hps[1].state == HP_CACHED && ph->hps[2].state == HP_ACTIVE);
    CHECK(ph->page_map[(big->start - ph->base) >> 12] == NULL || ph->page_map[(big->start - ph->base) >> 12]->kind != SPAN_LARGE);
}

/* A plain large span (no alignment asked) that is not whole hugepages
 * starts in the free end of a hugepage in use and runs on through empty
 * ones (new ones past the top); freed, it leaves them empty and its pages
 * free at that end, where the next one fits again without a new hugepage.
 * Aligned large spans still start on a hugepage. */
static void test_large_end_run(void) {
    hpm_pageheap_t *ph = new_ph();
    ph->huge_started = true;   /* past the small start, where written free pages would come first */
    hpm_span_t *m = alloc(ph, 100, SPAN_MEDIUM);                      /* hp0: pages 0..99 */
    hpm_span_t *big = _hpm_ph_alloc_large(ph, 600, HPM_PAGE_BYTES);  /* a hugepage and 88 pages */
    CHECK(m && big && hp_index(ph, m) == 0);
    uintptr_t at = ph->hps[0].addr + ((uintptr_t)(512 - 88) << 12);
    CHECK(big && big->start == at, "the last 88 pages of hp0, then hp1: %#lx", big ? (unsigned long)(big->start - ph->base) : 0ul);
    CHECK(ph->top_hp == 2 && ph->active_count == 2 && ph->hps[0].used_pages == 188 && ph->hps[1].used_pages == 512,
          "top %zu, active %zu, used %u and %u", ph->top_hp, (size_t)ph->active_count, ph->hps[0].used_pages,
          ph->hps[1].used_pages);
    CHECK(ph->page_map[(at - ph->base) >> 12] == big && ph->page_map[((at - ph->base) >> 12) + 599] == big,
          "the page map covers all 600 pages");
    _hpm_ph_free_span(ph, big);
    CHECK(ph->hps[1].state == HP_CACHED && ph->hps[0].used_pages == 100 && ph->hps[0].longest_free_pages == 412,
          "hp1 empty, hp0 as before: %u used", ph->hps[0].used_pages);
    hpm_span_t *m2 = alloc(ph, 50, SPAN_MEDIUM);                     /* first fit in hp0: pages 100..149 */
    hpm_span_t *big2 = _hpm_ph_alloc_large(ph, 600, HPM_PAGE_BYTES);
    CHECK(m2 && hp_index(ph, m2) == 0 && big2 && big2->start == at && ph->top_hp == 2 && ph->cache_count == 0,
          "the same place again, no new hugepage: top %zu", ph->top_hp);
    hpm_span_t *part = _hpm_ph_alloc_large(ph, 300, HPM_PAGE_BYTES);  /* no free end (hp0's ends in big2) */
    CHECK(part && part->start == ph->hps[2].addr + ((uintptr_t)(512 - 300) << 12) && ph->top_hp == 3,
          "at the end of a new hugepage: %#lx", part ? (unsigned long)(part->start - ph->base) : 0ul);
    hpm_span_t *m4 = alloc(ph, 200, SPAN_MEDIUM);                    /* fullest fit: hp2's 212 free pages, at its start */
    CHECK(m4 && hp_index(ph, m4) == 2 && m4->start == ph->hps[2].addr, "hp2's free start serves spans");
    _hpm_ph_free_span(ph, part);                                     /* hp2's end is free again */
    hpm_span_t *small = _hpm_ph_alloc_large(ph, 260, HPM_PAGE_BYTES);
    CHECK(small && small->start == ph->hps[2].addr + ((uintptr_t)(512 - 260) << 12) && ph->top_hp == 3,
          "the free end of hp2 again: %#lx", small ? (unsigned long)(small->start - ph->base) : 0ul);
    hpm_span_t *aligned = _hpm_ph_alloc_large(ph, 600, HPM_HP_BYTES);
    CHECK(aligned && (aligned->start & (HPM_HP_BYTES - 1)) == 0, "alignment asked: a hugepage start");
}

/* A large span bigger than every arena so far gets a new arena of whole
 * GiBs at least its size (review, session 49): the arena was cut down to
 * whole GiBs after it was reserved, below the request when that was not a
 * GiB multiple, and the request failed (HPM_ARENA_RESERVE=1G: malloc of
 * 1100 MiB and 2050 MiB gave ENOMEM, 2048 MiB worked). */
static void test_arena_not_cut(void) {
    hpm_pageheap_t *ph = new_ph();   /* a 4 GiB first arena */
    size_t hp = 5 * 512 + 1;         /* 5 GiB and one hugepage */
    hpm_span_t *big = _hpm_ph_alloc_large(ph, hp * HPM_PAGES_PER_HP, HPM_PAGE_BYTES);
    CHECK(big && big->n_pages == hp * HPM_PAGES_PER_HP, "5 GiB + 2 MiB: %p", (void *)big);
    CHECK(ph->n_arenas == 2 && ph->arenas[1].n_hp >= hp && ph->arenas[1].n_hp % 512 == 0,
          "arenas %u, the second %zu hugepages", (unsigned)ph->n_arenas, ph->n_arenas > 1 ? ph->arenas[1].n_hp : 0);
    if (big) _hpm_ph_free_span(ph, big);
    hpm_span_t *m = alloc(ph, 10, SPAN_MEDIUM);
    CHECK(m != NULL, "a medium span after it");
}

/* Out of memory: allocation fails cleanly, nothing is half-taken. */
static void test_out_of_memory(void) {
    hpm_pageheap_t *ph = new_ph();
    fail_commit = 1;
    CHECK(alloc(ph, 10, SPAN_SLAB) == NULL);
    CHECK(_hpm_ph_alloc_large(ph, 2000, HPM_HP_BYTES) == NULL);
    CHECK(ph->active_count == 0 && ph->used_pages_total == 0);
    fail_commit = 0;
    CHECK(alloc(ph, 10, SPAN_SLAB) != NULL);
}

/* A large request that runs out of memory halfway, in hugetlb mode: the
 * hugetlb pages it had mapped go back to the pool, unbacked and no longer
 * counted, as release.c gives back a cached one. Before (session 49's
 * review), they were only dropped with MADV_DONTNEED: still mapped from
 * the pool and counted as hugetlb until reused. */
static size_t count_backing(const hpm_pageheap_t *ph, int backing) {
    size_t n = 0;
    for (size_t i = 0; i < ph->top_hp; i++) n += ph->hps[i].backing == backing;
    return n;
}

static void test_hugetlb_rollback(void) {
    hpm_pageheap_t *ph = new_ph_mode(PAGES_HUGETLB);
    hugetlb_left = 2;   /* the pool has 2 pages; the fallback to THP fails too */
    fail_commit = 1;
    CHECK(_hpm_ph_alloc_large(ph, 4 * HPM_PAGES_PER_HP, HPM_HP_BYTES) == NULL, "4 hugepages with 2 to be had");
    fail_commit = 0;
    CHECK(ph->hugetlb_hp == 0 && count_backing(ph, BACK_HUGETLB) == 0,
          "after the failed request: %zu hugepages counted hugetlb, %zu so backed", ph->hugetlb_hp,
          count_backing(ph, BACK_HUGETLB));
    CHECK(unreserves == 2, "%d hugetlb pages went back to the pool, want 2", unreserves);
    CHECK(ph->active_count == 0 && ph->used_pages_total == 0 && ph->released_count == ph->top_hp,
          "active %zu, used pages %zu, released %zu of %zu", ph->active_count, ph->used_pages_total,
          ph->released_count, ph->top_hp);
    char why[256];
    CHECK(_hpm_check_pageheap(ph, why), "pageheap after the rollback: %s", why);
    hugetlb_left = 4;   /* the pool refilled: the next request maps all four from it */
    hpm_span_t *s = _hpm_ph_alloc_large(ph, 4 * HPM_PAGES_PER_HP, HPM_HP_BYTES);
    CHECK(s && ph->hugetlb_hp == 4 && hugetlb_left == 0, "the retry: span %p, %zu hugetlb, %d left in the pool",
          (void *)s, ph->hugetlb_hp, hugetlb_left);
    CHECK(_hpm_check_pageheap(ph, why), "pageheap after the retry: %s", why);
    if (s) _hpm_ph_free_span(ph, s);
}

/* The 512-bit run helpers against a simple reference. */
static void test_bits(void) {
    uint64_t bits[8];
    unsigned seed = 12345;
    int bad = 0;
    for (int round = 0; round < 2000; round++) {
        for (int w = 0; w < 8; w++) {
            seed = seed * 1103515245u + 12345u;
            uint64_t x = ((uint64_t)seed << 32) ^ (seed * 2654435761u);
            bits[w] = (round % 4 == 0) ? x : (round % 4 == 1 ? (x | (x >> 1) | (x << 3)) :
                      round % 4 == 2 ? ~0ull << (seed % 64) : (x % 5 ? ~0ull : x));   /* runs over whole words */
        }
        unsigned best = 0, run = 0, best_at = 0;
        for (unsigned i = 0; i < 512; i++) {
            if ((bits[i >> 6] >> (i & 63)) & 1) { if (++run > best) { best = run; best_at = i + 1 - run; } } else run = 0;
        }
        unsigned at = 999;
        if (_hpm_bits_longest_run(bits, &at) != best || (best && at != best_at)) bad++;
        /* the run around every set bit (and every set pair), against a
         * scan both ways a bit at a time */
        for (unsigned probe = 0; probe < 512; probe++) {
            if (!((bits[probe >> 6] >> (probe & 63)) & 1)) continue;
            unsigned lo = probe, hi = probe + 1, got_at;
            while (lo > 0 && ((bits[(lo - 1) >> 6] >> ((lo - 1) & 63)) & 1)) lo--;
            while (hi < 512 && ((bits[hi >> 6] >> (hi & 63)) & 1)) hi++;
            if (_hpm_bits_run_around(bits, probe, 1, &got_at) != hi - lo || got_at != lo) bad++;
            if (probe + 1 < hi && (_hpm_bits_run_around(bits, probe, 2, &got_at) != hi - lo || got_at != lo)) bad++;
            if (_hpm_bits_run_back(bits, probe + 1) != lo) bad++;
        }
        unsigned n = 1 + seed % 40;
        int ref = -1;
        for (unsigned i = 0, r = 0; i < 512; i++) {
            if ((bits[i >> 6] >> (i & 63)) & 1) { if (++r == n) { ref = (int)(i + 1 - n); break; } } else r = 0;
        }
        if (_hpm_bits_find_run(bits, n, 0) != ref) bad++;
    }
    CHECK(bad == 0, "%d mismatches", bad);
}

/* Random span traffic: the library's checker (src/check.c) recounts every
 * hugepage (free bits, longest run, slab pages, page map), the counts and
 * the cache, released and filler lists, and finds them as kept. */
static void test_random_invariants(void) {
    hpm_pageheap_t *ph = new_ph();
    static hpm_span_t *live[512];
    unsigned seed = 99;
    int bad = 0, checks = 0;
    char why[HPM_WHY_BYTES] = "";
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % 512;
        if (live[k]) { _hpm_ph_free_span(ph, live[k]); live[k] = NULL; continue; }
        size_t pages = 1 + (seed >> 20) % ((seed & 3) ? 16 : 200);
        live[k] = alloc(ph, pages, (seed & 4) ? SPAN_SLAB : SPAN_MEDIUM);
        if (step % 500 == 0) {
            checks++;
            if (!_hpm_check_pageheap(ph, why)) bad++;
        }
        if (step == 10000) {   /* release and subrelease in the middle of the traffic */
            fake_now_ns += 5000ull * 1000000;
            _hpm_ph_trim(ph, true);
            if (!_hpm_check_pageheap(ph, why)) bad++;
        }
    }
    CHECK(bad == 0, "%d of %d checks found a broken invariant, e.g. %s", bad, checks, why);
    for (int k = 0; k < 512; k++) if (live[k]) _hpm_ph_free_span(ph, live[k]);
    CHECK(ph->active_count == 0 && ph->used_pages_total == 0, "all empty after freeing everything");
    CHECK(_hpm_check_pageheap(ph, why), "after freeing everything: %s", why);
}

/* The checker is honest: each kind of damage to a sound pageheap is
 * reported, and undoing it makes the pageheap sound again. */
static void test_checker_finds_damage(void) {
    hpm_pageheap_t *ph = new_ph();
    hpm_span_t *a = alloc(ph, 100, SPAN_SLAB), *b = alloc(ph, 200, SPAN_MEDIUM), *c = alloc(ph, 512, SPAN_MEDIUM);
    CHECK(a && b && c);
    _hpm_ph_free_span(ph, c);   /* one cached hugepage */
    char why[HPM_WHY_BYTES];
    CHECK(_hpm_check_pageheap(ph, why), "sound pageheap: %s", why);
    hpm_hp_t *hp = &ph->hps[hp_index(ph, a)];
    size_t first = (a->start - ph->base) >> HPM_PAGE_SHIFT;
#define DAMAGE(what, field, bad_value) do { \
        __typeof__(field) saved_ = field; \
        field = bad_value; \
        CHECK(!_hpm_check_pageheap(ph, why), "not found: %s", what); \
        printf("damage %-28s -> %s\n", what, why); \
        field = saved_; \
    } while (0)
    DAMAGE("longest free run", hp->longest_free_pages, hp->longest_free_pages - 1);
    DAMAGE("used pages", hp->used_pages, hp->used_pages + 1);
    DAMAGE("slab pages", hp->slab_pages, hp->slab_pages - 1);
    DAMAGE("free bit of a used page", hp->free_bits[0], hp->free_bits[0] | 1);
    DAMAGE("page map entry", ph->page_map[first + 3], NULL);
    DAMAGE("pageheap used total", ph->used_pages_total, ph->used_pages_total + 1);
    DAMAGE("cache count", ph->cache_count, ph->cache_count + 1);
    DAMAGE("filler set", hp->set, SET_SLAB);    /* a and b make it a hybrid */
    DAMAGE("state", hp->state, HP_CACHED);
#undef DAMAGE
    CHECK(_hpm_check_pageheap(ph, why), "sound again after the damage is undone: %s", why);
}

/* free()'s block test (alloc.c block_ok: off * div_magic < fresh * div_step)
 * must accept exactly the starts of blocks 0..fresh-1, for every offset
 * inside a granule and the largest slab, every class and every count of
 * formatted blocks from none to a full slab. */
static void test_block_start_magic(void) {
    size_t wrong = 0, tried = 0;
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        const hpm_class_t *k = &_hpm_classes[c];
        CHECK(k->div_step >= 1 && k->div_step <= k->block_bytes, "class %u: step %llu for %u-byte blocks", c,
              (unsigned long long)k->div_step, k->block_bytes);
        size_t end = (size_t)k->slab_pages << HPM_PAGE_SHIFT;
        if (end < ((size_t)1 << HPM_GRANULE_SHIFT)) end = (size_t)1 << HPM_GRANULE_SHIFT;
        uint32_t counts[] = {0, 1, 2, k->capacity / 2, k->capacity - 1, k->capacity};
        for (unsigned i = 0; i < sizeof counts / sizeof counts[0]; i++) {
            uint64_t lim = (uint64_t)counts[i] * k->div_step;
            for (uint64_t off = 0; off < end + 64; off++, tried++) {
                bool want = off % k->block_bytes == 0 && off / k->block_bytes < counts[i];
                if ((off * k->div_magic < lim) != want) wrong++;
            }
        }
    }
    CHECK(wrong == 0, "%zu of %zu offsets judged wrongly", wrong, tried);
}

/* hpm_size_class(n) is the smallest class that holds n bytes, for every
 * small size; the classes grow, by at most a quarter above 128 bytes
 * (an eighth from 128 bytes to 1 KiB, a quarter above), and the last is
 * HPM_SMALL_MAX_BYTES. Slabs: 32 KiB (one granule) for blocks under
 * 4 KiB, 64 KiB above, so every slab holds at least 8 blocks. */
static void test_size_classes(void) {
    size_t wrong = 0;
    for (size_t n = 1; n <= HPM_SMALL_MAX_BYTES; n++) {
        unsigned c = hpm_size_class(n);
        if (c >= HPM_CLASSES || _hpm_classes[c].block_bytes < n || (c > 0 && _hpm_classes[c - 1].block_bytes >= n)) wrong++;
    }
    CHECK(wrong == 0, "%zu sizes get the wrong class", wrong);
    size_t steep = 0, slabs = 0;
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        const hpm_class_t *k = &_hpm_classes[c];
        if (k->slab_pages != (k->block_bytes >= 4096 ? 2 : 1) * HPM_GRANULE_PAGES || k->capacity < 8 ||
            k->capacity != (k->slab_pages << HPM_PAGE_SHIFT) / k->block_bytes)
            slabs++;
        if (c == 0) continue;
        uint32_t a = _hpm_classes[c - 1].block_bytes, b = k->block_bytes;
        if (b <= a || (a >= 128 && (uint64_t)b * 4 > (uint64_t)a * 5) || (a >= 128 && a < 1024 && (uint64_t)b * 8 > (uint64_t)a * 9)) steep++;
    }
    CHECK(steep == 0, "%zu class steps shrink or grow by more than a quarter", steep);
    CHECK(slabs == 0, "%zu classes have the wrong slab size or capacity", slabs);
    CHECK(_hpm_classes[HPM_CLASSES - 1].block_bytes == HPM_SMALL_MAX_BYTES);
    /* 8-byte steps up to 64: a 56-byte Lua table or a 24-byte Redis dictEntry is not rounded up by 8 */
    CHECK(_hpm_classes[hpm_size_class(24)].block_bytes == 24 && _hpm_classes[hpm_size_class(40)].block_bytes == 40 &&
          _hpm_classes[hpm_size_class(56)].block_bytes == 56 && _hpm_classes[hpm_size_class(57)].block_bytes == 64,
          "the classes under 64 bytes are not 8 bytes apart");
    /* an eighth above each power of two from 1 KiB (sizeclass.c): sqlite3's 4,104- and 4,368-byte page objects */
    CHECK(_hpm_classes[hpm_size_class(1032)].block_bytes == 1152 && _hpm_classes[hpm_size_class(2056)].block_bytes == 2304 &&
          _hpm_classes[hpm_size_class(4104)].block_bytes == 4608 && _hpm_classes[hpm_size_class(4368)].block_bytes == 4608 &&
          _hpm_classes[hpm_size_class(4609)].block_bytes == 5120,
          "sizes just above a power of two are rounded up by more than an eighth");
}

/* A large span that takes hugepages no one had backed (released or new)
 * while scattered empty ones wait in the cache releases as many cached
 * ones, oldest first: the backed total stays level. One whose run takes
 * cached ones trades only for the others; realloc's growth into new
 * hugepages trades as a new span does. */
static void test_release_for_growth(void) {
    hpm_pageheap_t *ph = new_ph();
    char why[256];
    hpm_span_t *s[5];
    for (int i = 0; i < 5; i++) s[i] = alloc(ph, 512, SPAN_MEDIUM);   /* hp0..hp4, full */
    _hpm_ph_free_span(ph, s[1]);
    _hpm_ph_free_span(ph, s[3]);                                     /* hp1, hp3 cached, not adjacent */
    CHECK(ph->cache_count == 2 && ph->top_hp == 5 && ph->active_count == 3);
    reset_log();
    hpm_span_t *big = _hpm_ph_alloc_large(ph, 1024, HPM_PAGE_BYTES);   /* two whole hugepages in a row */
    CHECK(big && hp_index(ph, big) == 5 && ph->top_hp == 7, "new hugepages 5 and 6: at %zu, top %zu",
          big ? hp_index(ph, big) : 99, ph->top_hp);
    CHECK(ph->cache_count == 0 && release_whole_hp == 2 && ph->released_count == 2,
          "both cached ones traded: cache %zu, released %d", (size_t)ph->cache_count, release_whole_hp);
    CHECK(ph->hps[1].state == HP_RELEASED && ph->hps[3].state == HP_RELEASED);
    CHECK(ph->active_count + ph->cache_count == 5, "backed %zu, as before", (size_t)(ph->active_count + ph->cache_count));
    /* hp1 (released) and hp2 (cached) in a row: a span of two takes them; nothing else is cached */
    _hpm_ph_free_span(ph, s[2]);
    CHECK(ph->cache_count == 1 && ph->hps[2].state == HP_CACHED);
    reset_log();
    hpm_span_t *big2 = _hpm_ph_alloc_large(ph, 1024, HPM_PAGE_BYTES);
    CHECK(big2 && hp_index(ph, big2) == 1 && ph->top_hp == 7, "the lowest run: %zu", big2 ? hp_index(ph, big2) : 99);
    CHECK(release_whole_hp == 0 && ph->cache_count == 0, "%d released", release_whole_hp);
    /* with hp4 cached, big (hp5, hp6) grows in place into a new hp7: hp4 is traded */
    _hpm_ph_free_span(ph, s[4]);
    CHECK(ph->cache_count == 1 && ph->hps[4].state == HP_CACHED);
    reset_log();
    CHECK(_hpm_ph_grow_large(ph, big, 1024 + 100) && ph->top_hp == 8, "grown into hp7: top %zu", ph->top_hp);
    CHECK(release_whole_hp == 1 && ph->hps[4].state == HP_RELEASED && ph->cache_count == 0,
          "hp4 traded for hp7: %d released", release_whole_hp);
    /* with two cached, a span of one new hugepage trades one: the older */
    _hpm_ph_free_span(ph, s[0]);
    _hpm_ph_free_span(ph, big2);                                      /* cached, oldest first: hp0, hp1, hp2 */
    CHECK(ph->cache_count == 3);
    hpm_span_t *m = alloc(ph, 512, SPAN_MEDIUM);                     /* the newest: hp2 */
    CHECK(m && hp_index(ph, m) == 2 && ph->cache_count == 2, "took %zu", m ? hp_index(ph, m) : 99);
    reset_log();
    hpm_span_t *big3 = _hpm_ph_alloc_large(ph, 1024 + 512, HPM_PAGE_BYTES);   /* three in a row: hp8..hp10 */
    CHECK(big3 && hp_index(ph, big3) == 8 && ph->top_hp == 11, "at %zu, top %zu", big3 ? hp_index(ph, big3) : 99,
          ph->top_hp);
    CHECK(release_whole_hp == 2 && ph->cache_count == 0 && ph->hps[0].state == HP_RELEASED &&
          ph->hps[1].state == HP_RELEASED, "3 new, 2 cached: both traded (%d)", release_whole_hp);
    CHECK(_hpm_check_pageheap(ph, why), "sound pageheap: %s", why);
}

/* A medium span grows in place over free pages right after it in its
 * hugepage (_hpm_ph_grow_medium, realloc's growth), and not over a live
 * span, nor past its hugepage's end; a refusal changes nothing. It
 * shrinks in place too (_hpm_ph_shrink_span): the tail pages are free. */
static void test_grow_medium(void) {
    hpm_pageheap_t *ph = new_ph();
    char why[256];
    hpm_span_t *a = alloc(ph, 16, SPAN_MEDIUM), *b = alloc(ph, 16, SPAN_MEDIUM);
    CHECK(a && b && b->start == a->start + 16 * HPM_PAGE_BYTES, "first fit: b right after a");
    size_t used = ph->used_pages_total;
    CHECK(!_hpm_ph_grow_medium(ph, a, 24) && a->n_pages == 16 && ph->used_pages_total == used, "grew over a live span");
    _hpm_ph_free_span(ph, b);
    CHECK(_hpm_ph_grow_medium(ph, a, 40) && a->n_pages == 40, "no growth over free pages: %u pages", a->n_pages);
    CHECK(ph->used_pages_total == used + 8, "used pages %zu, want %zu", ph->used_pages_total, used + 8);
    hpm_hp_t *hp = hpm_hp_of_addr(ph, a->start);
    unsigned first = (unsigned)((a->start >> HPM_PAGE_SHIFT) & (HPM_PAGES_PER_HP - 1));
    bool mapped = true;
    for (unsigned i = 0; i < 40; i++) mapped &= hpm_hp_map(hp)[first + i] == a;
    CHECK(mapped && _hpm_bits_count_range(hp->free_bits, first, 40) == 0, "grown pages not the span's");
    CHECK(_hpm_check_pageheap(ph, why), "sound pageheap after growth: %s", why);
    size_t to_end = HPM_PAGES_PER_HP - first;
    CHECK(!_hpm_ph_grow_medium(ph, a, to_end + 1) && a->n_pages == 40, "grew past its hugepage");
    CHECK(_hpm_ph_grow_medium(ph, a, to_end) && a->n_pages == to_end, "no growth to the hugepage's end");
    size_t before = ph->used_pages_total;   /* a shrink gives the tail back, the start stays */
    uintptr_t start = a->start;
    _hpm_ph_shrink_span(ph, a, 10);
    CHECK(a->start == start && a->n_pages == 10 && ph->used_pages_total == before - (to_end - 10),
          "shrink to 10 pages: %u pages, %zu used (want %zu)", a->n_pages, ph->used_pages_total, before - (to_end - 10));
    CHECK(_hpm_bits_count_range(hp->free_bits, first + 10, (unsigned)to_end - 10) == to_end - 10 && hpm_hp_map(hp)[first + 10] == NULL,
          "the tail is not free");
    CHECK(_hpm_check_pageheap(ph, why), "sound pageheap after the shrink: %s", why);
    hpm_span_t *l = _hpm_ph_alloc_large(ph, 600, HPM_PAGE_BYTES);
    CHECK(l && !_hpm_ph_grow_medium(ph, l, 700), "a large span grew as a medium one");
    _hpm_ph_free_span(ph, l);
    _hpm_ph_free_span(ph, a);
    CHECK(ph->used_pages_total == 0 && _hpm_check_pageheap(ph, why), "every page back: %zu used (%s)",
          ph->used_pages_total, why);
}

int main(void) {
    void *volatile first = malloc(1);   /* initialise the real allocator (metadata) */
    free(first);
    test_bits();
    test_size_classes();
    test_block_start_magic();
    test_fill_before_break();
    test_small_start_written();
    test_small_start();
    test_collapse_later();
    test_small_start_ripe();
    test_small_start_always();
    test_hybrid();
    test_homes_sparse();
    test_homes_own_list();
    test_small_start_mixes();
    test_release_window();
    test_subrelease_order();
    test_subrelease_target_idle();
    test_large_and_slack();
    test_large_end_run();
    test_release_for_growth();
    test_grow_medium();
    test_out_of_memory();
    test_hugetlb_rollback();
    test_arena_not_cut();
    test_random_invariants();
    test_checker_finds_damage();
    return TEST_DONE();
}
