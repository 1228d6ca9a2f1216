/* linux.c: the real OS table (see prim.h) for Linux. This is the only file
 * of the allocator core that makes system calls. Everything here is
 * async-signal-safe enough for use inside malloc: no stdio, no malloc. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "prim.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

/* Reservations are PROT_NONE without MAP_NORESERVE: a private mapping
 * that is not writable is not charged (mm/mmap.c accountable_mapping), and
 * mprotect to writable charges it then (mm/mprotect.c mprotect_fixup sets
 * VM_ACCOUNT), once per call. With MAP_NORESERVE the commit would never be
 * charged, and a request the kernel would refuse to mmap would succeed. */
#define RESERVE_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS)

static void *linux_reserve(size_t size_bytes, size_t align_bytes) {
    size_t span = size_bytes + align_bytes;
    if (span < size_bytes) return NULL;
    char *p = mmap(NULL, span, PROT_NONE, RESERVE_FLAGS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t start = ((uintptr_t)p + align_bytes - 1) & ~(uintptr_t)(align_bytes - 1);
    if (start > (uintptr_t)p) munmap(p, start - (uintptr_t)p);
    uintptr_t end = start + size_bytes, map_end = (uintptr_t)p + span;
    if (map_end > end) munmap((void *)end, map_end - end);
    return (void *)start;
}

static int linux_unreserve(void *addr, size_t size_bytes) {
    return munmap(addr, size_bytes) == 0 ? 0 : errno;
}

static int linux_commit(void *addr, size_t size_bytes) {
    return mprotect(addr, size_bytes, PROT_READ | PROT_WRITE) == 0 ? 0 : errno;
}

static int linux_thp_advise(void *addr, size_t size_bytes, bool on) {
    return madvise(addr, size_bytes, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 ? 0 : errno;
}

/* Put the reservation back on [addr, addr+size) where a failed call left
 * a hole. MAP_FIXED_NOREPLACE never clobbers: where the range is still
 * mapped (the usual case: the kernel restores the old mapping when a
 * MAP_FIXED mmap fails) it fails with EEXIST and changes nothing. */
static void restore_reserved(void *addr, size_t size_bytes) {
    if (madvise(addr, size_bytes, MADV_NORMAL) == 0) return;   /* all still mapped */
    if (mmap(addr, size_bytes, PROT_NONE, RESERVE_FLAGS | MAP_FIXED_NOREPLACE, -1, 0) == addr) return;
    for (size_t off = 0; off < size_bytes; off += HPM_HP_BYTES) {   /* part of it: hugepage by hugepage */
        char *a = (char *)addr + off;
        size_t n = size_bytes - off < HPM_HP_BYTES ? size_bytes - off : HPM_HP_BYTES;
        if (madvise(a, n, MADV_NORMAL) != 0) mmap(a, n, PROT_NONE, RESERVE_FLAGS | MAP_FIXED_NOREPLACE, -1, 0);
    }
}

/* The hugetlb pages are mapped straight over the reservation. (Mapping
 * them elsewhere and moving them with mremap(MREMAP_FIXED) fails now and
 * then with ENOMEM after the kernel has unmapped the destination, which
 * left a hole in the arena.) On failure the reservation is checked and
 * put back where needed, so the caller's fallback finds it. */
static int linux_map_hugetlb(void *addr, size_t size_bytes, size_t page_bytes) {
    int log2 = page_bytes == HPM_GB_BYTES ? 30 : 21;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_HUGETLB | (log2 << MAP_HUGE_SHIFT);
    void *p = mmap(addr, size_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == addr) return 0;
    int e = p == MAP_FAILED ? errno : EINVAL;
    restore_reserved(addr, size_bytes);
    return e;
}

static int linux_release(void *addr, size_t size_bytes) {
    return madvise(addr, size_bytes, MADV_DONTNEED) == 0 ? 0 : errno;
}

/* Read-only, not PROT_NONE: a private mapping that is not writable is
 * not charged either, and a read of it gives zeros, as a THP hugepage
 * given back with MADV_DONTNEED does. hpm_range reads a block's free mark
 * after its slab's record, from any thread; when the slab was freed and
 * its hugetlb hugepage given back in between, a PROT_NONE hole made that
 * read a SIGSEGV (session 52's review, tests/unit/test_hugetlbread.c). */
static int linux_unreserve_to_reserved(void *addr, size_t size_bytes) {
    void *p = mmap(addr, size_bytes, PROT_READ, RESERVE_FLAGS | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? errno : 0;
}

static int linux_collapse(void *addr, size_t size_bytes) {
    return madvise(addr, size_bytes, MADV_COLLAPSE) == 0 ? 0 : errno;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14 */
#endif
static int linux_populate_write(void *addr, size_t size_bytes) {
    return madvise(addr, size_bytes, MADV_POPULATE_WRITE) == 0 ? 0 : errno;
}

/* mincore in 2 MiB steps (a 512-byte vector on the stack). */
static size_t linux_resident_pages(const void *addr, size_t size_bytes) {
    unsigned char vec[HPM_PAGES_PER_HP];
    size_t n = 0;
    for (size_t off = 0; off < size_bytes; off += HPM_HP_BYTES) {
        size_t len = size_bytes - off < HPM_HP_BYTES ? size_bytes - off : HPM_HP_BYTES;
        if (mincore((char *)addr + off, len, vec) != 0) return 0;
        for (size_t i = 0; i < (len + HPM_PAGE_BYTES - 1) / HPM_PAGE_BYTES; i++) n += vec[i] & 1;
    }
    return n;
}

static int linux_dontfork(void *addr, size_t size_bytes, bool dontfork) {
    return madvise(addr, size_bytes, dontfork ? MADV_DONTFORK : MADV_DOFORK) == 0 ? 0 : errno;
}

#ifndef PR_SET_VMA
#define PR_SET_VMA 0x53564d41
#endif
#ifndef PR_SET_VMA_ANON_NAME
#define PR_SET_VMA_ANON_NAME 0
#endif

static void *linux_map_shared_named(void *addr, size_t size_bytes, const char *name) {
    int flags = MAP_SHARED | MAP_ANONYMOUS | (addr ? MAP_FIXED : 0);
    void *p = mmap(addr, size_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return NULL;
    /* EINVAL without CONFIG_ANON_VMA_NAME (or before 6.2 for shared memory):
     * the mapping then stays "/dev/zero (deleted)", which readers accept. */
    if (name) (void)prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, (unsigned long)p, size_bytes, (unsigned long)name);
    return p;
}

/* Opens /proc/self/pagemap for each read and closes it again: the library
 * keeps no descriptor, so a program that closes or reuses its descriptors
 * (close_range after fork, dup2 onto a low number) cannot break it. */
static int linux_pagemap(const void *addr, size_t n_pages, uint64_t *entries) {
    int fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    off_t off = (off_t)((uintptr_t)addr >> HPM_PAGE_SHIFT) * 8;
    size_t want = n_pages * 8, got = 0;
    int err = 0;
    while (got < want) {
        ssize_t n = pread(fd, (char *)entries + got, want - got, off + (off_t)got);
        if (n <= 0) { err = n < 0 ? errno : EIO; break; }
        got += (size_t)n;
    }
    close(fd);
    return err;
}

static long linux_read_file(const char *path, char *buf, size_t buf_bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t len = 0;
    while (len + 1 < buf_bytes) {
        ssize_t n = read(fd, buf + len, buf_bytes - 1 - len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        len += (size_t)n;
    }
    buf[len] = 0;
    close(fd);
    return (long)len;
}

static uint64_t linux_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void linux_sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

static void linux_wait_word(uint32_t *word, uint32_t expected, uint64_t timeout_ns) {
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);   /* EINTR, EAGAIN: an early return */
}

static void linux_wake_word(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

/* ---- the library's own threads ----
 * Each thread that thread_start makes counts itself in _hpm_own_threads
 * while it runs (from its first instruction to its last, so the count never
 * exceeds the threads the kernel sees), and program_gone tells when every
 * live thread of the process is one of them: the program's last thread
 * has ended with pthread_exit (a main thread that calls pthread_exit, and
 * then its workers, end so). POSIX then has the process exit with status
 * 0, which glibc does when its last thread ends; a library thread that
 * never ends would keep the process alive forever instead (session 31:
 * CPython's test_threading waited 300 s for such a child). So the
 * library's long-lived threads poll program_gone and end, and the last
 * one's end exits the process. A slot passes fn and arg to the new thread
 * without a malloc. */
atomic_int _hpm_own_threads;

typedef struct {
    void *(*fn)(void *);
    void *arg;
    atomic_bool busy;
} start_slot_t;

static start_slot_t start_slots[8];   /* threads being started at once: the library has at most 3 */

static bool linux_program_gone(void);

#if defined(__SANITIZE_ADDRESS__)   /* gcc's */
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)   /* clang's */
#define UNDER_ASAN 1
#endif
#endif
#if defined(UNDER_ASAN)
#include <sanitizer/common_interface_defs.h>   /* ASan is told of the switch of stacks, or it warns of false reports */
#define SWITCH_STACK_START(bottom, size) __sanitizer_start_switch_fiber(NULL, (bottom), (size))
#define SWITCH_STACK_FINISH() __sanitizer_finish_switch_fiber(NULL, NULL, NULL)
#else
#define SWITCH_STACK_START(bottom, size) ((void)0)
#define SWITCH_STACK_FINISH() ((void)0)
#endif

static void exit_zero(void) {
    SWITCH_STACK_FINISH();
    exit(0);
}

/* The process's exit, by the last thread of all, on a stack as large as
 * a thread of the program gets by default (pthread_getattr_default_np:
 * RLIMIT_STACK, 8 MiB here), mapped now: glibc would run exit(0) and with
 * it the program's atexit handlers and destructors on this thread's own
 * stack, 1 MiB, where a handler that needed more crashed (a thread's
 * stack counts whole against RLIMIT_AS, so the library's threads keep
 * small ones). Returns when the stack cannot be mapped; glibc's exit
 * then follows on the thread's own stack, as before. */
static void exit_on_program_stack(void) {
    size_t bytes = (size_t)8 << 20;
    pthread_attr_t attr;
    if (pthread_getattr_default_np(&attr) == 0) {
        pthread_attr_getstacksize(&attr, &bytes);
        pthread_attr_destroy(&attr);
    }
    if (bytes < ((size_t)1 << 20)) bytes = (size_t)1 << 20;
    if (bytes > ((size_t)256 << 20)) bytes = (size_t)256 << 20;
    size_t guard = 4096;
    char *base = mmap(NULL, bytes + guard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) return;
    mprotect(base, guard, PROT_NONE);   /* an overflow faults, as on a thread's stack */
    static ucontext_t uc;   /* once per process: only the last thread of all gets here */
    if (getcontext(&uc) != 0) return;
    uc.uc_stack.ss_sp = base + guard;
    uc.uc_stack.ss_size = bytes;
    uc.uc_link = NULL;
    makecontext(&uc, exit_zero, 0);
    SWITCH_STACK_START(base + guard, bytes);   /* NULL: the thread's own stack is left for good */
    setcontext(&uc);
}

static void *own_thread_main(void *slot_ptr) {
    start_slot_t *slot = slot_ptr;
    atomic_fetch_add(&_hpm_own_threads, 1);
    prctl(PR_SET_NAME, "hpmalloc", 0, 0, 0);   /* so top -H, perf and the tests tell the library's threads apart */
    void *(*fn)(void *) = slot->fn;
    void *arg = slot->arg;
    atomic_store_explicit(&slot->busy, false, memory_order_release);
    void *r = fn(arg);
    /* the last of the library's threads, and none of the program's left:
     * this thread's end would exit the process (exit(0) in glibc) */
    if (atomic_load(&_hpm_own_threads) == 1 && linux_program_gone()) exit_on_program_stack();
    atomic_fetch_sub(&_hpm_own_threads, 1);
    return r;
}

static int linux_thread_start(void *(*fn)(void *), void *arg) {
    start_slot_t *slot = NULL;
    for (size_t i = 0; i < sizeof start_slots / sizeof *start_slots && !slot; i++) {
        bool idle = false;
        if (atomic_compare_exchange_strong(&start_slots[i].busy, &idle, true)) slot = &start_slots[i];
    }
    if (!slot) return EAGAIN;
    slot->fn = fn;
    slot->arg = arg;
    /* The new thread starts with every signal blocked (it inherits the
     * mask), so that a signal sent to the process goes to one of the
     * program's threads, never to the library's: a program that blocks a
     * signal in its threads and then finds it pending (sigpending, sigwait,
     * signalfd) would otherwise see it taken by a thread of ours and its
     * handler run there (session 31: CPython's test_signal, test_sigpending). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 1024 * 1024);   /* under RLIMIT_AS it counts whole; the exit runs on a stack of its own (exit_on_program_stack) */
    int e = pthread_create(&t, &attr, own_thread_main, slot);
    pthread_attr_destroy(&attr);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (e) atomic_store(&slot->busy, false);
    return e;
}

/* Linux keeps a nice value per thread: this one only. A thread already
 * at 19 stays there; one whose nice cannot be read is left as it is. */
static void linux_thread_lower_priority(int nice_steps) {
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, tid);   /* -1 may be a nice value: errno tells */
    if (errno || nice_steps <= 0) return;
    int want = nice + nice_steps > 19 ? 19 : nice + nice_steps;
    if (want > nice) setpriority(PRIO_PROCESS, tid, want);
}

void _hpm_os_after_fork_child(void) {
    atomic_store(&_hpm_own_threads, 0);
    for (size_t i = 0; i < sizeof start_slots / sizeof *start_slots; i++) atomic_store(&start_slots[i].busy, false);
}

/* /proc/self/stat: the state of the main thread (field 3, after the
 * command in parentheses, which may hold spaces) and num_threads (field
 * 20). A main thread that has ended while others run is a zombie that
 * still counts there, so it is taken off. */
static bool linux_program_gone(void) {
    int own = atomic_load(&_hpm_own_threads);
    if (own <= 0) return false;
    char buf[1024];
    if (linux_read_file("/proc/self/stat", buf, sizeof buf) <= 0) return false;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2]) return false;
    char state = p[2];
    p += 2;
    for (int field = 3; field < 20; field++) {   /* to num_threads */
        p = strchr(p, ' ');
        if (!p) return false;
        p++;
    }
    long threads = 0;
    for (; *p >= '0' && *p <= '9'; p++) threads = threads * 10 + (*p - '0');
    long live = threads - (state == 'Z');
    return live > 0 && live <= own;
}

static bool linux_threads_uncountable(void) {
    char buf[64];
    return linux_read_file("/proc/self/stat", buf, sizeof buf) <= 0;
}

static hpm_thp_mode_t linux_thp_mode(void) {
    char buf[128];
    if (linux_read_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf) <= 0) return HPM_THP_UNKNOWN;
    if (strstr(buf, "[always]")) return HPM_THP_ALWAYS;
    if (strstr(buf, "[madvise]")) return HPM_THP_MADVISE;
    if (strstr(buf, "[never]")) return HPM_THP_NEVER;
    return HPM_THP_UNKNOWN;
}

