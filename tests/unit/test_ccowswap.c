/* test_ccowswap.c: the swap mechanism (HPM_CCOW_MECH=swap) against the
 * real kernel, in the cases session 50's review found broken.
 *
 *   unpopulated  a region with pages that are not present (MADV_DONTNEED
 *                on its second half). A helper thread writes one of those
 *                pages at the worst moment: after the copy, before the
 *                mremap (the test's OS table runs it from remap_fixed).
 *                The write must be there afterwards. Deterministic: it
 *                does not depend on timing.
 *   writers      the reviewer's shape: writer threads count into a table
 *                whose regions are half unpopulated before each of 12
 *                forks; after every period each counter must equal its
 *                writer's count.
 *   readonly     a PROT_READ page inside a hot region: it must stay
 *                read-only, keep its bytes, and the process must live.
 *   none         the same with PROT_NONE (the old copy took SIGSEGV).
 *
 * Each case runs in its own process (this program again, with
 * HPM_TEST_SWAP_CASE set), so a crash is a failure here, not the end of
 * the run. In every case the child's snapshot must be intact, and some
 * region must really have been swapped (not every one left to collapse). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hpmalloc.h"
#include "ccow/ccow.h"
#include "testhelper.h"
#include "test_ccow_stats.h"

#define HP ((uintptr_t)2 << 20)
#define PAGE ((uintptr_t)4096)
#define BLOCK_BYTES ((size_t)16 << 20)
#define MAGIC 0x5157415044ull
#define N_WRITERS 3
#define ROUNDS 12

static hpm_ccow_os_t test_os;
static _Atomic uintptr_t armed_region;     /* remap_fixed over this region runs the late write */
static _Atomic(uint64_t *) late_target;
static atomic_int late_go, late_done, late_seen_before_remap, swaps;

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Called by CCoW's thread after it copied a region, just before the
 * mremap: for the armed region, let the helper write and give it up to
 * half a second. A write-protected page holds the helper back until the
 * swap is over; an unprotected one lets it through now. */
static int remap_with_late_write(void *src, void *dst, size_t len) {
    atomic_fetch_add(&swaps, 1);
    if ((uintptr_t)dst == atomic_load(&armed_region)) {
        atomic_store(&armed_region, 0);
        atomic_store(&late_go, 1);
        for (int i = 0; i < 500 && !atomic_load(&late_done); i++) sleep_ms(1);
        atomic_store(&late_seen_before_remap, atomic_load(&late_done));
    }
    return _hpm_ccow_os_linux.remap_fixed(src, dst, len);
}

static void *late_writer(void *arg) {
    (void)arg;
    while (!atomic_load(&late_go)) sched_yield();
    *(volatile uint64_t *)atomic_load(&late_target) = MAGIC;
    atomic_store(&late_done, 1);
    return NULL;
}

static uint64_t precopied_now(void) {
    hpm_stats_t s;
    ccow_stats_read(&s);
    return s.ccow_regions_precopied;
}

static void wait_idle(void) {
    hpm_stats_t s;
    for (int i = 0; i < 2000; i++, sleep_ms(5)) {
        ccow_stats_read(&s);
        if (!s.ccow_active) return;
    }
}

/* The snapshot check leaves out [skip_lo, skip_hi), or with skip_halves
 * only the second half of each region there: the parent must not read
 * pages it wants unpopulated (a read maps the zero page) nor a PROT_NONE
 * page. With skip_zero the child checks that those bytes read zero. */
static uintptr_t skip_lo, skip_hi;
static int skip_halves, skip_zero;

static int skipped(uintptr_t a) {
    return a >= skip_lo && a < skip_hi && (!skip_halves || (a & (HP - 1)) >= HP / 2);
}

static uint64_t block_sum(const uint8_t *p, size_t bytes) {
    uint64_t s = 0;
    for (size_t i = 0; i < bytes; i += 8)
        if (!skipped((uintptr_t)p + i)) s += *(const uint64_t *)(p + i) * (i | 1);
    return s;
}

