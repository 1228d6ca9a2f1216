/* test_calloc.c: a large calloc after reuse writes only what it must
 * (issue 13, item 1). Memory that was never touched, or was given back,
 * already reads as zero: calloc must not write it, or RSS grows by the
 * whole request. The cases: after a freed 2 MiB-aligned allocation, after
 * a same-size malloc/free, after a fully written block, and after freeing
 * a block that shared its last hugepage. Every case checks the contents. */
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "testhelper.h"

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

static long rss_kb(void) { return th_field_kb("/proc/self/status", "VmRSS"); }

/* every byte of p[0, n) is zero (reads only) */
static int all_zero(const unsigned char *p, size_t n) {
    const uint64_t *w = (const uint64_t *)p;
    uint64_t acc = 0;
    for (size_t i = 0; i < n / 8; i++) acc |= w[i];
    return acc == 0;
}

/* calloc(1, n) grows RSS by less than limit_mib and reads as zero */
static void calloc_case(const char *what, size_t n, long limit_mib) {
    long before = rss_kb();
    unsigned char *q = calloc(1, n);
    long after = rss_kb();
    CHECK(q != NULL, "%s: calloc(%zu) failed", what, n);
    if (!q) return;
    CHECK((after - before) / 1024 < limit_mib, "%s: calloc(%zu MiB) grew RSS by %ld MiB (limit %ld)",
          what, n / MIB, (after - before) / 1024, limit_mib);
    CHECK(all_zero(q, n), "%s: calloc'd memory is not zero", what);
    free(q);
    malloc_trim(0);   /* the next case starts with nothing resident */
}

int main(void) {
    CHECK(rss_kb() > 0);   /* stdio and a first hugepage of small objects */
    /* 1: a freed 2 MiB-aligned allocation, written */
    unsigned char *a = aligned_alloc(2 * MIB, 2 * MIB);
    CHECK(a != NULL);
    memset(a, 0xa5, 2 * MIB);
    free(a);
    calloc_case("after a freed 2 MiB-aligned block", GIB, 32);

    /* 2: a same-size malloc/free, a few pages written at both ends */
    unsigned char *m = malloc(GIB);
    CHECK(m != NULL);
    memset(m, 0x5a, 4 * MIB);
    memset(m + GIB - 4 * MIB, 0x5a, 4 * MIB);
    free(m);
    calloc_case("after a same-size malloc/free", GIB, 32);

    /* 3: a fully written block of the same size: all of it must read zero */
    m = malloc(64 * MIB);
    CHECK(m != NULL);
    memset(m, 0xff, 64 * MIB);
    free(m);
    calloc_case("after a fully written 64 MiB block", 64 * MIB, 80);

    /* 4: a large block whose tail hugepage is shared with a medium block */
    unsigned char *big = malloc(5 * MIB + 100 * 4096);
    unsigned char *med = malloc(200 * 1024);
    CHECK(big && med);
    memset(big, 0x11, 5 * MIB + 100 * 4096);
    memset(med, 0x22, 200 * 1024);
    free(big);
    unsigned char *z = calloc(1, 5 * MIB + 100 * 4096);
    CHECK(z && all_zero(z, 5 * MIB + 100 * 4096), "a calloc reusing a shared tail is zero");
    CHECK(med[0] == 0x22 && med[200 * 1024 - 1] == 0x22, "the neighbour keeps its data");
    free(z);
    free(med);

    /* 5: repeated large calloc/free of a written block stays zero */
    for (int r = 0; r < 4; r++) {
        unsigned char *c = calloc(3, 7 * MIB + 12345);
        CHECK(c && all_zero(c, 21 * MIB + 3 * 12345), "round %d zero", r);
        if (c) memset(c, 0x77, 21 * MIB);
        free(c);
    }
    return TEST_DONE();
}
