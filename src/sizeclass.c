/* sizeclass.c: the small-object size classes. Classes 0..6 are 16..64
 * bytes in steps of 8 (blocks of 24, 40 and 56 bytes are 8-aligned, which
 * is all an object of that size can need), 7..10 are 80..128 in steps of
 * 16; above that, eight classes per doubling up to 1 KiB (at most 12.5%
 * internal waste) and four per doubling up to 8 KiB (at most 25%, as
 * jemalloc and mimalloc space theirs), with one more an eighth above each
 * of 1, 2 and 4 KiB (above_1k_bytes): 50 classes. A slab is 32 KiB, one
 * granule (internal.h), for blocks under 4 KiB and 64 KiB above
 * (BIG_SLAB_MIN_BYTES), so that a slab of one class serves another of its
 * size (a heap's kept empty slabs, heap.c) and every slab placed on a
 * granule boundary is found from its slot (a block in a 64 KiB slab's
 * second granule from the page map: alloc.c, free_guess_missed). docs/allocator.md,
 * "Sizes": each thread pays about one partial slab per class it uses, so
 * fewer classes above 1 KiB and 32 KiB slabs up to 4 KiB cut rptest's
 * max RSS. Larger
 * requests are page spans of their own, which fragment less when a program
 * frees most of its big objects. HPM_ALIGN16 gives the 24-, 40- and
 * 56-byte classes 16-byte-multiple blocks (block_bytes_of). Invariant:
 * hpm_size_class(n) is the smallest class whose class_bytes >= n, and its
 * block_bytes >= n, for every n <= HPM_SMALL_MAX_BYTES. */
#include "internal.h"

hpm_class_t _hpm_classes[HPM_CLASSES];
uint32_t _hpm_class_block_bytes[HPM_CLASSES];
uint16_t _hpm_medium_slot0[HPM_MEDIUM_CLASSES + 1];
/* The class of each size up to 1 KiB in 8-byte steps, initialised
 * statically and never written, so that malloc can compute a class before
 * the first malloc has run the initialisation (its fast path no longer
 * tests for a heap first) while another thread initialises;
 * _hpm_classes_init checks it against class_bytes. */
const uint8_t _hpm_class_of8[(1024 >> 3) + 1] = {
    0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 7, 8, 8, 9, 9, 10,
    10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15, 16, 16, 17, 17, 18,
    18, 19, 19, 19, 19, 20, 20, 20, 20, 21, 21, 21, 21, 22, 22, 22,
    22, 23, 23, 23, 23, 24, 24, 24, 24, 25, 25, 25, 25, 26, 26, 26,
    26, 27, 27, 27, 27, 27, 27, 27, 27, 28, 28, 28, 28, 28, 28, 28,
    28, 29, 29, 29, 29, 29, 29, 29, 29, 30, 30, 30, 30, 30, 30, 30,
    30, 31, 31, 31, 31, 31, 31, 31, 31, 32, 32, 32, 32, 32, 32, 32,
    32, 33, 33, 33, 33, 33, 33, 33, 33, 34, 34, 34, 34, 34, 34, 34,
    34,
};

/* The classes above 1 KiB: four per doubling (a quarter apart), and one
 * more an eighth above each power of two (1152, 2304, 4608), where sizes
 * of "a power of two and a header" gather (sqlite3's 4,104- and
 * 4,368-byte page objects, 1,032-byte buffers: docs/allocator.md, "Sizes"). */
static const uint16_t above_1k_bytes[HPM_CLASSES - HPM_CLASS_1K - 1] = {
    1152, 1280, 1536, 1792, 2048, 2304, 2560, 3072, 3584, 4096, 4608, 5120, 6144, 7168, 8192,
};

/* The class of each size from 1025 bytes to HPM_SMALL_MAX_BYTES in
 * 128-byte steps (entry (size + 127) / 128), static like _hpm_class_of8
 * and checked against above_1k_bytes the same way (entries up to 1 KiB
 * unused). */
const uint8_t _hpm_class_of128[(HPM_SMALL_MAX_BYTES >> 7) + 1] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 35, 36, 37, 37, 38, 38, 39,
    39, 40, 40, 41, 41, 42, 42, 42, 42, 43, 43, 43, 43, 44, 44, 44,
    44, 45, 45, 45, 45, 46, 46, 46, 46, 47, 47, 47, 47, 47, 47, 47,
    47, 48, 48, 48, 48, 48, 48, 48, 48, 49, 49, 49, 49, 49, 49, 49,
    49,
};

