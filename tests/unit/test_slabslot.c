/* test_slabslot.c: slab records at fixed places (internal.h,
 * hpm_slab_guess). A slab (of 8 pages or more, or a heap's small first
 * one of a class) starts on a 32 KiB granule boundary when its hugepage
 * has room there, and its record is that granule's slot in the arena's
 * record region, where free's fast path finds it from the address alone.
 * The slot must be a hint only: a freed slab's slot has no owner and no
 * kind and is not recycled as another span's record; a slab that does
 * not start on its granule (a coloured page, or one placed where no
 * granule was free), the second granule of a 16-page slab and the
 * granules of medium spans lead free to the page map; and the bad frees
 * in them are still caught (death tests, in forked children).
 *
 * Parts: the aligned-run search on hand-made bitmaps; a private pageheap
 * (real metadata, fake commits) for placement and slot reuse; the
 * process's own heap for the free path; the program run again with
 * coloured slabs (HPM_COLORS=0x7fff) for slabs off their slots. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "fake_pageheap.h"
#include "testhelper.h"

/* ---- the aligned-run search ---- */

static void set_bits(uint64_t bits[8], unsigned from, unsigned n) {
    for (unsigned i = from; i < from + n; i++) bits[i >> 6] |= 1ull << (i & 63);
}

static void test_aligned_run(void) {
    uint64_t b[8];
    memset(b, 0xff, sizeof b);
    CHECK(_hpm_bits_find_aligned_run(b, 8, 8) == 0, "all free: %d", _hpm_bits_find_aligned_run(b, 8, 8));
    memset(b, 0, sizeof b);
    CHECK(_hpm_bits_find_aligned_run(b, 8, 8) == -1, "none free");
    set_bits(b, 4, 8);   /* 4..11: eight free pages, but no aligned eight */
    CHECK(_hpm_bits_find_aligned_run(b, 8, 8) == -1, "run at 4 taken as aligned: %d", _hpm_bits_find_aligned_run(b, 8, 8));
    CHECK(_hpm_bits_find_run(b, 8, 0) == 4, "first fit %d", _hpm_bits_find_run(b, 8, 0));
    set_bits(b, 12, 12);   /* now 4..23 free: aligned 8 at 8; aligned 16 at 8 */
    CHECK(_hpm_bits_find_aligned_run(b, 8, 8) == 8, "aligned 8: %d", _hpm_bits_find_aligned_run(b, 8, 8));
    CHECK(_hpm_bits_find_aligned_run(b, 16, 8) == 8, "aligned 16: %d", _hpm_bits_find_aligned_run(b, 16, 8));
    CHECK(_hpm_bits_find_aligned_run(b, 24, 8) == -1, "aligned 24 in a 20-page run");
    memset(b, 0, sizeof b);
    set_bits(b, 60, 16);   /* across a word: 60..75, aligned 8 at 64 */
    CHECK(_hpm_bits_find_aligned_run(b, 8, 8) == 64, "across words: %d", _hpm_bits_find_aligned_run(b, 8, 8));
    memset(b, 0, sizeof b);
    set_bits(b, 504, 8);   /* the last granule */
    CHECK(_hpm_bits_find_aligned_run(b, 8, 8) == 504, "last granule: %d", _hpm_bits_find_aligned_run(b, 8, 8));
    CHECK(_hpm_bits_find_aligned_run(b, 16, 8) == -1, "16 past the end");
}

/* ---- placement and slots, in a private pageheap ---- */


static bool on_free_list(hpm_pageheap_t *ph, const hpm_span_t *s) {
    for (const hpm_span_t *r = ph->span_free; r; r = r->next)
        if (r == s) return true;
    return false;
}

