/* colored_map.c: frame colouring by physical frame number, the BPM method
 * done in user space (hpm_colored_map).
 *
 * A colour is PFN mod colour_count (option HPM_COLOR_COUNT, read after the
 * allocator has started: the first call of a process starts it, so the
 * environment's value counts). To build a range of n pages of the wanted
 * colours, we reserve a scratch pool of 4 KiB pages (MADV_NOHUGEPAGE so
 * THP cannot hand us one compound page) and walk it in steps: touch the
 * step's pages (a write of 0, so each gets a zeroed frame and stays
 * zeroed), read their frames from /proc/self/pagemap (PFNs read as 0
 * unless CAP_SYS_ADMIN), and move each suitable page with
 * mremap(MREMAP_FIXED) into its slot of a reserved destination range.
 * mremap moves page-table entries, so the frame (and so its colour) moves
 * with the page. The walk stops as soon as the range is full: it faults
 * about n x colours / wanted colours pages, plus at most one step
 * (CM_STEP_MAX_PAGES). Rejected pages are kept until the call ends, then
 * unmapped run by run, never across a page that was moved out: another
 * thread's mapping may have landed in that hole.
 * Invariant: on success every page of the returned range is present, zero
 * filled, and its PFN has a colour in the mask (checked again at the end);
 * on failure nothing is left mapped and errno plus a reason string say
 * why; only the pool pages this call still holds are ever unmapped.
 * hpm_colored_unmap gives back only what hpm_colored_map returned, whole
 * (the ranges are recorded, CM_MAX_RANGES of them; a heap block or any
 * other address is refused with EINVAL, not unmapped under its owner).
 * No malloc, no stdio: scratch arrays are mmap'd. Every system call goes
 * through the OS table (_hpm_os: sys_mmap, sys_munmap, sys_mremap,
 * sys_madvise, pagemap), so fault-injection tests reach each of them. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include "hooks.h"

#define CM_PAGE 4096ul
#define CM_PFN_MASK ((1ull << 55) - 1)
#define CM_PRESENT (1ull << 63)
#define CM_REASON_BYTES 256
#define CM_MAX_ROUNDS 8
#define CM_STEP_MAX_PAGES 512   /* pages touched and examined at once: one page of entries */
#define CM_STEP_MIN_PAGES 16
/* A page moved out of its pool: a pagemap entry never has all bits set
 * (bits 58..60 are always zero). */
#define CM_MOVED (~0ull)
#define CM_NONE (~0ull)   /* "no number here" for cm_fail */

static __thread char cm_reason[CM_REASON_BYTES];
static __thread int cm_errno;   /* errno of the last failure, kept across cleanup */

/* ---- the ranges handed out (a fork child inherits them with the memory) ----
 * Slots claimed and given up with compare-and-swap, no lock: a fork may
 * come at any point, and the child must still be able to give its ranges
 * back. A slot's base is 0 when free, CM_CLAIMED while its size is set. */
#define CM_MAX_RANGES 4096
#define CM_CLAIMED ((uintptr_t)1)
static struct { _Atomic uintptr_t base; _Atomic size_t bytes; } cm_ranges[CM_MAX_RANGES];

static bool cm_range_add(uintptr_t base, size_t bytes) {
    for (size_t i = 0; i < CM_MAX_RANGES; i++) {
        uintptr_t none = 0;
        if (atomic_load_explicit(&cm_ranges[i].base, memory_order_relaxed) != 0 ||
            !atomic_compare_exchange_strong(&cm_ranges[i].base, &none, CM_CLAIMED))
            continue;
        atomic_store_explicit(&cm_ranges[i].bytes, bytes, memory_order_relaxed);
        atomic_store_explicit(&cm_ranges[i].base, base, memory_order_release);
        return true;
    }
    return false;
}

/* Forgets [base, base + bytes) if it is a whole recorded range. */
static bool cm_range_take(uintptr_t base, size_t bytes) {
    for (size_t i = 0; i < CM_MAX_RANGES; i++) {
        uintptr_t b = base;
        if (atomic_load_explicit(&cm_ranges[i].base, memory_order_acquire) != base ||
            atomic_load_explicit(&cm_ranges[i].bytes, memory_order_relaxed) != bytes)
            continue;
        if (atomic_compare_exchange_strong(&cm_ranges[i].base, &b, 0)) return true;
    }
    return false;
}

