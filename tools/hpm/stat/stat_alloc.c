/* stat_alloc.c: reads the counters an hpmalloc process publishes (see
 * src/publish.c and docs/stat.md). The library keeps them in one page of
 * shared anonymous memory, which /proc/PID/maps (already read into r->maps)
 * shows as "[anon_shmem:hpmalloc-stats]" where the kernel names anonymous
 * memory, else as a one-page "/dev/zero (deleted)" mapping. We read each
 * candidate with process_vm_readv (or /proc/PID/mem where that system
 * call is refused), which needs ptrace access (same uid, or root). The
 * process is never stopped. A copy is accepted only with the right magic
 * and version. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>
#include "stat.h"

#define ALLOC_NAME "hpmalloc-stats"
#define ALLOC_AREA_BYTES (((sizeof(hpm_stats_t) + 4095) / 4096) * 4096)

static int alloc_valid(const hpm_stats_t *s) {
    return s->magic == HPM_STATS_MAGIC && s->version == HPM_STATS_VERSION;
}

/* A mapping that may hold the counters: named ours, or an unnamed shared
 * anonymous page of the area's size. */
static int alloc_candidate(const stat_mapping_t *m) {
    if (!strcmp(m->name, "[anon_shmem:" ALLOC_NAME "]") || !strcmp(m->name, "[anon:" ALLOC_NAME "]")) return 1;
    return !strcmp(m->name, "/dev/zero (deleted)") && m->perms[3] == 's' && m->size_bytes == ALLOC_AREA_BYTES;
}

/* Copies the counters at addr out of process pid; 0 or -errno. */
static int alloc_read_remote(int pid, uint64_t addr, hpm_stats_t *out, const char **how) {
    struct iovec local = {out, sizeof *out}, remote = {(void *)(uintptr_t)addr, sizeof *out};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    *how = "process_vm_readv";
    if (n == (ssize_t)sizeof *out) return 0;
    if (n >= 0 || errno != ENOSYS) return n < 0 ? -errno : -EIO;
    char path[64];   /* the system call is filtered (seccomp): try /proc/PID/mem */
    snprintf(path, sizeof path, "/proc/%d/mem", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    n = pread(fd, out, sizeof *out, (off_t)addr);
    int err = n == (ssize_t)sizeof *out ? 0 : -(n < 0 ? errno : EIO);
    close(fd);
    *how = "/proc/PID/mem";
    return err;
}

/* 1 found, 0 none, -errno when a candidate could not be read. */
static int alloc_find(stat_report_t *r) {
    int err = 0;
    for (int i = 0; i < r->n_maps; i++) {
        const stat_mapping_t *m = &r->maps[i];
        if (!alloc_candidate(m)) continue;
        hpm_stats_t s;
        const char *how;
        int e = alloc_read_remote(r->pid, m->start, &s, &how);
        if (e) { err = e; continue; }
        if (!alloc_valid(&s)) continue;
        r->alloc = s;
        snprintf(r->alloc_how, sizeof r->alloc_how, "%s at 0x%llx", how, (unsigned long long)m->start);
        return 1;
    }
    return err;
}

int stat_read_alloc(stat_report_t *r) {
    r->has_alloc = 0;
    int got = alloc_find(r);
    if (got < 0) {
        stat_note_missing(r, "cannot read the hpmalloc counters of %d (process_vm_readv): %s; "
                             "they need ptrace access (the same uid, or root)", r->pid, strerror(-got));
        snprintf(r->alloc_how, sizeof r->alloc_how, "not readable");
        return 0;
    }
    if (got == 1) {
        r->has_alloc = 1;
        if (r->alloc.pid != r->pid)
            stat_note_missing(r, "the hpmalloc counters found belong to pid %d (inherited, not refreshed)",
                              (int)r->alloc.pid);
        return 1;
    }
    snprintf(r->alloc_how, sizeof r->alloc_how, "none published (not running on hpmalloc)");
    return 0;
}
