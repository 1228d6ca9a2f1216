/* test_manyheaps.c: a pool of threads larger than the CPUs can run at
 * once gets small first slabs for every class (heap.c, many_heaps;
 * docs/allocator.md, "Many threads"). A heap's first slab of a class of
 * blocks up to 512 bytes is a whole slab (8 pages) while at most
 * max(HPM_MANY_HEAPS_MIN, HPM_MANY_HEAPS_PER_CPU x CPUs) heaps are in
 * use, and one page once more are. Threads start one at a time and stay
 * until all have started, so the count at each start is known. The count
 * falls as threads exit (a thread started after the others have exited
 * gets a whole slab again), and a forked child counts only its one
 * thread. With HPM_PAGES=off, where a slab page that holds no block costs
 * nothing, every first slab stays whole. */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

#define BLOCK_BYTES 64   /* a class of 8-page slabs; 4 blocks fit one page */

static sem_t started;
static pthread_barrier_t all_in;
static uint32_t *first_pages;   /* per thread: the pages of its first slab of the class */

static uint32_t first_slab_pages(void) {
    void *volatile p = malloc(BLOCK_BYTES);
    memset(p, 7, BLOCK_BYTES);
    uint32_t pages = hpm_span_of(p)->n_pages;
    free(p);   /* the slab empties, and goes back when the thread exits: nothing to adopt later */
    return pages;
}

static void *pool_thread(void *arg) {
    first_pages[(intptr_t)arg] = first_slab_pages();
    sem_post(&started);
    pthread_barrier_wait(&all_in);   /* stay until every thread has started */
    return NULL;
}

static void *lone_thread(void *arg) {
    *(uint32_t *)arg = first_slab_pages();
    return NULL;
}

static uint32_t pages_in_new_thread(void) {
    uint32_t pages = 0;
    pthread_t t;
    if (pthread_create(&t, NULL, lone_thread, &pages) != 0) return 0;
    pthread_join(t, NULL);
    return pages;
}

int main(void) {
    void *volatile warm = malloc(BLOCK_BYTES);   /* the main thread's heap: one in use */
    free(warm);
    unsigned cpus = _hpm_os_linux.cpu_count();
    CHECK(cpus >= 1, "cpu_count %u", cpus);
    unsigned over = cpus * HPM_MANY_HEAPS_PER_CPU > HPM_MANY_HEAPS_MIN ? cpus * HPM_MANY_HEAPS_PER_CPU : HPM_MANY_HEAPS_MIN;
    unsigned n = over + 8;
    bool whole_pages = _hpm_ph.page_mode != PAGES_OFF;
    uint32_t full = _hpm_classes[hpm_size_class(BLOCK_BYTES)].slab_pages;
    CHECK(full == 8, "class of %d bytes: %u pages a slab", BLOCK_BYTES, full);

    first_pages = calloc(n, sizeof *first_pages);
    pthread_t *t = calloc(n, sizeof *t);
    sem_init(&started, 0, 0);
    pthread_barrier_init(&all_in, NULL, n + 1);
    for (unsigned i = 0; i < n; i++) {
        CHECK(pthread_create(&t[i], NULL, pool_thread, (void *)(intptr_t)i) == 0);
        sem_wait(&started);
    }
    /* thread i took its heap with i + 2 in use (the main thread's and its own) */
    unsigned wrong = 0, small = 0;
    for (unsigned i = 0; i < n; i++) {
        bool many = i + 2 > over && whole_pages;
        if (first_pages[i] != (many ? 1u : full)) wrong++;
        small += first_pages[i] == 1;
    }
    CHECK(wrong == 0, "%u of %u threads got the wrong first slab (over %u heaps, %u small)", wrong, n, over, small);
    CHECK(small == (whole_pages ? n + 1 - over : 0), "%u small first slabs", small);

    /* a forked child has one thread, so one heap in use: a new thread's first slab is whole */
    pid_t pid = fork();
    if (pid == 0) _exit(pages_in_new_thread() == full ? 0 : 1);
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child's new thread got a small first slab (status %#x)", status);
    /* while the pool is in: small */
    uint32_t during = pages_in_new_thread();
    CHECK(during == (whole_pages ? 1u : full), "a thread started while %u heaps are in use: %u pages", n + 1, during);

    pthread_barrier_wait(&all_in);
    for (unsigned i = 0; i < n; i++) pthread_join(t[i], NULL);
    /* the pool has gone: two heaps in use again */
    uint32_t after = pages_in_new_thread();
    CHECK(after == full, "a thread started after the pool exited: %u pages", after);
    free(t);
    free(first_pages);
    return TEST_DONE();
}