/* ---- tiny string building (no stdio) ---- */
static size_t cm_append(size_t at, const char *s) {
    while (*s && at + 1 < CM_REASON_BYTES) cm_reason[at++] = *s++;
    cm_reason[at] = 0;
    return at;
}

static size_t cm_append_u(size_t at, unsigned long long v) {
    char tmp[24];
    int n = 0;
    do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
    char out[24];
    for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
    out[n] = 0;
    return cm_append(at, out);
}

static void *cm_fail(int err, const char *what, unsigned long long a, const char *mid,
                     unsigned long long b, const char *tail) {
    size_t at = cm_append(0, what);
    if (mid) {   /* a, mid, then b unless it is CM_NONE */
        at = cm_append_u(at, a);
        at = cm_append(at, mid);
        if (b != CM_NONE) at = cm_append_u(at, b);
    }
    if (tail) cm_append(at, tail);
    cm_errno = err;
    errno = err;
    return NULL;
}

const char *hpm_colored_map_error(void) __attribute__((visibility("default")));
const char *hpm_colored_map_error(void) {
    return cm_reason[0] ? cm_reason : "no error";
}

/* ---- system calls (through the OS table) ---- */
static void *cm_mmap(size_t bytes, int prot, int flags) {
    void *p = _hpm_os->sys_mmap(NULL, bytes, prot, flags | MAP_PRIVATE | MAP_ANONYMOUS);
    return p == MAP_FAILED ? NULL : p;
}

static void cm_munmap(void *p, size_t bytes) { if (p) _hpm_os->sys_munmap(p, bytes); }

/* Reads n pagemap entries for addr; 0 or errno. */
static int cm_pagemap(const void *addr, size_t n, uint64_t *out) { return _hpm_os->pagemap(addr, n, out); }

static unsigned cm_colour_count(void) {
    long c = _hpm_option(HPM_OPT_COLOR_COUNT);
    return (c >= 2 && c <= 64) ? (unsigned)c : 16u;
}

/* Pools of the current call, unmapped when it ends (see cm_round): each
 * with its pagemap entries, CM_MOVED where a page was moved out, and how
 * many of its pages were examined (the rest were never touched). */
typedef struct {
    char *pool;
    size_t pool_pages, examined_pages;
    uint64_t *ent;
    size_t ent_bytes;
} cm_pool_t;
static __thread cm_pool_t cm_keep[CM_MAX_ROUNDS];
static __thread int cm_n_keep;

/* Unmaps each run of pages a pool still holds; the holes left by moved
 * pages are not ours any more (another thread may have mapped there). */
static void cm_release_pool(const cm_pool_t *k) {
    size_t run = 0;   /* start of the current run of held pages */
    for (size_t i = 0; i < k->examined_pages; i++) {
        if (k->ent[i] != CM_MOVED) continue;
        if (i > run) cm_munmap(k->pool + run * CM_PAGE, (i - run) * CM_PAGE);
        run = i + 1;
    }
    if (k->pool_pages > run) cm_munmap(k->pool + run * CM_PAGE, (k->pool_pages - run) * CM_PAGE);
    cm_munmap(k->ent, k->ent_bytes);
}

static void cm_release_pools(void) {
    for (int i = 0; i < cm_n_keep; i++) cm_release_pool(&cm_keep[i]);
    cm_n_keep = 0;
}

/* True when no present entry shows a frame number: PFNs are hidden. */
static int cm_all_pfn_zero(const uint64_t *ent, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((ent[i] & CM_PRESENT) && (ent[i] & CM_PFN_MASK)) return 0;
    return 1;
}

/* Pages to touch next: what the remaining need takes when the wanted
 * colours are share of colours, within [CM_STEP_MIN_PAGES, CM_STEP_MAX_PAGES]. */
static size_t cm_step_pages(size_t left, unsigned colours, unsigned share) {
    size_t want = left * colours / share;
    return want < CM_STEP_MIN_PAGES ? CM_STEP_MIN_PAGES : want > CM_STEP_MAX_PAGES ? CM_STEP_MAX_PAGES : want;
}

/* Touches and examines pages [at, at + n) of pool k, moving those whose
 * colour is in mask into dst[filled..need). The new fill count, or
 * (size_t)-1 with the reason set. */
