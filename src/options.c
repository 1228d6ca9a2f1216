/* options.c: runtime options, one table mapping hpm_option_t to the
 * HPM_<NAME> environment variable, its default and its range. Values are
 * read once, at initialisation; sizes accept K/M/G suffixes, switches
 * accept 1/0/on/off/yes/no/true/false. HPM_PAGES takes thp, hugetlb, 1g or
 * off; HPM_CCOW takes off, a percentage, all or adaptive. Invariant: every
 * stored value lies within its entry's [min, max]. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "internal.h"

typedef enum { KIND_NUM, KIND_BOOL, KIND_SIZE, KIND_PAGES, KIND_CCOW } opt_kind_t;

typedef struct {
    const char *env;
    opt_kind_t kind;
    long value, min, max;
} opt_entry_t;

#define CCOW_OFF (-1)
#define CCOW_ALL 101
#define CCOW_ADAPTIVE 102
#define CCOW_HISTORY 103

static opt_entry_t opts[HPM_OPT_COUNT] = {
    [HPM_OPT_PAGES] = {"HPM_PAGES", KIND_PAGES, PAGES_THP, 0, 3},
    [HPM_OPT_SUBRELEASE] = {"HPM_SUBRELEASE", KIND_BOOL, 0, 0, 1},
    [HPM_OPT_RELEASE_DELAY_MS] = {"HPM_RELEASE_DELAY", KIND_NUM, 1000, 0, 3600000},
    [HPM_OPT_HP_CACHE] = {"HPM_HP_CACHE", KIND_NUM, 2, 0, 1 << 20},
    [HPM_OPT_STATS] = {"HPM_STATS", KIND_BOOL, 0, 0, 1},
    [HPM_OPT_CHECK] = {"HPM_CHECK", KIND_BOOL, 1, 0, 1},
    [HPM_OPT_CCOW] = {"HPM_CCOW", KIND_CCOW, CCOW_OFF, CCOW_OFF, CCOW_HISTORY},
    [HPM_OPT_CCOW_RATE] = {"HPM_CCOW_RATE", KIND_NUM, 0, 0, 1 << 20},
    [HPM_OPT_COLORS] = {"HPM_COLORS", KIND_NUM, 0, 0, 0x7fffffffffffffffL},
    [HPM_OPT_COLOR_COUNT] = {"HPM_COLOR_COUNT", KIND_NUM, 16, 1, 64},
    [HPM_OPT_ARENA_RESERVE] = {"HPM_ARENA_RESERVE", KIND_SIZE, 256L << 30, 1L << 30, 64L << 40},
    [HPM_OPT_BACKGROUND] = {"HPM_BACKGROUND", KIND_BOOL, 1, 0, 1},
    [HPM_OPT_ALIGN16] = {"HPM_ALIGN16", KIND_BOOL, 0, 0, 1},
};

bool _hpm_parse_size(const char *s, long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno || end == s || v < 0) return false;
    long long mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = 1LL << 10; end++; break;
    case 'm': case 'M': mult = 1LL << 20; end++; break;
    case 'g': case 'G': mult = 1LL << 30; end++; break;
    case 't': case 'T': mult = 1LL << 40; end++; break;
    }
    if (*end == 'i' || *end == 'I') end++;
    if (*end == 'b' || *end == 'B') end++;
    if (*end || v > (0x7fffffffffffffffLL / mult)) return false;
    *out = (long)(v * mult);
    return true;
}

static bool parse_value(opt_kind_t kind, const char *s, long *out) {
    static const char *pages[] = {"thp", "hugetlb", "1g", "off"};
    switch (kind) {
    case KIND_BOOL:
        if (!strcmp(s, "1") || !strcasecmp(s, "on") || !strcasecmp(s, "yes") || !strcasecmp(s, "true")) { *out = 1; return true; }
        if (!strcmp(s, "0") || !strcasecmp(s, "off") || !strcasecmp(s, "no") || !strcasecmp(s, "false")) { *out = 0; return true; }
        return false;
    case KIND_PAGES:
        for (long i = 0; i < 4; i++) if (!strcasecmp(s, pages[i])) { *out = i; return true; }
        return false;
    case KIND_CCOW:
        if (!strcasecmp(s, "off") || !strcmp(s, "0")) { *out = CCOW_OFF; return true; }
        if (!strcasecmp(s, "all")) { *out = CCOW_ALL; return true; }
        if (!strcasecmp(s, "adaptive")) { *out = CCOW_ADAPTIVE; return true; }
        if (!strcasecmp(s, "history")) { *out = CCOW_HISTORY; return true; }
        if (_hpm_parse_size(s, out) && *out >= 1 && *out <= 100) return true;
        return false;
    default:
        return _hpm_parse_size(s, out);
    }
}

/* Whether a colour mask has a colour at or above the count (none exists:
 * a mask of only such colours found no page, and every one-page slab
 * took a new hugepage; session 50's review). */
static bool colours_beyond(long mask, long count) {
    return ((uint64_t)mask & ~hpm_colours_all(count)) != 0;
}

void _hpm_options_init(void) {
    for (int i = 0; i < HPM_OPT_COUNT; i++) {
        const char *s = getenv(opts[i].env);
        long v;
        if (!s || !*s) continue;
        if (parse_value(opts[i].kind, s, &v) && v >= opts[i].min && v <= opts[i].max) opts[i].value = v;
        else _hpm_message("hpmalloc: ignoring %s=%s (bad value)\n", opts[i].env, s);
    }
    if (colours_beyond(opts[HPM_OPT_COLORS].value, opts[HPM_OPT_COLOR_COUNT].value)) {
        _hpm_message("hpmalloc: ignoring HPM_COLORS=%s (a colour at or above HPM_COLOR_COUNT=%ld)\n",
                     getenv("HPM_COLORS"), opts[HPM_OPT_COLOR_COUNT].value);
        opts[HPM_OPT_COLORS].value = 0;
    }
}

long _hpm_option(hpm_option_t opt) {
    return (unsigned)opt < HPM_OPT_COUNT ? __atomic_load_n(&opts[opt].value, __ATOMIC_RELAXED) : 0;
}

bool _hpm_option_valid(hpm_option_t opt, long value) {
    return (unsigned)opt < HPM_OPT_COUNT && value >= opts[opt].min && value <= opts[opt].max;
}

int _hpm_option_store(hpm_option_t opt, long value) {
    if (!_hpm_option_valid(opt, value)) return EINVAL;
    /* fixed at start: the arena's backing and size, and the size classes */
    if (opt == HPM_OPT_PAGES || opt == HPM_OPT_ARENA_RESERVE || opt == HPM_OPT_ALIGN16) return value == opts[opt].value ? 0 : EINVAL;
    /* the default mask names only colours below the count (a thread's own
     * mask may not, after a change of the count: the pageheap then does
     * not colour its slabs) */
    if (opt == HPM_OPT_COLORS && colours_beyond(value, _hpm_option(HPM_OPT_COLOR_COUNT))) return EINVAL;
    if (opt == HPM_OPT_COLOR_COUNT && colours_beyond(_hpm_option(HPM_OPT_COLORS), value)) return EINVAL;
    __atomic_store_n(&opts[opt].value, value, __ATOMIC_RELAXED);
    return 0;
}

const char *_hpm_page_mode_name(int mode) {
    static const char *names[] = {"thp", "hugetlb", "1g", "off"};
    return mode >= 0 && mode < 4 ? names[mode] : "?";
}
