/* bits.h: sets of the 512 pages of a hugepage, one bit per page in eight
 * 64-bit words (free pages, dirty pages, subreleased pages). Everything
 * here is a pure function of the words it is given, word at a time; the
 * callers (hugepage.c, release.c) hold the pageheap lock. Invariant: every
 * range [from, from + n) given here lies inside 0..512. */
#ifndef HPM_BITS_H
#define HPM_BITS_H
#include <stdbool.h>
#include <stdint.h>

static inline void _hpm_bits_set_range(uint64_t bits[8], unsigned from, unsigned n, bool value) {
    while (n > 0) {
        unsigned w = from >> 6, b = from & 63, take = 64 - b < n ? 64 - b : n;
        uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
        if (value) bits[w] |= mask; else bits[w] &= ~mask;
        from += take;
        n -= take;
    }
}

static inline unsigned _hpm_bits_count_range(const uint64_t bits[8], unsigned from, unsigned n) {
    unsigned count = 0;
    while (n > 0) {
        unsigned w = from >> 6, b = from & 63, take = 64 - b < n ? 64 - b : n;
        uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
        count += (unsigned)__builtin_popcountll(bits[w] & mask);
        from += take;
        n -= take;
    }
    return count;
}

static inline bool _hpm_bits_any_range(const uint64_t bits[8], unsigned from, unsigned n) {
    while (n > 0) {
        unsigned w = from >> 6, b = from & 63, take = 64 - b < n ? 64 - b : n;
        uint64_t mask = (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
        if (bits[w] & mask) return true;
        from += take;
        n -= take;
    }
    return false;
}

/* Length of the run of set bits starting at i (i must be set). */
static inline unsigned _hpm_bits_run_from(const uint64_t bits[8], unsigned i) {
    unsigned start = i;
    while (i < 512) {
        uint64_t w = ~bits[i >> 6] >> (i & 63);       /* zeros where free */
        if (w == 0) { i = (i | 63) + 1; continue; }   /* all free to the word end */
        i += (unsigned)__builtin_ctzll(w);
        break;
    }
    return (i > 512 ? 512 : i) - start;
}

/* Longest run of set bits, and where the first such run starts. Word at a
 * time: runs inside a word are found run by run, runs across words are
 * carried from one word to the next. */
static inline unsigned _hpm_bits_longest_run(const uint64_t bits[8], unsigned *start) {
    unsigned best = 0, best_at = 0, run = 0, run_at = 0;
    for (unsigned i = 0; i < 8; i++) {
        uint64_t w = bits[i];
        unsigned base = i * 64, pos = 0;
        while (pos < 64) {
            uint64_t rest = w >> pos;
            if (rest & 1) {   /* a run continues or starts at base + pos */
                unsigned len = ~rest ? (unsigned)__builtin_ctzll(~rest) : 64 - pos;
                if (run == 0) run_at = base + pos;
                run += len;
                pos += len;
                if (pos < 64) {   /* it ends inside this word */
                    if (run > best) { best = run; best_at = run_at; }
                    run = 0;
                }
            } else {
                if (run > best) { best = run; best_at = run_at; }
                run = 0;
                if (!rest) break;
                pos += (unsigned)__builtin_ctzll(rest);
            }
        }
    }
    if (run > best) { best = run; best_at = run_at; }
    if (start) *start = best_at;
    return best;
}

/* Where the run of set bits that ends just before end starts (end itself
 * if bit end - 1 is clear). Word at a time: the bits at and below end - 1
 * are shifted to the top of the word and their leading ones counted (a
 * bit at a time, this scan was most of a medium malloc's time in a small
 * heap: glibc-large of hpm bench, session 43). */
static inline unsigned _hpm_bits_run_back(const uint64_t bits[8], unsigned end) {
    unsigned lo = end;
    while (lo > 0) {
        unsigned top = (lo - 1) & 63;                           /* bit lo - 1 within its word */
        uint64_t x = bits[(lo - 1) >> 6] << (63 - top);         /* it at bit 63, zeros below the word's bit 0 */
        unsigned ones = ~x ? (unsigned)__builtin_clzll(~x) : 64;   /* at most top + 1 */
        lo -= ones;
        if (ones <= top) break;                                 /* the run starts inside this word */
    }
    return lo;
}

/* The run of set bits that contains [first, first+n) (all set). */
static inline unsigned _hpm_bits_run_around(const uint64_t bits[8], unsigned first, unsigned n, unsigned *start) {
    unsigned lo = _hpm_bits_run_back(bits, first), hi = first + n;
    if (hi < 512) hi += _hpm_bits_run_from(bits, hi) * ((bits[hi >> 6] >> (hi & 63)) & 1);
    *start = lo;
    return hi - lo;
}

/* First run of at least n set bits starting at or after from; -1 if none.
 * Run by run, as in _hpm_bits_longest_run. */
static inline int _hpm_bits_find_run(const uint64_t bits[8], unsigned n, unsigned from) {
    unsigned run = 0, run_at = 0;
    for (unsigned i = from >> 6; i < 8; i++) {
        uint64_t w = bits[i];
        unsigned base = i * 64, pos = i == (from >> 6) ? (from & 63) : 0;
        while (pos < 64) {
            uint64_t rest = w >> pos;
            if (rest & 1) {
                unsigned len = ~rest ? (unsigned)__builtin_ctzll(~rest) : 64 - pos;
                if (run == 0) run_at = base + pos;
                run += len;
                if (run >= n) return (int)run_at;
                pos += len;
                if (pos < 64) run = 0;
            } else {
                run = 0;
                if (!rest) break;
                pos += (unsigned)__builtin_ctzll(rest);
            }
        }
    }
    return -1;
}

/* First run of at least n set bits that starts at a multiple of align (a
 * power of two up to 64); -1 if none. */
static inline int _hpm_bits_find_aligned_run(const uint64_t bits[8], unsigned n, unsigned align) {
    for (unsigned at = 0; at + n <= 512; at += align) {
        unsigned len = 0;
        while (len < n && (bits[(at + len) >> 6] >> ((at + len) & 63)) & 1) len++;
        if (len == n) return (int)at;
        at = (at + len) & ~(align - 1);   /* the next start past the clear bit */
    }
    return -1;
}
#endif
