/* test_medium.c: medium sizes (8 KiB to 1 MiB) through the per-thread span
 * cache and the central transfer cache (spancache.c, transfer.c):
 * contents survive reuse; sizes round to the medium classes; the thread
 * cache and the central cache stay within their bounds and counts, which
 * follow the heap's size; a
 * class with an empty stack borrows a span of the next two classes up; a
 * double free of a cached medium span aborts with one line (death test,
 * in a forked child); blocks freed by another thread come back; thread
 * exit returns the thread's cache to the central cache; and hpm_trim
 * afterwards gives every whole hugepage back (nothing stranded). */
#include <pthread.h>
#include <malloc.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define N 2000

static size_t size_of(unsigned i) { return 8193 + ((size_t)i * 7919u) % ((1u << 20) - 8193); }

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t k = 0; k + 1 < n; k += 512) p[k] = (unsigned char)(seed + k / 512);
    p[n - 1] = (unsigned char)seed;
}
static bool intact(const unsigned char *p, size_t n, unsigned seed) {
    for (size_t k = 0; k + 1 < n; k += 512) if (p[k] != (unsigned char)(seed + k / 512)) return false;
    return p[n - 1] == (unsigned char)seed;
}

static void *small_thread(void *arg) {
    char *volatile p = malloc(32);   /* volatile: the pair must not be optimised away */
    free(p);
    return arg;
}

static size_t h_cache_bytes(void) { return _hpm_tls_heap ? _hpm_tls_heap->span_cache_bytes : 0; }

static void test_classes(void) {
    size_t bad = 0, prev = 0;
    for (unsigned c = 0; c < HPM_MEDIUM_CLASSES; c++) {
        size_t pages = hpm_medium_pages(c);
        if (pages <= prev || hpm_medium_class(pages) != c) bad++;
        prev = pages;
    }
    CHECK(bad == 0, "%zu classes do not round-trip", bad);
    CHECK(hpm_medium_pages(0) == 3 && hpm_medium_pages(HPM_MEDIUM_CLASSES - 1) == HPM_LARGE_MIN_PAGES - 1);
    size_t worst = 0;   /* rounding waste at most 25% */
    for (size_t n = 3; n < HPM_LARGE_MIN_PAGES; n++) {
        size_t r = hpm_medium_pages(hpm_medium_class(n));
        if (r < n || (r - n) * 4 > n) worst++;
    }
    CHECK(worst == 0, "%zu page counts round badly", worst);
    /* a heap that never grew past HPM_SMALL_HEAP_PAGES caches no medium
     * spans: each has exactly the pages it needs */
    CHECK(!_hpm_ph.medium_caching, "a test heap of %zu pages counts as grown", _hpm_ph.used_pages_total);
    void *p = malloc(17 * 4096);
    CHECK(malloc_usable_size(p) == 17 * 4096, "small heap: usable %zu", malloc_usable_size(p));
    free(p);
    CHECK(h_cache_bytes() == 0, "small heap: %zu bytes cached", h_cache_bytes());
    /* the caches come on when the heap first reaches HPM_SMALL_HEAP_PAGES
     * (in a child, so that the parent can check the other trigger) */
    pid_t pid = fork();
    if (pid == 0) {
        void *big = malloc(HPM_SMALL_HEAP_PAGES * 4096);
        _exit(big && _hpm_ph.medium_caching ? 0 : 1);
    }
    int st = -1;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a child's heap of 8 MiB turns the medium caches on (status %d)", st);
    /* ... or when a second thread takes a heap */
    CHECK(!_hpm_ph.medium_caching, "the parent's caches came on with the child's heap");
    pthread_t t;
    CHECK(pthread_create(&t, NULL, small_thread, NULL) == 0 && pthread_join(t, NULL) == 0);
    CHECK(_hpm_ph.medium_caching, "a second thread's heap turns the medium caches on");
    p = malloc(9 * 4096 + 1);         /* 10 pages: a class of its own */
    CHECK(malloc_usable_size(p) == 10 * 4096, "usable %zu", malloc_usable_size(p));
    free(p);
    p = malloc(17 * 4096);            /* 17 pages round to 20 */
    CHECK(malloc_usable_size(p) == 20 * 4096, "usable %zu", malloc_usable_size(p));
    free(p);
    CHECK(h_cache_bytes() > 0, "grown heap: a freed medium span is cached");
}

