/* test_optionset.c: hpm_option_set at run time (control.c).
 *
 * A shorter HPM_RELEASE_DELAY takes effect while the program is idle.
 * With a 60 s window the background thread's next tick is 15 s away;
 * hugepages emptied then, with the window set to 100 ms, must be released
 * within 2 s, not at that tick (session 50's review). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "internal.h"
#include "testhelper.h"

static void *second(void *arg) {
    free(malloc(100));
    return arg;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int delay_case(void) {
    CHECK(hpm_option_set(HPM_OPT_RELEASE_DELAY_MS, 60000) == 0);
    /* more hugepages backed than the cache keeps: the background thread
     * starts, and computes its first tick with the 60 s window */
    enum { N = 10 };
    void *big[N];
    for (int i = 0; i < N; i++) memset(big[i] = malloc((size_t)2 << 20), 1, (size_t)2 << 20);
    pthread_t t;
    pthread_create(&t, NULL, second, NULL);
    pthread_join(t, NULL);
    free(malloc(100));
    usleep(300 * 1000);
    CHECK(atomic_load(&_hpm_background_started) != 0, "the background thread runs");
    for (int i = 0; i < N; i++) free(big[i]);
    hpm_stats_t s;
    hpm_stats_get(&s);
    unsigned long long cached = s.hp_cached;
    double t0 = now_s();
    CHECK(hpm_option_set(HPM_OPT_RELEASE_DELAY_MS, 100) == 0);
    while (now_s() - t0 < 5.0) {
        hpm_stats_get(&s);
        if (s.hp_cached <= 2) break;
        usleep(20 * 1000);
    }
    double took = now_s() - t0;
    printf("window 60 s -> 100 ms: %llu cached hugepages, %llu after %.2f s\n", cached, (unsigned long long)s.hp_cached, took);
    CHECK(cached > 2, "%llu hugepages cached after the frees", cached);
    CHECK(s.hp_cached <= 2 && took < 2.0, "%llu cached hugepages after %.2f s", (unsigned long long)s.hp_cached, took);
    return TEST_DONE();
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    return delay_case();
}
