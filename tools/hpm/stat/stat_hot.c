/* stat_hot.c: hot and cold memory, SYSMON-style, with the kernel's
 * access bits. Each round writes "1" to /proc/PID/clear_refs (clears the
 * accessed bit of every anonymous and file page of the process), waits one
 * interval, and reads "Referenced" per mapping from /proc/PID/smaps: the
 * bytes touched during that interval. After K rounds each mapping has K
 * referenced fractions f_1..f_K. The kernel gives counts, not which pages,
 * so we assume the pages referenced in a quieter interval are among those
 * referenced in a busier one (nesting): then the share of pages touched in
 * at least j of K intervals is the j-th largest f. That splits each
 * mapping's resident bytes into five classes by access frequency q = j/K:
 * very hot q >= 0.9, hot q >= 0.6, warm q >= 0.3, cold q > 0, very cold
 * q = 0 (never seen). WPD (weighted page distribution, the SYSMON score)
 * = (2 VH + 1.5 H + 1 W + 0.5 C + 0.1 VC) / all resident bytes.
 * Invariant: the five class sizes of a mapping add up to its Rss. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "stat.h"

const char *const stat_hot_name[STAT_HOT_CLASSES] = {"very_hot", "hot", "warm", "cold", "very_cold"};
const double stat_hot_weight[STAT_HOT_CLASSES] = {2.0, 1.5, 1.0, 0.5, 0.1};

int stat_clear_refs(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/clear_refs", pid);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -errno;
    ssize_t n = write(fd, "1", 1);
    int err = n == 1 ? 0 : -errno;
    close(fd);
    return err;
}

/* Reads smaps again and appends Referenced/Rss of each known mapping. */
int stat_hot_round(stat_report_t *r) {
    stat_mapping_t *now = NULL;
    int n_now = 0;
    int err = stat_read_smaps(r->pid, &now, &n_now);
    if (err) return err;
    int j = 0;
    for (int i = 0; i < r->n_maps; i++) {   /* both lists are sorted by address */
        stat_mapping_t *m = &r->maps[i];
        while (j < n_now && now[j].start < m->start) j++;
        if (j >= n_now || now[j].start != m->start || m->n_rounds >= STAT_MAX_ROUNDS) continue;
        double f = now[j].rss_bytes ? (double)now[j].ref_bytes / (double)now[j].rss_bytes : 0.0;
        m->ref_frac[m->n_rounds++] = f > 1.0 ? 1.0 : f;
        m->rss_bytes = now[j].rss_bytes;   /* classes split the latest Rss */
        m->ref_bytes = now[j].ref_bytes;
    }
    free(now);
    return 0;
}

static int hot_cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int hot_class_of(double q) {
    if (q >= 0.9) return 0;
    if (q >= 0.6) return 1;
    if (q >= 0.3) return 2;
    if (q > 0.0) return 3;
    return 4;
}

/* Splits one mapping's Rss into the classes (nesting assumption). */
static void hot_classify_mapping(stat_mapping_t *m) {
    memset(m->class_bytes, 0, sizeof m->class_bytes);
    int k = m->n_rounds;
    if (k == 0) return;
    double f[STAT_MAX_ROUNDS];
    memcpy(f, m->ref_frac, (size_t)k * sizeof f[0]);
    qsort(f, (size_t)k, sizeof f[0], hot_cmp_desc);
    double rss = (double)m->rss_bytes;
    for (int j = 1; j <= k; j++) {           /* share touched in exactly j intervals */
        double share = f[j - 1] - (j < k ? f[j] : 0.0);
        m->class_bytes[hot_class_of((double)j / k)] += share * rss;
    }
    m->class_bytes[4] += (1.0 - f[0]) * rss;  /* never referenced */
}

void stat_hot_classify(stat_report_t *r) {
    memset(r->class_bytes, 0, sizeof r->class_bytes);
    double total = 0, weighted = 0;
    for (int i = 0; i < r->n_maps; i++) {
        stat_mapping_t *m = &r->maps[i];
        hot_classify_mapping(m);
        for (int c = 0; c < STAT_HOT_CLASSES; c++) {
            r->class_bytes[c] += m->class_bytes[c];
            total += m->class_bytes[c];
            weighted += stat_hot_weight[c] * m->class_bytes[c];
        }
    }
    r->wpd = total > 0 ? weighted / total : -1.0;
}
