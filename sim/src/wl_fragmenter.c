/* wl_fragmenter.c: the paper's fragmentation recipe (Illuminator's
 * fragmentation-script), for R rounds:
 *   1. a kernel module allocates order-0 UNMOVABLE pages (kernel_pct of the
 *      free memory), then frees all but the last `keep` of them in each
 *      pageblock; the kept pages stay allocated for good (the module
 *      leaks them, as the original does);
 *   2. a user program touches memory until it is full: each 2 MiB region
 *      is one transparent-huge-page fault (a huge-page request with direct
 *      compaction) and falls back to 512 order-0 MOVABLE pages when that
 *      fails; each region also takes one UNMOVABLE page-table page (the
 *      PTE page, or the one THP deposits);
 *   3. the program exits and frees everything it had.
 * Hybrid pageblocks and huge-page success are sampled throughout. */
#include <stdlib.h>
#include "workload.h"

uint64_t wl_fragmenter_ops_estimate(const sim_config_t *cfg, const sim_workload_t *w) {
    uint64_t frames = cfg->mem_mib * 256, kernel = frames * w->kernel_pct / 100;
    return (2 * kernel + 2 * frames) * (w->rounds ? w->rounds : 1);
}

static int kernel_module(wctx_t *w, const sim_workload_t *c, uint32_t *ids, uint32_t *pfns, uint32_t *per_block) {
    uint64_t target = w_free_pages(w) * c->kernel_pct / 100, n = 0;
    for (; n < target; n++) {
        if (!w_alloc(w, 0, SIM_UNMOVABLE, &ids[n], &pfns[n])) break;
        per_block[pfns[n] / SIM_PAGEBLOCK_PAGES]++;
    }
    for (uint64_t i = 0; i < n; i++) {
        uint32_t b = pfns[i] / SIM_PAGEBLOCK_PAGES;
        if (per_block[b] > c->keep_per_block) {
            w_free(w, ids[i]);
            per_block[b]--;
        }
    }
    for (uint64_t i = 0; i < n; i++) per_block[pfns[i] / SIM_PAGEBLOCK_PAGES] = 0;
    return w->error ? -1 : 0;
}

static int user_program(wctx_t *w, idvec_t *mine) {
    for (;;) {
        uint32_t id;
        if (!w_alloc(w, 0, SIM_UNMOVABLE, &id, NULL)) break;   /* page table */
        if (idvec_push(w, mine, id)) return -1;
        if (w_huge(w, &id)) {
            if (idvec_push(w, mine, id)) return -1;
            continue;
        }
        int full = 0;
        for (int i = 0; i < 512 && !full; i++) {
            if (!w_alloc(w, 0, SIM_MOVABLE, &id, NULL)) full = 1;
            else if (idvec_push(w, mine, id)) return -1;
        }
        if (full || w->error) break;
    }
    for (size_t i = 0; i < mine->n; i++) w_free(w, mine->v[i]);
    mine->n = 0;
    return w->error ? -1 : 0;
}

int wl_fragmenter(wctx_t *w, const sim_workload_t *c) {
    sim_stats_t st;
    sim_get_stats(w->sim, &st);
    uint32_t *ids = malloc(st.total_pages * sizeof *ids), *pfns = malloc(st.total_pages * sizeof *pfns);
    uint32_t *per_block = calloc(st.nr_blocks, sizeof *per_block);
    idvec_t mine = {0};
    int r = 0;
    if (!ids || !pfns || !per_block) { snprintf(w->err, w->err_len, "out of memory"); r = -1; }
    for (uint32_t round = 0; !r && round < c->rounds; round++) {
        r = kernel_module(w, c, ids, pfns, per_block);
        if (!r) r = user_program(w, &mine);
    }
    idvec_free(&mine);
    free(ids); free(pfns); free(per_block);
    return r;
}
