#!/usr/bin/env bash
# churn.sh: memory of exited threads is reused (issue 13 item 8). Runs
# tests/progs/churn (mimalloc test-stress pattern: 2 threads per
# generation, 1000 generations, objects handed over through a transfer
# array and freed after their threads exited) under glibc, as a check of
# the test itself, and under LD_PRELOAD=$HPM_LIB (also with 4 threads and
# with eager release). churn checks that max RSS at the end stays within
# 1.5x + 8 MiB of max RSS after the first tenth. Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
bin=$(require_prog churn) || t_abort "cannot build build/tests/progs/churn"
t_tmpdir


run_counted "$bin" glibc LD_PRELOAD= -- 2 25 300
run_counted "$bin" "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" HPM_STATS=1 -- 2 25 1000
check_stats_seen "$tmp/err" "churn"
run_counted "$bin" "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" -- 4 10 500
run_counted "$bin" "$HPM_LIB eager release" LD_PRELOAD="$HPM_LIB_ABS" HPM_RELEASE_DELAY=0 HPM_HP_CACHE=0 -- 2 25 500
t_done
