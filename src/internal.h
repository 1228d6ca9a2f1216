/* internal.h: types and cross-file declarations of the allocator core.
 *
 * Glossary:
 *   page      4 KiB, the unit of spans (_pages).
 *   hugepage  2 MiB, aligned, 512 pages; the unit of backing and release (_hp).
 *   arena     one reserved address range holding every heap hugepage.
 *   span      a run of pages inside the arena with one purpose: a slab, a
 *             medium allocation (one object), or a large allocation (whole
 *             hugepages plus a page-granular tail).
 *   slab      a span cut into blocks of one size class, owned by one heap.
 *   heap      per-thread front end: size-class bins of slabs, no locks.
 *   pageheap  the global back end (hugepage.c): places spans into hugepages,
 *             tracks hybrids, caches and releases empty hugepages.
 *
 * Layer order, top to bottom. A file calls (and writes) only files of its
 * own layer or below; tests/scripts/layers.sh reads this list and checks
 * every object's undefined symbols against it, so the list must name every
 * source file and only files that exist.
 *   cxx/new.cc                             C++ operator new/delete, on the public API
 *   alloc.c control.c static.c             api: malloc family; options and counters
 *   init.c                                 start-up, fork handlers, background thread
 *   publish.c ccow/ color/                 features beside the core (hooks.h)
 *   stats.c                                counters, pulled from the layers below
 *   heap.c spancache.c remote.c transfer.c   per-thread heaps, fast paths, remote frees, medium caches
 *   slab.c                                 slab setup and free-list collection
 *   hugepage.c collapse.c filler.c release.c arena.c meta.c bits.h   the pageheap, its collapses, arenas, metadata memory
 *   options.c sizeclass.c message.c        option values, size classes, messages
 *   lockorder.c                            the lock-order check (debug builds)
 *   prim/                                  the OS table
 *   check.c                                read-only invariant checkers: outside the order
 * The one exception is the start-up gate: hpm_ensure_init() (_hpm_ready,
 * _hpm_init_slow) may be called from any layer's entry points; the
 * checkers read every layer and are called from any (debug tier). Upward
 * notifications go through hooks set by the upper layer (the pageheap's
 * on_change, set by stats.c), never through calls.
 *
 * Invariant: every address in [arena_base, arena_top) maps, through
 * page_map, to the span that owns its page, or to NULL when the page is
 * free. Metadata never lives in the arena. */
#ifndef HPM_INTERNAL_H
#define HPM_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "hooks.h"
#include "hpmalloc.h"
#include "prim/prim.h"
#include "debug.h"
#include "lockorder.h"

#define HPM_API __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* ---- size classes (sizeclass.c) ---- */
#define HPM_CLASSES 50                    /* 35 up to 1 KiB (the last is HPM_CLASS_1K), 15 above (sizeclass.c) */
#define HPM_CLASS_1K 34
#define HPM_SMALL_MAX_BYTES ((size_t)8 * 1024)   /* larger: page spans */
#define HPM_LARGE_MIN_PAGES 257                   /* at least this: whole hugepages */
#define HPM_MIN_ALIGN 16
#define HPM_MEDIUM_CLASSES 26                    /* medium span sizes, 3..256 pages (spancache.c) */
#define HPM_SPANCACHE_MAX_BYTES ((size_t)16 << 20) /* per thread, and at most a share of the heap: */
#define HPM_SPANCACHE_HEAP_SHIFT 2                 /* a quarter of the pageheap's used pages (spancache.c, cache_bound), */
#define HPM_SPANCACHE_MIN_BYTES ((size_t)1 << 20)  /* but at least 1 MiB (and the central cache too) */
#define HPM_SPANCACHE_BUSY_FREES 1024          /* a thread that freed this many medium spans churns them: caches on, and it may keep the heap (spancache.c) */
#define HPM_SPANCACHE_TRIM_NS (50ull * 1000000)   /* a thread's span cache trims its unused spans at most this often (spancache.c) */
#define HPM_SPANCACHE_BATCHES 8                  /* batches a thread keeps per medium class (span_cache_n is 8-bit: 8 * 16 + 1 fits) */
#define HPM_SPANCACHE_BORROW_CLASSES 2           /* a class's empty stack takes a span of up to this many classes larger first (spancache.c, borrow_up) */
#define HPM_SPANCACHE_SLOTS (HPM_SPANCACHE_BATCHES * 123 + HPM_MEDIUM_CLASSES)   /* sum over medium classes of HPM_SPANCACHE_BATCHES * batch + 1 (the batches add up to 123) */
#define HPM_SMALL_HEAP_PAGES 2048                 /* until a heap first uses this many pages (8 MiB), a second thread allocates or a thread is busy (HPM_SPANCACHE_BUSY_FREES), no medium span caching */
#define HPM_TINY_HEAP_HP 1                       /* up to this many hugepages, slabs and spans share */
#define HPM_SMALL_FIRST_ALWAYS_BYTES 512           /* blocks over this: a heap's first slab of the class is small in every program (heap.c) */
#define HPM_MANY_HEAPS_PER_CPU 2                  /* more heaps in use than this many per CPU (and HPM_MANY_HEAPS_MIN): */
#define HPM_MANY_HEAPS_MIN 32                     /* ... every class's first slab in a heap is small (heap.c) */
#define HPM_SMALL_START_HP 8                     /* THP mode: the first hugepages (16 MiB) stay on 4 KiB pages until the heap outgrows them */
#define HPM_RIPE_PAGES 480                       /* ... or until one has this many pages used and resident (15/16): it is collapsed alone */
#define HPM_RIPE_TRIES 3                         /* times such a hugepage is queued at most */
#define HPM_COLLAPSE_DEFER_NS (250ull * 1000000) /* the outgrown small start is collapsed this long after ... */
#define HPM_COLLAPSE_AT_ONCE_HP 32               /* ... or once the heap holds this many hugepages (collapse.c) */
#define HPM_COLLAPSE_LOOK_NS (10ull * 1000000)   /* ... looked at this often */
/* The background and collapse threads run this many nice steps below the
 * thread that started them (as the kernel's khugepaged runs at 19): at the
 * program's priority, their rare wake-ups alone left two busy threads of
 * a program queued on one CPU for milliseconds while the other idled, in
 * this VM (rptest's peak of live bytes: median 29 MB against 5-9 MB
 * without them; docs/bench.md, session 36). */
#define HPM_BACKGROUND_NICE_STEPS 10
#define HPM_COLOUR_MAX_BLOCK 1024                /* larger classes are not coloured */
/* The mask of every colour there is with count colours (HPM_COLOR_COUNT, 1..64). */
static inline uint64_t hpm_colours_all(long count) { return count >= 64 ? ~0ull : (1ull << count) - 1; }

typedef struct {
    uint32_t block_bytes;
    uint32_t slab_pages;
    uint32_t capacity;       /* blocks per slab */
    uint32_t recip;          /* ceil(2^32 / block_bytes), for division by multiply */
    /* div_magic = floor(2^64 / block_bytes) + 1, so block_bytes * div_magic
     * = 2^64 + div_step with 1 <= div_step <= block_bytes. For n < 2^32,
     * n * div_magic (mod 2^64) is k * div_step when n is block k's start
     * and at least div_magic otherwise (Lemire, Kaser and Kurz, "Faster
     * remainder by direct computation"), so one compare with
     * fresh * div_step tests both "a block start" and "a formatted block"
     * (alloc.c, block_ok). */
    uint64_t div_magic;
    uint64_t div_step;
} hpm_class_t;

HPM_INTERNAL extern hpm_class_t _hpm_classes[HPM_CLASSES];
/* Each class's block size alone, for malloc's byte count (4 lines, not 21). */
HPM_INTERNAL extern uint32_t _hpm_class_block_bytes[HPM_CLASSES];
HPM_INTERNAL extern const uint8_t _hpm_class_of8[(1024 >> 3) + 1];
HPM_INTERNAL extern const uint8_t _hpm_class_of128[(HPM_SMALL_MAX_BYTES >> 7) + 1];
HPM_INTERNAL void _hpm_classes_init(void);

/* The class of a size up to 1024 bytes: one table load. */
static inline unsigned hpm_size_class_tiny(size_t size) { return _hpm_class_of8[(size + 7) >> 3]; }

/* Above 1 KiB (up to HPM_SMALL_MAX_BYTES): one load from a table in
 * 128-byte steps, since every class there is a multiple of 128. */
static inline unsigned hpm_size_class(size_t size) {
    if (likely(size <= 1024)) return hpm_size_class_tiny(size);
    return _hpm_class_of128[(size + 127) >> 7];
}

/* ---- spans ---- */
enum { SPAN_NONE = 0, SPAN_SLAB, SPAN_MEDIUM, SPAN_LARGE };
enum { LIST_NONE = 0, LIST_CURRENT, LIST_AVAIL, LIST_FULL, LIST_ABANDONED, LIST_EMPTY, LIST_ABANDONED_FULL };

typedef struct hpm_heap_s hpm_heap_t;
typedef struct hpm_span_s hpm_span_t;

