/* test_credit.c: a slab's free credit (internal.h, hpm_slab_set_list).
 * A slab keeps its live blocks minus its list's threshold, and a local
 * free takes the slow path exactly when the credit goes negative: at the
 * first free of a full slab, at the last live block of an available one,
 * and for the current slab (whose count is not kept while it is in a
 * hand) only after 2^30 frees, when the slow path resets it.
 *
 * Parts: the arithmetic on a record of our own (every list, the count kept
 * across list changes); the process's own heap, whose current slab is set
 * 2^30 frees along and must come back to a fresh credit with the heap
 * still sound. */
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"

static char why[HPM_WHY_BYTES];

/* The compiler takes free() to leave other memory alone, so the record
 * is read and written around it through volatile accesses. */
static int32_t credit_of(const hpm_span_t *s) { return *(const volatile int32_t *)&s->credit; }
static void credit_set(hpm_span_t *s, int32_t credit) { *(volatile int32_t *)&s->credit = credit; }

/* Frees counted until the first that needs the slow path (at most limit). */
static unsigned frees_to_slow(hpm_span_t *s, unsigned limit) {
    for (unsigned n = 1; n <= limit; n++)
        if (hpm_slab_count_free(s)) return n;
    return 0;
}

static void test_thresholds(void) {
    static const unsigned lists[] = {LIST_NONE, LIST_CURRENT, LIST_AVAIL, LIST_FULL,
                                     LIST_ABANDONED, LIST_EMPTY, LIST_ABANDONED_FULL};
    hpm_span_t s;
    memset(&s, 0, sizeof s);
    /* the count survives every change of list */
    for (unsigned i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        for (unsigned j = 0; j < sizeof lists / sizeof lists[0]; j++) {
            hpm_slab_set_list(&s, lists[i]);
            hpm_slab_set_used(&s, 1234);
            hpm_slab_set_list(&s, lists[j]);
            CHECK(hpm_slab_used(&s) == 1234, "list %u -> %u: %u live blocks, not 1234", lists[i], lists[j], hpm_slab_used(&s));
        }
    }
    /* full: the first free looks, whatever the count */
    hpm_slab_set_list(&s, LIST_FULL);
    hpm_slab_set_used(&s, UINT16_MAX - 1);
    CHECK(frees_to_slow(&s, 10) == 1, "a full slab with 65534 live blocks");
    hpm_slab_set_used(&s, 1);
    CHECK(frees_to_slow(&s, 10) == 1, "a full slab with one live block");
    /* available: the free of the last live block looks, none before */
    hpm_slab_set_list(&s, LIST_AVAIL);
    hpm_slab_set_used(&s, 5);
    CHECK(frees_to_slow(&s, 10) == 5, "an available slab with 5 live blocks");
    CHECK(hpm_slab_used(&s) == 0, "%u live blocks after 5 frees of 5", hpm_slab_used(&s));
    /* current: 2^30 frees before it looks (counted from a count of 0) */
    hpm_slab_set_list(&s, LIST_CURRENT);
    hpm_slab_set_used(&s, 0);
    CHECK(s.credit == HPM_CURRENT_CREDIT, "credit %d", s.credit);
    CHECK(frees_to_slow(&s, 100000) == 0, "a current slab looked within 100000 frees");
    s.credit = 2;
    CHECK(frees_to_slow(&s, 10) == 3, "a current slab two frees from the end");
}

/* The live current slab, moved 2^30 frees along by hand: its next free
 * goes to the slow path, which gives it a fresh credit (before the reset
 * existed, every free after that one took the slow path for nothing). */
static void test_current_reset(void) {
    enum { N = 64 };
    void *p[N];
    for (int i = 0; i < N; i++) p[i] = malloc(40);
    hpm_heap_t *h = hpm_my_heap();
    CHECK(h != NULL, "no heap after a malloc");
    if (!h) return;
    hpm_span_t *s = hpm_span_of(p[N - 1]);
    unsigned cls = s->class_idx;
    CHECK(h->current[cls] == s && s->list == LIST_CURRENT, "the last block's slab is not current");
    CHECK(s->push_to == &h->hand[cls], "the current slab is not in the hand");
    credit_set(s, 0);
    free(p[N - 1]);
    CHECK(credit_of(s) == HPM_CURRENT_CREDIT, "credit %d after the free that crossed zero, want %d", credit_of(s), HPM_CURRENT_CREDIT);
    free(p[N - 2]);
    CHECK(credit_of(s) == HPM_CURRENT_CREDIT - 1, "credit %d after one more free", credit_of(s));
    CHECK(_hpm_check_heap(h, why), "heap after the reset: %s", why);
    for (int i = 0; i < N - 2; i++) free(p[i]);
    hpm_trim();   /* gives the hand back: the count is set exactly again */
    CHECK(_hpm_check_heap(h, why), "heap after trim: %s", why);
}

int main(void) {
    test_thresholds();
    test_current_reset();
    return TEST_DONE();
}
