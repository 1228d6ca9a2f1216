/* publish.c: how a process running on hpmalloc shows its counters to
 * `hpm stat` without being stopped.
 *
 * The counters (hpm_stats_t) live in one page of a memfd named
 * "hpmalloc-stats", mapped MAP_SHARED into the process. The core updates
 * them in place with atomics. A reader with the same uid (PTRACE_MODE_READ)
 * finds the memfd through /proc/PID/fd/N (its link reads
 * "/memfd:hpmalloc-stats (deleted)") and maps or reads it; if the program
 * closed that fd, the reader falls back to /proc/PID/maps plus
 * /proc/PID/mem. The fd is close-on-exec, so an exec'd program never sees a
 * stale area. Invariant: every process has its own area; after fork the
 * child replaces the inherited shared mapping with a fresh memfd at the same
 * address before it touches a counter, so parent and child never share one.
 * No malloc, no stdio: only raw system calls. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "hooks.h"

#define PUBLISH_NAME "hpmalloc-stats"
#define PUBLISH_BYTES (((sizeof(hpm_stats_t) + 4095) / 4096) * 4096)

static hpm_stats_t *publish_area;   /* the mapping; NULL until init succeeds */
static int publish_fd = -1;         /* the memfd kept open for readers */

/* Creates a sized memfd; returns the fd or -1. */
static int publish_memfd(void) {
    int fd = (int)syscall(SYS_memfd_create, PUBLISH_NAME, (unsigned)MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (syscall(SYS_ftruncate, fd, (long)PUBLISH_BYTES) != 0) {
        syscall(SYS_close, fd);
        return -1;
    }
    return fd;
}

/* Copies the counters field by field order-safe: the magic is written last
 * so a reader never sees a magic over half-written contents. */
static void publish_fill(hpm_stats_t *dst, const hpm_stats_t *src) {
    __atomic_store_n(&dst->magic, 0, __ATOMIC_RELEASE);
    if (src) memcpy((char *)dst + sizeof dst->magic, (const char *)src + sizeof src->magic,
                    sizeof *dst - sizeof dst->magic);
    dst->version = HPM_STATS_VERSION;
    dst->pid = (int32_t)syscall(SYS_getpid);
    __atomic_store_n(&dst->magic, HPM_STATS_MAGIC, __ATOMIC_RELEASE);
}

hpm_stats_t *_hpm_publish_init(const hpm_stats_t *initial) {
    if (publish_area) return publish_area;
    int fd = publish_memfd();
    if (fd < 0) return NULL;   /* no memfd (old kernel, seccomp): keep static counters */
    void *p = (void *)syscall(SYS_mmap, NULL, PUBLISH_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0L);
    if ((unsigned long)p >= (unsigned long)-4095L) {
        syscall(SYS_close, fd);
        return NULL;
    }
    publish_fill((hpm_stats_t *)p, initial);
    publish_fd = fd;
    publish_area = (hpm_stats_t *)p;
    return publish_area;
}

/* In the child right after fork: the inherited mapping is still the
 * parent's memfd (shared). Copy it into a new memfd mapped at the same
 * address, so pointers held by the core stay valid. */
hpm_stats_t *_hpm_publish_after_fork_child(void) {
    if (!publish_area) return NULL;
    hpm_stats_t snapshot;
    memcpy(&snapshot, publish_area, sizeof snapshot);
    int fd = publish_memfd();
    if (fd < 0) goto private_copy;
    void *p = (void *)syscall(SYS_mmap, publish_area, PUBLISH_BYTES, PROT_READ | PROT_WRITE,
                              MAP_SHARED | MAP_FIXED, fd, 0L);
    if (p != (void *)publish_area) {
        syscall(SYS_close, fd);
        goto private_copy;
    }
    syscall(SYS_close, publish_fd);   /* our copy of the parent's fd */
    publish_fd = fd;
    publish_fill(publish_area, &snapshot);
    return publish_area;

private_copy:
    /* Cannot publish: at least stop sharing counters with the parent. */
    p = (void *)syscall(SYS_mmap, publish_area, PUBLISH_BYTES, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0L);
    if (p != (void *)publish_area) {
        _hpm_message("hpmalloc: cannot unshare the published counters after fork\n");
        return NULL;
    }
    syscall(SYS_close, publish_fd);
    publish_fd = -1;
    publish_fill(publish_area, &snapshot);
    return publish_area;
}
