/* bench_stamp.h: marks written into allocated blocks so that a benchmark
 * notices when an allocator hands out overlapping or corrupted memory.
 * A stamp is a 64-bit tag written at the start of the block and, for blocks
 * over 8 bytes, the tag's top byte at the last byte. Blocks of fewer than 8
 * bytes hold the tag's low bytes. Header-only (static inline). */
#ifndef HPM_BENCH_STAMP_H
#define HPM_BENCH_STAMP_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline void bench_stamp(void *block, size_t size, uint64_t tag) {
    unsigned char *p = block;
    memcpy(p, &tag, size < 8 ? size : 8);
    if (size > 8) p[size - 1] = (unsigned char)(tag >> 56);
}

/* 1 when the stamp written by bench_stamp(block, size, tag) is intact. */
static inline int bench_stamp_ok(const void *block, size_t size, uint64_t tag) {
    const unsigned char *p = block;
    if (memcmp(p, &tag, size < 8 ? size : 8) != 0) return 0;
    return size <= 8 || p[size - 1] == (unsigned char)(tag >> 56);
}
#endif
