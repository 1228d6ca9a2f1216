/* test_ccow_stats.h: the CCoW tests' view of the live counters. It reads
 * the ccow_* fields of _hpm_stats with atomic loads, as CCoW's thread
 * writes them, instead of hpm_stats_get's plain memcpy of the whole
 * struct, so that polling while the thread works is race-free (TSan).
 * Fills only the ccow_* fields of *s. */
#ifndef HPM_TEST_CCOW_STATS_H
#define HPM_TEST_CCOW_STATS_H
#include <string.h>
#include "hooks.h"

static inline void ccow_stats_read(hpm_stats_t *s) {
    memset(s, 0, sizeof *s);
    hpm_stats_t *live = _hpm_stats;
    s->ccow_forks = __atomic_load_n(&live->ccow_forks, __ATOMIC_ACQUIRE);
    s->ccow_regions_precopied = __atomic_load_n(&live->ccow_regions_precopied, __ATOMIC_ACQUIRE);
    s->ccow_bytes_precopied = __atomic_load_n(&live->ccow_bytes_precopied, __ATOMIC_ACQUIRE);
    s->ccow_recover_us = __atomic_load_n(&live->ccow_recover_us, __ATOMIC_ACQUIRE);
    s->ccow_active = __atomic_load_n(&live->ccow_active, __ATOMIC_ACQUIRE);
    for (size_t i = 0; i + 1 < sizeof s->ccow_state; i++)
        s->ccow_state[i] = __atomic_load_n(&live->ccow_state[i], __ATOMIC_RELAXED);
}
#endif
