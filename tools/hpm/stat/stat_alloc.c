/* stat_alloc.c: reads the counters an hpmalloc process publishes (see
 * src/publish.c and docs/stat.md). The library keeps a memfd named
 * "hpmalloc-stats" open and mapped; we find it among /proc/PID/fd (links
 * read "/memfd:hpmalloc-stats (deleted)") and read it through that link,
 * which needs only PTRACE_MODE_READ (same uid, or root). If the program
 * closed the fd, we find the mapping in /proc/PID/maps and read it through
 * /proc/PID/mem. The process is never stopped. A copy is accepted only
 * with the right magic and version. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stat.h"

#define ALLOC_MEMFD_NAME "/memfd:hpmalloc-stats"

static int alloc_valid(const hpm_stats_t *s) {
    return s->magic == HPM_STATS_MAGIC && s->version == HPM_STATS_VERSION;
}

static int alloc_from_fd(stat_report_t *r) {
    char path[64], link[256];
    snprintf(path, sizeof path, "/proc/%d/fd", r->pid);
    DIR *d = opendir(path);
    if (!d) return -errno;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        int fd_num = atoi(e->d_name);
        char fdpath[96];
        snprintf(fdpath, sizeof fdpath, "/proc/%d/fd/%d", r->pid, fd_num);
        ssize_t n = readlink(fdpath, link, sizeof link - 1);
        if (n <= 0) continue;
        link[n] = 0;
        if (strncmp(link, ALLOC_MEMFD_NAME, strlen(ALLOC_MEMFD_NAME))) continue;
        int fd = open(fdpath, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        hpm_stats_t s;
        if (pread(fd, &s, sizeof s, 0) == (ssize_t)sizeof s && alloc_valid(&s)) {
            r->alloc = s;
            snprintf(r->alloc_how, sizeof r->alloc_how, "memfd /proc/%d/fd/%d", r->pid, fd_num);
            found = 1;
        }
        close(fd);
    }
    closedir(d);
    return found;
}

static int alloc_from_mem(stat_report_t *r) {
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", r->pid);
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    unsigned long long start = 0;
    int have = 0;
    while (!have && fgets(line, sizeof line, f))
        if (strstr(line, ALLOC_MEMFD_NAME) && sscanf(line, "%llx-", &start) == 1) have = 1;
    fclose(f);
    if (!have) return 0;
    snprintf(path, sizeof path, "/proc/%d/mem", r->pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    hpm_stats_t s;
    ssize_t n = pread(fd, &s, sizeof s, (off_t)start);
    int err = n == (ssize_t)sizeof s ? 0 : -(n < 0 ? errno : EIO);
    close(fd);
    if (err) return err;
    if (!alloc_valid(&s)) return 0;
    r->alloc = s;
    snprintf(r->alloc_how, sizeof r->alloc_how, "/proc/%d/mem at 0x%llx", r->pid, start);
    return 1;
}

int stat_read_alloc(stat_report_t *r) {
    r->has_alloc = 0;
    int got = alloc_from_fd(r);
    if (got <= 0) {
        int err_fd = got;
        got = alloc_from_mem(r);
        if (got < 0 || (got == 0 && err_fd < 0)) {
            stat_note_missing(r, "cannot look for hpmalloc counters (/proc/%d/fd, /proc/%d/mem): %s; "
                                 "they need the same uid or root", r->pid, r->pid,
                                 strerror(-(got < 0 ? got : err_fd)));
            snprintf(r->alloc_how, sizeof r->alloc_how, "not readable");
            return 0;
        }
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
