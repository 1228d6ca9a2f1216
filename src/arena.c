/* arena.c: the reservations that hold the heap (arenas), the address
 * space they may take, and the page map that finds a span from an address.
 *
 * The heap starts in one arena (HPM_ARENA_RESERVE, 256 GiB by default) and
 * adds arenas as it needs them, each at least as large as all before it,
 * up to HPM_MAX_ARENAS and the hugepage descriptors reserved at start (16
 * times memory plus swap, 1 to 64 TiB). Under RLIMIT_AS every reservation
 * takes at most half of the room the limit leaves (the program needs the
 * rest), and is halved until the kernel accepts it; a limit set later is
 * seen at the next reservation and when the heap grows (hugepage.c).
 *
 * The page map is kept by address, not by arena: _hpm_l1 has one slot per
 * GiB of the 48-bit address space, each NULL or a chunk of 262144 span
 * pointers, so that a lookup costs two loads however many arenas there
 * are. A chunk is committed whole before it is published and never moves
 * or goes away, so free() may read it without a lock, and a wild pointer
 * in a published GiB reads NULL. Each arena reserves the chunks of the
 * GiBs it spans, in address order, so the first arena's map is one array.
 * Beside it, each arena reserves a 512-byte slot per 32 KiB granule for
 * the records of slabs that start there (internal.h, hpm_slab_guess),
 * committed with the map chunks that cover them.
 *
 * Invariants: arenas do not overlap, lie below 2^48, and are 2 MiB aligned
 * (1 GiB aligned and sized in 1g mode, or when no limit is near: sized up
 * to whole GiBs, never cut below the request); hugepage
 * indices run on from one arena to the next. Runs with ph->lock held,
 * except during init. */
#include <errno.h>
#include "internal.h"

hpm_span_t **_hpm_l1[HPM_L1_ENTRIES];
hpm_map_window_t _hpm_map0;

#define CHUNK_BYTES (HPM_CHUNK_PAGES * sizeof(hpm_span_t *))
#define GIB_OF(addr) ((uintptr_t)(addr) >> HPM_L1_SHIFT)

size_t _hpm_as_room_bytes(const hpm_os_t *os) {
    size_t limit = os->as_limit_bytes ? os->as_limit_bytes() : SIZE_MAX;
    if (limit == SIZE_MAX) return SIZE_MAX;
    size_t used = os->as_used_bytes ? os->as_used_bytes() : 0;
    return used >= limit ? 0 : limit - used;
}

void *_hpm_reserve_sized(const hpm_os_t *os, size_t want_bytes, size_t min_bytes, size_t align_bytes, size_t *got_bytes) {
    size_t room = _hpm_as_room_bytes(os);
    if (room != SIZE_MAX && want_bytes > room / 2) want_bytes = room / 2;
    want_bytes &= ~(HPM_HP_BYTES - 1);
    if (want_bytes < min_bytes) want_bytes = min_bytes;
    for (;;) {
        void *p = os->reserve(want_bytes, align_bytes);
        if (p) { *got_bytes = want_bytes; return p; }
        if (want_bytes <= min_bytes) return NULL;
        want_bytes = (want_bytes / 2) & ~(HPM_HP_BYTES - 1);
        if (want_bytes < min_bytes) want_bytes = min_bytes;
    }
}