static void linux_write_err(const char *msg, size_t len) {
    while (len > 0) {
        ssize_t n = write(2, msg, len);
        if (n <= 0) { if (n < 0 && errno == EINTR) continue; return; }
        msg += n;
        len -= (size_t)n;
    }
}

static size_t linux_as_limit_bytes(void) {
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
    return (size_t)rl.rlim_cur;
}

static size_t linux_as_used_bytes(void) {
    char buf[128];
    if (linux_read_file("/proc/self/statm", buf, sizeof buf) <= 0) return 0;
    size_t pages = 0;
    for (const char *c = buf; *c >= '0' && *c <= '9'; c++) pages = pages * 10 + (size_t)(*c - '0');
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

static size_t linux_machine_bytes(void) {
    struct sysinfo si;
    if (sysinfo(&si) != 0) return 0;
    return ((size_t)si.totalram + (size_t)si.totalswap) * si.mem_unit;
}

static unsigned linux_cpu_count(void) {
    uint64_t mask[16];   /* 1024 CPUs: the kernel's default limit */
    long n = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    unsigned cpus = 0;
    for (long i = 0; i < n / 8; i++) cpus += (unsigned)__builtin_popcountll(mask[i]);
    return cpus ? cpus : 1;
}

/* Called by one thread at a time (the background thread, under the heaps
 * lock). The kernel wants the process registered first; a forked child may
 * not inherit the registration (EPERM), so that registers again. */
static int linux_fence_all_threads(void) {
    static int refused;
    if (refused) return ENOSYS;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0) return 0;
    if (errno != EPERM || syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) != 0) {
        refused = 1;
        return ENOSYS;
    }
    return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0 ? 0 : errno;
}

