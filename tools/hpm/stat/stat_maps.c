/* stat_maps.c: the mappings of a process and their counters, from
 * /proc/PID/smaps and /proc/PID/smaps_rollup. Coverage is AnonHugePages
 * over Anonymous, per mapping and summed; the sums are exactly what
 * smaps_rollup adds up, so the totals agree with it (when the process
 * does not change in between). Invariant: r->maps is sorted by address,
 * as the kernel lists it. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include "hpm_proc.h"
#include "stat.h"

void stat_note_missing(stat_report_t *r, const char *fmt, ...) {
    if (r->n_missing >= STAT_MISSING_MAX) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->missing[r->n_missing], sizeof r->missing[0], fmt, ap);
    va_end(ap);
    for (int i = 0; i < r->n_missing; i++)   /* say each thing once */
        if (!strcmp(r->missing[i], r->missing[r->n_missing])) return;
    r->n_missing++;
}

/* The text of /proc/PID/stat after the command name ("S 1 ..."), in buf;
 * NULL when the process is gone. */
static const char *maps_proc_stat(int pid, char *buf, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = 0;
    char *rp = strrchr(buf, ')');   /* state follows the command name */
    return rp && rp[1] == ' ' ? rp + 2 : NULL;
}

int stat_process_alive(int pid) {
    char buf[512];
    const char *st = maps_proc_stat(pid, buf, sizeof buf);
    return st && *st != 'Z' && *st != 'X';
}

#define MAPS_PF_KTHREAD 0x00200000ul   /* task flag of a kernel thread (linux/sched.h) */

/* flags is the 9th field of /proc/PID/stat, the 7th after the command name. */
int stat_process_kthread(int pid) {
    char buf[512];
    const char *st = maps_proc_stat(pid, buf, sizeof buf);
    unsigned long flags = 0;
    if (!st || sscanf(st, "%*c %*d %*d %*d %*d %*d %lu", &flags) != 1) return 0;
    return (flags & MAPS_PF_KTHREAD) != 0;
}

static int maps_is_anon_name(const char *name) {
    return !name[0] || !strcmp(name, "[heap]") || !strncmp(name, "[stack", 6) || !strncmp(name, "[anon", 5);
}

/* Parses a header line "start-end perms offset dev inode [name]". */
static int maps_parse_header(const char *line, stat_mapping_t *m) {
    unsigned long long s, e, off, ino;
    char perms[8], dev[32];
    int consumed = 0;
    if (sscanf(line, "%llx-%llx %7s %llx %31s %llu %n", &s, &e, perms, &off, dev, &ino, &consumed) < 6)
        return -1;
    memset(m, 0, sizeof *m);
    m->start = s;
    m->end = e;
    snprintf(m->perms, sizeof m->perms, "%s", perms);
    const char *name = line + consumed;
    while (*name == ' ') name++;
    snprintf(m->name, sizeof m->name, "%s", name);
    size_t len = strlen(m->name);
    while (len && (m->name[len - 1] == '\n' || m->name[len - 1] == ' ')) m->name[--len] = 0;
    m->size_bytes = e - s;
    m->anon = maps_is_anon_name(m->name) && strcmp(m->name, "[vsyscall]");
    return 0;
}

/* "Key:   123 kB" -> bytes when the key matches. */
static int maps_field(const char *line, const char *key, uint64_t *out) {
    size_t k = strlen(key);
    if (strncmp(line, key, k) || line[k] != ':') return 0;
    *out = strtoull(line + k + 1, NULL, 10) * 1024;
    return 1;
}

static int maps_is_header(const char *line) {
    /* headers start with a hex address followed by '-' */
    const char *p = line;
    while (isxdigit((unsigned char)*p)) p++;
    return p > line && *p == '-';
}

/* Reads smaps into a new array; calls back per mapping field. */
int stat_read_smaps(int pid, stat_mapping_t **out, int *n_out) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/smaps", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -errno;
    int cap = 64, n = 0;
    stat_mapping_t *maps = calloc((size_t)cap, sizeof *maps);
    char line[512];
    int err = 0;
    while (maps && fgets(line, sizeof line, f)) {
        if (maps_is_header(line)) {
            if (n == cap) {
                stat_mapping_t *g = realloc(maps, (size_t)cap * 2 * sizeof *maps);
                if (!g) { err = -ENOMEM; break; }
                maps = g;
                cap *= 2;
            }
            if (maps_parse_header(line, &maps[n]) == 0) n++;
            continue;
        }
        if (!n) continue;
        stat_mapping_t *m = &maps[n - 1];
        if (maps_field(line, "Rss", &m->rss_bytes) || maps_field(line, "Anonymous", &m->anon_bytes) ||
            maps_field(line, "AnonHugePages", &m->thp_bytes) || maps_field(line, "Referenced", &m->ref_bytes) ||
            maps_field(line, "Swap", &m->swap_bytes))
            continue;
    }
    if (!maps) err = -ENOMEM;
    else if (ferror(f)) err = -(errno ? errno : EIO);
    fclose(f);
    /* An empty smaps of an existing pid means a kernel thread or a zombie. */
    if (!err && n == 0 && !stat_process_alive(pid)) err = -ESRCH;
    if (err) { free(maps); return err; }
    *out = maps;
    *n_out = n;
    return 0;
}

int stat_read_maps(stat_report_t *r) {
    stat_free_maps(r);
    int err = stat_read_smaps(r->pid, &r->maps, &r->n_maps);
    if (err) return err;
    r->anon_bytes = r->thp_bytes = 0;
    for (int i = 0; i < r->n_maps; i++) {
        r->anon_bytes += r->maps[i].anon_bytes;
        r->thp_bytes += r->maps[i].thp_bytes;
    }
    return 0;
}

int stat_read_rollup(stat_report_t *r) {
    char path[64];
    static const char *const names[] = {"Anonymous", "AnonHugePages"};
    long kib[2];
    snprintf(path, sizeof path, "/proc/%d/smaps_rollup", r->pid);
    char probe[1];
    long err = hpm_proc_read(path, probe, sizeof probe);
    if (err < 0) return (int)err;
    hpm_proc_fields_kb(path, names, kib, 2);
    r->rollup_anon = kib[0] > 0 ? (uint64_t)kib[0] * 1024 : 0;
    r->rollup_thp = kib[1] > 0 ? (uint64_t)kib[1] * 1024 : 0;
    return 0;
}

void stat_free_maps(stat_report_t *r) {
    for (int i = 0; i < r->n_maps; i++) {
        free(r->maps[i].map);
        free(r->maps[i].regions);
    }
    free(r->maps);
    r->maps = NULL;
    r->n_maps = 0;
}
