/* test_bgstart.c: when the background thread starts (alloc.c,
 * background_maybe_start). It releases what waits in the caches and
 * drains idle threads' caches, so it must run before a program can stop
 * calling the allocator with memory left in them; and it must never
 * start inside free, where glibc may hold its stack cache lock, which
 * pthread_create takes (pthread_join frees the dead thread's TLS vector
 * under it: init.c).
 *
 * 1. One thread and a small heap: blocks of the 256-byte class fill and
 *    empty slabs, the heap keeps them, and no thread starts (a small
 *    single-threaded program gets no thread of the allocator's).
 * 2. A second thread runs and exits (with the option off meanwhile: its
 *    own first malloc would start the thread, and nothing after would be
 *    seen). The main thread then frees blocks it made before, emptying
 *    slabs that the heap keeps: frees start nothing. Its next malloc slow
 *    path starts the thread.
 * 3. (In a forked child, first.) One thread whose small blocks grow the
 *    heap past the hugepage cache: the malloc whose new slab backed the
 *    hugepage over the keep has started the thread when it returns (the
 *    check once came before the refill, so the start waited for the next
 *    slow path, which a program that then only frees never makes).
 * test_kernel covers a single thread whose heap grows past the hugepage
 * cache (released after a free, with no later call), and test_manyheaps
 * the hang a start inside pthread_join's free caused. */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

#define BLOCK_BYTES 256
#define SLABS 3

static void *other(void *arg) {
    void *volatile p = malloc(32);   /* a heap of its own: a second thread has run */
    free(p);
    return arg;
}

static void *blk[4096];
static size_t n_blk;

static void fill(unsigned seed) {
    unsigned cls = hpm_size_class(BLOCK_BYTES);
    n_blk = _hpm_classes[cls].capacity * SLABS + 1;
    if (n_blk > sizeof blk / sizeof *blk) n_blk = sizeof blk / sizeof *blk;
    for (size_t i = 0; i < n_blk; i++) memset(blk[i] = malloc(BLOCK_BYTES), (int)((i + seed) & 0xff), BLOCK_BYTES);
}

/* Checks and frees every block in order; returns the heap's kept slabs. */
static unsigned empty_all(unsigned seed) {
    unsigned bad = 0;
    for (size_t i = 0; i < n_blk; i++) {
        if (((unsigned char *)blk[i])[BLOCK_BYTES - 1] != ((i + seed) & 0xff)) bad++;
        free(blk[i]);
    }
    CHECK(bad == 0, "%u blocks changed", bad);
    return hpm_my_heap()->empty_slabs;
}

/* Case 3, in a child: 256-byte blocks until the heap backs more
 * hugepages than its cache keeps (about 6 MiB), then the check; the
 * blocks are checked and freed. Exit status: the failed checks. */
static int grow_child(void) {
    enum { MAX_BLOCKS = 1 << 17 };   /* 32 MiB of blocks at most */
    static char *b[MAX_BLOCKS];
    size_t keep_hp = _hpm_ph.cache_keep_hp, n = 0;
    bool over = false;
    while (n < MAX_BLOCKS && !over) {
        b[n] = malloc(BLOCK_BYTES);
        if (!b[n]) break;
        memset(b[n], (int)(n & 0xff), BLOCK_BYTES);
        n++;
        over = __atomic_load_n(&_hpm_stats->hp_backed, __ATOMIC_RELAXED) > keep_hp;
    }
    CHECK(over, "%zu blocks of %d bytes did not back more than %zu hugepages", n, BLOCK_BYTES, keep_hp);
    CHECK(atomic_load(&_hpm_background_started) == 1,
          "the malloc that backed hugepage %zu (over the keep of %zu) returned without starting the background thread",
          (size_t)__atomic_load_n(&_hpm_stats->hp_backed, __ATOMIC_RELAXED), keep_hp);
    unsigned bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (b[i][BLOCK_BYTES - 1] != (char)(i & 0xff)) bad++;
        free(b[i]);
    }
    CHECK(bad == 0, "%u blocks changed", bad);
    fflush(stdout);
    return th_failed;
}

int main(void) {
    void *volatile warm = malloc(16);   /* the size classes are set up at the first malloc */
    free(warm);
    CHECK(atomic_load(&_hpm_background_started) == 0, "started by the first malloc");
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) _exit(grow_child() ? 1 : 0);
    int st = -1;
    CHECK(child > 0 && waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "case 3 (growth by small blocks) failed in the child: status %#x", st);
    fill(1);
    unsigned kept = empty_all(1);
    CHECK(kept >= 1, "the heap keeps %u emptied slabs", kept);
    CHECK(atomic_load(&_hpm_background_started) == 0, "one thread and a small heap, yet the background thread started");

    fill(2);   /* live across the second thread's run */
    pthread_t t;
    CHECK(hpm_option_set(HPM_OPT_BACKGROUND, 0) == 0);
    CHECK(pthread_create(&t, NULL, other, NULL) == 0);
    pthread_join(t, NULL);
    CHECK(atomic_load(&_hpm_background_started) == 0, "started with the option off");
    CHECK(hpm_option_set(HPM_OPT_BACKGROUND, 1) == 0);
    _hpm_heap_release_empty(false);   /* as malloc_trim: the frees below keep slabs again */
    CHECK(atomic_load(&_hpm_background_started) == 0, "started before the main thread's next malloc");
    kept = empty_all(2);
    CHECK(kept >= 1, "the heap keeps %u emptied slabs", kept);
    CHECK(atomic_load(&_hpm_background_started) == 0, "a free started the background thread");
    void *volatile q = malloc(3000);   /* a class not used yet: the slow path */
    free(q);
    CHECK(atomic_load(&_hpm_background_started) == 1, "a second thread has run: no background thread after a malloc slow path");
    char why[256];
    CHECK(_hpm_check_heap(hpm_my_heap(), why), "heap: %s", why);
    return TEST_DONE();
}