static size_t used_bytes(void) {
    pthread_mutex_lock(&_hpm_ph.lock);
    size_t pages = _hpm_ph.used_pages_total;
    pthread_mutex_unlock(&_hpm_ph.lock);
    return pages << HPM_PAGE_SHIFT;
}

/* glibc-bench's step twice: 160 blocks of 8..64 KiB, all freed; a busy
 * thread keeps at least three quarters of them (under the quarter of the
 * used pages it kept about 1 MiB). */
static void glibc_steps(const char *who) {
    enum { K = 160 };
    static char *b[K];
    size_t span_bytes = 0;
    for (unsigned round = 0; round < 2; round++) {
        span_bytes = 0;
        for (unsigned i = 0; i < K; i++) {
            size_t n = 8193 + ((size_t)i * 7919u) % (56u << 10);
            b[i] = malloc(n);
            if (b[i]) memset(b[i], (int)i, 64);
            span_bytes += malloc_usable_size(b[i]);
        }
        for (unsigned i = K; i-- > 0;) free(b[i]);
    }
    size_t cached = h_cache_bytes(), used = used_bytes();
    printf("%s: %zu KiB freed, %zu KiB cached, %zu KiB used\n", who, span_bytes >> 10, cached >> 10, used >> 10);
    CHECK(cached >= span_bytes * 3 / 4, "%s kept %zu of %zu freed KiB", who, cached >> 10, span_bytes >> 10);
    CHECK(cached <= used && cached <= HPM_SPANCACHE_MAX_BYTES, "%s: cache %zu KiB, used %zu KiB", who, cached >> 10, used >> 10);
}

#if TH_CHILD_THREADS
/* A heap of its own, kept until a byte arrives on the pipe. */
static void *heap_holder(void *arg) {
    char *volatile p = malloc(32), c;
    ssize_t got = read(*(int *)arg, &c, 1);
    free(p);
    return got == 1 ? arg : NULL;
}
#endif

/* A thread that churns medium blocks in a small heap turns the span
 * caches on after HPM_SPANCACHE_BUSY_FREES frees (spancache.c, the
 * medium spans of any page count), and keeps what it frees up to the
 * whole heap (cache_bound), alone or beside another thread's heap:
 * glibc-bench's pattern frees its whole working set and takes it again,
 * and with a quarter of the used pages (which count the cache) the
 * thread kept about 1 MiB. In a forked child: the parent's later tests
 * need the caches off. */
static void busy_child(void) {
    CHECK(!_hpm_ph.medium_caching && _hpm_one_heap, "the child starts small, with one heap");
    for (unsigned i = 0; i + 1 < HPM_SPANCACHE_BUSY_FREES; i++) {
        char *volatile p = malloc(17 * 4096);   /* 17 pages: no class's count */
        if (p) p[0] = 1;
        free(p);
    }
    CHECK(!_hpm_ph.medium_caching && h_cache_bytes() == 0, "caches on after %u medium frees (%zu bytes cached)",
          HPM_SPANCACHE_BUSY_FREES - 1, h_cache_bytes());
    char *volatile q = malloc(17 * 4096);
    free(q);
    CHECK(_hpm_ph.medium_caching, "caches still off after %u medium frees", HPM_SPANCACHE_BUSY_FREES);
    q = malloc(16 * 4096);            /* 16 pages: a class's count */
    free(q);
    CHECK(h_cache_bytes() == 16 * 4096, "a busy thread's freed 16-page span: %zu bytes cached", h_cache_bytes());
    glibc_steps("busy thread alone");
#if TH_CHILD_THREADS
    /* the same beside a second thread's heap, which stays live */
    pthread_t t;
    int fds[2];
    CHECK(pipe(fds) == 0 && pthread_create(&t, NULL, heap_holder, &fds[0]) == 0);
    while (__atomic_load_n(&_hpm_one_heap, __ATOMIC_RELAXED)) sched_yield();
    glibc_steps("busy thread beside another heap");
    CHECK(write(fds[1], "x", 1) == 1 && pthread_join(t, NULL) == 0);
#endif
    char why[256] = "";
    CHECK(_hpm_check_heap(_hpm_tls_heap, why), "heap check: %s", why);
    fflush(stdout);
    _exit(th_failed ? 1 : 0);
}

static void test_busy_small_heap(void) {
    char buf[4096];
    int st = th_run_child(busy_child, buf, sizeof buf);
    CHECK(st == 0, "busy child: status %d: %s", st, buf);
}