int _hpm_arena_add(hpm_pageheap_t *ph, size_t need_hp, size_t align_hp) {
    if (ph->n_arenas == HPM_MAX_ARENAS || ph->reserved_hp + need_hp > ph->index_cap_hp) return ENOMEM;
    bool whole_gib = ph->page_mode == PAGES_1G;
    if (whole_gib) need_hp = (need_hp + HPM_PAGES_PER_HP - 1) & ~(size_t)(HPM_PAGES_PER_HP - 1);
    size_t left_hp = ph->index_cap_hp - ph->reserved_hp;
    size_t want_hp = ph->reserved_hp;   /* as large as all arenas before it */
    if (ph->n_arenas == 0) want_hp = ph->first_arena_hp;
    if (want_hp < need_hp) want_hp = need_hp;
    if (want_hp > left_hp) want_hp = left_hp;
    if (need_hp > want_hp) return ENOMEM;
    size_t room = _hpm_as_room_bytes(ph->os);
    size_t want_bytes = want_hp << HPM_HP_SHIFT;
    if (room == SIZE_MAX || room / 4 > want_bytes + HPM_GB_BYTES) whole_gib = true;
    size_t min_hp = need_hp;
    if (whole_gib) {   /* whole GiBs, rounded up: the cut below must not fall under the request (session 49) */
        size_t gib_hp = HPM_GB_BYTES >> HPM_HP_SHIFT;
        size_t need_up_hp = (need_hp + gib_hp - 1) & ~(gib_hp - 1);
        if (need_up_hp <= left_hp) {
            min_hp = need_up_hp;
            want_hp = (want_hp + gib_hp - 1) & ~(gib_hp - 1);
            if (want_hp > left_hp) want_hp = left_hp & ~(gib_hp - 1);
            want_bytes = want_hp << HPM_HP_SHIFT;
        } else {
            whole_gib = false;   /* near the cap on indices (never in 1g mode, whose need is whole GiBs): 2 MiB granularity rather than no arena */
        }
    }
    size_t align = align_hp << HPM_HP_SHIFT;
    if (whole_gib && align < HPM_GB_BYTES) align = HPM_GB_BYTES;
    size_t got = 0;
    char *base = _hpm_reserve_sized(ph->os, want_bytes, min_hp << HPM_HP_SHIFT, align, &got);
    if (!base) return ENOMEM;
    if (whole_gib && (got & (HPM_GB_BYTES - 1))) {   /* so that no GiB is shared with anything else */
        size_t keep = got & ~(HPM_GB_BYTES - 1);
        ph->os->unreserve(base + keep, got - keep);
        got = keep;
    }
    if (got < (need_hp << HPM_HP_SHIFT) || ((uintptr_t)base + got) >> HPM_ADDR_BITS) {
        if (got) ph->os->unreserve(base, got);
        return ENOMEM;
    }
    hpm_arena_t *a = &ph->arenas[ph->n_arenas];
    size_t gibs = GIB_OF(base + got - 1) - GIB_OF(base) + 1, unmapped = 0;
    for (uintptr_t g = GIB_OF(base); g <= GIB_OF(base + got - 1); g++) unmapped += !__atomic_load_n(&_hpm_l1[g], __ATOMIC_ACQUIRE);
    /* an arena whose GiBs all have chunks (another arena's: chunks never go
     * away) never commits one of its own, so it reserves none: under
     * RLIMIT_AS each later arena of a small heap reserved 2 MiB for nothing */
    a->map_region = (hpm_meta_region_t){0};
    if (unmapped && _hpm_meta_region_init(&a->map_region, gibs * CHUNK_BYTES)) {
        ph->os->unreserve(base, got);
        return ENOMEM;
    }
    size_t rec_cover = got < HPM_REC_COVER_BYTES ? got : HPM_REC_COVER_BYTES;
    if (_hpm_meta_region_init(&a->rec_region, (rec_cover >> HPM_GRANULE_SHIFT) * HPM_SLOT_BYTES)) {
        /* the map's reservation goes too: nothing is committed or published
         * in it yet, and the next try reserves its own (kept, each failed
         * try under RLIMIT_AS took 2 MiB more, until the heap could never start) */
        if (a->map_region.limit) ph->os->unreserve((void *)a->map_region.base, a->map_region.limit);
        a->map_region = (hpm_meta_region_t){0};
        ph->os->unreserve(base, got);
        return ENOMEM;
    }
    a->rec_region.small_pages = true;   /* 4 KiB pages: a slot written backs 4 KiB, given back with its hugepage */
    a->base = (uintptr_t)base;
    a->first_hp = ph->reserved_hp;
    a->n_hp = got >> HPM_HP_SHIFT;
    if (ph->n_arenas == 0) {
        ph->base = a->base;
        ph->page_map = (hpm_span_t **)a->map_region.base + ((a->base >> HPM_PAGE_SHIFT) & (HPM_CHUNK_PAGES - 1));
    }
    ph->reserved_hp += a->n_hp;
    __atomic_store_n(&ph->n_arenas, ph->n_arenas + 1, __ATOMIC_RELEASE);
    return 0;
}

hpm_arena_t *_hpm_arena_of_index(hpm_pageheap_t *ph, size_t idx) {
    for (unsigned k = ph->n_arenas; k-- > 0; )
        if (idx >= ph->arenas[k].first_hp && idx < ph->arenas[k].first_hp + ph->arenas[k].n_hp) return &ph->arenas[k];
    return NULL;
}

hpm_arena_t *_hpm_arena_of_addr(hpm_pageheap_t *ph, uintptr_t addr) {
    unsigned n = __atomic_load_n(&ph->n_arenas, __ATOMIC_ACQUIRE);
    for (unsigned k = n; k-- > 0; ) {
        const hpm_arena_t *a = &ph->arenas[k];
        if (addr - a->base < (a->n_hp << HPM_HP_SHIFT)) return &ph->arenas[k];
    }
    return NULL;
}