struct hpm_span_s {
    /* Line 0: everything a local free reads and writes, so that it
     * touches one line of the record: the owner, the block checks, the
     * list and the count. Other threads read the first four words when
     * they free into the slab. */
    uintptr_t start;
    _Atomic(hpm_heap_t *) owner;    /* NULL when abandoned or not a slab */
    uint64_t fresh_lim;             /* formatted blocks (fresh_blocks) * the class's div_step: free's block test (hpm_class_t) */
    uint64_t div_magic;             /* the class's div_magic (block-start check) */
    void *free;                     /* free blocks, LIFO */
    void ***push_to;                /* where a local free pushes: &free, or the owner's hand while it has one (heap.c) */
    uint32_t block_bytes;
    uint32_t n_pages;
    int32_t credit;                 /* live blocks (remote frees not yet collected count as live) minus the
                                     * threshold of the slab's list: a local free that makes it negative takes
                                     * the slow path (hpm_slab_used, hpm_slab_set_list); live blocks are not
                                     * kept while the slab is in a hand; a slab holds at most 65534 */
    uint8_t kind;
    uint8_t class_idx;
    uint8_t clean;                  /* pages were all untouched when allocated (calloc skips zeroing) */
    uint8_t cached;                 /* medium spans: 1 while free in a thread's or the central cache
                                     * (line 0, with start and n_pages: a medium malloc or free
                                     * touches one line of the record) */
    /* Line 1: read and written off the fast paths. Records start on
     * 128-byte boundaries (meta.c), so a record's two lines are one
     * prefetch pair and share it with no other record. */
    uint32_t recip __attribute__((aligned(64)));
    uint32_t capacity;
    uint32_t held_blocks;           /* free blocks kept off the free list: their pages were given back */
    uint32_t held_pages_mask;       /* slab pages given back while the slab lives (slab.c) */
    uint32_t fresh_blocks;          /* blocks [0, fresh_blocks) were formatted, the rest never used (slab.c) */
    uint32_t drain_pass;            /* the asleep drain's (remote.c): the pass that last counted this slab's blocks, */
    uint32_t drain_blocks;          /* and how many of them it holds (or its verdict) */
    union {
        hpm_span_t *drain_next;     /* slabs: the drain's list of slabs to give back */
        struct hpm_heap_s *home;    /* medium spans: the heap whose hugepage it was placed in, if any
                                     * (hugepage.c, "homes"; the central cache hands it back there) */
    };
    uint8_t list;                   /* which heap list it is on (slabs: set with hpm_slab_set_list) */
    uint8_t fixed;                  /* a slab's record in its granule's slot (hpm_slab_guess), not a pooled one */
    uint8_t spaced;                 /* a pooled slab record alone in an HPM_SLOT_BYTES cell (hugepage.c, slab_record_spaced) */
    hpm_span_t *next, *prev;        /* heap list, abandoned list, or span pool free list */
};
_Static_assert(sizeof(hpm_span_t) == 128, "a span record is two cache lines, one 128-byte pair");
_Static_assert(offsetof(hpm_span_t, cached) < 64, "a local free and a medium span's free touch line 0 only");

/* A growable region of reserved metadata address space (meta.c). Past
 * its first 4 MiB it is advised for huge pages, unless small_pages. */
typedef struct { uintptr_t base, committed, used, limit; bool small_pages; } hpm_meta_region_t;

/* ---- the pageheap (hugepage.c, filler.c, release.c) ---- */
enum { HP_UNUSED = 0, HP_RELEASED, HP_CACHED, HP_ACTIVE };
enum { BACK_NONE = 0, BACK_THP, BACK_HUGETLB, BACK_1G };
enum { SET_SLAB = 0, SET_OTHER, SET_HYBRID, SET_COUNT, SET_NONE = 255 };
enum { PAGES_THP = 0, PAGES_HUGETLB, PAGES_1G, PAGES_OFF };

typedef struct hpm_hp_s {
    uint64_t free_bits[8];          /* bit set = page free */
    uint64_t dirty_bits[8];         /* bit set = page may hold non-zero data */
    uint64_t subrel_bits[8];        /* bit set = page given back while the hugepage is partial */
    uint16_t used_pages;
    uint16_t longest_free_pages;
    uint16_t longest_free_start;    /* first page of a longest free run */
    uint16_t slab_pages;            /* pages used by small-object slabs */
    uint16_t subrel_pages;
    uint8_t state, backing, set, bin_linked;
    uint32_t index;
    uintptr_t addr;                 /* its 2 MiB of the arena that holds it */
    uint64_t empty_since_ns;
    struct hpm_heap_s *home;        /* the thread heap whose medium spans it holds (hugepage.c, "homes"); NULL: none */
    struct hpm_hp_s *home_next, *home_prev;   /* that heap's list of them (home_list; pageheap lock) */
    struct hpm_hp_s *next, *prev;   /* filler bin list or empty cache list */
} hpm_hp_t;

#define HPM_BINS 512                /* bins by longest free run, 1..511 */

typedef struct {
    hpm_hp_t *bins[HPM_BINS];
    uint64_t nonempty[HPM_BINS / 64];
    size_t count;
} hpm_filler_set_t;

/* One reservation holding heap hugepages (arena.c). Hugepage indices run
 * on across arenas: arena k holds [first_hp, first_hp + n_hp). */
typedef struct {
    uintptr_t base;                 /* 2 MiB aligned (1 GiB where room allows) */
    size_t first_hp, n_hp;
    hpm_meta_region_t map_region;   /* page-map chunks for the GiBs it spans */
    hpm_meta_region_t rec_region;   /* a slab record slot per granule (HPM_GRANULE_PAGES pages) of the arena */
} hpm_arena_t;
#define HPM_MAX_ARENAS 64

typedef struct hpm_pageheap_s {
    const hpm_os_t *os;
    pthread_mutex_t lock;
    uintptr_t base;                 /* the first arena's start */
    size_t reserved_hp;             /* hugepage indices reserved, over all arenas */
    size_t top_hp;                  /* hugepages [0, top_hp) have been used */
    size_t committed_hp;            /* hugepages [0, committed_hp) are accessible */
    int page_mode;                  /* PAGES_* */
    hpm_hp_t *hps;                  /* one per hugepage index (metadata) */
    hpm_span_t **page_map;          /* the first arena's pages (tests); all go through _hpm_l1 */
    hpm_arena_t arenas[HPM_MAX_ARENAS];
    unsigned n_arenas;
    size_t index_cap_hp;            /* hugepage indices the descriptor region can hold */
    size_t first_arena_hp;          /* the size asked for the first arena */
    hpm_filler_set_t sets[SET_COUNT];
    hpm_hp_t *cache_head, *cache_tail;  /* empty, backed; head = newest */
    size_t cache_count;
    size_t released_count;          /* hugepages in HP_RELEASED */
    size_t hybrid_count;
    size_t active_count;
    size_t subrel_pages;
    size_t idle_subrel_pages;       /* the part of subrel_pages in cached and released hugepages (release.c leaves it out of the active ones' free pages) */
    uint64_t released_total;
    uint64_t last_release_check_ns;
    size_t release_delay_ms, cache_keep_hp;
    bool subrelease;
    bool huge_started;              /* THP mode: hugepage 0 has been advised (see hp_back) */
    bool thp_always;                /* the system's THP mode is "always": the small start must refuse huge pages itself */
    bool thp_never;                 /* the system's THP mode is "never": no MADV_COLLAPSE either (it ignores the mode) */
    /* The collapse queue (collapse.c): bit i stands for hugepage i of the small start. */
    uint16_t collapse_want;         /* waits to be collapsed (after hpm_ph_unlock, or by the collapse thread) */
    uint16_t collapse_ripe;         /* ... once its pages are resident: nearly full during the small start */
    uint16_t ripe_advised;          /* advised huge by such a collapse, while the heap is still small */
    uint8_t ripe_tries[HPM_SMALL_START_HP];
    bool collapse_later;            /* leave the queue to hpm_collapse_poll (the process's pageheap, unless HPM_BACKGROUND=0), not to the unlock */
    bool collapse_running;          /* a collapse thread works through the queue; it takes what is queued meanwhile */
    uint8_t collapsing_hp;          /* 1 + the index of the hugepage a collapse works on now (subrelease leaves it alone), 0 if none */
    bool ripe_off;                  /* no ripe collapses: a forked child (its pages are shared with the parent) */
    unsigned heaps_live;            /* thread heaps in use (written by heap.c; atomic): hpm_homes_on */
    bool medium_caching;            /* medium span caches on: the heap reached HPM_SMALL_HEAP_PAGES, a second thread took a heap or a thread freed HPM_SPANCACHE_BUSY_FREES medium spans (atomic; never cleared) */
    hpm_span_t *span_free;          /* recycled span structs */
    hpm_span_t *slab_rec_free;      /* recycled spaced slab records (slab_record_spaced) */
    hpm_hp_t *released_head;        /* empty, not backed */
    size_t used_pages_total;        /* used pages over all active hugepages (written under the lock, atomically: the span caches read it without) */
    hpm_meta_region_t hp_region, map_region;
    /* counts that only the stats layer reads (it pulls them, stats.c) */
    uint64_t hugetlb_hp;            /* hugepages backed by hugetlbfs, in 2 MiB units */
    uint64_t fallback_total;        /* hugetlb/1g requests that fell back to THP */
    uint64_t large_allocs_total;    /* allocations of whole hugepages */
    /* Called under the lock after the counts change, so the published
     * counters stay live; set by the stats layer (_hpm_stats_watch) for the
     * process's own pageheap only. NULL: nobody watches. */
    void (*on_change)(const struct hpm_pageheap_s *ph);
} hpm_pageheap_t;