static void *turn_caching_on(void *arg) {
    void *volatile p = malloc(64);   /* a second thread's heap turns the medium caches on */
    free(p);
    return arg;
}

/* 64 blocks of 256 KiB, each written at its start, then all freed. */
static void churn_quarter_mib(void) {
    void *b[64];
    for (int i = 0; i < 64; i++) if ((b[i] = malloc(256 << 10))) memset(b[i], i, 4096);
    for (int i = 0; i < 64; i++) free(b[i]);
}

/* The caches follow the heap (spancache.c, cache_bound; transfer.c,
 * central_bound): in a heap of a few MiB a thread's cache keeps about
 * 1 MiB and, while it is the only thread with a heap, the central cache
 * as little, so 16 MiB of freed 256 KiB spans go back to the pageheap
 * (before: 3.75 MiB stayed in the thread's cache, as many spans as its
 * stack of the class takes, and 4 MiB in the central one). Beside a
 * ballast of 256 MiB (never written) the same frees stay cached: the
 * bound is a share of the heap, not a smaller constant. Runs while the
 * heap is small (after test_classes). */
static void test_heap_share_bounds(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, turn_caching_on, NULL) == 0 && pthread_join(t, NULL) == 0);
    CHECK(__atomic_load_n(&_hpm_ph.medium_caching, __ATOMIC_RELAXED) && _hpm_one_heap, "caching on, one heap");
    churn_quarter_mib();
    hpm_heap_t *h = _hpm_tls_heap;
    size_t thread_small = h->span_cache_bytes, central_small = _hpm_transfer_bytes(), used_small = used_bytes();
    printf("small heap: thread cache %zu KiB, central %zu KiB, used %zu KiB\n", thread_small >> 10, central_small >> 10,
           used_small >> 10);
    CHECK(thread_small <= HPM_SPANCACHE_MIN_BYTES + (256 << 10), "a small heap's thread cache holds %zu KiB", thread_small >> 10);
    CHECK(central_small <= HPM_SPANCACHE_MIN_BYTES + (256 << 10), "a small heap's central cache holds %zu KiB", central_small >> 10);
    CHECK(used_small <= (size_t)6 << 20, "%zu KiB of pages still used after 16 MiB were freed", used_small >> 10);
    void *volatile ballast = malloc((size_t)256 << 20);
    CHECK(ballast != NULL);
    churn_quarter_mib();
    size_t thread_big = h->span_cache_bytes;
    printf("beside a 256 MiB ballast: thread cache %zu KiB, central %zu KiB\n", thread_big >> 10, _hpm_transfer_bytes() >> 10);
    CHECK(thread_big >= (size_t)3 << 20, "beside a 256 MiB ballast the thread cache holds %zu KiB", thread_big >> 10);
    free(ballast);
    char why[256] = "";
    CHECK(_hpm_check_heap(h, why), "heap check: %s", why);
}

static void test_contents_and_bounds(void) {
    static unsigned char *p[N];
    for (int round = 0; round < 3; round++) {
        for (unsigned i = 0; i < N; i++) {
            p[i] = malloc(size_of(i + round));
            if (p[i]) fill(p[i], size_of(i + round), i);
        }
        size_t bad = 0;
        for (unsigned i = 0; i < N; i++) if (!p[i] || !intact(p[i], size_of(i + round), i)) bad++;
        CHECK(bad == 0, "round %d: %zu blocks damaged", round, bad);
        for (unsigned i = 0; i < N; i += 2) free(p[i]);
        for (unsigned i = 1; i < N; i += 2) if (!intact(p[i], size_of(i + round), i)) bad++;
        for (unsigned i = 1; i < N; i += 2) free(p[i]);
        CHECK(bad == 0, "round %d: %zu blocks damaged after freeing their neighbours", round, bad);
        hpm_heap_t *h = _hpm_tls_heap;
        CHECK(h && h->span_cache_bytes <= HPM_SPANCACHE_MAX_BYTES, "thread cache %zu bytes", h ? h->span_cache_bytes : 0);
        CHECK(_hpm_transfer_bytes() <= HPM_TRANSFER_MAX_BYTES, "central %zu bytes", _hpm_transfer_bytes());
        char why[256] = "";
        CHECK(h && _hpm_check_heap(h, why), "heap check: %s", why);
    }
    /* calloc of a reused (dirty) span reads as zero */
    unsigned char *d = malloc(50000);
    volatile unsigned char *dv = d;   /* not a dead store before free */
    for (size_t k = 0, n = malloc_usable_size(d); k < n; k++) dv[k] = 0xee;
    free(d);
    unsigned char *z = calloc(1, 50000);
    size_t nonzero = 0;
    for (size_t k = 0; k < 50000; k++) nonzero += z[k] != 0;
    CHECK(z == d && nonzero == 0, "calloc reused %d, %zu non-zero bytes", z == d, nonzero);
    /* it zeroes the request, not the class's rounded pages (50000 bytes
     * round to 14 pages, 57344): the rest of the reused span is as it was */
    size_t usable = malloc_usable_size(z), kept = 0;
    volatile unsigned char *zv = z;   /* the compiler may assume what calloc returns reads as zero */
    for (size_t k = 50000; k < usable; k++) kept += zv[k] == 0xee;
    CHECK(usable == 14 * 4096 && kept == usable - 50000, "usable %zu, %zu of the %zu bytes past the request left alone",
          usable, kept, usable - 50000);
    free(z);
}

