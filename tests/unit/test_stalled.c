/* test_stalled.c: blocks freed for an owner that does not collect them are
 * reused by the freeing thread (remote.c, "keep_for_stalled"), not left in
 * the owner's inbox (issue 11: a sleeping owner's inbox held 16 MB at
 * rptest's peak).
 *
 * The main thread allocates N blocks of one class and then waits in
 * pthread_join, so it takes none of the batches sent to it. A second
 * thread, which allocates that class too, frees all N: the first batches
 * go to the owner's inbox; once HPM_STALL_SENDS batches in a row found it
 * not taken, the freeing thread keeps the blocks in its own hand, sending
 * one batch again after each HPM_KEEP_PROBE. Its next N mallocs must then
 * hand out the owner's blocks (each once, writable), with its heap sound
 * by _hpm_check_heap (the hand holds foreign blocks). It frees them and
 * exits: the blocks it still keeps go to the owner, so once the owner
 * takes its inbox (hpm_trim) every one of its slabs is empty and given
 * back: the pages in use are those from before the N mallocs.
 *
 * Then the owner stays parked while a second thread frees M blocks, more
 * than the senders may keep for an owner that never takes its inbox
 * (HPM_ASLEEP_PROBES probes of HPM_KEEP_PROBE kept blocks): the owner is
 * then judged asleep, the blocks freed after that wait in its inbox (at
 * most that many plus one probe's worth are kept), and once the owner
 * takes its inbox it is awake again and every page comes home. */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define BLOCK_BYTES 256
#define N 4096

static void **blk;                 /* the owner's blocks (mmap, not from the heap) */
static hpm_heap_t *owner;
static char why[HPM_WHY_BYTES];

static bool owned_by(const void *p, const hpm_heap_t *h) {
    hpm_span_t *s = hpm_span_of(p);
    return s && s->kind == SPAN_SLAB && atomic_load_explicit(&s->owner, memory_order_relaxed) == h;
}

