/* usable.c: passes one invalid pointer, chosen by MODE, to
 * malloc_usable_size, so that tests/scripts/usable_size.sh can check that
 * the allocator stops it as free does (issue 13 item 9). Usage: usable
 * MODE; `usable list` prints the modes. Before the bad call it prints
 * "ptr=0x..." on stdout; if the call returns, it prints the result and
 * exits 3. Mode "ok" asks only about live allocations (and NULL, which
 * gives 0) and exits 0. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char global_buf[256];
static void *keep[16];

static void *launder(void *p) {
    __asm__ volatile("" : "+r"(p));
    return p;
}

static void ask(void *p) {
    printf("ptr=%p\n", p);
    fflush(stdout);
    size_t n = malloc_usable_size(launder(p));
    printf("NOT ABORTED: malloc_usable_size returned %zu\n", n);
    exit(3);
}

/* A block of size bytes among live neighbours; freed when `freed`. */
static char *block(size_t size, int freed) {
    for (int i = 0; i < 8; i++) keep[i] = malloc(size);
    char *p = malloc(size);
    if (!p) { puts("setup: malloc failed"); exit(4); }
    memset(p, 0x5a, size);
    keep[8] = malloc(size);
    if (freed) free(launder(p));
    return p;
}

static int valid(void) {
    if (malloc_usable_size(NULL) != 0) return 1;
    static const size_t sizes[] = {1, 48, 1000, 8192, 40000, 600000, 5u << 20};
    for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char *p = malloc(sizes[i]);
        if (!p || malloc_usable_size(p) < sizes[i]) return 1;
        free(p);
    }
    puts("ok: valid calls returned");
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc == 2 ? argv[1] : "";
    char stack_buf[64];
    if (!strcmp(mode, "list")) {
        puts("ok\nwild-global\nwild-stack\ninterior-small\ninterior-medium\nfreed-small\nfreed-medium");
        return 0;
    }
    /* stdout's buffer is allocated now, not between the free and the
     * question, where it could take the freed block's memory (a small
     * heap gives a freed medium span's pages to the next allocation) */
    printf("mode=%s\n", mode);
    fflush(stdout);
    if (!strcmp(mode, "ok")) return valid();
    if (!strcmp(mode, "wild-global")) ask(global_buf + 16);
    if (!strcmp(mode, "wild-stack")) ask(stack_buf);
    if (!strcmp(mode, "interior-small")) ask(block(64, 0) + 16);
    if (!strcmp(mode, "interior-medium")) ask(block(40000, 0) + 4096);
    if (!strcmp(mode, "freed-small")) ask(block(48, 1));
    if (!strcmp(mode, "freed-medium")) ask(block(40000, 1));
    fprintf(stderr, "usage: usable MODE (usable list: the modes)\n");
    return 2;
}
