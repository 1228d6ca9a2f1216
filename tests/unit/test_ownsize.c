/* test_ownsize.c: the lookups of malloc_usable_size and realloc
 * (own_block_bytes, live_span_bytes and their slow path in alloc.c).
 *
 * 1. For every small class, 300 blocks of this thread (the first few of
 *    the larger classes lie in a small first slab off a granule boundary,
 *    past the granule slot's guess): the usable size is the class's size and
 *    equals hpm_range's length; a realloc within the class keeps the
 *    pointer and one past it moves with the contents.
 * 2. The same blocks asked from another thread (the any-thread lookup):
 *    the same sizes.
 * 3. Medium and large blocks: the usable size is hpm_range's length.
 * 4. In forked children: malloc_usable_size or realloc of a freed block
 *    of a slab off its granule's slot, of a freed medium span and of an interior
 *    pointer stops the process with one line naming the error.
 */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

#define PER_CLASS 300

static void *blocks[HPM_CLASSES][PER_CLASS];

static size_t range_len(void *p) {
    void *base = NULL;
    size_t len = 0;
    return hpm_range(p, &base, &len) && base == p ? len : 0;
}

static void *other_thread(void *arg) {
    (void)arg;
    long bad = 0;
    for (unsigned c = 0; c < HPM_CLASSES; c++)
        for (int i = 0; i < PER_CLASS; i++)
            if (blocks[c][i] && malloc_usable_size(blocks[c][i]) != _hpm_classes[c].block_bytes) bad++;
    return (void *)bad;
}

/* fn in a child must die of SIGABRT with a line that contains want. */
static void dies(void (*fn)(void), const char *want, const char *what) {
    char buf[512];
    int st = th_run_child(fn, buf, sizeof buf);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, want), "%s: status %d, said \"%s\"",
          what, st, buf);
}

static void *volatile sink;
static void *launder(void *p) { __asm__("" : "+r"(p)); return p; }   /* hides the bug from the compiler */
static void *off_slot_block(void) {
    /* a block of a slab whose record is not in the block's granule slot (a
     * small first slab off a granule boundary: free and realloc find it
     * through the page map), the largest class first */
    for (unsigned c = HPM_CLASSES; c-- > 0; )
        for (int i = 0; i < PER_CLASS; i++) {
            void *p = blocks[c][i];
            hpm_span_t *s = p ? hpm_span_of(p) : NULL;
            if (s && hpm_slab_guess(p) != s) return p;
        }
    return NULL;
}
static void usable_freed_block(void) { void *p = off_slot_block(), *q = launder(p); free(p); sink = (void *)malloc_usable_size(q); }
static void realloc_freed_block(void) { void *p = off_slot_block(), *q = launder(p); free(p); sink = realloc(q, 5000); }
static void usable_freed_span(void) { void *p = malloc(100000), *q = launder(p); free(p); sink = (void *)malloc_usable_size(q); }
static void realloc_interior(void) { char *p = malloc(200000); sink = realloc(launder(p + 4096), 10); }

int main(void) {
    sink = malloc(1);   /* the classes are set up at the first call */
    free(sink);
    for (unsigned c = 0; c < HPM_CLASSES; c++) {
        size_t bytes = _hpm_classes[c].block_bytes;
        if (!bytes) continue;   /* class 0 is unused */
        int bad = 0;
        for (int i = 0; i < PER_CLASS; i++) {
            blocks[c][i] = malloc(bytes);
            if (!blocks[c][i] || malloc_usable_size(blocks[c][i]) != bytes || range_len(blocks[c][i]) != bytes) bad++;
        }
        CHECK(bad == 0, "class %u (%zu bytes): %d of %d blocks with a wrong usable size", c, bytes, bad, PER_CLASS);
    }
    hpm_span_t *s = hpm_span_of(off_slot_block());
    CHECK(s && s->kind == SPAN_SLAB, "no block of a slab off its granule's slot");
    if (!s) return TEST_DONE();
    /* realloc within the class and past it */
    unsigned c = hpm_size_class(4096);
    void *p = blocks[c][PER_CLASS - 1];
    memset(p, 0x5c, 4096);
    uintptr_t was = (uintptr_t)p;
    p = realloc(p, 4000);
    CHECK((uintptr_t)p == was, "realloc within the class moved");
    p = realloc(p, 6000);
    CHECK(p && (uintptr_t)p != was && ((unsigned char *)p)[3999] == 0x5c && malloc_usable_size(p) >= 6000,
          "realloc past the class: %p", p);
    blocks[c][PER_CLASS - 1] = malloc(4096);
    free(p);
    /* from another thread */
    pthread_t t;
    void *bad = NULL;
    CHECK(pthread_create(&t, NULL, other_thread, NULL) == 0 && pthread_join(t, &bad) == 0);
    CHECK(bad == NULL, "another thread found %ld wrong usable sizes", (long)bad);
    /* medium and large */
    size_t sizes[] = {8193, 50000, 1 << 20, (1 << 20) + 1, 3 << 20, (5 << 20) + 12345};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *q = malloc(sizes[i]);
        size_t u = malloc_usable_size(q);
        CHECK(q && u >= sizes[i] && u == range_len(q) && u % 4096 == 0, "%zu bytes: usable %zu, range %zu", sizes[i], u,
              range_len(q));
        free(q);
    }
    /* bad pointers */
    dies(usable_freed_block, "double free", "malloc_usable_size of a freed block of a slab off its slot");
    dies(realloc_freed_block, "double free", "realloc of a freed block of a slab off its slot");
    dies(usable_freed_span, "malloc_usable_size", "malloc_usable_size of a freed medium span");
    dies(realloc_interior, "interior pointer", "realloc of an interior pointer of a medium span");
    for (unsigned k = 0; k < HPM_CLASSES; k++)
        for (int i = 0; i < PER_CLASS; i++) free(blocks[k][i]);
    return TEST_DONE();
}
