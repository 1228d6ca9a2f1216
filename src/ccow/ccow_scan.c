/* ccow_scan.c: a region's state from /proc/self/pagemap (through the
 * core's OS table): how many of its 512 pages are present, how many are
 * exclusively mapped (bit 56: copied by CoW, or never shared), and whether
 * it is one private huge page (all 512 exclusive, physically contiguous and
 * 2 MiB aligned). Without PFNs (no CAP_SYS_ADMIN) "huge" falls back to
 * "all 512 exclusive". Reads only; never touches the region. */
#include <errno.h>
#include "ccow/ccow.h"

#define PM_PRESENT (1ull << 63)
#define PM_EXCLUSIVE (1ull << 56)
#define PM_PFN_MASK ((1ull << 55) - 1)

int _hpm_ccow_scan_region(uintptr_t region, ccow_scan_t *out) {
    uint64_t e[HPM_PAGES_PER_HP];
    int err = _hpm_os->pagemap((const void *)region, HPM_PAGES_PER_HP, e);
    if (err) return err;
    uint32_t present = 0, excl = 0;
    bool contiguous = true, have_pfn = (e[0] & PM_PFN_MASK) != 0;
    uint64_t pfn0 = e[0] & PM_PFN_MASK;
    for (uint32_t i = 0; i < HPM_PAGES_PER_HP; i++) {
        if (e[i] & PM_PRESENT) present++;
        if ((e[i] & (PM_PRESENT | PM_EXCLUSIVE)) == (PM_PRESENT | PM_EXCLUSIVE)) excl++;
        if ((e[i] & PM_PFN_MASK) != pfn0 + i) contiguous = false;
    }
    out->present_pages = (uint16_t)present;
    out->excl_pages = (uint16_t)excl;
    out->huge = excl == HPM_PAGES_PER_HP && (!have_pfn || (contiguous && pfn0 % HPM_PAGES_PER_HP == 0));
    return 0;
}

int _hpm_ccow_scan_probe(void) {
    /* A page of our own stack is present and exclusive in any process
     * that can read its pagemap; a 0 there means bit 56 is not reported. */
    volatile uint64_t here = 1;
    uint64_t e;
    uintptr_t page = (uintptr_t)&here & ~(uintptr_t)(HPM_PAGE_BYTES - 1);
    int err = _hpm_os->pagemap((const void *)page, 1, &e);
    if (err) return err;
    if (!(e & PM_PRESENT) || !(e & PM_EXCLUSIVE)) return ENOTSUP;
    return 0;
}
