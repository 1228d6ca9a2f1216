/* ccow_copy.c: the pre-copy mechanisms, the spare hugepages they use, and
 * the guards that keep them from racing with fork and with the core.
 *
 *   swap      copy the region into a warm MADV_DONTFORK spare while
 *             userfaultfd write-protect (unpopulated pages included)
 *             holds writers back, mremap the spare over the region,
 *             MADV_DOFORK it (a moved spare carries VM_DONTFORK, and the
 *             next child would lose the region), wake the writers. Only
 *             for a region that is rw-p throughout and whose every page
 *             shows the write-protect bit; any other goes to collapse.
 *             Nothing takes mmap_lock for the copy itself.
 *   collapse  one atomic no-op read-modify-write (so a fully PMD-shared
 *             region is split and has something to collapse), then
 *             MADV_COLLAPSE: the kernel copies under its own locks.
 *   prefault  an atomic no-op RMW on every still-shared page, so the CoW
 *             faults happen on this thread, then MADV_COLLAPSE.
 * No mechanism stores anything but the value it just read, atomically, or
 * a copy taken while no thread can store: a concurrent write is never lost.
 *
 * Guards: the fork guard (a mutex held by the atfork prepare handler and
 * by a swap) keeps a fork from seeing a half-swapped region. The OS guard
 * wraps the core's release/unreserve/hugetlb calls: they wait while their
 * range overlaps the region being copied, and the copier waits until no
 * such call is in flight, so a region can neither be released under a swap
 * (the copy would bring old bytes back) nor unmapped under a prefault. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "ccow/ccow.h"

#define SPARE_MAX 64
#define COLLAPSE_TRIES 4
#define SWAP_ELSEWHERE EXDEV   /* this region cannot be swapped safely: collapse it */

static pthread_mutex_t fork_guard = PTHREAD_MUTEX_INITIALIZER;
static uintptr_t spares[SPARE_MAX];
static unsigned n_spares;
static int uffd = -1;            /* -2: unusable, fall back to collapse */
static uintptr_t warm;           /* see warm_one_hugepage; MADV_DONTFORK, so absent in a child */

/* ---- OS guard ---- */

static _Atomic uintptr_t busy_region;
static _Atomic int core_ops;
static hpm_os_t guarded_os;
static const hpm_os_t *inner_os;

static void core_op_enter(void *addr, size_t len) {
    uintptr_t a = (uintptr_t)addr;
    for (;;) {
        atomic_fetch_add_explicit(&core_ops, 1, memory_order_seq_cst);
        uintptr_t b = atomic_load_explicit(&busy_region, memory_order_seq_cst);
        if (!b || a + len <= b || a >= b + HPM_HP_BYTES) return;
        atomic_fetch_sub_explicit(&core_ops, 1, memory_order_seq_cst);
        while (atomic_load_explicit(&busy_region, memory_order_seq_cst) == b) _hpm_ccow_os->yield_cpu();
    }
}

static void core_op_exit(void) { atomic_fetch_sub_explicit(&core_ops, 1, memory_order_seq_cst); }

static int guarded_release(void *addr, size_t len) {
    core_op_enter(addr, len);
    int r = inner_os->release(addr, len);
    core_op_exit();
    return r;
}

static int guarded_unreserve(void *addr, size_t len) {
    core_op_enter(addr, len);
    int r = inner_os->unreserve_to_reserved(addr, len);
    core_op_exit();
    return r;
}

static int guarded_map_hugetlb(void *addr, size_t len, size_t page_bytes) {
    core_op_enter(addr, len);
    int r = inner_os->map_hugetlb(addr, len, page_bytes);
    core_op_exit();
    return r;
}

const hpm_os_t *_hpm_ccow_os_guard(const hpm_os_t *os) {
    if (os == &guarded_os) return os;
    if (inner_os && inner_os != os) return os;   /* one wrapped table per process */
    inner_os = os;
    guarded_os = *os;
    guarded_os.release = guarded_release;
    guarded_os.unreserve_to_reserved = guarded_unreserve;
    guarded_os.map_hugetlb = guarded_map_hugetlb;
    return &guarded_os;
}

static void busy_begin(uintptr_t region) {
    atomic_store_explicit(&busy_region, region, memory_order_seq_cst);
    while (atomic_load_explicit(&core_ops, memory_order_seq_cst) > 0) _hpm_ccow_os->yield_cpu();
}

static void busy_end(void) { atomic_store_explicit(&busy_region, 0, memory_order_seq_cst); }

/* ---- fork guard and spares ---- */

void _hpm_ccow_guard_lock(void) { pthread_mutex_lock(&fork_guard); }
void _hpm_ccow_guard_unlock(void) { pthread_mutex_unlock(&fork_guard); }

