/* ccow_os.c: the real Linux implementation of CCoW's extra OS table
 * (ccow_os.h): userfaultfd write-protect around a region swap, mremap of a
 * spare over a region, the spare hugepages themselves, futex and yield. The only code in
 * ccow/ that makes these system calls; it never calls malloc or stdio. */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/userfaultfd.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "ccow/ccow_os.h"

static int linux_uffd_open(void) {
#ifdef SYS_userfaultfd
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return -errno;
    struct uffdio_api api = {.api = UFFD_API, .features = 0};
    if (ioctl(fd, UFFDIO_API, &api) != 0) { int e = errno; close(fd); return -e; }
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
    return ioctl(uffd, UFFDIO_WAKE, &r) == 0 ? 0 : errno;
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
