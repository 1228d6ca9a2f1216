/* prim.h: the porting contract. This table is the only way hpmalloc talks
 * to the operating system and the clock: mmap, mprotect, madvise, hugetlb
 * mappings, /proc reads, threads. Policy code (hugepage placement, release
 * timing, CCoW) receives a pointer to a table, so unit tests can pass a fake
 * one and run deterministically without touching the kernel.
 *
 * Conventions: functions return 0 on success or an errno value on failure
 * (never -1), unless they return a pointer (NULL on failure) or a count.
 * Addresses and sizes given to them are 4 KiB aligned; "hp" functions take
 * 2 MiB-aligned addresses and sizes. None of them calls malloc.
 * CCoW's extra calls go through src/ccow/ccow_os.h's table; nothing in src/ccow calls the kernel directly. */
#ifndef HPM_PRIM_H
#define HPM_PRIM_H
#include <stddef.h>
#include <stdint.h>
#include <stdatomic.h>
#include <stdbool.h>

#define HPM_PAGE_SHIFT 12
#define HPM_PAGE_BYTES ((size_t)1 << HPM_PAGE_SHIFT)
#define HPM_HP_SHIFT 21
#define HPM_HP_BYTES ((size_t)1 << HPM_HP_SHIFT)
#define HPM_PAGES_PER_HP 512
#define HPM_GB_BYTES ((size_t)1 << 30)

typedef enum { HPM_THP_ALWAYS, HPM_THP_MADVISE, HPM_THP_NEVER, HPM_THP_UNKNOWN } hpm_thp_mode_t;