/* THP mode before the first hugepages are advised: the heap still runs on
 * 4 KiB pages (hugepage.c, hp_committed). */
static inline bool hpm_ph_small_start(const hpm_pageheap_t *ph) {
    return ph->page_mode == PAGES_THP && !ph->huge_started;
}

/* Homes (hugepage.c, transfer.c): each thread's medium spans in hugepages
 * of its own, only in a heap of at least 32 MiB with at least 16 MiB a
 * live thread heap, where the partial hugepage each thread keeps to
 * itself is a small share (an eighth at most). In smaller heaps the
 * threads share hugepages as before: rptest's max RSS went from 13.0 to
 * 15.9 MB with homes in every heap past the small start, mstress's from
 * 20.4 to 26.3. 32 MiB is also past the small start (16 MiB). Read
 * without locks. */
#define HPM_HOMES_MIN_PAGES 8192            /* 32 MiB */
#define HPM_HOMES_PAGES_PER_HEAP 4096       /* 16 MiB */
static inline bool hpm_homes_on(const hpm_pageheap_t *ph) {
    size_t used = __atomic_load_n(&ph->used_pages_total, __ATOMIC_RELAXED);
    return used >= HPM_HOMES_MIN_PAGES &&
           used >= (size_t)__atomic_load_n(&ph->heaps_live, __ATOMIC_RELAXED) * HPM_HOMES_PAGES_PER_HEAP;
}

/* The pageheap's counts changed (the caller holds ph->lock). */
static inline void hpm_ph_changed(hpm_pageheap_t *ph) { if (ph->on_change) ph->on_change(ph); }

HPM_INTERNAL extern hpm_pageheap_t _hpm_ph;

/* collapse.c: the queue of the small start's collapses (all under ph->lock
 * but the unlock): a hugepage that just ripened, what the commit that
 * ends the small start queued (tell the pollers), a hugepage released
 * whole, the unlock that collapses what is queued. */
HPM_INTERNAL void _hpm_ph_ripe(hpm_pageheap_t *ph, hpm_hp_t *hp);
HPM_INTERNAL void _hpm_ph_collapse_queued(hpm_pageheap_t *ph);
HPM_INTERNAL void _hpm_ph_released_unripe(hpm_pageheap_t *ph, hpm_hp_t *hp);
HPM_INTERNAL void _hpm_ph_unlock_collapse(hpm_pageheap_t *ph);

/* Drop ph->lock. A collapse that the holder queued runs after the unlock:
 * MADV_COLLAPSE takes 0.5-10 ms per hugepage here, too long to hold the
 * pageheap lock. The process's own pageheap sets collapse_later: the
 * queue then waits for hpm_collapse_poll, which hands it to a thread of
 * its own. */
static inline void hpm_ph_unlock(hpm_pageheap_t *ph) {
    if (__builtin_expect(ph->collapse_want != 0, 0) && !ph->collapse_later) {
        _hpm_ph_unlock_collapse(ph);
        return;
    }
    pthread_mutex_unlock(&ph->lock);
}

/* The collapse of the small start's hugepages (queued under the lock by
 * the commit that outgrew them, or one by one as they fill) runs in a
 * thread of its own (collapse.c): a malloc does not wait 2 to 40 ms for it. Called where no allocator state is half changed
 * and no lock is held (the ends of the allocation slow paths), since
 * starting a thread allocates. */
HPM_INTERNAL void _hpm_ph_collapse_start(hpm_pageheap_t *ph);
HPM_INTERNAL void _hpm_ph_collapse_fork_child(hpm_pageheap_t *ph);
/* Set while a collapse_later pageheap's queue waits: a line of its own,
 * written a few times per process, since a medium malloc polls it on its fast
 * path and the pageheap's own lines change under every lock holder. */
HPM_INTERNAL extern _Atomic unsigned char _hpm_collapse_waiting;
static inline void hpm_collapse_poll(void) {
    if (__builtin_expect(atomic_load_explicit(&_hpm_collapse_waiting, memory_order_relaxed) != 0, 0))
        _hpm_ph_collapse_start(&_hpm_ph);
}

/* The page map, by address (arena.c): _hpm_l1[addr >> 30] is NULL or the
 * map chunk of that GiB, one span pointer per 4 KiB page, written once
 * (committed whole before it is published) and never moved. Lookups are
 * two loads whatever the number of arenas; free() reads it without locks. */
#define HPM_ADDR_BITS 48   /* user addresses on x86-64 (47) and arm64 (48) */
#define HPM_L1_SHIFT 30
#define HPM_L1_ENTRIES ((size_t)1 << (HPM_ADDR_BITS - HPM_L1_SHIFT))
#define HPM_CHUNK_PAGES ((size_t)1 << (HPM_L1_SHIFT - HPM_PAGE_SHIFT))
HPM_INTERNAL extern hpm_span_t **_hpm_l1[HPM_L1_ENTRIES];

/* Set up a pageheap over a fresh arena of reserve_bytes. Returns 0 or errno. */
HPM_INTERNAL int _hpm_ph_init(hpm_pageheap_t *ph, const hpm_os_t *os, size_t reserve_bytes, int page_mode);
/* Span allocation. The caller holds ph->lock. kind is SPAN_SLAB or
 * SPAN_MEDIUM; colour_mask != 0 asks for a one-page span whose page
 * colour is in the mask. Returns NULL when out of memory. */
HPM_INTERNAL hpm_span_t *_hpm_ph_alloc_span(hpm_pageheap_t *ph, size_t n_pages, int kind, uint64_t colour_mask);
/* The same for a medium span of thread heap home (NULL: none): in a big
 * enough heap (hpm_homes_on) it goes in a hugepage of that heap's own
 * (hugepage.c, "homes"). */
HPM_INTERNAL hpm_span_t *_hpm_ph_alloc_span_for(hpm_pageheap_t *ph, size_t n_pages, int kind, uint64_t colour_mask,
                                                struct hpm_heap_s *home);
/* Whole hugepages for n_pages >= HPM_LARGE_MIN_PAGES, start aligned to
 * align_bytes (>= 2 MiB); the tail of the last hugepage is left free.
 * align_bytes of 4 KiB (a plain malloc) asks for no alignment: then, in
 * the THP and off modes, a span that is not whole hugepages may start in
 * the free end of a hugepage in use (see find_end_run). */
HPM_INTERNAL hpm_span_t *_hpm_ph_alloc_large(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes);
/* The same; with zero, the span is returned clean (reads as zero): pages
 * written before are given back or cleared here, others are left alone. */
HPM_INTERNAL hpm_span_t *_hpm_ph_alloc_large_zero(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes, bool zero);
/* Page-aligned span of n_pages whose start is aligned to align_bytes
 * (4 KiB < align <= 1 MiB), for medium aligned allocations. */
HPM_INTERNAL hpm_span_t *_hpm_ph_alloc_aligned(hpm_pageheap_t *ph, size_t n_pages, size_t align_bytes);
HPM_INTERNAL void _hpm_ph_free_span(hpm_pageheap_t *ph, hpm_span_t *span);
/* Grow a large span in place to n_pages, with the pages right after it
 * (THP and off modes); false, and nothing changed, when they are not all
 * free. The caller holds ph->lock. */
HPM_INTERNAL bool _hpm_ph_grow_large(hpm_pageheap_t *ph, hpm_span_t *s, size_t n_pages);
/* Grow a medium span in place to n_pages with the pages right after it
 * in its hugepage; false, and nothing changed, when they are not all free
 * or lie past its hugepage. The caller holds ph->lock. */
HPM_INTERNAL bool _hpm_ph_grow_medium(hpm_pageheap_t *ph, hpm_span_t *s, size_t n_pages);
/* Shrink a large span in place to n_pages (HPM_LARGE_MIN_PAGES or more,
 * fewer than it has), or a medium one (at least one page): its last pages
 * go back. The caller holds ph->lock. */
HPM_INTERNAL void _hpm_ph_shrink_span(hpm_pageheap_t *ph, hpm_span_t *s, size_t n_pages);
/* (Re)initialises the pageheap lock as an adaptive mutex (init, fork child). */
HPM_INTERNAL void _hpm_ph_lock_init(hpm_pageheap_t *ph);
/* Put an empty, unbacked hugepage on the released list. */
HPM_INTERNAL void _hpm_ph_push_released(hpm_pageheap_t *ph, hpm_hp_t *hp);
/* An empty hugepage's memory back to the OS whole (release.c); false when it stays backed. */
HPM_INTERNAL bool _hpm_ph_give_back_whole(hpm_pageheap_t *ph, hpm_hp_t *hp);
/* The hugepage's pages given back inside it are resident again (it was
 * released whole, or a collapse faulted them back): forget them. */
