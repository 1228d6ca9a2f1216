/* ccow_os.h: the OS calls CCoW needs beyond the core's table (prim.h):
 * userfaultfd write-protect, a range's protections, a copy that cannot
 * fault, mremap over a region, warm spare hugepages kept MADV_DONTFORK,
 * and the futex and yield its thread waits with.
 * Nothing else in src/ccow/ calls the kernel: every other system call goes
 * through the core's hpm_os_t (_hpm_os). Like prim.h, functions return 0 or an
 * errno value (never -1) unless they return a pointer (NULL on failure);
 * addresses and sizes are 2 MiB aligned. Tests point _hpm_ccow_os at a
 * fake table before the first fork. None of them calls malloc. */
#ifndef HPM_CCOW_OS_H
#define HPM_CCOW_OS_H
#include <stddef.h>
#include <stdint.h>
#include "hooks.h"

typedef struct hpm_ccow_os_s {
    /* A userfaultfd usable for write-protect, with kernel-mode faults
     * handled (not UFFD_USER_MODE_ONLY) and UFFD_FEATURE_WP_UNPOPULATED
     * (Linux 6.4), so that write-protect covers pages that are not
     * present too. Returns the fd, or -errno (-ENOTSUP without the
     * feature). */
    int (*uffd_open)(void);
    /* Registers [addr, addr+len) for write-protect faults and
     * write-protects it, present pages and unpopulated ones alike: from
     * return until uffd_release no thread can store there (TLBs are
     * flushed). */
    int (*uffd_protect)(int uffd, void *addr, size_t len_bytes);
    /* Lifts the write-protect if the range is still the registered
     * mapping, reads and drops every pending fault message, wakes the
     * threads that faulted in [addr, addr+len), and unregisters the range
     * (a registered mapping would refuse a later MADV_COLLAPSE over
     * unpopulated pages and would not merge with its neighbours). */
    int (*uffd_release)(int uffd, void *addr, size_t len_bytes);
    /* 0 when every page of [addr, addr+len) lies in private mappings that
     * are readable and writable and nothing else (rw-p); EACCES when some
     * page has other protections; another errno when the kernel cannot
     * tell (ENOTTY: no PROCMAP_QUERY, before Linux 6.11). */
    int (*range_rw)(void *addr, size_t len_bytes);
    /* Copies len bytes from src to dst through the kernel
     * (process_vm_readv on this process): a page that cannot be read
     * fails the copy with EFAULT instead of raising SIGSEGV. */
    int (*copy_nofault)(void *dst, const void *src, size_t len_bytes);
    /* mremap(src, len, len, MAYMOVE|FIXED, dst): dst's old pages go away. */
    int (*remap_fixed)(void *src, void *dst, size_t len_bytes);
    /* A 2 MiB-aligned, THP-advised, MADV_DONTFORK range of len_bytes,
     * touched so that its huge pages exist. NULL on failure. */
    void *(*spare_map)(size_t len_bytes);
    int (*spare_unmap)(void *addr, size_t len_bytes);
    /* Touches every page of a spare (faulting its huge page in again if
     * it was dropped), then drops it (MADV_DONTNEED): the freed huge page
     * sits warm on this CPU's free list for the next kernel allocation. */
    int (*spare_warm_drop)(void *addr, size_t len_bytes);
    void (*close_fd)(int fd);
    /* Sleeps while *word == expected (FUTEX_WAIT_PRIVATE), at most timeout_ns; may return early. */
    void (*futex_wait)(uint32_t *word, uint32_t expected, uint64_t timeout_ns);
    /* Wakes one thread sleeping on word. */
    void (*futex_wake)(uint32_t *word);
    /* Gives the CPU to another thread (sched_yield). */
    void (*yield_cpu)(void);
} hpm_ccow_os_t;

HPM_INTERNAL extern const hpm_ccow_os_t _hpm_ccow_os_linux;
/* The table CCoW uses; tests may point it elsewhere before the first fork. */
HPM_INTERNAL extern const hpm_ccow_os_t *_hpm_ccow_os;
#endif
