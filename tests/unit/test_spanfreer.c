/* test_spanfreer.c: a thread that frees medium spans of a class it never
 * mallocs keeps at most one batch of them in its span cache (spancache.c,
 * cache_put); the rest go to the central cache, where the thread that
 * mallocs the class finds them again (xmalloc-test's pattern: one thread
 * allocates, another frees).
 *
 * The main thread mallocs N_BATCHES batches of 40 KiB blocks (spans of
 * one medium class) and writes them; a freer thread checks and frees them
 * all, and while it is still alive (its cache not yet flushed by its exit)
 * the main thread mallocs as many again.
 *   - the freer's stack of the class holds at most one batch (it held all
 *     of them, 4 batches, when every stack kept up to 8);
 *   - the main thread's second round reuses the freed spans: at least all
 *     but one batch of its addresses are first-round ones (none were);
 *   - every block's contents are intact, and both heaps sound. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "caching_on.h"
#include "internal.h"
#include "testhelper.h"

#define BLOCK_BYTES ((size_t)40 << 10)
#define N_BATCHES 4
#define MAX_BLOCKS (N_BATCHES * 16)   /* a batch is at most 16 spans (hpm_medium_batch) */

static void *blocks[MAX_BLOCKS];
static unsigned n_blocks;

/* The freer's report, read by the main thread after the handshake. */
static unsigned freer_stack, freer_bad;
static bool freer_sound;
static char freer_why[256];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int phase;   /* 1: the freer has freed and reported; 2: the main thread is done, the freer may exit */

static unsigned stack_of(hpm_heap_t *h) {
    return h->span_cache_n[hpm_medium_class(BLOCK_BYTES >> HPM_PAGE_SHIFT)];
}

static void fill(unsigned char *p, unsigned seed) {
    for (size_t i = 0; i < BLOCK_BYTES; i += 512) p[i] = (unsigned char)(seed + i / 512);
}

static unsigned bad_bytes(const unsigned char *p, unsigned seed) {
    unsigned bad = 0;
    for (size_t i = 0; i < BLOCK_BYTES; i += 512) bad += p[i] != (unsigned char)(seed + i / 512);
    return bad;
}

static void *freer(void *arg) {
    for (unsigned i = 0; i < n_blocks; i++) {
        freer_bad += bad_bytes(blocks[i], i);
        free(blocks[i]);
    }
    hpm_heap_t *h = hpm_my_heap();
    freer_stack = h ? stack_of(h) : ~0u;
    freer_sound = h && _hpm_check_heap(h, freer_why);
    pthread_mutex_lock(&mu);
    phase = 1;
    pthread_cond_broadcast(&cv);
    while (phase != 2) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return arg;
}

int main(void) {
    CHECK(caching_on_start() == 0);   /* a second thread has run: medium spans are cached from now on */
    void *volatile ballast = malloc(CACHING_BALLAST_BYTES);   /* a 16 MiB bound, far above the blocks here: only the batch rule drains */
    CHECK(ballast != NULL);

    unsigned cls = hpm_medium_class(BLOCK_BYTES >> HPM_PAGE_SHIFT), batch = hpm_medium_batch(cls);
    CHECK(hpm_medium_pages(cls) == BLOCK_BYTES >> HPM_PAGE_SHIFT, "40 KiB is a medium class of its own (%zu pages)",
          (size_t)hpm_medium_pages(cls));
    n_blocks = N_BATCHES * batch;
    CHECK(n_blocks <= MAX_BLOCKS && batch >= 2, "batch %u", batch);
    for (unsigned i = 0; i < n_blocks; i++) {
        blocks[i] = malloc(BLOCK_BYTES);
        CHECK(blocks[i] != NULL);
        fill(blocks[i], i);
    }
    void *first_round[MAX_BLOCKS];
    memcpy(first_round, blocks, n_blocks * sizeof *blocks);

    pthread_t t;
    CHECK(pthread_create(&t, NULL, freer, NULL) == 0);
    pthread_mutex_lock(&mu);
    while (phase != 1) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    CHECK(freer_stack <= batch, "the freer's stack of the class holds %u spans after %u frees, want at most a batch (%u)",
          freer_stack, n_blocks, batch);
    CHECK(freer_bad == 0, "%u bytes changed before the freer's frees", freer_bad);

    /* the second round, while the freer still holds its cache */
    unsigned reused = 0, bad = 0;
    void *again[MAX_BLOCKS];
    for (unsigned i = 0; i < n_blocks; i++) {
        again[i] = malloc(BLOCK_BYTES);
        CHECK(again[i] != NULL);
        for (unsigned j = 0; j < n_blocks; j++) reused += again[i] == first_round[j];
        fill(again[i], i + 7);
    }
    for (unsigned i = 0; i < n_blocks; i++) bad += bad_bytes(again[i], i + 7);
    CHECK(reused + batch >= n_blocks, "the second round reused %u of the %u freed spans, want all but a batch (%u)", reused,
          n_blocks, batch);
    CHECK(bad == 0, "%u bytes changed in the second round", bad);
    char why[256];
    CHECK(_hpm_check_heap(hpm_my_heap(), why), "main heap: %s", why);
    CHECK(freer_sound, "freer's heap: %s", freer_why);

    pthread_mutex_lock(&mu);
    phase = 2;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(t, NULL);
    for (unsigned i = 0; i < n_blocks; i++) free(again[i]);
    free(ballast);
    return TEST_DONE();
}
