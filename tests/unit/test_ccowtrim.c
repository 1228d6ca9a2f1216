/* test_ccowtrim.c: CCoW's collapse after fork faults back the pages that
 * a trim gave back inside the hugepages it pre-copies; they must not stay
 * counted as given back (collapse.c, _hpm_hp_collapsed), or later trims
 * skip them and they stay resident (the small start's collapse had the
 * same fault: test_collapse, "trim").
 *
 * 40 MiB of 256-byte blocks; three runs of 256 KiB in every four freed and
 * trimmed (pages given back inside partial hugepages); with CCoW "all"
 * (mechanism collapse) a fork pre-copies every hugepage in use while the
 * child lives. Afterwards the count of pages given back must have fallen
 * by at least half, a second trim must give back at least half of them
 * again (RSS), and every block must keep its contents. Then the same in
 * a re-executed copy with the swap mechanism (the spare it maps over a
 * region is resident throughout). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

#define MIB ((size_t)1 << 20)
enum { BLOCK = 256, HEAP_MIB = 40, N = (int)(HEAP_MIB * MIB / BLOCK), RUN = (int)(256 * 1024 / BLOCK) };

static long rss_kb(void) { return th_field_kb("/proc/self/smaps_rollup", "Rss"); }

int main(int argc, char **argv) {
    (void)argc;
    CHECK(hpm_ccow_config("all", 0) == 0);
    unsigned char **p = malloc(N * sizeof *p);
    CHECK(p != NULL);
    if (!p) return TEST_DONE();
    for (int i = 0; i < N; i++) {
        p[i] = malloc(BLOCK);
        if (!p[i]) { CHECK(0, "block %d", i); return TEST_DONE(); }
        memset(p[i], i & 0xff, BLOCK);
    }
    usleep(300 * 1000);   /* the small start's collapse, in a thread of the library's own */
    for (int i = 0; i < N; i++)
        if ((i / RUN) % 4 != 0) { free(p[i]); p[i] = NULL; }
    hpm_trim();
    hpm_stats_t s;
    hpm_stats_get(&s);
    unsigned long long given = s.pages_subreleased, forks = s.ccow_forks, copied = s.ccow_regions_precopied;
    long rss_trimmed = rss_kb();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        usleep(500 * 1000);
        _exit(p[0][0] == 0 ? 0 : 1);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
    for (int i = 0; i < 200; i++) {   /* the period ends once the thread sees the child gone */
        hpm_stats_get(&s);
        if (!s.ccow_active) break;
        usleep(10 * 1000);
    }
    long rss_copied = rss_kb();
    unsigned long long still = s.pages_subreleased;
    hpm_trim();
    hpm_stats_get(&s);
    long rss_again = rss_kb();
    printf("trim: %llu pages given back, RSS %ld KiB; fork: %llu regions pre-copied, %llu pages counted given back, "
           "RSS %ld KiB; trim again: RSS %ld KiB\n",
           given, rss_trimmed, s.ccow_regions_precopied - copied, still, rss_copied, rss_again);
    CHECK(s.ccow_forks == forks + 1, "CCoW saw %llu forks", s.ccow_forks - forks);
    CHECK(given >= 2048, "the first trim gave back %llu pages (want several MiB)", given);
    CHECK(s.ccow_regions_precopied - copied >= 10, "%llu regions pre-copied", s.ccow_regions_precopied - copied);
    CHECK(still <= given / 2, "%llu of %llu pages still counted given back after CCoW's collapses", still, given);
    CHECK(rss_copied - rss_again >= (long)given * 4 / 2, "the second trim: RSS %ld -> %ld KiB", rss_copied, rss_again);
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (p[i] && (p[i][0] != (unsigned char)(i & 0xff) || p[i][BLOCK - 1] != (unsigned char)(i & 0xff))) bad++;
    CHECK(bad == 0, "%d blocks lost their contents", bad);
    if (!getenv("HPM_CCOW_MECH")) th_run_self_with("HPM_CCOW_MECH", "swap", argv);   /* the same with the swap mechanism */
    return TEST_DONE();
}
