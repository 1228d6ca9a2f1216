/* test_asleep.c: the asleep drain (remote.c, "An asleep owner's inbox";
 * heap.c, _hpm_heaps_drain_asleep): the slabs of an owner that sleeps
 * while another thread frees its blocks go back to the pageheap, and an
 * owner that is awake and busy is never hurt by the drain.
 *
 * 1. A thread allocates blocks of three classes and sleeps in sem_wait.
 *    Another thread frees them all (to its inbox) and exits. The first
 *    look at the sleeper's inbox only notes it; the second gives back
 *    every slab but the current one of each class, all their pages, and
 *    puts back in the inbox exactly the blocks of the current slabs. The
 *    sleeper, woken, allocates and writes the classes again, its heap
 *    sound, and after it exits and a trim, no page is left in use.
 *    (The background thread is off, so only the test drains.)
 * 2. Two busy owners, each handing half of the blocks it drops to the
 *    other and freeing the rest itself, in random order, and freeing what
 *    the other hands it, while the main thread drains every waiting inbox
 *    in a loop (_hpm_heaps_drain_idle(0)). Every block keeps its contents
 *    until its free, each owner's heap is sound at the end, and no page
 *    is left in use once both have exited (how many slabs the drains gave
 *    back meanwhile depends on timing: printed). Run under TSan and ASan
 *    by sanitize.sh.
 * 3. The one overlap of the drain with an owner's fast path: the owner
 *    frees the last live block of a full slab (the others wait in its
 *    inbox) while the drain is between its count and its verdicts (a
 *    test hook). The drain sees the count fall and gives the slab back,
 *    that block with it; the owner's free slow path, waiting at the gate
 *    meanwhile, must leave its lists alone (the slab is not its own any
 *    more): its heap is sound afterwards and every page comes back.
 *    (Whether the slow path tests the owner or only the slab's list, it
 *    passes here; the owner test is for a record that another thread
 *    reuses in between, which this test cannot arrange.) */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define CLASSES 3
#define BLOCKS 3000   /* per class */
static const size_t class_bytes[CLASSES] = {48, 256, 1000};

static void **blk;                              /* CLASSES * BLOCKS blocks (mmap: not from the heap) */
static hpm_heap_t *sleeper;
static hpm_span_t *sleeper_current[CLASSES];
static size_t sleeper_slabs, sleeper_current_pages, sleeper_pages;
static sem_t allocated, wake, woke_done;
static int sleeper_bad;
static bool sleeper_ok;
static char why[HPM_WHY_BYTES];

/* _hpm_check_heap of the calling thread's heap, inside its gates (the drains may be at it). */
static bool own_heap_sound(char *why) {
    hpm_heap_t *h = hpm_my_heap();
    _hpm_heap_slab_gate_enter(h);
    uint32_t in = _hpm_heap_gate_enter(h);
    bool ok = _hpm_check_heap(h, why);
    _hpm_heap_gate_leave(h, in);
    _hpm_heap_slab_gate_leave(h);
    return ok;
}

static unsigned char stamp(size_t i) { return (unsigned char)(i * 7 + 1); }

static void count_slabs(hpm_heap_t *h, unsigned cls) {
    for (int l = 0; l < 2; l++)
        for (hpm_span_t *s = l ? h->avail[cls] : h->full[cls]; s; s = s->next) {
            sleeper_slabs++;
            sleeper_pages += s->n_pages;
        }
}

