/* test_api.c: API conformance of hpmalloc, linked statically with
 * build/libhpmalloc.a (whose libc names override the C library's, so
 * malloc here is hpmalloc's; the first check makes sure of it).
 *
 * Covers every allocation function of include/hpmalloc.h and the libc
 * names: alignments from 8 bytes to 1 GiB (pointer aligned, memory
 * writable), realloc growing and shrinking across small, medium and large
 * with the contents checked, calloc zeroing (also of reused memory),
 * malloc(0), the errno cases (ENOMEM for impossible sizes and overflows,
 * EINVAL for bad alignments), hpm_range on interior pointers and on things
 * that are not live allocations (also blocks freed by another thread), the
 * reuse of freed blocks that are freed again unwritten, the counters,
 * options and hpm_trim.
 * Prints "N passed, N failed". */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hpmalloc.h"
#include "parked_cache.h"
#include "testhelper.h"

/* glibc declares these only from 2.38 on; the same prototypes again are harmless. */
void free_sized(void *p, size_t size);
void free_aligned_sized(void *p, size_t alignment, size_t size);

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

static int global_var;

/* Hides a size from the compiler, so it neither warns about nor folds the
 * deliberately impossible requests. */
static size_t opaque(size_t n)
{
    __asm__ volatile("" : "+r"(n));
    return n;
}

/* Hides where a pointer goes, for the calls that must fail and leave it live. */
static void *opaque_ptr(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

/* Byte i of a block filled by fill(p, n, seed). */
static unsigned char pat(size_t i, unsigned seed) { return (unsigned char)(i * 131u + seed + (i >> 12)); }

static void fill(void *p, size_t n, unsigned seed)
{
    unsigned char *c = p;
    for (size_t i = 0; i < n; i++) c[i] = pat(i, seed);
}

/* Returns the first offset below n that does not hold the pattern, or n. */
static size_t verify(const void *p, size_t n, unsigned seed)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != pat(i, seed)) return i;
    return n;
}

static int all_zero(const void *p, size_t n)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i]) return 0;
    return 1;
}

/* Writes the whole block when small, else its first and last 64 KiB. */
static void touch(void *p, size_t n)
{
    if (n <= 1 * MiB) { memset(p, 0xa5, n); return; }
    memset(p, 0xa5, 64 * KiB);
    memset((char *)p + n - 64 * KiB, 0xa5, 64 * KiB);
}

static void test_is_hpmalloc(void)
{
    void *p = malloc(100);
    if (p) memset(p, 0, 100);
    CHECK(p && hpm_range(p, NULL, NULL), "malloc is not hpmalloc's (hpm_range does not know %p)", p);
    free(p);
}

static void test_malloc_zero(void)
{
    void *ps[64];
    int distinct = 1;
    for (int i = 0; i < 64; i++) {
        ps[i] = (i & 1) ? hpm_malloc(0) : malloc(0);
        CHECK(ps[i] != NULL, "malloc(0) #%d returned NULL", i);
        for (int j = 0; j < i; j++)
            if (ps[i] && ps[i] == ps[j]) distinct = 0;
    }
    CHECK(distinct, "malloc(0) returned the same pointer twice");
    for (int i = 0; i < 64; i++) free(ps[i]);
    CHECK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) = %zu", malloc_usable_size(NULL));
    CHECK(hpm_usable_size(NULL) == 0, "hpm_usable_size(NULL) = %zu", hpm_usable_size(NULL));
    free(NULL);
    hpm_free(NULL);
    free_sized(NULL, 0);
    hpm_free_sized(NULL, 0);
}

static void test_sizes(void)
{
    static const size_t sizes[] = { 1, 7, 8, 15, 16, 24, 100, 255, 512, 1000, 4095, 4096, 4097,
                                    16 * KiB, 100 * KiB, 255 * KiB, 1 * MiB, 2 * MiB - 1, 2 * MiB,
                                    2 * MiB + 1, 5 * MiB, 33 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        char *p = malloc(n);
        char *q = hpm_malloc(n);
        CHECK(p && q, "malloc(%zu) failed", n);
        if (!p || !q) continue;
        CHECK((uintptr_t)p % 16 == 0 || n % 16, "malloc(%zu) = %p not 16-aligned", n, (void *)p);
        CHECK(malloc_usable_size(p) >= n, "malloc_usable_size %zu < %zu", malloc_usable_size(p), n);
        CHECK(hpm_usable_size(q) >= n, "hpm_usable_size %zu < %zu", hpm_usable_size(q), n);
        fill(p, n, 1);
        fill(q, n, 2);
        CHECK(verify(p, n, 1) == n && verify(q, n, 2) == n, "blocks of %zu overlap", n);
        free(p);
        hpm_free_sized(q, n);
    }
}