static void *linux_sys_mmap(void *addr, size_t len, int prot, int flags) {
    return (void *)syscall(SYS_mmap, addr, len, prot, flags, -1, 0L);
}
static int linux_sys_munmap(void *addr, size_t len) { return (int)syscall(SYS_munmap, addr, len); }
static void *linux_sys_mremap(void *old, size_t old_len, size_t new_len, int flags, void *new_addr) {
    return (void *)syscall(SYS_mremap, old, old_len, new_len, flags, new_addr);
}
static int linux_sys_madvise(void *addr, size_t len, int advice) { return (int)syscall(SYS_madvise, addr, len, advice); }

const hpm_os_t _hpm_os_linux = {
    .reserve = linux_reserve,
    .unreserve = linux_unreserve,
    .commit = linux_commit,
    .thp_advise = linux_thp_advise,
    .map_hugetlb = linux_map_hugetlb,
    .release = linux_release,
    .unreserve_to_reserved = linux_unreserve_to_reserved,
    .collapse = linux_collapse,
    .populate_write = linux_populate_write,
    .dontfork = linux_dontfork,
    .map_shared_named = linux_map_shared_named,
    .resident_pages = linux_resident_pages,
    .pagemap = linux_pagemap,
    .read_file = linux_read_file,
    .now_ns = linux_now_ns,
    .sleep_ns = linux_sleep_ns,
    .wait_word = linux_wait_word,
    .wake_word = linux_wake_word,
    .thread_start = linux_thread_start,
    .thread_lower_priority = linux_thread_lower_priority,
    .program_gone = linux_program_gone,
    .threads_uncountable = linux_threads_uncountable,
    .thp_mode = linux_thp_mode,
    .write_err = linux_write_err,
    .as_limit_bytes = linux_as_limit_bytes,
    .as_used_bytes = linux_as_used_bytes,
    .machine_bytes = linux_machine_bytes,
    .cpu_count = linux_cpu_count,
    .fence_all_threads = linux_fence_all_threads,
    .sys_mmap = linux_sys_mmap,
    .sys_munmap = linux_sys_munmap,
    .sys_mremap = linux_sys_mremap,
    .sys_madvise = linux_sys_madvise,
};

const hpm_os_t *_hpm_os = &_hpm_os_linux;
