/* parked_cache.h: a second thread that fills its span cache and stays
 * alive, parked, so that a test can see whether another thread's trim or
 * out-of-memory retry takes that cache back. park_start makes the thread
 * (stack_bytes 0: the default stack), which mallocs 16 medium blocks of
 * 1 MiB, writes their first page, frees them all into its cache and
 * parks; park_start returns once it has. A thread's cache holds at most a
 * quarter of the heap's used pages (spancache.c, cache_bound), so a
 * ballast of 64 MiB, never written, is held while the blocks are freed:
 * all 16 stay in the thread's cache. park_end lets it end and joins
 * it. One parked thread at a time. */
#ifndef HPM_PARKED_CACHE_H
#define HPM_PARKED_CACHE_H
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static int park_state;   /* 1: cache filled, 2: may end */

static void park_set(int state) {
    pthread_mutex_lock(&park_lock);
    park_state = state;
    pthread_cond_broadcast(&park_cond);
    pthread_mutex_unlock(&park_lock);
}

static void park_wait(int state) {
    pthread_mutex_lock(&park_lock);
    while (park_state != state) pthread_cond_wait(&park_cond, &park_lock);
    pthread_mutex_unlock(&park_lock);
}

static void *park_main(void *arg) {
    (void)arg;
    void *b[16], *ballast = malloc((size_t)64 << 20);
    for (int i = 0; i < 16; i++) {
        b[i] = malloc((size_t)1 << 20);
        if (b[i]) memset(b[i], i + 1, 4096);
    }
    for (int i = 0; i < 16; i++) free(b[i]);
    free(ballast);
    park_set(1);
    park_wait(2);
    return NULL;
}

/* 0, or pthread_create's error. */
static inline int park_start(pthread_t *t, size_t stack_bytes) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (stack_bytes) pthread_attr_setstacksize(&attr, stack_bytes);
    park_state = 0;
    int e = pthread_create(t, &attr, park_main, NULL);
    pthread_attr_destroy(&attr);
    if (!e) park_wait(1);
    return e;
}

static inline int park_end(pthread_t t) {
    park_set(2);
    return pthread_join(t, NULL);
}
#endif
