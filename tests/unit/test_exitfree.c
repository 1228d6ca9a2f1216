/* test_exitfree.c: frees that come after a thread's heap was given back.
 *
 * glibc runs the key destructors (hpmalloc's heap_thread_exit among them)
 * and then frees the thread's own buffers (__libc_thread_freeres): the
 * dlerror result of a failed dlsym, strerror's buffer for an unknown code.
 * Such a free used to take a new heap for the thread, which no destructor
 * gave back: one more live heap and about 11.5 KiB of metadata for every
 * thread that exited so (review, session 49), and with them the many-heaps
 * policy on for good. Now it frees without a heap (as a thread whose
 * metadata ran out does).
 *
 * N threads, one after another, each keep a block (so its slab is
 * abandoned with a live block), call strerror and a failing dlsym, and
 * exit. After the joins: the live heaps are as many as before, metadata
 * did not grow by a heap record a thread, and once the kept blocks are
 * freed and trimmed the pages in use are those from before. */
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define N 300

static void *kept[N];
static int idx;

static void *worker(void *arg) {
    (void)arg;
    kept[idx] = malloc(64);
    memset(kept[idx], 7, 64);
    (void)strerror(123456);                             /* the thread's strerror buffer */
    (void)dlsym(RTLD_DEFAULT, "hpm_no_such_symbol_49");   /* the thread's dlerror result */
    return NULL;
}

int main(void) {
    CHECK(ht_first_thread() == 0);
    hpm_trim();
    unsigned live_before = __atomic_load_n(&_hpm_ph.heaps_live, __ATOMIC_RELAXED);
    size_t meta_before = _hpm_meta_committed_bytes(), pages_before = ht_used_pages();
    for (idx = 0; idx < N; idx++) {
        pthread_t t;
        int e = pthread_create(&t, NULL, worker, NULL);
        CHECK(e == 0, "pthread_create: %d", e);
        if (e) break;
        pthread_join(t, NULL);
    }
    unsigned live_after = __atomic_load_n(&_hpm_ph.heaps_live, __ATOMIC_RELAXED);
    size_t meta_after = _hpm_meta_committed_bytes();
    CHECK(live_after == live_before, "live heaps %u before %d exiting threads, %u after", live_before, N, live_after);
    CHECK(meta_after - meta_before < (size_t)N * sizeof(hpm_heap_t) / 4,
          "metadata grew by %zu KiB over %d threads (a heap record is %zu bytes)", (meta_after - meta_before) >> 10, N,
          sizeof(hpm_heap_t));
    for (int i = 0; i < N; i++) {
        const unsigned char *p = kept[i];
        CHECK(p && p[0] == 7 && p[63] == 7, "block %d of an exited thread lost its contents", i);
        free(kept[i]);
    }
    hpm_trim();
    size_t pages_after = ht_used_pages();
    CHECK(pages_after <= pages_before, "pages in use %zu after freeing every block, %zu before", pages_after,
          pages_before);
    return TEST_DONE();
}