/* Fundamental alignment (C17 7.22.3): a block of n bytes is aligned for
 * every type of at most n bytes, so to 16 when n is a multiple of 16 and
 * to the largest power of two dividing n otherwise; hpmalloc gives at
 * least 8 (blocks of 24, 40 and 56 bytes are 8-aligned, as mimalloc's and
 * TCMalloc's). 64 blocks of each size, so that most are not a slab's first;
 * and aligned_alloc(16, n) gives 16 for those sizes too. */
static void test_fundamental_alignment(void)
{
    enum { PER_SIZE = 64 };
    static void *blocks[PER_SIZE];
    size_t wrong = 0, wrong16 = 0, eight = 0;
    for (size_t n = 1; n <= 256; n++) {
        size_t need = 16;
        while (n % need) need /= 2;
        for (int i = 0; i < PER_SIZE; i++) {
            blocks[i] = malloc(n);
            uintptr_t a = (uintptr_t)blocks[i];
            if (!blocks[i] || a % need || a % 8) wrong++;
            eight += a % 16 != 0;
        }
        for (int i = 0; i < PER_SIZE; i++) free(blocks[i]);
        for (int i = 0; i < PER_SIZE; i++) {
            blocks[i] = aligned_alloc(16, n);
            if (!blocks[i] || (uintptr_t)blocks[i] % 16) wrong16++;
        }
        for (int i = 0; i < PER_SIZE; i++) free(blocks[i]);
    }
    CHECK(wrong == 0, "%zu blocks of 1..256 bytes lack their fundamental alignment", wrong);
    CHECK(wrong16 == 0, "%zu aligned_alloc(16, 1..256) blocks are not 16-aligned", wrong16);
    CHECK(eight > 0, "no block was only 8-aligned: the 24/40/56-byte classes are not in use");
}

static void check_aligned(void *p, size_t align, size_t size, const char *fn)
{
    CHECK(p != NULL, "%s(align %zu, size %zu) returned NULL (errno %d)", fn, align, size, errno);
    if (!p) return;
    CHECK((uintptr_t)p % align == 0, "%s(align %zu) = %p misaligned", fn, align, p);
    touch(p, size);
    void *base = NULL;
    size_t usable = 0;
    CHECK(hpm_range((char *)p + size - 1, &base, &usable) && base == p && usable >= size,
          "%s(align %zu, size %zu): hpm_range of the last byte gives %p, %zu", fn, align, size, base,
          usable);
}

static void test_alignments(void)
{
    for (size_t align = 8; align <= GiB; align *= 2) {
        size_t sizes[3] = { 1, 100, align < 32 * MiB ? align : 32 * MiB };
        for (int k = 0; k < 3; k++) {
            size_t n = sizes[k];
            void *p = NULL;
            int rc = posix_memalign(&p, align, n);
            CHECK(rc == 0, "posix_memalign(%zu, %zu) = %d", align, n, rc);
            check_aligned(p, align, n, "posix_memalign");
            free(p);
            p = NULL;
            rc = hpm_posix_memalign(&p, align, n);
            CHECK(rc == 0, "hpm_posix_memalign(%zu, %zu) = %d", align, n, rc);
            check_aligned(p, align, n, "hpm_posix_memalign");
            hpm_free(p);
            size_t an = (n + align - 1) / align * align; /* a multiple, as C11 asked */
            p = aligned_alloc(align, an);
            check_aligned(p, align, an, "aligned_alloc");
            free_aligned_sized(p, align, an);
            p = hpm_aligned_alloc(align, n); /* C17: any size */
            check_aligned(p, align, n, "hpm_aligned_alloc");
            hpm_free_aligned_sized(p, align, n);
            p = memalign(align, n);
            check_aligned(p, align, n, "memalign");
            free(p);
            p = hpm_memalign(align, n);
            check_aligned(p, align, n, "hpm_memalign");
            hpm_free(p);
        }
    }
    void *v = valloc(1);
    CHECK(v && (uintptr_t)v % 4096 == 0, "valloc(1) = %p", v);
    if (v) memset(v, 1, 1);
    free(v);
    v = pvalloc(100);
    CHECK(v && (uintptr_t)v % 4096 == 0 && malloc_usable_size(v) >= 4096,
          "pvalloc(100) = %p usable %zu (want page-aligned, >= 4096)", v, v ? malloc_usable_size(v) : 0);
    if (v) memset(v, 1, 4096);
    free(v);
    v = pvalloc(5000);
    CHECK(v && (uintptr_t)v % 4096 == 0 && malloc_usable_size(v) >= 8192, "pvalloc(5000) = %p", v);
    free(v);
}

/* Size 0 with an alignment over a page (review, session 49): the request
 * became a span of 0 pages, whose "start" was the next span's. Then
 * posix_memalign(8 KiB, 0) returned the address the next malloc(12 KiB)
 * returned too, and free of it freed that block; with 2 MiB alignment as
 * a process's first call it crashed. Each must be a block of its own,
 * disjoint from the blocks allocated after it, which its free leaves
 * alone. */
