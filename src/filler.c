/* filler.c: the sets of partial hugepages and the 512-bit page bitmaps.
 *
 * A partial hugepage (some pages used, some free) sits in exactly one of
 * three sets: SLAB (only small-object slabs), OTHER (only medium and large
 * spans) or HYBRID (both). Inside a set, hugepages are binned by their
 * longest free run of pages, with a bitmap of non-empty bins, so "the
 * hugepage with the smallest longest-free-run that still fits n pages" -
 * the most used one that fits, Temeraire's fill-before-break rule - is
 * found in O(1) (at most 8 word scans). Invariant: hp->bin_linked iff hp is
 * in bins[hp->longest_free_pages] of sets[hp->set]. */
#include "internal.h"

/* ---- bitmaps of 512 pages ---- */

void _hpm_bits_set_range(uint64_t bits[8], unsigned from, unsigned n, bool value) {
    while (n > 0) {
        unsigned w = from >> 6, b = from & 63, take = 64 - b < n ? 64 - b : n;
        uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
        if (value) bits[w] |= mask; else bits[w] &= ~mask;
        from += take;
        n -= take;
    }
}

unsigned _hpm_bits_count_range(const uint64_t bits[8], unsigned from, unsigned n) {
    unsigned count = 0;
    while (n > 0) {
        unsigned w = from >> 6, b = from & 63, take = 64 - b < n ? 64 - b : n;
        uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
        count += (unsigned)__builtin_popcountll(bits[w] & mask);
        from += take;
        n -= take;
    }
    return count;
}

bool _hpm_bits_any_range(const uint64_t bits[8], unsigned from, unsigned n) {
    while (n > 0) {
        unsigned w = from >> 6, b = from & 63, take = 64 - b < n ? 64 - b : n;
        uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
        if (bits[w] & mask) return true;
        from += take;
        n -= take;
    }
    return false;
}

/* Length of the run of set bits starting at i (i must be set). */
static unsigned run_from(const uint64_t bits[8], unsigned i) {
    unsigned start = i;
    while (i < 512) {
        uint64_t w = ~bits[i >> 6] >> (i & 63);       /* zeros where free */
        if (w == 0) { i = (i | 63) + 1; continue; }   /* all free to the word end */
        i += (unsigned)__builtin_ctzll(w);
        break;
    }
    return (i > 512 ? 512 : i) - start;
}

/* Longest run of set bits, and where the first such run starts. Word at a
 * time: runs inside a word are found run by run, runs across words are
 * carried from one word to the next. */
unsigned _hpm_bits_longest_run(const uint64_t bits[8], unsigned *start) {
    unsigned best = 0, best_at = 0, run = 0, run_at = 0;
    for (unsigned i = 0; i < 8; i++) {
        uint64_t w = bits[i];
        unsigned base = i * 64, pos = 0;
        while (pos < 64) {
            uint64_t rest = w >> pos;
            if (rest & 1) {   /* a run continues or starts at base + pos */
                unsigned len = ~rest ? (unsigned)__builtin_ctzll(~rest) : 64 - pos;
                if (run == 0) run_at = base + pos;
                run += len;
                pos += len;
                if (pos < 64) {   /* it ends inside this word */
                    if (run > best) { best = run; best_at = run_at; }
                    run = 0;
                }
            } else {
                if (run > best) { best = run; best_at = run_at; }
                run = 0;
                if (!rest) break;
                pos += (unsigned)__builtin_ctzll(rest);
            }
        }
    }
    if (run > best) { best = run; best_at = run_at; }
    if (start) *start = best_at;
    return best;
}

/* The run of set bits that contains [first, first+n) (all set). */
unsigned _hpm_bits_run_around(const uint64_t bits[8], unsigned first, unsigned n, unsigned *start) {
    unsigned lo = first, hi = first + n;
    while (lo > 0 && ((bits[(lo - 1) >> 6] >> ((lo - 1) & 63)) & 1)) {
        if ((lo & 63) == 0 && lo >= 64 && bits[(lo - 1) >> 6] == ~0ull) { lo -= 64; continue; }
        lo--;
    }
    if (hi < 512) hi += run_from(bits, hi) * ((bits[hi >> 6] >> (hi & 63)) & 1);
    *start = lo;
    return hi - lo;
}

/* First run of at least n set bits starting at or after from; -1 if none.
 * Run by run, as in _hpm_bits_longest_run. */
int _hpm_bits_find_run(const uint64_t bits[8], unsigned n, unsigned from) {
    unsigned run = 0, run_at = 0;
    for (unsigned i = from >> 6; i < 8; i++) {
        uint64_t w = bits[i];
        unsigned base = i * 64, pos = i == (from >> 6) ? (from & 63) : 0;
        while (pos < 64) {
            uint64_t rest = w >> pos;
            if (rest & 1) {
                unsigned len = ~rest ? (unsigned)__builtin_ctzll(~rest) : 64 - pos;
                if (run == 0) run_at = base + pos;
                run += len;
                if (run >= n) return (int)run_at;
                pos += len;
                if (pos < 64) run = 0;
            } else {
                run = 0;
                if (!rest) break;
                pos += (unsigned)__builtin_ctzll(rest);
            }
        }
    }
    return -1;
}

/* ---- the sets ---- */

static int hp_set_of(const hpm_hp_t *hp) {
    bool slab = hp->slab_pages > 0, other = hp->used_pages > hp->slab_pages;
    if (slab && other) return SET_HYBRID;
    return slab ? SET_SLAB : SET_OTHER;
}

void _hpm_filler_insert(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    int set = hp_set_of(hp);
    unsigned bin = hp->longest_free_pages;
    hp->set = (uint8_t)set;
    if (set == SET_HYBRID) ph->hybrid_count++;
    ph->sets[set].count++;
    if (bin == 0 || bin >= HPM_BINS) { hp->bin_linked = 0; return; }   /* full: counted, not binned */
    hpm_filler_set_t *s = &ph->sets[set];
    hp->prev = NULL;
    hp->next = s->bins[bin];
    if (hp->next) hp->next->prev = hp;
    s->bins[bin] = hp;
    s->nonempty[bin >> 6] |= 1ull << (bin & 63);
    hp->bin_linked = 1;
}

void _hpm_filler_remove(hpm_pageheap_t *ph, hpm_hp_t *hp) {
    if (hp->set == SET_NONE) return;
    hpm_filler_set_t *s = &ph->sets[hp->set];
    if (hp->set == SET_HYBRID) ph->hybrid_count--;
    s->count--;
    if (hp->bin_linked) {
        unsigned bin = hp->longest_free_pages;
        if (hp->prev) hp->prev->next = hp->next; else s->bins[bin] = hp->next;
        if (hp->next) hp->next->prev = hp->prev;
        if (!s->bins[bin]) s->nonempty[bin >> 6] &= ~(1ull << (bin & 63));
    }
    hp->next = hp->prev = NULL;
    hp->bin_linked = 0;
    hp->set = SET_NONE;
}

hpm_hp_t *_hpm_filler_find(hpm_pageheap_t *ph, int set, size_t n_pages) {
    if (n_pages == 0 || n_pages >= HPM_BINS) return NULL;
    hpm_filler_set_t *s = &ph->sets[set];
    unsigned bin = (unsigned)n_pages;
    for (unsigned w = bin >> 6; w < HPM_BINS / 64; w++) {
        uint64_t bits = s->nonempty[w];
        if (w == bin >> 6) bits &= ~0ull << (bin & 63);
        if (bits) return s->bins[w * 64 + (unsigned)__builtin_ctzll(bits)];
    }
    return NULL;
}
