#!/usr/bin/env bash
# fuzz.sh: builds the libFuzzer harness tests/fuzz/fuzz_alloc.c with clang
# (-fsanitize=fuzzer, no ASan) and runs it:
#   1. on 300 fixed inputs made from a seeded generator (a regression run
#      that is the same every time);
#   2. coverage-guided for HPM_FUZZ_SECONDS (default 60) seconds.
# The allocator is compiled from src/ with clang's coverage instrumentation
# (so libFuzzer sees the allocator's branches); a source that clang cannot
# compile is linked from make's gcc object (build/obj/src/...) instead,
# uninstrumented, and the script names it. A crashing input is kept in
# build/fuzz-artifacts/. HPM_FUZZ_BIN=PATH runs a harness built elsewhere
# instead (tests/sanitize.sh gives it make fuzz-asan's, on ASan+UBSan).
# Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_tool clang
t_tmpdir
mkdir -p build/fuzz-artifacts
if [[ -n ${HPM_FUZZ_BIN:-} ]]; then   # a harness built elsewhere (make fuzz-asan: on ASan+UBSan)
    bin=$HPM_FUZZ_BIN
    [[ -x $bin ]] || t_abort "HPM_FUZZ_BIN=$bin is not an executable"
    t_ok "fuzz_alloc given: $bin"
else
    out=build/fuzz
    mkdir -p "$out/obj"
    cflags=(-O2 -g -std=c11 -D_GNU_SOURCE -pthread -Wno-unused-parameter -fno-builtin-malloc
            -ftls-model=initial-exec -Iinclude -Isrc)
    srcs=$(ls src/*.c src/*/*.c 2>/dev/null | grep -v '^src/static\.c$')
    [[ -n $srcs ]] || t_abort "no allocator sources in src/"
    objs=() plain=()
    # The allocator is built without trace-cmp: libFuzzer would otherwise learn
    # the free-block cookie from free()'s comparison and plant it in its own
    # input copies, which free() then (rightly) reports as already freed.
    for s in $srcs; do
        o=$out/obj/$(tr '/' '_' <<<"${s%.c}").o
        if clang "${cflags[@]}" -fsanitize=fuzzer-no-link -fno-sanitize-coverage=trace-cmp -c "$s" -o "$o" 2>"$tmp/cc.err"; then
            objs+=("$o")
        else
            g=build/obj/${s%.c}.o
            [[ -f $g ]] || make -s "$g" >&2 || t_abort "clang cannot compile $s and make cannot build $g"
            objs+=("$g"); plain+=("$s")
        fi
    done
    how="the src/ files instrumented"
    [[ ${#plain[@]} -gt 0 ]] && how="$how, except ${plain[*]} (gcc objects: clang cannot compile them)"
    bin=$out/fuzz_alloc
    if clang -O1 -g -fsanitize=fuzzer -Iinclude -Itests tests/fuzz/fuzz_alloc.c "${objs[@]}" \
            -o "$bin" -pthread -ldl -lm 2>"$tmp/ld.err"; then
        t_ok "fuzz_alloc built with $how"
    else
        cat "$tmp/ld.err" | head -n 20
        t_abort "fuzz_alloc does not link with $how"
    fi
fi

# 1. fixed inputs (python's seeded generator: the same bytes on every run)
mkdir -p "$tmp/seeds" "$tmp/corpus"
python3 - "$tmp/seeds" <<'PY'
import random, sys
r = random.Random(4242)
for i in range(300):
    n = 4 * r.randrange(1, 1024)
    open("%s/seed%03d" % (sys.argv[1], i), "wb").write(bytes(r.randrange(256) for _ in range(n)))
PY
"$bin" -runs=0 -rss_limit_mb=8192 -timeout=60 -artifact_prefix=build/fuzz-artifacts/ "$tmp/seeds" >"$tmp/reg.log" 2>&1
rc=$?
tail -n 3 "$tmp/reg.log"
t_check "fuzz_alloc passes the 300 fixed inputs (rc=$rc)" test "$rc" -eq 0

# 2. bounded coverage-guided run
secs=${HPM_FUZZ_SECONDS:-60}
"$bin" -max_total_time="$secs" -max_len=4096 -timeout=60 -rss_limit_mb=8192 \
    -artifact_prefix=build/fuzz-artifacts/ -print_final_stats=1 "$tmp/corpus" "$tmp/seeds" >"$tmp/fuzz.log" 2>&1
rc=$?
grep -E '^(Done|stat::number_of_executed_units|==|fuzz_alloc:)|SUMMARY|artifact' "$tmp/fuzz.log" | head -n 10
[[ $rc -eq 0 ]] || tail -n 30 "$tmp/fuzz.log"
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$tmp/fuzz.log")
t_check "fuzz_alloc ran $secs s without a failure (rc=$rc, ${runs:-?} inputs)" test "$rc" -eq 0
t_check "fuzz_alloc executed at least 1000 inputs (${runs:-0})" test "${runs:-0}" -ge 1000
t_done
