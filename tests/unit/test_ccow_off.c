/* test_ccow_off.c: CCoW turns itself off cleanly when the kernel cannot
 * help. Each scenario runs in its own process (re-executed with an
 * argument) because the OS table must be replaced before the allocator
 * starts: "collapse" makes MADV_COLLAPSE fail with EINVAL (an old kernel),
 * "pagemap" makes /proc/self/pagemap fail with EACCES (a seccomp filter or
 * hidepid). In both, the first fork must leave ccow_state "disabled: <what>
 * <errno>", the child's snapshot and the parent's counters must stay
 * intact, and later forks must not be counted. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hpmalloc.h"
#include "prim/prim.h"
#include "testhelper.h"

#define TABLE_WORDS ((size_t)(8u << 20) / 8)

static hpm_os_t fake_os;
static uint64_t *table;
static atomic_int stop_req, pause_req, paused;
static uint64_t writes_done;

static int failing_collapse(void *addr, size_t len) { (void)addr; (void)len; return EINVAL; }
static int failing_pagemap(const void *addr, size_t n, uint64_t *e) { (void)addr; (void)n; (void)e; return EACCES; }

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

/* Forks with the writer paused; the child checks its snapshot after hold_ms. */
static int fork_and_check(long hold_ms) {
    atomic_store(&pause_req, 1);
    while (!atomic_load(&paused)) { }
    uint64_t want = table_sum();
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(hold_ms);
        _exit(table_sum() == want ? 0 : 1);
    }
    atomic_store(&pause_req, 0);
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 0;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int scenario(const char *what) {
    fake_os = _hpm_os_linux;   /* before the first allocation: the core copies the pointer */
    if (!strcmp(what, "collapse")) fake_os.collapse = failing_collapse;
    else fake_os.pagemap = failing_pagemap;
    _hpm_os = &fake_os;
    CHECK(hpm_ccow_config("all", 0) == 0);
    table = hpm_calloc(TABLE_WORDS, 8);
    CHECK(table != NULL);
    if (!table) return TEST_DONE();
    pthread_t th;
    pthread_create(&th, NULL, writer_main, NULL);
    sleep_ms(20);
    CHECK(fork_and_check(300), "%s: the child's snapshot changed", what);
    hpm_stats_t s;
    for (int i = 0; i < 1000; i++) {
        hpm_stats_get(&s);
        if (!strncmp(s.ccow_state, "disabled", 8)) break;
        sleep_ms(5);
    }
    char want[64];
    snprintf(want, sizeof want, "disabled: %s %s", !strcmp(what, "collapse") ? "MADV_COLLAPSE" : "pagemap",
             !strcmp(what, "collapse") ? "EINVAL" : "EACCES");
    CHECK(!strcmp(s.ccow_state, want), "%s: ccow_state '%s', want '%s'", what, s.ccow_state, want);
    CHECK(s.ccow_forks == 1 && s.ccow_active == 0, "%s: forks %llu active %u", what,
          (unsigned long long)s.ccow_forks, s.ccow_active);
    CHECK(!strcmp(what, "pagemap") ? s.ccow_regions_precopied == 0 : 1, "nothing copied without pagemap");
    CHECK(fork_and_check(50), "%s: second fork's snapshot changed", what);
    hpm_stats_get(&s);
    CHECK(s.ccow_forks == 1, "%s: a disabled CCoW still counts forks (%llu)", what, (unsigned long long)s.ccow_forks);
    atomic_store(&stop_req, 1);
    pthread_join(th, NULL);
    CHECK(table_sum() == writes_done, "%s: parent lost writes: sum %llu, writes %llu", what,
          (unsigned long long)table_sum(), (unsigned long long)writes_done);
    printf("# %s: ccow_state '%s'\n", what, s.ccow_state);
    return TEST_DONE();
}

int main(int argc, char **argv) {
    if (argc == 2) return scenario(argv[1]);
    const char *names[] = {"collapse", "pagemap"};
    for (int i = 0; i < 2; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            execl("/proc/self/exe", argv[0], names[i], (char *)NULL);
            _exit(127);
        }
        int st = 0;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "scenario %s failed (status %d)",
              names[i], st);
    }
    return TEST_DONE();
}
