/* test_forkexit.c: a fork while another thread is inside its exit.
 *
 * A thread's exit (heap.c, heap_abandon) takes each class's slabs off its
 * heap and then, under the class's lock, puts those that hold blocks on
 * the abandoned lists. Fork's prepare handler holds those locks, so a fork
 * could come between the two: the child then had slabs with live blocks
 * that no list held (they lay only on the vanished thread's stack), and
 * the slabs of the classes after it stayed with a heap the child neither
 * abandoned nor reused (session 49's review). Every block freed in the
 * child then went to that heap's inbox, and its pages stayed in use.
 * Now fork waits for an exit in progress (exit_lock).
 *
 * A thread keeps blocks of eight classes and exits; a test hook stops it
 * for 300 ms before it abandons its first class, and the main thread forks
 * meanwhile. The child frees every kept block (checking its contents),
 * trims, and must find the pages in use as they were before the thread
 * started. */
#include <pthread.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"
#include "heaptest.h"

#define N_SIZES 8
#define PER_SIZE 40

static void *kept[N_SIZES][PER_SIZE];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage;   /* 1: the exiting thread is inside its exit */
static int fired;

static size_t size_of(int s) { return (size_t)16 << s; }   /* 16 B to 2 KiB */

static void hook(unsigned cls) {
    (void)cls;
    if (__atomic_exchange_n(&fired, 1, __ATOMIC_RELAXED)) return;
    pthread_mutex_lock(&lock);
    stage = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    struct timespec ts = {0, 300 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void *worker(void *arg) {
    (void)arg;
    for (int s = 0; s < N_SIZES; s++)
        for (int i = 0; i < PER_SIZE; i++) {
            kept[s][i] = malloc(size_of(s));
            if (kept[s][i]) memset(kept[s][i], 0x40 + s, size_of(s));
        }
    return NULL;   /* the exit abandons slabs that hold all these blocks */
}

/* Frees every kept block; the count of those whose contents were wrong. */
static int free_kept(void) {
    int bad = 0;
    for (int s = 0; s < N_SIZES; s++)
        for (int i = 0; i < PER_SIZE; i++) {
            const unsigned char *p = kept[s][i];
            if (!p || p[0] != 0x40 + s || p[size_of(s) - 1] != 0x40 + s) bad++;
            free(kept[s][i]);
        }
    return bad;
}

/* The child: 0 when every check passed. */
static int child(size_t pages_before) {
    _hpm_abandon_test_hook = NULL;
    int bad = 0;
    int wrong = free_kept();
    if (wrong) {
        _hpm_message("test_forkexit: %d blocks of the exited thread lost their contents in the child\n", wrong);
        bad |= 1;
    }
    hpm_trim();
    size_t pages_after = ht_used_pages();
    if (pages_after > pages_before) {
        _hpm_message("test_forkexit: %zu pages in use in the child after freeing every block, %zu before the thread\n",
                     pages_after, pages_before);
        bad |= 2;
    }
    char why[256];
    if (!ht_pageheap_sound(why)) {
        _hpm_message("test_forkexit: the child's pageheap: %s\n", why);
        bad |= 4;
    }
    return bad;
}

int main(void) {
    CHECK(ht_first_thread() == 0);
    hpm_trim();
    size_t pages_before = ht_used_pages();
    _hpm_abandon_test_hook = hook;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, worker, NULL) == 0);
    pthread_mutex_lock(&lock);
    while (stage < 1) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    pid_t pid = fork();   /* the thread sleeps inside its exit */
    if (pid == 0) _exit(child(pages_before));
    CHECK(pid > 0);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "child status %#x (exit code bits: 1 contents lost, 2 pages still in use, 4 pageheap unsound; a signal: "
          "a check aborted)", status);
    pthread_join(t, NULL);
    _hpm_abandon_test_hook = NULL;
    CHECK(free_kept() == 0, "the parent's kept blocks");
    hpm_trim();
    CHECK(ht_used_pages() <= pages_before, "the parent: %zu pages in use after freeing, %zu before", ht_used_pages(),
          pages_before);
    return TEST_DONE();
}
