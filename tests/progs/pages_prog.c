/* pages_prog.c: allocates MiB megabytes in 64 KiB..1 MiB blocks, writes and
 * checks them, then prints one line with what the kernel says about its
 * memory: "anon_kib=N anon_huge_kib=N hugetlb_free=N waited_ms=N check=ok".
 * Used by tests/scripts/pages_modes.sh under each HPM_PAGES mode.
 * `pages_prog MIB [WAIT_HUGE_KIB]`: with WAIT_HUGE_KIB, it first waits (up
 * to 5 s, polling every 10 ms) until AnonHugePages reaches that much. In
 * THP mode the first hugepages are collapsed by a thread of the
 * allocator's own once the heap outgrows them, and a busy machine may not
 * have run it yet when the last block is written (CI: 58 MiB of a 64 MiB
 * heap huge, the first 8 hugepages' collapse still under way). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "testhelper.h"

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? (size_t)atol(argv[1]) : 64, total = 0, n = 0;
    long wait_huge_kib = argc > 2 ? atol(argv[2]) : 0;
    static unsigned char *blocks[4096];
    while (total < mib << 20 && n < 4096) {
        size_t size = (64u << 10) << (n % 5);
        unsigned char *p = malloc(size);
        if (!p) { printf("check=fail malloc\n"); return 1; }
        memset(p, (int)n, size);
        blocks[n++] = p;
        total += size;
    }
    for (size_t i = 0; i < n; i++)
        if (blocks[i][0] != (unsigned char)i || blocks[i][((64u << 10) << (i % 5)) - 1] != (unsigned char)i) {
            printf("check=fail content\n");
            return 1;
        }
    int waited_ms = 0;
    const struct timespec tick = {0, 10 * 1000000L};
    while (wait_huge_kib > 0 && waited_ms < 5000 && th_field_kb("/proc/self/smaps_rollup", "AnonHugePages") < wait_huge_kib) {
        nanosleep(&tick, NULL);
        waited_ms += 10;
    }
    printf("anon_kib=%ld anon_huge_kib=%ld hugetlb_free=%ld waited_ms=%d check=ok\n",
           th_field_kb("/proc/self/smaps_rollup", "Anonymous"), th_field_kb("/proc/self/smaps_rollup", "AnonHugePages"),
           th_field_kb("/proc/meminfo", "HugePages_Free"), waited_ms);
    fflush(stdout);
    for (size_t i = 0; i < n; i++) free(blocks[i]);
    return 0;
}