HPM_INTERNAL void _hpm_ph_subrel_forget(hpm_pageheap_t *ph, hpm_hp_t *hp);
/* Release timing: called with the lock held; releases cached hugepages
 * that have been empty longer than the window (beyond the kept cache) and,
 * with subrelease on, free pages of sparse hugepages. */
HPM_INTERNAL void _hpm_ph_release_tick(hpm_pageheap_t *ph, uint64_t now_ns);
/* A large span just backed n_hp hugepages that were not backed (released
 * or new) while empty ones wait in the cache: up to n_hp cached ones,
 * oldest first, are released now, so that the heap's backed size does
 * not grow while it holds empty hugepages. The caller holds ph->lock
 * and tells the watchers (hpm_ph_changed) after. */
HPM_INTERNAL void _hpm_ph_release_for_growth(hpm_pageheap_t *ph, size_t n_hp);
/* Release everything possible now. subrelease: also free pages inside
 * partial hugepages, emptiest first. Returns bytes released. */
HPM_INTERNAL size_t _hpm_ph_trim(hpm_pageheap_t *ph, bool subrelease);
/* The release policy, set in one call (by options.c, at start and on
 * hpm_option_set). Takes ph->lock. */
HPM_INTERNAL void _hpm_ph_configure(hpm_pageheap_t *ph, size_t release_delay_ms, size_t cache_keep_hp, bool subrelease);

/* filler.c: the sets of partial hugepages */
HPM_INTERNAL void _hpm_filler_insert(hpm_pageheap_t *ph, hpm_hp_t *hp);
HPM_INTERNAL void _hpm_filler_remove(hpm_pageheap_t *ph, hpm_hp_t *hp);
HPM_INTERNAL hpm_hp_t *_hpm_filler_find(hpm_pageheap_t *ph, int set, size_t n_pages);
/* The same among hugepages open to h (hpm_home_open_to), looking at no
 * more than max_looks of them; NULL if none. */
HPM_INTERNAL hpm_hp_t *_hpm_filler_find_home(hpm_pageheap_t *ph, int set, size_t n_pages, const struct hpm_heap_s *h,
                                             unsigned max_looks);
/* The least used of the emptiest partial hugepages of any set (a few
 * looked at) that fit n_pages, are open to h and have at most
 * max_used_pages in use; NULL if none (hugepage.c, homes). */
HPM_INTERNAL hpm_hp_t *_hpm_filler_find_sparse(hpm_pageheap_t *ph, size_t n_pages, const struct hpm_heap_s *h,
                                               unsigned max_used_pages);
#include "bits.h"   /* _hpm_bits_*: the 512-page bitmaps */

static inline uintptr_t hpm_hp_addr(const hpm_pageheap_t *ph, const hpm_hp_t *hp) {
    (void)ph;
    return hp->addr;
}

/* The process's first arena seen as one flat page map: the page-map
 * chunks of its GiBs lie one after another in one metadata region, so for
 * an address in [base, base + limit_bytes) the span is map[(p - base) >>
 * 12], one load after a subtract and a compare, where the two-level
 * lookup takes two dependent loads and three branches (free's fast path).
 * limit_bytes only grows, and only over chunks that are committed and
 * published in _hpm_l1 as this arena's (arena.c, _hpm_map_cover); an
 * address outside it takes the two-level lookup, which answers for every
 * arena and for foreign pointers. */
typedef struct { uintptr_t base; uintptr_t limit_bytes; hpm_span_t **map; hpm_span_t *recs; } hpm_map_window_t;
HPM_INTERNAL extern hpm_map_window_t _hpm_map0;

/* Slab records at fixed places. A slab that starts on a granule boundary
 * of its arena (32 KiB; arenas start on hugepage boundaries, so that is a
 * multiple of 32 KiB in the address) keeps its record in the arena's slot
 * for that granule, rec_region.base + granule * 512, and the page map
 * points there too. free then finds a slab's record from the address
 * alone, one load instead of the map entry and the record after it
 * (glibc-thread spent a dependent L2 hit on the map entry per free). A
 * slot that holds no live slab starting there has owner NULL and kind
 * SPAN_NONE, so the guess below is only ever a hint: free's fast path
 * takes it when its owner is the calling heap, which proves that the slab
 * starts at the address's granule, so the address's offset in it is the
 * address's low 15 bits when it lies in the slab at all. Every slab is
 * placed on a boundary where its hugepage has one free (hugepage.c,
 * first_fit), also one shorter than a granule (a heap's small first
 * ones), which may then have other spans after it in the granule: its
 * block test fails for their addresses, and free looks those up in the
 * map (alloc.c, free_guess_missed).
 *
 * A slot is 512 bytes for a 128-byte record. Neighbouring granules hold
 * slabs of other threads (hugepages are shared, fullest first), and
 * records packed 128 bytes apart traded lines between the cores although
 * they share no byte (the likeliest cause: hardware prefetchers of this
 * project's Intel guests that reach past the 128-byte pair). In larson with two threads on two
 * cores, free's first load of the record (its owner) took 46-59% of
 * free's samples with 128-byte slots, 32-43% with 256, 18% with 512 and
 * none with 1024 or 4096, against none with both threads on one core
 * (perf, cpu-clock); larson gained 15% with 512 and 1.5% more with 1024
 * (11 interleaved pairs each), so 512 it is: 1.6% of a small-object heap
 * in metadata, where 128 bytes cost 0.4%. */
#define HPM_GRANULE_SHIFT 15
#define HPM_GRANULE_PAGES ((unsigned)1 << (HPM_GRANULE_SHIFT - HPM_PAGE_SHIFT))
#define HPM_GRANULE_BYTES ((uintptr_t)1 << HPM_GRANULE_SHIFT)
#define HPM_SLOT_SHIFT 9                        /* a granule's record slot: 512 bytes, the record and 384 bytes of space */
#define HPM_SLOT_BYTES ((size_t)1 << HPM_SLOT_SHIFT)
/* Slots cover the first 64 GiB of an arena (1 GiB of address space for
 * the slots, what 128-byte slots took for a 256 GiB arena); slabs past it
 * take pooled records, and free finds them through the page map. */
#define HPM_REC_COVER_BYTES ((uintptr_t)64 << 30)
/* The slots of one hugepage: whole pages, given back with it (arena.c). */
#define HPM_HP_SLOT_BYTES (((size_t)HPM_HP_BYTES >> HPM_GRANULE_SHIFT) << HPM_SLOT_SHIFT)
/* The record slot of a granule: slot index k of an arena's rec_region. */
static inline hpm_span_t *hpm_rec_slot(uintptr_t region_base, size_t k) {
    return (hpm_span_t *)(region_base + (k << HPM_SLOT_SHIFT));
}
/* The slot of the granule holding addr, an address of arena a. */
static inline hpm_span_t *hpm_arena_slot(const hpm_arena_t *a, uintptr_t addr) {
    return hpm_rec_slot(a->rec_region.base, (addr - a->base) >> HPM_GRANULE_SHIFT);
}
/* p's offset in _hpm_map0's window; false when p lies outside it. */
static inline bool hpm_map0_offset(const void *p, uintptr_t *off) {
    uintptr_t limit = __atomic_load_n(&_hpm_map0.limit_bytes, __ATOMIC_ACQUIRE);   /* a plain load on x86 */
    *off = (uintptr_t)p - __atomic_load_n(&_hpm_map0.base, __ATOMIC_RELAXED);
    return *off < limit;
}
/* The slot of the granule at offset off of _hpm_map0's window: the record
 * of the slab that starts there, if one does (else any other record, or a
 * free one: the caller checks). */
static inline hpm_span_t *hpm_slab_guess_in(uintptr_t off) {
    return hpm_rec_slot((uintptr_t)__atomic_load_n(&_hpm_map0.recs, __ATOMIC_RELAXED), off >> HPM_GRANULE_SHIFT);
}
static inline hpm_span_t *hpm_slab_guess(const void *p) {
    uintptr_t off;
    if (likely(hpm_map0_offset(p, &off))) return hpm_slab_guess_in(off);
    return NULL;
}
/* Whether s, a guess or a map entry, is the slab holding p (for a guess:
 * only when the caller owns it, or nobody can reuse the slot meanwhile). */
static inline bool hpm_slab_holds(const hpm_span_t *s, const void *p) {
    return s && s->kind == SPAN_SLAB && (uintptr_t)p - s->start < ((uintptr_t)s->n_pages << HPM_PAGE_SHIFT);
}
/* Whether the live slab of slot s, p's granule's slot, holds p, for a
 * thread that does not own it; its owner, read here, in *owner. Another
 * thread may delete that slab and place a new one in the slot meanwhile
 * (when p lies in another span of the granule: behind a short slab), so
 * this reads only the owner and the page count, both atomic (hugepage.c,
 * slab_record_new and span_place): a slot with an owner is a slab that
 * starts at the granule, and one without is not trusted (an abandoned
 * slab is looked up in the map). */