static void aligned_zero_first(void)
{
    void *p = aligned_alloc(2 * MiB, 0);
    if (!p || (uintptr_t)p % (2 * MiB)) {
        fprintf(stderr, "aligned_alloc(2 MiB, 0) = %p\n", p);
        _exit(1);
    }
    free(p);
}

static void test_aligned_size_zero(void)
{
    static const size_t aligns[] = { 16, 4 * KiB, 8 * KiB, 64 * KiB, 1 * MiB, 2 * MiB, 4 * MiB };
    for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++) {
        size_t a = aligns[i];
        for (int fn = 0; fn < 3; fn++) {
            void *p = NULL;
            if (fn == 0) CHECK(posix_memalign(&p, a, 0) == 0, "posix_memalign(%zu, 0) failed", a);
            else if (fn == 1) p = aligned_alloc(a, 0);
            else p = memalign(a, 0);
            CHECK(p && (uintptr_t)p % a == 0, "fn %d(align %zu, 0) = %p", fn, a, p);
            void *after[4];
            size_t after_bytes[4] = { 12 * KiB, 16 * KiB, 3 * MiB, a + 4 * KiB };
            for (int k = 0; k < 4; k++) {
                after[k] = malloc(after_bytes[k]);
                CHECK(after[k] && after[k] != p, "fn %d(align %zu, 0) = %p, and malloc(%zu) = %p", fn, a, p,
                      after_bytes[k], after[k]);
                if (after[k]) memset(after[k], 0x5a, after_bytes[k]);
            }
            void *base = NULL;
            size_t len = 0;
            CHECK(p && hpm_range(p, &base, &len) && base == p && len >= 1,
                  "fn %d(align %zu, 0) = %p: range %p + %zu", fn, a, p, base, len);
            for (int k = 0; k < 4; k++)
                CHECK(!after[k] || ((char *)p + (len ? len : 1) <= (char *)after[k] ||
                                    (char *)after[k] + after_bytes[k] <= (char *)p),
                      "fn %d(align %zu, 0) = %p (+%zu) overlaps malloc(%zu) = %p", fn, a, p, len, after_bytes[k],
                      after[k]);
            free(p);
            for (int k = 0; k < 4; k++) {
                CHECK(!after[k] || (hpm_range(after[k], &base, &len) && base == after[k]),
                      "malloc(%zu) = %p is not live after the free of the aligned 0-byte block", after_bytes[k],
                      after[k]);
                void *again = malloc(after_bytes[k]);
                CHECK(again != after[k], "malloc(%zu) handed out live %p again", after_bytes[k], after[k]);
                free(again);
            }
            for (int k = 0; k < 4; k++) free(after[k]);
        }
    }
}

static void test_bad_alignment(void)
{
    static const size_t bad[] = { 0, 3, 24, 48, 100, 4097, ((size_t)1 << 20) + 8 };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        size_t a = bad[i];
        errno = 0;
        void *p = aligned_alloc(a, 64);
        CHECK(p == NULL && errno == EINVAL, "aligned_alloc(%zu, 64) = %p errno %d", a, p, errno);
        free(p);
        errno = 0;
        p = hpm_aligned_alloc(a, 64);
        CHECK(p == NULL && errno == EINVAL, "hpm_aligned_alloc(%zu, 64) = %p errno %d", a, p, errno);
        hpm_free(p);
        void *out = &global_var;
        int rc = posix_memalign(&out, a, 64);
        CHECK(rc == EINVAL && out == &global_var, "posix_memalign(%zu) = %d, out changed to %p", a, rc, out);
        out = &global_var;
        rc = hpm_posix_memalign(&out, a, 64);
        CHECK(rc == EINVAL && out == &global_var, "hpm_posix_memalign(%zu) = %d", a, rc);
    }
    /* A power of two below sizeof(void *) is not a valid posix_memalign alignment. */
    void *out = &global_var;
    CHECK(posix_memalign(&out, 4, 64) == EINVAL && out == &global_var, "posix_memalign(4) not EINVAL");
    /* memalign: glibc rounds a bad alignment up; accept that or NULL/EINVAL. */
    errno = 0;
    size_t volatile bad_align = 24;   /* volatile: clang warns of a constant non-power-of-two alignment */
    void *p = memalign(bad_align, 100);
    CHECK((p == NULL && errno == EINVAL) || (p && (uintptr_t)p % 32 == 0), "memalign(24) = %p", p);
    free(p);
    /* A valid alignment over the largest served (1 TiB) is ENOMEM, not
     * EINVAL (that is for an alignment that is not a power of two), and
     * leaves *out alone. */
    static const int over_shift[] = { 41, 42, 62, 63 };
    for (size_t i = 0; i < sizeof over_shift / sizeof *over_shift; i++) {
        size_t a = opaque((size_t)1 << over_shift[i]);
        out = &global_var;
        int rc = posix_memalign(&out, a, 64);
        CHECK(rc == ENOMEM && out == &global_var, "posix_memalign(2^%d) = %d", over_shift[i], rc);
        errno = 0;
        p = aligned_alloc(a, 64);
        CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(2^%d) = %p errno %d", over_shift[i], p, errno);
        errno = 0;
        p = memalign(a, 64);
        CHECK(p == NULL && errno == ENOMEM, "memalign(2^%d) = %p errno %d", over_shift[i], p, errno);
    }
}

