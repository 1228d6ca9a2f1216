/* test_forkstorm.c: fork while other threads create heaps (issue 13,
 * item 5). Heap records come from the metadata allocator, under its own
 * lock; a fork that lands while another thread holds that lock gives a
 * child in which it stays held, and the child hangs at its first metadata
 * allocation. To make the window wide, the OS table's commit is slowed
 * (0.5 ms a call) before the allocator starts; spawner threads keep
 * creating threads that each make a new heap and stay alive, and one
 * thread allocates metadata as heaps and CCoW do, while the main thread
 * forks. Each child allocates metadata, starts a thread and
 * allocates, and must exit within 10 s. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

static hpm_os_t slow_os;
static int slow_commit(void *addr, size_t n) {
    struct timespec ts = {0, 500000};
    nanosleep(&ts, NULL);
    return _hpm_os_linux.commit(addr, n);
}

__attribute__((constructor(101))) static void slow_os_install(void) {
    slow_os = _hpm_os_linux;
    slow_os.commit = slow_commit;
    _hpm_os = &slow_os;
}

enum { MAX_ALIVE = 300, SPAWNERS = 2, FORKS = 60 };
static atomic_int stop, alive, made;
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;

static void *parked(void *arg) {
    (void)arg;
    void *p = malloc(48);   /* a new heap for this thread */
    if (p) memset(p, 1, 48);
    atomic_fetch_add(&made, 1);
    pthread_mutex_lock(&park_lock);
    while (!atomic_load(&stop)) pthread_cond_wait(&park_cond, &park_lock);
    pthread_mutex_unlock(&park_lock);
    free(p);
    atomic_fetch_sub(&alive, 1);
    return NULL;
}

static void *spawner(void *arg) {
    (void)arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    while (!atomic_load(&stop)) {
        if (atomic_load(&alive) >= MAX_ALIVE) { usleep(1000); continue; }
        pthread_t t;
        atomic_fetch_add(&alive, 1);
        if (pthread_create(&t, &attr, parked, NULL) != 0) { atomic_fetch_sub(&alive, 1); usleep(1000); }
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

static void *child_thread(void *arg) {
    (void)arg;
    void *p = malloc(100);
    int ok = p != NULL;
    free(p);
    return ok ? arg : NULL;
}

/* As heaps and CCoW do: metadata allocated with no other allocator lock
 * held (64 KiB at a time, so that most calls commit, slowly). */
static void *meta_hammer(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        if (!_hpm_meta_alloc(64 * 1024)) break;
        atomic_fetch_add(&made, 1);
    }
    return NULL;
}

/* clang 14's ASan and TSan runtimes have no fork handlers: a child forked
 * while another thread was being created can hang in the runtime's own
 * pthread_create (docs/tests.md). Under them the child only allocates; the
 * release and debug builds start its thread too. */
#define CHILD_THREAD TH_CHILD_THREADS

/* Nor hpmalloc's background thread, which the child's free of its 3 MiB
 * block would start again (strace showed forktest's children starting
 * it; one hung there under ASan): off before the allocator reads its
 * options, which it does at its first call. */
__attribute__((constructor(102))) static void no_background_in_children(void) {
    if (!CHILD_THREAD) setenv("HPM_BACKGROUND", "0", 1);
}

static void child_main(void) {
    void *m = _hpm_meta_alloc(64);         /* takes the metadata lock */
    pthread_t t;
    int ok = m != NULL && (!CHILD_THREAD || (pthread_create(&t, NULL, child_thread, NULL) == 0 && pthread_join(t, NULL) == 0));
    char *big = malloc(3 << 20);
    if (big) memset(big, 2, 4096);
    free(big);
    _exit(ok ? 0 : 3);
}

/* 0: exited 0; 1: failed; 2: hung (killed) */
static int wait_child(pid_t pid) {
    for (int i = 0; i < 1000; i++) {   /* 10 s */
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 2;
}

int main(void) {
    void *volatile first = malloc(1);   /* starts the allocator (volatile: not elided) */
    free(first);
    CHECK(_hpm_os == &slow_os, "the slowed table is in use");
    pthread_t sp[SPAWNERS], hammer;
    for (int i = 0; i < SPAWNERS; i++) pthread_create(&sp[i], NULL, spawner, NULL);
    pthread_create(&hammer, NULL, meta_hammer, NULL);
    int hung = 0, failed = 0;
    for (int f = 0; f < FORKS; f++) {
        usleep(5000);
        pid_t pid = fork();
        if (pid == 0) child_main();
        if (pid < 0) { failed++; continue; }
        int r = wait_child(pid);
        hung += r == 2;
        failed += r == 1;
    }
    atomic_store(&stop, 1);
    pthread_mutex_lock(&park_lock);
    pthread_cond_broadcast(&park_cond);
    pthread_mutex_unlock(&park_lock);
    for (int i = 0; i < SPAWNERS; i++) pthread_join(sp[i], NULL);
    pthread_join(hammer, NULL);
    while (atomic_load(&alive) > 0) usleep(1000);
    printf("%d forks while threads made %d heaps and metadata blocks: %d hung, %d failed\n", FORKS, atomic_load(&made), hung, failed);
    CHECK(atomic_load(&made) > 100, "threads made heaps and metadata: %d", atomic_load(&made));
    CHECK(hung == 0, "%d of %d children hung", hung, FORKS);
    CHECK(failed == 0, "%d children failed", failed);
    return TEST_DONE();
}
