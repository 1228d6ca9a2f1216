/* meta.c: out-of-band metadata memory. Metadata (hugepage descriptors, the
 * page map, span structs, heaps) never lives in the arena, so user
 * hugepages hold only user data. Each metadata region is a reserved range
 * committed on demand; regions past their first 4 MiB ask for THP (and
 * under THP "always" the first 4 MiB, and regions kept on 4 KiB pages,
 * refuse it).
 * _hpm_meta_alloc is a bump allocator for small never-freed objects, over
 * a chain of regions: the first takes 64 MiB of address space (less under
 * RLIMIT_AS: a sixteenth of the room), and a new one is reserved when it
 * is full, so metadata is limited by memory, not by a fixed reservation.
 * Objects of 128 bytes or more start on a 128-byte boundary: Intel's L2
 * prefetcher fetches lines in aligned pairs, and an object that shared a
 * pair with another thread's hot object would trade lines with it
 * (docs/allocator.md, "A span record is two cache lines, one line pair").
 * Lock order: meta_lock is the innermost allocator lock (the pageheap's
 * span records come from here); fork takes it last.
 * Invariant: nothing here calls malloc; committed <= limit. */
#include <errno.h>
#include <string.h>
#include "internal.h"

#define META_GROW_BYTES ((size_t)64 * 1024)
#define META_THP_FROM_BYTES ((size_t)4 << 20)
#define META_MISC_BYTES ((size_t)64 << 20)
#define META_MISC_MIN_BYTES ((size_t)1 << 20)

static const hpm_os_t *meta_os;
static bool meta_thp_always;   /* the system's THP mode is "always": small parts refuse huge pages themselves */
static hpm_meta_region_t meta_misc;
static pthread_mutex_t meta_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t meta_committed_total;

int _hpm_meta_region_init(hpm_meta_region_t *r, size_t reserve_bytes) {
    void *p = meta_os->reserve(reserve_bytes, HPM_HP_BYTES);
    if (!p) return ENOMEM;
    r->base = (uintptr_t)p;
    r->committed = r->used = 0;
    r->limit = reserve_bytes;
    r->small_pages = false;
    return 0;
}

int _hpm_meta_region_ensure(hpm_meta_region_t *r, size_t bytes_from_base) {
    if (bytes_from_base <= r->committed) return 0;
    if (bytes_from_base > r->limit) return ENOMEM;
    size_t want = (bytes_from_base + META_GROW_BYTES - 1) & ~(META_GROW_BYTES - 1);
    if (want > r->limit) want = r->limit;
    int e = meta_os->commit((void *)(r->base + r->committed), want - r->committed);
    if (e) return e;
    if (meta_thp_always) {   /* what stays on 4 KiB pages must say so, or the kernel backs it huge */
        size_t small_end = r->small_pages ? want : want < META_THP_FROM_BYTES ? want : META_THP_FROM_BYTES;
        if (small_end > r->committed) meta_os->thp_advise((void *)(r->base + r->committed), small_end - r->committed, false);
    }
    if (want > META_THP_FROM_BYTES && !r->small_pages) {
        size_t from = r->committed > META_THP_FROM_BYTES ? r->committed : META_THP_FROM_BYTES;
        meta_os->thp_advise((void *)(r->base + from), want - from, true);
    }
    __atomic_add_fetch(&meta_committed_total, want - r->committed, __ATOMIC_RELAXED);
    r->committed = want;
    return 0;
}

size_t _hpm_meta_committed_bytes(void) { return __atomic_load_n(&meta_committed_total, __ATOMIC_RELAXED); }

/* A new misc region for at least min_bytes (the old one is left as it is:
 * its objects live on). */
static int misc_region_new(size_t min_bytes) {
    size_t room = _hpm_as_room_bytes(meta_os), want = META_MISC_BYTES, got = 0;
    if (room != SIZE_MAX && want > room / 16) want = room / 16;
    if (want < META_MISC_MIN_BYTES) want = META_MISC_MIN_BYTES;
    min_bytes = (min_bytes + HPM_HP_BYTES - 1) & ~(HPM_HP_BYTES - 1);
    if (want < min_bytes) want = min_bytes;
    void *p = _hpm_reserve_sized(meta_os, want, min_bytes, HPM_HP_BYTES, &got);
    if (!p) return ENOMEM;
    meta_misc = (hpm_meta_region_t){.base = (uintptr_t)p, .limit = got};
    return 0;
}

int _hpm_meta_init(const hpm_os_t *os) {
    meta_os = os;
    meta_thp_always = hpm_os_thp_always(os);
    _hpm_lock_rank(&meta_lock, HPM_LOCK_META);
    return misc_region_new(META_MISC_MIN_BYTES);   /* on failure, the first allocation tries again */
}

void *_hpm_meta_alloc(size_t size_bytes) {
    if (!meta_os) return NULL;   /* asked for during init, before metadata is set up */
    size_bytes = (size_bytes + 63) & ~(size_t)63;
    size_t align = size_bytes >= 128 ? 128 : 64;   /* whole line pairs: see the top */
    pthread_mutex_lock(&meta_lock);
    void *p = NULL;
    size_t at = (meta_misc.used + align - 1) & ~(align - 1);
    if (at + size_bytes > meta_misc.limit) {
        if (misc_region_new(size_bytes) != 0) {
            pthread_mutex_unlock(&meta_lock);
            return NULL;
        }
        at = 0;   /* a new region starts hugepage-aligned */
    }
    if (_hpm_meta_region_ensure(&meta_misc, at + size_bytes) == 0) {
        p = (void *)(meta_misc.base + at);
        meta_misc.used = at + size_bytes;
    }
    pthread_mutex_unlock(&meta_lock);
    return p;   /* fresh committed memory reads as zero */
}

void _hpm_meta_fork_prepare(void) { pthread_mutex_lock(&meta_lock); }
void _hpm_meta_fork_parent(void) { pthread_mutex_unlock(&meta_lock); }
void _hpm_meta_fork_child(void) {
    pthread_mutex_unlock(&meta_lock);   /* let go first: see init.c fork_child */
    pthread_mutex_init(&meta_lock, NULL);
}