static void *sleeper_thread(void *arg) {
    (void)arg;
    for (size_t i = 0; i < (size_t)CLASSES * BLOCKS; i++) {
        blk[i] = malloc(class_bytes[i / BLOCKS]);
        if (blk[i]) memset(blk[i], stamp(i), class_bytes[i / BLOCKS]);
    }
    sleeper = hpm_my_heap();
    for (unsigned c = 0; c < CLASSES; c++) {
        unsigned cls = hpm_size_class(class_bytes[c]);
        sleeper_current[c] = sleeper->current[cls];
        sleeper_slabs++;
        sleeper_current_pages += sleeper->current[cls]->n_pages;
        count_slabs(sleeper, cls);
    }
    sleeper_pages += sleeper_current_pages;
    sem_post(&allocated);
    sem_wait(&wake);   /* asleep: no allocator call until woken */
    static void *again[(size_t)CLASSES * BLOCKS];
    for (size_t i = 0; i < (size_t)CLASSES * BLOCKS; i++) {
        again[i] = malloc(class_bytes[i / BLOCKS]);
        if (!again[i]) { sleeper_bad++; continue; }
        memset(again[i], stamp(i + 3), class_bytes[i / BLOCKS]);
    }
    for (size_t i = 0; i < (size_t)CLASSES * BLOCKS; i++) {
        const unsigned char *p = again[i];
        if (!p) continue;
        if (p[0] != stamp(i + 3) || p[class_bytes[i / BLOCKS] - 1] != stamp(i + 3)) sleeper_bad++;   /* handed out twice */
        free(again[i]);
    }
    sleeper_ok = own_heap_sound(why);
    sem_post(&woke_done);
    return NULL;
}

static int freer_bad;

static void *freer_thread(void *arg) {
    (void)arg;
    void *volatile mine = malloc(16);   /* a heap of its own, to batch with; not a class of the sleeper's blocks */
    for (size_t i = 0; i < (size_t)CLASSES * BLOCKS; i++) {
        const unsigned char *p = blk[i];
        if (!p || p[0] != stamp(i) || p[class_bytes[i / BLOCKS] - 1] != stamp(i)) freer_bad++;
        free(blk[i]);
    }
    free(mine);
    return NULL;   /* exit: its outbox goes to the sleeper's inbox */
}

static bool in_current(const void *b) {
    hpm_span_t *s = hpm_span_of(b);
    for (unsigned c = 0; c < CLASSES; c++) if (s == sleeper_current[c]) return true;
    return false;
}

/* A part's start: everything it can give back given back, its three
 * semaphores at 0; the pages in use then. */
static size_t part_start(sem_t *a, sem_t *b, sem_t *c) {
    hpm_trim();
    sem_init(a, 0, 0);
    sem_init(b, 0, 0);
    sem_init(c, 0, 0);
    return ht_used_pages();
}

static void asleep_owner(void) {
    size_t before = part_start(&allocated, &wake, &woke_done);
    pthread_t ts, tf;
    CHECK(pthread_create(&ts, NULL, sleeper_thread, NULL) == 0);
    sem_wait(&allocated);
    CHECK(sleeper_slabs > 2 * CLASSES, "the sleeper holds %zu slabs", sleeper_slabs);
    CHECK(pthread_create(&tf, NULL, freer_thread, NULL) == 0);
    pthread_join(tf, NULL);
    CHECK(freer_bad == 0, "%d blocks changed before their free", freer_bad);
    size_t grown = ht_used_pages();
    CHECK(grown >= before + sleeper_pages, "pages in use %zu, before %zu + the sleeper's %zu", grown, before, sleeper_pages);
    size_t waiting = 0, expect_left = 0;
    for (void **b = atomic_load(&sleeper->inbox); b; b = b[0]) waiting++;
    for (size_t i = 0; i < (size_t)CLASSES * BLOCKS; i++) expect_left += in_current(blk[i]);
    CHECK(waiting == (size_t)CLASSES * BLOCKS, "%zu blocks wait in the sleeper's inbox, want %d", waiting, CLASSES * BLOCKS);

    uint64_t drains = _hpm_asleep_drains, slabs = _hpm_asleep_slabs;
    bool fence_ok = _hpm_ph.os->fence_all_threads() == 0;
    CHECK(_hpm_heaps_drain_asleep() || !fence_ok, "the first look found no inbox waiting");
    CHECK(_hpm_asleep_drains == drains, "the first look drained already");
    _hpm_heaps_drain_asleep();
    if (!fence_ok) {   /* no membarrier: the drain must change nothing */
        CHECK(_hpm_asleep_drains == drains && ht_used_pages() == grown, "a drain without a fence");
    } else {
        CHECK(_hpm_asleep_drains == drains + 1, "%llu drains at the second look, want 1",
              (unsigned long long)(_hpm_asleep_drains - drains));
        CHECK(_hpm_asleep_slabs - slabs == sleeper_slabs - CLASSES, "%llu slabs given back, want %zu",
              (unsigned long long)(_hpm_asleep_slabs - slabs), sleeper_slabs - CLASSES);
        size_t after = ht_used_pages();
        CHECK(grown - after == sleeper_pages - sleeper_current_pages, "pages in use %zu -> %zu, want %zu fewer", grown,
              after, sleeper_pages - sleeper_current_pages);
        size_t left = 0, stray = 0;
        for (void **b = atomic_load(&sleeper->inbox); b; b = b[0]) {
            left++;
            stray += !in_current(b);
        }
        CHECK(left == expect_left && stray == 0, "%zu blocks put back (%zu not of a current slab), want %zu", left, stray,
              expect_left);
    }
    sem_post(&wake);
    sem_wait(&woke_done);
    pthread_join(ts, NULL);
    CHECK(sleeper_bad == 0, "%d blocks of the woken sleeper were bad", sleeper_bad);
    CHECK(sleeper_ok, "the woken sleeper's heap: %s", why);
    hpm_trim();
    size_t end = ht_used_pages();
    CHECK(end == before, "pages in use %zu at the end, %zu before", end, before);
}