bool _hpm_ph_owns(const void *p) {
    hpm_arena_t *a = _hpm_arena_of_addr(&_hpm_ph, (uintptr_t)p);
    return a && a->first_hp + (((uintptr_t)p - a->base) >> HPM_HP_SHIFT) < __atomic_load_n(&_hpm_ph.top_hp, __ATOMIC_ACQUIRE);
}

/* Extends _hpm_map0 over the GiBs of the process's first arena whose
 * published chunk is this arena's own, from its first GiB on (a GiB shared
 * with another pageheap's arena, whose chunk won, ends the window). */
static void map_window_grow(const hpm_arena_t *a) {
    uintptr_t end_addr = a->base + (a->n_hp << HPM_HP_SHIFT), g0 = GIB_OF(a->base), g = g0;
    for (;; g++) {
        hpm_span_t **mine = (hpm_span_t **)(a->map_region.base + (g - g0) * CHUNK_BYTES);
        if ((g << HPM_L1_SHIFT) >= end_addr || __atomic_load_n(&_hpm_l1[g], __ATOMIC_ACQUIRE) != mine) break;
    }
    uintptr_t covered = g << HPM_L1_SHIFT;
    if (covered > end_addr) covered = end_addr;
    if (covered > a->base + HPM_REC_COVER_BYTES) covered = a->base + HPM_REC_COVER_BYTES;   /* free's guess reads a slot for any address in the window */
    if (covered <= a->base) return;
    __atomic_store_n(&_hpm_map0.base, a->base, __ATOMIC_RELAXED);
    __atomic_store_n(&_hpm_map0.map, (hpm_span_t **)a->map_region.base + ((a->base >> HPM_PAGE_SHIFT) & (HPM_CHUNK_PAGES - 1)), __ATOMIC_RELAXED);
    __atomic_store_n(&_hpm_map0.recs, (hpm_span_t *)a->rec_region.base, __ATOMIC_RELAXED);
    __atomic_store_n(&_hpm_map0.limit_bytes, covered - a->base, __ATOMIC_RELEASE);
}

void _hpm_arena_release_slots(hpm_pageheap_t *ph, uintptr_t hp_addr) {
    _Static_assert(HPM_HP_SLOT_BYTES % HPM_PAGE_BYTES == 0, "a hugepage's slots fill whole pages");
    hpm_arena_t *a = _hpm_arena_of_addr(ph, hp_addr);
    if (!a) return;
    uintptr_t first = (uintptr_t)hpm_arena_slot(a, hp_addr);
    if (first + HPM_HP_SLOT_BYTES > a->rec_region.base + a->rec_region.committed) return;
    (void)ph->os->release((void *)first, HPM_HP_SLOT_BYTES);
}

int _hpm_map_cover(hpm_pageheap_t *ph, hpm_arena_t *a, uintptr_t from, uintptr_t to) {
    (void)ph;
    for (uintptr_t g = GIB_OF(from); g <= GIB_OF(to - 1); g++) {
        if (__atomic_load_n(&_hpm_l1[g], __ATOMIC_ACQUIRE)) continue;
        size_t slot = g - GIB_OF(a->base);
        int e = _hpm_meta_region_ensure(&a->map_region, (slot + 1) * CHUNK_BYTES);
        if (e) return e;
        hpm_span_t **chunk = (hpm_span_t **)(a->map_region.base + slot * CHUNK_BYTES), **expected = NULL;
        /* another pageheap (a test's) may share an edge GiB: first one wins */
        __atomic_compare_exchange_n(&_hpm_l1[g], &expected, chunk, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    }
    /* the slab record slots of every covered GiB: free reads the slot of
     * any address that _hpm_map0 covers (committed, they cost memory only
     * where a record is written) */
    uintptr_t end = (GIB_OF(to - 1) + 1) << HPM_L1_SHIFT, arena_end = a->base + (a->n_hp << HPM_HP_SHIFT);
    if (end > arena_end) end = arena_end;
    if (end > a->base + HPM_REC_COVER_BYTES) end = a->base + HPM_REC_COVER_BYTES;
    int e = _hpm_meta_region_ensure(&a->rec_region, ((end - a->base) >> HPM_GRANULE_SHIFT) * HPM_SLOT_BYTES);
    if (e) return e;
    if (ph == &_hpm_ph && a == &ph->arenas[0]) map_window_grow(a);
    return 0;
}
