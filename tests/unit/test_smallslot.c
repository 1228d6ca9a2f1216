/* test_smallslot.c: slabs shorter than a granule in their granule's slot
 * (internal.h, "Slab records at fixed places"). A heap's small first
 * slab of a class (a page or a few) that starts on a 32 KiB granule
 * boundary takes that granule's record slot, so its frees take free's
 * fast path; the rest of its granule may then hold other spans, and a
 * free there finds the slot's slab owned by the same heap. Its block test
 * must fail for those addresses and send them to the page map
 * (alloc.c, free_guess_missed), and the bad frees among them must still
 * be caught (death tests, in forked children).
 *
 * Parts: placement and slot reuse in a private pageheap (real metadata,
 * fake commits); the free path in this process's heap, single-threaded
 * (small first slabs are made while the program is small and has one
 * thread). */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "internal.h"
#include "fake_pageheap.h"
#include "testhelper.h"

/* ---- placement, in a private pageheap ---- */


static void test_placement(void) {
    static hpm_pageheap_t ph;
    CHECK(fph_init(&ph) == 0);
    hpm_span_t *a = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0);   /* page 0 of a hugepage: a granule's start */
    hpm_span_t *b = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0);   /* page 1 */
    hpm_span_t *m = _hpm_ph_alloc_span(&ph, 2, SPAN_MEDIUM, 0);   /* pages 2 and 3 */
    CHECK(a && b && m, "spans %p %p %p", (void *)a, (void *)b, (void *)m);
    if (!a || !b || !m) return;
    CHECK(a->start % HPM_GRANULE_BYTES == 0 && a->fixed && a == fph_slot_of(&ph, a->start),
          "a one-page slab on a granule boundary (%#lx) has its slot: fixed %u", (unsigned long)a->start, a->fixed);
    CHECK(b->start == a->start + HPM_PAGE_BYTES && !b->fixed, "the next one-page slab, off the boundary, has a pooled record");
    CHECK(m->start == b->start + HPM_PAGE_BYTES && !m->fixed, "a medium span after them");
    CHECK(hpm_slab_holds(a, (void *)(a->start + 100)) && !hpm_slab_holds(a, (void *)(b->start + 100)) &&
              !hpm_slab_holds(a, (void *)(m->start + 100)),
          "the slot's slab holds only its own page of the granule");
    uintptr_t start = a->start;
    atomic_store(&a->owner, (hpm_heap_t *)&ph);
    _hpm_ph_free_span(&ph, a);
    CHECK(atomic_load(&a->owner) == NULL && a->kind == SPAN_NONE, "a freed small slot keeps owner %p, kind %u",
          (void *)atomic_load(&a->owner), a->kind);
    hpm_span_t *a2 = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0);   /* first fit: page 0 again */
    CHECK(a2 == a && a2->start == start && a2->fixed, "the granule's next small slab took the same slot: %p at %#lx", (void *)a2,
          a2 ? (unsigned long)a2->start : 0ul);
}

/* ---- the free path, in this process's heap ---- */

typedef struct {
    hpm_span_t *fixed;   /* a small slab in its granule's slot */
    void *in_fixed;      /* a live block of it */
    hpm_span_t *other;   /* another slab of this heap that starts in the same granule */
    void *in_other;      /* a live block of that one */
} pair_t;

/* One block of every class up to 1 KiB: each class's first slab is a
 * page (single-threaded, small program), placed first fit, so some start
 * on a granule boundary with others behind them in the granule. */
static void *blocks[HPM_CLASSES];

static bool find_pair(pair_t *out) {
    for (unsigned c = 0; c < HPM_CLASSES && _hpm_classes[c].block_bytes <= 1024; c++) {
        blocks[c] = hpm_malloc(_hpm_classes[c].block_bytes);
        memset(blocks[c], (int)c, _hpm_classes[c].block_bytes);
    }
    for (unsigned i = 0; i < HPM_CLASSES && blocks[i]; i++) {
        hpm_span_t *s = hpm_span_of(blocks[i]);
        if (!s || !s->fixed || s->n_pages >= HPM_GRANULE_PAGES) continue;
        for (unsigned j = 0; j < HPM_CLASSES && blocks[j]; j++) {
            hpm_span_t *t = hpm_span_of(blocks[j]);
            if (t && t != s && t->kind == SPAN_SLAB && t->start > s->start && t->start < s->start + HPM_GRANULE_BYTES) {
                *out = (pair_t){s, blocks[i], t, blocks[j]};
                return true;
            }
        }
    }
    return false;
}

static pair_t pair;