/* A class whose stack is empty takes the newest span of the next two
 * classes up before it refills (spancache.c, borrow_up): 40 KiB (10
 * pages) gets a cached 56 KiB span (14 pages, two classes up), whole
 * and usable, and the span goes back to its own stack when freed; a
 * span three classes up (64 KiB) is not taken. Runs with the caches on
 * (after test_heap_share_bounds). */
static void test_borrow_up(void) {
    hpm_heap_t *h = _hpm_tls_heap;
    unsigned c40 = hpm_medium_class(10), c56 = hpm_medium_class(14), c64 = hpm_medium_class(16);
    CHECK(c56 == c40 + 2 && c64 == c40 + 3, "classes %u %u %u", c40, c56, c64);
    _hpm_spancache_flush(h);
    unsigned char *big = malloc(56 << 10);
    CHECK(big != NULL);
    uintptr_t big_at = (uintptr_t)big;
    free(big);
    unsigned n56 = h->span_cache_n[c56];   /* the refill took a batch: the span freed is on top */
    CHECK(n56 >= 1 && h->span_cache_n[c40] == 0, "stacks after the free: 56 KiB %u, 40 KiB %u", n56, h->span_cache_n[c40]);
    unsigned char *p = malloc(40 << 10);
    size_t usable = malloc_usable_size(p);
    CHECK((uintptr_t)p == big_at && usable == 56 << 10, "40 KiB got %p (usable %zu), the cached 56 KiB span is %#lx",
          (void *)p, usable, (unsigned long)big_at);
    CHECK(h->span_cache_n[c56] == n56 - 1, "the 56 KiB stack holds %u, %u before", h->span_cache_n[c56], n56);
    memset(p, 0x5a, usable);
    size_t bad = 0;
    for (size_t k = 0; k < usable; k += 4096) bad += p[k] != 0x5a;
    CHECK(bad == 0 && p[usable - 1] == 0x5a, "%zu pages of the borrowed span lost their contents", bad);
    free(p);
    CHECK(h->span_cache_n[c56] == n56 && h->span_cache_n[c40] == 0, "back in its own stack: 56 KiB %u, 40 KiB %u",
          h->span_cache_n[c56], h->span_cache_n[c40]);
    _hpm_spancache_flush(h);
    unsigned char *far = malloc(64 << 10);
    uintptr_t far_at = (uintptr_t)far;
    free(far);
    unsigned n64 = h->span_cache_n[c64];
    unsigned char *q = malloc(40 << 10);
    CHECK((uintptr_t)q != far_at && malloc_usable_size(q) == 40 << 10 && h->span_cache_n[c64] == n64,
          "a 64 KiB span, three classes up: 40 KiB got usable %zu, %s, the 64 KiB stack %u of %u", malloc_usable_size(q),
          (uintptr_t)q == far_at ? "the span" : "another", h->span_cache_n[c64], n64);
    free(q);
    char why[256] = "";
    CHECK(_hpm_check_heap(h, why), "heap check: %s", why);
}

static size_t dies_size;
static void double_free_child(void) {
    void *p = hpm_malloc(dies_size);   /* hpm_*: the compiler may not drop the pair */
    hpm_free(p);   /* now cached in this thread (LIST_CACHED) */
    hpm_free(p);
}

