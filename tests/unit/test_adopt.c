/* test_adopt.c: what becomes of a dead thread's slabs (heap.c, "thread
 * exit"): a malloc adopts only an abandoned slab with a free block, a full
 * one waits for the thread that frees its blocks.
 *
 * A thread allocates FULL_SLABS slabs' worth of one class and a few blocks
 * more, so it leaves full slabs and one with free blocks, and exits. Then:
 * - a new thread's first malloc of the class adopts the slab with free
 *   blocks (the block is in it); the full slabs stay abandoned, on the
 *   full list, with no owner;
 * - a free into a full abandoned slab by a thread that may adopt takes the
 *   slab over (its owner is the freeing heap);
 * - a free into one by a coloured thread (which may not adopt small
 *   classes) leaves it abandoned but moves it to the list with free blocks,
 *   where the next malloc of the class by any thread adopts it and hands
 *   out that very block;
 * - at the end every block is freed and, after a trim, the pages in use
 *   are those from before. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define BLOCK_BYTES 512   /* coloured heaps do not adopt classes up to HPM_COLOUR_MAX_BLOCK */
#define FULL_SLABS 4
#define MAX_BLOCKS 4096
/* Blocks in a last slab: with none, the last full slab is the current one at
 * exit and joins the abandoned list with free blocks, where a malloc finds
 * it full (heap_adopt moves it to the full list). */
static size_t PARTIAL_BLOCKS;

static void *blk[MAX_BLOCKS];
static size_t n_blk;
static hpm_span_t *full_slab[FULL_SLABS];

static hpm_heap_t *owner_of(const void *p) {
    hpm_span_t *s = hpm_span_of(p);
    return s ? atomic_load_explicit(&s->owner, memory_order_relaxed) : NULL;
}

/* The dead thread: FULL_SLABS slabs filled, one more started. */
static void *filler(void *arg) {
    (void)arg;
    void *first = malloc(BLOCK_BYTES);
    CHECK(first != NULL);
    hpm_span_t *s = hpm_span_of(first);
    CHECK(s && s->kind == SPAN_SLAB, "a %d-byte block is not in a slab", BLOCK_BYTES);
    if (!s) return NULL;
    size_t per_slab = s->capacity, want = FULL_SLABS * per_slab + PARTIAL_BLOCKS;
    CHECK(want <= MAX_BLOCKS, "%zu blocks per slab: the test needs %zu", per_slab, want);
    blk[n_blk++] = first;
    while (n_blk < want && n_blk < MAX_BLOCKS) {
        blk[n_blk] = malloc(BLOCK_BYTES);
        CHECK(blk[n_blk] != NULL);
        memset(blk[n_blk], 0x5a, BLOCK_BYTES);
        n_blk++;
    }
    /* the slabs that are full: every one of their blocks is live */
    size_t found = 0;
    for (size_t i = 0; i < n_blk && found < FULL_SLABS; i++) {
        hpm_span_t *t = hpm_span_of(blk[i]);
        bool seen = false;
        for (size_t k = 0; k < found; k++) seen |= full_slab[k] == t;
        if (!seen && hpm_slab_used(t) == t->capacity && !t->free) full_slab[found++] = t;
    }
    CHECK(found == FULL_SLABS, "%zu full slabs, want %d", found, FULL_SLABS);
    return NULL;   /* exit: the slabs are abandoned */
}

static bool in_full_slab(const void *p) {
    for (int k = 0; k < FULL_SLABS; k++)
        if (hpm_span_of(p) == full_slab[k]) return true;
    return false;
}

static void *new_thread(void *arg) {
    (void)arg;
    void *p = malloc(BLOCK_BYTES);
    CHECK(p != NULL);
    hpm_heap_t *h = hpm_my_heap();
    CHECK(owner_of(p) == h, "the adopted slab is not this heap's");
    CHECK(!in_full_slab(p), "a malloc got a block of a slab that was full (it adopted a full slab)");
    for (int k = 0; k < FULL_SLABS; k++) {
        CHECK(atomic_load_explicit(&full_slab[k]->owner, memory_order_relaxed) == NULL, "full slab %d was adopted by a malloc", k);
        CHECK(full_slab[k]->list == LIST_ABANDONED_FULL, "full slab %d is on list %u, not the abandoned full list", k, full_slab[k]->list);
    }
    /* a free into full slab 0 adopts it */
    size_t i0 = 0;
    while (i0 < n_blk && hpm_span_of(blk[i0]) != full_slab[0]) i0++;
    CHECK(i0 < n_blk);
    if (i0 < n_blk) {
        free(blk[i0]);
        blk[i0] = NULL;
        CHECK(atomic_load_explicit(&full_slab[0]->owner, memory_order_relaxed) == h, "a free into a full abandoned slab did not adopt it");
    }
    free(p);
    return NULL;
}

static void *freed_block;

static void *coloured_thread(void *arg) {
    (void)arg;
    CHECK(hpm_thread_colors(1) == 0, "hpm_thread_colors");   /* run only when there are colours */
    hpm_heap_t *h = _hpm_heap_acquire();
    CHECK(h && h->colour_mask, "the thread has no colour mask");
    size_t i1 = 0;
    while (i1 < n_blk && (!blk[i1] || hpm_span_of(blk[i1]) != full_slab[1])) i1++;
    CHECK(i1 < n_blk);
    if (i1 < n_blk) {
        freed_block = blk[i1];
        free(blk[i1]);
        blk[i1] = NULL;
        CHECK(atomic_load_explicit(&full_slab[1]->owner, memory_order_relaxed) == NULL, "a coloured heap adopted a small slab");
        CHECK(full_slab[1]->list == LIST_ABANDONED, "after a free, the slab is on list %u, not the abandoned list with free blocks", full_slab[1]->list);
    }
    return NULL;
}

static void run(void *(*fn)(void *)) {
    pthread_t t;
    int made = pthread_create(&t, NULL, fn, NULL);
    if (made == 0) pthread_join(t, NULL);
    CHECK(made == 0, "pthread_create");
}

static void scenario(int partial_blocks) {
    PARTIAL_BLOCKS = partial_blocks;
    n_blk = 0;
    memset(blk, 0, sizeof blk);
    hpm_trim();
    size_t before = ht_used_pages();
    run(filler);
    if (th_failed) return;
    run(new_thread);
    if (_hpm_option(HPM_OPT_COLOR_COUNT) > 1) {
        run(coloured_thread);
        /* the main thread has no slab of the class: its malloc adopts slab 1 and gets the freed block first */
        void *again = malloc(BLOCK_BYTES);
        CHECK(again == freed_block, "the main thread's malloc got %p, not the block freed into the abandoned slab %p", again, freed_block);
        CHECK(owner_of(again) == hpm_my_heap(), "the slab with the freed block was not adopted");
        free(again);
    }
    for (size_t i = 0; i < n_blk; i++) free(blk[i]);
    hpm_trim();
    size_t after = ht_used_pages();
    CHECK(after == before, "%d blocks in a last slab: pages in use %zu after every block was freed and a trim, %zu before",
          partial_blocks, after, before);
}

int main(void) {
    void *volatile first = malloc(16);
    free(first);
    CHECK(ht_first_thread() == 0);
    scenario(3);
    scenario(0);
    return TEST_DONE();
}
