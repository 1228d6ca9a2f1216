/* test_ccow_faults.c: fault injection through CCoW's replaceable OS
 * tables (the core's hpm_os_t and ccow_os.h's hpm_ccow_os_t). Each
 * scenario runs in its own process (re-executed with an argument) because
 * the tables must be replaced before the allocator starts.
 *
 * Turning off: "collapse" makes MADV_COLLAPSE fail with EINVAL every time
 * (an old kernel), "pagemap" makes /proc/self/pagemap fail with EACCES (a
 * seccomp filter or hidepid): the first fork must leave ccow_state
 * "disabled: <what> <errno>" and later forks must not be counted.
 * Carrying on: "collapse-enomem" (madvise fails ENOMEM, nothing is copied),
 * and with the swap mechanism "spare-mmap" (mmap of spares fails),
 * "mremap" (mremap fails ENOMEM), "uffd" (write-protect fails) and
 * "warm-madvise" (MADV_DONTNEED of the warm page fails): CCoW stays on and
 * falls back to collapse, so regions are still pre-copied.
 * In every scenario: no crash, the child's snapshot intact, and no write
 * of the parent lost. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hpmalloc.h"
#include "ccow/ccow.h"
#include "testhelper.h"

#define TABLE_WORDS ((size_t)(32u << 20) / 8)

static hpm_os_t fake_os;
static hpm_ccow_os_t fake_ccow_os;
static uint64_t *table;
static atomic_int stop_req, pause_req, paused;
static uint64_t writes_done;

static int failing_collapse(void *addr, size_t len) { (void)addr; (void)len; return EINVAL; }
static int failing_pagemap(const void *addr, size_t n, uint64_t *e) { (void)addr; (void)n; (void)e; return EACCES; }
static int enomem_collapse(void *addr, size_t len) { (void)addr; (void)len; return ENOMEM; }
static void *failing_spare_map(size_t len) { (void)len; return NULL; }
static int failing_remap(void *src, void *dst, size_t len) { (void)src; (void)dst; (void)len; return ENOMEM; }
static int failing_protect(int fd, void *addr, size_t len) { (void)fd; (void)addr; (void)len; return EINVAL; }
static int failing_warm_drop(void *addr, size_t len) { (void)addr; (void)len; return EINVAL; }

typedef struct { const char *name; int disables; int copies; } scenario_t;
static const scenario_t scenarios[] = {
    {"collapse", 1, 0},     {"pagemap", 1, 0},      {"collapse-enomem", 0, 0}, {"spare-mmap", 0, 1},
    {"mremap", 0, 1},       {"uffd", 0, 1},         {"warm-madvise", 0, 1},
};
#define N_SCENARIOS (sizeof scenarios / sizeof scenarios[0])

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void *writer_main(void *arg) {
    (void)arg;
    uint64_t x = 88172645463325252ull, n = 0;
    while (!atomic_load(&stop_req)) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        table[x % TABLE_WORDS]++;
        n++;
        if ((n & 255) == 0 && atomic_load(&pause_req)) {
            atomic_store(&paused, 1);
            while (atomic_load(&pause_req)) { }
            atomic_store(&paused, 0);
        }
    }
    writes_done = n;
    return NULL;
}

static uint64_t table_sum(void) {
    uint64_t s = 0;
    for (size_t i = 0; i < TABLE_WORDS; i++) s += table[i];
    return s;
}

static uint64_t precopied_now(void) {
    hpm_stats_t st;
    hpm_stats_get(&st);
    return st.ccow_regions_precopied;
}

/* Forks with the writer paused; the child holds its snapshot for hold_ms,
 * or, with wait_copy, until CCoW has pre-copied a region (at most 10 s, so
 * a starved background thread on a loaded machine still gets its turn),
 * then checks it. */