static void test_placement(void) {
    static hpm_pageheap_t ph;
    CHECK(fph_init(&ph) == 0);
    hpm_span_t *m = _hpm_ph_alloc_span(&ph, 3, SPAN_MEDIUM, 0);   /* pages 0..2 of a hugepage */
    CHECK(m && !m->fixed, "a medium span takes a pooled record");
    hpm_span_t *s = _hpm_ph_alloc_span(&ph, 8, SPAN_SLAB, 0);
    CHECK(s && s->kind == SPAN_SLAB, "slab");
    if (!m || !s) return;
    CHECK(s->start % ((uintptr_t)1 << HPM_GRANULE_SHIFT) == 0, "slab at %#lx, off a granule (the first fit was page 3)",
          (unsigned long)s->start);
    CHECK(s->fixed && s == fph_slot_of(&ph, s->start), "the slab's record %p is not its granule's slot %p", (void *)s,
          (void *)fph_slot_of(&ph, s->start));
    CHECK(hpm_span_of((void *)(s->start + 5 * HPM_PAGE_BYTES)) == s, "the page map points at the slot");
    hpm_span_t *big = _hpm_ph_alloc_span(&ph, 16, SPAN_SLAB, 0);
    CHECK(big && big->fixed && big == fph_slot_of(&ph, big->start), "a 64 KiB slab has its first granule's slot");
    hpm_span_t *second = big ? fph_slot_of(&ph, big->start + ((uintptr_t)1 << HPM_GRANULE_SHIFT)) : NULL;
    CHECK(second && second->kind == SPAN_NONE && atomic_load(&second->owner) == NULL, "its second granule's slot is unused");
    CHECK(second && !hpm_slab_holds(second, (void *)(big->start + 40 * 1024)), "the unused slot claims an address");
    CHECK(big && hpm_slab_holds(big, (void *)(big->start + 40 * 1024)) && !hpm_slab_holds(big, (void *)(big->start + 64 * 1024)),
          "hpm_slab_holds is the slab's range");

    uintptr_t start = s->start;
    atomic_store(&s->owner, (hpm_heap_t *)&ph);   /* any non-NULL owner: the heap layer sets it for live slabs */
    _hpm_ph_free_span(&ph, s);
    CHECK(atomic_load(&s->owner) == NULL && s->kind == SPAN_NONE, "a freed slot keeps owner %p, kind %u",
          (void *)atomic_load(&s->owner), s->kind);
    CHECK(!on_free_list(&ph, s), "a slot went onto the pool of records");
    hpm_span_t *m2 = _hpm_ph_alloc_span(&ph, 2, SPAN_MEDIUM, 0);
    CHECK(m2 && m2 != s && !m2->fixed, "a medium span reused the slot");
    hpm_span_t *s2 = _hpm_ph_alloc_span(&ph, 8, SPAN_SLAB, 0);
    CHECK(s2 && s2->fixed && s2 == fph_slot_of(&ph, s2->start) && s2->start % ((uintptr_t)1 << HPM_GRANULE_SHIFT) == 0,
          "a new slab: record %p at %#lx", (void *)s2, s2 ? (unsigned long)s2->start : 0ul);
    CHECK(s2 && (s2->start != start || s2 == s), "the slot of the same granule is the same record");
}

/* ---- the free path, in this process's heap ---- */

/* Blocks whose slab's record is its granule's slot, found by the guess
 * for a block in the first granule; *pooled: distinct slabs without. */
static size_t fixed_of(void **blocks, size_t n, size_t *slabs, size_t *pooled) {
    enum { SEEN_MAX = 1024 };
    static const hpm_span_t *seen[SEEN_MAX];
    size_t fixed = 0;
    *slabs = *pooled = 0;
    for (size_t i = 0; i < n; i++) {
        hpm_span_t *s = hpm_span_of(blocks[i]);
        if (!s || s->kind != SPAN_SLAB) continue;
        (*slabs)++;
        bool first_granule = ((uintptr_t)blocks[i] - s->start) >> HPM_GRANULE_SHIFT == 0;
        if (s->fixed && (!first_granule || hpm_slab_guess(blocks[i]) == s)) fixed++;
        if (s->fixed) continue;
        size_t k = 0;
        while (k < *pooled && seen[k] != s) k++;
        if (k == *pooled && k < SEEN_MAX) seen[(*pooled)++] = s;
    }
    return fixed;
}

/* n blocks of 16 + (i * 37) % spread bytes, block i filled with i's low
 * byte; check_and_free checks and frees those still there (not NULL). */
static void fill_blocks(void **blocks, size_t n, size_t spread) {
    for (size_t i = 0; i < n; i++) {
        size_t size = 16 + (i * 37) % spread;
        blocks[i] = malloc(size);
        if (blocks[i]) memset(blocks[i], (int)(i & 255), size);
    }
}
static void check_and_free(void **blocks, size_t n, size_t spread) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!blocks[i]) continue;
        size_t size = 16 + (i * 37) % spread;
        for (size_t k = 0; k < size; k += 97) bad += ((unsigned char *)blocks[i])[k] != (unsigned char)(i & 255);
        free(blocks[i]);
    }
    CHECK(bad == 0, "%zu bytes changed", bad);
}

/* A live block of a slab off its granule's slot (test_free_path finds
 * it); the death tests free it wrongly in a child. */
static char *off_slot_block;