static void test_enomem(void)
{
    static const size_t huge[] = { SIZE_MAX, SIZE_MAX - 4095, SIZE_MAX / 2 + 1, (size_t)PTRDIFF_MAX + 1,
                                   (size_t)1 << 50 };
    for (size_t i = 0; i < sizeof huge / sizeof *huge; i++) {
        size_t n = opaque(huge[i]);
        errno = 0;
        void *p = malloc(n);
        CHECK(p == NULL && errno == ENOMEM, "malloc(%#zx) = %p errno %d", n, p, errno);
        errno = 0;
        p = hpm_malloc(n);
        CHECK(p == NULL && errno == ENOMEM, "hpm_malloc(%#zx) = %p errno %d", n, p, errno);
        errno = 0;
        p = aligned_alloc(4096, n & ~(size_t)4095);
        CHECK(p == NULL && errno == ENOMEM, "aligned_alloc(4096, %#zx) = %p errno %d", n, p, errno);
        void *out = &global_var;
        int rc = posix_memalign(&out, 64, n);
        CHECK(rc == ENOMEM && out == &global_var, "posix_memalign(64, %#zx) = %d", n, rc);
    }
    static const size_t pairs[][2] = { { SIZE_MAX, 2 }, { 2, SIZE_MAX }, { (size_t)1 << 33, (size_t)1 << 33 },
                                       { SIZE_MAX / 16 + 1, 16 }, { (size_t)1 << 40, (size_t)1 << 20 } };
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        errno = 0;
        void *p = calloc(opaque(pairs[i][0]), opaque(pairs[i][1]));
        CHECK(p == NULL && errno == ENOMEM, "calloc(%#zx, %#zx) = %p errno %d", pairs[i][0], pairs[i][1], p,
              errno);
        errno = 0;
        p = hpm_calloc(opaque(pairs[i][0]), opaque(pairs[i][1]));
        CHECK(p == NULL && errno == ENOMEM, "hpm_calloc overflow = %p errno %d", p, errno);
    }
    static const size_t rsizes[] = { 24, 300 * KiB, 6 * MiB };
    for (size_t i = 0; i < 3; i++) {
        size_t n = rsizes[i];
        char *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu)", n);
        if (!p) continue;
        fill(p, n, 7);
        errno = 0;
        CHECK(realloc(opaque_ptr(p), opaque(SIZE_MAX)) == NULL && errno == ENOMEM, "realloc(%zu-byte block, SIZE_MAX) errno %d", n,
              errno);
        errno = 0;
        CHECK(hpm_realloc(opaque_ptr(p), opaque(SIZE_MAX / 2 + 1)) == NULL && errno == ENOMEM, "hpm_realloc(p, huge) errno %d", errno);
        errno = 0;
        CHECK(reallocarray(opaque_ptr(p), opaque(SIZE_MAX / 2), 3) == NULL && errno == ENOMEM, "reallocarray overflow errno %d", errno);
        errno = 0;
        CHECK(hpm_reallocarray(opaque_ptr(p), opaque((size_t)1 << 40), (size_t)1 << 40) == NULL && errno == ENOMEM,
              "hpm_reallocarray overflow errno %d", errno);
        CHECK(verify(p, n, 7) == n, "block of %zu changed by failed reallocs", n);
        CHECK(hpm_range(p, NULL, NULL), "block of %zu no longer live after failed reallocs", n);
        free(p);
    }
}

/* One realloc step: the first min(old, new) bytes must survive. */
static char *realloc_step(char *p, size_t old_n, size_t new_n, unsigned old_seed, unsigned seed, int use_hpm)
{
    char *q = use_hpm ? hpm_realloc(opaque_ptr(p), new_n) : realloc(opaque_ptr(p), new_n);
    CHECK(q != NULL, "realloc(%zu -> %zu) returned NULL", old_n, new_n);
    if (!q) return p;
    size_t keep = old_n < new_n ? old_n : new_n;
    size_t bad = verify(q, keep, old_seed);
    CHECK(bad == keep, "realloc(%zu -> %zu) lost byte %zu", old_n, new_n, bad);
    CHECK(hpm_usable_size(q) >= new_n, "realloc(%zu -> %zu) usable %zu", old_n, new_n, hpm_usable_size(q));
    fill(q, new_n, seed);
    return q;
}

