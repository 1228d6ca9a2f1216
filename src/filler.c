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

static inline bool bit_get(const uint64_t bits[8], unsigned i) { return (bits[i >> 6] >> (i & 63)) & 1; }

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

/* Next set bit at or after i, or 512. */
static unsigned next_set(const uint64_t bits[8], unsigned i) {
    while (i < 512) {
        uint64_t w = bits[i >> 6] >> (i & 63);
        if (w) return i + (unsigned)__builtin_ctzll(w);
        i = (i | 63) + 1;
    }
    return 512;
}

/* Longest run of set bits inside one word (iterations = number of runs). */
static unsigned word_longest_run(uint64_t w) {
    unsigned best = 0;
    while (w) {
        w >>= __builtin_ctzll(w);                       /* drop zeros below the next run */
        unsigned len = ~w ? (unsigned)__builtin_ctzll(~w) : 64;
        if (len > best) best = len;
        if (len == 64) break;
        w >>= len;
    }
    return best;
}

unsigned _hpm_bits_longest_run(const uint64_t bits[8]) {
    unsigned best = 0, run = 0;   /* run: set bits ending at the previous word's top */
    for (int i = 0; i < 8; i++) {
        uint64_t w = bits[i];
        if (w == ~0ull) { run += 64; continue; }
        unsigned low = (unsigned)__builtin_ctzll(~w);          /* ones continuing the run */
        if (run + low > best) best = run + low;
        if (w) {
            unsigned inner = word_longest_run(w);
            if (inner > best) best = inner;
        }
        run = w ? (unsigned)__builtin_clzll(~w) : 0;              /* ones at the top start a run */
    }
    return run > best ? run : best;
}

/* First run of at least n set bits starting at or after from; -1 if none. */
int _hpm_bits_find_run(const uint64_t bits[8], unsigned n, unsigned from) {
    for (unsigned i = next_set(bits, from); i + n <= 512; ) {
        unsigned r = run_from(bits, i);
        if (r >= n) return (int)i;
        i = next_set(bits, i + r);
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
