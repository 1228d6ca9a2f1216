/* test_exitdtor.c: a program's key destructors that run after hpmalloc's.
 *
 * glibc runs the key destructors in rounds, in the order of the keys, and
 * a round again while some destructor set a key (at most
 * PTHREAD_DESTRUCTOR_ITERATIONS rounds). A program key made after
 * hpmalloc's (any malloc comes first) has its destructor run after
 * heap_thread_exit gave the thread's heap back.
 * - Frees there (the commonest destructor: free the thread's data) went
 *   without a heap and were subtracted from no count: bytes in use stayed
 *   up by each block's size for good (review, session 52: 100 threads
 *   whose destructor freed a 4 MB block each, 400 MB in use with nothing
 *   live).
 * - Mallocs there took a heap and set hpmalloc's key again, so that glibc
 *   would run heap_thread_exit once more; in glibc's last round (a
 *   destructor that sets its own key again, to run last) it did not, and
 *   each such thread left a heap in use with its slabs (10,000 threads:
 *   125 MB of RSS). Now such a call takes a heap for itself and gives it
 *   back before it returns.
 *
 * N threads, one after another, each allocate a small, a medium and a
 * large block and leave them to the destructor. After the joins the
 * bytes in use are those from before. Then N threads whose destructor
 * sets its key again for every round glibc runs, and allocates in each
 * (small, medium, aligned, realloc), keeping the last round's block: the
 * live heaps are as many as before, metadata did not grow by a heap
 * record a thread, and the kept blocks hold their contents. */
#include <limits.h>
#include <pthread.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define N 100
/* ThreadSanitizer ends its thread state in glibc's last round (its own
 * destructor sets its key again to run last), and instrumented code
 * after that crashes it: under TSan the rounds before the last. */
#if defined(__SANITIZE_THREAD__)
#define ROUNDS (PTHREAD_DESTRUCTOR_ITERATIONS - 1)
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ROUNDS (PTHREAD_DESTRUCTOR_ITERATIONS - 1)
#endif
#endif
#ifndef ROUNDS
#define ROUNDS PTHREAD_DESTRUCTOR_ITERATIONS
#endif

static const size_t sizes[3] = {100, 100 * 1024, 4 << 20};
static pthread_key_t data_key;
static int bad_contents;

static void data_free(void *v) {
    void **blocks = v;
    for (int i = 0; i < 3; i++) {
        const unsigned char *p = blocks[i];
        if (p[0] != 0x5a || p[sizes[i] - 1] != 0x5a) __atomic_add_fetch(&bad_contents, 1, __ATOMIC_RELAXED);
        free(blocks[i]);
    }
    free(blocks);
}

static void *data_worker(void *arg) {
    (void)arg;
    void **blocks = malloc(3 * sizeof *blocks);
    for (int i = 0; i < 3; i++) {
        blocks[i] = malloc(sizes[i]);
        memset(blocks[i], 0x5a, sizes[i]);
    }
    pthread_setspecific(data_key, blocks);
    return NULL;
}

static pthread_key_t last_key;
static void *kept[N];
static int idx, rounds_seen[ROUNDS + 1];

static void last_dtor(void *v) {
    long round = (long)v;
    if (round >= 1 && round <= ROUNDS) rounds_seen[round]++;
    void *small = malloc(48), *medium = malloc(40 * 1024), *aligned = NULL;
    if (posix_memalign(&aligned, 4096, 200) != 0) aligned = NULL;
    if (small) small = realloc(small, 3000);
    if (!small || !medium || !aligned) __atomic_add_fetch(&bad_contents, 1, __ATOMIC_RELAXED);
    else {
        memset(small, 0x33, 3000);
        memset(medium, 0x44, 40 * 1024);
        memset(aligned, 0x55, 200);
    }
    free(medium);
    free(aligned);
    free(kept[idx]);   /* the previous round's */
    kept[idx] = small;
    if (round < ROUNDS) pthread_setspecific(last_key, (void *)(round + 1));
}

static void *last_worker(void *arg) {
    (void)arg;
    void *volatile p = malloc(16);
    free(p);
    pthread_setspecific(last_key, (void *)1L);
    return NULL;
}

static void run_threads(void *(*fn)(void *), int n) {
    for (int i = 0; i < n; i++) {
        pthread_t t;
        int e = pthread_create(&t, NULL, fn, NULL);
        CHECK(e == 0, "pthread_create: %d", e);
        if (e) break;
        pthread_join(t, NULL);
    }
}

int main(void) {
    CHECK(ht_first_thread() == 0);   /* hpmalloc's key exists: the program's keys come after it */
    CHECK(pthread_key_create(&data_key, data_free) == 0);

    run_threads(data_worker, 1);   /* glibc's own first-time allocations for such a thread */
    int64_t used_before = _hpm_heaps_used_bytes();
    run_threads(data_worker, N);
    int64_t used_after = _hpm_heaps_used_bytes();
    CHECK(bad_contents == 0, "%d blocks lost their contents before the destructor freed them", bad_contents);
    CHECK(used_after == used_before, "bytes in use %lld before %d threads whose destructor freed their blocks, %lld after",
          (long long)used_before, N, (long long)used_after);

    CHECK(pthread_key_create(&last_key, last_dtor) == 0);
    hpm_trim();
    unsigned live_before = __atomic_load_n(&_hpm_ph.heaps_live, __ATOMIC_RELAXED);
    size_t meta_before = _hpm_meta_committed_bytes();
    used_before = _hpm_heaps_used_bytes();
    for (idx = 0; idx < N; idx++) run_threads(last_worker, 1);
    unsigned live_after = __atomic_load_n(&_hpm_ph.heaps_live, __ATOMIC_RELAXED);
    size_t meta_after = _hpm_meta_committed_bytes();
    for (int r = 1; r <= ROUNDS; r++) CHECK(rounds_seen[r] == N, "the destructor ran %d times in round %d, not %d", rounds_seen[r], r, N);
    CHECK(live_after == live_before, "live heaps %u before %d threads that allocate in their last destructor round, %u after",
          live_before, N, live_after);
    CHECK(meta_after - meta_before < (size_t)N * sizeof(hpm_heap_t) / 4,
          "metadata grew by %zu KiB over %d threads (a heap record is %zu bytes)", (meta_after - meta_before) >> 10, N,
          sizeof(hpm_heap_t));
    CHECK(bad_contents == 0, "%d allocations failed in the destructors", bad_contents);
    int lost = 0;
    for (int i = 0; i < N; i++) {
        const unsigned char *p = kept[i];
        if (!p || p[0] != 0x33 || p[2999] != 0x33) lost++;
        free(kept[i]);
    }
    CHECK(lost == 0, "%d blocks allocated in a last destructor round lost their contents", lost);
    used_after = _hpm_heaps_used_bytes();
    CHECK(used_after == used_before, "bytes in use %lld before, %lld after every block of the destructors was freed",
          (long long)used_before, (long long)used_after);
    return TEST_DONE();
}