static int skipped_bytes_zero(const uint8_t *p, size_t bytes) {
    for (size_t i = 0; i < bytes; i += 8)
        if (skipped((uintptr_t)p + i) && *(const uint64_t *)(p + i) != 0) return 0;
    return 1;
}

/* The first 2 MiB-aligned region that lies wholly inside [p, p + bytes). */
static uintptr_t first_region(void *p, size_t bytes) {
    uintptr_t r = ((uintptr_t)p + HP - 1) & ~(HP - 1);
    return r + HP <= (uintptr_t)p + bytes ? r : 0;
}

/* The protection letters ("rw-p") of the mapping holding addr. */
static void prot_of(uintptr_t addr, char out[5]) {
    strcpy(out, "?");
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perms[5];
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && lo <= addr && addr < hi) { strcpy(out, perms); break; }
    }
    fclose(f);
}

/* Forks a child that holds its snapshot until go is written and checks it
 * against want_sum; returns its pid and the write end of go. */
static pid_t fork_holder(const uint8_t *block, uint64_t want_sum, int *go_w) {
    int go[2];
    if (pipe(go) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        close(go[1]);
        (void)!read(go[0], &b, 1);
        int ok = block_sum(block, BLOCK_BYTES) == want_sum && (!skip_zero || skipped_bytes_zero(block, BLOCK_BYTES));
        _exit(ok ? 0 : 1);
    }
    close(go[0]);
    *go_w = go[1];
    return pid;
}

