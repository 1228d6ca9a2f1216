/* filler.c: the sets of partial hugepages (the page bitmaps are in bits.h).
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

/* Homes (hugepage.c): a hugepage that another live thread's medium spans
 * fill is passed over, so that each thread's spans lie in hugepages of
 * its own. The bins are walked in the same order as _hpm_filler_find's
 * (the most used hugepage that fits first), at most max_looks hugepages. */
hpm_hp_t *_hpm_filler_find_home(hpm_pageheap_t *ph, int set, size_t n_pages, const hpm_heap_t *h, unsigned max_looks) {
    if (n_pages == 0 || n_pages >= HPM_BINS) return NULL;
    hpm_filler_set_t *s = &ph->sets[set];
    unsigned bin = (unsigned)n_pages, looks = 0;
    for (unsigned w = bin >> 6; w < HPM_BINS / 64; w++) {
        uint64_t bits = s->nonempty[w];
        if (w == bin >> 6) bits &= ~0ull << (bin & 63);
        for (; bits; bits &= bits - 1)
            for (hpm_hp_t *hp = s->bins[w * 64 + (unsigned)__builtin_ctzll(bits)]; hp; hp = hp->next) {
                if (hpm_home_open_to(hp->home, h)) return hp;
                if (++looks >= max_looks) return NULL;
            }
    }
    return NULL;
}

/* Homes (hugepage.c): before a thread opens an empty hugepage, one that
 * is nearly empty. The first few hugepages of each set's top bin (the
 * longest free run, so nearly the emptiest of the set) that fit n_pages,
 * are open to h and have at most max_used_pages in use: the least used of
 * them, or NULL. (Open to h: another live thread's new home is nearly
 * empty too, and must stay its own.) */
#define SPARSE_LOOKS 8
hpm_hp_t *_hpm_filler_find_sparse(hpm_pageheap_t *ph, size_t n_pages, const struct hpm_heap_s *h, unsigned max_used_pages) {
    hpm_hp_t *best = NULL;
    for (int set = 0; set < SET_COUNT; set++) {
        hpm_filler_set_t *s = &ph->sets[set];
        unsigned w = HPM_BINS / 64;
        while (w > 0 && !s->nonempty[w - 1]) w--;
        if (w == 0) continue;
        unsigned bin = (w - 1) * 64 + 63 - (unsigned)__builtin_clzll(s->nonempty[w - 1]), looks = 0;
        if (bin < n_pages) continue;
        for (hpm_hp_t *hp = s->bins[bin]; hp && looks < SPARSE_LOOKS; hp = hp->next, looks++)
            if (hp->used_pages <= max_used_pages && hpm_home_open_to(hp->home, h) &&
                (!best || hp->used_pages < best->used_pages))
                best = hp;
    }
    return best;
}