static size_t cm_step(cm_pool_t *k, size_t at, size_t n, char *dst, size_t filled, size_t need, uint64_t mask,
                      unsigned colours) {
    volatile char *touch = k->pool + at * CM_PAGE;
    for (size_t i = 0; i < n; i++) touch[i * CM_PAGE] = 0;   /* fault in a zeroed frame; a 0 keeps it zero */
    uint64_t *ent = k->ent + at;
    int err = cm_pagemap(k->pool + at * CM_PAGE, n, ent);
    k->examined_pages = at + n;   /* ent[at..] now holds entries (CM_MOVED is no entry) */
    if (err) {
        cm_fail(err, "cannot read /proc/self/pagemap", 0, NULL, 0, NULL);
        return (size_t)-1;
    }
    if (cm_all_pfn_zero(ent, n)) {
        cm_fail(EPERM, "pagemap shows PFN 0: physical frame numbers need CAP_SYS_ADMIN (run as root)",
                0, NULL, 0, NULL);
        return (size_t)-1;
    }
    size_t out = filled;
    for (size_t i = 0; i < n && out < need; i++) {
        if (!(ent[i] & CM_PRESENT)) continue;
        uint64_t colour = (ent[i] & CM_PFN_MASK) % colours;
        if (!(mask >> colour & 1)) continue;
        char *page = k->pool + (at + i) * CM_PAGE;
        void *r = _hpm_os->sys_mremap(page, CM_PAGE, CM_PAGE, MREMAP_MAYMOVE | MREMAP_FIXED, dst + out * CM_PAGE);
        if (r != dst + out * CM_PAGE) {
            cm_fail(errno, "mremap of one page failed after ", out,
                    " pages (too many mappings? see vm.max_map_count; asked for ", need, " pages)");
            return (size_t)-1;
        }
        ent[i] = CM_MOVED;   /* the page is gone from the pool: never unmap its address */
        out++;
    }
    return out;
}

/* One round: reserve a pool of pool_pages and walk it in steps until the
 * range is full or the pool is used up. Returns the new fill count, or
 * (size_t)-1 with the reason set. The pool is kept (cm_keep) until the
 * call ends: rejected pages freed now would hand the same frames (same
 * colours) to the next round. */
static size_t cm_round(char *dst, size_t filled, size_t need, uint64_t mask, unsigned colours, unsigned share,
                       size_t pool_pages) {
    size_t pool_bytes = pool_pages * CM_PAGE;
    size_t ent_bytes = (pool_pages * sizeof(uint64_t) + CM_PAGE - 1) / CM_PAGE * CM_PAGE;
    char *pool = cm_mmap(pool_bytes, PROT_READ | PROT_WRITE, MAP_NORESERVE);
    uint64_t *ent = cm_mmap(ent_bytes, PROT_READ | PROT_WRITE, MAP_NORESERVE);
    if (!pool || !ent) {
        cm_munmap(pool, pool_bytes); cm_munmap(ent, ent_bytes);
        cm_fail(ENOMEM, "cannot map a scratch pool of ", pool_pages, " pages (", filled, " frames found so far)");
        return (size_t)-1;
    }
    _hpm_os->sys_madvise(pool, pool_bytes, MADV_NOHUGEPAGE);
    cm_pool_t *k = &cm_keep[cm_n_keep++];
    *k = (cm_pool_t){.pool = pool, .pool_pages = pool_pages, .ent = ent, .ent_bytes = ent_bytes};
    size_t out = filled;
    for (size_t at = 0; at < pool_pages && out < need;) {
        size_t n = cm_step_pages(need - out, colours, share);
        if (n > pool_pages - at) n = pool_pages - at;
        out = cm_step(k, at, n, dst, out, need, mask, colours);
        if (out == (size_t)-1) break;
        at += n;
    }
    return out;
}

/* Checks that every page of [p, p+n pages) is present with a wanted colour. */
static int cm_verify(char *p, size_t n, uint64_t mask, unsigned colours) {
    size_t ent_bytes = (n * sizeof(uint64_t) + CM_PAGE - 1) / CM_PAGE * CM_PAGE;
    uint64_t *ent = cm_mmap(ent_bytes, PROT_READ | PROT_WRITE, 0);
    if (!ent) return ENOMEM;
    int err = cm_pagemap(p, n, ent);
    for (size_t i = 0; !err && i < n; i++) {
        if (!(ent[i] & CM_PRESENT) || !(mask >> ((ent[i] & CM_PFN_MASK) % colours) & 1)) err = EAGAIN;
    }
    cm_munmap(ent, ent_bytes);
    return err;
}