static void test_free_path(void) {
    enum { N = 4000 };
    static void *blocks[N];
    fill_blocks(blocks, N, 8000);
    size_t slabs = 0, pooled = 0, fixed = fixed_of(blocks, N, &slabs, &pooled);
    /* small first slabs (those taken before the second thread, this
     * malloc(16) and pthread_create's, and one per class of blocks over
     * HPM_SMALL_FIRST_ALWAYS_BYTES, at most 8 blocks each) start on a
     * granule boundary too while their hugepage has one free
     * (hugepage.c, first_fit): nearly every block is found through its
     * slot, and a few slabs at most have pooled records */
    size_t big = 0;
    for (unsigned c = 0; c < HPM_CLASSES; c++) big += _hpm_classes[c].block_bytes > HPM_SMALL_FIRST_ALWAYS_BYTES;
    CHECK(slabs == N && fixed >= N - 256 - 8 * big && pooled <= 4 + big,
          "%zu of %zu blocks in slabs, %zu of them found through their granule's slot, %zu slabs without one (%zu classes over %d bytes)",
          slabs, (size_t)N, fixed, pooled, big, HPM_SMALL_FIRST_ALWAYS_BYTES);
    /* the debug tier's check of the slots: an owner in a slot inside a
     * medium span is a corruption it reports */
    char why[256] = "";
    void *med = malloc(200000);
    hpm_span_t *ms = hpm_span_of(med);
    CHECK(ms && ms->kind == SPAN_MEDIUM && _hpm_check_span(ms, why), "medium span: %s", why);
    hpm_span_t *inside = hpm_slab_guess((char *)med + 100000);
    if (ms && inside && inside != ms) {
        hpm_heap_t *was = atomic_load(&inside->owner);
        atomic_store(&inside->owner, hpm_my_heap());
        CHECK(!_hpm_check_span(ms, why) && strstr(why, "has an owner"), "an owned slot inside a medium span passed: '%s'", why);
        atomic_store(&inside->owner, was);
    }
    free(med);
    hpm_span_t *any = hpm_span_of(blocks[N / 2]);
    CHECK(any && any->fixed && _hpm_check_span(any, why), "a live slab with its slot: %s", why);

    check_and_free(blocks, N, 8000);
}

/* Coloured slabs (the program run again with HPM_COLORS=0x7fff): one
 * page each, on the first free page of 15 colours in 16, so most lie off
 * a granule boundary with pooled records. A block of one is freed
 * through the map, and counted; one more such block stays live for the
 * death tests. */
static void test_off_slot(void) {
    enum { N = 2000 };
    static void *blocks[N];
    fill_blocks(blocks, N, 1000);
    void **second = NULL;
    for (size_t i = 0; i < N; i++) {
        hpm_span_t *s = hpm_span_of(blocks[i]);
        if (hpm_slab_guess(blocks[i]) == s) continue;
        if (!second) second = &blocks[i];
        else if (!off_slot_block && hpm_span_of(*second) != s) { off_slot_block = blocks[i]; blocks[i] = NULL; }
    }
    CHECK(second != NULL && off_slot_block != NULL, "no two blocks of slabs off their granule's slot");
    if (second) {
        hpm_span_t *s = hpm_span_of(*second), *guess = hpm_slab_guess(*second);
        CHECK(guess != s && !s->fixed, "the block's granule slot is its slab's");
        uint32_t used = hpm_slab_used(s);
        free(*second);
        *second = NULL;
        CHECK(s->list == LIST_CURRENT || hpm_slab_used(s) == used - 1, "the free of an off-slot block was not counted: %u -> %u", used, hpm_slab_used(s));
    }
    check_and_free(blocks, N, 1000);
}

/* A free that must stop the process: which message it printed. */
static void dies_with(void (*fn)(void), const char *want) {
    char buf[512];
    int st = th_run_child(fn, buf, sizeof buf);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, want), "wanted '%s': status %#x, stderr '%s'", want, st, buf);
}

static void interior_off_slot(void) { if (off_slot_block) hpm_free(off_slot_block + 16); }
static void double_off_slot(void) { if (off_slot_block) { hpm_free(off_slot_block); hpm_free(off_slot_block); } }
static void double_in_slot_slab(void) { char *p = hpm_malloc(100); hpm_free(p); hpm_free(p); }
static void interior_in_slot_slab(void) { char *p = hpm_malloc(100); hpm_free(p + 8); }
static void into_medium_span(void) { char *p = hpm_malloc(200000); hpm_free(p + 40 * 1024); }

static void *other_thread(void *arg) {
    void *volatile p = malloc(16);
    free(p);
    return arg;
}

int main(int argc, char **argv) {
    (void)argc;
    void *volatile first = malloc(16);   /* the heap and the page-map window exist from here */
    free(first);
    if (getenv("HPM_COLORS")) {
        test_off_slot();
        dies_with(interior_off_slot, "interior pointer");
        dies_with(double_off_slot, "double free");
        return TEST_DONE();
    }
    /* A second thread's heap ends the small-program regime, whose first
     * slab of a class is a page or a few with a pooled record (heap.c,
     * slab_new): from then on every slab is whole and has its slot. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0);
    pthread_join(t, NULL);
    CHECK(__atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED), "a second thread left the small-program regime on");
    test_aligned_run();
    test_placement();
    test_free_path();
    th_run_self_with("HPM_COLORS", "0x7fff", argv);
    dies_with(double_in_slot_slab, "double free");
    dies_with(interior_in_slot_slab, "interior pointer");
    dies_with(into_medium_span, "interior pointer");
    return TEST_DONE();
}
