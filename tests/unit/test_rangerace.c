/* test_rangerace.c: hpm_range (and so malloc_usable_size and realloc's
 * lookup) asked about an address while the allocator's own threads change
 * the records it reads. hpm_range answers for any address, so a query must
 * not race with (1) the release of freed medium spans that another thread
 * left in the central cache (the background thread's work: it clears their
 * page-map entries and their `cached` mark under the pageheap lock, not
 * the querying thread's), nor with (2) the owner of a slab giving its free
 * pages back (hpm_trim: held_pages_mask) while another thread asks about a
 * live block of that slab, nor with (3) an owner that
 * keeps handing out and taking back the blocks of its slabs, and giving
 * its empty slabs back, while another thread asks about addresses in
 * them (the records' fields and the blocks' free marks), nor, (4), with
 * threads that allocate small and medium blocks, reallocate and trim while
 * another queries their range, reads the counters and trims. The answers are
 * checked here; the races themselves are what the TSan build of this test
 * (make tsan) looks for: before the map entries, the records' fields and
 * the free marks were read and written atomically, it reported them in
 * every run. */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"

enum { DEAD_N = 24, DEAD_ROUNDS = 40, DEAD_BYTES = 300000 };
static void *dead[DEAD_N];
static atomic_int releasing;

/* Medium blocks made and freed by a thread that then exits: its span cache
 * goes to the central cache, where only a release takes them. */
static void *make_and_free(void *arg) {
    for (int i = 0; i < DEAD_N; i++) {
        dead[i] = malloc(DEAD_BYTES);
        if (dead[i]) memset(dead[i], 0x5a, 64);
    }
    for (int i = 0; i < DEAD_N; i++) free(dead[i]);
    return arg;
}

static void *release_central(void *arg) {
    while (atomic_load(&releasing) == 1) { }   /* start when the querier does */
    _hpm_transfer_release(false);
    atomic_store(&releasing, 0);
    return arg;
}

/* (1) Queries of freed medium spans while another thread releases them. */
static void test_dead_spans_while_released(void) {
    long queries = 0, live = 0, made = 0;
    for (int r = 0; r < DEAD_ROUNDS; r++) {
        pthread_t t;
        if (pthread_create(&t, NULL, make_and_free, NULL)) { CHECK(0, "pthread_create"); return; }
        pthread_join(t, NULL);
        for (int i = 0; i < DEAD_N; i++) made += dead[i] != NULL;
        atomic_store(&releasing, 1);
        if (pthread_create(&t, NULL, release_central, NULL)) { CHECK(0, "pthread_create"); return; }
        atomic_store(&releasing, 2);
        do {
            for (int i = 0; i < DEAD_N; i++, queries++) {
                void *base = NULL;
                size_t len = 0;
                if (dead[i] && hpm_range(dead[i], &base, &len)) live++;
            }
        } while (atomic_load(&releasing) != 0);
        pthread_join(t, NULL);
    }
    CHECK(made == (long)DEAD_N * DEAD_ROUNDS, "%ld of %d medium blocks made", made, DEAD_N * DEAD_ROUNDS);
    CHECK(live == 0, "%ld of %ld queries of freed medium blocks said live", live, queries);
}

enum { SLAB_BLOCKS = 2000, SHED_ROUNDS = 60, BLOCK_BYTES = 64 };
static void *keep_block;
static atomic_int shedding;
static long shed_pages;

/* The owner: one block kept live, the rest of its class's slab freed and
 * trimmed (its free pages given back), then allocated again, each round. */
static void *owner_sheds(void *arg) {
    static void *blocks[SLAB_BLOCKS];
    keep_block = malloc(BLOCK_BYTES);
    atomic_store(&shedding, 1);
    for (int r = 0; r < SHED_ROUNDS; r++) {
        for (int i = 0; i < SLAB_BLOCKS; i++) blocks[i] = malloc(BLOCK_BYTES);
        for (int i = 0; i < SLAB_BLOCKS; i++) free(blocks[i]);
        hpm_trim();
    }
    shed_pages = (long)__atomic_load_n(&_hpm_slab_held_pages, __ATOMIC_RELAXED);
    atomic_store(&shedding, 2);
    while (atomic_load(&shedding) != 3) { }   /* keep_block stays live until the querier is done */
    free(keep_block);
    return arg;
}

