/* test_forkrepair.c: the fork child repairs the heap of a thread that
 * vanished in the middle of a medium free (heap.c, heap_repair).
 *
 * A thread's span cache keeps per class a stack count and one byte count
 * over all stacks; a free into it raises the count, then the bytes. A
 * thread stopped between the two by a fork leaves a heap whose byte count
 * is one span short in the child. The child abandons that heap and
 * reuses its record for its next thread, which then started with a wrong
 * byte count: the debug build's check at that thread's exit aborted one
 * child in about 40 (forktest with eager release, session 15's CI run).
 *
 * Here a live thread fills its span cache and waits; the main thread
 * takes one span's bytes off the thread's count (the state a fork between
 * the two writes leaves), forks, and restores it in the parent. The child
 * must find the vanished thread's heap sound after the repair (its span
 * cache empty and counted so), and a thread it starts (on that record)
 * must allocate and free medium blocks and exit with a sound heap. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

#define MEDIUM_BYTES (20 * 1024)   /* a medium class (5 pages) */

/* Under ASan and TSan the child checks the repaired heap and starts no
 * thread (testhelper.h); the release and debug builds start it. */
#define CHILD_THREAD TH_CHILD_THREADS
#define N_SPANS 3

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage;                  /* 1: the cache is filled; 2: the thread may exit */
static hpm_heap_t *filled;         /* the waiting thread's heap */

static void set_stage(int s) {
    pthread_mutex_lock(&lock);
    stage = s;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
}

static void wait_stage(int s) {
    pthread_mutex_lock(&lock);
    while (stage < s) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
}

static void *filler(void *arg) {
    (void)arg;
    void *p[N_SPANS];
    for (int i = 0; i < N_SPANS; i++) {
        p[i] = malloc(MEDIUM_BYTES);
        if (p[i]) memset(p[i], 0x3c, MEDIUM_BYTES);
    }
    for (int i = 0; i < N_SPANS; i++) free(p[i]);   /* into this thread's span cache */
    filled = hpm_my_heap();
    set_stage(1);
    wait_stage(2);
    return NULL;
}

static void *churn(void *arg) {
    int *ok = arg;
    void *p[N_SPANS];
    for (int i = 0; i < N_SPANS; i++) {
        p[i] = malloc(MEDIUM_BYTES);
        if (!p[i]) return NULL;
        memset(p[i], 0x5a, MEDIUM_BYTES);
    }
    for (int i = 0; i < N_SPANS; i++) free(p[i]);
    char why[256];
    *ok = _hpm_check_heap(hpm_my_heap(), why);
    if (!*ok) _hpm_message("test_forkrepair: the child's thread's heap: %s\n", why);
    return NULL;
}

/* The child: 0 when every check passed. */
static int child(hpm_heap_t *vanished) {
    char why[256];
    int bad = 0;
    if (!_hpm_check_heap(vanished, why)) {
        _hpm_message("test_forkrepair: the vanished thread's heap after the repair: %s\n", why);
        bad |= 1;
    }
    if (vanished->span_cache_bytes != 0) {
        _hpm_message("test_forkrepair: the vanished thread's span cache counts %zu bytes after it was emptied\n",
                     vanished->span_cache_bytes);
        bad |= 2;
    }
    if (!CHILD_THREAD) return bad;
    pthread_t t;
    int ok = 0;
    if (pthread_create(&t, NULL, churn, &ok) != 0) return 4;
    pthread_join(t, NULL);
    if (!ok) bad |= 8;
    return bad;
}

int main(void) {
    void *volatile first = malloc(16);   /* the allocator is set up */
    free(first);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, filler, NULL) == 0);
    wait_stage(1);
    CHECK(filled != NULL);
    if (!filled) return TEST_DONE();
    unsigned cls = hpm_medium_class((MEDIUM_BYTES + HPM_PAGE_BYTES - 1) >> HPM_PAGE_SHIFT);
    CHECK(filled->span_cache_n[cls] >= N_SPANS, "the thread's cache holds %u spans of its class, want %d or more",
          filled->span_cache_n[cls], N_SPANS);
    char why[256];
    CHECK(_hpm_check_heap(filled, why), "the waiting thread's heap: %s", why);
    /* the state a fork between a free's stack count and its byte count leaves */
    size_t saved = filled->span_cache_bytes;
    filled->span_cache_bytes -= hpm_medium_bytes(cls);
    pid_t pid = fork();
    if (pid == 0) _exit(child(filled));
    filled->span_cache_bytes = saved;
    CHECK(pid > 0);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x (exit code bits: 1 heap unsound, 2 bytes "
          "counted, 4 no thread, 8 its thread's heap unsound; a signal: a debug check aborted)", status);
    set_stage(2);
    pthread_join(t, NULL);
    return TEST_DONE();
}
