#!/usr/bin/env bash
# The one-file build: src/static.c compiled into a program, with no library.
# The program must run on hpmalloc (hpm_range answers for its blocks, the
# counters move) and every public function must link.
set -u
cd "$(dirname "$0")/../.."
pass=0 fail=0
ok() { if "$@"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $*"; fi; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/app.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "hpmalloc.h"
int main(void) {
    char *p = malloc(100);
    strcpy(p, "one file");
    void *base; size_t size;
    int in_heap = hpm_range(p + 50, &base, &size) && base == p && size >= 100;
    hpm_stats_t st;
    hpm_stats_get(&st);
    void *q = NULL;
    int rc = posix_memalign(&q, 4096, 10000);
    printf("%s %d %d %d %d\n", p, in_heap, st.bytes_in_use >= 100, rc == 0 && ((size_t)q & 4095) == 0,
           hpm_ccow_config("off", 0) == 0 && hpm_thread_colors(0) == 0);
    free(q); free(p);
    return 0;
}
C
ok cc -std=c11 -D_GNU_SOURCE -O2 -pthread -Iinclude -Isrc src/static.c "$tmp/app.c" -o "$tmp/app"
out=$("$tmp/app" 2>&1)
ok test "$out" = "one file 1 1 1 1"
echo "one-file build output: $out"
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
