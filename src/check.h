/* check.h: the invariant checkers of check.c (see debug.h for the tier
 * that calls them). Each returns true when the structure is sound, else
 * writes the first broken invariant into why (HPM_WHY_BYTES) and returns
 * false. Included by internal.h after the types. */
#ifndef HPM_CHECK_H
#define HPM_CHECK_H
/* One hugepage record: bitmaps, counts, state, set, and its page map. Pageheap lock held. */
HPM_INTERNAL bool _hpm_check_hugepage(const hpm_pageheap_t *ph, const hpm_hp_t *hp, char *why);
/* Every hugepage, the counts, the cache, released and filler lists. Pageheap lock held. */
HPM_INTERNAL bool _hpm_check_pageheap(const hpm_pageheap_t *ph, char *why);
/* The same, on every call while the arena is small, on every k-th call
 * (k = top_hp / 16) once it is large: for the checks after each span operation. */
HPM_INTERNAL bool _hpm_check_pageheap_amortized(const hpm_pageheap_t *ph, char *why);
/* A live span of the process pageheap: its page map; for a slab, its free
 * list, cookies and block counts. The owner thread only. */
HPM_INTERNAL bool _hpm_check_span(const hpm_span_t *s, char *why);
/* A heap's current slabs, avail and full lists and span cache. Its own thread only. */
HPM_INTERNAL bool _hpm_check_heap(const hpm_heap_t *h, char *why);
/* The process pageheap (takes its lock) and the calling thread's heap. */
HPM_INTERNAL bool _hpm_check_all(char *why);
#endif
