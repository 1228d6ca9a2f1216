/* lockorder.c: the debug-build check of the lock order of lockorder.h.
 * Compiled at every level; empty below HPM_DEBUG 2. Invariant: bit r of
 * held_mask is set exactly while this thread holds a lock of rank r
 * (held_count[r] of them; a rank may be an array of locks, taken in
 * ascending address order). */
#include <stdio.h>
#include "internal.h"

#if HPM_DEBUG >= 2
static const char *const rank_names[HPM_LOCK_RANKS] = {"unranked", "heaps", "abandoned", "pageheap", "metadata"};
static pthread_mutex_t *ranked[HPM_LOCK_RANKS];   /* the first lock of each rank */
static size_t ranked_n[HPM_LOCK_RANKS];           /* how many locks, consecutive from it */
static __thread unsigned held_mask;
static __thread unsigned char held_count[HPM_LOCK_RANKS];
static __thread const pthread_mutex_t *held_last[HPM_LOCK_RANKS];   /* highest address taken */

void _hpm_lock_rank_n(pthread_mutex_t *first, size_t n, int rank) {
    hpm_assert(rank > HPM_LOCK_UNRANKED && rank < HPM_LOCK_RANKS && n > 0);
    __atomic_store_n(&ranked_n[rank], n, __ATOMIC_RELAXED);
    __atomic_store_n(&ranked[rank], first, __ATOMIC_RELEASE);
}

void _hpm_lock_rank(pthread_mutex_t *m, int rank) { _hpm_lock_rank_n(m, 1, rank); }

static int rank_of(const pthread_mutex_t *m) {
    if (m == &_hpm_ph.lock) return HPM_LOCK_PAGEHEAP;
    for (int r = 1; r < HPM_LOCK_RANKS; r++) {
        const pthread_mutex_t *first = __atomic_load_n(&ranked[r], __ATOMIC_ACQUIRE);
        if (first && m >= first && m < first + __atomic_load_n(&ranked_n[r], __ATOMIC_RELAXED)) return r;
    }
    return HPM_LOCK_UNRANKED;
}

bool _hpm_lock_held(int rank) { return (held_mask >> rank) & 1; }

static void order_fail(const char *what, int rank) {
    char buf[HPM_WHY_BYTES];
    int top = held_mask ? 31 - __builtin_clz(held_mask) : 0;
    snprintf(buf, sizeof buf, "lock order: %s %s while holding %s (held mask 0x%x)", what, rank_names[rank],
             rank_names[top], held_mask);
    _hpm_assert_fail(__FILE__, __LINE__, __func__, buf);
}

/* Taking m of this rank is in order: nothing of a higher rank is held,
 * and locks of its own rank (an array) only in ascending address order. */
static bool in_order(const pthread_mutex_t *m, int rank) {
    if ((held_mask >> (rank + 1)) != 0) return false;
    return !held_count[rank] || m > held_last[rank];
}

static void note_taken(const pthread_mutex_t *m, int rank) {
    held_mask |= 1u << rank;
    held_count[rank]++;
    if (!held_last[rank] || m > held_last[rank]) held_last[rank] = m;
}

int _hpm_lock_checked(pthread_mutex_t *m) {
    int rank = rank_of(m);
    if (rank && !in_order(m, rank)) order_fail("taking", rank);
    int e = (pthread_mutex_lock)(m);
    if (rank && e == 0) note_taken(m, rank);
    return e;
}

int _hpm_trylock_checked(pthread_mutex_t *m) {
    int rank = rank_of(m);
    if (rank && held_count[rank] && m == held_last[rank]) order_fail("trying", rank);   /* would fail on itself */
    int e = (pthread_mutex_trylock)(m);
    if (rank && e == 0) note_taken(m, rank);
    return e;
}

int _hpm_unlock_checked(pthread_mutex_t *m) {
    int rank = rank_of(m);
    if (rank) {
        if (!held_count[rank]) order_fail("unlocking (not held)", rank);
        if (--held_count[rank] == 0) {
            held_mask &= ~(1u << rank);
            held_last[rank] = NULL;
        }
    }
    return (pthread_mutex_unlock)(m);
}

int _hpm_lock_init_checked(pthread_mutex_t *m, const pthread_mutexattr_t *attr) {
    int rank = rank_of(m);
    if (rank) {
        held_count[rank] = 0;
        held_mask &= ~(1u << rank);
        held_last[rank] = NULL;
    }
    return (pthread_mutex_init)(m, attr);
}
#endif