static inline bool hpm_slot_holds(hpm_span_t *s, const void *p, hpm_heap_t **owner) {
    *owner = atomic_load_explicit(&s->owner, memory_order_acquire);
    return *owner && ((uintptr_t)p & (HPM_GRANULE_BYTES - 1)) < ((uintptr_t)__atomic_load_n(&s->n_pages, __ATOMIC_RELAXED) << HPM_PAGE_SHIFT);
}

static inline hpm_span_t *hpm_span_of_l1(const void *p) {
    uintptr_t a = (uintptr_t)p;
    if (unlikely(a >> HPM_ADDR_BITS)) return NULL;
    hpm_span_t **chunk = __atomic_load_n(&_hpm_l1[a >> HPM_L1_SHIFT], __ATOMIC_ACQUIRE);
    if (unlikely(!chunk)) return NULL;
    return __atomic_load_n(&chunk[(a >> HPM_PAGE_SHIFT) & (HPM_CHUNK_PAGES - 1)], __ATOMIC_RELAXED);
}

/* A map entry is read and written atomically (hugepage.c, hp_use_pages
 * and hp_free_pages; plain moves on x86): hpm_range reads entries for
 * any address, also one that the background thread is releasing, and
 * then only the record's fields that are themselves atomic. Relaxed: a
 * free's later plain reads of the record are ordered after the span's
 * placement by the program's own hand-over of the pointer (with release
 * stores, TSan kept a clock for every entry: +150 MiB for a 1 GiB span). */
static inline hpm_span_t *hpm_span_of(const void *p) {
    uintptr_t off;
    if (likely(hpm_map0_offset(p, &off)))
        return __atomic_load_n(&__atomic_load_n(&_hpm_map0.map, __ATOMIC_RELAXED)[off >> HPM_PAGE_SHIFT], __ATOMIC_RELAXED);
    return hpm_span_of_l1(p);
}

/* ---- arenas (arena.c) ---- */
/* Address space a new reservation may still take under RLIMIT_AS
 * (SIZE_MAX without a limit). */
HPM_INTERNAL size_t _hpm_as_room_bytes(const hpm_os_t *os);
/* Reserve want bytes, at most half the room left under RLIMIT_AS, halving
 * on failure down to min_bytes; *got_bytes says how much. NULL if none. */
HPM_INTERNAL void *_hpm_reserve_sized(const hpm_os_t *os, size_t want_bytes, size_t min_bytes, size_t align_bytes, size_t *got_bytes);
/* A new arena for at least need_hp hugepages whose first one is aligned
 * to align_hp; 0 or ENOMEM. */
HPM_INTERNAL int _hpm_arena_add(hpm_pageheap_t *ph, size_t need_hp, size_t align_hp);
/* The arena holding index idx, or the address addr; NULL if none. */
HPM_INTERNAL hpm_arena_t *_hpm_arena_of_index(hpm_pageheap_t *ph, size_t idx);
HPM_INTERNAL hpm_arena_t *_hpm_arena_of_addr(hpm_pageheap_t *ph, uintptr_t addr);
/* The hugepage holding addr (an address inside the heap). */
static inline hpm_hp_t *hpm_hp_of_addr(hpm_pageheap_t *ph, uintptr_t addr) {
    hpm_arena_t *a = _hpm_arena_of_addr(ph, addr);
    return &ph->hps[a->first_hp + ((addr - a->base) >> HPM_HP_SHIFT)];
}
/* Make the page map cover [from, to) (map chunks committed, published). */
HPM_INTERNAL int _hpm_map_cover(hpm_pageheap_t *ph, hpm_arena_t *a, uintptr_t from, uintptr_t to);
/* The map entries of the 512 pages of hugepage hp. */
static inline hpm_span_t **hpm_hp_map(const hpm_hp_t *hp) {
    return _hpm_l1[hp->addr >> HPM_L1_SHIFT] + ((hp->addr >> HPM_PAGE_SHIFT) & (HPM_CHUNK_PAGES - 1));
}
/* Give back the record slots of the hugepage at hp_addr, which holds no
 * span (its slots read as unused again, zero). The caller holds ph->lock. */
HPM_INTERNAL void _hpm_arena_release_slots(hpm_pageheap_t *ph, uintptr_t hp_addr);
/* p lies in the used part of the process's heap (for error messages). */
HPM_INTERNAL bool _hpm_ph_owns(const void *p);

/* ---- metadata (meta.c) ---- */
HPM_INTERNAL int _hpm_meta_init(const hpm_os_t *os);
HPM_INTERNAL int _hpm_meta_region_init(hpm_meta_region_t *r, size_t reserve_bytes);
HPM_INTERNAL int _hpm_meta_region_ensure(hpm_meta_region_t *r, size_t bytes_from_base);
/* Fork: the metadata lock is taken last by the prepare handler. */
HPM_INTERNAL void _hpm_meta_fork_prepare(void);
HPM_INTERNAL void _hpm_meta_fork_parent(void);
HPM_INTERNAL void _hpm_meta_fork_child(void);
HPM_INTERNAL size_t _hpm_meta_committed_bytes(void);

/* ---- heaps (heap.c, slab.c, remote.c) ---- */
#define HPM_OUTBOX_SLOTS 8                  /* owners batched at once (a power of two) */
#define HPM_OUTBOX_BATCH 64                 /* blocks handed over with one CAS */
#define HPM_OUTBOX_AHEAD 8                  /* a block of 24 bytes or more names the one this far down its batch (remote.c) */
#define HPM_HEAP_EMPTY_SLABS 16             /* emptied slabs a heap keeps for reuse */
#define HPM_SLAB_BATCH 8                    /* slabs given back to the pageheap under one lock (heap.c) */
#define HPM_STALL_SENDS 4                   /* batches in a row that found the owner's inbox not yet taken: the owner is stalled */
#define HPM_KEEP_PROBE 1024                 /* blocks kept for a stalled owner before a batch is sent to it again */
#define HPM_KEEP_HAND_BYTES (256u << 10)    /* a hand keeps at most this many bytes of other heaps' blocks (and HPM_KEEP_PROBE blocks) until it runs dry (remote.c) */
#define HPM_ASLEEP_HINT_NS (20ull * 1000000)   /* stalled owners wake the background thread at most this often (remote.c) */
#define HPM_ASLEEP_PROBES 16                /* probes (by any senders) that found the owner's inbox untaken since it last took it: it is asleep, nothing more is kept for it */
/* Other heaps' blocks a hand may keep for class cls until it runs dry
 * (remote.c keep_for_stalled). */
