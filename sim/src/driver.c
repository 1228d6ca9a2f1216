/* driver.c: applies operations named by trace IDs to a simulator, records
 * them as a trace when asked, and samples the statistics into a time
 * series. Workloads and trace replay both go through it, so a recorded
 * trace replays to the same result.
 *
 * The ID map is an open-addressing hash table (linear probing, backward-
 * shift deletion) from a 32-bit ID to a simulator handle; it holds exactly
 * the IDs that are live (allocated and not yet freed). A free that names
 * an unbound ID (its allocation failed, e.g. in a replay under the other
 * policy) still advances the clock by one and is counted as skipped. */
#include <stdlib.h>
#include <string.h>
#include "hpmsim.h"

#define EMPTY_KEY UINT32_MAX

typedef struct {
    uint32_t *key, *val;
    uint32_t cap, len;   /* cap is a power of two */
} idmap_t;

struct sim_driver {
    sim_t *sim;
    idmap_t map;
    FILE *rec;
    uint64_t sample_every, next_sample;
    sim_series_t series;
    uint64_t skipped_frees;
};

static inline uint32_t id_hash(uint32_t id, uint32_t mask) { return (uint32_t)((id * 0x9e3779b97f4a7c15ull) >> 32) & mask; }

static int map_init(idmap_t *m, uint32_t cap) {
    m->cap = cap; m->len = 0;
    m->key = malloc((size_t)cap * sizeof(uint32_t));
    m->val = malloc((size_t)cap * sizeof(uint32_t));
    if (!m->key || !m->val) return -1;
    memset(m->key, 0xff, (size_t)cap * sizeof(uint32_t));
    return 0;
}

static uint32_t *map_find(const idmap_t *m, uint32_t id) {
    uint32_t mask = m->cap - 1;
    for (uint32_t i = id_hash(id, mask);; i = (i + 1) & mask) {
        if (m->key[i] == id) return &m->val[i];
        if (m->key[i] == EMPTY_KEY) return NULL;
    }
}

static int map_put(idmap_t *m, uint32_t id, uint32_t val);

static int map_grow(idmap_t *m) {
    idmap_t n;
    if (map_init(&n, m->cap * 2)) { free(n.key); free(n.val); return -1; }
    for (uint32_t i = 0; i < m->cap; i++)
        if (m->key[i] != EMPTY_KEY) map_put(&n, m->key[i], m->val[i]);
    free(m->key); free(m->val);
    *m = n;
    return 0;
}

static int map_put(idmap_t *m, uint32_t id, uint32_t val) {
    if ((m->len + 1) * 2 > m->cap && map_grow(m)) return -1;
    uint32_t mask = m->cap - 1, i = id_hash(id, mask);
    while (m->key[i] != EMPTY_KEY) i = (i + 1) & mask;
    m->key[i] = id; m->val[i] = val; m->len++;
    return 0;
}

static void map_del(idmap_t *m, uint32_t id) {
    uint32_t mask = m->cap - 1, i = id_hash(id, mask);
    while (m->key[i] != id) {
        if (m->key[i] == EMPTY_KEY) return;
        i = (i + 1) & mask;
    }
    /* backward-shift: pull later entries of the run into the hole */
    for (uint32_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        if (m->key[j] == EMPTY_KEY) break;
        uint32_t home = id_hash(m->key[j], mask);
        bool movable_to_i = ((j - home) & mask) >= ((j - i) & mask);
        if (movable_to_i) { m->key[i] = m->key[j]; m->val[i] = m->val[j]; i = j; }
    }
    m->key[i] = EMPTY_KEY;
    m->len--;
}

sim_driver_t *sim_driver_create(sim_t *s, uint64_t sample_every_ops, FILE *record) {
    sim_driver_t *d = calloc(1, sizeof *d);
    if (!d) return NULL;
    if (map_init(&d->map, 1u << 16)) { sim_driver_destroy(d); return NULL; }
    d->sim = s;
    d->rec = record;
    d->sample_every = sample_every_ops ? sample_every_ops : 100000;
    d->next_sample = 0;
    return d;
}

void sim_driver_destroy(sim_driver_t *d) {
    if (!d) return;
    free(d->map.key); free(d->map.val); free(d->series.v);
    free(d);
}

