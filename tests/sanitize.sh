#!/usr/bin/env bash
# sanitize.sh: the debug and sanitizer runs of CI (.ci/run; docs/tests.md).
# Usage: tests/sanitize.sh [debug] [tsan] [asan] [fuzz]   (default: all four)
#   debug  make debug (HPM_DEBUG=3: asserts, lock order, expensive checkers):
#          every unit test, then tests/scripts/stress.sh and fork.sh with
#          build-debug/libhpmalloc.so preloaded.
#   tsan   make tsan: every unit test and the linked stress and forktest
#          programs under ThreadSanitizer.
#   asan   make asan: the same under AddressSanitizer + UBSan.
#   fuzz   make fuzz-asan: tests/scripts/fuzz.sh on the ASan+UBSan harness
#          (HPM_FUZZ_SECONDS, default 60 here too).
# Under the sanitizers the library is built with -DHPM_NO_OVERRIDE and the
# tests call hpm_* (tests/hpm_names.h), so the sanitizer's own allocator
# serves libc and the test harness. Each program is one run with its own
# "N passed, N failed" line, added to the total; a run that exits non-zero
# without a failed check, or whose log holds a sanitizer report or a failed
# hpmalloc assertion, counts one more failure. Logs: build-logs/sanitize/.
# The distinct sanitizer reports are listed at the end. Prints the closing
# line "N passed, N failed".
source "$(dirname "$0")/scripts/common.bash"
modes=("$@")
[[ ${#modes[@]} -gt 0 ]] || modes=(debug tsan asan fuzz)
log_dir=build-logs/sanitize
mkdir -p "$log_dir"
rm -f "$log_dir"/*.log
jobs=${HPM_JOBS:-2}
# A report makes the program exit non-zero; reports are collected, not fatal
# at the first one, so one run shows them all. LeakSanitizer is off: it sees
# only the sanitizer's heap (libc, test code), not hpmalloc's, and in forked
# children it reports threads it cannot suspend. TSan: die_after_fork=0,
# because forktest's children start threads (TSan warns it may then miss or
# invent races in those children). tests/tsan.supp lists the races that are
# there on purpose (CCoW), each with the reason.
export ASAN_OPTIONS="detect_leaks=0:abort_on_error=0:halt_on_error=1:exitcode=66"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=66"
export TSAN_OPTIONS="suppressions=$HPM_ROOT/tests/tsan.supp:halt_on_error=0:exitcode=66:die_after_fork=0:second_deadlock_stack=1:history_size=4"

# run LABEL ENV... -- CMD...: one program, its counts added to the totals.
run() {
    local label=$1; shift
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    local log=$log_dir/$(tr '/ ' '__' <<<"$label").log t0=$SECONDS rc
    timeout "${HPM_SAN_TIMEOUT:-900}" env "${envs[@]}" "$@" >"$log" 2>&1
    rc=$?
    local line p=0 f=0
    line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [[ -n $line ]]; then
        p=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed.*/\2/' <<<"$line")
        f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    fi
    local reports
    reports=$(grep -cE '^(==[0-9]+==ERROR: |WARNING: ThreadSanitizer|SUMMARY: UndefinedBehaviorSanitizer|.*: runtime error: |hpmalloc: assertion failed)' "$log")
    if [[ $f -eq 0 && ($rc -ne 0 || $reports -gt 0) ]]; then f=1; fi
    t_pass=$((t_pass + p)); t_fail=$((t_fail + f))
    printf '%-44s %8d passed %3d failed  rc=%-3d reports=%-3d %4ds\n' "$label" "$p" "$f" "$rc" "$reports" $((SECONDS - t0))
    if [[ $f -ne 0 ]]; then
        grep -E 'FAIL|SUMMARY|runtime error|assertion failed' "$log" | sort | uniq -c | sort -rn | head -n 8 | sed 's/^/    | /'
        failed_runs+=("$label: $(grep -m1 -E 'FAIL|SUMMARY|runtime error|assertion failed' "$log" | cut -c1-300)")
    fi
}
failed_runs=()   # "label: its first failure line", repeated at the end, where CI's tail shows it

build() {   # make target, or stop with one failure
    local t0=$SECONDS
    if make -s -j"$jobs" "$@" >"$log_dir/make-$1.log" 2>&1; then
        echo "make $* ($((SECONDS - t0)) s)"
    else
        tail -n 20 "$log_dir/make-$1.log"
        t_abort "make $* failed"
    fi
}

units() {   # DIR [SKIP...]: every unit test in DIR but the SKIP ones
    local dir=$1 t; shift
    for t in "$dir"/tests/unit/*; do
        [[ -x $t && -f $t ]] || continue
        if [[ " $* " == *" ${t##*/} "* ]]; then echo "$dir/${t##*/}: not run here"; continue; fi
        run "$dir/${t##*/}" -- "$t"
    done
}

linked() {   # DIR FORKS: stress and forktest linked with the sanitized library
    local d=$1/tests/linked
    run "$1/stress 4 50 20" -- "$d/stress" 4 50 20
    run "$1/stress 16 5 10" -- "$d/stress" 16 5 10
    run "$1/stress eager release" HPM_RELEASE_DELAY=0 HPM_HP_CACHE=0 HPM_SUBRELEASE=1 -- "$d/stress" 4 20 20
    # FORKTEST_CHILD_THREAD=0 and HPM_BACKGROUND=0: the children start no
    # thread, neither the test's nor hpmalloc's background thread (which a
    # child starts again at its first kick). clang 14's sanitizer runtimes
    # have no fork handlers and can hang in their own pthread_create after
    # a multi-threaded fork (see tests/progs/forktest.c); session 7 caught
    # an ASan child hung there, in the background thread's start, once in
    # a make check. The release and debug builds run both threads (fork.sh).
    run "$1/forktest $2 3" FORKTEST_CHILD_THREAD=0 HPM_BACKGROUND=0 -- "$d/forktest" "$2" 3
    run "$1/forktest eager release" FORKTEST_CHILD_THREAD=0 HPM_BACKGROUND=0 HPM_RELEASE_DELAY=0 HPM_HP_CACHE=0 HPM_SUBRELEASE=1 -- "$d/forktest" $(($2 / 2)) 3
}

t0_all=$SECONDS
for m in "${modes[@]}"; do
    t0=$SECONDS
    case $m in
    debug)
        build debug
        units build-debug
        run "build-debug stress.sh" HPM_LIB=build-debug/libhpmalloc.so -- bash tests/scripts/stress.sh
        run "build-debug fork.sh" HPM_LIB=build-debug/libhpmalloc.so -- bash tests/scripts/fork.sh
        ;;
    tsan)
        # test_kernel measures the RSS and THP coverage of the whole
        # process: TSan's shadow memory (4 KiB pages, several times what
        # the program touches) makes both meaningless. test_limits sets
        # RLIMIT_AS, under which a sanitizer cannot map its shadow.
        # test_faults injects OS failures in one thread (4 minutes under
        # TSan; ASan and the debug build run it). A TSan child is slow to
        # start: fewer forks.
        build tsan
        units build-tsan test_kernel test_limits test_faults
        linked build-tsan 40
        ;;
    asan)
        # test_kernel again: ASan's shadow memory (on this session's
        # kernel 41 MB of the process's Anonymous, on 4 KiB pages and kept
        # after the frees) put THP coverage at 87.7% and RSS after trim at
        # 44 MB in every run, with this library and session 8's alike.
        build asan
        units build-asan test_limits test_kernel
        linked build-asan 100
        ;;
    fuzz)
        build fuzz-asan
        run "build-fuzz fuzz.sh" HPM_FUZZ_BIN=build-fuzz/fuzz/fuzz_alloc HPM_FUZZ_SECONDS="${HPM_FUZZ_SECONDS:-60}" \
            -- bash tests/scripts/fuzz.sh
        ;;
    *) t_abort "unknown mode $m (debug, tsan, asan, fuzz)" ;;
    esac
    echo "== $m: $((SECONDS - t0)) s"
done
reports=$(cat "$log_dir"/*.log 2>/dev/null | grep -hE '^(SUMMARY: (Address|Thread|UndefinedBehavior|Leak)Sanitizer|hpmalloc: assertion failed)' |
          sed -E 's/\(BuildId[^)]*\)//; s/ \(pid=[0-9]+\)//; s/0x[0-9a-f]+/ADDR/g' | sort | uniq -c | sort -rn)
if [[ -n $reports ]]; then
    echo "distinct reports (count, report):"
    echo "$reports" | head -n 30
fi
if [[ ${#failed_runs[@]} -gt 0 ]]; then
    echo "failed runs (logs in $log_dir):"
    printf '  %s\n' "${failed_runs[@]}"
fi
echo "sanitize.sh ${modes[*]}: $((SECONDS - t0_all)) s"
t_done