void _hpm_ccow_copy_after_fork_child(void) {
    /* Spares are MADV_DONTFORK (absent here); the uffd is the parent's. */
    n_spares = 0;
    warm = 0;
    if (uffd >= 0) _hpm_ccow_os->close_fd(uffd);
    uffd = -1;
    busy_region = 0;
    core_ops = 0;
}

void _hpm_ccow_spares_fill(unsigned n) {
    if (n > SPARE_MAX) n = SPARE_MAX;
    while (n_spares < n) {
        void *p = _hpm_ccow_os->spare_map(HPM_HP_BYTES);
        if (!p) return;
        spares[n_spares++] = (uintptr_t)p;
    }
}

static uintptr_t spare_take(void) {
    if (n_spares == 0) _hpm_ccow_spares_fill(1);
    return n_spares ? spares[--n_spares] : 0;
}

static void spare_put_back(uintptr_t s) {
    if (n_spares < SPARE_MAX) spares[n_spares++] = s;
    else _hpm_ccow_os->spare_unmap((void *)s, HPM_HP_BYTES);
}

/* ---- mechanisms ---- */

/* MADV_COLLAPSE copies into its new huge page while holding mmap_lock
 * for writing, so every page fault of the process waits. In a VM whose
 * free memory is handed back to the host (free page reporting), first
 * touching that page costs milliseconds, under the lock. So first fault a
 * huge page in here (no lock held but our own mapping's) and free it: the
 * collapse's allocation then takes that warm page from this CPU's list. */
static void warm_one_hugepage(void) {
    if (!warm) warm = (uintptr_t)_hpm_ccow_os->spare_map(HPM_HP_BYTES);
    if (warm) _hpm_ccow_os->spare_warm_drop((void *)warm, HPM_HP_BYTES);
}

static int collapse_retry(uintptr_t region) {
    int err = 0;
    warm_one_hugepage();
    for (int i = 0; i < COLLAPSE_TRIES; i++) {
        err = _hpm_os->collapse((void *)region, HPM_HP_BYTES);
        if (err == 0) _hpm_hp_collapsed(region);   /* pages a trim gave back there are resident again */
        if (err != EAGAIN) return err;
        _hpm_os->sleep_ns(100000);
    }
    return err;
}

/* Runs under busy_begin: the region is mapped iff pages are present. */
static bool region_still_mapped(uintptr_t region, uint32_t *shared) {
    ccow_scan_t s;
    if (_hpm_ccow_scan_region(region, &s) != 0 || s.present_pages == 0) return false;
    *shared = (uint32_t)(s.present_pages - s.excl_pages);
    return true;
}

/* Break the copy-on-write sharing of [addr, addr + bytes) as a write
 * would, but without writing: a page the program protected (a guard page
 * inside a malloc'd block, PROT_READ or PROT_NONE) made the atomic no-op
 * write used before fault with SIGSEGV in the CCoW thread (session 50's
 * review). Such a page fails MADV_POPULATE_WRITE instead and stays shared;
 * the collapse then leaves the region as it is. Every kernel with
 * MADV_COLLAPSE (6.1) has MADV_POPULATE_WRITE (5.14). */
static void break_cow(uintptr_t addr, size_t bytes) {
    if (_hpm_os->populate_write) (void)_hpm_os->populate_write((void *)addr, bytes);
}

/* The busy window is held under the fork guard too: a fork inside it
 * would leave busy_region set in the child, whose core then waits for it
 * (its own atfork handler runs before ours can clear it) forever. */
static int precopy_collapse(uintptr_t region, bool prefault_all, uint32_t *shared_before) {
    uint64_t pm[HPM_PAGES_PER_HP];
    _hpm_ccow_guard_lock();
    busy_begin(region);
    if (!region_still_mapped(region, shared_before)) { busy_end(); _hpm_ccow_guard_unlock(); return ENOENT; }
    if (prefault_all && _hpm_os->pagemap((const void *)region, HPM_PAGES_PER_HP, pm) == 0) {
        for (uint32_t i = 0; i < HPM_PAGES_PER_HP; ) {   /* runs of present, shared pages */
            uint32_t n = 0;
            while (i + n < HPM_PAGES_PER_HP && (pm[i + n] >> 63) && !((pm[i + n] >> 56) & 1)) n++;
            if (n) break_cow(region + (uintptr_t)i * HPM_PAGE_BYTES, (size_t)n * HPM_PAGE_BYTES);
            i += n ? n : 1;
        }
    } else {
        break_cow(region, HPM_PAGE_BYTES);
    }
    busy_end();
    _hpm_ccow_guard_unlock();
    return collapse_retry(region);
}

static bool swap_usable(void) {
    if (uffd == -1) {
        int fd = _hpm_ccow_os->uffd_open();
        uffd = fd >= 0 ? fd : -2;
    }
    return uffd >= 0;
}

