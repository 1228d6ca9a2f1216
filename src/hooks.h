/* hooks.h: the narrow interfaces between the allocator core and the
 * features that sit beside it (ccow/, color/, publish.c). The core calls
 * the feature entry points; the features call back only the functions
 * declared here, never core internals. All of these are internal
 * (hidden visibility in the shared library). */
#ifndef HPM_HOOKS_H
#define HPM_HOOKS_H
#include <stddef.h>
#include <stdint.h>
#include "hpmalloc.h"
#include "prim/prim.h"

#define HPM_INTERNAL __attribute__((visibility("hidden")))

/* The library's long-lived threads (the background thread, CCoW's) look
 * this often whether the program's own threads have all ended
 * (prim.h, program_gone), and end then, so that the process exits. */
#define HPM_GONE_LOOK_NS (250ull * 1000000)

/* ---- provided by the core ---- */
/* Live counters. Points at the published area once publish.c has set it
 * up, else at a static struct. Update with __atomic builtins. */
HPM_INTERNAL extern hpm_stats_t *_hpm_stats;
/* Current value of an option (same as hpm_option_get). */
HPM_INTERNAL long _hpm_option(hpm_option_t opt);
/* Writes the start addresses of the heap's THP-backed hugepages that hold
 * live data into out (at most max) and returns how many there are (which
 * may exceed max). Safe to call from any thread; takes the heap lock
 * briefly. */
HPM_INTERNAL size_t _hpm_hp_list_in_use(uintptr_t *out, size_t max);
/* CCoW collapsed the hugepage at addr (MADV_COLLAPSE): the pages a trim
 * had given back inside it are resident again, and are forgotten so that
 * a later trim gives them back again (collapse.c). */
HPM_INTERNAL void _hpm_hp_collapsed(uintptr_t addr);
/* Allocation for feature metadata that must never recurse into malloc:
 * zeroed, 64-byte aligned, never freed. NULL when out of memory. */
HPM_INTERNAL void *_hpm_meta_alloc(size_t size_bytes);
/* The start-up gate: starts the allocator unless it has started (returns
 * at once then). Public entry points of the features call it. */
HPM_INTERNAL void _hpm_init_slow(void);
/* Formats like snprintf and writes to stderr through the OS table. */
HPM_INTERNAL void _hpm_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For the library's long-lived threads: without /proc the process's
 * threads cannot be counted, so program_gone never holds and a program
 * whose main thread ended with pthread_exit never exited (session 50's
 * review). When no thread of the program holds a heap and the threads
 * cannot be counted, such a thread ends itself, not the process: if it
 * was the last thread, glibc exits the process with status 0 as it ends;
 * if a program thread that never called the allocator still runs, only
 * the background work stops until a later malloc starts it again. */
HPM_INTERNAL bool _hpm_own_thread_steps_aside(void);

/* Copies n_bytes (8-byte words, both sides 8-aligned) word by word with
 * relaxed atomics: the published counters are read while other threads
 * write them, and a plain memcpy on either side would be a data race. */
static inline void _hpm_copy_words_relaxed(void *dst, const void *src, size_t n_bytes) {
    uint64_t *d = (uint64_t *)dst;
    const uint64_t *s = (const uint64_t *)src;
    for (size_t i = 0; i < n_bytes / 8; i++) __atomic_store_n(&d[i], __atomic_load_n(&s[i], __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

/* ---- provided by ccow/ (called once from the core's init, after options) ---- */
HPM_INTERNAL void _hpm_ccow_init(void) __attribute__((weak));
/* hpm_option_set of HPM_OPT_CCOW or HPM_OPT_CCOW_RATE (control.c, under
 * its options lock): CCoW takes the one value changed, as hpm_ccow_config. */
HPM_INTERNAL void _hpm_ccow_option_set(hpm_option_t opt, long value) __attribute__((weak));
/* Returns a table that forwards to os but makes release,
 * unreserve_to_reserved and map_hugetlb wait while CCoW copies the
 * hugepage they touch. The core should give this table (not os) to the
 * pageheap, before any hugepage is committed. */
HPM_INTERNAL const hpm_os_t *_hpm_ccow_os_guard(const hpm_os_t *os) __attribute__((weak));

/* ---- provided by publish.c ---- */
/* Sets up the area other processes read (hpm stat) and returns it, filled
 * from *initial; NULL if it cannot (the core then keeps its static struct). */
HPM_INTERNAL hpm_stats_t *_hpm_publish_init(const hpm_stats_t *initial) __attribute__((weak));
/* Called in the child after fork, so the child publishes its own area. */
HPM_INTERNAL hpm_stats_t *_hpm_publish_after_fork_child(void) __attribute__((weak));
#endif
