/* fd_list.c: prints the descriptors a process holds, for
 * tests/scripts/fds.sh (run under LD_PRELOAD). Prints "start: LIST" as
 * main begins, then allocates (small, medium, large, aligned blocks),
 * forks children that allocate and exit (so CCoW tracking and the
 * post-fork handlers run), trims, and prints "after: LIST". LIST is the
 * sorted open descriptor numbers, not counting the one used to list
 * them. With argument "exec PROG ARGS...", it then execs PROG (so the
 * script can check what an exec'd program inherits). */
#include <dirent.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void print_fds(const char *label) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) { perror("opendir"); exit(1); }
    int skip = dirfd(d), fds[1024], n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 1024) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        int fd = atoi(e->d_name);
        if (fd != skip) fds[n++] = fd;
    }
    closedir(d);
    for (int i = 1; i < n; i++)   /* insertion sort: few entries */
        for (int j = i; j > 0 && fds[j - 1] > fds[j]; j--) { int t = fds[j]; fds[j] = fds[j - 1]; fds[j - 1] = t; }
    printf("%s:", label);
    for (int i = 0; i < n; i++) printf(" %d", fds[i]);
    printf("\n");
    fflush(stdout);
}

static void work(void) {
    void *keep[256];
    for (int i = 0; i < 256; i++) keep[i] = malloc((size_t)16 << (i % 20));
    void *a = NULL;
    if (posix_memalign(&a, 1 << 21, 3 << 20) == 0) memset(a, 1, 3 << 20);
    for (int k = 0; k < 3; k++) {
        pid_t c = fork();
        if (c == 0) {
            for (int i = 0; i < 256; i += 2) { free(keep[i]); keep[i] = malloc(100000); }
            _exit(0);
        }
        for (int i = 1; i < 256; i += 2) memset(keep[i], 2, 16);
        waitpid(c, NULL, 0);
    }
    free(a);
    for (int i = 0; i < 256; i++) free(keep[i]);
    malloc_trim(0);
}

int main(int argc, char **argv) {
    print_fds("start");
    work();
    print_fds("after");
    if (argc > 2 && !strcmp(argv[1], "exec")) {
        execvp(argv[2], argv + 2);
        perror("execvp");
        return 127;
    }
    return 0;
}