typedef struct hpm_os_s {
    /* Reserve address space (no access, no memory), aligned to align_bytes.
     * Counts against RLIMIT_AS, not against the commit limit. */
    void *(*reserve)(size_t size_bytes, size_t align_bytes);
    /* Give reserved (or committed) address space back to the system. */
    int (*unreserve)(void *addr, size_t size_bytes);
    /* Make reserved space readable/writable. Charged to the commit limit
     * (one charge per call: the kernel refuses a call it could not honour,
     * as it would refuse mmap of that size). */
    int (*commit)(void *addr, size_t size_bytes);
    /* Ask for (on) or against (off) transparent huge pages on a range. */
    int (*thp_advise)(void *addr, size_t size_bytes, bool on);
    /* Replace a reserved range with explicit hugetlb pages of page_bytes
     * (2 MiB or 1 GiB). Fails with ENOMEM when the pool is empty; on
     * failure the range is reserved as before (never a hole). */
    int (*map_hugetlb)(void *addr, size_t size_bytes, size_t page_bytes);
    /* Give the memory back; the range stays committed and reads as zero. */
    int (*release)(void *addr, size_t size_bytes);
    /* Return a range (e.g. a hugetlb one) to reserved space: uncharged,
     * not writable, and reading as zero (a racing hpm_range may read it). */
    int (*unreserve_to_reserved)(void *addr, size_t size_bytes);
    /* madvise(MADV_COLLAPSE): make the range one PMD-mapped huge page. */
    int (*collapse)(void *addr, size_t size_bytes);
    /* madvise(MADV_POPULATE_WRITE): fault the range in writable, which
     * breaks copy-on-write sharing, as a write would; a page the program
     * made read-only or inaccessible fails it (EINVAL, EFAULT) instead of
     * raising a signal. */
    int (*populate_write)(void *addr, size_t size_bytes);
    /* madvise(MADV_DONTFORK / MADV_DOFORK). */
    int (*dontfork)(void *addr, size_t size_bytes, bool dontfork);
    /* Map size_bytes of zeroed shared anonymous memory (MAP_SHARED |
     * MAP_ANONYMOUS: no file descriptor; a forked child shares it until it
     * maps its own over it), at addr exactly when addr is not NULL
     * (replacing what is there), named name where the kernel names
     * anonymous memory (PR_SET_VMA_ANON_NAME: /proc/PID/maps then shows
     * "[anon_shmem:name]"; elsewhere "/dev/zero (deleted)"). NULL on failure. */
    void *(*map_shared_named)(void *addr, size_t size_bytes, const char *name);
    /* How many of the 4 KiB pages of a range are resident (mincore); 0
     * when that cannot be told. */
    size_t (*resident_pages)(const void *addr, size_t size_bytes);
    /* Read n /proc/self/pagemap entries starting at addr. Returns 0 or errno. */
    int (*pagemap)(const void *addr, size_t n_pages, uint64_t *entries);
    /* Read a whole small file (e.g. /proc/self/smaps_rollup) into buf,
     * NUL-terminated. Returns the length, or -errno. */
    long (*read_file)(const char *path, char *buf, size_t buf_bytes);
    /* Monotonic clock. */
    uint64_t (*now_ns)(void);
    /* Sleep for ns (background threads only). */
    void (*sleep_ns)(uint64_t ns);
    /* Sleep while *word == expected, at most timeout_ns, or until
     * wake_word(word) (background threads only; a spurious early return
     * is allowed). NULL in a table without it: sleep_ns is used. */
    void (*wait_word)(uint32_t *word, uint32_t expected, uint64_t timeout_ns);
    void (*wake_word)(uint32_t *word);
    /* Start a detached background thread; 0 or errno. It counts in
     * _hpm_own_threads while it runs. */
    int (*thread_start)(void *(*fn)(void *), void *arg);
    /* Lower the calling thread's CPU priority by nice_steps (its nice
     * value up by that much, at most 19); never raises it. For the
     * library's background threads (not CCoW's). NULL: nothing to do. */
    void (*thread_lower_priority)(int nice_steps);
    /* True when every live thread of the process is one that thread_start
     * made: the program's own threads have all ended (pthread_exit), and
     * the library's must end too, so that the process exits. False when
     * it cannot be told. */
    bool (*program_gone)(void);
    /* True when the process's threads cannot be counted (no /proc): then
     * program_gone never holds. NULL: they always can be. */
    bool (*threads_uncountable)(void);
    /* The system's THP mode from /sys/kernel/mm/transparent_hugepage. */
    hpm_thp_mode_t (*thp_mode)(void);
    /* Write a message to stderr without stdio. */
    void (*write_err)(const char *msg, size_t len);
    /* RLIMIT_AS now (SIZE_MAX when unlimited) and the address space the
     * process maps now (VmSize), in bytes. */
    size_t (*as_limit_bytes)(void);
    size_t (*as_used_bytes)(void);
    /* Physical memory plus swap, in bytes (0 when unknown). */
    size_t (*machine_bytes)(void);
    /* The CPUs this process may run on (its affinity mask), at least 1. */
    unsigned (*cpu_count)(void);
    /* A full memory barrier on every running thread of the process
     * (membarrier, private expedited; the first call registers). 0 or errno. */
    int (*fence_all_threads)(void);
    /* The raw calls behind colour/colored_map.c (page-by-page remapping):
     * mmap/munmap/mremap/madvise with the kernel's arguments; they return
     * what the kernel does (MAP_FAILED or -1 with errno set). */
    void *(*sys_mmap)(void *addr, size_t len, int prot, int flags);
    int (*sys_munmap)(void *addr, size_t len);
    void *(*sys_mremap)(void *old, size_t old_len, size_t new_len, int flags, void *new_addr);
    int (*sys_madvise)(void *addr, size_t len, int advice);
} hpm_os_t;

/* Whether the system backs every anonymous mapping huge unasked (THP
 * "always"): then what must stay on 4 KiB pages has to refuse it. */
static inline bool hpm_os_thp_always(const hpm_os_t *os) { return os->thp_mode && os->thp_mode() == HPM_THP_ALWAYS; }

/* The real table (src/prim/linux.c). */
extern const hpm_os_t _hpm_os_linux;
/* The table the library uses; tests may point it elsewhere before init. */
extern const hpm_os_t *_hpm_os;
/* Threads that the real table's thread_start made and that still run
 * (program_gone compares the process's live threads with it). */
extern atomic_int _hpm_own_threads;
/* In a forked child (init.c's fork handler): none of them runs there. */
void _hpm_os_after_fork_child(void);

#endif
