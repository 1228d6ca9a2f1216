/* trace.c: the text trace format of hpm sim, one operation per line.
 *
 *   a ID ORDER TYPE   allocate 2^ORDER frames (ORDER 0..10) of TYPE: U, R or M
 *                     (or unmovable, reclaimable, movable); ID names it
 *   f ID              free it
 *   r ID              free it after the RCU grace period
 *   h ID              huge-page request (order 9 movable, direct compaction)
 *   c                 whole-memory compaction (sync, as compact_memory)
 *   k                 kswapd's background compaction for order 9 (async)
 *   t N               advance time by N operations
 *   # ...             comment; blank lines are ignored
 *
 * IDs are decimal integers 0..4294967294. Fields are separated by blanks;
 * anything else (an unknown letter, a missing or extra field, a number out
 * of range) makes the line malformed. */
#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <strings.h>
#include "hpmsim.h"

static int bad(char *err, size_t len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
    return -1;
}

static bool parse_u64(const char *tok, uint64_t *out) {
    if (!*tok) return false;
    uint64_t v = 0;
    for (const char *p = tok; *p; p++) {
        if (!isdigit((unsigned char)*p)) return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static int parse_type(const char *tok) {
    static const char *long_names[3] = {"unmovable", "reclaimable", "movable"};
    static const char letters[3] = {'U', 'R', 'M'};
    for (int i = 0; i < 3; i++)
        if ((tok[0] && !tok[1] && toupper((unsigned char)tok[0]) == letters[i]) || !strcasecmp(tok, long_names[i]))
            return i;
    return -1;
}

/* Splits the line into at most 6 blank-separated tokens (copied to buf). */
static int tokenize(const char *line, char *buf, size_t buf_len, char *tok[6]) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    if (n >= buf_len) n = buf_len - 1;
    memcpy(buf, line, n);
    buf[n] = 0;
    int nt = 0;
    for (char *p = buf; *p;) {
        while (*p == ' ' || *p == '\t') *p++ = 0;
        if (!*p) break;
        if (nt == 6) return 7;
        tok[nt++] = p;
        while (*p && *p != ' ' && *p != '\t') p++;
    }
    return nt;
}

static int parse_id(const char *tok, uint32_t *id, char *err, size_t len) {
    uint64_t v;
    if (!parse_u64(tok, &v) || v > SIM_ID_MAX) return bad(err, len, "bad id '%s' (want 0..%u)", tok, SIM_ID_MAX);
    *id = (uint32_t)v;
    return 0;
}

int sim_trace_parse_line(const char *line, sim_op_t *op, char *err, size_t len) {
    char buf[256], *tok[6];
    int nt = tokenize(line, buf, sizeof buf, tok);
    if (nt == 0 || tok[0][0] == '#') return 0;
    memset(op, 0, sizeof *op);
    if (strlen(tok[0]) != 1) return bad(err, len, "unknown operation '%s'", tok[0]);
    op->kind = tok[0][0];
    static const struct { char kind; int fields; const char *usage; } forms[] = {
        {'a', 4, "a ID ORDER TYPE"}, {'f', 2, "f ID"}, {'r', 2, "r ID"},
        {'h', 2, "h ID"}, {'c', 1, "c"}, {'k', 1, "k"}, {'t', 2, "t N"},
    };
    int f = -1;
    for (int i = 0; i < 7; i++)
        if (forms[i].kind == op->kind) f = i;
    if (f < 0) return bad(err, len, "unknown operation '%s'", tok[0]);
    if (nt != forms[f].fields) return bad(err, len, "'%c' takes %d field(s): %s", op->kind, forms[f].fields - 1, forms[f].usage);
    if (op->kind == 't') {
        if (!parse_u64(tok[1], &op->n)) return bad(err, len, "bad count '%s'", tok[1]);
        return 1;
    }
    if (op->kind == 'c' || op->kind == 'k') return 1;
    if (parse_id(tok[1], &op->id, err, len)) return -1;
    if (op->kind == 'a') {
        uint64_t order;
        if (!parse_u64(tok[2], &order) || order >= SIM_MAX_ORDER) return bad(err, len, "bad order '%s' (want 0..10)", tok[2]);
        int t = parse_type(tok[3]);
        if (t < 0) return bad(err, len, "bad type '%s' (want U, R or M)", tok[3]);
        op->order = (uint8_t)order;
        op->type = (uint8_t)t;
    }
    return 1;
}

void sim_trace_write_op(FILE *f, const sim_op_t *op) {
    static const char letters[3] = {'U', 'R', 'M'};
    switch (op->kind) {
    case 'a': fprintf(f, "a %u %u %c\n", op->id, op->order, letters[op->type % 3]); break;
    case 'f': case 'r': case 'h': fprintf(f, "%c %u\n", op->kind, op->id); break;
    case 'c': case 'k': fprintf(f, "%c\n", op->kind); break;
    case 't': fprintf(f, "t %llu\n", (unsigned long long)op->n); break;
    default: break;
    }
}