static void test_realloc(void)
{
    static const size_t chain[] = { 24,      100,     3000,     64 * KiB, 200 * KiB, 1 * MiB, 3 * MiB,
                                    9 * MiB, 4 * MiB, 700 * KiB, 40,      9 * MiB,   48,      16 };
    for (int use_hpm = 0; use_hpm < 2; use_hpm++) {
        char *p = use_hpm ? hpm_realloc(NULL, chain[0]) : realloc(NULL, chain[0]);
        CHECK(p != NULL, "realloc(NULL, %zu)", chain[0]);
        if (!p) continue;
        fill(p, chain[0], 3);
        for (size_t i = 1; i < sizeof chain / sizeof *chain; i++)
            p = realloc_step(p, chain[i - 1], chain[i], 2 + (unsigned)i, 3 + (unsigned)i, use_hpm);
        free(p);
    }
    /* Shrinking in small steps, then growing one byte at a time. */
    size_t n = 5000;
    char *p = malloc(n);
    fill(p, n, 9);
    for (size_t m = n - 1; m >= 1000; m -= 333) { p = realloc_step(p, n, m, 9, 9, 0); n = m; }
    for (size_t m = n + 1; m < n + 300; m++) { p = realloc_step(p, m - 1, m, 9, 9, 0); }
    free(p);
    /* An aligned block moved by realloc keeps its contents. */
    static const size_t aligns[] = { 64, 4096, 65536, 2 * MiB };
    for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++) {
        char *q = aligned_alloc(aligns[i], aligns[i]);
        CHECK(q != NULL, "aligned_alloc(%zu)", aligns[i]);
        if (!q) continue;
        fill(q, aligns[i], 11);
        q = realloc_step(q, aligns[i], aligns[i] * 3 + 5, 11, 12, 0);
        q = realloc_step(q, aligns[i] * 3 + 5, 100, 12, 13, 0);
        free(q);
    }
    /* realloc(p, 0) frees p or returns a unique block: either is allowed. */
    p = malloc(10);
    void *z = realloc(p, 0);
    free(z);
    /* reallocarray grows like realloc. */
    int *a = reallocarray(NULL, 10, sizeof(int));
    CHECK(a != NULL, "reallocarray(NULL, 10, 4)");
    if (a) {
        for (int i = 0; i < 10; i++) a[i] = i * i;
        a = hpm_reallocarray(a, 100000, sizeof(int));
        CHECK(a != NULL, "hpm_reallocarray grow");
        int ok = 1;
        for (int i = 0; a && i < 10; i++) ok &= a[i] == i * i;
        CHECK(ok, "reallocarray lost contents");
        free(a);
    }
}

static void test_calloc(void)
{
    static const size_t sizes[] = { 1, 16, 100, 4096, 50 * KiB, 1 * MiB, 3 * MiB, 10 * MiB };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        for (int round = 0; round < 4; round++) {
            /* Dirty memory of the same size first, so calloc may reuse it. */
            void *d = malloc(n);
            if (d) memset(d, 0xff, n);
            free(d);
            char *p = (round & 1) ? hpm_calloc(n, 1) : calloc(1, n);
            CHECK(p != NULL && all_zero(p, n), "calloc(%zu) round %d not zero", n, round);
            if (p) memset(p, 0xee, n);
            free(p);
        }
    }
    /* Many small reused blocks. */
    int bad = 0;
    for (int i = 0; i < 2000; i++) {
        size_t n = 8 + (size_t)(i % 300);
        char *d = malloc(n);
        memset(d, 0x77, n);
        free(d);
        char *p = calloc(n, 1);
        if (!p || !all_zero(p, n)) bad++;
        free(p);
    }
    CHECK(bad == 0, "%d reused small calloc blocks were not zero", bad);
    int *arr = calloc(1000, sizeof(int));
    CHECK(arr && all_zero(arr, 1000 * sizeof(int)), "calloc(1000, 4)");
    free(arr);
}

static void range_case(size_t n)
{
    char *p = malloc(n);
    CHECK(p != NULL, "malloc(%zu)", n);
    if (!p) return;
    size_t usable = hpm_usable_size(p);
    size_t offs[] = { 0, 1, n / 2, n - 1, usable - 1 };
    for (int i = 0; i < 5; i++) {
        void *base = NULL;
        size_t size = 0;
        bool ok = hpm_range(p + offs[i], &base, &size);
        CHECK(ok && base == p && size == usable && size >= n,
              "hpm_range(%zu-byte block + %zu) = %d base %p (want %p) size %zu (want %zu)", n, offs[i], ok, base,
              (void *)p, size, usable);
    }
    CHECK(hpm_range(p + n / 2, NULL, NULL), "hpm_range with NULL outputs");
    CHECK(malloc_usable_size(p) == usable, "malloc_usable_size %zu != hpm_usable_size %zu", malloc_usable_size(p),
          usable);
    void *after = NULL;
    bool past = hpm_range(p + usable, &after, NULL);
    CHECK(!past || after != p, "hpm_range one past the end of a %zu-byte block (usable %zu) gives the block", n,
          usable);
    uintptr_t addr = (uintptr_t)opaque_ptr(p);
    free(p);
    CHECK(!hpm_range((void *)addr, NULL, NULL), "hpm_range of a freed %zu-byte block is true", n);
    CHECK(!hpm_range((void *)(addr + n / 2), NULL, NULL), "hpm_range inside a freed %zu-byte block is true", n);
}

