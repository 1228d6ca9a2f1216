#!/usr/bin/env bash
# stress.sh: runs tests/progs/stress (THREADS SCALE ITER) under
# LD_PRELOAD=$HPM_LIB (default build/libhpmalloc.so) in three shapes:
#   - 4 threads, scale 100, 50 rounds (about 5,000 threads created);
#   - 2 threads, scale 200, 10 rounds (bigger per-thread heaps);
#   - 16 threads, scale 5, 20 rounds (many threads at once);
#   - 4 50 30 with hpmalloc's release made eager (HPM_RELEASE_DELAY=0
#     HPM_HP_CACHE=0 HPM_SUBRELEASE=1: hugepages and free pages go back to
#     the OS while other threads allocate), with HPM_PAGES=off and with
#     HPM_PAGES=hugetlb (an empty pool here, so the fallback to THP), and
#     with coloured heaps (HPM_COLORS=0x3: small-object slabs only on pages
#     of colours 0 and 1);
# and once (4 50 40) under glibc, as a check that the test itself passes
# on a correct allocator. Under hpmalloc, stress also checks hpm_range of
# every block it checks. Each run is one check: exit 0 and "0 failed".
# The first hpmalloc run also has HPM_STATS=1, to see that it really ran
# on hpmalloc. Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
bin=$(require_prog stress) || t_abort "cannot build build/tests/progs/stress"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT


run_counted "$bin" glibc LD_PRELOAD= -- 4 50 40
run_counted "$bin" "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" HPM_STATS=1 -- 4 100 50
check_stats_seen "$tmp/err" "stress"
run_counted "$bin" "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" -- 2 200 10
run_counted "$bin" "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" -- 16 5 20
run_counted "$bin" "$HPM_LIB eager release" LD_PRELOAD="$HPM_LIB_ABS" HPM_RELEASE_DELAY=0 HPM_HP_CACHE=0 \
    HPM_SUBRELEASE=1 -- 4 50 30
run_counted "$bin" "$HPM_LIB HPM_PAGES=off" LD_PRELOAD="$HPM_LIB_ABS" HPM_PAGES=off -- 4 20 20
run_counted "$bin" "$HPM_LIB HPM_PAGES=hugetlb" LD_PRELOAD="$HPM_LIB_ABS" HPM_PAGES=hugetlb -- 4 20 20
run_counted "$bin" "$HPM_LIB HPM_COLORS=0x3" LD_PRELOAD="$HPM_LIB_ABS" HPM_COLORS=0x3 -- 4 20 20
t_done
