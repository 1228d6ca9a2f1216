#!/usr/bin/env bash
# bench_driver.sh: tests of `hpm bench`.
#  1. --selftest: the driver's parsing, median, ratio and CSV code against
#     known answers.
#  2. A tiny driver run over two allocators writes runs.csv (one ok row per
#     case and allocator), summary.csv (the baseline's ratio is exactly 1),
#     REPORT.md (machine, headline, per-benchmark sections, the counters'
#     n/a reason) and four real PNG images (signature, > 1000 bytes), and
#     points latest at the run; progress and ETA go to stderr.
#     --report rebuilds the identical summary.csv from runs.csv alone.
#  3. Failures: with HPM_LIB pointing at a broken allocator, the hpmalloc
#     runs are recorded as failures with their exit status, never as times,
#     and hpm bench exits 1.
#     Counters: with HPM_BENCH_PERF_TEST=sw (software events instead of the
#     PMU this VM lacks) the counts follow the whole child.
#  4. Bad usage exits 2.
# Ends with "N passed, N failed". Takes well under a minute.
set -u
cd "$(dirname "$0")/../.."
. tests/scripts/bench_common.inc
HPM=build/hpm
bench_setup hpm-bench-driver

# 1. unit tests of the pure code
$HPM bench --selftest >"$tmp/self" 2>&1
rc=$?
line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$tmp/self" | tail -n 1)
check "[[ $rc -eq 0 && '$line' =~ ^[0-9]+\ passed,\ 0\ failed$ ]]" "selftest: rc=$rc, $(tail -n 5 "$tmp/self")"
n_self=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
check "[[ ${n_self:-0} -ge 50 ]]" "selftest ran only ${n_self:-0} checks"

# 2. a tiny run over two allocators
second=jemalloc
[[ -n "$(ls /usr/lib/*-linux-gnu/libjemalloc.so.2 2>/dev/null)" ]] || second=glibc-thp
$HPM bench --tiny --alloc glibc,$second --baseline $second --out "$tmp/res" >"$tmp/out" 2>"$tmp/err"
rc=$?
check "[[ $rc -eq 0 ]]" "tiny run exited $rc: $(tail -n 5 "$tmp/err")"
run="$tmp/res/latest"
check "[[ -L '$tmp/res/latest' && -d '$run' ]]" "results/latest is not a link to the run"
for f in runs.csv summary.csv REPORT.md; do
  check "[[ -s '$run/$f' ]]" "$f missing or empty"
done
for p in pct_diff.png memaccess.png kmeans.png memory.png; do
  sig=$(head -c 8 "$run/$p" 2>/dev/null | od -An -tx1 | tr -d ' \n')
  size=$(stat -c %s "$run/$p" 2>/dev/null || echo 0)
  check "[[ '$sig' == 89504e470d0a1a0a && $size -gt 1000 ]]" "$p is not a real PNG (signature '$sig', $size bytes)"
done
n_cases=$($HPM bench --list | awk '/^cases/{c=1; next} /^  [a-z]+ +\(suite\)/{next} /^allocators/{c=0} c' | wc -l)
rows=$(($(wc -l <"$run/runs.csv") - 1))
check "[[ $n_cases -ge 8 && $rows -eq $((n_cases * 2)) ]]" "runs.csv has $rows rows for $n_cases cases x 2 allocators"
check "[[ \$(cut -d, -f5 '$run/runs.csv' | tail -n +2 | sort -u) == 1 ]]" "some run failed: $(grep -m1 ',0,' "$run/runs.csv")"
check "head -n 1 '$run/runs.csv' | grep -q '^suite,bench,alloc,rep,ok,exit_code,signal,wall_s,user_s,sys_s,maxrss_kib,minflt,majflt'" "runs.csv header"
# the baseline against itself is exactly 1, and every ratio is a number
check "awk -F, -v b=$second 'NR>1 && \$3==b && \$10!=\"n/a\" && \$10!=\"1.0000\" {bad=1} END{exit bad}' '$run/summary.csv'" \
      "the baseline's ratio is not 1 in summary.csv"
check "[[ \$(awk -F, 'NR>1 && \$3==\"glibc\" && \$4==\"wall_s\"' '$run/summary.csv' | wc -l) -eq $n_cases ]]" \
      "summary.csv lacks a wall_s row per case for glibc"
check "awk -F, 'NR>1 && \$4==\"wall_s\" && \$6+0<=0 {bad=1} END{exit bad}' '$run/summary.csv'" "a wall time is not positive"
check "grep -q '^micro,memaccess-rand,glibc,nodes_ns@16384,' '$run/summary.csv'" "summary lacks memaccess per-size metrics"
for h in '## Machine' '## Headline: each allocator against' '## Failures' '## Per benchmark' '## How to read this' \
         '### memaccess-tlb' 'THP: enabled' 'hugetlb pool' 'Colour / TLB probe' "| $second | measured, \*\*baseline\*\*"; do
  check "grep -q -- '$h' '$run/REPORT.md'" "REPORT.md lacks '$h'"