/* Every page of the region write-protected: pagemap bit 57 (uffd-wp) on
 * each entry, present, swapped and unpopulated pages alike (the last hold
 * a marker with WP_UNPOPULATED). A page without it could take a write
 * that the mremap would then drop. */
static bool region_write_protected(uintptr_t region) {
    uint64_t pm[HPM_PAGES_PER_HP];
    if (_hpm_os->pagemap((const void *)region, HPM_PAGES_PER_HP, pm) != 0) return false;
    for (uint32_t i = 0; i < HPM_PAGES_PER_HP; i++)
        if (!((pm[i] >> 57) & 1)) return false;
    return true;
}

/* 0 when the whole region is rw-p; SWAP_ELSEWHERE when some page has
 * other protections; ENOSYS (swap off for the process) when the kernel
 * cannot tell. */
static int region_rw(uintptr_t region) {
    int err = _hpm_ccow_os->range_rw((void *)region, HPM_HP_BYTES);
    return err == 0 ? 0 : err == EACCES ? SWAP_ELSEWHERE : ENOSYS;
}

/* Runs under write-protect: copies the region into the spare and checks,
 * just before the mremap, that the swap keeps every write and every
 * protection. SWAP_ELSEWHERE when it would not (a page lost its
 * write-protect, or the program protected a page meanwhile). */
static int swap_copy(uintptr_t region, uintptr_t spare) {
    int err = _hpm_ccow_os->copy_nofault((void *)spare, (const void *)region, HPM_HP_BYTES);
    if (err == EFAULT) return SWAP_ELSEWHERE;   /* a page became inaccessible */
    if (err) return err;
    if (!region_write_protected(region)) return SWAP_ELSEWHERE;
    return region_rw(region);
}

/* Moves the spare over the region and lets the next child have it. */
static int swap_remap(uintptr_t region, uintptr_t spare) {
    int err = _hpm_ccow_os->remap_fixed((void *)spare, (void *)region, HPM_HP_BYTES);
    uint32_t ignored;
    if (err && !region_still_mapped(region, &ignored)) {
        /* mremap can fail after unmapping the destination: the spare holds
         * the region's exact bytes (copied under write-protect), so put it
         * there again rather than leave a hole. */
        err = _hpm_ccow_os->remap_fixed((void *)spare, (void *)region, HPM_HP_BYTES);
        if (err) _hpm_message("hpmalloc: ccow: mremap failed (%d) and left the region at %p unmapped\n", err, (void *)region);
    }
    if (err) return err;
    int e2 = _hpm_os->dontfork((void *)region, HPM_HP_BYTES, false);
    if (e2) e2 = _hpm_os->dontfork((void *)region, HPM_HP_BYTES, false);
    if (e2) _hpm_message("hpmalloc: ccow: MADV_DOFORK failed (%d) after a swap\n", e2);
    return 0;
}

/* The spare is mapped read-write: a region with any other protection
 * (a guard page the program made PROT_READ or PROT_NONE) is left to
 * collapse, which keeps protections. Checked before the write-protect and
 * again after the copy, right before the mremap. */
static int precopy_swap(uintptr_t region, uint32_t *shared_before) {
    uintptr_t spare = spare_take();
    if (!spare) return ENOMEM;
    _hpm_ccow_guard_lock();
    busy_begin(region);
    int err = ENOENT;
    if (!region_still_mapped(region, shared_before)) goto out;
    err = region_rw(region);
    if (err) goto out;
    err = _hpm_ccow_os->uffd_protect(uffd, (void *)region, HPM_HP_BYTES);
    if (!err) err = swap_copy(region, spare);
    if (!err) err = swap_remap(region, spare);
    if (!err) spare = 0;
    _hpm_ccow_os->uffd_release(uffd, (void *)region, HPM_HP_BYTES);
out:
    busy_end();
    _hpm_ccow_guard_unlock();
    if (spare) spare_put_back(spare);
    /* every page of the spare is resident, the ones a trim had given back
     * included; not under busy: a release holding ph->lock waits for it */
    if (!err) _hpm_hp_collapsed(region);
    return err;
}

int _hpm_ccow_precopy(uintptr_t region, ccow_mech_t mech, uint32_t *shared_before) {
    *shared_before = 0;
    if (mech == CCOW_MECH_SWAP && swap_usable()) {
        int err = precopy_swap(region, shared_before);
        if (err != EINVAL && err != ENOSYS && err != EPERM && err != ENOMEM && err != SWAP_ELSEWHERE) return err;
        /* This region (or the whole mechanism) cannot be swapped: collapse. */
        if (err != ENOMEM && err != SWAP_ELSEWHERE) { _hpm_ccow_os->close_fd(uffd); uffd = -2; }
    }
    return precopy_collapse(region, mech == CCOW_MECH_PREFAULT, shared_before);
}

int _hpm_ccow_repair(uintptr_t region) { return collapse_retry(region); }
