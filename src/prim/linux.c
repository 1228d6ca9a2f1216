/* linux.c: the real OS table (see prim.h) for Linux. This is the only file
 * of the allocator core that makes system calls. Everything here is
 * async-signal-safe enough for use inside malloc: no stdio, no malloc. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include "prim.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif

static void *linux_reserve(size_t size_bytes, size_t align_bytes) {
    size_t span = size_bytes + align_bytes;
    char *p = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t start = ((uintptr_t)p + align_bytes - 1) & ~(uintptr_t)(align_bytes - 1);
    if (start > (uintptr_t)p) munmap(p, start - (uintptr_t)p);
    uintptr_t end = start + size_bytes, map_end = (uintptr_t)p + span;
    if (map_end > end) munmap((void *)end, map_end - end);
    return (void *)start;
}

static int linux_commit(void *addr, size_t size_bytes) {
    return mprotect(addr, size_bytes, PROT_READ | PROT_WRITE) == 0 ? 0 : errno;
}

static int linux_thp_advise(void *addr, size_t size_bytes, bool on) {
    return madvise(addr, size_bytes, on ? MADV_HUGEPAGE : MADV_NOHUGEPAGE) == 0 ? 0 : errno;
}

static int linux_map_hugetlb(void *addr, size_t size_bytes, size_t page_bytes) {
    int log2 = page_bytes == HPM_GB_BYTES ? 30 : 21;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_HUGETLB | (log2 << MAP_HUGE_SHIFT);
    /* MAP_FIXED would destroy the reservation on failure, so probe first
     * with a hint, then move the pages into place. */
    void *probe = mmap(NULL, size_bytes, PROT_READ | PROT_WRITE, flags & ~MAP_FIXED, -1, 0);
    if (probe == MAP_FAILED) return errno;
    void *p = mremap(probe, size_bytes, size_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, addr);
    if (p == MAP_FAILED) { int e = errno; munmap(probe, size_bytes); return e; }
    return 0;
}

static int linux_release(void *addr, size_t size_bytes) {
    return madvise(addr, size_bytes, MADV_DONTNEED) == 0 ? 0 : errno;
}

static int linux_unreserve(void *addr, size_t size_bytes) {
    void *p = mmap(addr, size_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    return p == MAP_FAILED ? errno : 0;
}

static int linux_collapse(void *addr, size_t size_bytes) {
    return madvise(addr, size_bytes, MADV_COLLAPSE) == 0 ? 0 : errno;
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

static int linux_thread_start(void *(*fn)(void *), void *arg) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    int e = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    return e;
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

const hpm_os_t _hpm_os_linux = {
    .reserve = linux_reserve,
    .commit = linux_commit,
    .thp_advise = linux_thp_advise,
    .map_hugetlb = linux_map_hugetlb,
    .release = linux_release,
    .unreserve_to_reserved = linux_unreserve,
    .collapse = linux_collapse,
    .dontfork = linux_dontfork,
    .map_shared_named = linux_map_shared_named,
    .pagemap = linux_pagemap,
    .read_file = linux_read_file,
    .now_ns = linux_now_ns,
    .sleep_ns = linux_sleep_ns,
    .thread_start = linux_thread_start,
    .thp_mode = linux_thp_mode,
    .write_err = linux_write_err,
};

const hpm_os_t *_hpm_os = &_hpm_os_linux;
