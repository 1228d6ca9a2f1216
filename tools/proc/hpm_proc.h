/* hpm_proc.h: the one reader of /proc files and of pagemap, shared by the
 * hpm command (tools/hpm), the benchmark programs (bench/common/bench_mem.h)
 * and the tests (tests/testhelper.h).
 *
 *  - hpm_proc_fields_kb / hpm_proc_field_kb: "Name:   123 kB" fields of a
 *    small /proc file (smaps_rollup, status, meminfo), in KiB;
 *  - hpm_proc_text: the text after "Name:" (cpuinfo), or a file's first line;
 *  - hpm_proc_pagemap_open / hpm_proc_pagemap_read: entries of a process's
 *    /proc/PID/pagemap (one 64-bit entry per 4 KiB page, bits below).
 *
 * Header-only (static inline) and free of malloc and stdio streams: a file
 * is read with open/read into a buffer on the stack, so a program under test that
 * measures itself does not disturb its own heap. A file longer than
 * HPM_PROC_BUF_BYTES is read up to that size. */
#ifndef HPM_PROC_H
#define HPM_PROC_H
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HPM_PROC_BUF_BYTES 16384
#define HPM_PM_PRESENT (1ull << 63)
#define HPM_PM_SWAPPED (1ull << 62)
#define HPM_PM_EXCLUSIVE (1ull << 56)
#define HPM_PM_PFN_MASK ((1ull << 55) - 1)

/* Reads path into buf (NUL-terminated); returns the length or -errno. */
static inline long hpm_proc_read(const char *path, char *buf, size_t buf_bytes) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    size_t got = 0;
    while (got + 1 < buf_bytes) {
        ssize_t n = read(fd, buf + got, buf_bytes - 1 - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += (size_t)n;
    }
    close(fd);
    buf[got] = 0;
    return (long)got;
}

/* The line of text that starts with "name:" (name NULL: the first line);
 * points into text, or NULL. */
static inline const char *hpm_proc_line(const char *text, const char *name) {
    if (!name) return text;
    size_t len = strlen(name);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        const char *after = l + len;
        if (strncmp(l, name, len)) continue;
        while (*after == ' ' || *after == '\t') after++;   /* cpuinfo pads names */
        if (*after == ':') return after + 1;
    }
    return NULL;
}

/* The "name: N kB" fields of path: vals[i] = N, or -1 when the file or the
 * field is missing. Returns how many fields were found. */
static inline int hpm_proc_fields_kb(const char *path, const char *const *names, long *vals, int n) {
    char buf[HPM_PROC_BUF_BYTES];
    int found = 0;
    for (int i = 0; i < n; i++) vals[i] = -1;
    if (hpm_proc_read(path, buf, sizeof buf) < 0) return 0;
    for (int i = 0; i < n; i++) {
        const char *v = hpm_proc_line(buf, names[i]);
        if (v) { vals[i] = strtol(v, NULL, 10); found++; }
    }
    return found;
}

static inline long hpm_proc_field_kb(const char *path, const char *name) {
    long v;
    hpm_proc_fields_kb(path, &name, &v, 1);
    return v;
}

/* The text after "name:" (or the first line when name is NULL), trimmed,
 * into out; "" when missing. */
static inline void hpm_proc_text(const char *path, const char *name, char *out, size_t out_bytes) {
    char buf[HPM_PROC_BUF_BYTES];
    out[0] = 0;
    if (hpm_proc_read(path, buf, sizeof buf) < 0) return;
    const char *v = hpm_proc_line(buf, name);
    if (!v || !out_bytes) return;
    while (*v == ' ' || *v == '\t') v++;
    size_t len = strcspn(v, "\n");
    if (len >= out_bytes) len = out_bytes - 1;
    memcpy(out, v, len);
    out[len] = 0;
}

/* Opens /proc/PID/pagemap (pid 0: this process); the fd or -errno. */
static inline int hpm_proc_pagemap_open(int pid) {
    char path[64];
    if (pid) snprintf(path, sizeof path, "/proc/%d/pagemap", pid);
    else snprintf(path, sizeof path, "/proc/self/pagemap");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

/* n_pages entries from the page holding addr on; 0 or -errno. */
static inline int hpm_proc_pagemap_read(int fd, uintptr_t addr, size_t n_pages, uint64_t *out) {
    off_t off = (off_t)(addr / 4096) * 8;
    size_t want = n_pages * 8, got = 0;
    while (got < want) {
        ssize_t n = pread(fd, (char *)out + got, want - got, off + (off_t)got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return n < 0 ? -errno : -EIO;
        got += (size_t)n;
    }
    return 0;
}
#endif
