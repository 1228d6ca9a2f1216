/* wl_fragmenter.c: Illuminator's fragmentation-script (run.sh), R rounds
 * (default 25, as run.sh's loop) of:
 *   1. alloc-module.ko iteration=2: a kernel thread kmallocs its page list
 *      (8 bytes a page: one UNMOVABLE block of get_order(size)) and a
 *      10000-entry counter array (40000 bytes: order 4, never freed, as the
 *      module leaks it), allocates order-0 GFP_KERNEL (UNMOVABLE) pages,
 *      300 MiB on the paper's 24 GiB (kernel_bp of memory, default 1.22%),
 *      then walks them in allocation order and frees each page whose
 *      pageblock still holds more than `keep` (2) of them, so the last two
 *      of each block stay for good; then it frees the page list;
 *   2. ./a.out 0: a user program touches memory until it is full (the
 *      original runs into the OOM killer): each 2 MiB region is one
 *      transparent-huge-page fault (a huge-page request with direct
 *      compaction) falling back to 512 order-0 MOVABLE pages, plus one
 *      UNMOVABLE page-table page; then it dies and frees everything;
 * and after the rounds (cache_fill) step 2 of run.sh, cache.sh: reading
 * files fills the page cache, MOVABLE file pages (1 MiB files assumed)
 * with one RECLAIMABLE inode/dentry slab page per 4 files, until free
 * memory reaches the high watermark. Hybrid pageblocks and huge-page
 * success are sampled throughout. The fragmenter draws no random numbers. */
#include <stdlib.h>
#include "workload.h"

#define FILE_PAGES 256u           /* cache.sh: 1 MiB files */
#define FILES_PER_SLAB_PAGE 4u    /* ~1 KiB of inode + dentry per file */

static uint64_t module_pages(const sim_config_t *cfg, const sim_workload_t *w) {
    return cfg->mem_mib * 256 * w->kernel_bp / 10000;
}

uint64_t wl_fragmenter_ops_estimate(const sim_config_t *cfg, const sim_workload_t *w) {
    uint64_t frames = cfg->mem_mib * 256;
    return (2 * module_pages(cfg, w) + 2 * frames) * (w->rounds ? w->rounds : 1) + frames;
}

/* get_order() of a kmalloc_large size, in pages */
static unsigned order_for_bytes(uint64_t bytes) {
    unsigned o = 0;
    while (o < SIM_MAX_ORDER - 1 && (4096ull << o) < bytes) o++;
    return o;
}

static int kernel_module(wctx_t *w, const sim_workload_t *c, uint64_t npages, uint32_t *ids, uint32_t *pfns,
                         uint32_t *per_block) {
    uint32_t plist, flist;
    if (!w_alloc(w, order_for_bytes(npages * 8), SIM_UNMOVABLE, &plist, NULL)) return 0;
    w_alloc(w, order_for_bytes(10000 * 4), SIM_UNMOVABLE, &flist, NULL);   /* leaked */
    uint64_t n = 0;
    for (; n < npages; n++) {
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
    w_free(w, plist);
    return w->error ? -1 : 0;
}

/* One 2 MiB region: its page-table page, then a THP or 512 base pages.
 * Returns 1 while memory lasts, 0 when full, -1 on an error. */
static int touch_region(wctx_t *w, idvec_t *mine) {
    uint32_t id;
    if (!w_alloc(w, 0, SIM_UNMOVABLE, &id, NULL)) return 0;
    if (idvec_push(w, mine, id)) return -1;
    if (w_huge(w, &id)) return idvec_push(w, mine, id) ? -1 : 1;
    for (int i = 0; i < 512; i++) {
        if (!w_alloc(w, 0, SIM_MOVABLE, &id, NULL)) return 0;
        if (idvec_push(w, mine, id)) return -1;
    }
    return w->error ? -1 : 1;
}

static int user_program(wctx_t *w, idvec_t *mine) {
    int r;
    while ((r = touch_region(w, mine)) > 0) {}
    for (size_t i = 0; i < mine->n; i++) w_free(w, mine->v[i]);
    mine->n = 0;
    return r < 0 || w->error ? -1 : 0;
}

static void cache_fill(wctx_t *w, uint64_t high_wmark) {
    uint32_t id;
    for (uint64_t files = 0; w_free_pages(w) > high_wmark && !w->error; files++) {
        if (files % FILES_PER_SLAB_PAGE == 0 && !w_alloc(w, 0, SIM_RECLAIMABLE, &id, NULL)) return;
        for (unsigned i = 0; i < FILE_PAGES && w_free_pages(w) > high_wmark; i++)
            if (!w_alloc(w, 0, SIM_MOVABLE, &id, NULL)) return;
    }
}

int wl_fragmenter(wctx_t *w, const sim_workload_t *c) {
    sim_stats_t st;
    sim_get_stats(w->sim, &st);
    sim_config_t cfg = {.mem_mib = st.total_pages / 256};
    uint64_t npages = module_pages(&cfg, c), wmin, wlow, whigh;
    sim_watermarks(w->sim, &wmin, &wlow, &whigh);
    uint32_t *ids = malloc((npages + 1) * sizeof *ids), *pfns = malloc((npages + 1) * sizeof *pfns);
    uint32_t *per_block = calloc(st.nr_blocks, sizeof *per_block);
    idvec_t mine = {0};
    int r = 0;
    if (!ids || !pfns || !per_block) { snprintf(w->err, w->err_len, "out of memory"); r = -1; }
    for (uint32_t round = 0; !r && round < c->rounds; round++) {
        r = kernel_module(w, c, npages, ids, pfns, per_block);
        if (!r) r = user_program(w, &mine);
    }
    if (!r && c->cache_fill) cache_fill(w, whigh);
    idvec_free(&mine);
    free(ids); free(pfns); free(per_block);
    return r || w->error ? -1 : 0;
}
