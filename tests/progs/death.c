/* death.c: makes one invalid free or realloc, chosen by MODE, so that
 * tests/scripts/death.sh can check that the allocator stops it.
 * Usage: death MODE; `death list` prints the modes.
 *
 * Before the bad call it prints "ptr=0x..." (the pointer it passes) on
 * stdout and flushes. A correct hpmalloc then aborts (SIGABRT) with one
 * stderr line naming the function and that pointer. If the call returns,
 * the program says so on stdout and exits 3. Mode "ok" makes only valid
 * calls (including free(NULL), realloc(NULL, n), free_sized) and exits 0:
 * the checks must not fire on correct use. Nothing else is written to
 * stderr, and nothing is allocated between the setup and the bad call.
 * Mode free-wild-arena frees an address inside hpmalloc's reserved but
 * unused arena (from hpm_stats_get, looked up with dlsym); on another
 * allocator it exits 4. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hpmalloc.h"

/* Hides where a pointer came from, so the compiler neither warns about
 * nor removes the deliberately invalid calls. */
static void *launder(void *p)
{
    __asm__ volatile("" : "+r"(p));
    return p;
}

static char global_buf[256];
static void *sink;

static void announce(const void *p)
{
    printf("ptr=%p\n", p);
    fflush(stdout);
}

static void bad_free(void *p)
{
    announce(p);
    free(launder(p));
}

static void bad_realloc(void *p)
{
    announce(p);
    sink = realloc(launder(p), 100);
}

/* A live block of size bytes with other live blocks around it. */
static char *live_block(size_t size)
{
    for (int i = 0; i < 8 && size <= 65536; i++) sink = malloc(size); /* kept live (leaked) */
    char *p = malloc(size);
    if (!p) { printf("setup: malloc(%zu) failed\n", size); exit(4); }
    memset(p, 0x5a, size);
    return p;
}

/* A freed block (the next free of it is a double free). */
static char *freed_block(size_t size)
{
    char *p = live_block(size);
    free(launder(p));
    return p;
}

/* An address in the middle of hpmalloc's reserved but never used arena
 * (found through hpm_stats_get, looked up with dlsym so that the program
 * still runs on other allocators). */
static void *arena_middle(void)
{
    void (*get)(hpm_stats_t *) = (void (*)(hpm_stats_t *))dlsym(RTLD_DEFAULT, "hpm_stats_get");
    if (!get) { puts("setup: no hpm_stats_get (not hpmalloc)"); exit(4); }
    hpm_stats_t s;
    get(&s);
    if (!s.arena_base || s.arena_reserved_bytes < (8u << 20)) { puts("setup: no arena in the stats"); exit(4); }
    return (void *)(uintptr_t)(s.arena_base + (s.arena_reserved_bytes / 2 & ~(uint64_t)4095) + 64);
}

static int valid_calls(void)
{
    free(NULL);
    char *p = realloc(NULL, 40);
    if (!p) return 1;
    memset(p, 1, 40);
    p = realloc(p, 100000);
    if (!p) return 1;
    free(p);
    void *q = malloc(100);
    void *a = aligned_alloc(4096, 8192);
    void *m = malloc(5u << 20);
    if (!q || !a || !m) return 1;
    free(q);
    free(a);
    free(m);
    puts("ok: valid calls returned");
    return 0;
}

static const char *const modes[] = {
    "ok", "free-wild-global", "free-wild-stack", "free-wild-mmap", "free-wild-arena", "free-interior-small",
    "free-interior-large", "double-free-small", "double-free-large", "realloc-wild",
    "realloc-interior", "realloc-double-free", NULL,
};

int main(int argc, char **argv)
{
    const char *mode = argc == 2 ? argv[1] : "";
    if (!strcmp(mode, "list")) {
        for (int i = 0; modes[i]; i++) puts(modes[i]);
        return 0;
    }
    char stack_buf[64];
    if (!strcmp(mode, "ok")) return valid_calls();
    else if (!strcmp(mode, "free-wild-global")) bad_free(global_buf + 16);
    else if (!strcmp(mode, "free-wild-stack")) bad_free(stack_buf);
    else if (!strcmp(mode, "free-wild-mmap")) {
        char *m = mmap(NULL, 1u << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) { puts("setup: mmap failed"); return 4; }
        bad_free(m + 4096);
    } else if (!strcmp(mode, "free-wild-arena")) {
        free(live_block(100)); /* the heap is set up */
        bad_free(arena_middle());
    } else if (!strcmp(mode, "free-interior-small")) bad_free(live_block(64) + 16);
    else if (!strcmp(mode, "free-interior-large")) bad_free(live_block(8u << 20) + 65536);
    else if (!strcmp(mode, "double-free-small")) bad_free(freed_block(48));
    else if (!strcmp(mode, "double-free-large")) bad_free(freed_block(6u << 20));
    else if (!strcmp(mode, "realloc-wild")) bad_realloc(global_buf + 32);
    else if (!strcmp(mode, "realloc-interior")) bad_realloc(live_block(200) + 8);
    else if (!strcmp(mode, "realloc-double-free")) bad_realloc(freed_block(48));
    else {
        fprintf(stderr, "usage: death MODE  (death list: the modes)\n");
        return 2;
    }
    puts("NOT ABORTED: the invalid call returned");
    return 3;
}
