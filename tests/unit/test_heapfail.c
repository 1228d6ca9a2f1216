/* test_heapfail.c: a thread that cannot get a heap (metadata memory has
 * run out) still frees correctly (issue 13 item 7). The OS table is
 * replaced before the allocator starts so that commits can be made to
 * fail; then threads are started, each holding a new heap, until one finds
 * that malloc returns NULL with ENOMEM because no heap could be made. That
 * thread frees a small block and a medium block allocated by the main
 * thread (it used to dereference the NULL heap). Afterwards, with commits
 * working again, both blocks must be free (hpm_range says so) and the
 * process allocates normally. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include "hpmalloc.h"
#include "prim/prim.h"
#include "testhelper.h"

#define MAX_THREADS 400

static hpm_os_t fake_os;
static atomic_int fail_commits, release_all, heapless_done, got_null;
static void *small_block, *medium_block;
static int null_errno;

static int maybe_failing_commit(void *addr, size_t len) {
    if (atomic_load(&fail_commits)) return ENOMEM;
    return _hpm_os_linux.commit(addr, len);
}

static void *worker(void *arg) {
    (void)arg;
    errno = 0;
    void *p = malloc(16);
    if (!p) {
        if (atomic_exchange(&got_null, 1) == 0) {
            null_errno = errno;
            free(small_block);
            free(medium_block);
            atomic_store(&heapless_done, 1);
        }
        return NULL;
    }
    while (!atomic_load(&release_all)) sched_yield();   /* keep the heap in use */
    free(p);
    return NULL;
}

int main(void) {
    fake_os = _hpm_os_linux;
    fake_os.commit = maybe_failing_commit;
    _hpm_os = &fake_os;
    small_block = malloc(100);
    medium_block = malloc(100000);
    CHECK(small_block && medium_block, "setup allocations");
    memset(small_block, 1, 100);
    memset(medium_block, 2, 100000);
    atomic_store(&fail_commits, 1);
    static pthread_t tids[MAX_THREADS];
    int n = 0;
    while (n < MAX_THREADS && !atomic_load(&got_null)) {
        if (pthread_create(&tids[n], NULL, worker, NULL) != 0) break;
        n++;
        while (!atomic_load(&got_null) && n > 0) {   /* wait until that thread has its heap or found none */
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
            break;
        }
    }
    for (int spins = 0; spins < 20000 && !atomic_load(&heapless_done) && atomic_load(&got_null); spins++) sched_yield();
    CHECK(atomic_load(&got_null), "no thread found itself without a heap after %d threads", n);
    CHECK(atomic_load(&heapless_done), "the heapless thread's frees returned");
    CHECK(null_errno == ENOMEM, "malloc without a heap: errno %d, want ENOMEM", null_errno);
    atomic_store(&fail_commits, 0);
    atomic_store(&release_all, 1);
    for (int i = 0; i < n; i++) pthread_join(tids[i], NULL);
    CHECK(!hpm_range(small_block, NULL, NULL), "small block freed by the heapless thread is still live");
    CHECK(!hpm_range(medium_block, NULL, NULL), "medium block freed by the heapless thread is still live");
    int ok = 1;
    for (int i = 0; i < 10000; i++) {
        void *p = malloc((size_t)(i % 300) * 16 + 1);
        if (!p) { ok = 0; break; }
        free(p);
    }
    CHECK(ok, "allocation works again afterwards");
    return TEST_DONE();
}
