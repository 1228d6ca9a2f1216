/* args.c: the one command-line parser of hpm (see args.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "hpm.h"

int hpm_usage_error(const char *cmd, void (*usage)(FILE *), const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "%s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    if (usage) fprintf(stderr, "Try '%s --help' for more information.\n", cmd);
    return 2;
}

int hpm_parse_num(const char *s, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    /* !(v >= lo) also refuses "nan", which strtod accepts and every
     * comparison passes: --watch nan slept NaN seconds in a loop. */
    if (errno || end == s || *end || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

int hpm_parse_int(const char *s, int lo, int hi, int *out) {
    double v;
    /* a count is whole: --count 1.5 was taken as 1 */
    if (hpm_parse_num(s, lo, hi, &v) || v != (double)(int)v) return -1;
    *out = (int)v;
    return 0;
}

/* The table entry that arg names (with "=value" cut off), or -1. */
static int find_opt(const hpm_opt_t *opts, int n_opts, const char *arg, size_t len) {
    for (int k = 0; k < n_opts; k++) {
        if (arg[1] != '-' && len == 2 && opts[k].short_name == arg[1]) return k;
        if (opts[k].name && strlen(opts[k].name) == len && !strncmp(opts[k].name, arg, len)) return k;
    }
    return -1;
}

/* One option at argv[*i]; advances *i past its value. -1 to go on, or a status. */
static int parse_one(const char *cmd, int argc, char **argv, int *i, const hpm_opt_t *opts, int n_opts,
                     hpm_opt_fn fn, void *ctx, void (*usage)(FILE *)) {
    const char *a = argv[*i], *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
    if (!strcmp(a, "--version")) { printf("%s %s\n", cmd, HPM_VERSION); return 0; }
    int k = find_opt(opts, n_opts, a, len);
    if (k < 0) return hpm_usage_error(cmd, usage, "unknown option '%.*s'", (int)len, a);
    const char *value = NULL;
    if (opts[k].has_value) {
        if (eq) value = eq + 1;
        else if (*i + 1 < argc) value = argv[++*i];
        else return hpm_usage_error(cmd, usage, "option '%s' needs a value", opts[k].name);
    } else if (eq) {
        return hpm_usage_error(cmd, usage, "option '%s' takes no value", opts[k].name);
    }
    if (fn(ctx, k, value) != 0) return hpm_usage_error(cmd, usage, "bad value '%s' for %s", value, opts[k].name);
    return -1;
}

int hpm_args_parse(const char *cmd, int argc, char **argv, const hpm_opt_t *opts, int n_opts, hpm_opt_fn fn,
                   void *ctx, void (*usage)(FILE *), int stop_at_operand, hpm_operands_t *out) {
    memset(out, 0, sizeof *out);
    out->operands = calloc((size_t)argc + 1, sizeof *out->operands);
    if (!out->operands) { perror(cmd); return 1; }
    int options_done = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!options_done && !strcmp(a, "--")) {
            options_done = out->dashdash = 1;
            out->before_dashdash = out->n;
            continue;
        }
        if (options_done || a[0] != '-' || !a[1]) {   /* an operand ("-" alone is one) */
            out->operands[out->n++] = argv[i];
            if (stop_at_operand) options_done = 1;
            continue;
        }
        int st = parse_one(cmd, argc, argv, &i, opts, n_opts, fn, ctx, usage);
        if (st >= 0) { hpm_args_free(out); return st; }
    }
    if (!out->dashdash) out->before_dashdash = out->n;
    return -1;
}

void hpm_args_free(hpm_operands_t *out) {
    free(out->operands);
    out->operands = NULL;
    out->n = 0;
}
