/* caching_on.h: the set-up of tests that look into a thread's span cache
 * (spancache.c). Medium spans are cached only once a second thread has
 * had a heap (medium_caching_on), and a thread's cache holds at most a
 * quarter of the heap's used pages (cache_bound; all of them once the
 * thread has freed HPM_SPANCACHE_BUSY_FREES medium spans), so these tests run a
 * second thread first and then hold a ballast of 64 MiB, never written,
 * which makes that bound its full 16 MiB. caching_on_start runs the
 * thread: 0, or pthread_create's error. */
#ifndef HPM_CACHING_ON_H
#define HPM_CACHING_ON_H
#include <pthread.h>
#include <stdlib.h>

#define CACHING_BALLAST_BYTES ((size_t)64 << 20)

static void *caching_on_thread(void *arg) {
    void *volatile p = malloc(32);   /* a heap of its own */
    free(p);
    return arg;
}

static int caching_on_start(void) {
    pthread_t t;
    int err = pthread_create(&t, NULL, caching_on_thread, NULL);
    if (err == 0) pthread_join(t, NULL);
    return err;
}
#endif
