/* slab.c: a slab is a span cut into blocks of one size class.
 *
 * Free blocks are linked through their first word. Their second word holds
 * a cookie (a per-process secret xor the block's address) while the block
 * is free, and anything else once it is allocated; free() checks it to
 * catch double frees in O(1). Only the owner (or, for an abandoned slab,
 * the holder of the abandoned-list lock) touches the free list; blocks
 * freed by other threads reach it as messages (remote.c).
 * Under subrelease, pages that hold only free blocks may be given back
 * while the slab lives (_hpm_slab_shed); their blocks leave the free list
 * ("held") until the free list runs dry and _hpm_slab_refill re-links them.
 * A held block's page reads as zero, cookie included, so meanwhile the
 * slab's fresh_lim is 0 and every free into it takes the exact test
 * (alloc.c, block_live_exact), which knows the held pages.
 * Blocks are formatted lazily, a page's worth at a time (_hpm_slab_extend):
 * blocks at or after `fresh` were never handed out and hold nothing.
 * Invariant: used = fresh - (blocks on free) - held_blocks, where blocks on
 * their way from other threads, and in any heap's hand, still count as
 * used; while the slab is current (its frees go to the hand, push_to)
 * heap.c sets used again when the hand is empty or given back. */
#include "internal.h"

uint64_t _hpm_cookie_secret = 0x9e3779b97f4a7c15ull;

/* n blocks are formatted: the count, and free's limit with it (block_ok):
 * 0 while pages are held, so that every free into the slab takes the
 * exact test (alloc.c, block_live_exact). */
static void set_fresh(hpm_span_t *s, uint32_t n) {
    __atomic_store_n(&s->fresh_blocks, n, __ATOMIC_RELAXED);
    uint64_t lim = s->held_pages_mask ? 0 : (uint64_t)n * _hpm_classes[s->class_idx].div_step;
    __atomic_store_n(&s->fresh_lim, lim, __ATOMIC_RELAXED);
}

void _hpm_slab_format(hpm_span_t *s, unsigned cls) {
    const hpm_class_t *k = &_hpm_classes[cls];
    s->class_idx = (uint8_t)cls;
    hpm_slab_set_list(s, LIST_NONE);
    __atomic_store_n(&s->block_bytes, k->block_bytes, __ATOMIC_RELAXED);   /* hpm_range reads these */
    __atomic_store_n(&s->recip, k->recip, __ATOMIC_RELAXED);
    s->div_magic = k->div_magic;
    s->capacity = (uint32_t)(((size_t)s->n_pages << HPM_PAGE_SHIFT) / k->block_bytes);
    hpm_slab_set_used(s, 0);
    s->held_blocks = 0;
    hpm_slab_set_held_mask(s, 0);
    hpm_assert((size_t)s->capacity * k->block_bytes < ((size_t)1 << 32));   /* for the div_magic check */
    hpm_assert(s->capacity < UINT16_MAX);   /* a full slab's threshold is above any count (internal.h) */
    set_fresh(s, 0);
    s->free = NULL;
    _hpm_slab_extend(s);
}

void _hpm_slab_reformat(hpm_span_t *s, unsigned cls) {
    if (s->held_pages_mask)   /* pages given back while it was empty: written again as it fills */
        __atomic_sub_fetch(&_hpm_slab_held_pages, (size_t)__builtin_popcount(s->held_pages_mask), __ATOMIC_RELAXED);
    _hpm_slab_format(s, cls);
}

/* Blocks are formatted a page at a time as the slab fills, so a slab that
 * is used a little costs only the pages it used (no 64 KiB touched at
 * once: small programs, issue 11 item 6). */
bool _hpm_slab_extend(hpm_span_t *s) {
    uint32_t fresh = hpm_slab_fresh(s);
    if (fresh >= s->capacity) return false;
    uint32_t n = (uint32_t)(HPM_PAGE_BYTES / s->block_bytes);
    if (n == 0) n = 1;
    if (n > s->capacity - fresh) n = s->capacity - fresh;
    char *base = (char *)s->start;
    void **list = s->free;
    for (uint32_t i = fresh + n; i-- > fresh; ) {   /* so the list runs in address order */
        void **b = (void **)(base + (size_t)i * s->block_bytes);
        b[0] = list;
        hpm_block_set_free(b);
        list = b;
    }
    s->free = list;
    set_fresh(s, fresh + n);
    return true;
}

size_t _hpm_slab_held_pages;

/* Shedding tracks pages in a 32-bit mask, so slabs of up to 32 pages, and
 * free blocks in a bitmap sized for such a slab of the smallest class. */
