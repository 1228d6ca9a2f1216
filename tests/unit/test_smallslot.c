/* test_smallslot.c: slabs shorter than a granule in their granule's slot
 * (internal.h, "Slab records at fixed places"). A heap's small first
 * slab of a class (a page or a few) is placed on a 32 KiB granule
 * boundary where its hugepage has one free (hugepage.c, first_fit), and
 * takes that granule's record slot, so its frees take free's fast path;
 * the rest of its granule may then hold other spans (and other short
 * slabs where no boundary was free: a coloured page, a written place in
 * the small start), and a free there finds the slot's slab owned by the
 * same heap. Its block test must fail for those addresses and send them
 * to the page map (alloc.c, free_guess_missed), and the bad frees among
 * them must still be caught (death tests, in forked children).
 *
 * Parts: placement and slot reuse in a private pageheap (real metadata,
 * fake commits); in this process's heap, single-threaded (small first
 * slabs are made while the program is small and has one thread), that
 * the first slabs have their slots; and the free path behind a slot's
 * slab, in this program run again with coloured slabs (HPM_COLORS=0x7fff:
 * every slab of blocks up to 1 KiB is one page, on the first free page of
 * 15 colours in 16, so one-page slabs lie side by side from a granule's
 * start). */
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
    hpm_span_t *a = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0);       /* page 0 of a hugepage: a granule's start */
    hpm_span_t *b = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0);       /* the next granule's start, page 8 */
    hpm_span_t *m = _hpm_ph_alloc_span(&ph, 2, SPAN_MEDIUM, 0);     /* first fit: pages 1 and 2 */
    hpm_span_t *c = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0xffff);  /* a coloured page: the first free one, page 3 */
    CHECK(a && b && m && c, "spans %p %p %p %p", (void *)a, (void *)b, (void *)m, (void *)c);
    if (!a || !b || !m || !c) return;
    CHECK(a->start % HPM_GRANULE_BYTES == 0 && a->fixed && a == fph_slot_of(&ph, a->start),
          "a one-page slab on a granule boundary (%#lx) has its slot: fixed %u", (unsigned long)a->start, a->fixed);
    CHECK(b->start == a->start + HPM_GRANULE_BYTES && b->fixed && b == fph_slot_of(&ph, b->start),
          "the next one-page slab on the next granule boundary, with its slot: %#lx, fixed %u", (unsigned long)b->start, b->fixed);
    CHECK(m->start == a->start + HPM_PAGE_BYTES && !m->fixed, "a medium span behind the first slab");
    CHECK(c->start == m->start + 2 * HPM_PAGE_BYTES && !c->fixed, "a coloured page behind them, with a pooled record");
    CHECK(hpm_slab_holds(a, (void *)(a->start + 100)) && !hpm_slab_holds(a, (void *)(c->start + 100)) &&
              !hpm_slab_holds(a, (void *)(m->start + 100)),
          "the slot's slab holds only its own page of the granule");
    /* the other 62 boundaries of the hugepage, then none: off a boundary */
    unsigned on_boundary = 0;
    hpm_span_t *s = NULL;
    for (unsigned i = 0; i < 63; i++) {
        s = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0);
        if (!s || !s->fixed || s->start % HPM_GRANULE_BYTES) break;
        on_boundary++;
    }
    CHECK(on_boundary == HPM_PAGES_PER_HP / HPM_GRANULE_PAGES - 2, "%u more one-page slabs on boundaries", on_boundary);
    CHECK(s && !s->fixed && s->start == c->start + HPM_PAGE_BYTES,
          "with no boundary free, a one-page slab goes first fit with a pooled record: %#lx (fixed %u)",
          s ? (unsigned long)s->start : 0ul, s ? s->fixed : 0);
    uintptr_t start = a->start;
    atomic_store(&a->owner, (hpm_heap_t *)&ph);
    _hpm_ph_free_span(&ph, a);
    CHECK(atomic_load(&a->owner) == NULL && a->kind == SPAN_NONE, "a freed small slot keeps owner %p, kind %u",
          (void *)atomic_load(&a->owner), a->kind);
    hpm_span_t *a2 = _hpm_ph_alloc_span(&ph, 1, SPAN_SLAB, 0);   /* the only free boundary: page 0 again */
    CHECK(a2 == a && a2->start == start && a2->fixed, "the granule's next small slab took the same slot: %p at %#lx", (void *)a2,
          a2 ? (unsigned long)a2->start : 0ul);
}

/* Uncoloured: each class's first slab (small, the program being small)
 * starts on a granule boundary and has its slot, so the guess from a
 * block's address finds it (free's fast path; richards took 1.10x
 * mimalloc 2.0.9's time when they lay first fit, with pooled records). */
static void test_first_slabs_slotted(void) {
    void *b[HPM_CLASSES] = {0};
    unsigned n = 0, slotted = 0, small = 0;
    for (unsigned c = 0; c < HPM_CLASSES && _hpm_classes[c].block_bytes <= 1024; c++, n++) {
        b[c] = hpm_malloc(_hpm_classes[c].block_bytes);
        hpm_span_t *s = b[c] ? hpm_span_of(b[c]) : NULL;
        if (s && s->n_pages < HPM_GRANULE_PAGES) small++;
        if (s && s->fixed && hpm_slab_guess(b[c]) == s) slotted++;
    }
    CHECK(small == n && slotted == n, "%u classes: %u first slabs small, %u in their slots", n, small, slotted);
    for (unsigned c = 0; c < n; c++) hpm_free(b[c]);
}

/* ---- the free path, in this process's heap ---- */

typedef struct {
    hpm_span_t *fixed;   /* a small slab in its granule's slot */
    void *in_fixed;      /* a live block of it */
    hpm_span_t *other;   /* another slab of this heap that starts in the same granule */
    void *in_other;      /* a live block of that one */
} pair_t;

/* One block of every class up to 1 KiB: with coloured slabs each class's
 * slab is a page on the first free page of an allowed colour, so some
 * start on a granule boundary with others behind them in the granule. */
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

int main(int argc, char **argv) {
    (void)argc;
    void *volatile first = hpm_malloc(16);   /* metadata, the heap and the page-map window exist from here */
    hpm_free(first);
    if (!getenv("HPM_COLORS")) {
        test_placement();
        test_first_slabs_slotted();
        th_run_self_with("HPM_COLORS", "0x7fff", argv);
        return TEST_DONE();
    }
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
