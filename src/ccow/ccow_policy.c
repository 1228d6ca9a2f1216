/* ccow_policy.c: CCoW's decisions as pure functions (no OS, no clock of
 * their own), so unit tests can drive them directly: mode strings, the
 * pre-copy test against threshold T, the pre-copy throttle (a token bucket
 * in bytes) and the adaptive threshold.
 *
 * Adaptive rule: a few control regions are never pre-copied during a
 * period. For each that crossed T, (final - coverage at crossing) is the
 * share of its pages written after the crossing, which a pre-copy at T
 * would have saved as faults; (100 - final) is the share a pre-copy at T
 * would have copied for nothing. More waste than use raises T by 5; use
 * over twice the waste lowers it by 5; T stays in [30, 95].
 *
 * History rule (mode "history"): a region's written share is smoothed as
 * (old + 3 x this period) / 4; a pre-copied region shows nothing (it is
 * private from the start), so its share decays by an eighth per period
 * and the region is measured again once it falls below the dense mark. */
#include <string.h>
#include "ccow/ccow.h"

bool _hpm_ccow_parse_mode(const char *s, long *opt_out) {
    if (!s) return false;
    if (!strcmp(s, "off") || !strcmp(s, "0")) { *opt_out = CCOW_OPT_OFF; return true; }
    if (!strcmp(s, "all")) { *opt_out = CCOW_OPT_ALL; return true; }
    if (!strcmp(s, "adaptive")) { *opt_out = CCOW_OPT_ADAPTIVE; return true; }
    if (!strcmp(s, "history")) { *opt_out = CCOW_OPT_HISTORY; return true; }
    long v = 0;
    const char *p = s;
    if (*p == 'T' || *p == 't') p++;
    if (*p == '=') p++;
    if (!*p) return false;
    for (; *p; p++) {
        if (*p < '0' || *p > '9' || v > 1000) return false;
        v = v * 10 + (*p - '0');
    }
    if (v < 1 || v > 100) return false;
    *opt_out = v;
    return true;
}

static void put_str(char *buf, size_t len, const char *s) {
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++) buf[i] = s[i];
    if (len) buf[i] = 0;
}

static size_t put_uint(char *buf, size_t len, uint64_t v) {
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    size_t i = 0;
    while (n > 0 && i + 1 < len) buf[i++] = tmp[--n];
    if (len) buf[i] = 0;
    return i;
}

void _hpm_ccow_mode_name(const ccow_mode_t *m, uint32_t t_pct, char *buf, size_t len) {
    size_t at = 0;
    if (m->opt == CCOW_OPT_OFF || m->opt < 1) { put_str(buf, len, "off"); return; }
    if (m->opt == CCOW_OPT_ALL) put_str(buf, len, "all");
    else if (m->opt == CCOW_OPT_HISTORY) put_str(buf, len, "history");
    else {
        put_str(buf, len, m->opt == CCOW_OPT_ADAPTIVE ? "adaptive T=" : "T=");
        at = strlen(buf);
        put_uint(buf + at, len - at, m->opt == CCOW_OPT_ADAPTIVE ? t_pct : (uint64_t)m->opt);
    }
    at = strlen(buf);
    if (m->rate_mib_s > 0 && at + 8 < len) {
        put_str(buf + at, len - at, " rate=");
        at = strlen(buf);
        put_uint(buf + at, len - at, (uint64_t)m->rate_mib_s);
    }
}

static const char *const mech_names[CCOW_MECH_N] = {"swap", "collapse", "prefault"};

const char *_hpm_ccow_mech_name(ccow_mech_t m) { return m < CCOW_MECH_N ? mech_names[m] : "?"; }

bool _hpm_ccow_parse_mech(const char *s, ccow_mech_t *out) {
    for (int i = 0; s && i < CCOW_MECH_N; i++)
        if (!strcmp(s, mech_names[i])) { *out = (ccow_mech_t)i; return true; }
    return false;
}

bool _hpm_ccow_should_precopy(long opt, uint32_t t_pct, uint32_t excl_pages, uint32_t present_pages) {
    if (opt == CCOW_OPT_OFF || opt < 1 || present_pages == 0 || excl_pages >= present_pages) return false;
    if (opt == CCOW_OPT_ALL) return true;
    if (opt == CCOW_OPT_HISTORY) return false;   /* chosen by history, not by coverage */
    uint32_t t = opt == CCOW_OPT_ADAPTIVE ? t_pct : (uint32_t)opt;
    return (uint64_t)excl_pages * 100 >= (uint64_t)t * present_pages;
}