static void test_range(void)
{
    static const size_t sizes[] = { 8, 48, 1000, 8 * KiB, 100 * KiB, 600 * KiB, 2 * MiB, 5 * MiB };
    void *keep[8];
    /* Neighbours stay live, so the freed blocks sit among live ones. */
    for (int i = 0; i < 8; i++) keep[i] = malloc(sizes[i]);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) range_case(sizes[i]);
    for (int i = 0; i < 8; i++) free(keep[i]);
    int local = 0;
    void *base = &global_var;
    size_t size = 12345;
    CHECK(!hpm_range(&local, &base, &size), "hpm_range(stack address) is true");
    CHECK(!hpm_range(&global_var, NULL, NULL), "hpm_range(global) is true");
    CHECK(!hpm_range(NULL, NULL, NULL), "hpm_range(NULL) is true");
    CHECK(!hpm_range((void *)1, NULL, NULL), "hpm_range(1) is true");
    CHECK(!hpm_range((void *)test_range, NULL, NULL), "hpm_range(code) is true");
}

enum { REUSE_N = 3000 };
static void *reuse_blocks[REUSE_N];

static void *free_all_reuse_blocks(void *arg)
{
    for (int i = 0; i < REUSE_N; i++) free(reuse_blocks[i]);
    return arg;
}

/* Blocks freed by another thread are not live; the blocks then handed out
 * again are live even before they are written, and freeing them unwritten
 * is no double free (a stale free-block mark must not survive malloc). */
static void test_remote_free_and_unwritten_reuse(void)
{
    static const size_t sizes[] = { 16, 48, 200, 1000, 5000, 40000, 300000 };
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < REUSE_N; i++) reuse_blocks[i] = malloc(sizes[s]);
            uintptr_t first = (uintptr_t)opaque_ptr(reuse_blocks[0]);
            pthread_t t;
            if (pthread_create(&t, NULL, free_all_reuse_blocks, NULL) != 0) {
                CHECK(0, "pthread_create");
                return;
            }
            pthread_join(t, NULL);
            CHECK(!hpm_range((void *)first, NULL, NULL), "block of %zu freed by another thread is still live",
                  sizes[s]);
            int dead = 0;
            for (int i = 0; i < REUSE_N; i++) {
                reuse_blocks[i] = round ? memalign(64, sizes[s]) : malloc(sizes[s]);
                if (!reuse_blocks[i] || !hpm_range(reuse_blocks[i], NULL, NULL)) dead++;
            }
            CHECK(dead == 0, "%d fresh unwritten blocks of %zu are not live", dead, sizes[s]);
            for (int i = 0; i < REUSE_N; i++) free(reuse_blocks[i]); /* unwritten */
        }
    }
}

static void test_sized_free(void)
{
    for (size_t n = 1; n < 8 * MiB; n = n * 3 + 1) {
        void *p = malloc(n);
        void *q = aligned_alloc(256, (n + 255) / 256 * 256);
        CHECK(p && q, "allocation of %zu", n);
        if (p) memset(p, 1, n);
        free_sized(p, n);
        free_aligned_sized(q, 256, (n + 255) / 256 * 256);
        p = hpm_memalign(4096, n);
        hpm_free_aligned_sized(p, 4096, n);
    }
    void *p = malloc(77);
    CHECK(p != NULL, "malloc after sized frees");
    free(p);
}

static void collect_line(const char *line, void *arg)
{
    int *n = arg;
    if (line && line[0]) (*n)++;
}

