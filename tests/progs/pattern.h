/* pattern.h: the block pattern shared by hpmalloc's stress, fork and fuzz
 * tests. A block of size_bytes >= 8 at address A carries:
 *   - word 0: size_bytes XOR mix(A), so the size can be recovered from the
 *     block itself (blocks travel between threads as bare pointers);
 *   - the words at offsets 8..504 and at every 4 KiB boundary: cookie + offset,
 *     where cookie = mix(A ^ size_bytes << 1);
 *   - the last byte: the low byte of the cookie (when size_bytes >= 9).
 * A block is checked against the address and size it was written with, so
 * content moved by realloc is checked against the old address up to the
 * smaller of the two sizes. Offsets written never overlap one another. */
#ifndef HPM_TEST_PATTERN_H
#define HPM_TEST_PATTERN_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PAT_DENSE_BYTES 512u   /* every word below this offset */
#define PAT_STRIDE_BYTES 4096u /* then one word per 4 KiB */

static inline uint64_t pat_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static inline uint64_t pat_cookie(uintptr_t addr, size_t size_bytes)
{
    return pat_mix((uint64_t)addr ^ ((uint64_t)size_bytes << 1));
}

static inline void pat_put(unsigned char *p, size_t off, uint64_t v) { memcpy(p + off, &v, 8); }
static inline uint64_t pat_get(const unsigned char *p, size_t off)
{
    uint64_t v;
    memcpy(&v, p + off, 8);
    return v;
}

/* Next offset of a pattern word after off (off > 0 and a pattern offset). */
static inline size_t pat_next(size_t off)
{
    if (off + 8 < PAT_DENSE_BYTES) return off + 8;
    return (off / PAT_STRIDE_BYTES + 1) * PAT_STRIDE_BYTES;
}

/* Writes the pattern for a block of size_bytes (>= 8) at p. */
static inline void pat_fill(void *block, size_t size_bytes)
{
    unsigned char *p = block;
    uintptr_t addr = (uintptr_t)block;
    uint64_t cookie = pat_cookie(addr, size_bytes);
    pat_put(p, 0, (uint64_t)size_bytes ^ pat_mix(addr));
    for (size_t off = 8; off + 8 < size_bytes; off = pat_next(off)) pat_put(p, off, cookie + off);
    if (size_bytes >= 9) p[size_bytes - 1] = (unsigned char)cookie;
}

/* Size recorded in word 0 of a block written at addr (not checked). */
static inline size_t pat_size(const void *block, uintptr_t addr)
{
    return (size_t)(pat_get(block, 0) ^ pat_mix(addr));
}

/* Checks the pattern of a block that was written at old_addr with
 * old_size_bytes and now lives at block, looking only below limit_bytes.
 * Returns -1 when it matches, else the offset of the first bad byte. */
static inline long pat_check(const void *block, uintptr_t old_addr, size_t old_size_bytes,
                             size_t limit_bytes)
{
    const unsigned char *p = block;
    uint64_t cookie = pat_cookie(old_addr, old_size_bytes);
    if (limit_bytes > old_size_bytes) limit_bytes = old_size_bytes;
    if (limit_bytes >= 8 && pat_get(p, 0) != ((uint64_t)old_size_bytes ^ pat_mix(old_addr))) return 0;
    for (size_t off = 8; off + 8 < old_size_bytes && off + 8 <= limit_bytes; off = pat_next(off))
        if (pat_get(p, off) != cookie + off) return (long)off;
    if (old_size_bytes >= 9 && limit_bytes == old_size_bytes &&
        p[old_size_bytes - 1] != (unsigned char)cookie)
        return (long)old_size_bytes - 1;
    return -1;
}

/* A small deterministic generator (xorshift64*), one per thread. */
typedef struct { uint64_t s; } pat_rng_t;
static inline void pat_rng_seed(pat_rng_t *r, uint64_t seed) { r->s = pat_mix(seed) | 1; }
static inline uint64_t pat_rand(pat_rng_t *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}
#endif