void _hpm_ccow_bucket_init(ccow_bucket_t *b, long rate_mib_s, uint64_t now_ns) {
    /* Burst of 50 ms of the rate, at least one region, so a throttled
     * pre-copy spreads evenly instead of copying in big gulps. */
    double rate_bytes_s = (double)rate_mib_s * 1048576.0;
    b->burst_bytes = rate_bytes_s * 0.05;
    if (b->burst_bytes < (double)HPM_HP_BYTES) b->burst_bytes = (double)HPM_HP_BYTES;
    b->tokens_bytes = b->burst_bytes;
    b->last_ns = now_ns;
}

uint64_t _hpm_ccow_bucket_take(ccow_bucket_t *b, long rate_mib_s, double bytes, uint64_t now_ns) {
    if (rate_mib_s <= 0) return 0;
    double rate_bytes_ns = (double)rate_mib_s * 1048576.0 / 1e9;
    if (now_ns > b->last_ns) {
        b->tokens_bytes += (double)(now_ns - b->last_ns) * rate_bytes_ns;
        if (b->tokens_bytes > b->burst_bytes) b->tokens_bytes = b->burst_bytes;
        b->last_ns = now_ns;
    }
    if (b->tokens_bytes >= bytes) { b->tokens_bytes -= bytes; return 0; }
    return (uint64_t)((bytes - b->tokens_bytes) / rate_bytes_ns) + 1;
}

void _hpm_ccow_adapt_note(ccow_adapt_t *a, uint32_t at_cross_pct, uint32_t final_pct) {
    if (final_pct > 100) final_pct = 100;
    if (at_cross_pct > final_pct) at_cross_pct = final_pct;
    a->useful_pct_sum += (double)(final_pct - at_cross_pct);
    a->wasted_pct_sum += (double)(100 - final_pct);
    a->n_crossed++;
}

uint32_t _hpm_ccow_adapt_next(const ccow_adapt_t *a, uint32_t t_pct) {
    if (a->n_crossed == 0) return t_pct;
    if (a->wasted_pct_sum > a->useful_pct_sum) t_pct += 5;
    else if (a->useful_pct_sum > 2.0 * a->wasted_pct_sum) t_pct = t_pct >= 5 ? t_pct - 5 : 0;
    if (t_pct < 30) t_pct = 30;
    if (t_pct > 95) t_pct = 95;
    return t_pct;
}

double _hpm_ccow_adapt_useful_share(const ccow_adapt_t *a) {
    double tot = a->useful_pct_sum + a->wasted_pct_sum;
    return a->n_crossed && tot > 0 ? a->useful_pct_sum / tot : 1.0;
}

uint8_t _hpm_ccow_history_next(const ccow_hist_t *h, int observed_pct) {
    if (observed_pct > 100) observed_pct = 100;
    if (observed_pct < 0) return (uint8_t)(h->written_pct - h->written_pct / 8);
    if (h->periods == 0) return (uint8_t)observed_pct;
    /* Mostly the last period: write sets move slowly, but they do move. */
    return (uint8_t)(((unsigned)h->written_pct + 3u * (unsigned)observed_pct + 2u) / 4u);
}

bool _hpm_ccow_history_dense(const ccow_hist_t *h) {
    return h->periods > 0 && h->written_pct >= CCOW_HISTORY_DENSE_PCT;
}

ccow_hist_t *_hpm_ccow_history_slot(ccow_hist_t *table, size_t cap_slots, uintptr_t addr) {
    if (!table || cap_slots == 0 || addr == 0) return NULL;
    size_t mask = cap_slots - 1, i = (size_t)((addr >> 21) * 0x9E3779B97F4A7C15ull >> 7) & mask;
    for (size_t probe = 0; probe < cap_slots; probe++, i = (i + 1) & mask) {
        if (table[i].addr == addr) return &table[i];
        if (table[i].addr == 0) {
            table[i] = (ccow_hist_t){.addr = addr};
            return &table[i];
        }
    }
    return NULL;
}