void *hpm_colored_map(size_t size_bytes, uint64_t colours_mask) __attribute__((visibility("default")));
void *hpm_colored_map(size_t size_bytes, uint64_t colours_mask) {
    cm_reason[0] = 0;
    _hpm_init_slow();   /* the options (HPM_COLOR_COUNT) are read when the allocator starts */
    unsigned colours = cm_colour_count();
    uint64_t mask = colours >= 64 ? colours_mask : colours_mask & ((1ull << colours) - 1);
    if (size_bytes == 0 || size_bytes > ((size_t)1 << 40))
        return cm_fail(EINVAL, "size must be between 1 byte and 1 TiB", 0, NULL, 0, NULL);
    if (mask == 0)
        return cm_fail(EINVAL, "the mask selects no colour below HPM_COLOR_COUNT (", colours, ") ", CM_NONE,
                       "(colours are PFN mod HPM_COLOR_COUNT)");
    size_t need = (size_bytes + CM_PAGE - 1) / CM_PAGE;
    unsigned share = (unsigned)__builtin_popcountll(mask);
    /* The walk faults about need x colours / share pages and holds them
     * until the call ends. More than the machine's memory and swap can
     * never be found: refuse at once (session 52's review: 1 TiB of every
     * colour faulted pages for minutes, on its way to the OOM killer). */
    size_t machine_pages = _hpm_os->machine_bytes ? _hpm_os->machine_bytes() / CM_PAGE : 0;
    size_t faulted_pages = need * colours / share;   /* need < 2^28 pages, colours <= 64: no overflow */
    if (machine_pages && faulted_pages > machine_pages)
        return cm_fail(ENOMEM, "finding the frames would fault about ", faulted_pages,
                       " pages, more than the machine's memory and swap (", machine_pages, " pages)");
    char *dst = cm_mmap(need * CM_PAGE, PROT_NONE, MAP_NORESERVE);
    if (!dst) return cm_fail(ENOMEM, "cannot reserve the destination range", 0, NULL, 0, NULL);
    uint64_t probe;   /* can this process read its page map at all? */
    int pm_err = cm_pagemap(dst, 1, &probe);
    if (pm_err) {
        cm_munmap(dst, need * CM_PAGE);
        return cm_fail(pm_err, pm_err == EACCES || pm_err == EPERM
                                   ? "cannot open /proc/self/pagemap: permission denied (frame numbers need root)"
                                   : "cannot read /proc/self/pagemap", 0, NULL, 0, NULL);
    }
    size_t filled = 0;
    cm_n_keep = 0;
    for (int round = 0; round < CM_MAX_ROUNDS && filled < need && filled != (size_t)-1; round++) {
        /* expect share/colours of the frames to fit; reserve 1.5x plus
         * slack, doubling each round (only what the walk needs is touched) */
        size_t pool = ((need - filled) * colours / share * 3 / 2 + 64) << round;
        filled = cm_round(dst, filled, need, mask, colours, share, pool);
    }
    cm_release_pools();
    int err = 0;
    if (filled == (size_t)-1) err = cm_errno;
    else if (filled < need) {
        cm_fail(ENOMEM, "found only ", filled, " frames of the wanted colours, needed ", need, NULL);
        err = ENOMEM;
    } else if ((err = cm_verify(dst, need, mask, colours)) != 0) {
        cm_fail(err, "a frame changed colour while the range was assembled (migrated by the kernel)",
                0, NULL, 0, NULL);
    }
    if (!err && !cm_range_add((uintptr_t)dst, need * CM_PAGE)) {
        cm_fail(ENOMEM, "too many coloured ranges at once (", CM_MAX_RANGES, ")", CM_NONE,
                ": give some back with hpm_colored_unmap");
        err = ENOMEM;
    }
    if (err) {
        cm_munmap(dst, need * CM_PAGE);
        errno = err;
        return NULL;
    }
    return dst;
}

int hpm_colored_unmap(void *p, size_t size_bytes) __attribute__((visibility("default")));
int hpm_colored_unmap(void *p, size_t size_bytes) {
    if (!p || ((uintptr_t)p & (CM_PAGE - 1)) || size_bytes == 0) { errno = EINVAL; return -1; }
    size_t bytes = (size_bytes + CM_PAGE - 1) / CM_PAGE * CM_PAGE;
    if (bytes < size_bytes || !cm_range_take((uintptr_t)p, bytes)) {   /* not a range hpm_colored_map returned, whole */
        errno = EINVAL;
        return -1;
    }
    if (_hpm_os->sys_munmap(p, bytes) == 0) return 0;
    int e = errno;
    cm_range_add((uintptr_t)p, bytes);   /* still mapped: still the caller's to give back */
    errno = e;
    return -1;
}