static void test_double_free_dies(size_t size) {
    char buf[512];
    dies_size = size;
    int st = th_run_child(double_free_child, buf, sizeof buf);
    CHECK(st != -1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "size %zu: child status %#x", size, st);
    CHECK(strncmp(buf, "hpmalloc:", 9) == 0 && strstr(buf, "double free") && strchr(buf, '\n') == buf + strlen(buf) - 1,
          "size %zu: stderr '%s'", size, buf);
}

/* ---- threads ---- */

static unsigned char *shared[N];

static void *producer(void *arg) {
    (void)arg;
    for (unsigned i = 0; i < N; i++) { shared[i] = malloc(size_of(i)); fill(shared[i], size_of(i), i); }
    return NULL;
}

static size_t thread_cache_bytes;
static void *churn_then_exit(void *arg) {
    (void)arg;
    void *q[64];
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < 64; i++) q[i] = malloc(20000 + (size_t)i * 1000);
        for (int i = 0; i < 64; i++) free(q[i]);
    }
    thread_cache_bytes = _hpm_tls_heap->span_cache_bytes;
    return NULL;
}

static void test_threads(void) {
    pthread_t t;
    pthread_create(&t, NULL, producer, NULL);
    pthread_join(t, NULL);
    size_t bad = 0;
    for (unsigned i = 0; i < N; i++) if (!intact(shared[i], size_of(i), i)) bad++;
    CHECK(bad == 0, "%zu blocks of the exited producer damaged", bad);
    for (unsigned i = 0; i < N; i++) free(shared[i]);   /* cross-thread frees of medium blocks */
    void *again[N];
    size_t reused = 0;
    for (unsigned i = 0; i < N; i++) again[i] = malloc(size_of(i));
    for (unsigned i = 0; i < N; i++) { if (hpm_range(again[i], NULL, NULL)) reused++; free(again[i]); }
    CHECK(reused == N, "%zu of %u allocated again", reused, N);

    hpm_trim();
    size_t central_before = _hpm_transfer_bytes();
    CHECK(central_before == 0, "trim empties the central cache (%zu)", central_before);
    pthread_create(&t, NULL, churn_then_exit, NULL);
    pthread_join(t, NULL);
    CHECK(thread_cache_bytes > 0, "the thread cached spans");
    CHECK(_hpm_transfer_bytes() >= thread_cache_bytes, "exit returned %zu bytes to the central cache (%zu)",
          thread_cache_bytes, _hpm_transfer_bytes());
    /* that memory comes back here without the pageheap: take it */
    void *q = malloc(20000);
    CHECK(q && hpm_range(q, NULL, NULL));
    free(q);
}

static void test_trim_releases(void) {
    static void *p[512];
    for (unsigned i = 0; i < 512; i++) { p[i] = malloc(96 * 1024); memset(p[i], 1, 96 * 1024); }
    for (unsigned i = 0; i < 512; i++) free(p[i]);
    hpm_stats_t st;
    hpm_stats_get(&st);
    uint64_t released_before = st.hp_released;
    size_t freed = hpm_trim();
    hpm_stats_get(&st);
    printf("after trim: hp_in_use %llu hp_cached %llu released %llu -> %llu, trimmed %zu bytes\n",
           (unsigned long long)st.hp_in_use, (unsigned long long)st.hp_cached, (unsigned long long)released_before,
           (unsigned long long)st.hp_released, freed);
    CHECK(_hpm_transfer_bytes() == 0 && _hpm_tls_heap->span_cache_bytes == 0, "caches empty after trim");
    CHECK(st.hp_released >= released_before + 20, "48 MiB freed, %llu hugepages released",
          (unsigned long long)(st.hp_released - released_before));
    CHECK(st.hp_in_use <= 3 && st.hp_cached == 0, "in use %llu, cached %llu", (unsigned long long)st.hp_in_use,
          (unsigned long long)st.hp_cached);
}

/* The central cache hands a thread only spans whose home is its heap (the
 * heap whose hugepage holds them), no heap, or a heap no longer active;
 * anything else comes from the pageheap, in a hugepage of the asking
 * heap's own (hugepage.c and transfer.c, "homes"). Two heaps made here
 * stand for two threads. */
static hpm_heap_t fake_a, fake_b;