/* (2) Queries of a live block of another thread's slab while it sheds. */
static void test_live_block_while_shed(void) {
    pthread_t t;
    atomic_store(&shedding, 0);
    if (pthread_create(&t, NULL, owner_sheds, NULL)) { CHECK(0, "pthread_create"); return; }
    while (atomic_load(&shedding) == 0) { }
    long queries = 0, wrong = 0;
    do {
        void *base = NULL;
        size_t len = 0;
        if (!hpm_range((char *)keep_block + 7, &base, &len) || base != keep_block || len < BLOCK_BYTES) wrong++;
        queries++;
    } while (atomic_load(&shedding) == 1);
    atomic_store(&shedding, 3);
    pthread_join(t, NULL);
    CHECK(keep_block != NULL, "the owner's block was not allocated");
    CHECK(wrong == 0, "%ld of %ld queries of a live block gave the wrong range", wrong, queries);
    CHECK(shed_pages > 0, "the owner's trims gave back no slab page (held pages %ld)", shed_pages);
}

/* One query of a random address in [lo, hi) (x: xorshift state): 0 when
 * it is not live, 1 for a true answer that holds the address (its length
 * in *len), -1 for one that does not. */
static int query_random(uint64_t *x, uintptr_t lo, uintptr_t hi, size_t *len) {
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    uintptr_t a = lo + (uintptr_t)(*x % (hi - lo));
    void *base = NULL;
    *len = 0;
    if (!hpm_range((void *)a, &base, len)) return 0;
    return (uintptr_t)base <= a && a - (uintptr_t)base < *len ? 1 : -1;
}

enum { CHURN_BLOCKS = 512, CHURN_ROUNDS = 400, CHURN_BYTES = 48, CHURN_QUERIES = 20000 };
static uintptr_t churn_lo, churn_hi;   /* the address range the owner's blocks came from */
static atomic_int churning;   /* 1: the range is set; 2: the owner is done */
static atomic_int queried_enough;

/* The owner: rounds of mallocs and frees of one class (blocks unwritten,
 * so that the only writes to them are the allocator's), a trim every 50
 * rounds so that emptied slabs go back and their records are reused; at
 * least CHURN_ROUNDS rounds, and on until the querier has made its
 * queries (on a busy machine it may not run at once). Every 8th block of
 * the first round stays live throughout, so that some queries find one. */
static void *owner_churns(void *arg) {
    static void *blocks[CHURN_BLOCKS], *kept[CHURN_BLOCKS / 8];
    for (int r = 0; r < CHURN_ROUNDS || !atomic_load(&queried_enough); r++) {
        for (int i = 0; i < CHURN_BLOCKS; i++) {
            blocks[i] = malloc(CHURN_BYTES + (size_t)(r & 1) * 16);
            uintptr_t a = (uintptr_t)blocks[i];
            if (r > 0) continue;
            if (i == 0) churn_lo = churn_hi = a;
            if (a < churn_lo) churn_lo = a;
            if (a > churn_hi) churn_hi = a;
        }
        if (r == 0) atomic_store(&churning, 1);
        for (int i = 0; i < CHURN_BLOCKS; i++) {
            if (r == 0 && i % 8 == 0) kept[i / 8] = blocks[i];
            else free(blocks[i]);
        }
        if (r % 50 == 49) hpm_trim();
    }
    atomic_store(&churning, 2);
    for (int i = 0; i < CHURN_BLOCKS / 8; i++) free(kept[i]);
    return arg;
}

/* (3) Queries of addresses in another thread's slabs while it churns:
 * whatever the answer, a true one is a block of 48 or 64 bytes that holds
 * the address. */
static void test_churning_slabs(void) {
    pthread_t t;
    atomic_store(&churning, 0);
    atomic_store(&queried_enough, 0);
    if (pthread_create(&t, NULL, owner_churns, NULL)) { CHECK(0, "pthread_create"); return; }
    while (atomic_load(&churning) == 0) { }
    uintptr_t lo = churn_lo, hi = churn_hi + CHURN_BYTES;
    long queries = 0, live = 0, bad = 0;
    uint64_t x = 88172645463325252ull;
    do {
        size_t len;
        int r = query_random(&x, lo, hi, &len);
        live += r != 0;
        bad += r < 0 || (r > 0 && len != 48 && len != 64);
        if (++queries == CHURN_QUERIES) atomic_store(&queried_enough, 1);
    } while (atomic_load(&churning) == 1);
    pthread_join(t, NULL);
    CHECK(live > 0, "none of %ld queries found a live block", queries);
    CHECK(bad == 0, "%ld of %ld true answers (of %ld queries) were not a 48- or 64-byte block holding the address", bad, live,
          queries);
}

