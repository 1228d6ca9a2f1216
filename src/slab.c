/* slab.c: a slab is a span cut into blocks of one size class.
 *
 * Free blocks are linked through their first word. Their second word holds
 * a cookie (a per-process secret xor the block's address) while the block
 * is free, and anything else once it is allocated; free() checks it to
 * catch double frees in O(1). Blocks freed by other threads arrive on the
 * atomic xfree stack; only the owner (or, for an abandoned slab, the
 * holder of the abandoned-list lock) moves them to the free list.
 * Invariant: used = capacity - (blocks on free), where blocks on xfree
 * still count as used until collected. */
#include "internal.h"

uint64_t _hpm_cookie_secret = 0x9e3779b97f4a7c15ull;

void _hpm_slab_format(hpm_span_t *s, unsigned cls) {
    const hpm_class_t *k = &_hpm_classes[cls];
    s->class_idx = (uint8_t)cls;
    s->block_bytes = k->block_bytes;
    s->recip = k->recip;
    s->capacity = (uint32_t)(((size_t)s->n_pages << HPM_PAGE_SHIFT) / k->block_bytes);
    s->used = 0;
    atomic_store_explicit(&s->xfree, NULL, memory_order_relaxed);
    atomic_store_explicit(&s->parked_full, 0, memory_order_relaxed);
    char *base = (char *)s->start;
    void **prev = NULL;
    for (uint32_t i = s->capacity; i-- > 0; ) {   /* build so the list runs in address order */
        void **b = (void **)(base + (size_t)i * k->block_bytes);
        b[0] = prev;
        b[1] = (void *)hpm_cookie(b);
        prev = b;
    }
    s->free = prev;
}

uint32_t _hpm_slab_collect(hpm_span_t *s) {
    void **list = atomic_exchange_explicit(&s->xfree, NULL, memory_order_acquire);
    if (!list) return 0;
    uint32_t n = 1;
    void **tail = list;
    while (tail[0]) {
        tail = tail[0];
        if (++n > s->capacity) _hpm_fatal("free", tail, "double free (a block was freed twice from other threads)");
    }
    tail[0] = s->free;
    s->free = list;
    s->used -= n;
    return n;
}
