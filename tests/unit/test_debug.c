/* test_debug.c: the debug tier (src/debug.h, src/check.c, src/lockorder.h)
 * on the live allocator. At every level: the checkers find the heap and
 * the pageheap sound after real traffic (threads, every size, trim) and
 * find damage done to them. Then, by the level this file is compiled at
 * (the same HPM_DEBUG as the library: make debug builds both at 3):
 *   0   hpm_assert does not evaluate its argument;
 *   1+  a false hpm_assert stops the process with one line;
 *   2+  taking the locks out of order stops it ("lock order: ...");
 *   3   damage to the pageheap is caught by the next span allocations.
 * Each fatal case runs in a forked child; the parent checks that it died
 * of SIGABRT and what it printed. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

static char why[HPM_WHY_BYTES];

static void *traffic_main(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    static const size_t sizes[] = {8, 24, 100, 1000, 5000, 20000, 70000, 300000, 3 << 20};
    void *live[256] = {0};
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % 256;
        if (live[k]) { free(live[k]); live[k] = NULL; continue; }
        size_t size = sizes[(seed >> 16) % (sizeof sizes / sizeof sizes[0])] + (seed >> 24);
        live[k] = (seed & 1) ? malloc(size) : calloc(1, size);
        if (live[k]) memset(live[k], 0x5a, size < 64 ? size : 64);
    }
    bool ok = _hpm_check_all(why);   /* this thread's heap with live blocks, and the pageheap */
    for (int k = 0; k < 256; k++) free(live[k]);
    return ok ? NULL : (void *)1;
}

static void test_checkers_after_traffic(void) {
    pthread_t t[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, traffic_main, (void *)(uintptr_t)(i * 77 + 1)) == 0);
    void *r = traffic_main((void *)(uintptr_t)5);
    CHECK(r == NULL, "main thread's heap or the pageheap: %s", why);
    for (int i = 0; i < 3; i++) {
        CHECK(pthread_join(t[i], &r) == 0 && r == NULL, "thread %d found: %s", i, why);
    }
    CHECK(_hpm_check_all(why), "after the threads exited: %s", why);
    hpm_trim();
    CHECK(_hpm_check_all(why), "after hpm_trim: %s", why);
    void *keep[64];
    for (int i = 0; i < 64; i++) keep[i] = malloc(48);
    CHECK(_hpm_check_all(why), "with live small blocks: %s", why);
    for (int i = 0; i < 64; i += 2) free(keep[i]);
    CHECK(_hpm_check_all(why), "with half of them freed: %s", why);
    for (int i = 1; i < 64; i += 2) free(keep[i]);
}

/* Damage to the calling thread's heap, found by _hpm_check_heap: a
 * slab's count (of a full slab: the current one is in the hand, where its
 * count is not kept), a free block's cookie (in the hand and on a slab's
 * own list) and a list tag. */
static void test_heap_checker_finds_damage(void) {
    enum { N = 2000 };   /* 40-byte blocks: more than two slabs of their class hold */
    static void *p[N];
    for (int i = 0; i < N; i++) p[i] = malloc(40);
    CHECK(p[0] != NULL && p[N - 1] != NULL);
    hpm_heap_t *h = _hpm_tls_heap;
    hpm_span_t *cur = hpm_span_of(p[N - 1]), *s = NULL;
    int first = 0;   /* a block of a full slab */
    while (first < N - 1 && (s = hpm_span_of(p[first])) == cur) first++;
    CHECK(h && s && s->kind == SPAN_SLAB && cur && cur != s, "h %p s %p cur %p first %d", (void *)h, (void *)s, (void *)cur, first);
    if (!h || !s || !cur || cur == s) return;
    CHECK(s->list == LIST_FULL, "the first slab is on list %u, not full", s->list);
    CHECK(_hpm_check_heap(h, why), "sound heap: %s", why);
    s->credit++;
    CHECK(!_hpm_check_heap(h, why), "a wrong used count is not found");
    printf("damage used count -> %s\n", why);
    s->credit--;
    free(p[first]);   /* the full slab gets a free block, and becomes available */
    p[first] = NULL;
    void **holes[2] = {s->free, h->hand[s->class_idx]};
    for (int k = 0; k < 2; k++) {
        void **b = holes[k];
        CHECK(b != NULL, "no free block %s", k ? "in the hand" : "on the slab's list");
        if (!b) continue;
        uint64_t cookie = (uint64_t)b[1];
        b[1] = NULL;
        CHECK(!_hpm_check_heap(h, why), "a free block without its cookie is not found (%s)", k ? "hand" : "slab");
        printf("damage cookie -> %s\n", why);
        b[1] = (void *)cookie;
    }
    uint8_t list = cur->list;
    cur->list = LIST_FULL;
    CHECK(!_hpm_check_heap(h, why), "a wrong list tag is not found");
    printf("damage list tag -> %s\n", why);
    cur->list = list;
    CHECK(_hpm_check_heap(h, why), "sound again: %s", why);
    for (int i = 0; i < N; i++) free(p[i]);
}

