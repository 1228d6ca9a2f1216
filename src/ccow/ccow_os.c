/* ccow_os.c: the real Linux implementation of CCoW's extra OS table
 * (ccow_os.h): userfaultfd write-protect around a region swap, a range's
 * protections (PROCMAP_QUERY), a copy that cannot fault
 * (process_vm_readv), mremap of a spare over a region, the spare
 * hugepages themselves, futex and yield. The only code in ccow/ that
 * makes these system calls; it never calls malloc or stdio. Like the
 * core's pagemap reader it keeps no descriptor of /proc open. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>
#include "ccow/ccow_os.h"

/* Newer than the headers this may be built with (Debian 12 has 6.1's);
 * the kernel says at run time whether it has them. */
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
/* PROCMAP_QUERY (Linux 6.11, <linux/fs.h>), under our own names: the
 * layout is the kernel's, and its size is part of the ioctl number. */
struct ccow_vma_query {
    uint64_t size, query_flags, query_addr;
    uint64_t vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
    uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
    uint64_t vma_name_addr, build_id_addr;
};
#define CCOW_PROCMAP_QUERY _IOWR('f', 17, struct ccow_vma_query)
#define CCOW_VMA_READABLE 0x1
#define CCOW_VMA_WRITABLE 0x2
#define CCOW_VMA_EXECUTABLE 0x4
#define CCOW_VMA_SHARED 0x8

static int linux_uffd_open(void) {
#ifdef SYS_userfaultfd
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    /* A kernel without the feature refuses the handshake (EINVAL). */
    struct uffdio_api api = {.api = UFFD_API, .features = UFFD_FEATURE_WP_UNPOPULATED};
    if (ioctl(fd, UFFDIO_API, &api) != 0) { int e = errno; close(fd); return e == EINVAL ? -ENOTSUP : -e; }
    if (!(api.features & UFFD_FEATURE_WP_UNPOPULATED)) { close(fd); return -ENOTSUP; }
    if (!(api.ioctls & (1ull << _UFFDIO_REGISTER))) { close(fd); return -ENOSYS; }
    return fd;
#else
    return -ENOSYS;
#endif
}

static int linux_uffd_protect(int uffd, void *addr, size_t len_bytes) {
    struct uffdio_register reg = {.range = {(uintptr_t)addr, len_bytes}, .mode = UFFDIO_REGISTER_MODE_WP};
    if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) return errno;
    if (!(reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT))) return ENOSYS;
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)addr, len_bytes}, .mode = UFFDIO_WRITEPROTECT_MODE_WP};
    if (ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) != 0) return errno;
    return 0;
}

static int linux_uffd_release(int uffd, void *addr, size_t len_bytes) {
    /* Fails harmlessly (ENOENT) when the range is a new, unregistered
     * mapping already (after a successful swap). */
    struct uffdio_writeprotect wp = {.range = {(uintptr_t)addr, len_bytes}, .mode = 0};
    (void)ioctl(uffd, UFFDIO_WRITEPROTECT, &wp);
    struct uffd_msg msgs[32];
    while (read(uffd, msgs, sizeof msgs) > 0) { /* the faulting threads retry after the wake */ }
    struct uffdio_range r = {(uintptr_t)addr, len_bytes};
    int err = ioctl(uffd, UFFDIO_WAKE, &r) == 0 ? 0 : errno;
    (void)ioctl(uffd, UFFDIO_UNREGISTER, &r);   /* skips a mapping that is not registered */
    return err;
}

static int linux_range_rw(void *addr, size_t len_bytes) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    uintptr_t at = (uintptr_t)addr, end = at + len_bytes;
    int err = 0;
    while (at < end && !err) {
        struct ccow_vma_query q = {.size = sizeof q, .query_addr = at};   /* the mapping holding at */
        if (ioctl(fd, CCOW_PROCMAP_QUERY, &q) != 0) err = errno == ENOENT ? EACCES : errno;
        else if ((q.vma_flags & (CCOW_VMA_READABLE | CCOW_VMA_WRITABLE | CCOW_VMA_EXECUTABLE | CCOW_VMA_SHARED))
                 != (CCOW_VMA_READABLE | CCOW_VMA_WRITABLE) || q.vma_end <= at)
            err = EACCES;
        else at = (uintptr_t)q.vma_end;
    }
    close(fd);
    return err;
}

static int linux_copy_nofault(void *dst, const void *src, size_t len_bytes) {
    struct iovec local = {dst, len_bytes}, remote = {(void *)src, len_bytes};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (n < 0) return errno;
    return (size_t)n == len_bytes ? 0 : EFAULT;
}

static int linux_remap_fixed(void *src, void *dst, size_t len_bytes) {
    void *p = mremap(src, len_bytes, len_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, dst);
    return p == MAP_FAILED ? errno : 0;
}

static void *linux_spare_map(size_t len_bytes) {
    size_t hp = HPM_HP_BYTES, span = len_bytes + hp;
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    char *p = (char *)(((uintptr_t)raw + hp - 1) & ~(uintptr_t)(hp - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    if (raw + span > p + len_bytes) munmap(p + len_bytes, (size_t)(raw + span - (p + len_bytes)));
    madvise(p, len_bytes, MADV_HUGEPAGE);
    if (madvise(p, len_bytes, MADV_DONTFORK) != 0) { munmap(p, len_bytes); return NULL; }
    for (size_t off = 0; off < len_bytes; off += HPM_PAGE_BYTES) ((volatile char *)p)[off] = 0;
    return p;
}

static int linux_spare_unmap(void *addr, size_t len_bytes) {
    return munmap(addr, len_bytes) == 0 ? 0 : errno;
}

static int linux_spare_warm_drop(void *addr, size_t len_bytes) {
    for (size_t off = 0; off < len_bytes; off += HPM_PAGE_BYTES) ((volatile char *)addr)[off] = 1;
    return madvise(addr, len_bytes, MADV_DONTNEED) == 0 ? 0 : errno;
}

static void linux_close_fd(int fd) { close(fd); }

static void linux_futex_wait(uint32_t *word, uint32_t expected, uint64_t timeout_ns) {
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, &ts, NULL, 0);
}

static void linux_futex_wake(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static void linux_yield_cpu(void) { sched_yield(); }

const hpm_ccow_os_t _hpm_ccow_os_linux = {
    .uffd_open = linux_uffd_open,
    .uffd_protect = linux_uffd_protect,
    .uffd_release = linux_uffd_release,
    .range_rw = linux_range_rw,
    .copy_nofault = linux_copy_nofault,
    .remap_fixed = linux_remap_fixed,
    .spare_map = linux_spare_map,
    .spare_unmap = linux_spare_unmap,
    .spare_warm_drop = linux_spare_warm_drop,
    .close_fd = linux_close_fd,
    .futex_wait = linux_futex_wait,
    .futex_wake = linux_futex_wake,
    .yield_cpu = linux_yield_cpu,
};

const hpm_ccow_os_t *_hpm_ccow_os = &_hpm_ccow_os_linux;
