/* bench_stats.c: the pure arithmetic and text handling of `hpm bench`:
 * reading key=value pairs from a benchmark's RESULT line, median and
 * min/max, ratio and percentage difference against the baseline, RFC 4180
 * CSV fields, and durations for the progress line. Nothing here touches
 * the system, so `hpm bench --selftest` checks all of it with known
 * answers. Invariant: every function accepts any input without crashing;
 * missing or non-finite data gives NaN or -1, never a made-up number. */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "bench_int.h"

/* Finds the token "key=..." in line (tokens are separated by spaces). */
static const char *result_find(const char *line, const char *key) {
    size_t klen = strlen(key);
    if (!line || klen == 0) return NULL;
    for (const char *p = line; *p;) {
        while (*p == ' ' || *p == '\t') p++;
        if (!*p) break;
        if (!strncmp(p, key, klen) && p[klen] == '=') return p + klen + 1;
        while (*p && *p != ' ' && *p != '\t') p++;
    }
    return NULL;
}

int hpm_bench_result_get(const char *line, const char *key, char *buf, size_t len) {
    const char *v = result_find(line, key);
    if (!v || len == 0) return -1;
    size_t n = strcspn(v, " \t\r\n");
    if (n >= len) n = len - 1;
    memcpy(buf, v, n);
    buf[n] = 0;
    return 0;
}

int hpm_bench_result_num(const char *line, const char *key, double *v) {
    char buf[64];
    if (hpm_bench_result_get(line, key, buf, sizeof buf) != 0 || !buf[0]) return -1;
    char *end;
    double d = strtod(buf, &end);
    if (*end || !isfinite(d)) return -1;
    *v = d;
    return 0;
}

static int key_char_ok(int c) { return isalnum(c) || c == '_' || c == '.' || c == '@' || c == '-'; }

int hpm_bench_result_count(const char *line) {
    if (!line) return -1;
    int n = 0;
    for (const char *p = line; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        const char *k = p;
        while (*p && key_char_ok((unsigned char)*p)) p++;
        if (p == k || *p != '=') return -1;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') p++;
        n++;
    }
    return n;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double hpm_bench_median(const double *v, int n) {
    if (n <= 0) return NAN;
    double small[64], *s = n <= 64 ? small : malloc(sizeof *s * (size_t)n);
    if (!s) return NAN;
    memcpy(s, v, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    if (s != small) free(s);
    return m;
}

void hpm_bench_minmax(const double *v, int n, double *min, double *max) {
    *min = *max = NAN;
    for (int i = 0; i < n; i++) {
        if (i == 0 || v[i] < *min) *min = v[i];
        if (i == 0 || v[i] > *max) *max = v[i];
    }
}

double hpm_bench_ratio(double value, double baseline) {
    if (!isfinite(value) || !isfinite(baseline) || baseline <= 0) return NAN;
    return value / baseline;
}

double hpm_bench_pct_diff(double value, double baseline) {
    double r = hpm_bench_ratio(value, baseline);
    return isfinite(r) ? 100.0 * (r - 1.0) : NAN;
}

void hpm_bench_csv_field(FILE *f, const char *s) {
    if (!s) s = "";
    if (!strpbrk(s, ",\"\r\n")) { fputs(s, f); return; }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

int hpm_bench_csv_split(char *line, char **fields, int max) {
    int n = 0;
    char *p = line;
    if (max <= 0) return 0;
    for (;;) {
        char *out = p, *start = p;
        if (*p == '"') {
            p++;
            for (;;) {
                if (!*p) break;
                if (*p == '"' && p[1] == '"') { *out++ = '"'; p += 2; continue; }
                if (*p == '"') { p++; break; }
                *out++ = *p++;
            }
            while (*p && *p != ',' && *p != '\n' && *p != '\r') p++;   /* junk after the quote */
        } else {
            while (*p && *p != ',' && *p != '\n' && *p != '\r') *out++ = *p++;
        }
        char sep = *p;
        *out = 0;
        fields[n++] = start;
        if (sep != ',' || n == max) break;
        p++;
    }
    return n;
}

void hpm_bench_fmt_duration(double s, char *buf, size_t len) {
    if (!isfinite(s) || s < 0) { snprintf(buf, len, "?"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, len, "%lds", t);
}

const char *const hpm_bench_perf_names[HPM_PERF_N] = {
    "cycles", "instructions", "dtlb_load_misses", "dtlb_walks", "itlb_misses", "llc_read_misses"};

const char *const hpm_bench_driver_metrics[] = {
    "wall_s", "user_s", "sys_s", "maxrss_kib", "minflt", "majflt", "thp_peak_pct",
    "cycles", "instructions", "dtlb_load_misses", "dtlb_walks", "itlb_misses", "llc_read_misses"};
const int hpm_bench_n_driver_metrics = (int)(sizeof hpm_bench_driver_metrics / sizeof hpm_bench_driver_metrics[0]);

int hpm_bench_run_metric(const hpm_bench_run_t *r, const char *metric, double *v) {
    double d;
    if (!strcmp(metric, "wall_s")) d = r->wall_s;
    else if (!strcmp(metric, "user_s")) d = r->user_s;
    else if (!strcmp(metric, "sys_s")) d = r->sys_s;
    else if (!strcmp(metric, "maxrss_kib")) d = (double)r->maxrss_kib;
    else if (!strcmp(metric, "minflt")) d = (double)r->minflt;
    else if (!strcmp(metric, "majflt")) d = (double)r->majflt;
    else if (!strcmp(metric, "thp_peak_pct")) {
        if (r->thp_peak_pct < 0) return -1;
        d = r->thp_peak_pct;
    } else {
        for (int i = 0; i < HPM_PERF_N; i++)
            if (!strcmp(metric, hpm_bench_perf_names[i])) {
                if (r->perf[i] < 0) return -1;
                *v = (double)r->perf[i];
                return 0;
            }
        return hpm_bench_result_num(r->result, metric, v);
    }
    *v = d;
    return 0;
}

int hpm_bench_metric_match(const char *pattern, const char *key) {
    size_t n = strlen(pattern);
    if (n > 0 && pattern[n - 1] == '*') return strncmp(pattern, key, n - 1) == 0;
    return strcmp(pattern, key) == 0;
}