static inline uint32_t hpm_keep_cap(unsigned cls) {
    uint32_t cap = HPM_KEEP_HAND_BYTES / _hpm_class_block_bytes[cls];
    return cap < HPM_KEEP_PROBE ? cap : HPM_KEEP_PROBE;
}
#define HPM_INBOX_CLOSED ((void *)1)       /* an exiting heap's inbox (remote.c) */
typedef struct {
    hpm_heap_t *to;
    void **head, **tail;
    uint32_t count;
    uint16_t waiting;                       /* sends in a row that found to's inbox not yet taken */
    bool stalled;                           /* waiting reached HPM_STALL_SENDS: keep its blocks (remote.c) */
    uint32_t kept;                          /* blocks freed for its owner since the slot stalled, kept or sent (remote.c stalled_count) */
    void **recent[HPM_OUTBOX_AHEAD];        /* the last blocks pushed, by count (remote.c, "look-ahead") */
} hpm_outbox_t;
struct hpm_heap_s {
    /* The hand: free blocks that malloc's fast path pops without touching
     * a slab: the current slab's, taken off its list, and blocks of
     * stalled owners' slabs kept by remote.c. They count as used in their
     * slabs. NULL when empty; never set without a current slab. */
    void **hand[HPM_CLASSES];
    int64_t used_bytes;                 /* this thread's net allocated bytes */
    hpm_span_t *current[HPM_CLASSES];   /* never NULL: an empty sentinel when none */
    hpm_span_t *avail[HPM_CLASSES];     /* slabs with free blocks (besides current), oldest first */
    hpm_span_t *avail_tail[HPM_CLASSES]; /* newest of avail: a slab that gets a free while full joins here */
    hpm_span_t *full[HPM_CLASSES];      /* slabs with no free block when last looked at */
    hpm_span_t *empty[HPM_CLASSES];     /* emptied slabs kept for reuse (at most HPM_HEAP_EMPTY_SLABS in all) */
    uint32_t empty_slabs;
    uint8_t slabs_made[HPM_CLASSES];    /* slabs taken per class, saturating at 255 */
    uint16_t kept_blocks[HPM_CLASSES];  /* other heaps' blocks kept in the hand since it last ran dry (remote.c keep_for_stalled) */
    uint64_t colour_mask;
    hpm_span_t *span_stack[HPM_SPANCACHE_SLOTS];    /* free medium spans, class cls at _hpm_medium_slot0[cls] (spancache.c) */
    uint8_t span_cache_n[HPM_MEDIUM_CLASSES];   /* at most HPM_SPANCACHE_BATCHES * 16 + 1 */
    uint8_t span_refills[HPM_MEDIUM_CLASSES];   /* refills of each class's stack, saturating (slow start) */
    uint8_t span_low[HPM_MEDIUM_CLASSES];       /* each stack's low-water mark since the last trim */
    uint64_t span_trim_ns;                      /* when the last trim ran */
    uint32_t span_frees;                        /* medium spans freed into the cache or refused by it, saturating at HPM_SPANCACHE_BUSY_FREES */
    size_t span_cache_bytes;
    /* The idle drain's gate (spancache.c): the owner marks itself inside
     * its span cache or its emptied slabs (empty, empty_slabs) with plain
     * stores; the background thread drains them in a heap that has been
     * idle only while the owner is outside. */
    _Atomic uint32_t sc_state;          /* odd while the owner is inside its span cache or emptied slabs; +2 per operation (owner writes) */
    _Atomic uint8_t sc_drainer;         /* the background thread drains it now */
    uint8_t sc_idle_ticks;              /* background thread only (heaps_lock): ticks with sc_state unchanged */
    uint32_t sc_seen_state;             /* background thread only (heaps_lock): sc_state at its last look */
    _Atomic uint32_t slab_state;        /* odd while the owner is inside its slab lists (gate.h; the asleep drain, remote.c) */
    uint32_t slab_gate_depth;           /* owner only: how deep it is inside that gate (its slow paths nest) */
    uint32_t ib_seen_takes;             /* background thread only (heaps_lock): inbox_takes at its last look, */
    uint8_t ib_ticks;                   /* the looks in a row since that found the inbox untaken and not empty, */
    uint8_t ib_wait;                    /* and how many make an asleep drain due (doubles while drains free nothing) */
    hpm_heap_t *next_all;               /* every heap ever made */
    hpm_heap_t *next_free;              /* retired heaps */
    bool active;                        /* false from the start of thread exit: adopts nothing (atomic: the
                                         * pageheap reads it for its hugepages' homes) */
    hpm_hp_t *home_hp;                  /* pageheap lock: the hugepage its last medium span came from (hugepage.c) */
    hpm_hp_t *home_list;                /* pageheap lock: every hugepage whose home it is (hp->home_next; kept when the record is reused) */
    uint32_t outbox_blocks;             /* blocks waiting in outbox[] */
    hpm_outbox_t outbox[HPM_OUTBOX_SLOTS];  /* remote frees batched per owner (remote.c) */
    _Atomic(void *) inbox __attribute__((aligned(128)));  /* blocks of our slabs freed by other threads (a line pair of its own: the spatial prefetcher) */
    _Atomic uint64_t dry_probes;        /* inbox_takes << 32 | senders' probes that found the inbox untaken since (remote.c) */
    _Atomic uint32_t inbox_takes;       /* lists taken from the inbox (written by the owner only, as it takes one) */
    char inbox_line[128 - sizeof(void *) - sizeof(uint64_t) - sizeof(uint32_t)];
};

/* The calling thread's heap, or &_hpm_no_heap until it has one (and after
 * its exit): a read-only heap whose every class has the empty sentinel
 * slab, so malloc's and free's fast paths need no NULL test (the first
 * malloc falls to the slow path, a free to free_other's owner test); use
 * hpm_my_heap() where a NULL is wanted. */
HPM_INTERNAL extern __thread hpm_heap_t *_hpm_tls_heap;
/* The thread's heap was given back at its exit (heap.c). glibc frees
 * thread buffers after the key destructors have run (the dlerror result,
 * strerror's for an unknown code): such a free takes no new heap, which
 * no destructor would give back (review, session 49: 11.5 KiB of
 * metadata and one more live heap for each thread that exited so). */
HPM_INTERNAL extern __thread bool _hpm_tls_exited;
HPM_INTERNAL extern const hpm_heap_t _hpm_no_heap;
HPM_INTERNAL extern hpm_span_t _hpm_empty_span;
/* Whether memory whose home is heap home (a hugepage's, a medium span's)
 * may serve heap h: it is h's, nobody's, or its thread has exited. */
static inline bool hpm_home_open_to(const hpm_heap_t *home, const hpm_heap_t *h) {
    return home == NULL || home == h || !__atomic_load_n(&home->active, __ATOMIC_RELAXED);
}
static inline hpm_heap_t *hpm_my_heap(void) {
    hpm_heap_t *h = _hpm_tls_heap;
    return h != &_hpm_no_heap ? h : NULL;
}
HPM_INTERNAL extern uint64_t _hpm_cookie_secret;
HPM_INTERNAL hpm_heap_t *_hpm_heap_acquire(void);
HPM_INTERNAL void _hpm_heap_call_done(void);
HPM_INTERNAL void _hpm_heaps_init(void);
HPM_INTERNAL void *_hpm_heap_alloc_slow(hpm_heap_t *h, unsigned cls);
HPM_INTERNAL void _hpm_heap_free_slow(hpm_heap_t *h, hpm_span_t *s);
/* Free the checked block b of a slab that h (may be NULL) does not own:
 * to its owner's inbox, or into the abandoned slab (adopting it). */
HPM_INTERNAL void _hpm_free_other(hpm_heap_t *h, void **b);
/* The same, for a caller that has looked up the block's slab s already. */
HPM_INTERNAL void _hpm_free_other_in(hpm_heap_t *h, hpm_span_t *s, void **b);
HPM_INTERNAL int64_t _hpm_heaps_used_bytes(void);
HPM_INTERNAL void _hpm_heapless_used_add(int64_t delta);
HPM_INTERNAL void _hpm_heaps_reclaim_abandoned(bool shed);
HPM_INTERNAL void _hpm_heap_release_empty(bool shed);
HPM_INTERNAL void _hpm_heap_fork_prepare(void);
HPM_INTERNAL void _hpm_heap_fork_parent(void);
HPM_INTERNAL void _hpm_heap_fork_child(void);

static inline uint64_t hpm_cookie(const void *block) {
    return _hpm_cookie_secret ^ (uintptr_t)block;
}

/* A block's second word: the cookie while it is free, cleared by malloc.
 * The allocator writes it atomically (plain moves on x86), since
 * hpm_range may read it (atomically) from any thread for any address,
 * also for a block that its owner is handing out or taking back
 * meanwhile; free's own read of the block it is given stays plain. */
static inline uint64_t hpm_block_mark(void **b) { return (uint64_t)__atomic_load_n(&b[1], __ATOMIC_RELAXED); }
static inline void hpm_block_set_mark(void **b, uint64_t v) { __atomic_store_n(&b[1], (void *)v, __ATOMIC_RELAXED); }
static inline void hpm_block_set_free(void **b) { hpm_block_set_mark(b, hpm_cookie(b)); }

/* Zero a metadata record whose fields hpm_range may be reading from
 * another thread (the record of a span that has just been freed, now
 * reused): word by word, atomically. bytes is a multiple of 8. The words
 * are may_alias, as memset's bytes are: the record's typed stores that
 * follow must not be moved before them. */
typedef uint64_t __attribute__((may_alias)) hpm_any_word_t;
static inline void hpm_record_zero(void *rec, size_t bytes) {
    hpm_any_word_t *w = rec;
    for (size_t i = 0; i < bytes / 8; i++) __atomic_store_n(&w[i], 0, __ATOMIC_RELAXED);
}

/* The owner's count of its net allocated bytes; read by the counters from
 * other threads (relaxed loads). Only the owner writes it, so on x86-64 it
 * is one add to memory, not locked (a relaxed load and store compile to a
 * load, an add and a store: two more instructions on each fast path). */
static inline void hpm_used_add(hpm_heap_t *h, int64_t delta) {
#if defined(__x86_64__)
    __asm__("addq %1, %0" : "+m"(h->used_bytes) : "er"(delta));
#else
    __atomic_store_n(&h->used_bytes, __atomic_load_n(&h->used_bytes, __ATOMIC_RELAXED) + delta, __ATOMIC_RELAXED);
#endif
}
/* h may be NULL (a thread after its exit, or without metadata): the count of heapless changes then */
static inline void hpm_used_add_any(hpm_heap_t *h, int64_t delta) {
    if (h) hpm_used_add(h, delta);
    else _hpm_heapless_used_add(delta);
}
static inline void hpm_used_sub(hpm_heap_t *h, uint64_t bytes) {
#if defined(__x86_64__)
    __asm__("subq %1, %0" : "+m"(h->used_bytes) : "er"(bytes));
#else
    hpm_used_add(h, -(int64_t)bytes);
#endif
}

/* Formatted blocks of a slab: grows while the slab lives (owner only,
 * with fresh_lim); other threads read it for blocks they hold, which are
 * below it. */