/* ---- 2. busy owners and the drain ---- */

#define RING 4096
typedef struct {                 /* blocks one peer hands the other (one producer, one consumer) */
    void *_Atomic slot[RING];
    atomic_uint head, tail;
} ring_t;
typedef struct {
    ring_t *out, *in;
    atomic_int *done_self, *done_other;
    uint64_t seed;
    bool heap_ok;
    char why[HPM_WHY_BYTES];
} peer_t;
static ring_t rings[2];
static atomic_int peer_done[2], busy_bad;

static size_t busy_size(uint64_t x) { return 16 + (size_t)(x % 1009); }
static unsigned char busy_stamp(const void *p, size_t n) { return (unsigned char)(((uintptr_t)p >> 4) ^ n); }

static void busy_fill(void *p, size_t n) {
    memcpy(p, &n, sizeof n);
    memset((char *)p + sizeof n, busy_stamp(p, n), n - sizeof n);
}

static bool busy_intact(const void *p) {
    size_t n;
    memcpy(&n, p, sizeof n);
    if (n < 16 || n > 1024) return false;
    const unsigned char *b = p;
    return b[sizeof n] == busy_stamp(p, n) && b[n - 1] == busy_stamp(p, n);
}

static bool ring_put(ring_t *r, void *p) {
    unsigned h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (h - atomic_load_explicit(&r->tail, memory_order_acquire) >= RING) return false;
    atomic_store_explicit(&r->slot[h % RING], p, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + 1, memory_order_release);
    return true;
}

static void *ring_get(ring_t *r) {
    unsigned t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (t == atomic_load_explicit(&r->head, memory_order_acquire)) return NULL;
    void *p = atomic_load_explicit(&r->slot[t % RING], memory_order_relaxed);
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return p;
}

static void free_checked_block(void *p) {
    if (!busy_intact(p)) atomic_fetch_add(&busy_bad, 1);
    free(p);
}

/* Replaces its blocks at random; of the blocks it drops, half go to the
 * other peer (remote frees there), half it frees itself; it frees what
 * the other peer hands it; now and then it sleeps, its inbox filling. */
