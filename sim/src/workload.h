/* workload.h: what the workload generators share: a context that issues
 * operations through the driver with fresh IDs (never reused, so a
 * recorded trace replays unambiguously), a deterministic random number
 * generator, and growable ID arrays. */
#ifndef HPMSIM_WORKLOAD_H
#define HPMSIM_WORKLOAD_H
#include "hpmsim.h"

typedef struct {
    sim_t *sim;
    sim_driver_t *drv;
    uint32_t next_id;
    uint64_t rng;
    char *err;
    size_t err_len;
    int error;          /* set when an op was invalid or memory ran out */
} wctx_t;

typedef struct {
    uint32_t *v;
    size_t n, cap;
} idvec_t;

static inline uint64_t w_rand(wctx_t *w) {   /* xorshift64* */
    w->rng ^= w->rng >> 12; w->rng ^= w->rng << 25; w->rng ^= w->rng >> 27;
    return w->rng * 0x2545f4914f6cdd1dull;
}
static inline uint64_t w_below(wctx_t *w, uint64_t n) { return n ? w_rand(w) % n : 0; }

/* Each returns 1 on success, 0 on an allocation failure. */
int w_alloc(wctx_t *w, unsigned order, enum sim_mt type, uint32_t *id, uint32_t *pfn);
int w_huge(wctx_t *w, uint32_t *id);
void w_free(wctx_t *w, uint32_t id);
void w_free_rcu(wctx_t *w, uint32_t id);
void w_tick(wctx_t *w, uint64_t n);
void w_kswapd_compact(wctx_t *w);
uint64_t w_free_pages(const wctx_t *w);

int idvec_push(wctx_t *w, idvec_t *v, uint32_t id);
uint32_t idvec_take(idvec_t *v, size_t i);   /* swap-remove */
void idvec_free(idvec_t *v);

int wl_fragmenter(wctx_t *w, const sim_workload_t *cfg);
int wl_server(wctx_t *w, const sim_workload_t *cfg);
uint64_t wl_fragmenter_ops_estimate(const sim_config_t *cfg, const sim_workload_t *w);
#endif