static inline uint32_t hpm_slab_fresh(const hpm_span_t *s) {
    return __atomic_load_n(&s->fresh_blocks, __ATOMIC_RELAXED);
}

/* A slab's pages given back while it lives: written by its owner only
 * (slab.c), atomically, because hpm_range reads it for a live block that
 * another thread owns. The owner's own reads need no atomic. */
static inline void hpm_slab_set_held_mask(hpm_span_t *s, uint32_t mask) {
    __atomic_store_n(&s->held_pages_mask, mask, __ATOMIC_RELAXED);
}

/* A medium span's `cached` mark: set and cleared by the thread or lock
 * that holds the span, read by hpm_range on any address, atomically. */
static inline bool hpm_span_cached(const hpm_span_t *s) { return __atomic_load_n(&s->cached, __ATOMIC_RELAXED); }
static inline void hpm_span_set_cached(hpm_span_t *s, bool on) { __atomic_store_n(&s->cached, (uint8_t)on, __ATOMIC_RELAXED); }

/* A slab's list and, with it, when a local free needs the slow path: a
 * full slab becomes available at its first free (threshold above any
 * count), an available or moving one is retired when it empties
 * (threshold 1), the current one not for 2^30 frees (heap.c resets it
 * then: in a hand its count is not kept, so frees alone move it). The
 * slab keeps its live blocks minus that threshold (credit), so the free
 * fast path is one decrement of the credit and a branch on its sign (the
 * test of the list itself was two branches and seven instructions; a
 * 16-bit count and a 16-bit threshold compared were four; whether the
 * slab is current is a coin toss in a random free pattern such as
 * larson, so it must not be a branch of its own). */
#define HPM_CURRENT_CREDIT (1 << 30)
static inline int32_t hpm_list_threshold(unsigned list) {
    return list == LIST_FULL ? (int32_t)UINT16_MAX : list == LIST_CURRENT ? -HPM_CURRENT_CREDIT : 1;
}
/* Live blocks; not kept while the slab is in a hand (heap.c). */
static inline uint32_t hpm_slab_used(const hpm_span_t *s) { return (uint32_t)(s->credit + hpm_list_threshold(s->list)); }
static inline void hpm_slab_set_used(hpm_span_t *s, uint32_t used) { s->credit = (int32_t)used - hpm_list_threshold(s->list); }
static inline void hpm_slab_set_list(hpm_span_t *s, unsigned list) {
    uint32_t used = hpm_slab_used(s);
    s->list = (uint8_t)list;
    s->push_to = (void ***)&s->free;   /* a current slab's hand is set up by heap.c after this */
    hpm_slab_set_used(s, used);
}
/* n live blocks fewer, after a local free has pushed them: the new
 * credit. A release store (a plain move on x86): the asleep drain
 * (remote.c) reads the credit of a slab that is not current with
 * acquire, and a drain that sees it fall sees the push before it. */
static inline int32_t hpm_slab_credit_sub(hpm_span_t *s, int32_t n) {
    int32_t c = __atomic_load_n(&s->credit, __ATOMIC_RELAXED) - n;
    __atomic_store_n(&s->credit, c, __ATOMIC_RELEASE);
    return c;
}
/* Counts a local free (one live block fewer); true when the slow path must look (the list's threshold). */
static inline bool hpm_slab_count_free(hpm_span_t *s) { return hpm_slab_credit_sub(s, 1) < 0; }

/* n local frees into s at once: the blocks head..tail, already linked to
 * each other, join its list (or the hand) with one splice, and the slow
 * path looks once, after the last (remote.c collects runs so). */
static inline void hpm_slab_free_run(hpm_heap_t *h, hpm_span_t *s, void **head, void **tail, int32_t n) {
    void ***to = s->push_to;
    tail[0] = *to;
    *to = head;
    if (unlikely(hpm_slab_credit_sub(s, n) < 0)) _hpm_heap_free_slow(h, s);
}
static inline void hpm_slab_free_local(hpm_heap_t *h, hpm_span_t *s, void **b) { hpm_slab_free_run(h, s, b, b, 1); }

/* remote.c */
HPM_INTERNAL void _hpm_remote_push(hpm_heap_t *h, hpm_heap_t *to, void **b);
/* _hpm_remote_push, then take the inbox if anything waits in it. */
HPM_INTERNAL void _hpm_remote_push_poll(hpm_heap_t *h, hpm_heap_t *to, void **b);
/* The outbox slot for owner to: a hash of its address. */
static inline unsigned hpm_outbox_slot(const hpm_heap_t *to) {
    return (unsigned)(((uintptr_t)to >> 6) * 0x9e3779b9u >> 29) & (HPM_OUTBOX_SLOTS - 1);
}
/* Look-ahead: a block of 24 bytes or more gets, in its third word, the
 * block pushed HPM_OUTBOX_AHEAD pushes before it (or a stale pointer:
 * the owner only prefetches it, remote.c). */
static inline void hpm_outbox_ahead(hpm_outbox_t *o, const hpm_span_t *s, void **b) {
    void ***r = &o->recent[o->count % HPM_OUTBOX_AHEAD];
    if (s->block_bytes >= 3 * sizeof(void *)) b[2] = *r;
    *r = b;
}
/* A remote free into a batch that is open for to and not about to fill:
 * a few stores, inline. False, with nothing done, for anything else (a new
 * owner for the slot, a first block, a full batch): _hpm_remote_push. */
static inline bool hpm_remote_push_open(hpm_heap_t *h, hpm_heap_t *to, const hpm_span_t *s, void **b) {
    hpm_outbox_t *o = &h->outbox[hpm_outbox_slot(to)];
    if (unlikely(o->to != to || o->count == 0 || o->count >= HPM_OUTBOX_BATCH - 1)) return false;
    hpm_outbox_ahead(o, s, b);
    b[0] = o->head;
    o->head = b;
    o->count++;
    h->outbox_blocks++;
    return true;
}
HPM_INTERNAL void _hpm_remote_flush(hpm_heap_t *h);
HPM_INTERNAL void _hpm_remote_drain(hpm_heap_t *h);
HPM_INTERNAL void _hpm_remote_close(hpm_heap_t *h);
HPM_INTERNAL void _hpm_remote_open(hpm_heap_t *h);
/* Whether senders judge owner `to` asleep (remote.c): its blocks then wait in its inbox, none are kept. */
HPM_INTERNAL bool _hpm_remote_asleep(const hpm_heap_t *to);
/* The asleep drain (remote.c, background thread or a drain_idle(0)
 * caller, heaps_lock held): h's gate closed and fenced, its owner outside
 * its slab lists. Takes h's inbox, gives back every slab of h that the
 * inbox empties, and puts the other blocks back; the slabs it gave back. */
HPM_INTERNAL unsigned _hpm_remote_drain_asleep(hpm_heap_t *h);
/* Tests only (test_asleep): called by the asleep drain between its count and its verdicts. */
HPM_INTERNAL extern void (*_hpm_asleep_test_hook)(hpm_heap_t *h);
/* Tests only (test_forkexit): called by a thread's exit (heap.c, heap_abandon) before it abandons class cls's slabs. */
HPM_INTERNAL extern void (*_hpm_abandon_test_hook)(unsigned cls);
/* heap.c, for it: the slabs of h on the list through drain_next (each on h's avail or full list), unlinked and given back to the pageheap. */
HPM_INTERNAL void _hpm_heap_release_drained(hpm_heap_t *h, hpm_span_t *list);
static inline void hpm_remote_poll(hpm_heap_t *h) {
    if (atomic_load_explicit(&h->inbox, memory_order_relaxed)) _hpm_remote_drain(h);
}

/* spancache.c */
HPM_INTERNAL hpm_span_t *_hpm_spancache_get(hpm_heap_t *h, size_t n_pages);
/* false: not a cacheable span (the caller frees it); true: kept. */
HPM_INTERNAL bool _hpm_spancache_put(hpm_heap_t *h, hpm_span_t *s);
HPM_INTERNAL void _hpm_spancache_flush(hpm_heap_t *h);
/* The idle drain's gate (spancache.c), around the owner's span cache and
 * emptied-slab operations. The drain (background thread, heaps_lock
 * held): close h's gate, fence every thread (fence_all_threads), then
 * drain_closed: h's whole cache to the central cache unless its owner is
 * inside the gate (or the fence failed; true if drained), then heap.c
 * gives back its emptied slabs, and the gate opens again. */
HPM_INTERNAL uint32_t _hpm_heap_gate_enter(hpm_heap_t *h);
HPM_INTERNAL void _hpm_heap_gate_leave(hpm_heap_t *h, uint32_t in);
/* The slab gate (gate.h, heap.c): the owner, around its slab lists; it nests. */
HPM_INTERNAL void _hpm_heap_slab_gate_enter(hpm_heap_t *h);
HPM_INTERNAL void _hpm_heap_slab_gate_leave(hpm_heap_t *h);
HPM_INTERNAL void _hpm_heap_gate_close(hpm_heap_t *h);
HPM_INTERNAL void _hpm_heap_gate_open(hpm_heap_t *h);
HPM_INTERNAL bool _hpm_spancache_drain_closed(hpm_heap_t *h, bool fenced);
/* heap.c: drain the span caches and emptied slabs of heaps whose owners
 * made no operation on them for idle_ticks of these calls in a row (0:
 * every heap now; tests). False when the OS gives no process-wide fence
 * (membarrier). */
