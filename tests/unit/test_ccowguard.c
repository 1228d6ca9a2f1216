/* test_ccowguard.c: CCoW and a page the program protected.
 *
 * A program may make a page of a malloc'd block read-only or inaccessible
 * (a guard page under a coroutine stack, a write detector). CCoW's
 * collapse and prefault mechanisms broke a hot region's copy-on-write
 * sharing with an atomic no-op write, on the region's first page or on
 * every shared page: on such a page the CCoW thread took SIGSEGV, and the
 * program died right after its fork (session 50's review). Now they use
 * MADV_POPULATE_WRITE, which fails on that page instead. The swap
 * mechanism copied such a region with memcpy (SIGSEGV on PROT_NONE) and
 * mapped it back read-write; now it leaves any region that is not rw-p
 * throughout to collapse (test_ccowswap.c checks the protections).
 *
 * The program runs itself again with HPM_CCOW_MECH set to each mechanism;
 * there, with CCoW on for every region: 16 blocks of 1 MiB, the first page
 * of one that starts a 2 MiB region made PROT_READ (then PROT_NONE), a
 * fork, and the parent writing the other blocks for a second while the
 * child holds its snapshot. The parent must live, CCoW must have copied
 * regions, and the protected page must keep its bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "hpmalloc.h"
#include "testhelper.h"

#define N_BLOCKS 16
#define BLOCK_BYTES (1u << 20)
#define HP ((uintptr_t)2 << 20)

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void guarded_fork(int prot) {
    static char *blocks[N_BLOCKS];
    char *guarded = NULL;
    for (int i = 0; i < N_BLOCKS; i++) {
        blocks[i] = malloc(BLOCK_BYTES);
        memset(blocks[i], 0x5a, BLOCK_BYTES);
        if (!guarded && ((uintptr_t)blocks[i] & (HP - 1)) == 0) guarded = blocks[i];
    }
    CHECK(guarded != NULL, "a block that starts a 2 MiB region");
    if (!guarded) return;
    CHECK(mprotect(guarded, 4096, prot) == 0, "mprotect %d", prot);
    hpm_stats_t before, after;
    hpm_stats_get(&before);
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(1000);
        _exit(prot == PROT_NONE || guarded[0] == 0x5a ? 0 : 1);
    }
    CHECK(pid > 0);
    for (int round = 0; round < 10; round++) {   /* the parent writes on: its regions are hot */
        for (int i = 0; i < N_BLOCKS; i++)
            if (blocks[i] != guarded) memset(blocks[i], round, BLOCK_BYTES);
        sleep_ms(100);
    }
    int st = 0;
    if (pid > 0) waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
    hpm_stats_get(&after);
    CHECK(after.ccow_regions_precopied > before.ccow_regions_precopied, "CCoW copied %llu regions after the fork",
          (unsigned long long)(after.ccow_regions_precopied - before.ccow_regions_precopied));
    CHECK(mprotect(guarded, 4096, PROT_READ | PROT_WRITE) == 0);
    size_t bad = 0;
    for (size_t k = 0; k < 4096; k++) bad += guarded[k] != 0x5a;
    CHECK(bad == 0, "the protected page lost %zu bytes", bad);
    for (int i = 0; i < N_BLOCKS; i++) free(blocks[i]);
}

int main(int argc, char **argv) {
    (void)argc;
    const char *mech = getenv("HPM_CCOW_MECH");
    if (mech) {
        CHECK(hpm_ccow_config("all", 0) == 0, "CCoW on for every region");
        guarded_fork(PROT_READ);
        guarded_fork(PROT_NONE);
        printf("HPM_CCOW_MECH=%s: the parent lived through both forks\n", mech);
        return TEST_DONE();
    }
    th_run_self_with("HPM_CCOW_MECH", "collapse", argv);
    th_run_self_with("HPM_CCOW_MECH", "prefault", argv);
    th_run_self_with("HPM_CCOW_MECH", "swap", argv);
    return TEST_DONE();
}
