/* test_shedfree.c: frees into a slab that has given pages back.
 *
 * hpm_trim (and malloc_trim with subrelease on) gives back the pages of a
 * live slab that hold only free blocks (slab.c, _hpm_slab_shed). Those
 * pages read as zero afterwards, the blocks' free marks included, so the
 * free path's fast test took a second free of such a block for a live
 * block's: it was pushed, and when the slab re-linked its held blocks the
 * block was on the free list twice and malloc handed it out twice
 * (session 50's review). malloc_usable_size and realloc of it answered as
 * for a live block. Now a slab with held pages sends every free through
 * the exact test (alloc.c, block_live_exact).
 *
 * Each case in a forked child: 512 blocks of 64 bytes, the 64 of one page
 * freed, hpm_trim; then a second free of one of them (from this thread and
 * from another), malloc_usable_size and realloc of one must each abort
 * with one line. In this process: the live blocks of that slab free,
 * report their size and realloc as before, and 1,024 mallocs after it all
 * differ and keep what is written in them. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include "internal.h"
#include "testhelper.h"

#define N 512
#define SIZE 64

static void *blocks[N];
static int first_freed = -1;   /* a block of the freed page */

/* Allocates the blocks, frees every block of the page that holds block
 * 200, and trims; the bytes hpm_trim gave back. */
static size_t set_up(void) {
    for (int i = 0; i < N; i++) {
        blocks[i] = hpm_malloc(SIZE);
        memset(blocks[i], i & 0xff, SIZE);
    }
    uintptr_t page = (uintptr_t)blocks[200] & ~(uintptr_t)(HPM_PAGE_BYTES - 1);
    first_freed = -1;
    for (int i = 0; i < N; i++) {
        if (((uintptr_t)blocks[i] & ~(uintptr_t)(HPM_PAGE_BYTES - 1)) != page) continue;
        hpm_free(blocks[i]);
        if (first_freed < 0) first_freed = i;
    }
    return hpm_trim();
}

static void free_again_child(void) {
    set_up();
    hpm_free(blocks[first_freed]);
}

static void *free_again_thread(void *arg) {
    (void)arg;
    hpm_free(blocks[first_freed]);
    return NULL;
}

static void free_again_remote_child(void) {
    set_up();
    pthread_t t;
    if (pthread_create(&t, NULL, free_again_thread, NULL) == 0) pthread_join(t, NULL);
}

static void usable_child(void) {
    set_up();
    (void)hpm_usable_size(blocks[first_freed]);
}

static void realloc_child(void) {
    set_up();
    (void)hpm_realloc(blocks[first_freed], 100);
}

static void dies(void (*fn)(void), const char *label, const char *what) {
    char buf[512];
    int st = th_run_child(fn, buf, sizeof buf);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%s: child status %#x, stderr '%s'", label, st, buf);
    CHECK(strncmp(buf, "hpmalloc:", 9) == 0 && strstr(buf, what) && strchr(buf, '\n') == buf + strlen(buf) - 1,
          "%s: stderr '%s', want one line with '%s'", label, buf, what);
}

/* The slab's live blocks keep working, and nothing is handed out twice. */
static void test_live_blocks(void) {
    size_t trimmed = set_up();
    hpm_span_t *s = hpm_span_of(blocks[200]);
    CHECK(trimmed > 0 && s && s->held_pages_mask != 0, "trim gave back %zu bytes, held pages %#x", trimmed,
          s ? s->held_pages_mask : 0);
    uintptr_t page = (uintptr_t)blocks[200] & ~(uintptr_t)(HPM_PAGE_BYTES - 1);
    int moved = -1, bad = 0;
    for (int i = 0; i < N; i++) {
        if (((uintptr_t)blocks[i] & ~(uintptr_t)(HPM_PAGE_BYTES - 1)) == page) { blocks[i] = NULL; continue; }
        if (hpm_span_of(blocks[i]) != s) continue;
        const unsigned char *b = blocks[i];
        if (b[0] != (i & 0xff) || b[SIZE - 1] != (i & 0xff) || hpm_usable_size(blocks[i]) != SIZE) bad++;
        if (moved < 0) moved = i;
    }
    CHECK(bad == 0, "%d live blocks of the slab lost their contents or size", bad);
    CHECK(moved >= 0, "a live block in the slab");
    if (moved >= 0) {
        unsigned char *q = hpm_realloc(blocks[moved], 200);   /* another class: it moves */
        CHECK(q && q[0] == (moved & 0xff) && q[SIZE - 1] == (moved & 0xff), "realloc kept the contents");
        blocks[moved] = q;
    }
    for (int i = 0; i < N; i++) {   /* every live block of the slab freed into it */
        if (blocks[i] && i != moved && hpm_span_of(blocks[i]) == s) {
            hpm_free(blocks[i]);
            blocks[i] = NULL;
        }
    }
    enum { M = 2 * N };
    static unsigned char *fresh[M];
    int dup = 0, lost = 0;
    for (int i = 0; i < M; i++) {
        fresh[i] = hpm_malloc(SIZE);
        memset(fresh[i], 0x5a ^ (i & 0xff), SIZE);
    }
    for (int i = 0; i < M; i++) {
        if (fresh[i][0] != (0x5a ^ (i & 0xff)) || fresh[i][SIZE - 1] != (0x5a ^ (i & 0xff))) lost++;
        for (int j = 0; j < i; j++) dup += fresh[i] == fresh[j];
    }
    CHECK(dup == 0 && lost == 0, "%d blocks handed out twice, %d overwritten", dup, lost);
    for (int i = 0; i < M; i++) hpm_free(fresh[i]);
    for (int i = 0; i < N; i++) hpm_free(blocks[i]);
}

int main(void) {
    dies(free_again_child, "a second free from the owner", "double free");
    dies(free_again_remote_child, "a second free from another thread", "double free");
    dies(usable_child, "malloc_usable_size of a freed block", "not a live allocation");
    dies(realloc_child, "realloc of a freed block", "not a live allocation");
    test_live_blocks();
    return TEST_DONE();
}
