/* test_runs.c: runs in the collection of remote frees (remote.c,
 * process). Consecutive blocks of the inbox that lie in one of the
 * owner's slabs join that slab's list with one splice and one count.
 * The main thread fills four slabs of 64-byte blocks; a second thread
 * frees every block of the first (long runs, which also cross the
 * batches of HPM_OUTBOX_BATCH), the even blocks of the second and third
 * alternately (runs of one block, the slab changing at every step), and
 * a few blocks of the current slab (a run into the hand). Then the owner
 * collects its inbox, and the test checks each slab against what was
 * freed: the emptied slab is kept empty with all its blocks on its list,
 * the half-freed ones are available with exactly the freed blocks on
 * their lists and the right count of live blocks, the current slab's
 * freed blocks are in the hand, and the whole heap passes its
 * consistency check. Then the next mallocs must hand the freed blocks out
 * again, each once. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define BYTES 64
#define MAX_BLOCKS 8192

static void *blk[MAX_BLOCKS];
static size_t n_blk;
static hpm_span_t *slab[4];       /* full: slab[0..2]; current: slab[3] */
static size_t first[4], count[4]; /* blk[first[k] .. first[k] + count[k]) lie in slab[k] */
static char why[HPM_WHY_BYTES];

static void *freer(void *arg) {
    (void)arg;
    void *volatile mine = malloc(BYTES);   /* a heap of its own, so its frees are batched */
    for (size_t i = 0; i < count[0]; i++) free(blk[first[0] + i]);
    for (size_t i = 0; i < count[1] || i < count[2]; i += 2) {
        if (i < count[1]) free(blk[first[1] + i]);
        if (i < count[2]) free(blk[first[2] + i]);
    }
    for (size_t i = 0; i < 5 && i < count[3]; i++) free(blk[first[3] + i]);
    free(mine);
    return NULL;   /* thread exit sends the open batch */
}

/* Blocks on a list that starts at head: how many, and whether each is a
 * distinct block of s whose index passes want (NULL: any). */
static size_t list_count(void **head, const hpm_span_t *s, bool (*want)(size_t k, size_t i), size_t k, size_t *strangers) {
    size_t n = 0;
    *strangers = 0;
    for (void **b = head; b && n <= MAX_BLOCKS; b = b[0]) {
        n++;
        uintptr_t off = (uintptr_t)b - s->start;
        if (off >= ((uintptr_t)s->n_pages << HPM_PAGE_SHIFT) || off % s->block_bytes) { (*strangers)++; continue; }
        size_t i = off / s->block_bytes;
        if (want && !want(k, i)) (*strangers)++;
    }
    return n;
}

static bool is_even(size_t k, size_t i) { (void)k; return i % 2 == 0; }

static bool freed_by_freer(size_t j) {
    for (int k = 0; k < 4; k++) {
        if (j < first[k] || j >= first[k] + count[k]) continue;
        size_t i = j - first[k];
        return k == 0 || (k < 3 && i % 2 == 0) || (k == 3 && i < 5);
    }
    return false;
}

