/* stat_agree.c: for tests/scripts/stat_cli.sh (run under LD_PRELOAD with
 * HPM_STATS=1). Allocates a mix (small, medium, large and 2 MiB-aligned
 * blocks, some freed, a trim), prints "READY", then waits without
 * allocating until its standard input closes, and exits: the counters
 * `hpm stat` reads while it waits must equal those HPM_STATS prints at
 * exit. */
#include <dlfcn.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "hpmalloc.h"

int main(void) {
    static void *keep[4096];
    for (int i = 0; i < 4096; i++) {
        size_t size = (size_t)16 << (i % 12);
        if (i % 97 == 0) size = (size_t)5 << 20;   /* large: whole hugepages */
        keep[i] = malloc(size);
        if (keep[i]) memset(keep[i], 1, size < 4096 ? size : 4096);
    }
    void *aligned = NULL;
    if (posix_memalign(&aligned, 1 << 21, 3 << 20) == 0) memset(aligned, 2, 4096);
    for (int i = 0; i < 4096; i += 3) { free(keep[i]); keep[i] = NULL; }
    malloc_trim(0);
    /* bytes in use is summed over the thread heaps on every 16th pageheap
     * change, each background tick and each hpm_stats_get (docs/stat.md):
     * take one so the published value is exact whatever the timing */
    void (*stats_get)(hpm_stats_t *) = (void (*)(hpm_stats_t *))dlsym(RTLD_DEFAULT, "hpm_stats_get");
    hpm_stats_t s;
    if (stats_get) stats_get(&s);
    write(1, "READY\n", 6);
    char c;
    while (read(0, &c, 1) > 0) {}
    return keep[1] && aligned ? 0 : 1;
}
