/* fake_pageheap.h: a private pageheap for placement tests (unit tests that
 * include internal.h). Its metadata and address-space reservations are
 * real; the commits, THP advice and releases of its heap are faked, so
 * nothing of it is ever touched. Also: the record slot of an address of
 * that pageheap. */
#ifndef HPM_FAKE_PAGEHEAP_H
#define HPM_FAKE_PAGEHEAP_H
#include "internal.h"

static int fph_commit(void *a, size_t n) { (void)a; (void)n; return 0; }
static int fph_advise(void *a, size_t n, bool on) { (void)a; (void)n; (void)on; return 0; }
static int fph_release(void *a, size_t n) { (void)a; (void)n; return 0; }

/* ph set up over 1 GiB of reserved address space on THP pages; 0 or an errno. */
static inline int fph_init(hpm_pageheap_t *ph) {
    static hpm_os_t os;
    os = _hpm_os_linux;
    os.commit = fph_commit;
    os.thp_advise = fph_advise;
    os.release = fph_release;
    return _hpm_ph_init(ph, &os, (size_t)1 << 30, PAGES_THP);
}

/* The record slot of the granule holding addr, an address of ph's arenas. */
static inline hpm_span_t *fph_slot_of(hpm_pageheap_t *ph, uintptr_t addr) {
    hpm_arena_t *a = _hpm_arena_of_addr(ph, addr);
    return a ? hpm_arena_slot(a, addr) : NULL;
}
#endif