done
check "grep -q 'Hardware counters: ' '$run/REPORT.md'" "REPORT.md lacks the counters line"
if ! grep -q 'Hardware counters: hardware counters available' "$run/REPORT.md"; then
  check "grep -q 'perf_event_open(cycles) failed' '$run/REPORT.md' && cut -d, -f17 '$run/runs.csv' | tail -n +2 | sort -u | grep -qx 'n/a'" \
        "counters unavailable but not reported as n/a with a reason"
fi
check "grep -Eq '^\| memaccess-tlb \| nodes_ns_gmean \(lower\) \| [0-9.]+x' '$run/REPORT.md'" "headline row for memaccess-tlb"
check "grep -q 'ETA' '$tmp/err' && grep -q '\[  1/' '$tmp/err'" "no progress/ETA on stderr"

# 2b. --report rebuilds the same summary from runs.csv alone; a broken
#     runs.csv is refused
cp "$run/summary.csv" "$tmp/summary.orig"
$HPM bench --report "$run" >/dev/null 2>"$tmp/err_r"
check "[[ $? -eq 0 ]] && cmp -s '$tmp/summary.orig' '$run/summary.csv'" "--report does not reproduce summary.csv: $(tail -n 2 "$tmp/err_r")"
check "grep -q 'regenerated' '$run/REPORT.md' && [[ -s '$run/pct_diff.png' ]]" "--report did not rewrite REPORT.md and plots"
$HPM bench --report "$run" --baseline glibc >/dev/null 2>&1
check "awk -F, 'NR>1 && \$3==\"glibc\" && \$10!=\"n/a\" && \$10!=\"1.0000\" {bad=1} END{exit bad}' '$run/summary.csv'" \
      "--report --baseline glibc: glibc's ratio is not 1"
mkdir -p "$tmp/broken"
{ head -n 2 "$run/runs.csv"; echo 'micro,glibc-st,glibc,notanumber,1'; } >"$tmp/broken/runs.csv"
$HPM bench --report "$tmp/broken" >/dev/null 2>"$tmp/err_b"
check "[[ $? -eq 2 ]] && grep -q 'line 3' '$tmp/err_b'" "a malformed runs.csv must be refused with its line number"

# 3. a broken "hpmalloc": its runs must be failures, never times
if build_broken_alloc "$tmp"; then
  HPM_LIB=$tmp/shim.so $HPM bench --tiny --alloc glibc,hpmalloc --baseline glibc --out "$tmp/res2" glibc-st larson \
      >"$tmp/out2" 2>"$tmp/err2"
  rc=$?
  run2="$tmp/res2/latest"
  check "[[ $rc -eq 1 ]]" "a failing run must make hpm bench exit 1 (got $rc)"
  check "[[ \$(awk -F, '\$3==\"hpmalloc\" && \$5==0 && \$6==3' '$run2/runs.csv' | wc -l) -eq 2 ]]" \
        "the broken allocator's runs are not recorded as failures with exit 3"
  check "grep -q 'wrong answer (exit 3): .*CHECK FAILED' '$run2/runs.csv'" "failure rows lack status and last lines"
  check "! grep -q '^micro,glibc-st,hpmalloc,ns_per_op' '$run2/summary.csv'" "a failed run became a time in summary.csv"
  check "grep -Eq '^\| glibc-st \| hpmalloc \| 1 \| wrong answer' '$run2/REPORT.md'" "REPORT.md failures table"
  check "grep -Eq '^\| glibc-st \| ns_per_op \(lower\) \| 1.00x \| FAIL \|' '$run2/REPORT.md'" "headline cell must say FAIL"
else
  bad "cannot compile the shim: $(cat "$tmp/cc.err")"
fi

# 3b. the counter path (open on the child, inherit, enable on exec, read
#     after exit) with software events in place of the missing PMU: the
#     page-fault count must match wait4's minor faults of the whole child
#     (all threads), less the loader's faults before exec completes.
HPM_BENCH_PERF_TEST=sw $HPM bench --tiny --alloc glibc --out "$tmp/res4" glibc-mt aging memaccess-tlb >/dev/null 2>"$tmp/err4"
check "[[ $? -eq 0 ]]" "software-counter run failed: $(tail -n 2 "$tmp/err4")"
check "awk -F, 'NR>1 { n++; if (\$17+0 <= 0 || \$18+0 < 0.5*\$12 || \$18+0 > \$12 || \$20 != \"n/a\") bad=1 } END { exit bad || n != 3 }' '$tmp/res4/latest/runs.csv'" \
      "counters do not follow the child: $(cut -d, -f2,12,17,18,20 "$tmp/res4/latest/runs.csv" | tr '\n' ' ')"

# 4. bad usage
$HPM bench --alloc nosuch --tiny --out "$tmp/res3" >/dev/null 2>&1
check "[[ $? -eq 2 ]]" "unknown allocator must exit 2"
$HPM bench --alloc glibc --baseline jemalloc --tiny --out "$tmp/res3" >/dev/null 2>&1
check "[[ $? -eq 2 ]]" "a baseline that is not measured must exit 2"
$HPM bench no-such-suite >/dev/null 2>&1
check "[[ $? -eq 2 ]]" "unknown suite must exit 2"
$HPM bench --reps 0 >/dev/null 2>&1
check "[[ $? -eq 2 ]]" "--reps 0 must exit 2"
check "[[ ! -e '$tmp/res3/latest' ]]" "a refused run must not write results"

finish