static int fork_and_check(long hold_ms, int wait_copy) {
    atomic_store(&pause_req, 1);
    while (!atomic_load(&paused)) { }
    uint64_t want = table_sum(), before = precopied_now();
    int go[2];
    if (pipe(go) != 0) return 0;
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        close(go[1]);
        (void)!read(go[0], &b, 1);
        _exit(table_sum() == want ? 0 : 1);
    }
    close(go[0]);
    atomic_store(&pause_req, 0);
    sleep_ms(hold_ms);
    for (int i = 0; wait_copy && i < 2000 && precopied_now() == before; i++) sleep_ms(5);
    (void)!write(go[1], "x", 1);
    close(go[1]);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int scenario(const scenario_t *sc) {
    const char *what = sc->name;
    fake_os = _hpm_os_linux;   /* before the first allocation: the core copies the pointer */
    fake_ccow_os = _hpm_ccow_os_linux;
    int swap = 0;
    if (!strcmp(what, "collapse")) fake_os.collapse = failing_collapse;
    else if (!strcmp(what, "pagemap")) fake_os.pagemap = failing_pagemap;
    else if (!strcmp(what, "collapse-enomem")) fake_os.collapse = enomem_collapse;
    else if (!strcmp(what, "spare-mmap")) { fake_ccow_os.spare_map = failing_spare_map; swap = 1; }
    else if (!strcmp(what, "mremap")) { fake_ccow_os.remap_fixed = failing_remap; swap = 1; }
    else if (!strcmp(what, "uffd")) { fake_ccow_os.uffd_protect = failing_protect; swap = 1; }
    else if (!strcmp(what, "warm-madvise")) { fake_ccow_os.spare_warm_drop = failing_warm_drop; swap = 1; }
    _hpm_os = &fake_os;
    _hpm_ccow_os = &fake_ccow_os;
    CHECK(hpm_ccow_config("all", 0) == 0);
    if (swap) _hpm_ccow_set_mech(CCOW_MECH_SWAP);
    table = hpm_calloc(TABLE_WORDS, 8);
    CHECK(table != NULL);
    if (!table) return TEST_DONE();
    pthread_t th;
    pthread_create(&th, NULL, writer_main, NULL);
    sleep_ms(20);
    CHECK(fork_and_check(sc->copies ? 0 : 300, sc->copies), "%s: the child's snapshot changed", what);
    hpm_stats_t s;
    for (int i = 0; i < 1000; i++) {
        hpm_stats_get(&s);
        if (sc->disables ? !strncmp(s.ccow_state, "disabled", 8)
                         : !s.ccow_active && (!sc->copies || s.ccow_regions_precopied > 0)) break;
        sleep_ms(5);
    }
    if (sc->disables) {
        char want[64];
        snprintf(want, sizeof want, "disabled: %s %s", !strcmp(what, "collapse") ? "MADV_COLLAPSE" : "pagemap",
                 !strcmp(what, "collapse") ? "EINVAL" : "EACCES");
        CHECK(!strcmp(s.ccow_state, want), "%s: ccow_state '%s', want '%s'", what, s.ccow_state, want);
        CHECK(s.ccow_forks == 1 && s.ccow_active == 0, "%s: forks %llu active %u", what,
              (unsigned long long)s.ccow_forks, s.ccow_active);
        CHECK(!strcmp(what, "pagemap") ? s.ccow_regions_precopied == 0 : 1, "nothing copied without pagemap");
    } else {
        CHECK(!strcmp(s.ccow_state, "all"), "%s: ccow_state '%s', want 'all'", what, s.ccow_state);
        CHECK(sc->copies ? s.ccow_regions_precopied > 0 : s.ccow_regions_precopied == 0,
              "%s: %llu regions pre-copied", what, (unsigned long long)s.ccow_regions_precopied);
    }
    CHECK(fork_and_check(50, 0), "%s: second fork's snapshot changed", what);
    hpm_stats_get(&s);
    if (sc->disables)
        CHECK(s.ccow_forks == 1, "%s: a disabled CCoW still counts forks (%llu)", what, (unsigned long long)s.ccow_forks);
    else
        CHECK(s.ccow_forks == 2, "%s: forks counted %llu, want 2", what, (unsigned long long)s.ccow_forks);
    atomic_store(&stop_req, 1);
    pthread_join(th, NULL);
    CHECK(table_sum() == writes_done, "%s: parent lost writes: sum %llu, writes %llu", what,
          (unsigned long long)table_sum(), (unsigned long long)writes_done);
    printf("# %s: ccow_state '%s', pre-copied %llu\n", what, s.ccow_state, (unsigned long long)s.ccow_regions_precopied);
    return TEST_DONE();
}

int main(int argc, char **argv) {
    for (size_t i = 0; argc == 2 && i < N_SCENARIOS; i++)
        if (!strcmp(argv[1], scenarios[i].name)) return scenario(&scenarios[i]);
    for (size_t i = 0; i < N_SCENARIOS; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], scenarios[i].name, (char *)NULL);
            _exit(127);
        }
        int st = 0;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "scenario %s failed (status %d)",
              scenarios[i].name, st);
    }
    return TEST_DONE();
}
