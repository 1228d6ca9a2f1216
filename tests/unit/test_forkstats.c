/* test_forkstats.c: a forked child never writes its parent's published
 * counters (publish.c). The counters live in one shared page, which the
 * child inherits still shared; it must map a page of its own before it
 * changes any counter. Before session 51 the child first abandoned the
 * other threads' heaps (init.c, fork_child), and the slabs and spans that
 * this gave back to its pageheap updated the parent's page: `hpm stat`
 * of the parent then showed the child's counts.
 *
 * With the background thread off (a re-executed copy, HPM_BACKGROUND=0)
 * the parent is quiet: a thread holds small blocks and cached medium
 * spans and waits; the main thread copies the published page, forks and
 * waits for the child; the page must be as it was, word for word. It is
 * read-only across the fork, so that any store of the child into it, an
 * unchanged value included, kills the child (SIGSEGV). The child checks
 * that its own page names it (pid). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

enum { SMALL = 4000, MEDIUM = 64 };
static void *small[SMALL];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int stage;   /* 1: the thread holds its blocks; 2: it may end */

static void *holder(void *arg) {
    for (int i = 0; i < SMALL; i++) memset(small[i] = malloc(48 + (i % 7) * 100), 1, 48);
    void *m[MEDIUM];
    for (int i = 0; i < MEDIUM; i++) memset(m[i] = malloc(40 * 1024), 2, 64);
    for (int i = 0; i < MEDIUM; i++) free(m[i]);   /* spans in its cache */
    for (int i = 0; i < SMALL; i += 2) free(small[i]);
    pthread_mutex_lock(&lock);
    stage = 1;
    pthread_cond_broadcast(&cond);
    while (stage != 2) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    return arg;
}

static int quiet_case(void) {
    pthread_t t;
    CHECK(pthread_create(&t, NULL, holder, NULL) == 0);
    pthread_mutex_lock(&lock);
    while (stage != 1) pthread_cond_wait(&cond, &lock);
    pthread_mutex_unlock(&lock);
    hpm_stats_t *pub = _hpm_stats, before;
    CHECK(pub->magic == HPM_STATS_MAGIC && pub->pid == getpid(), "the counters are published (magic %#llx, pid %d)",
          (unsigned long long)pub->magic, (int)pub->pid);
    memcpy(&before, pub, sizeof before);
    /* read-only across the fork: a child's store into the inherited page
     * faults (its own page, mapped over it, is writable); the parent
     * stores nothing meanwhile */
    CHECK(mprotect(pub, 4096, PROT_READ) == 0, "mprotect of the published page at %p: %s", (void *)pub, strerror(errno));
    pid_t pid = fork();
    if (pid == 0) _exit(_hpm_stats->pid == getpid() && _hpm_stats->pid != before.pid ? 0 : 3);
    int st = -1;
    bool waited = pid > 0 && waitpid(pid, &st, 0) == pid;
    mprotect(pub, 4096, PROT_READ | PROT_WRITE);
    printf("the child: %s %d\n", WIFSIGNALED(st) ? "killed by signal" : "exit status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    CHECK(waited && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the child stored nothing into its parent's page and its own names it (status %#x; signal 11: it stored)", st);
    unsigned changed = 0, first = 0;
    const uint64_t *a = (const uint64_t *)&before, *b = (const uint64_t *)pub;
    for (unsigned w = 0; w < sizeof before / 8; w++)
        if (a[w] != b[w] && changed++ == 0) first = w * 8;
    printf("after the child: %u of %zu words of the parent's page changed (the first at byte %u)\n", changed, sizeof before / 8,
           first);
    CHECK(changed == 0, "the child changed %u words of the parent's published counters, the first at byte %u", changed, first);
    pthread_mutex_lock(&lock);
    stage = 2;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&lock);
    pthread_join(t, NULL);
    return TEST_DONE();
}

int main(int argc, char **argv) {
    const char *bg = getenv("HPM_BACKGROUND");
    if (bg && !strcmp(bg, "0")) return quiet_case();
    th_run_self_with("HPM_BACKGROUND", "0", argv);
    return TEST_DONE();
}