int main(void) {
    CHECK(ht_first_thread() == 0);
    /* fill slabs until four whole ones of the class are found */
    void *probe = malloc(BYTES);
    hpm_heap_t *me = hpm_my_heap();
    CHECK(me != NULL, "no heap after malloc");
    if (!me) return TEST_DONE();
    unsigned cls = hpm_size_class(BYTES);
    size_t found = 0;
    hpm_span_t *prev = NULL;
    while (n_blk < MAX_BLOCKS && (found < 4 || count[3] < 20)) {
        void *p = malloc(BYTES);
        memset(p, 0x5a, BYTES);
        blk[n_blk] = p;
        hpm_span_t *s = hpm_span_of(p);
        if (s != prev) {   /* a new slab: start counting it, if it is whole (formatted from its first block) */
            if (found && count[found - 1] != slab[found - 1]->capacity) found--;   /* the previous one was not filled by us alone */
            if ((uintptr_t)p == s->start) { slab[found] = s; first[found] = n_blk; count[found] = 0; found++; }
            prev = s;
        }
        if (found && slab[found - 1] == s) count[found - 1]++;
        n_blk++;
    }
    CHECK(found == 4, "four slabs of %d-byte blocks not found in %zu mallocs", BYTES, n_blk);
    if (found < 4) return TEST_DONE();
    for (int k = 0; k < 3; k++)
        CHECK(slab[k]->list == LIST_FULL && count[k] == slab[k]->capacity, "slab %d: list %u, %zu of %u blocks ours", k,
              slab[k]->list, count[k], slab[k]->capacity);
    CHECK(me->current[cls] == slab[3] && slab[3]->push_to == &me->hand[cls], "the fourth slab is not current in the hand");
    CHECK(count[3] >= 5, "only %zu blocks in the current slab", count[3]);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, freer, NULL) == 0 && pthread_join(t, NULL) == 0);
    CHECK(atomic_load_explicit(&me->inbox, memory_order_acquire) != NULL, "nothing reached the inbox");
    void **hand_before = me->hand[cls];
    _hpm_remote_drain(me);
    CHECK(atomic_load_explicit(&me->inbox, memory_order_acquire) == NULL, "the inbox was not taken");

    size_t strangers, n;
    /* slab 0: every block free, kept empty */
    CHECK(slab[0]->list == LIST_EMPTY && hpm_slab_used(slab[0]) == 0, "slab 0: list %u, %u live blocks, want empty", slab[0]->list,
          hpm_slab_used(slab[0]));
    n = list_count(slab[0]->free, slab[0], NULL, 0, &strangers);
    CHECK(n == slab[0]->capacity && strangers == 0, "slab 0: %zu blocks on its list (%zu strangers), want %u", n, strangers,
          slab[0]->capacity);
    /* slabs 1 and 2: the even blocks free, available */
    for (int k = 1; k <= 2; k++) {
        size_t freed = (count[k] + 1) / 2;
        CHECK(slab[k]->list == LIST_AVAIL && hpm_slab_used(slab[k]) == count[k] - freed, "slab %d: list %u, %u live blocks, want %zu", k,
              slab[k]->list, hpm_slab_used(slab[k]), count[k] - freed);
        n = list_count(slab[k]->free, slab[k], is_even, (size_t)k, &strangers);
        CHECK(n == freed && strangers == 0, "slab %d: %zu blocks on its list (%zu not freed), want %zu", k, n, strangers, freed);
    }
    /* the current slab: its 5 freed blocks joined the hand */
    size_t in_hand = 0, in_hand_before = 0;
    for (void **b = hand_before; b && in_hand_before <= MAX_BLOCKS; b = b[0]) in_hand_before++;
    for (void **b = me->hand[cls]; b && in_hand <= MAX_BLOCKS; b = b[0]) in_hand++;
    CHECK(in_hand == in_hand_before + 5, "%zu blocks in the hand, want %zu + 5", in_hand, in_hand_before);
    CHECK(slab[3]->push_to == &me->hand[cls], "the current slab left the hand");
    CHECK(_hpm_check_heap(me, why), "after the collection: %s", why);

    /* the freed blocks come back, each once (after them, the current
     * slab may format new ones, so look through two slabs' worth more) */
    size_t want = count[0] + (count[1] + 1) / 2 + (count[2] + 1) / 2 + 5, again = 0, twice = 0;
    size_t n_re = want + in_hand_before + 2 * slab[3]->capacity;
    if (n_re > MAX_BLOCKS) n_re = MAX_BLOCKS;
    static void *re[MAX_BLOCKS];
    static bool seen[MAX_BLOCKS];
    for (size_t i = 0; i < n_re; i++) re[i] = malloc(BYTES);
    for (size_t i = 0; i < n_re; i++) {
        for (size_t j = 0; j < n_blk; j++) {
            if (blk[j] != re[i]) continue;
            if (seen[j]) twice++;
            if (!freed_by_freer(j)) twice++;   /* a block that was never freed */
            seen[j] = true;
            again++;
            break;
        }
    }
    CHECK(again == want && twice == 0, "%zu of the %zu freed blocks came back (%zu twice or never freed)", again, want, twice);
    for (size_t i = 0; i < n_re; i++) free(re[i]);
    for (size_t j = 0; j < n_blk; j++)
        if (!freed_by_freer(j)) free(blk[j]);
    free(probe);
    CHECK(_hpm_check_heap(me, why), "at the end: %s", why);
    return TEST_DONE();
}
