/* lockorder.h: the order in which the allocator's locks may be taken,
 * written once, and its check in debug builds.
 *
 * A thread that holds a lock may take only locks of a higher rank:
 *
 *   1 heaps       heap.c heaps_lock: the list of heaps, retired heaps
 *   2 abandoned   heap.c abandoned_lock[class]: slabs of exited threads (an
 *                 array: fork's prepare handler takes them all, in order)
 *   3 pageheap    _hpm_ph.lock: the pageheap (hugepage.c, filler.c, release.c)
 *   4 metadata    meta.c meta_lock: the metadata bump allocator
 *
 * (so fork's prepare handler takes 1, 2, 3 in that order, and a span
 * allocation under the pageheap lock may allocate metadata). A trylock
 * never waits, so it may break the order; it is recorded, not checked.
 * Other mutexes (CCoW, colours) are unranked and not checked, as is
 * heap.c's exit_lock (a rwlock), which comes before rank 1: an exiting
 * thread holds it shared, fork's prepare handler exclusive, first.
 *
 * At HPM_DEBUG >= 2 this header replaces pthread_mutex_lock, _trylock,
 * _unlock and _init by checking versions (lockorder.c), so every call site
 * is checked without naming ranks there: a lock gets its rank once, from
 * _hpm_lock_rank() where it is set up (the pageheap's is known by address).
 * Each thread keeps a mask of the ranks it holds; taking a rank at or
 * below the highest held, or unlocking a ranked lock not held, prints one
 * line and aborts. pthread_mutex_init clears the rank's bit (the fork
 * child re-creates the locks its prepare handler took). At lower levels
 * the calls are the plain pthread ones and _hpm_lock_rank does nothing. */
#ifndef HPM_LOCKORDER_H
#define HPM_LOCKORDER_H
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include "debug.h"

enum { HPM_LOCK_UNRANKED = 0, HPM_LOCK_HEAPS, HPM_LOCK_ABANDONED, HPM_LOCK_PAGEHEAP, HPM_LOCK_META, HPM_LOCK_RANKS };

#if HPM_DEBUG >= 2
__attribute__((visibility("hidden"))) void _hpm_lock_rank(pthread_mutex_t *m, int rank);
/* n consecutive locks of one rank (an array): one thread may hold several,
 * taken in ascending address order. */
__attribute__((visibility("hidden"))) void _hpm_lock_rank_n(pthread_mutex_t *first, size_t n, int rank);
/* True when the calling thread holds the lock of this rank. */
__attribute__((visibility("hidden"))) bool _hpm_lock_held(int rank);
__attribute__((visibility("hidden"))) int _hpm_lock_checked(pthread_mutex_t *m);
__attribute__((visibility("hidden"))) int _hpm_trylock_checked(pthread_mutex_t *m);
__attribute__((visibility("hidden"))) int _hpm_unlock_checked(pthread_mutex_t *m);
__attribute__((visibility("hidden"))) int _hpm_lock_init_checked(pthread_mutex_t *m, const pthread_mutexattr_t *attr);
#define pthread_mutex_lock(m) _hpm_lock_checked(m)
#define pthread_mutex_trylock(m) _hpm_trylock_checked(m)
#define pthread_mutex_unlock(m) _hpm_unlock_checked(m)
#define pthread_mutex_init(m, attr) _hpm_lock_init_checked(m, attr)
#else
#define _hpm_lock_rank(m, rank) ((void)(m), (void)(rank))
#define _hpm_lock_rank_n(m, n, rank) ((void)(m), (void)(n), (void)(rank))
#define _hpm_lock_held(rank) ((void)(rank), true)
#endif
#endif
