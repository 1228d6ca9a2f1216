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
 *
 * N threads, one after another, each allocate a small, a medium and a
 * large block and leave them to the destructor. After the joins the
 * bytes in use are those from before. */
#include <pthread.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define N 100
#define ROUNDS PTHREAD_DESTRUCTOR_ITERATIONS

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
    return TEST_DONE();
}