/* Runs fn in a child; true when it died of SIGABRT and said want on stderr. */
static bool child_aborts_with(void (*fn)(void), const char *want) {
    int fds[2];
    if (pipe(fds)) return false;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], 2);
        close(fds[0]);
        fn();
        _exit(0);   /* not reached when the check works */
    }
    close(fds[1]);
    char buf[1024];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fds[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
    buf[n] = 0;
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    printf("child: %s", n ? buf : "(nothing on stderr)\n");
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(buf, want) != NULL;
}

static int evaluated;
static int count_evaluation(void) { return ++evaluated; }

static void false_assert(void) { hpm_assert(1 + 1 == 3); }

/* Pageheap lock, then the abandoned list (rank 3, then 2): out of order. */
static void out_of_order(void) {
    pthread_mutex_lock(&_hpm_ph.lock);
    _hpm_heaps_reclaim_abandoned(true);   /* takes every abandoned lock: the check aborts at the first */
    pthread_mutex_unlock(&_hpm_ph.lock);
}

/* A wrong used count in the pageheap, then a span allocation. */
static void damaged_pageheap(void) {
    pthread_mutex_lock(&_hpm_ph.lock);
    _hpm_ph.used_pages_total += 1;
    pthread_mutex_unlock(&_hpm_ph.lock);
    for (int i = 0; i < 4096; i++) {   /* the check is amortized on a large arena: a few of these */
        void *volatile p = malloc(3u << 20);   /* large: medium sizes stay in the span caches; volatile: the compiler may not drop the pair */
        free(p);
    }
}

static void test_levels(void) {
    printf("compiled at HPM_DEBUG=%d\n", HPM_DEBUG);
    evaluated = 0;
    hpm_assert(count_evaluation() > 0);
    hpm_assert_internal(count_evaluation() > 0);
    hpm_assert_expensive(count_evaluation() > 0);
    CHECK(evaluated == HPM_DEBUG, "asserts up to the level evaluate their argument: %d evaluated at level %d", evaluated, HPM_DEBUG);
    if (HPM_DEBUG >= 1)
        CHECK(child_aborts_with(false_assert, "hpmalloc: assertion failed: 1 + 1 == 3"), "a false hpm_assert aborts with one line");
    if (HPM_DEBUG >= 2) {
        CHECK(child_aborts_with(out_of_order, "lock order: taking abandoned while holding pageheap"),
              "taking the abandoned-list lock under the pageheap lock aborts");
        pthread_mutex_lock(&_hpm_ph.lock);   /* the right order passes: pageheap, then metadata */
        void *m = _hpm_meta_alloc(64);
        CHECK(m != NULL && _hpm_lock_held(HPM_LOCK_PAGEHEAP), "pageheap then metadata is in order");
        pthread_mutex_unlock(&_hpm_ph.lock);
        CHECK(!_hpm_lock_held(HPM_LOCK_PAGEHEAP), "the held mask clears on unlock");
    }
    if (HPM_DEBUG >= 3)
        CHECK(child_aborts_with(damaged_pageheap, "used pages, total"), "pageheap damage is caught by the next span allocation");
}

int main(void) {
    void *volatile first = malloc(1);   /* initialise (volatile: the compiler may not drop the pair) */
    free(first);
    test_checkers_after_traffic();
    test_heap_checker_finds_damage();
    test_levels();
    return TEST_DONE();
}
