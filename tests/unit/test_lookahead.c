/* test_lookahead.c: the look-ahead pointers of remote frees (remote.c,
 * process; internal.h, hpm_outbox_ahead). The main thread allocates
 * blocks of one class; a second thread frees N of them, which reach the
 * main thread's inbox as batches of HPM_OUTBOX_BATCH, linked newest
 * first. Before the main thread takes its inbox, the test walks it
 * without taking it: the blocks must be exactly the N freed ones, and in
 * each batch every block but the oldest HPM_OUTBOX_AHEAD must name, in
 * its third word, the block HPM_OUTBOX_AHEAD further down the chain.
 * 16-byte blocks have no third word: a batch of them must keep the
 * word after each block (the next block's first word, or the end of the
 * slab) untouched, which the contents check of the neighbours shows.
 * Then the owner takes its inbox (hpm_trim) and every block is free in
 * its slab again: the same N come back from the next N mallocs. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define N (4 * HPM_OUTBOX_BATCH)   /* blocks freed by the other thread */

static void *blk[2 * N];   /* even: freed by the other thread; odd: stay live */
static size_t block_bytes;
static char why[HPM_WHY_BYTES];

static void *freer(void *arg) {
    (void)arg;
    void *volatile mine = malloc(block_bytes);   /* this thread has a heap, so frees are batched */
    for (size_t i = 0; i < 2 * N; i += 2) free(blk[i]);
    free(mine);
    return NULL;   /* thread exit sends the open batch */
}

static size_t index_of(const void *b) {
    for (size_t i = 0; i < 2 * N; i += 2)
        if (blk[i] == b) return i;
    return 2 * N;
}

static void run(size_t bytes) {
    block_bytes = bytes;
    for (size_t i = 0; i < 2 * N; i++) {
        blk[i] = malloc(bytes);
        memset(blk[i], 0x5a, bytes);
    }
    hpm_heap_t *me = hpm_my_heap();   /* after a malloc: under the sanitizers' renamed entry points, pthread_create made none */
    CHECK(me != NULL, "no heap after malloc");
    if (!me) return;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, freer, NULL) == 0 && pthread_join(t, NULL) == 0);

    /* the inbox, newest first, untaken */
    static void **chain[N + 1];
    static bool seen[2 * N];
    size_t n = 0, strangers = 0, seen_twice = 0;
    memset(seen, 0, sizeof seen);
    for (void **b = atomic_load_explicit(&me->inbox, memory_order_acquire); b && n <= N; b = b[0]) {
        size_t i = index_of(b);
        if (i == 2 * N) strangers++;
        else if (seen[i]) seen_twice++;
        else seen[i] = true;
        chain[n++] = b;
    }
    CHECK(n == N && strangers == 0 && seen_twice == 0, "%zu-byte blocks: the inbox holds %zu blocks (%zu not freed, %zu twice), want %d",
          bytes, n, strangers, seen_twice, N);

    if (bytes >= 3 * sizeof(void *)) {
        /* batches are HPM_OUTBOX_BATCH long and the walk meets the newest
         * first, so each batch starts at a multiple of the batch size */
        size_t checked = 0, wrong = 0;
        for (size_t k = 0; k + HPM_OUTBOX_AHEAD < n; k++) {
            if ((k % HPM_OUTBOX_BATCH) + HPM_OUTBOX_AHEAD >= HPM_OUTBOX_BATCH) continue;   /* names a block of an earlier batch */
            checked++;
            if (chain[k][2] != (void *)chain[k + HPM_OUTBOX_AHEAD]) wrong++;
        }
        CHECK(checked > N / 2 && wrong == 0, "%zu-byte blocks: %zu of %zu look-ahead pointers wrong", bytes, wrong, checked);
    }

    hpm_trim();   /* takes the inbox: each block goes back to its slab */
    CHECK(atomic_load_explicit(&me->inbox, memory_order_acquire) == NULL, "the inbox was not taken");
    CHECK(_hpm_check_heap(me, why), "%zu-byte blocks, after the inbox: %s", bytes, why);
    size_t damaged = 0;   /* the live neighbours: a look-ahead word written past a 16-byte block lands in one */
    for (size_t i = 1; i < 2 * N; i += 2) {
        const unsigned char *p = blk[i];
        for (size_t j = 0; j < bytes; j++) damaged += p[j] != 0x5a;
    }
    CHECK(damaged == 0, "%zu-byte blocks: %zu bytes of live blocks changed", bytes, damaged);
    for (size_t i = 1; i < 2 * N; i += 2) free(blk[i]);
}

int main(void) {
    CHECK(ht_first_thread() == 0);
    run(16);
    run(64);
    run(1024);
    return TEST_DONE();
}
