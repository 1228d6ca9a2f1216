/* publish.c: how a process running on hpmalloc shows its counters to
 * `hpm stat` without being stopped, and without holding a file descriptor.
 *
 * The counters (hpm_stats_t) live in one page of shared anonymous memory
 * (the OS table's map_shared_named: MAP_SHARED | MAP_ANONYMOUS, no fd),
 * named "hpmalloc-stats" where the kernel names anonymous memory, so
 * /proc/PID/maps shows "[anon_shmem:hpmalloc-stats]"; elsewhere the line
 * reads "/dev/zero (deleted)" and a reader tells ours from other such
 * mappings by the size (one page), the magic, the version and the pid
 * written in it. The core updates the counters in place with atomics;
 * `hpm stat` reads them with process_vm_readv (tools/hpm/stat/stat_alloc.c).
 *
 * Why not a memfd (the first design): its descriptor took the lowest free
 * number (fd 3) in every process, which programs that count, close or reuse
 * their descriptors do not expect. Why shared and not private: the area
 * must be one page of its own in /proc/PID/maps; a private anonymous page
 * merges with its neighbours when the kernel cannot name it.
 *
 * Invariant: every process has its own area; after fork the child maps a
 * fresh page over the inherited (still shared) one at the same address,
 * before it touches a counter, so parent and child never share one. No
 * malloc, no stdio; the only OS calls are through the table. */
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "hooks.h"

#define PUBLISH_NAME "hpmalloc-stats"
#define PUBLISH_BYTES (((sizeof(hpm_stats_t) + 4095) / 4096) * 4096)

static hpm_stats_t *publish_area;   /* the mapping; NULL until init succeeds */

/* Copies the counters with the magic written last, so a reader never
 * accepts a magic over half-written contents. */
static void publish_fill(hpm_stats_t *dst, const hpm_stats_t *src) {
    __atomic_store_n(&dst->magic, 0, __ATOMIC_RELEASE);
    if (src) memcpy((char *)dst + sizeof dst->magic, (const char *)src + sizeof src->magic,
                    sizeof *dst - sizeof dst->magic);
    dst->version = HPM_STATS_VERSION;
    dst->pid = (int32_t)syscall(SYS_getpid);
    __atomic_store_n(&dst->magic, HPM_STATS_MAGIC, __ATOMIC_RELEASE);
}

static hpm_stats_t *publish_map(void *at) {
    if (!_hpm_os->map_shared_named) return NULL;   /* a table without it (tests) */
    return (hpm_stats_t *)_hpm_os->map_shared_named(at, PUBLISH_BYTES, PUBLISH_NAME);
}

hpm_stats_t *_hpm_publish_init(const hpm_stats_t *initial) {
    if (publish_area) return publish_area;
    hpm_stats_t *p = publish_map(NULL);
    if (!p) return NULL;   /* the core then keeps its static counters */
    publish_fill(p, initial);
    publish_area = p;
    return publish_area;
}

/* In the child right after fork: the inherited page is still the parent's
 * (shared). Map a new one at the same address, so pointers held by the
 * core stay valid, and copy the counters into it. */
hpm_stats_t *_hpm_publish_after_fork_child(void) {
    if (!publish_area) return NULL;
    hpm_stats_t snapshot;
    memcpy(&snapshot, publish_area, sizeof snapshot);
    if (publish_map(publish_area) != publish_area) {
        /* Cannot publish: at least stop sharing the parent's counters, with
         * a private page at the same address (hpm stat will not find it). */
        size_t n = PUBLISH_BYTES;
        if (_hpm_os->unreserve_to_reserved(publish_area, n) || _hpm_os->commit(publish_area, n)) {
            _hpm_message("hpmalloc: cannot unshare the published counters after fork\n");
            return NULL;
        }
    }
    publish_fill(publish_area, &snapshot);
    return publish_area;
}
