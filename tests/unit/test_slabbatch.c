/* test_slabbatch.c: a heap gives emptied slabs back to the pageheap in
 * batches (issue 11 item 7: the pageheap lock per batch of slabs, not per
 * slab). A thread fills 40 slabs of the 256-byte class and frees every
 * block in allocation order, so one slab after another empties. The heap
 * keeps at most HPM_HEAP_EMPTY_SLABS emptied slabs; the one that would be
 * the 17th goes back with 7 kept ones under one pageheap lock, so the
 * count drops from 16 to 9 (slab by slab it stayed at 16). Each batch must
 * return exactly its 8 slabs' pages to the pageheap, and the kept slabs
 * must be empty, on the empty list of their class and owned by the
 * heap. A kept slab then serves another class, formatted again. At
 * thread exit every kept slab goes back too (pages in use as before the
 * thread). */
#include <malloc.h>
#include <pthread.h>
#include <sys/mman.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define BLOCK_BYTES 256
#define SLABS 40

static unsigned kept_on_lists(hpm_heap_t *h, unsigned *bad) {
    unsigned n = 0;
    for (unsigned c = 0; c < HPM_CLASSES; c++)
        for (hpm_span_t *s = h->empty[c]; s; s = s->next) {
            n++;
            if (s->list != LIST_EMPTY || hpm_slab_used(s) != 0 || s->class_idx != c ||
                atomic_load_explicit(&s->owner, memory_order_relaxed) != h)
                (*bad)++;
        }
    return n;
}

/* Every class under 4 KiB has slabs of one size (but a heap's small
 * first ones), so a kept slab of the 256-byte class serves another class
 * of them that runs dry: a 2048-byte
 * block lands in one, formatted again for its class, with no new pages. */
static void kept_serves_other_class(hpm_heap_t *h) {
    hpm_span_t *kept[HPM_HEAP_EMPTY_SLABS];
    unsigned n = 0;
    for (unsigned c = 0; c < HPM_CLASSES; c++)
        for (hpm_span_t *s = h->empty[c]; s && n < HPM_HEAP_EMPTY_SLABS; s = s->next) kept[n++] = s;
    CHECK(n > 0 && n == h->empty_slabs, "%u kept slabs listed, %u counted", n, h->empty_slabs);
    size_t pages = ht_used_pages();
    unsigned cls = hpm_size_class(2048);
    unsigned char *p = malloc(2048);
    hpm_span_t *s = p ? hpm_span_of(p) : NULL;
    bool was_kept = false;
    for (unsigned i = 0; i < n; i++) was_kept |= kept[i] == s;
    CHECK(s && was_kept && s->class_idx == cls && s->block_bytes == 2048 && s->list == LIST_CURRENT &&
              h->empty_slabs == n - 1 && ht_used_pages() == pages,
          "a 2048-byte block in a kept slab (%d), class %u (want %u), %u kept (want %u), pages %zu -> %zu", was_kept,
          s ? s->class_idx : 0, cls, h->empty_slabs, n - 1, pages, ht_used_pages());
    char why[256] = "";
    CHECK(s && _hpm_check_span(s, why), "the slab formatted again: %s", why);
    void *q[8];
    unsigned good = 0;
    for (unsigned i = 0; i < 8; i++) {
        q[i] = malloc(2048);
        if (q[i] && malloc_usable_size(q[i]) == 2048 && (i >= 3 || hpm_span_of(q[i]) == s)) good++;
        if (q[i]) memset(q[i], 0x6b, 2048);
    }
    CHECK(good == 8, "%u of 8 more blocks of the class with its size (the first 3 in the same slab)", good);
    if (p) memset(p, 0x6a, 2048);
    for (unsigned i = 0; i < 8; i++) free(q[i]);
    CHECK(!p || (p[0] == 0x6a && p[2047] == 0x6a), "the first block kept its contents");
    free(p);
}

static void *run(void *arg) {
    (void)arg;
    unsigned cls = hpm_size_class(BLOCK_BYTES);
    size_t per_slab = _hpm_classes[cls].capacity;
    size_t n = per_slab * SLABS;
    void **blk = mmap(NULL, n * sizeof *blk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);   /* not from the heap */
    CHECK(blk != MAP_FAILED);
    if (blk == MAP_FAILED) return NULL;
    size_t got = 0;
    for (size_t i = 0; i < n; i++) {
        blk[i] = malloc(BLOCK_BYTES);
        if (!blk[i]) break;
        got++;
        memset(blk[i], (int)(i & 0xff), BLOCK_BYTES);
    }
    CHECK(got == n, "%zu of %zu mallocs", got, n);
    if (got != n) return NULL;
    hpm_heap_t *h = hpm_my_heap();
    CHECK(h != NULL && h->empty_slabs == 0, "no emptied slab kept yet: %u", h ? h->empty_slabs : 0);
    unsigned max_kept = 0, drops = 0, wrong_drops = 0, bad = 0, prev = h->empty_slabs;
    size_t pages_before = ht_used_pages();
    size_t wrong_pages = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char *p = blk[i];
        if (p[0] != (unsigned char)(i & 0xff) || p[BLOCK_BYTES - 1] != (unsigned char)(i & 0xff)) bad++;
        free(p);
        unsigned now = h->empty_slabs;
        if (now > max_kept) max_kept = now;
        if (now < prev) {   /* a batch went back */
            drops++;
            if (prev != HPM_HEAP_EMPTY_SLABS || now != HPM_HEAP_EMPTY_SLABS + 1 - HPM_SLAB_BATCH) wrong_drops++;
            size_t pages_now = ht_used_pages();
            if (pages_before - pages_now != (size_t)HPM_SLAB_BATCH * _hpm_classes[cls].slab_pages) wrong_pages++;
            pages_before = pages_now;
        } else {
            pages_before = ht_used_pages();
        }
        prev = now;
    }
    CHECK(bad == 0, "%u blocks lost their contents", bad);
    CHECK(max_kept == HPM_HEAP_EMPTY_SLABS, "kept at most %u emptied slabs, want %u", max_kept, HPM_HEAP_EMPTY_SLABS);
    CHECK(drops >= 2, "slabs went back in %u batches, want at least 2 (40 slabs emptied)", drops);
    CHECK(wrong_drops == 0, "%u batches did not take the count from %u to %u", wrong_drops, HPM_HEAP_EMPTY_SLABS,
          HPM_HEAP_EMPTY_SLABS + 1 - HPM_SLAB_BATCH);
    CHECK(wrong_pages == 0, "%zu batches did not give back exactly %u slabs' pages", wrong_pages, HPM_SLAB_BATCH);
    unsigned lists = kept_on_lists(h, &bad);
    CHECK(lists == h->empty_slabs, "%u slabs on the empty lists, the heap counts %u", lists, h->empty_slabs);
    CHECK(bad == 0, "%u kept slabs are not empty, not on their class's list or not owned by the heap", bad);
    kept_serves_other_class(h);
    munmap(blk, n * sizeof *blk);
    return NULL;
}

int main(void) {
    void *volatile first = malloc(16);   /* the allocator is set up */
    free(first);
    pthread_t t;
    CHECK(ht_first_thread() == 0);
    size_t before = ht_used_pages();
    int made = pthread_create(&t, NULL, run, NULL);   /* checked after the join: the thread counts checks too */
    if (made == 0) pthread_join(t, NULL);
    CHECK(made == 0);
    size_t pages_after_exit = ht_used_pages();
    /* the thread's slabs, empty, all went back at exit */
    CHECK(pages_after_exit == before, "pages in use %zu after the thread exited, %zu before", pages_after_exit, before);
    return TEST_DONE();
}
