/* gate.h: the owner's gates against the background thread's drains.
 *
 * A heap is its thread's own: the owner works on its span cache, its
 * emptied slabs and its slab lists without a lock. The background thread
 * still drains some of it: the span cache and emptied slabs of a thread
 * that went idle (spancache.c, heap.c), and the inbox of an owner that
 * sleeps while others free its blocks (remote.c, "An asleep owner's
 * inbox"). A gate keeps the two apart without a lock on the owner's
 * path: an asymmetric fence. The owner marks itself inside (a plain store
 * that makes its state word odd, a compiler barrier) and then reads the
 * drainer's flag; the drainer sets the flag, makes every thread of the
 * process pass a full barrier (membarrier, fence_all_threads) and then
 * reads the owner's state. So at least one of them sees the other: an
 * owner that sees the flag steps out and waits; a drainer that sees the
 * state odd leaves that part of the heap alone. The acquire and release
 * on the two marks order the heap's contents between them.
 *
 * One flag (sc_drainer), two state words: sc_state around the span cache
 * and the emptied slabs, slab_state around the slab lists. Each grows by
 * 2 per entry (the drainer reads from sc_state whether the owner was
 * busy). The owner is the only writer of its state words. */
#ifndef HPM_GATE_H
#define HPM_GATE_H
#include <sched.h>
#include "internal.h"

static __attribute__((noinline, cold, unused)) uint32_t hpm_gate_wait(hpm_heap_t *h, _Atomic uint32_t *state,
                                                                      uint32_t in) {
    do {
        atomic_store_explicit(state, in + 1, memory_order_release);   /* step out */
        while (atomic_load_explicit(&h->sc_drainer, memory_order_acquire)) sched_yield();
        in += 2;
        atomic_store_explicit(state, in, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    } while (atomic_load_explicit(&h->sc_drainer, memory_order_acquire));
    return in;
}

/* One load and one store to enter, one store to leave. */
static inline uint32_t hpm_gate_enter(hpm_heap_t *h, _Atomic uint32_t *state) {
    uint32_t in = atomic_load_explicit(state, memory_order_relaxed) | 1u;
    atomic_store_explicit(state, in, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);   /* the CPU's fence comes from the drainer's membarrier */
    if (unlikely(atomic_load_explicit(&h->sc_drainer, memory_order_acquire))) in = hpm_gate_wait(h, state, in);
    return in;
}

static inline void hpm_gate_leave(_Atomic uint32_t *state, uint32_t in) {
    atomic_store_explicit(state, in + 1, memory_order_release);
}

/* The drainer, after it closed the gate (sc_drainer set) and fenced every
 * thread: whether the owner is outside the part that state guards. */
static inline bool hpm_gate_owner_out(_Atomic uint32_t *state) {
    return !(atomic_load_explicit(state, memory_order_acquire) & 1u);
}
#endif