static void take_sample(sim_driver_t *d, const sim_stats_t *st) {
    sim_series_t *sr = &d->series;
    if (sr->n && sr->v[sr->n - 1].t_ops == st->clock_ops) return;
    if (sr->n == sr->cap) {
        size_t cap = sr->cap ? sr->cap * 2 : 256;
        sim_sample_t *v = realloc(sr->v, cap * sizeof *v);
        if (!v) return;
        sr->v = v; sr->cap = cap;
    }
    sr->v[sr->n++] = (sim_sample_t){
        .t_ops = st->clock_ops, .hybrid_blocks = st->hybrid_blocks, .kernel_blocks = st->kernel_blocks,
        .owner_mixed_blocks = st->owner_mixed_blocks,
        .free_pages = st->free_pages, .hp_requests = st->hp_requests, .hp_success = st->hp_success,
        .compact_scanned = st->compact_mig_scanned + st->compact_free_scanned,
        .compact_migrated = st->compact_migrated, .compact_failed = st->compact_failed,
        .compact_wasted = st->compact_wasted,
    };
}

static void maybe_sample(sim_driver_t *d) {
    uint64_t now = sim_now(d->sim);
    if (now < d->next_sample) return;
    sim_stats_t st;
    sim_get_stats(d->sim, &st);
    take_sample(d, &st);
    /* the first multiple past now, in one step: a `t N` of 10^15 with
     * sample_every 1 stepped 10^15 times, and near UINT64_MAX the step
     * wrapped and never ended */
    uint64_t steps = (now - d->next_sample) / d->sample_every + 1;
    d->next_sample = steps > (UINT64_MAX - d->next_sample) / d->sample_every ? UINT64_MAX
                                                                              : d->next_sample + steps * d->sample_every;
}

static int bind(sim_driver_t *d, uint32_t id, sim_handle_t h, uint32_t *pfn_out, char *err, size_t len) {
    if (h == SIM_NO_HANDLE) return 0;
    if (map_put(&d->map, id, h)) { snprintf(err, len, "out of memory for ids"); return -1; }
    if (pfn_out) *pfn_out = sim_handle_pfn(d->sim, h);
    return 1;
}

int sim_driver_apply(sim_driver_t *d, const sim_op_t *op, uint32_t *pfn_out, char *err, size_t len) {
    int r = 1;
    if ((op->kind == 'a' || op->kind == 'h') && map_find(&d->map, op->id)) {
        snprintf(err, len, "id %u is already live", op->id);
        return -1;
    }
    if (d->rec) sim_trace_write_op(d->rec, op);
    switch (op->kind) {
    case 'a': r = bind(d, op->id, sim_alloc(d->sim, op->order, (enum sim_mt)op->type), pfn_out, err, len); break;
    case 'h': r = bind(d, op->id, sim_alloc_huge(d->sim), pfn_out, err, len); break;
    case 'f': case 'r': {
        uint32_t *h = map_find(&d->map, op->id);
        if (!h) { d->skipped_frees++; sim_advance(d->sim, 1); r = 0; break; }
        sim_handle_t handle = *h;
        map_del(&d->map, op->id);
        if (op->kind == 'f') sim_free(d->sim, handle); else sim_free_rcu(d->sim, handle);
        break;
    }
    case 'c': sim_compact_all(d->sim); break;
    case 'k': sim_compact_kswapd(d->sim); break;
    case 't': sim_advance(d->sim, op->n); break;
    default: snprintf(err, len, "unknown operation '%c'", op->kind); return -1;
    }
    maybe_sample(d);
    return r;
}

void sim_driver_finish(sim_driver_t *d) {
    sim_stats_t st;
    sim_get_stats(d->sim, &st);
    take_sample(d, &st);
}

const sim_series_t *sim_driver_series(const sim_driver_t *d) { return &d->series; }
uint64_t sim_driver_skipped_frees(const sim_driver_t *d) { return d->skipped_frees; }

/* Hands the series over to the caller (the driver forgets it). */
sim_series_t sim_driver_take_series(sim_driver_t *d) {
    sim_series_t s = d->series;
    memset(&d->series, 0, sizeof d->series);
    return s;
}
