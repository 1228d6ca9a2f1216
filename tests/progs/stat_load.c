/* stat_load.c: a process to measure `hpm stat` against: maps SIZE bytes
 * of anonymous memory (thp: MADV_HUGEPAGE, 4k: MADV_NOHUGEPAGE), touches
 * all of it, prints "READY", then keeps touching one byte per 4 KiB page
 * of the first quarter (hot) and every 64th page of the rest until
 * SECONDS have passed. Usage: stat_load SIZE_MIB thp|4k SECONDS */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 4 || (strcmp(argv[2], "thp") && strcmp(argv[2], "4k"))) {
        fprintf(stderr, "usage: stat_load SIZE_MIB thp|4k SECONDS\n");
        return 2;
    }
    size_t bytes = (size_t)strtoull(argv[1], NULL, 10) << 20;
    double secs = atof(argv[3]);
    if (!bytes || secs <= 0) { fprintf(stderr, "stat_load: bad size or seconds\n"); return 2; }
    char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); return 1; }
    madvise(p, bytes, strcmp(argv[2], "thp") ? MADV_NOHUGEPAGE : MADV_HUGEPAGE);
    for (size_t i = 0; i < bytes; i += 4096) p[i] = 1;
    printf("READY\n");
    fflush(stdout);
    double end = now_s() + secs;
    size_t hot = bytes / 4;
    while (now_s() < end) {
        for (size_t i = 0; i < hot; i += 4096) p[i]++;
        for (size_t i = hot; i < bytes; i += 64 * 4096) p[i]++;
    }
    return 0;
}