static void *busy_peer(void *arg) {
    peer_t *me = arg;
    uint64_t x = me->seed;
    enum { LIVE = 2048 };
    void **live = calloc(LIVE, sizeof *live);
    if (!live) { atomic_fetch_add(&busy_bad, 1); return NULL; }
    for (unsigned round = 0; round < 300; round++) {
        for (unsigned i = 0; i < LIVE; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            if (live[i]) {
                if (!busy_intact(live[i])) atomic_fetch_add(&busy_bad, 1);
                if (!((x & 1) && ring_put(me->out, live[i]))) free(live[i]);
            }
            size_t n = busy_size(x >> 16);
            live[i] = malloc(n);
            if (!live[i]) { atomic_fetch_add(&busy_bad, 1); continue; }
            busy_fill(live[i], n);
            for (int k = 0; k < 2; k++) {
                void *p = ring_get(me->in);
                if (p) free_checked_block(p);
            }
        }
        if (round % 16 == 15) usleep(200);
    }
    for (unsigned i = 0; i < LIVE; i++) if (live[i]) free_checked_block(live[i]);
    free(live);
    atomic_store(me->done_self, 1);
    for (;;) {   /* the other's last blocks */
        bool other_done = atomic_load(me->done_other);
        void *p = ring_get(me->in);
        if (p) free_checked_block(p);
        else if (other_done) break;
        else sched_yield();
    }
    me->heap_ok = own_heap_sound(me->why);
    return NULL;
}

static void busy_owners_drained(void) {
    hpm_trim();
    size_t before = ht_used_pages();
    uint64_t drains = _hpm_asleep_drains, slabs = _hpm_asleep_slabs;
    static peer_t peer[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        peer[i] = (peer_t){.out = &rings[i], .in = &rings[1 - i], .done_self = &peer_done[i],
                           .done_other = &peer_done[1 - i], .seed = 0x2545f4914f6cdd1dull + 977 * (uint64_t)i};
        CHECK(pthread_create(&t[i], NULL, busy_peer, &peer[i]) == 0);
    }
    while (!atomic_load(&peer_done[0]) || !atomic_load(&peer_done[1])) {
        _hpm_heaps_drain_idle(0);
        usleep(100);
    }
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&busy_bad) == 0, "%d blocks of the busy owners were bad", atomic_load(&busy_bad));
    for (int i = 0; i < 2; i++) CHECK(peer[i].heap_ok, "busy owner %d's heap: %s", i, peer[i].why);
    if (_hpm_ph.os->fence_all_threads() == 0) CHECK(_hpm_asleep_drains > drains, "no drain ran");
    hpm_trim();
    size_t end = ht_used_pages();
    CHECK(end == before, "pages in use %zu at the end, %zu before", end, before);
    printf("busy owners: %llu drains gave back %llu slabs\n", (unsigned long long)(_hpm_asleep_drains - drains),
           (unsigned long long)(_hpm_asleep_slabs - slabs));   /* timing: not checked (after the count: stdout's buffer) */
}

/* ---- 3. the last live block freed during the drain ---- */

#define RACE_BYTES 256
static hpm_heap_t *racer_heap;
static hpm_span_t *racer_slab;                 /* full, all blocks but `last` freed by another thread */
static void **racer_blocks;                    /* the slab's blocks (mmap) */
static size_t racer_n;
static void *racer_last;
static sem_t racer_ready, racer_go, racer_freed;
static atomic_int racer_freeing;
static bool racer_ok, hook_saw_free;
static char racer_why[HPM_WHY_BYTES];

static void *racer_thread(void *arg) {
    (void)arg;
    void *first = malloc(RACE_BYTES);
    racer_slab = hpm_span_of(first);
    racer_blocks[racer_n++] = first;
    for (;;) {   /* the slab fills; the block after it opens the next one */
        void *p = malloc(RACE_BYTES);
        if (!p) break;
        if (hpm_span_of(p) != racer_slab) { racer_last = p; break; }
        racer_blocks[racer_n++] = p;
    }
    racer_heap = hpm_my_heap();
    sem_post(&racer_ready);
    sem_wait(&racer_go);
    atomic_store(&racer_freeing, 1);
    free(racer_blocks[0]);   /* its slab's last live block; the slow path waits at the gate until the drain is over */
    sem_post(&racer_freed);
    for (int i = 0; i < 1000; i++) free(malloc(RACE_BYTES));
    free(racer_last);
    racer_ok = own_heap_sound(racer_why);
    return NULL;
}

