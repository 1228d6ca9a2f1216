/* bench_selftest.c: `hpm bench --selftest`, unit tests of the driver's
 * pure code with known answers: result-line parsing, median and min/max,
 * ratio and percentage difference, CSV quoting and splitting (a round
 * trip through a real temporary file), the run-metric lookup, metric
 * patterns, the checksum cross-check and duration formatting. Prints each
 * failure and ends with "N passed, N failed"; exit status 1 on failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bench_int.h"

static int passed, failed;

#define EXPECT(cond, ...) do { \
    if (cond) passed++; \
    else { failed++; fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
           fprintf(stderr, __VA_ARGS__); fprintf(stderr, "\n"); } \
} while (0)

static int near(double a, double b) { return fabs(a - b) <= 1e-9 * (fabs(b) > 1 ? fabs(b) : 1); }

static void test_result_line(void) {
    const char *line = "bench=memaccess order=rand nodes_ns@16384=1.25 nodes_ns_gmean=3.5 check=ok x=-2e3";
    char buf[32];
    double v = 0;
    EXPECT(hpm_bench_result_get(line, "order", buf, sizeof buf) == 0 && !strcmp(buf, "rand"), "got '%s'", buf);
    EXPECT(hpm_bench_result_num(line, "nodes_ns@16384", &v) == 0 && near(v, 1.25), "got %g", v);
    EXPECT(hpm_bench_result_num(line, "nodes_ns_gmean", &v) == 0 && near(v, 3.5), "got %g", v);
    EXPECT(hpm_bench_result_num(line, "x", &v) == 0 && near(v, -2000), "got %g", v);
    EXPECT(hpm_bench_result_num(line, "check", &v) == -1, "'ok' is not a number");
    EXPECT(hpm_bench_result_num(line, "nodes_ns", &v) == -1, "a prefix of a key is not the key");
    EXPECT(hpm_bench_result_num(line, "missing", &v) == -1, "missing key");
    EXPECT(hpm_bench_result_get("a=1 ba=2", "a", buf, sizeof buf) == 0 && !strcmp(buf, "1"), "got '%s'", buf);
    EXPECT(hpm_bench_result_get("ba=2 a=3", "a", buf, sizeof buf) == 0 && !strcmp(buf, "3"), "got '%s'", buf);
    EXPECT(hpm_bench_result_get("k=", "k", buf, sizeof buf) == 0 && buf[0] == 0, "empty value");
    EXPECT(hpm_bench_result_num("k=", "k", &v) == -1, "empty value is not a number");
    EXPECT(hpm_bench_result_num("k=12abc", "k", &v) == -1, "trailing junk is not a number");
    EXPECT(hpm_bench_result_num("k=nan", "k", &v) == -1, "nan is refused");
    EXPECT(hpm_bench_result_get(NULL, "k", buf, sizeof buf) == -1, "NULL line");
    char small[4];
    EXPECT(hpm_bench_result_get("k=123456", "k", small, sizeof small) == 0 && !strcmp(small, "123"), "truncated '%s'", small);
    EXPECT(hpm_bench_result_count(line) == 6, "count %d", hpm_bench_result_count(line));
    EXPECT(hpm_bench_result_count("") == 0, "empty line has 0 pairs");
    EXPECT(hpm_bench_result_count("a=1 junk b=2") == -1, "token without '='");
    EXPECT(hpm_bench_result_count("=1") == -1, "empty key");
    EXPECT(hpm_bench_result_count("a b=1") == -1, "bare word");
    EXPECT(hpm_bench_result_count("k$=1") == -1, "bad key character");
}

static void test_stats(void) {
    double a[] = {5, 1, 4, 2, 3}, b[] = {10, 2, 8, 4}, one[] = {7}, lo, hi;
    EXPECT(near(hpm_bench_median(a, 5), 3), "odd median %g", hpm_bench_median(a, 5));
    EXPECT(near(hpm_bench_median(b, 4), 6), "even median %g", hpm_bench_median(b, 4));
    EXPECT(near(hpm_bench_median(one, 1), 7), "single median");
    EXPECT(isnan(hpm_bench_median(a, 0)), "empty median is NaN");
    EXPECT(a[0] == 5 && a[1] == 1, "median must not reorder its input");
    double big[100];
    for (int i = 0; i < 100; i++) big[i] = 99 - i;
    EXPECT(near(hpm_bench_median(big, 100), 49.5), "median of 100 %g", hpm_bench_median(big, 100));
    hpm_bench_minmax(a, 5, &lo, &hi);
    EXPECT(near(lo, 1) && near(hi, 5), "minmax %g %g", lo, hi);
    hpm_bench_minmax(a, 0, &lo, &hi);
    EXPECT(isnan(lo) && isnan(hi), "empty minmax is NaN");
    EXPECT(near(hpm_bench_ratio(50, 100), 0.5), "ratio");
    EXPECT(near(hpm_bench_pct_diff(50, 100), -50), "pct %g", hpm_bench_pct_diff(50, 100));
    EXPECT(near(hpm_bench_pct_diff(130, 100), 30), "pct %g", hpm_bench_pct_diff(130, 100));
    EXPECT(isnan(hpm_bench_ratio(1, 0)), "zero baseline");
    EXPECT(isnan(hpm_bench_ratio(1, -3)), "negative baseline");
    EXPECT(isnan(hpm_bench_ratio(NAN, 2)), "NaN value");
    EXPECT(isnan(hpm_bench_pct_diff(1, INFINITY)), "infinite baseline");
}

static void test_csv(void) {
    const char *fields[] = {"plain", "with,comma", "say \"hi\"", "two\nlines", ""};
    char path[] = "/tmp/hpm-bench-selftest-XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w+") : NULL;
    EXPECT(f != NULL, "temporary file");
    if (!f) return;
    for (int i = 0; i < 5; i++) { if (i) fputc(',', f); hpm_bench_csv_field(f, fields[i]); }
    fputc('\n', f);
    rewind(f);
    char line[256];
    size_t n = fread(line, 1, sizeof line - 1, f);
    line[n] = 0;
    fclose(f);
    remove(path);
    EXPECT(!strcmp(line, "plain,\"with,comma\",\"say \"\"hi\"\"\",\"two\nlines\",\n"), "written: [%s]", line);
    char *out[8];
    int k = hpm_bench_csv_split(line, out, 8);
    EXPECT(k == 5, "split into %d fields", k);
    for (int i = 0; i < k && i < 5; i++) EXPECT(!strcmp(out[i], fields[i]), "field %d: [%s] != [%s]", i, out[i], fields[i]);
    char l2[] = "a,,c";
    k = hpm_bench_csv_split(l2, out, 8);
    EXPECT(k == 3 && !strcmp(out[1], "") && !strcmp(out[2], "c"), "empty middle field (%d)", k);
    char l3[] = "a,b,c,d";
    k = hpm_bench_csv_split(l3, out, 2);
    EXPECT(k == 2, "at most max fields (%d)", k);
    char l4[] = "\"unterminated";
    k = hpm_bench_csv_split(l4, out, 8);
    EXPECT(k == 1 && !strcmp(out[0], "unterminated"), "unterminated quote (%d)", k);
}

static hpm_bench_run_t mk_run(const char *bench, const char *alloc, int ok, const char *result) {
    hpm_bench_run_t r;
    memset(&r, 0, sizeof r);
    snprintf(r.bench, sizeof r.bench, "%s", bench);
    snprintf(r.alloc, sizeof r.alloc, "%s", alloc);
    snprintf(r.result, sizeof r.result, "%s", result);
    r.ok = ok;
    r.thp_peak_pct = -1;
    for (int i = 0; i < HPM_PERF_N; i++) r.perf[i] = -1;
    return r;
}

static void test_runs(void) {
    hpm_bench_run_t r = mk_run("kmeans", "glibc", 1, "bench=kmeans total_ms=12.5 ms_k16=1.5");
    r.wall_s = 2.5;
    r.maxrss_kib = 4096;
    double v;
    EXPECT(hpm_bench_run_metric(&r, "wall_s", &v) == 0 && near(v, 2.5), "wall_s");
    EXPECT(hpm_bench_run_metric(&r, "maxrss_kib", &v) == 0 && near(v, 4096), "maxrss");
    EXPECT(hpm_bench_run_metric(&r, "thp_peak_pct", &v) == -1, "unsampled THP is n/a");
    EXPECT(hpm_bench_run_metric(&r, "cycles", &v) == -1, "counter n/a");
    r.perf[HPM_PERF_CYCLES] = 1000;
    EXPECT(hpm_bench_run_metric(&r, "cycles", &v) == 0 && near(v, 1000), "counter value");
    EXPECT(hpm_bench_run_metric(&r, "ms_k16", &v) == 0 && near(v, 1.5), "result metric");
    EXPECT(hpm_bench_metric_match("ms_k*", "ms_k2000"), "prefix pattern");
    EXPECT(!hpm_bench_metric_match("ms_k*", "total_ms"), "prefix pattern miss");
    EXPECT(hpm_bench_metric_match("total_ms", "total_ms") && !hpm_bench_metric_match("total_ms", "total_ms2"), "exact");

    hpm_bench_run_t runs[5] = {
        mk_run("kmeans", "glibc", 1, "checksum=aa"), mk_run("kmeans", "jemalloc", 1, "checksum=aa"),
        mk_run("kmeans", "tcmalloc", 1, "checksum=bb"), mk_run("kmeans", "mimalloc", 0, "checksum=cc"),
        mk_run("other", "glibc", 1, "checksum=bb")};
    EXPECT(hpm_bench_check_checksums(runs, 5) == 1, "one run disagrees");
    EXPECT(!runs[2].ok && strstr(runs[2].error, "checksum bb"), "the disagreeing run is marked: %s", runs[2].error);
    EXPECT(runs[0].ok && runs[1].ok && runs[4].ok, "the others stay ok");
    EXPECT(hpm_bench_check_checksums(runs, 5) == 0, "second pass changes nothing");
}

static void test_duration(void) {
    char b[32];
    hpm_bench_fmt_duration(5.4, b, sizeof b);
    EXPECT(!strcmp(b, "5s"), "%s", b);
    hpm_bench_fmt_duration(245, b, sizeof b);
    EXPECT(!strcmp(b, "4m05s"), "%s", b);
    hpm_bench_fmt_duration(3725, b, sizeof b);
    EXPECT(!strcmp(b, "1h02m"), "%s", b);
    hpm_bench_fmt_duration(NAN, b, sizeof b);
    EXPECT(!strcmp(b, "?"), "%s", b);
}

static void test_cases(void) {
    for (int i = 0; i < hpm_bench_n_cases; i++) {
        const hpm_bench_case_t *c = &hpm_bench_cases[i];
        EXPECT(hpm_bench_case_find(c->name) == c, "case %s found", c->name);
        for (int s = 0; s < HPM_SCALE_N; s++) EXPECT(c->args[s] && c->est_s[s] > 0, "case %s scale %d", c->name, s);
        EXPECT(c->metrics[0] && c->metrics[0] != '*', "case %s has a headline", c->name);
    }
    EXPECT(hpm_bench_case_find("nope") == NULL, "unknown case");
    EXPECT(hpm_bench_metric_higher_better("mops") && !hpm_bench_metric_higher_better("ns_per_op"), "direction");
}

int hpm_bench_selftest(void) {
    test_result_line();
    test_stats();
    test_csv();
    test_runs();
    test_duration();
    test_cases();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
