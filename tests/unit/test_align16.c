/* test_align16.c: HPM_ALIGN16 (docs/options.md). By default the 24-, 40-
 * and 56-byte classes serve requests of 17..24, 33..40 and 49..56 bytes
 * with 8-aligned blocks; with HPM_ALIGN16=1, read once at start, those
 * sizes go to the next class (32, 48, 64) and every block is 16-aligned.
 * The option cannot change later. The HPM_ALIGN16=1 half runs in a
 * re-executed copy of this program, whose environment has it from the
 * start (libc's own first mallocs come before main). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <malloc.h>
#include "hpmalloc.h"
#include "testhelper.h"

enum { PER_SIZE = 64, MAX_SIZE = 256 };
static void *blocks[PER_SIZE];

/* Blocks of 1..MAX_SIZE bytes, PER_SIZE of each: how many are not
 * 16-aligned. */
static size_t not16(void) {
    size_t n16 = 0;
    for (size_t n = 1; n <= MAX_SIZE; n++) {
        for (int i = 0; i < PER_SIZE; i++) {
            blocks[i] = malloc(n);
            if (!blocks[i] || (uintptr_t)blocks[i] % 16) n16++;
        }
        for (int i = 0; i < PER_SIZE; i++) free(blocks[i]);
    }
    return n16;
}

static size_t usable_of(size_t n) {
    void *p = malloc(n);
    size_t u = p ? malloc_usable_size(p) : 0;
    free(p);
    return u;
}

static int run_align16(void) {
    CHECK(hpm_option_get(HPM_OPT_ALIGN16) == 1, "HPM_ALIGN16=1 read as %ld", hpm_option_get(HPM_OPT_ALIGN16));
    size_t bad = not16();
    CHECK(bad == 0, "%zu blocks of 1..%d bytes are not 16-aligned", bad, MAX_SIZE);
    CHECK(usable_of(20) == 32 && usable_of(40) == 48 && usable_of(50) == 64 && usable_of(16) == 16,
          "usable sizes %zu %zu %zu %zu (want 32 48 64 16)", usable_of(20), usable_of(40), usable_of(50), usable_of(16));
    errno = 0;
    CHECK(hpm_option_set(HPM_OPT_ALIGN16, 0) == -1 && errno == EINVAL, "the option changed after start");
    return TEST_DONE();
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "align16")) return run_align16();
    CHECK(hpm_option_get(HPM_OPT_ALIGN16) == 0, "the default is %ld", hpm_option_get(HPM_OPT_ALIGN16));
    CHECK(usable_of(20) == 24 && usable_of(40) == 40 && usable_of(50) == 56, "usable sizes %zu %zu %zu (want 24 40 56)",
          usable_of(20), usable_of(40), usable_of(50));
    CHECK(not16() > 0, "by default some blocks of 17..56 bytes are 8-aligned");
    errno = 0;
    CHECK(hpm_option_set(HPM_OPT_ALIGN16, 1) == -1 && errno == EINVAL, "the option changed after start");
    CHECK(hpm_option_get(HPM_OPT_ALIGN16) == 0);

    fflush(stdout);
    char self[4096], cmd[4200];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    self[len > 0 ? len : 0] = 0;
    snprintf(cmd, sizeof cmd, "HPM_ALIGN16=1 '%s' align16", len > 0 ? self : argv[0]);
    int st = system(cmd);
    CHECK(st == 0, "the HPM_ALIGN16=1 run exited with %d", st);
    return TEST_DONE();
}