static void test_stats(void)
{
    hpm_stats_t s0, s1, s2;
    hpm_stats_get(&s0);
    CHECK(s0.magic == HPM_STATS_MAGIC && s0.version == HPM_STATS_VERSION, "stats magic %#llx version %u",
          (unsigned long long)s0.magic, s0.version);
    CHECK(!strcmp(s0.page_mode, "thp") || !strcmp(s0.page_mode, "hugetlb") || !strcmp(s0.page_mode, "1g") ||
              !strcmp(s0.page_mode, "off"),
          "page_mode '%.16s'", s0.page_mode);
    CHECK(!strcmp(s0.thp_system, "always") || !strcmp(s0.thp_system, "madvise") ||
              !strcmp(s0.thp_system, "never") || !strcmp(s0.thp_system, "unknown"),
          "thp_system '%.16s'", s0.thp_system);
    size_t big = 10 * MiB, small_n = 10000, small = 100;
    char *b = malloc(big);
    char **sm = malloc(small_n * sizeof *sm);
    for (size_t i = 0; i < small_n; i++) sm[i] = malloc(small);
    memset(b, 3, big);
    hpm_stats_get(&s1);
    size_t want = big + small_n * small;
    CHECK(s1.bytes_in_use >= s0.bytes_in_use + want, "bytes_in_use grew by %lld, want >= %zu",
          (long long)(s1.bytes_in_use - s0.bytes_in_use), want);
    CHECK(s1.bytes_mapped >= s1.bytes_in_use, "bytes_mapped %llu < bytes_in_use %llu",
          (unsigned long long)s1.bytes_mapped, (unsigned long long)s1.bytes_in_use);
    CHECK(s1.large_allocs > s0.large_allocs, "large_allocs did not move (%llu)",
          (unsigned long long)s1.large_allocs);
    CHECK(s1.hp_backed >= 5 && s1.hp_in_use >= 5, "hp_backed %llu hp_in_use %llu with > 10 MiB live",
          (unsigned long long)s1.hp_backed, (unsigned long long)s1.hp_in_use);
    CHECK(s1.pid == (int32_t)getpid(), "stats pid %d", s1.pid);
    free(b);
    for (size_t i = 0; i < small_n; i++) free(sm[i]);
    free(sm);
    hpm_stats_get(&s2);
    CHECK(s2.bytes_in_use + want <= s1.bytes_in_use, "bytes_in_use fell by %lld after freeing %zu",
          (long long)(s1.bytes_in_use - s2.bytes_in_use), want);
    int lines = 0;
    hpm_stats_print(collect_line, &lines);
    CHECK(lines >= 3, "hpm_stats_print gave %d lines", lines);
}

static void test_options(void)
{
    for (int o = 0; o < HPM_OPT_COUNT; o++) {
        long v = hpm_option_get((hpm_option_t)o);
        CHECK(hpm_option_set((hpm_option_t)o, v) == 0, "option %d: setting its own value %ld fails (errno %d)", o,
              v, errno);
        CHECK(hpm_option_get((hpm_option_t)o) == v, "option %d changed by set(%ld)", o, v);
    }
    static const struct { hpm_option_t o; long v; } good[] = {
        { HPM_OPT_SUBRELEASE, 1 }, { HPM_OPT_SUBRELEASE, 0 }, { HPM_OPT_RELEASE_DELAY_MS, 1234 },
        { HPM_OPT_HP_CACHE, 3 },   { HPM_OPT_CHECK, 1 },      { HPM_OPT_STATS, 0 },
    };
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        long old = hpm_option_get(good[i].o);
        CHECK(hpm_option_set(good[i].o, good[i].v) == 0, "option %d = %ld rejected", good[i].o, good[i].v);
        CHECK(hpm_option_get(good[i].o) == good[i].v, "option %d reads %ld after set(%ld)", good[i].o,
              hpm_option_get(good[i].o), good[i].v);
        hpm_option_set(good[i].o, old);
    }
    static const struct { hpm_option_t o; long v; } bad[] = {
        { HPM_OPT_PAGES, -1 },      { HPM_OPT_PAGES, 4 },     { HPM_OPT_SUBRELEASE, 2 },
        { HPM_OPT_SUBRELEASE, -1 }, { HPM_OPT_STATS, 2 },     { HPM_OPT_CHECK, -1 },
        { HPM_OPT_RELEASE_DELAY_MS, -1 }, { HPM_OPT_HP_CACHE, -1 }, { HPM_OPT_CCOW, 104 },
        { HPM_OPT_CCOW, -2 },       { HPM_OPT_BACKGROUND, 2 }, { HPM_OPT_COUNT, 0 },
        { (hpm_option_t)-1, 0 },    { (hpm_option_t)1000, 1 },
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        long before = bad[i].o >= 0 && bad[i].o < HPM_OPT_COUNT ? hpm_option_get(bad[i].o) : 0;
        errno = 0;
        int rc = hpm_option_set(bad[i].o, bad[i].v);
        CHECK(rc == -1 && errno == EINVAL, "hpm_option_set(%d, %ld) = %d errno %d", bad[i].o, bad[i].v, rc, errno);
        if (bad[i].o >= 0 && bad[i].o < HPM_OPT_COUNT)
            CHECK(hpm_option_get(bad[i].o) == before, "rejected set changed option %d", bad[i].o);
    }
}