static int release_holder(pid_t pid, int go_w) {
    (void)!write(go_w, "x", 1);
    close(go_w);
    int st = 0;
    if (pid <= 0 || waitpid(pid, &st, 0) != pid) return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void case_unpopulated(void) {
    uint8_t *block = malloc(BLOCK_BYTES);
    CHECK(block != NULL);
    if (!block) return;
    memset(block, 0x3c, BLOCK_BYTES);
    uintptr_t r = first_region(block, BLOCK_BYTES);
    CHECK(madvise((void *)(r + HP / 2), HP / 2, MADV_DONTNEED) == 0, "MADV_DONTNEED half a region");
    skip_lo = r + HP / 2; skip_hi = r + HP; skip_zero = 1;
    uint64_t *target = (uint64_t *)(r + HP / 2 + 37 * PAGE + 8);
    atomic_store(&late_target, target);
    pthread_t th;
    pthread_create(&th, NULL, late_writer, NULL);
    uint64_t want = block_sum(block, BLOCK_BYTES), before = precopied_now();
    atomic_store(&armed_region, r);
    int go_w = -1;
    pid_t pid = fork_holder(block, want, &go_w);
    CHECK(pid > 0);
    for (int i = 0; i < 6000 && atomic_load(&armed_region); i++) sleep_ms(5);
    CHECK(!atomic_load(&armed_region), "CCoW swapped the region with unpopulated pages");
    atomic_store(&late_go, 1);   /* in case it never came to that */
    pthread_join(th, NULL);
    CHECK(release_holder(pid, go_w), "the child's snapshot is intact");
    wait_idle();
    CHECK(*(volatile uint64_t *)target == MAGIC, "the write to an unpopulated page during the swap was lost (%#llx)",
          (unsigned long long)*(volatile uint64_t *)target);
    CHECK(!atomic_load(&late_seen_before_remap), "the write went through while the region was being swapped");
    size_t bad = 0;
    for (size_t i = 0; i < BLOCK_BYTES; i++) {
        uint8_t *p = block + i;
        if ((uint64_t *)(uintptr_t)((uintptr_t)p & ~(uintptr_t)7) == target) continue;
        uint8_t want_b = (uintptr_t)p >= r + HP / 2 && (uintptr_t)p < r + HP ? 0 : 0x3c;
        bad += *p != want_b;
    }
    CHECK(bad == 0, "%zu other bytes changed", bad);
    CHECK(precopied_now() > before && atomic_load(&swaps) > 0, "regions swapped: %d", atomic_load(&swaps));
    free(block);
}

/* ---- writers: the reviewer's shape ---- */

static uint64_t *table;
static size_t table_words;
static uint32_t *counts[N_WRITERS];
static atomic_int stop_req, pause_req, paused_n;

/* Writers stop here while the main thread forks or checks. */
static void writer_pause_point(void) {
    if (!atomic_load(&pause_req)) return;
    atomic_fetch_add(&paused_n, 1);
    while (atomic_load(&pause_req)) sched_yield();
    atomic_fetch_sub(&paused_n, 1);
}

/* Writer id owns the words k * N_WRITERS + id; it bumps 16 random ones of
 * them between pause points and counts each bump in counts[id]. */
static void *counter_writer(void *arg) {
    int id = (int)(intptr_t)arg;
    uint64_t x = 0x2545F4914F6CDD1Dull ^ (uint64_t)id;
    size_t per = table_words / N_WRITERS;
    for (; !atomic_load(&stop_req); writer_pause_point())
        for (int i = 0; i < 16; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;   /* an LCG: the high bits */
            size_t k = (size_t)((x >> 33) % per);
            table[k * N_WRITERS + (size_t)id]++;
            counts[id][k]++;
        }
    return NULL;
}

/* Writers paused: how many counters differ from their writer's count. */
static size_t lost_counters(void) {
    size_t bad = 0, per = table_words / N_WRITERS;
    for (int t = 0; t < N_WRITERS; t++)
        for (size_t k = 0; k < per; k++) bad += table[k * N_WRITERS + (size_t)t] != counts[t][k];
    return bad;
}

/* Writers paused: drops the second half of every region of the table
 * (its counters read zero again), so the next period starts with
 * unpopulated pages in every region. */
static void unpopulate_halves(void) {
    for (uintptr_t r = skip_lo; r < skip_hi; r += HP) {
        (void)madvise((void *)(r + HP / 2), HP / 2, MADV_DONTNEED);
        for (size_t w = (r + HP / 2 - (uintptr_t)table) / 8; w < (r + HP - (uintptr_t)table) / 8; w++)
            counts[w % N_WRITERS][w / N_WRITERS] = 0;
    }
}

static void case_writers(void) {
    table = malloc(BLOCK_BYTES);
    CHECK(table != NULL);
    if (!table) return;
    table_words = BLOCK_BYTES / 8;
    memset(table, 0, BLOCK_BYTES);
    for (int i = 0; i < N_WRITERS; i++) counts[i] = calloc(table_words / N_WRITERS, sizeof(uint32_t));
    skip_lo = first_region(table, BLOCK_BYTES);
    skip_hi = ((uintptr_t)table + BLOCK_BYTES) & ~(HP - 1);
    skip_halves = 1; skip_zero = 1;
    pthread_t th[N_WRITERS];
    for (intptr_t i = 0; i < N_WRITERS; i++) pthread_create(&th[i], NULL, counter_writer, (void *)i);
    size_t lost = 0;
    int bad_children = 0;
    uint64_t before = precopied_now();
    for (int round = 0; round < ROUNDS; round++) {
        atomic_store(&pause_req, 1);
        while (atomic_load(&paused_n) < N_WRITERS) sched_yield();
        wait_idle();
        lost += lost_counters();
        unpopulate_halves();
        int go_w = -1;
        pid_t pid = fork_holder((const uint8_t *)table, block_sum((const uint8_t *)table, BLOCK_BYTES), &go_w);
        atomic_store(&pause_req, 0);
        sleep_ms(100);
        bad_children += !release_holder(pid, go_w);
    }
    atomic_store(&stop_req, 1);
    for (int i = 0; i < N_WRITERS; i++) pthread_join(th[i], NULL);
    wait_idle();
    lost += lost_counters();
    printf("# writers: %d forks, %llu regions pre-copied, %d swaps, %zu lost writes\n", ROUNDS,
           (unsigned long long)(precopied_now() - before), atomic_load(&swaps), lost);
    CHECK(lost == 0, "%zu counters lost writes over %d forks", lost, ROUNDS);
    CHECK(bad_children == 0, "%d children saw a changed snapshot", bad_children);
    CHECK(atomic_load(&swaps) > 0, "no region was swapped");
}

/* ---- a page the program protected ---- */

static void case_protected(int prot, const char *want_perms) {
    uint8_t *block = malloc(BLOCK_BYTES);
    CHECK(block != NULL);
    if (!block) return;
    memset(block, 0x5a, BLOCK_BYTES);
    uintptr_t page = first_region(block, BLOCK_BYTES) + 10 * PAGE;
    CHECK(mprotect((void *)page, PAGE, prot) == 0, "mprotect %d", prot);
    skip_lo = page; skip_hi = page + PAGE;
    uint64_t before = precopied_now();
    /* Up to 3 forks, until one swaps a region: under TSan with another
     * test beside it, a first fork was seen to leave every region but the
     * protected one alone (see docs/ccow.md, Limits). Every fork is
     * checked the same way. */
    for (int fork_n = 0; fork_n < 3 && atomic_load(&swaps) == 0; fork_n++) {
        int go_w = -1;
        pid_t pid = fork_holder(block, block_sum(block, BLOCK_BYTES), &go_w);
        CHECK(pid > 0);
        /* Writing first could make every page private by plain CoW before
         * a slow CCoW thread (TSan) gets there, leaving nothing to swap:
         * wait for a swap (at most 10 s), then write on. */
        for (int i = 0; i < 2000 && atomic_load(&swaps) == 0; i++) sleep_ms(5);
        for (int round = 0; round < 10; round++) {
            for (uintptr_t p = (uintptr_t)block; p < (uintptr_t)block + BLOCK_BYTES; p += PAGE)
                if (p != page) ((volatile uint8_t *)p)[1] = 0x5a;
            sleep_ms(20);
        }
        CHECK(release_holder(pid, go_w), "the child's snapshot is intact");
        wait_idle();
    }
    char perms[5];
    prot_of(page, perms);
    CHECK(!strcmp(perms, want_perms), "the protected page is now %s, want %s", perms, want_perms);
    CHECK(mprotect((void *)page, PAGE, PROT_READ | PROT_WRITE) == 0);
    size_t bad = 0;
    for (size_t k = 0; k < PAGE; k++) bad += ((uint8_t *)page)[k] != 0x5a;
    CHECK(bad == 0, "the protected page lost %zu bytes", bad);
    CHECK(precopied_now() > before && atomic_load(&swaps) > 0, "other regions were swapped (%d), pre-copied %llu", atomic_load(&swaps), (unsigned long long)(precopied_now() - before));
    free(block);
}

static int run_case(const char *name) {
    test_os = _hpm_ccow_os_linux;   /* before the first fork */
    test_os.remap_fixed = remap_with_late_write;
    _hpm_ccow_os = &test_os;
    CHECK(hpm_ccow_config("all", 0) == 0);
    _hpm_ccow_set_mech(CCOW_MECH_SWAP);
    if (!strcmp(name, "unpopulated")) case_unpopulated();
    else if (!strcmp(name, "writers")) case_writers();
    else if (!strcmp(name, "readonly")) case_protected(PROT_READ, "r--p");
    else if (!strcmp(name, "none")) case_protected(PROT_NONE, "---p");
    else CHECK(0, "unknown case %s", name);
    printf("%s: the process lived\n", name);
    return TEST_DONE();
}

int main(int argc, char **argv) {
    const char *name = getenv("HPM_TEST_SWAP_CASE");
    if (name) return run_case(name);
    static const char *const cases[] = {"unpopulated", "writers", "readonly", "none"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) th_run_self_with("HPM_TEST_SWAP_CASE", cases[i], argv);
    return TEST_DONE();
}
