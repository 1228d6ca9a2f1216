/* lockorder.c: the debug-build check of the lock order of lockorder.h.
 * Compiled at every level; empty below HPM_DEBUG 2. Invariant: bit r of
 * held_mask is set exactly while this thread holds the lock of rank r. */
#include <stdio.h>
#include "internal.h"

#if HPM_DEBUG >= 2
static const char *const rank_names[HPM_LOCK_RANKS] = {"unranked", "heaps", "abandoned", "pageheap", "metadata"};
static pthread_mutex_t *ranked[HPM_LOCK_RANKS];
static __thread unsigned held_mask;

void _hpm_lock_rank(pthread_mutex_t *m, int rank) {
    hpm_assert(rank > HPM_LOCK_UNRANKED && rank < HPM_LOCK_RANKS);
    __atomic_store_n(&ranked[rank], m, __ATOMIC_RELEASE);
}

static int rank_of(const pthread_mutex_t *m) {
    if (m == &_hpm_ph.lock) return HPM_LOCK_PAGEHEAP;
    for (int r = 1; r < HPM_LOCK_RANKS; r++)
        if (__atomic_load_n(&ranked[r], __ATOMIC_ACQUIRE) == m) return r;
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

int _hpm_lock_checked(pthread_mutex_t *m) {
    int rank = rank_of(m);
    if (rank && (held_mask >> rank) != 0) order_fail("taking", rank);
    int e = (pthread_mutex_lock)(m);
    if (rank && e == 0) held_mask |= 1u << rank;
    return e;
}

int _hpm_trylock_checked(pthread_mutex_t *m) {
    int rank = rank_of(m);
    if (rank && ((held_mask >> rank) & 1)) order_fail("trying", rank);   /* would fail on itself */
    int e = (pthread_mutex_trylock)(m);
    if (rank && e == 0) held_mask |= 1u << rank;
    return e;
}

int _hpm_unlock_checked(pthread_mutex_t *m) {
    int rank = rank_of(m);
    if (rank) {
        if (!((held_mask >> rank) & 1)) order_fail("unlocking (not held)", rank);
        held_mask &= ~(1u << rank);
    }
    return (pthread_mutex_unlock)(m);
}

int _hpm_lock_init_checked(pthread_mutex_t *m, const pthread_mutexattr_t *attr) {
    int rank = rank_of(m);
    if (rank) held_mask &= ~(1u << rank);
    return (pthread_mutex_init)(m, attr);
}
#endif