static void test_central_homes(void) {
    void *big = malloc(80u << 20);   /* homes apply from 32 MiB, 16 MiB a live heap (hpm_homes_on) */
    CHECK(big && hpm_homes_on(&_hpm_ph));
    hpm_trim();   /* the central cache starts empty */
    __atomic_store_n(&fake_a.active, true, __ATOMIC_RELAXED);
    __atomic_store_n(&fake_b.active, true, __ATOMIC_RELAXED);
    unsigned cls = hpm_medium_class(12);
    hpm_span_t *a[8], *b[8], *again[8];
    CHECK(_hpm_transfer_get(&fake_a, cls, 8, a) == 8 && _hpm_transfer_get(&fake_b, cls, 8, b) == 8);
    size_t hp_a = (a[0]->start - _hpm_ph.base) >> HPM_HP_SHIFT, hp_b = (b[0]->start - _hpm_ph.base) >> HPM_HP_SHIFT;
    CHECK(hp_a != hp_b, "the two heaps' first spans share hugepage %zu", hp_a);
    size_t mixed = 0;
    for (unsigned i = 0; i < 8; i++)
        for (unsigned j = 0; j < 8; j++)
            if ((a[i]->start >> HPM_HP_SHIFT) == (b[j]->start >> HPM_HP_SHIFT)) mixed++;
    CHECK(mixed == 0, "%zu pairs of the two heaps' spans share a hugepage", mixed);
    CHECK(_hpm_ph.hps[hp_a].home == &fake_a && _hpm_ph.hps[hp_b].home == &fake_b, "the hugepages are the heaps' homes");

    _hpm_transfer_put(cls, a, 8);   /* a's spans wait in the central cache */
    CHECK(_hpm_transfer_bytes() == 8 * hpm_medium_bytes(cls));
    unsigned n = _hpm_transfer_get(&fake_b, cls, 4, again);   /* b does not get them */
    CHECK(n == 4 && _hpm_transfer_bytes() == 8 * hpm_medium_bytes(cls), "b took %u, central holds %zu", n,
          _hpm_transfer_bytes());
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < 8; j++) CHECK(again[i] != a[j], "b got a's span %u", j);
    CHECK(again[0]->home == &fake_b && a[0]->home == &fake_a, "spans know their homes");
    _hpm_transfer_put(cls, again, n);
    hpm_span_t *back[8];
    n = _hpm_transfer_get(&fake_a, cls, 8, back);   /* a gets its own back, newest first */
    CHECK(n == 8, "a took back %u of its 8", n);
    for (unsigned i = 0; i < n; i++) CHECK(back[i] == a[7 - i], "a's span %u came back as %p", i, (void *)back[i]);
    _hpm_transfer_put(cls, back, n);
    __atomic_store_n(&fake_a.active, false, __ATOMIC_RELAXED);   /* a's thread exits: anyone takes its spans */
    n = _hpm_transfer_get(&fake_b, cls, 8, back);
    size_t of_a = 0;
    for (unsigned i = 0; i < n; i++)
        for (unsigned j = 0; j < 8; j++) of_a += back[i] == a[j];
    CHECK(n == 8 && of_a == 8, "after a exits, b took %u spans, %zu of them a's", n, of_a);
    _hpm_transfer_put(cls, back, n);
    _hpm_transfer_put(cls, b, 8);
    __atomic_store_n(&fake_b.active, false, __ATOMIC_RELAXED);
    hpm_trim();
    CHECK(_hpm_transfer_bytes() == 0, "trim empties the central cache");
    free(big);
}

/* The release tick and a live thread's spans that wait for it in the
 * central cache while another thread keeps taking its own of the class:
 * what nobody took for a whole tick goes back to the pageheap. Before
 * (session 49's review), a class that anyone took from kept everything,
 * so the idle thread's spans stayed as long as the other thread was busy.
 * In a forked child, where no background thread ticks in between. */
