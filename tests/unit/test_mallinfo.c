/* test_mallinfo.c: glibc's introspection names answer for hpmalloc's heap
 * (control.c): mallinfo2 and mallinfo count the live bytes (up by 10 MiB
 * after 10 MiB of blocks, down again after the frees) inside a heap that
 * holds at least that much; malloc_info writes its XML and refuses
 * options other than 0; malloc_stats prints the counters on stderr;
 * mallopt accepts any parameter (1, as glibc does) and ignores it, and
 * the heap works after them. Before control.c had them, glibc's versions
 * answered for glibc's own, empty heap (uordblks near 0).
 * In the sanitizer builds (HPM_NO_OVERRIDE) the libc names stay the
 * sanitizer's: nothing to test there. */
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "testhelper.h"

#define MIB ((size_t)1 << 20)

#ifdef HPM_NAMES_H
int main(void) {
    printf("skipped: the sanitizer builds keep the libc names\n");
    CHECK(1);
    return TEST_DONE();
}
#else

static void stats_to_stderr(void) { malloc_stats(); }

int main(void) {
    enum { N = 1000, BLOCK = 10240 };
    static char *v[N];
    free(malloc(16));   /* the heap is there */
    struct mallinfo2 a = mallinfo2();
    for (int i = 0; i < N; i++) {
        v[i] = malloc(BLOCK);
        memset(v[i], i & 0xff, BLOCK);
    }
    struct mallinfo2 b = mallinfo2();
    size_t grown = b.uordblks - a.uordblks;
    CHECK(b.uordblks >= a.uordblks && grown >= (size_t)N * BLOCK && grown <= (size_t)N * BLOCK * 5 / 4,
          "uordblks grew by %zu bytes for %d blocks of %d", grown, N, BLOCK);
    CHECK(b.arena >= b.uordblks && b.fordblks == b.arena - b.uordblks, "arena %zu = in use %zu + free %zu", b.arena,
          b.uordblks, b.fordblks);
    CHECK(b.arena >= 10 * MIB, "arena %zu holds the 10 MiB", b.arena);
    CHECK(b.hblkhd == 0 && b.hblks == 0, "no separate mmapped chunks: %zu in %zu", b.hblkhd, b.hblks);
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo old = mallinfo();
#pragma GCC diagnostic pop
    CHECK(old.uordblks > 0 && (size_t)old.uordblks == b.uordblks, "mallinfo agrees: %d against %zu", old.uordblks,
          b.uordblks);

    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (f) {
        CHECK(malloc_info(0, f) == 0);
        char xml[2048] = {0};
        rewind(f);
        size_t n = fread(xml, 1, sizeof xml - 1, f);
        CHECK(n > 0 && strncmp(xml, "<malloc version=\"hpmalloc-", 26) == 0, "malloc_info wrote: %.60s", xml);
        CHECK(strstr(xml, "<total type=\"in-use\" size=\"") && strstr(xml, "</malloc>"), "%s", xml);
        errno = 0;
        CHECK(malloc_info(1, f) == -1 && errno == EINVAL, "options 1 refused with EINVAL: errno %d", errno);
        fclose(f);
    }

    char err[4096];
    int st = th_run_child(stats_to_stderr, err, sizeof err);
    CHECK(st == 0 && strstr(err, "bytes in use") && strstr(err, "hugepages backed"), "malloc_stats printed: %.200s",
          err);

    CHECK(mallopt(M_MMAP_THRESHOLD, 65536) == 1 && mallopt(M_ARENA_MAX, 1) == 1 && mallopt(M_PERTURB, 0x55) == 1 &&
          mallopt(M_TRIM_THRESHOLD, 0) == 1, "glibc's parameters are accepted");
    CHECK(mallopt(12345, 1) == 1, "an unknown parameter is accepted and ignored, as glibc does");

    int bad = 0;
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < BLOCK; k += 512) bad += v[i][k] != (char)(i & 0xff);
        free(v[i]);
    }
    CHECK(bad == 0, "%d bytes changed", bad);
    struct mallinfo2 c = mallinfo2();
    CHECK(c.uordblks + (size_t)N * BLOCK <= b.uordblks, "uordblks fell by %zu after the frees", b.uordblks - c.uordblks);
    char *p = malloc(100000);
    CHECK(p != NULL && malloc_usable_size(p) >= 100000, "the heap works after mallopt");
    free(p);
    return TEST_DONE();
}
#endif
