/* heaptest.h: helpers for the unit tests that count the pageheap's pages
 * (included after internal.h): the count of pages in use, and a thread
 * that does nothing, started and joined once so that glibc's own
 * allocations for a thread (its TLS vector, from the creating thread's
 * heap) exist before a test takes its first count; the same for the
 * allocator's background thread; the pageheap's check under its lock. */
#ifndef HPM_HEAPTEST_H
#define HPM_HEAPTEST_H
#include <pthread.h>
#include <stdlib.h>

static inline size_t ht_used_pages(void) {
    pthread_mutex_lock(&_hpm_ph.lock);
    size_t n = _hpm_ph.used_pages_total;
    pthread_mutex_unlock(&_hpm_ph.lock);
    return n;
}

/* The pageheap's invariants (check.c), under its lock; why says what broke. */
static inline bool ht_pageheap_sound(char *why) {
    pthread_mutex_lock(&_hpm_ph.lock);
    bool ok = _hpm_check_pageheap(&_hpm_ph, why);
    pthread_mutex_unlock(&_hpm_ph.lock);
    return ok;
}

static inline void *ht_idle(void *arg) { return arg; }   /* inline: no unused-function warning where ht_first_thread is not called */

/* 0 when the idle thread ran. The allocator's background thread is
 * started too (it starts once a second thread takes a heap, init.c), so
 * that its TLS vector, also from this thread's heap, exists before the
 * first count. */
static inline int ht_first_thread(void) {
    pthread_t t;
    if (pthread_create(&t, NULL, ht_idle, NULL) != 0) return -1;
    int e = pthread_join(t, NULL);
    void *volatile first = malloc(16);   /* the allocator is set up before its background thread starts */
    free(first);
    _hpm_background_kick();
    return e;
}
#endif
