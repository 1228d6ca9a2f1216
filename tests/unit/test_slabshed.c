/* test_slabshed.c: subrelease inside a live slab works for every slab
 * size its guard admits (issue 13 item 7: the free-block bitmap was sized
 * for 4096 blocks while slabs of up to 32 pages, 8192 blocks of 16 bytes,
 * were admitted). A 32-page slab of the 16-byte class is formatted, every
 * page touched, the blocks of pages 0 and 20 (and one block of page 31)
 * kept allocated; _hpm_slab_shed must give back exactly the 29 other pages,
 * hold exactly their blocks, and leave the kept blocks and the free list
 * intact; _hpm_slab_refill then restores every block. */
#include <string.h>
#include "internal.h"
#include "testhelper.h"

static int on_page(hpm_span_t *s, void *b, unsigned page) {
    return (((uintptr_t)b - s->start) >> HPM_PAGE_SHIFT) == page;
}

static uint32_t free_count(hpm_span_t *s) {
    uint32_t n = 0;
    for (void **b = s->free; b; b = b[0]) n++;
    return n;
}

int main(void) {
    void *volatile first = malloc(16);   /* the allocator is set up */
    free(first);
    pthread_mutex_lock(&_hpm_ph.lock);
    hpm_span_t *s = _hpm_ph_alloc_span(&_hpm_ph, 32, SPAN_SLAB, 0);
    pthread_mutex_unlock(&_hpm_ph.lock);
    CHECK(s != NULL, "a 32-page span");
    if (!s) return TEST_DONE();
    _hpm_slab_format(s, 0);
    while (_hpm_slab_extend(s)) { }   /* every block formatted */
    CHECK(s->capacity == 8192, "capacity %u, want 8192", s->capacity);
    for (unsigned p = 0; p < 32; p++) ((char *)s->start)[((size_t)p << HPM_PAGE_SHIFT) + 8] = 1;
    /* keep the blocks of pages 0 and 20 and the last block (page 31) */
    void **keep = NULL, **list = NULL;
    uint32_t kept = 0;
    void *last = (void *)(s->start + (size_t)8191 * 16);
    for (void **b = s->free, **next; b; b = next) {
        next = b[0];
        if (on_page(s, b, 0) || on_page(s, b, 20) || (void *)b == last) { b[1] = NULL; kept++; continue; }
        b[0] = list;
        list = b;
    }
    (void)keep;
    s->free = list;
    hpm_slab_set_used(s, kept);
    CHECK(kept == 2 * 256 + 1, "kept %u blocks", kept);
    size_t before = _hpm_slab_held_pages;
    size_t shed = _hpm_slab_shed(s);
    CHECK(shed == 29, "shed %zu pages, want 29", shed);
    CHECK(_hpm_slab_held_pages - before == 29, "held pages counter %zu", _hpm_slab_held_pages - before);
    CHECK(s->held_pages_mask == (0x7fffffffu & ~1u & ~(1u << 20)), "held mask %#x", s->held_pages_mask);
    CHECK(s->held_blocks == 29 * 256, "held blocks %u, want %u", s->held_blocks, 29 * 256);
    CHECK(free_count(s) == 8192 - kept - 29 * 256, "free list %u", free_count(s));
    uint32_t wrong = 0;
    for (void **b = s->free; b; b = b[0])
        if (!on_page(s, b, 31)) wrong++;
    CHECK(wrong == 0, "%u free-list blocks on given-back pages", wrong);
    _hpm_slab_refill(s);
    CHECK(s->held_blocks == 0 && s->held_pages_mask == 0, "refill clears the held state");
    CHECK(free_count(s) == 8192 - kept, "after refill %u free, want %u", free_count(s), 8192 - kept);
    return TEST_DONE();
}
