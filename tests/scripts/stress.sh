#!/usr/bin/env bash
# stress.sh: runs tests/progs/stress (THREADS SCALE ITER) under
# LD_PRELOAD=$HPM_LIB (default build/libhpmalloc.so) in three shapes:
#   - 4 threads, scale 50, 40 rounds (about 4,000 threads created);
#   - 2 threads, scale 200, 10 rounds (bigger per-thread heaps);
#   - 16 threads, scale 5, 20 rounds (many threads at once);
# and once (4 50 40) under glibc, as a check that the test itself passes
# on a correct allocator. Each run is one check: exit 0 and "0 failed".
# The first hpmalloc run also has HPM_STATS=1, to see that it really ran
# on hpmalloc. Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
bin=$(require_prog stress) || t_abort "cannot build build/tests/progs/stress"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run_stress() {  # label, env..., -- args
    local label=$1; shift
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    local t0=$SECONDS rc
    env "${envs[@]}" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    cat "$tmp/out"; head -n 20 "$tmp/err"
    if [[ $rc -eq 0 ]] && grep -q '^[0-9]* passed, 0 failed$' "$tmp/out"; then
        t_ok "stress $* on $label ($((SECONDS - t0)) s)"
    else
        t_bad "stress $* on $label: rc=$rc $(tail -n 1 "$tmp/out")"
    fi
}

run_stress glibc LD_PRELOAD= -- 4 50 40
run_stress "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" HPM_STATS=1 -- 4 50 40
check_stats_seen "$tmp/err" "stress"
run_stress "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" -- 2 200 10
run_stress "$HPM_LIB" LD_PRELOAD="$HPM_LIB_ABS" -- 16 5 20
t_done