static int idle_home_child(void) {
    hpm_option_set(HPM_OPT_BACKGROUND, 0);
    void *big = malloc(80u << 20);
    if (!big || !hpm_homes_on(&_hpm_ph)) return 1;
    hpm_trim();
    __atomic_store_n(&fake_a.active, true, __ATOMIC_RELAXED);
    __atomic_store_n(&fake_b.active, true, __ATOMIC_RELAXED);
    unsigned cls = hpm_medium_class(12);
    size_t one = hpm_medium_bytes(cls);
    hpm_span_t *a[8], *b[8], *again[4], *left[8];
    if (_hpm_transfer_get(&fake_a, cls, 8, a) != 8 || _hpm_transfer_get(&fake_b, cls, 8, b) != 8) return 2;
    _hpm_transfer_put(cls, a, 8);   /* a's thread went idle: its spans wait here */
    _hpm_transfer_put(cls, b, 8);
    if (_hpm_transfer_bytes() != 16 * one) return 3;
    if (_hpm_transfer_get(&fake_b, cls, 4, again) != 4) return 4;   /* b takes its own */
    _hpm_transfer_put(cls, again, 4);
    _hpm_transfer_release(true);   /* a's have waited less than a tick: all stay */
    if (_hpm_transfer_bytes() != 16 * one) return 5;
    if (_hpm_transfer_get(&fake_b, cls, 4, again) != 4) return 6;   /* b goes on taking the same four */
    _hpm_transfer_put(cls, again, 4);
    _hpm_transfer_release(true);   /* a's eight and b's four older ones were not taken for a tick */
    if (_hpm_transfer_bytes() != 4 * one) return 7;
    if (_hpm_transfer_get(&fake_b, cls, 8, left) != 4) return 8;
    for (unsigned i = 0; i < 4; i++)
        if (left[i] != again[3 - i]) return 9;   /* the four b took, newest first */
    _hpm_transfer_put(cls, left, 4);
    char why[256];
    if (!ht_pageheap_sound(why)) {
        _hpm_message("test_medium: the pageheap after the ticks: %s\n", why);
        return 10;
    }
    hpm_trim();
    return _hpm_transfer_bytes() == 0 ? 0 : 11;
}

static void test_central_idle_home(void) {
    pid_t pid = fork();
    if (pid == 0) _exit(idle_home_child());
    CHECK(pid > 0);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "child status %#x (exit code: 1 no homes, 2-4 set-up, 5 a's spans went back before a tick, 7 the "
          "central cache kept what nobody took for a tick, 8-9 not b's four left, 10 pageheap unsound, 11 trim)",
          status);
}

/* Two threads that allocate medium blocks at the same time get them in
 * hugepages of their own: no hugepage holds blocks of both. */
#define HOME_BLOCKS 300
static pthread_barrier_t home_barrier;
static void *home_blocks[2][HOME_BLOCKS];

static void *home_thread(void *arg) {
    void **mine = arg;
    pthread_barrier_wait(&home_barrier);
    for (unsigned i = 0; i < HOME_BLOCKS; i++) {
        mine[i] = malloc(33 * 1024 + (i * 977u) % (31 * 1024));
        memset(mine[i], (int)i, 64);
        if (i % 3 == 2) { free(mine[i - 1]); mine[i - 1] = malloc(40 * 1024); }   /* some churn through the caches */
    }
    pthread_barrier_wait(&home_barrier);   /* both hold theirs while main counts */
    pthread_barrier_wait(&home_barrier);
    for (unsigned i = 0; i < HOME_BLOCKS; i++) free(mine[i]);
    return NULL;
}

static void test_threads_apart(void) {
    void *big = malloc(80u << 20);
    CHECK(big && hpm_homes_on(&_hpm_ph));
    pthread_t t[2];
    pthread_barrier_init(&home_barrier, NULL, 3);
    for (int k = 0; k < 2; k++) pthread_create(&t[k], NULL, home_thread, home_blocks[k]);
    pthread_barrier_wait(&home_barrier);
    pthread_barrier_wait(&home_barrier);
    size_t shared = 0;
    for (unsigned i = 0; i < HOME_BLOCKS; i++)
        for (unsigned j = 0; j < HOME_BLOCKS; j++)
            if (((uintptr_t)home_blocks[0][i] >> HPM_HP_SHIFT) == ((uintptr_t)home_blocks[1][j] >> HPM_HP_SHIFT)) shared++;
    CHECK(shared == 0, "%zu pairs of the two threads' blocks share a hugepage", shared);
    pthread_barrier_wait(&home_barrier);
    for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
    pthread_barrier_destroy(&home_barrier);
    free(big);
}

int main(void) {
    test_busy_small_heap();
    test_classes();
    test_heap_share_bounds();
    test_contents_and_bounds();
    test_borrow_up();
    test_double_free_dies(12 * 1024);
    test_double_free_dies(700 * 1024);
    test_threads();
    test_central_homes();
    test_central_idle_home();
    test_threads_apart();
    test_trim_releases();
    return TEST_DONE();
}
