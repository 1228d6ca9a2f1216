/* app.c: a C program built against an installed hpmalloc (pkg-config or
 * CMake) by tests/scripts/install.sh. Prints "on hpmalloc" when malloc's
 * blocks are hpmalloc's (hpm_range knows them) and the counters move. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpmalloc.h"

int main(void) {
    char *p = malloc(5000);
    if (!p) return 1;
    strcpy(p, "hello");
    void *base = NULL;
    size_t size = 0;
    hpm_stats_t st;
    hpm_stats_get(&st);
    int ok = hpm_range(p + 10, &base, &size) && base == p && size >= 5000 && st.bytes_in_use >= 5000;
    printf("%s %s\n", p, ok ? "on hpmalloc" : "NOT on hpmalloc");
    free(p);
    return ok ? 0 : 1;
}