static void test_trim(void)
{
    enum { N = 4000 };
    static char *live[N];
    static size_t len[N];
    for (int i = 0; i < N; i++) {
        len[i] = (i % 100 == 0) ? 3 * MiB + (size_t)i : 16 + (size_t)(i * 37 % 3000);
        live[i] = malloc(len[i]);
        if (live[i]) fill(live[i], len[i], (unsigned)i);
    }
    for (int i = 0; i < N; i += 2) { free(live[i]); live[i] = NULL; }
    size_t released = hpm_trim();
    int rc = malloc_trim(0);
    CHECK(rc == 0 || rc == 1, "malloc_trim returned %d", rc);
    hpm_stats_t s;
    hpm_stats_get(&s);
    CHECK(s.hp_cached == 0, "hp_cached %llu after hpm_trim (released %zu bytes)", (unsigned long long)s.hp_cached,
          released);
    int bad = 0;
    for (int i = 1; i < N; i += 2) {
        if (!live[i] || verify(live[i], len[i], (unsigned)i) != len[i]) bad++;
        free(live[i]);
    }
    CHECK(bad == 0, "%d live blocks damaged by hpm_trim/malloc_trim", bad);
    char *p = malloc(5 * MiB);
    CHECK(p != NULL, "malloc after trim");
    if (p) { fill(p, 5 * MiB, 5); CHECK(verify(p, 5 * MiB, 5) == 5 * MiB, "block after trim"); }
    free(p);
}

/* A trim takes back what other threads' caches hold: a thread frees 16
 * medium blocks of 1 MiB into its span cache and stays alive, parked; the
 * main thread's hpm_trim must give their hugepages back (before, a trim
 * took only the calling thread's cache and the central one). */
static void test_trim_other_threads(void) {
    pthread_t t;
    CHECK(park_start(&t, 0) == 0);
    hpm_stats_t before, after;
    hpm_stats_get(&before);
    hpm_trim();
    hpm_stats_get(&after);
    printf("hpm_trim with a parked thread's 16 MiB cached: hugepages in use %llu -> %llu\n",
           (unsigned long long)before.hp_in_use, (unsigned long long)after.hp_in_use);
    CHECK(after.hp_in_use + 6 <= before.hp_in_use, "hugepages in use %llu before hpm_trim, %llu after (16 MiB cached by a parked thread)",
          (unsigned long long)before.hp_in_use, (unsigned long long)after.hp_in_use);
    CHECK(park_end(t) == 0);
}

/* A thread's first call into the allocator, of each kind: until then its
 * heap pointer is the read-only sentinel heap (src/heap.c), so each entry
 * point must make the real heap itself. Each thread makes one call first
 * and checks its result. */
static void *first_block;   /* allocated by the main thread; freed first by one thread */
static void *first_call(void *arg) {
    long kind = (long)arg, ok = 0;
    void *p = NULL;
    switch (kind) {
    case 0: p = malloc(100); ok = p && malloc_usable_size(p) >= 100; break;
    case 1: { unsigned char *z = calloc(1, 3000); ok = z != NULL; for (int i = 0; z && i < 3000; i++) ok &= z[i] == 0; p = z; break; }
    case 2: p = malloc(20000); ok = p && malloc_usable_size(p) >= 20000; break;   /* medium */
    case 3: ok = posix_memalign(&p, 256, 700) == 0 && ((uintptr_t)p & 255) == 0; break;
    case 4: p = realloc(NULL, 40); ok = p && malloc_usable_size(p) >= 40; break;
    case 5: {   /* a remote free, first */
        uintptr_t addr = (uintptr_t)opaque_ptr(first_block);
        free(first_block);
        ok = !hpm_range((void *)addr, NULL, NULL);
        break;
    }
    case 6: p = aligned_alloc(64, 64); ok = p && ((uintptr_t)p & 63) == 0; break;
    case 7: free(NULL); p = malloc(64); ok = p && malloc_usable_size(p) >= 64; break;   /* NULL takes free's out-of-line path */
    }
    if (p) {
        void *base = NULL;
        size_t size = 0;
        ok &= hpm_range(p, &base, &size) && base == p;
        memset(p, 0x5a, 40);
        free(p);
    }
    return (void *)ok;
}

static void test_first_call_of_a_thread(void) {
    static const char *names[] = {"malloc", "calloc", "medium malloc", "posix_memalign", "realloc(NULL)", "free of another thread's block", "aligned_alloc", "free(NULL)"};
    first_block = malloc(48);
    for (long k = 0; k < 8; k++) {
        pthread_t t;
        void *ok = NULL;
        CHECK(pthread_create(&t, NULL, first_call, (void *)k) == 0 && pthread_join(t, &ok) == 0 && ok,
              "a thread whose first call is %s", names[k]);
    }
}

int main(void)
{
    char buf[512];
    int st = th_run_child(aligned_zero_first, buf, sizeof buf);   /* first: a pageheap that has nothing yet */
    CHECK(st == 0, "aligned_alloc(2 MiB, 0) as the first call: status %#x: %s", st, buf);
    test_is_hpmalloc();
    test_malloc_zero();
    test_sizes();
    test_fundamental_alignment();
    test_alignments();
    test_bad_alignment();
    test_aligned_size_zero();
    test_enomem();
    test_realloc();
    test_calloc();
    test_range();
    test_remote_free_and_unwritten_reuse();
    test_first_call_of_a_thread();
    test_sized_free();
    test_stats();
    test_options();
    test_trim();
    test_trim_other_threads();
    return TEST_DONE();
}