enum { API_WORKERS = 3, API_SLOTS = 512, API_QUERIES = 100000 };
static atomic_int api_stop;
static atomic_long api_bad_usable;
static pthread_mutex_t api_range_lock = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t api_lo = UINTPTR_MAX, api_hi;

/* A worker: random small (1..2000 B) and medium (8 KiB..300 KB) blocks in
 * 512 slots, one in 256 reallocated to twice its size, a trim every 4096
 * steps; each block's usable size checked before its free. Blocks are not
 * written (only the allocator writes them: see the file's comment). A
 * realloc writes the new block, though: it copies the old contents, as
 * the owner's own store would, and a query of a small block reads its
 * second word, which is the program's race (docs/allocator.md, "Range
 * queries from any thread"; TSan reported it here in one of four CI
 * runs, session 26). So a small block to be reallocated holds at most 8 bytes, and
 * the copy stays in its first word. */
static void *api_worker(void *arg) {
    uint64_t x = (uintptr_t)arg * 2654435761u + 1;
    void *keep[API_SLOTS] = {0};
    size_t want[API_SLOTS] = {0};
    while (!atomic_load(&api_stop)) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        unsigned i = (unsigned)(x % API_SLOTS);
        if (keep[i]) {
            if (malloc_usable_size(keep[i]) < want[i]) atomic_fetch_add(&api_bad_usable, 1);
            free(keep[i]);
            keep[i] = NULL;
            continue;
        }
        size_t n = (x >> 20) % 4 == 0 ? 8192 + (x >> 8) % 300000 : 1 + (x >> 8) % 2000;
        bool grow = (x & 255) == 0;
        if (grow && n < 8192) n = 1 + n % sizeof(void *);   /* realloc copies n bytes: none into the second word */
        keep[i] = malloc(n);
        want[i] = n;
        if (keep[i] && grow) {
            void *r = realloc(keep[i], 2 * n);
            if (r) { keep[i] = r; want[i] = 2 * n; }
        }
        if (!keep[i]) continue;
        pthread_mutex_lock(&api_range_lock);
        if ((uintptr_t)keep[i] < api_lo) api_lo = (uintptr_t)keep[i];
        if ((uintptr_t)keep[i] + want[i] > api_hi) api_hi = (uintptr_t)keep[i] + want[i];
        pthread_mutex_unlock(&api_range_lock);
        if ((x & 4095) == 0) hpm_trim();
    }
    for (int i = 0; i < API_SLOTS; i++) free(keep[i]);
    return arg;
}

/* (4) The API beside allocating threads: random addresses of their range
 * queried (a true answer must hold the address), the counters read and
 * the heap trimmed now and then. */
static void test_api_beside_workers(void) {
    pthread_t t[API_WORKERS];
    int started = 0;
    for (long i = 0; i < API_WORKERS; i++) started += pthread_create(&t[i], NULL, api_worker, (void *)(i + 1)) == 0;
    CHECK(started == API_WORKERS, "%d of %d workers started", started, API_WORKERS);
    uint64_t x = 7;
    long queries = 0, live = 0, bad = 0;
    while (queries < API_QUERIES) {
        pthread_mutex_lock(&api_range_lock);
        uintptr_t lo = api_lo, hi = api_hi;
        pthread_mutex_unlock(&api_range_lock);
        if (hi <= lo) continue;
        size_t len;
        int r = query_random(&x, lo, hi, &len);
        live += r != 0;
        bad += r < 0;
        if (++queries % 5000 == 0) {
            hpm_stats_t st;
            hpm_stats_get(&st);
        }
        if (queries % 20000 == 0) hpm_trim();
    }
    atomic_store(&api_stop, 1);
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    CHECK(live > 0, "none of %ld queries found a live block", queries);
    CHECK(bad == 0, "%ld of %ld true answers did not hold the address", bad, live);
    CHECK(atomic_load(&api_bad_usable) == 0, "%ld blocks had a usable size under their request", atomic_load(&api_bad_usable));
}

int main(void) {
    free(malloc(1));   /* hpmalloc set up, its background thread idle */
    test_dead_spans_while_released();
    test_live_block_while_shed();
    test_churning_slabs();
    test_api_beside_workers();
    return TEST_DONE();
}