HPM_INTERNAL bool _hpm_heaps_drain_idle(unsigned idle_ticks);
HPM_INTERNAL extern uint64_t _hpm_idle_drains;   /* caches drained so far (heaps_lock) */
HPM_INTERNAL extern uint64_t _hpm_asleep_drains, _hpm_asleep_slabs;   /* asleep drains so far, and the slabs they gave back (heaps_lock) */
/* At most one thread has a heap now (heap.c; read relaxed): the central
 * medium cache then serves no other thread (transfer.c). */
HPM_INTERNAL extern bool _hpm_one_heap;
/* Bumped when a program thread that held a heap ends and leaves none in
 * use (heap.c), with a wake of _hpm_bg_wake: the background thread then
 * looks soon whether the process must exit (init.c). */
HPM_INTERNAL extern uint32_t _hpm_gone_hint;
/* Bumped (rate-limited) when a sender finds an owner's inbox untaken
 * batch after batch (remote.c): the background thread then looks for
 * asleep owners at once (init.c, heap.c _hpm_heaps_drain_asleep). */
HPM_INTERNAL extern uint32_t _hpm_asleep_hint;
/* The background thread's futex word: every hint bumps it and wakes it (heap.c). */
HPM_INTERNAL extern uint32_t _hpm_bg_wake;
HPM_INTERNAL void _hpm_background_wake(void);
/* The asleep drain alone, for heaps found with an untaken inbox at the
 * look before (heaps_lock taken inside); true when another look soon is
 * worth it (an inbox found waiting for the first time, or slabs given back). */
HPM_INTERNAL bool _hpm_heaps_drain_asleep(void);

/* The medium caches' byte bounds follow the heap: the pageheap's used
 * pages >> shift, at least HPM_SPANCACHE_MIN_BYTES, at most max_bytes
 * (spancache.c, cache_bound). */
static inline size_t hpm_heap_share_bytes(unsigned shift, size_t max_bytes) {
    size_t b = (__atomic_load_n(&_hpm_ph.used_pages_total, __ATOMIC_RELAXED) << HPM_PAGE_SHIFT) >> shift;
    return b < HPM_SPANCACHE_MIN_BYTES ? HPM_SPANCACHE_MIN_BYTES : b > max_bytes ? max_bytes : b;
}

/* Medium size classes: 4 per power of two of pages, 3..256 pages. */
static inline unsigned hpm_medium_class(size_t n_pages) {
    if (n_pages <= 4) return (unsigned)n_pages - 3u;
    unsigned b = 63u - (unsigned)__builtin_clzl(n_pages - 1);          /* 2..7 */
    size_t step = (size_t)1 << (b - 2u);
    return 2u + (b - 2u) * 4u + (unsigned)((n_pages + step - 1) >> (b - 2u)) - 5u;
}
static inline size_t hpm_medium_pages(unsigned cls) {
    if (cls < 2) return cls + 3u;
    unsigned b = 2u + (cls - 2u) / 4u;
    return (size_t)(5u + (cls - 2u) % 4u) << (b - 2u);
}
static inline size_t hpm_medium_bytes(unsigned cls) { return hpm_medium_pages(cls) << HPM_PAGE_SHIFT; }
/* Spans moved per batch between a thread and the central cache: about
 * 256 KiB, 2..16 spans (64 / pages, clamped). */
static inline unsigned hpm_medium_batch(unsigned cls) {
    static const uint8_t batch[HPM_MEDIUM_CLASSES] = {16, 16, 12, 10, 9, 8, 6, 5, 4, 4, 3, 2, 2,
                                                      2,  2,  2,  2,  2, 2, 2, 2, 2, 2, 2, 2, 2};
    return batch[cls];
}
/* A thread's span cache keeps up to HPM_SPANCACHE_BATCHES batches of each
 * class and the one span that makes a drain due: 8 * batch + 1 slots
 * (8 = HPM_SPANCACHE_BATCHES), class cls from slot
 * _hpm_medium_slot0[cls] of the heap's span_stack (set by
 * _hpm_classes_init from the batches; they add up to HPM_SPANCACHE_SLOTS). */
HPM_INTERNAL extern uint16_t _hpm_medium_slot0[HPM_MEDIUM_CLASSES + 1];

/* transfer.c: the central medium cache, one array and lock per class */
#define HPM_TRANSFER_MAX_BYTES ((size_t)32 << 20)   /* over all classes; while one thread has a heap, at most a 16th of the heap (transfer.c) */
#define HPM_TRANSFER_HEAP_SHIFT 4
/* Up to want spans of class cls into out[], all marked cached: from the
 * central cache, else fresh from the pageheap (one lock hold). Returns
 * how many. */
HPM_INTERNAL unsigned _hpm_transfer_get(hpm_heap_t *h, unsigned cls, unsigned want, hpm_span_t **out);
/* n spans of class cls (marked cached) from in[] into the central cache,
 * or to the pageheap (one lock hold) where it is full. */
HPM_INTERNAL void _hpm_transfer_put(unsigned cls, hpm_span_t *const *in, unsigned n);
/* Central spans back to the pageheap: all (trim), or only those of
 * classes nobody took from since the last tick (idle). */
HPM_INTERNAL void _hpm_transfer_release(bool idle_only);
HPM_INTERNAL size_t _hpm_transfer_bytes(void);
HPM_INTERNAL void _hpm_transfer_fork_prepare(void);
HPM_INTERNAL void _hpm_transfer_fork_parent(void);
HPM_INTERNAL void _hpm_transfer_fork_child(void);

/* slab.c */
HPM_INTERNAL void _hpm_slab_format(hpm_span_t *s, unsigned cls);
/* An emptied slab (no block live or on its way) formatted for class cls. */
HPM_INTERNAL void _hpm_slab_reformat(hpm_span_t *s, unsigned cls);
/* Formats the next page's worth of never-used blocks onto the free list;
 * false when there is none. Owner only. */
HPM_INTERNAL bool _hpm_slab_extend(hpm_span_t *s);
/* Gives back the slab's pages that hold only free blocks (subrelease
 * inside a live slab); returns the pages released. Owner only. */
HPM_INTERNAL size_t _hpm_slab_shed(hpm_span_t *s);
/* Puts the blocks of given-back pages on the free list again. Owner only. */
HPM_INTERNAL void _hpm_slab_refill(hpm_span_t *s);
HPM_INTERNAL extern size_t _hpm_slab_held_pages;

/* ---- errors (message.c) ---- */
HPM_INTERNAL void _hpm_fatal(const char *fn, const void *p, const char *what) __attribute__((noreturn));

/* ---- init (init.c) ---- */
HPM_INTERNAL extern atomic_int _hpm_ready;      /* 2 once initialised */
HPM_INTERNAL void _hpm_init_slow(void);
static inline void hpm_ensure_init(void) {
    if (unlikely(atomic_load_explicit(&_hpm_ready, memory_order_acquire) != 2)) _hpm_init_slow();
}
HPM_INTERNAL void _hpm_background_kick(void);   /* malloc paths only (init.c) */
HPM_INTERNAL extern atomic_int _hpm_background_started;   /* the background thread runs (or is starting) */
/* Refresh the computed counters (stats.c), for the background thread. */
HPM_INTERNAL void _hpm_stats_refresh_light(void);
/* Makes the counters follow ph (its on_change hook) and fills them now. */
HPM_INTERNAL void _hpm_stats_watch(hpm_pageheap_t *ph);
/* Refresh every computed counter now (stats.c, for hpm_stats_get). */
HPM_INTERNAL void _hpm_stats_refresh(void);
/* Gives the pageheap its release policy from the options, in one call. */
static inline void hpm_options_apply(hpm_pageheap_t *ph) {
    _hpm_ph_configure(ph, (size_t)_hpm_option(HPM_OPT_RELEASE_DELAY_MS), (size_t)_hpm_option(HPM_OPT_HP_CACHE),
                      _hpm_option(HPM_OPT_SUBRELEASE) != 0);
}

/* ---- options (options.c) ---- */
HPM_INTERNAL void _hpm_options_init(void);
HPM_INTERNAL const char *_hpm_page_mode_name(int mode);
HPM_INTERNAL bool _hpm_parse_size(const char *s, long *out);
/* value lies in the option's range. */
HPM_INTERNAL bool _hpm_option_valid(hpm_option_t opt, long value);
/* Stores a new value; EINVAL when out of range or fixed at start (pages,
 * arena size) and different. 0 otherwise. */
HPM_INTERNAL int _hpm_option_store(hpm_option_t opt, long value);

/* ---- invariant checkers (check.c) ---- */
#include "check.h"
#endif