static void *freer(void *arg) {
    (void)arg;
    unsigned cls = hpm_size_class(BLOCK_BYTES);
    void *mine = malloc(BLOCK_BYTES);   /* this heap allocates the class: it has a hand for it */
    CHECK(mine != NULL);
    hpm_heap_t *h = hpm_my_heap();
    for (size_t i = 0; i < N; i++) free(blk[i]);
    size_t in_hand = 0;
    for (void **b = h->hand[cls]; b; b = b[0]) in_hand += owned_by(b, owner);
    /* kept up to the hand's cap, and no further while the hand is not
     * drawn from (review, session 49: a consumer that had allocated the
     * class once kept every block it freed) */
    size_t cap = hpm_keep_cap(cls);
    CHECK(in_hand >= cap / 2 && in_hand <= cap, "%zu of %d freed blocks kept in the hand, want %zu..%zu", in_hand, N,
          cap / 2, cap);
    CHECK(_hpm_check_heap(h, why), "the heap with kept blocks: %s", why);
    void **again = mmap(NULL, N * sizeof *again, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(again != MAP_FAILED);
    if (again == MAP_FAILED) return NULL;
    size_t reused = 0, twice = 0;
    for (size_t i = 0; i < N; i++) {
        again[i] = malloc(BLOCK_BYTES);
        CHECK(again[i] != NULL);
        if (!again[i]) return NULL;
        memset(again[i], (int)(i & 0xff), BLOCK_BYTES);
        reused += owned_by(again[i], owner);
    }
    for (size_t i = 0; i < N; i++) {
        const unsigned char *p = again[i];
        if (p[0] != (unsigned char)(i & 0xff) || p[BLOCK_BYTES - 1] != (unsigned char)(i & 0xff)) twice++;   /* a later memset overwrote it: handed out twice */
    }
    CHECK(reused == in_hand, "%zu of the mallocs returned the owner's blocks, %zu were kept", reused, in_hand);
    CHECK(twice == 0, "%zu blocks were handed out twice", twice);
    CHECK(_hpm_check_heap(h, why), "after reusing them: %s", why);
    for (size_t i = 0; i < N; i++) free(again[i]);
    free(mine);
    munmap(again, N * sizeof *again);
    return NULL;   /* thread exit: the kept blocks go to the owner */
}

#define M ((HPM_ASLEEP_PROBES + 4) * HPM_KEEP_PROBE)

static void *freer_asleep(void *arg) {
    void **many = arg;
    unsigned cls = hpm_size_class(BLOCK_BYTES);
    void *mine = malloc(BLOCK_BYTES);
    CHECK(mine != NULL);
    hpm_heap_t *h = hpm_my_heap();
    CHECK(!_hpm_remote_asleep(owner), "the owner is asleep before anything was kept for it");
    for (size_t i = 0; i < M; i++) free(many[i]);
    size_t in_hand = 0;
    for (void **b = h->hand[cls]; b; b = b[0]) in_hand += owned_by(b, owner);
    CHECK(_hpm_remote_asleep(owner), "the owner left %d blocks untaken and is not judged asleep", M);
    CHECK(in_hand >= hpm_keep_cap(cls) / 2 && in_hand <= hpm_keep_cap(cls),
          "%zu of %d blocks kept for an owner that sleeps, want %u..%u", in_hand, M, hpm_keep_cap(cls) / 2,
          hpm_keep_cap(cls));
    CHECK(_hpm_check_heap(h, why), "the heap after the owner fell asleep: %s", why);
    free(mine);
    return NULL;
}

static void asleep_owner(size_t before) {
    void **many = mmap(NULL, M * sizeof *many, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(many != MAP_FAILED);
    if (many == MAP_FAILED) return;
    for (size_t i = 0; i < M; i++) {
        many[i] = malloc(BLOCK_BYTES);
        CHECK(many[i] != NULL);
        if (!many[i]) return;
    }
    pthread_t t;
    int made = pthread_create(&t, NULL, freer_asleep, many);
    if (made == 0) pthread_join(t, NULL);
    CHECK(made == 0);
    hpm_trim();
    CHECK(!_hpm_remote_asleep(owner), "the owner took its inbox and is still judged asleep");
    CHECK(_hpm_check_heap(owner, why), "the owner after it woke: %s", why);
    size_t after = ht_used_pages();
    CHECK(after == before, "pages in use %zu after the asleep owner's blocks came back, %zu before", after, before);
    munmap(many, M * sizeof *many);
}

int main(void) {
    void *volatile first = malloc(16);   /* the allocator is set up */
    free(first);
    pthread_t t;
    CHECK(ht_first_thread() == 0);
    hpm_trim();
    size_t before = ht_used_pages();
    blk = mmap(NULL, N * sizeof *blk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(blk != MAP_FAILED);
    if (blk == MAP_FAILED) return TEST_DONE();
    for (size_t i = 0; i < N; i++) {
        blk[i] = malloc(BLOCK_BYTES);
        CHECK(blk[i] != NULL);
        if (!blk[i]) return TEST_DONE();
    }
    owner = hpm_my_heap();
    CHECK(owner != NULL && owned_by(blk[0], owner));
    int made = pthread_create(&t, NULL, freer, NULL);   /* checked after the join: the thread counts checks too */
    if (made == 0) pthread_join(t, NULL);
    CHECK(made == 0);
    hpm_trim();   /* takes the inbox: every block came home, every slab of them is empty */
    CHECK(_hpm_check_heap(owner, why), "the owner after taking its inbox: %s", why);
    size_t after = ht_used_pages();
    CHECK(after == before, "pages in use %zu after the blocks came back and the trim, %zu before the mallocs", after, before);
    munmap(blk, N * sizeof *blk);
    asleep_owner(before);
    return TEST_DONE();
}