static void test_free_path(void) {
    CHECK(!__atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED), "the program is still small (one thread)");
    CHECK(find_pair(&pair), "no small slab in a slot with another slab behind it in its granule");
    if (!pair.fixed) return;
    hpm_heap_t *h = hpm_my_heap();
    CHECK(hpm_slab_guess(pair.in_other) == pair.fixed && atomic_load(&pair.fixed->owner) == h,
          "the other slab's block guesses the small slab, which this heap owns");
    char why[256] = "";
    CHECK(_hpm_check_span(pair.fixed, why), "the small slab in its slot: %s", why);
    CHECK(_hpm_check_span(pair.other, why), "the slab behind it: %s", why);

    /* a free behind the small slab: through the map, into the right slab */
    size_t other_bytes = pair.other->block_bytes;
    unsigned char *q = pair.in_other;
    void *base = NULL;
    size_t len = 0;
    CHECK(hpm_range(q, &base, &len) && base == q && len == other_bytes, "range of the block behind: %p %zu", base, len);
    hpm_free(q);
    CHECK(!hpm_range(q, NULL, NULL), "the block behind is still live after its free");
    void *again = hpm_malloc(other_bytes);
    CHECK(again == q, "the next malloc of its class got %p, not the block just freed %p", again, (void *)q);
    CHECK(_hpm_check_heap(h, why), "heap after the free behind: %s", why);

    /* a free into the small slab itself: the fast path */
    size_t fixed_bytes = pair.fixed->block_bytes;
    void *p = pair.in_fixed;
    hpm_free(p);
    void *p2 = hpm_malloc(fixed_bytes);
    CHECK(p2 == p, "the small slab's block %p came back as %p", p, p2);
    CHECK(_hpm_check_heap(h, why), "heap after the free into the small slab: %s", why);

    /* every block of the round, and their contents */
    size_t bad = 0;
    for (unsigned c = 0; c < HPM_CLASSES && blocks[c]; c++) {
        if (blocks[c] == q || blocks[c] == p) continue;
        for (size_t k = 0; k < _hpm_classes[c].block_bytes; k++) bad += ((unsigned char *)blocks[c])[k] != (unsigned char)c;
    }
    CHECK(bad == 0, "%zu bytes changed", bad);
    for (unsigned c = 0; c < HPM_CLASSES && blocks[c]; c++)
        if (blocks[c] != q && blocks[c] != p) hpm_free(blocks[c]);
    hpm_free(again);
    hpm_free(p2);
    CHECK(_hpm_check_heap(h, why), "heap at the end: %s", why);
}

/* ---- the bad frees among them ---- */

static void dies_with(void (*fn)(void), const char *want) {
    char buf[512];
    int st = th_run_child(fn, buf, sizeof buf);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, want), "wanted '%s': status %#x, stderr '%s'", want,
          st, buf);
}

static pair_t fresh;   /* found again in each child, after test_free_path freed the first pair */
static void refind(void) {
    if (!find_pair(&fresh)) _exit(3);
}
static void double_behind(void) { refind(); hpm_free(fresh.in_other); hpm_free(fresh.in_other); }
static void interior_behind(void) { refind(); hpm_free((char *)fresh.in_other + 8); }
static void double_in_small(void) { refind(); hpm_free(fresh.in_fixed); hpm_free(fresh.in_fixed); }
static void interior_in_small(void) { refind(); hpm_free((char *)fresh.in_fixed + 8); }
/* a page of free memory behind the small slab, in its granule: the slab
 * behind it emptied and given back by hpm_trim (the small slab keeps a
 * live block, so its slot stays owned) */
static void free_page_in_granule(void) {
    refind();
    uintptr_t page = fresh.other->start;
    hpm_free(fresh.in_other);
    hpm_trim();
    if (hpm_span_of((void *)page) != NULL || atomic_load(&fresh.fixed->owner) != hpm_my_heap()) _exit(4);
    hpm_free((void *)page);
}

int main(void) {
    void *volatile first = hpm_malloc(16);   /* metadata, the heap and the page-map window exist from here */
    hpm_free(first);
    test_placement();
    test_free_path();
    dies_with(double_behind, "double free");
    dies_with(interior_behind, "interior pointer");
    dies_with(double_in_small, "double free");
    dies_with(interior_in_small, "interior pointer");
    char buf[512];
    int st = th_run_child(free_page_in_granule, buf, sizeof buf);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, "into free memory"),
          "a free of a free page in the granule (exit 4: the page was not free): status %#x, stderr '%s'", st, buf);
    return TEST_DONE();
}