#define SHED_MAX_PAGES 32u
#define SHED_MAX_BLOCKS (SHED_MAX_PAGES * HPM_PAGE_BYTES / HPM_MIN_ALIGN)

static inline uint32_t block_index(const hpm_span_t *s, const void *b) {
    return (uint32_t)((((uintptr_t)b - s->start) * s->recip) >> 32);
}

/* Bit p set: page p of the slab overlaps block i's bytes. */
static inline uint32_t block_pages(const hpm_span_t *s, uint32_t i) {
    size_t first = ((size_t)i * s->block_bytes) >> HPM_PAGE_SHIFT;
    size_t last = ((size_t)(i + 1) * s->block_bytes - 1) >> HPM_PAGE_SHIFT;
    return (uint32_t)(((2u << last) - 1) & ~((1u << first) - 1));
}

size_t _hpm_slab_shed(hpm_span_t *s) {
    if (s->n_pages < 2 || s->n_pages > SHED_MAX_PAGES || hpm_slab_used(s) == s->capacity) return 0;
    uint64_t is_free[SHED_MAX_BLOCKS / 64] = {0};
    for (void **b = s->free; b; b = b[0]) {
        uint32_t i = block_index(s, b);
        is_free[i >> 6] |= 1ull << (i & 63);
    }
    uint32_t busy = 0;   /* pages touched by a live or held block */
    uint32_t fresh = hpm_slab_fresh(s);
    for (uint32_t i = 0; i < fresh; i++)   /* never-used blocks are not busy */
        if (!((is_free[i >> 6] >> (i & 63)) & 1)) busy |= block_pages(s, i);
    uint32_t all = s->n_pages >= 32 ? ~0u : (1u << s->n_pages) - 1;
    uint32_t shed = all & ~busy & ~s->held_pages_mask;
    if (!shed) return 0;
    /* Drop the blocks that touch a page to be given back from the free list
     * first: once released, their pages read as zero, links included. */
    void **keep = NULL;
    for (void **b = s->free, **next; b; b = next) {
        next = b[0];
        if (block_pages(s, block_index(s, b)) & shed) continue;
        b[0] = keep;
        keep = b;
    }
    s->free = keep;
    size_t pages = 0;
    uint32_t failed = 0;
    for (uint32_t p = 0; p < s->n_pages; p++) {
        if (!((shed >> p) & 1)) continue;
        uint32_t n = 1;
        while (p + n < s->n_pages && ((shed >> (p + n)) & 1)) n++;
        uint32_t run = (n >= 32 ? ~0u : (1u << n) - 1) << p;
        if (_hpm_os->release((void *)(s->start + ((uintptr_t)p << HPM_PAGE_SHIFT)), (size_t)n << HPM_PAGE_SHIFT))
            failed |= run;
        else pages += n;
        p += n - 1;
    }
    shed &= ~failed;
    /* every block that touched a candidate page was free: those that touch
     * a released page are held, the others go back on the free list */
    uint32_t held = 0;
    for (uint32_t i = fresh; i-- > 0; ) {
        uint32_t bp = block_pages(s, i);
        if (bp & shed) { held++; continue; }
        if (!(bp & failed)) continue;
        void **b = (void **)(s->start + (uintptr_t)i * s->block_bytes);
        b[0] = s->free;
        s->free = b;
    }
    if (!shed) return 0;
    s->held_blocks += held;
    hpm_slab_set_held_mask(s, s->held_pages_mask | shed);
    set_fresh(s, fresh);   /* frees take the exact test now */
    __atomic_add_fetch(&_hpm_slab_held_pages, pages, __ATOMIC_RELAXED);
    return pages;
}

void _hpm_slab_refill(hpm_span_t *s) {
    if (!s->held_pages_mask) return;
    void **list = s->free;
    for (uint32_t i = hpm_slab_fresh(s); i-- > 0; ) {
        if (!(block_pages(s, i) & s->held_pages_mask)) continue;
        void **b = (void **)(s->start + (uintptr_t)i * s->block_bytes);
        b[0] = list;
        hpm_block_set_free(b);
        list = b;
    }
    s->free = list;
    s->held_blocks = 0;
    __atomic_sub_fetch(&_hpm_slab_held_pages, (size_t)__builtin_popcount(s->held_pages_mask), __ATOMIC_RELAXED);
    hpm_slab_set_held_mask(s, 0);
    set_fresh(s, hpm_slab_fresh(s));   /* the fast test again */
}