/* Blocks of 4 KiB and more get slabs of two granules (64 KiB, 8 to 16
 * blocks), the others one (32 KiB, at least 9 blocks): with 4 to 8 blocks
 * a slab that a random free pattern has just refilled was full again after
 * a few mallocs, and glibc-bench with 1..8 KiB blocks took 20% longer in
 * the slow paths (docs/allocator.md, "Sizes", session 38). */
#define BIG_SLAB_MIN_BYTES 4096u

static uint32_t class_bytes(unsigned cls) {
    if (cls < 7) return 8u * (cls + 2u);          /* 16..64 by 8 */
    if (cls < 11) return 64u + 16u * (cls - 6u);  /* 80..128 by 16 */
    if (cls < HPM_CLASS_1K + 1) {                  /* 144..1024: 8 per doubling */
        unsigned k = cls - 11u, b = 7u + k / 8u, j = k % 8u;
        return (1u << b) + (j + 1u) * (1u << (b - 3u));
    }
    return above_1k_bytes[cls - HPM_CLASS_1K - 1u];
}

/* A class's blocks: class_bytes, but with HPM_ALIGN16 the 24-, 40- and
 * 56-byte classes get blocks of 32, 48 and 64 bytes, so every block is
 * 16-aligned. The size table stays as it is (sizes of 17..24 bytes still
 * map to class 1, now of 32-byte blocks): a table rewritten at start
 * raced another thread's first malloc reading it (TSan, test_linepairs,
 * in CI on bd8b2c6), and a thread whose class was read before the rewrite
 * got an 8-aligned block. Under the option those three classes duplicate
 * the next one's size in slabs of their own. */
static uint32_t block_bytes_of(unsigned cls) {
    uint32_t b = class_bytes(cls);
    return _hpm_option(HPM_OPT_ALIGN16) && b % 16 ? b + 8 : b;
}

void _hpm_classes_init(void) {
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        hpm_class_t *k = &_hpm_classes[c];
        k->block_bytes = block_bytes_of(c);
        _hpm_class_block_bytes[c] = k->block_bytes;
        k->slab_pages = k->block_bytes >= BIG_SLAB_MIN_BYTES ? 2 * HPM_GRANULE_PAGES : HPM_GRANULE_PAGES;
        k->capacity = (k->slab_pages * (uint32_t)HPM_PAGE_BYTES) / k->block_bytes;
        k->recip = (uint32_t)(((1ull << 32) + k->block_bytes - 1) / k->block_bytes);
        k->div_magic = (uint64_t)((((unsigned __int128)1 << 64) / k->block_bytes) + 1);
        k->div_step = (uint64_t)k->block_bytes * k->div_magic;   /* wraps mod 2^64 to block_bytes - (2^64 mod block_bytes) */
    }
    hpm_assert(class_bytes(HPM_CLASS_1K) == 1024 && class_bytes(HPM_CLASSES - 1) == HPM_SMALL_MAX_BYTES);
    for (unsigned i = 0; i <= (1024 >> 3); i++) {
        size_t size = i == 0 ? 1 : (size_t)i << 3;
        unsigned c = 0;
        while (class_bytes(c) < size) c++;
        hpm_assert(_hpm_class_of8[i] == c);
    }
    for (size_t i = (1024 >> 7) + 1; i <= (HPM_SMALL_MAX_BYTES >> 7); i++) {
        unsigned c = HPM_CLASS_1K;
        while (class_bytes(c) < i << 7) c++;
        hpm_assert(_hpm_class_of128[i] == c);
    }
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES; c++)   /* spancache.c's stacks */
        _hpm_medium_slot0[c + 1] = (uint16_t)(_hpm_medium_slot0[c] + HPM_SPANCACHE_BATCHES * hpm_medium_batch(c) + 1);
    if (_hpm_medium_slot0[HPM_MEDIUM_CLASSES] != HPM_SPANCACHE_SLOTS)
        _hpm_fatal("hpmalloc init", NULL, "HPM_SPANCACHE_SLOTS does not match the medium batches");
}
