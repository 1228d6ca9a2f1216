/* fuzz_alloc.c: a libFuzzer harness for hpmalloc (build and run it with
 * tests/scripts/fuzz.sh; clang -fsanitize=fuzzer, no ASan, since ASan would
 * replace malloc).
 *
 * The input is a program over a table of 64 slots. Each operation takes 4
 * bytes: the operation, a slot, and a 16-bit size code (mostly small, up to
 * a few MiB). Operations: malloc, calloc, free, free_sized, realloc,
 * memalign, posix_memalign, aligned_alloc (alignments 8 B to 4 MiB,
 * size 0 among the sizes),
 * usable-size and hpm_range queries on an interior address, and trim.
 * Blocks are freed with free, or with free_sized / free_aligned_sized and
 * the size (and alignment) they were allocated with, as C23 requires.
 *
 * Invariant checked: every live slot keeps its fill pattern (pattern.h,
 * plus a byte pattern for blocks under 8 bytes) until it is freed; calloc
 * memory is zero; alignments hold; hpm_range of any address inside a live
 * block gives its base and usable size (>= the request), and is false for
 * a block just freed. A broken invariant prints one line and aborts, which
 * libFuzzer reports as a crash with the input saved. Every input ends with
 * all slots checked and freed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hpmalloc.h"
#include "../progs/pattern.h"

#define SLOTS 64

typedef struct {
    unsigned char *p;
    size_t size_bytes;
    size_t align_bytes; /* 0: from malloc/calloc/realloc */
} slot_t;

static slot_t slots[SLOTS];

static void die(const char *what, const void *p, size_t size, size_t extra)
{
    fprintf(stderr, "fuzz_alloc: %s (block %p, size %zu, %zu)\n", what, p, size, extra);
    abort();
}

/* Sizes: code's top 4 bits pick a power of two (1 B .. 128 KiB, small
 * ones more likely; 4 MiB for 1 code in 128), the rest a value up to twice it. */
static size_t decode_size(unsigned code)
{
    static const unsigned shift_of[16] = { 0, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 9, 10, 12, 14, 17 };
    unsigned shift = shift_of[code >> 12];
    if (code >> 12 == 15 && (code & 7) == 0) shift = 22;
    return ((size_t)1 << shift) + ((size_t)(code & 0xfff) * ((size_t)1 << shift) >> 12);
}

static void fill(unsigned char *p, size_t n)
{
    if (n >= 8) pat_fill(p, n);
    else for (size_t i = 0; i < n; i++) p[i] = (unsigned char)((uintptr_t)p + i);
}

/* Checks p against the pattern written at old_addr with old_n, up to limit. */
static void check(const unsigned char *p, uintptr_t old_addr, size_t old_n, size_t limit, const char *when)
{
    if (old_n >= 8) {
        long bad = pat_check(p, old_addr, old_n, limit);
        if (bad >= 0) die(when, p, old_n, (size_t)bad);
        return;
    }
    for (size_t i = 0; i < old_n && i < limit; i++)
        if (p[i] != (unsigned char)(old_addr + i)) die(when, p, old_n, i);
}

static void check_range(const unsigned char *p, size_t n, unsigned off_code)
{
    size_t usable = hpm_usable_size(p);
    if (usable < n) die("usable size below the request", p, n, usable);
    size_t off = usable ? (size_t)off_code * 2654435761u % usable : 0;
    void *base = NULL;
    size_t size = 0;
    if (!hpm_range(p + off, &base, &size) || base != p || size != usable)
        die("hpm_range of an interior address is wrong", p, n, off);
}

static void release(slot_t *s, int sized)
{
    if (!s->p) return;
    check(s->p, (uintptr_t)s->p, s->size_bytes, s->size_bytes, "block changed before free");
    uintptr_t addr = (uintptr_t)s->p;
    if (!sized) hpm_free(s->p);
    else if (s->align_bytes) hpm_free_aligned_sized(s->p, s->align_bytes, s->size_bytes);
    else hpm_free_sized(s->p, s->size_bytes); /* C23: only for malloc/calloc/realloc blocks */
    if (hpm_range((const void *)addr, NULL, NULL)) die("hpm_range true for a freed block", (void *)addr, 0, 0);
    s->p = NULL;
}

static void install(slot_t *s, void *p, size_t n, size_t align, int zeroed)
{
    if (!p) die("allocation failed", NULL, n, align);
    if (align && (uintptr_t)p % align) die("misaligned block", p, n, align);
    unsigned char *c = p;
    if (zeroed)
        for (size_t i = 0; i < n; i += (i < 4096 ? 1 : 509))
            if (c[i]) die("calloc memory not zero", p, n, i);
    s->p = c;
    s->size_bytes = n;
    s->align_bytes = align;
    fill(c, n);
}

static void do_realloc(slot_t *s, size_t n)
{
    if (!s->p) {
        install(s, hpm_realloc(NULL, n), n, 0, 0);
        return;
    }
    size_t old = s->size_bytes;
    uintptr_t old_addr = (uintptr_t)s->p;
    check(s->p, old_addr, old, old, "block changed before realloc");
    void *q = hpm_realloc(s->p, n);
    if (!q) die("realloc failed", s->p, n, old);
    check(q, old_addr, old, n, "realloc lost contents");
    s->p = q;
    s->size_bytes = n;
    s->align_bytes = 0; /* realloc keeps no alignment beyond malloc's */
    fill(q, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
    for (size_t i = 0; i + 4 <= len; i += 4) {
        unsigned op = data[i] % 12;
        slot_t *s = &slots[data[i + 1] % SLOTS];
        unsigned code = (unsigned)data[i + 2] << 8 | data[i + 3];
        size_t n = decode_size(code);
        size_t align = (size_t)8 << (data[i + 3] % 20); /* 8 B .. 4 MiB */
        size_t an = (code & 0x3f0) == 0x3f0 ? 0 : n;    /* aligned requests: size 0 one time in 64 (session 49) */
        void *p = NULL;
        switch (op) {
        case 0: case 1: release(s, 0); install(s, hpm_malloc(n), n, 0, 0); break;
        case 2: release(s, 0); install(s, hpm_calloc(1 + n % 7, n / 7 + 1), (1 + n % 7) * (n / 7 + 1), 0, 1); break;
        case 3: release(s, 0); break;
        case 4: release(s, 1); break;
        case 5: case 6: do_realloc(s, n); break;
        case 7: release(s, 0); install(s, hpm_memalign(align, an), an, align, 0); break;
        case 8:
            release(s, 0);
            if (hpm_posix_memalign(&p, align, an) != 0) p = NULL;
            install(s, p, an, align, 0);
            break;
        case 9: release(s, 0); install(s, hpm_aligned_alloc(align, an), an, align, 0); break;
        case 10: if (s->p) check_range(s->p, s->size_bytes, code); break;
        case 11: if (code % 64 == 0) hpm_trim(); break;
        }
    }
    for (int j = 0; j < SLOTS; j++) {
        if (slots[j].p) check_range(slots[j].p, slots[j].size_bytes, (unsigned)j * 977u);
        release(&slots[j], j & 1);
    }
    return 0;
}
