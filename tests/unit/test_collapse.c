/* test_collapse.c: the collapse of the first hugepages (THP mode). A heap
 * starts on 4 KiB pages; when it outgrows its first HPM_SMALL_START_HP
 * hugepages (16 MiB) they are collapsed with MADV_COLLAPSE, which takes 0.5 to 10 ms per
 * hugepage on this VM. Checked, on the real kernel, through an OS table
 * that forwards to the real one and records which thread collapses:
 * - by default no collapse runs in the thread whose malloc outgrew the
 *   small start (a thread of the library's own does it), and within 3 s
 *   the heap is in huge pages, the small start included (AnonHugePages);
 * - with HPM_BACKGROUND=0 (no threads of the library's own) the thread
 *   that outgrew them collapses them itself, at once;
 * - every block keeps its contents in both cases.
 * The HPM_BACKGROUND=0 case runs in a re-executed copy of this program. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

static const hpm_os_t *real;
static hpm_os_t recording;
static atomic_int calls, calls_in_main, calls_ok;
static pid_t main_tid;

static int rec_collapse(void *addr, size_t n) {
    atomic_fetch_add(&calls, 1);
    if (gettid() == main_tid) atomic_fetch_add(&calls_in_main, 1);
    int e = real->collapse(addr, n);
    if (e == 0) atomic_fetch_add(&calls_ok, 1);
    return e;
}

__attribute__((constructor(101))) static void recording_install(void) {
    real = _hpm_os;
    recording = *real;
    recording.collapse = rec_collapse;
    _hpm_os = &recording;
    main_tid = gettid();
}

#define MIB ((size_t)1 << 20)
/* the small start and 2 hugepages more */
enum { BLOCK = 256, HEAP_MIB = 2 * (HPM_SMALL_START_HP + 2), N = (int)(HEAP_MIB * MIB / BLOCK) };

static long huge_kb(void) { return th_field_kb("/proc/self/smaps_rollup", "AnonHugePages"); }

/* HEAP_MIB of 256-byte blocks, each filled with its own byte. */
static unsigned char **fill(void) {
    unsigned char **p = malloc(N * sizeof *p);
    for (int i = 0; p && i < N; i++) {
        p[i] = malloc(BLOCK);
        if (!p[i]) return NULL;
        memset(p[i], i & 0xff, BLOCK);
    }
    return p;
}

static int lost(unsigned char **p) {
    int bad = 0;
    for (int i = 0; i < N; i++)
        if (p[i][0] != (unsigned char)(i & 0xff) || p[i][BLOCK - 1] != (unsigned char)(i & 0xff)) bad++;
    return bad;
}

/* HPM_BACKGROUND=0: the collapse happens in this thread, before the
 * malloc that queued it returns. */
static int run_sync(void) {
    unsigned char **p = fill();
    CHECK(p != NULL, "%d MiB of blocks", HEAP_MIB);
    if (!p) return TEST_DONE();
    int c = atomic_load(&calls), in_main = atomic_load(&calls_in_main);
    printf("HPM_BACKGROUND=0: %d collapse calls, %d in the thread that outgrew the small start, %d succeeded\n", c, in_main,
           atomic_load(&calls_ok));
    CHECK(c >= HPM_SMALL_START_HP && in_main == c, "%d calls, %d of them in the main thread", c, in_main);
    CHECK(lost(p) == 0, "%d blocks lost their contents", lost(p));
    return TEST_DONE();
}

int main(int argc, char **argv) {
    char thp[128] = "";
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (f) { if (!fgets(thp, sizeof thp, f)) thp[0] = 0; fclose(f); }
    if (!strstr(thp, "[madvise]") && !strstr(thp, "[always]")) {
        printf("THP is off here (%s): nothing to collapse\n", thp);
        CHECK(1);
        return TEST_DONE();
    }
    if (argc > 1 && !strcmp(argv[1], "sync")) return run_sync();

    unsigned char **p = fill();
    CHECK(p != NULL, "%d MiB of blocks", HEAP_MIB);
    if (!p) return TEST_DONE();
    int in_main = atomic_load(&calls_in_main);
    CHECK(in_main == 0, "%d collapses ran in the thread that outgrew the small start", in_main);
    long kb = 0;
    for (int i = 0; i < 300 && atomic_load(&calls_ok) < HPM_SMALL_START_HP; i++) usleep(10000);
    kb = huge_kb();
    printf("default: %d collapse calls (%d succeeded), %d in the main thread; AnonHugePages %ld KiB\n",
           atomic_load(&calls), atomic_load(&calls_ok), atomic_load(&calls_in_main), kb);
    CHECK(atomic_load(&calls_ok) >= HPM_SMALL_START_HP, "the collapse thread made %d calls, %d succeeded", atomic_load(&calls),
          atomic_load(&calls_ok));
    /* HEAP_MIB of blocks span the small start and 2 hugepages more (with
     * the slab records, perhaps one more); without the collapse only those
     * 2 or 3 would be huge */
    CHECK(kb >= (long)((HEAP_MIB - 2) * MIB / 1024), "AnonHugePages %ld KiB after 3 s", kb);
    CHECK(lost(p) == 0, "%d blocks lost their contents", lost(p));

    /* the same without background threads, in a fresh process */
    fflush(stdout);
    char self[4096], cmd[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    snprintf(cmd, sizeof cmd, "HPM_BACKGROUND=0 '%s' sync", len > 0 ? self : argv[0]);
    int st = system(cmd);
    CHECK(st == 0, "the HPM_BACKGROUND=0 run exited with %d", st);
    return TEST_DONE();
}