static void *racer_freer(void *arg) {
    (void)arg;
    void *volatile mine = malloc(16);
    for (size_t i = 1; i < racer_n; i++) free(racer_blocks[i]);
    free(mine);
    return NULL;
}

/* In the drain, after its count: the owner frees the last block outside
 * the taken list, and the drain goes on once that free's count is stored. */
static void racer_hook(hpm_heap_t *h) {
    if (h != racer_heap) return;
    int32_t credit = __atomic_load_n(&racer_slab->credit, __ATOMIC_ACQUIRE);
    sem_post(&racer_go);
    for (int i = 0; i < 5000 && __atomic_load_n(&racer_slab->credit, __ATOMIC_ACQUIRE) == credit; i++) usleep(1000);
    hook_saw_free = __atomic_load_n(&racer_slab->credit, __ATOMIC_ACQUIRE) != credit;
}

static void last_block_race(void) {
    racer_blocks = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(racer_blocks != MAP_FAILED);
    if (racer_blocks == MAP_FAILED) return;
    size_t before = part_start(&racer_ready, &racer_go, &racer_freed);
    pthread_t tr, tf;
    CHECK(pthread_create(&tr, NULL, racer_thread, NULL) == 0);
    sem_wait(&racer_ready);
    CHECK(racer_last != NULL && racer_n >= 4 && racer_slab->list == LIST_FULL, "%zu blocks fill the slab, list %u", racer_n,
          racer_slab->list);
    CHECK(pthread_create(&tf, NULL, racer_freer, NULL) == 0);
    pthread_join(tf, NULL);
    uint64_t slabs = _hpm_asleep_slabs;
    bool fence_ok = _hpm_ph.os->fence_all_threads() == 0;
    _hpm_asleep_test_hook = racer_hook;
    _hpm_heaps_drain_idle(0);
    _hpm_asleep_test_hook = NULL;
    if (!atomic_load(&racer_freeing)) sem_post(&racer_go);   /* no drain ran (no membarrier) */
    sem_wait(&racer_freed);
    pthread_join(tr, NULL);
    if (fence_ok) {
        CHECK(hook_saw_free, "the owner's free of its last block did not happen during the drain");
        CHECK(_hpm_asleep_slabs == slabs + 1, "%llu slabs given back, want the one emptied during the drain",
              (unsigned long long)(_hpm_asleep_slabs - slabs));
    }
    CHECK(racer_ok, "the owner's heap after its slow path met the given-back slab: %s", racer_why);
    hpm_trim();
    size_t end = ht_used_pages();
    CHECK(end == before, "pages in use %zu at the end, %zu before", end, before);
    munmap(racer_blocks, 1 << 20);
}

static void *warm_thread(void *arg) {
    sem_t *go = arg;
    for (unsigned c = 0; c < CLASSES; c++) free(malloc(class_bytes[c]));
    sem_wait(go);
    return NULL;
}

/* Two threads alive at once, each allocating, before the first count:
 * what glibc allocates for its threads (and keeps) exists by then. And a
 * heap past the small start, so that the library's own threads (the
 * collapse thread) have started: their TLS vectors come from the heap
 * of the thread that starts them, which would hold one block of them. */
static void warm_threads(void) {
    enum { WARM = 40000 };
    static void *p[WARM];
    for (int i = 0; i < WARM; i++) p[i] = malloc(1000);
    for (int i = 0; i < WARM; i++) free(p[i]);
    sem_t go;
    sem_init(&go, 0, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&t[i], NULL, warm_thread, &go) == 0);
    for (int i = 0; i < 2; i++) sem_post(&go);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
}

int main(void) {
    void *volatile first = malloc(16);
    free(first);
    CHECK(ht_first_thread() == 0);
    CHECK(hpm_option_set(HPM_OPT_BACKGROUND, 0) == 0);   /* the test's drains only */
    warm_threads();
    blk = mmap(NULL, (size_t)CLASSES * BLOCKS * sizeof *blk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(blk != MAP_FAILED);
    if (blk == MAP_FAILED) return TEST_DONE();
    asleep_owner();
    busy_owners_drained();
    last_block_race();
    return TEST_DONE();
}
