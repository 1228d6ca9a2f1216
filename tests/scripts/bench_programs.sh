#!/usr/bin/env bash
# bench_programs.sh: each benchmark program of bench/ runs once at a tiny
# size and must pass its own self-check and print a well-formed RESULT
# line; --help works and bad arguments exit 2; results are deterministic
# where they must be (kmeans checksum across thread counts, Richards'
# standard counts). Then every program that stamps its blocks runs under a
# deliberately broken allocator (an LD_PRELOAD shim that hands out the same
# block twice) and must fail with exit 3 and "CHECK FAILED", never report a
# time. The standard workloads (larson, xmalloc, rptest, mstress, alloc_test,
# cache_thrash, cache_scratch, glibc_bench), malloc_stall and realloc_chain also run under hpmalloc
# (build/libhpmalloc.so) and must pass their self-checks there, and
# `hpm bench --alloc NAME=LIB.so[,VAR=VALUE]` must run a library given so;
# bench/scripts/pairs.sh prints its pairs and their median ratio, and
# bench/scripts/rss_by_mapping.py splits a stopped larson's RSS and, with
# --census, reads hpmalloc's pageheap and slabs there with gdb. The real
# programs of bench/real (those installed) pass their checks under
# hpmalloc, with the allocator in the program alone, and fail them under
# the broken allocator.
# Ends with "N passed, N failed". Takes about half a minute.
set -u
cd "$(dirname "$0")/../.."
. tests/scripts/bench_common.inc
B=build/bench
bench_setup hpm-bench-progs

# program -> tiny arguments
declare -A tiny=(
  [glibc_thread]="--mode st --blocks 100 --iters 20"
  [memaccess]="--order rand --alloc both --min 16K --max 256K --visits 10K"
  [kmeans]="--sweep-list 4,16 --points 256 --dims 4 --threads 2 --iters 4"
  [richards]="--reps 2"
  [larson]="--threads 2 --blocks 100 --rounds 10 --seconds 0.2"
  [xmalloc]="--threads 1 --batch 256 --seconds 0.2"
  [cache_scratch]="--threads 2 --iters 200 --repeat 10"
  [rptest]="--threads 2 --loops 20 --slots 100 --runs 1"
  [mstress]="--threads 2 --scale 2 --iters 2"
  [alloc_test]="--threads 2 --iters 10000 --slots 4096"
  [cache_thrash]="--threads 2 --iterations 10 --repetitions 1000"
  [glibc_bench]="--threads 2 --blocks 64 --seconds 0.1"
  [aging]="--peak 4M --rounds 2 --sleep-ms 100"
  [malloc_stall]="--count 64"
  [realloc_chain]="--chains 20 --from 5000 --to 300000"
  [glibc_simple]="--iters 4000"
  [sh6bench]="--threads 2 --calls 50"
  [malloc_large]="--iters 20 --size 1M"
  [mleak]="--threads 4 --rounds 10 --slots 16"
  [thread_pool]="--threads 4 --classes 3"
)

# A RESULT line is "RESULT bench=NAME key=value ..." with sane keys.
result_ok() {  # file name
  local line; line=$(grep '^RESULT ' "$1" | tail -n 1)
  [[ -n "$line" ]] || return 1
  [[ "$line" == "RESULT bench=$2 "* ]] || return 1
  [[ "$line" == *" check=ok"* ]] || return 1
  local tok
  for tok in ${line#RESULT }; do [[ "$tok" =~ ^[A-Za-z0-9_.@-]+=[^[:space:]]*$ ]] || return 1; done
}

for p in "${!tiny[@]}"; do
  if [[ ! -x $B/$p ]]; then bad "$B/$p is not built"; continue; fi
  timeout 60 $B/$p ${tiny[$p]} --seed 3 >"$tmp/$p.out" 2>"$tmp/$p.err"
  rc=$?
  check "[[ $rc -eq 0 ]]" "$p exited $rc: $(tail -n 2 "$tmp/$p.err")"
  check "result_ok '$tmp/$p.out' '$p'" "$p: no well-formed RESULT line: $(tail -n 1 "$tmp/$p.out")"
  $B/$p --help >"$tmp/help" 2>&1
  check "[[ $? -eq 0 ]] && grep -q '^usage: $p' '$tmp/help'" "$p --help"
  $B/$p --no-such-option >/dev/null 2>&1
  check "[[ $? -eq 2 ]]" "$p with a bad option must exit 2"
  $B/$p --seed notanumber >/dev/null 2>&1
  check "[[ $? -eq 2 ]]" "$p with a bad number must exit 2"
done

# Values the programs must get right.
$B/richards --reps 3 >"$tmp/r" 2>&1
check "grep -q 'qpkt=23246 hold=9297' '$tmp/r'" "richards standard counts: $(cat "$tmp/r")"
$B/richards --reps 3 --classic >"$tmp/r" 2>&1
check "grep -q 'queue_alloc=0 .*qpkt=23246 hold=9297' '$tmp/r'" "richards --classic counts"
k1=$($B/kmeans --sweep-list 4,16 --points 500 --dims 3 --threads 1 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
k2=$($B/kmeans --sweep-list 4,16 --points 500 --dims 3 --threads 3 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
check "[[ -n '$k1' && '$k1' == '$k2' ]]" "kmeans checksum depends on threads: $k1 vs $k2"
k3=$($B/kmeans --sweep-list 4,16 --points 500 --dims 3 --threads 1 --seed 2 | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
check "[[ -n '$k3' && '$k1' != '$k3' ]]" "kmeans checksum must depend on the seed"
$B/memaccess --order seq --alloc nodes --min 16K --max 64K --visits 1K >"$tmp/m" 2>&1
check "grep -q 'nodes_ns@16384=.*nodes_ns@32768=.*nodes_ns@65536=' '$tmp/m' && ! grep -q calloc_ns '$tmp/m'" \
      "memaccess reports each size of its sweep: $(tail -n 1 "$tmp/m")"
$B/memaccess --ws 16K --threads 2 --visits 1K >"$tmp/m" 2>&1
check "grep -q 'threads=2 .*check=ok' '$tmp/m'" "memaccess --threads 2"
$B/aging --peak 2M --rounds 1 --sleep-ms 0 >"$tmp/a" 2>&1
check "grep -Eq 'rss_kib=[1-9][0-9]* .*thp_pct=[0-9.]+ ' '$tmp/a'" "aging reports RSS and coverage: $(tail -n 1 "$tmp/a")"
for m in st mt emu; do
  $B/glibc_thread --mode $m --threads 2 --blocks 50 --iters 5 --min 1 --max 9 >"$tmp/g" 2>&1
  check "grep -q 'mode=$m .*check=ok' '$tmp/g'" "glibc_thread --mode $m with 1..9-byte blocks"
done
$B/glibc_thread --min 100 --max 10 >/dev/null 2>&1
check "[[ $? -eq 2 ]]" "glibc_thread --min > --max must exit 2"
# The warm-up before measured runs (bench_warm.h) writes the memory it is asked for.
/usr/bin/time -f "%M" -o "$tmp/w" $B/warm_memory 64 >"$tmp/wo" 2>&1
check "[[ $? -eq 0 && ! -s '$tmp/wo' && \$(tail -n 1 '$tmp/w') -ge 65536 ]]" "warm_memory 64: max RSS $(tail -n 1 "$tmp/w") KiB, want >= 65536"
HPM_BENCH_WARM_MIB=0 /usr/bin/time -f "%M" -o "$tmp/w" $B/warm_memory >/dev/null 2>&1
check "[[ $? -eq 0 && \$(tail -n 1 '$tmp/w') -lt 16384 ]]" "HPM_BENCH_WARM_MIB=0 turns the warm-up off: max RSS $(tail -n 1 "$tmp/w") KiB"
$B/warm_memory 12x >/dev/null 2>&1
check "[[ $? -eq 2 ]]" "warm_memory 12x must exit 2"

# The standard workloads: what each must show besides check=ok.
field() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" "$1"; }
$B/larson --threads 2 --blocks 100 --rounds 5 --seconds 0.3 >"$tmp/l" 2>&1
check "[[ \$(field '$tmp/l' threads_made) -gt 4 ]]" "larson: lanes must hand over to new threads: $(tail -n 1 "$tmp/l")"
$B/larson --threads 2 --blocks 100 --rounds 5 --seconds 0.2 --detach >"$tmp/l" 2>&1
check "[[ \$(field '$tmp/l' threads_made) -gt 4 ]] && grep -q 'check=ok' '$tmp/l'" "larson --detach: $(tail -n 1 "$tmp/l")"
$B/xmalloc --threads 2 --batch 64 --seconds 0.2 --size 0 >"$tmp/x" 2>&1
check "grep -q 'size=0 .*check=ok' '$tmp/x' && [[ \$(field '$tmp/x' frees) -gt 0 ]]" "xmalloc with random sizes: $(tail -n 1 "$tmp/x")"
$B/rptest --threads 2 --loops 50 --slots 200 >"$tmp/r2" 2>&1
check "[[ \$(field '$tmp/r2' cross_blocks) -gt 0 ]]" "rptest must send blocks to the other thread: $(tail -n 1 "$tmp/r2")"
# 200 slots of 2.7 KB on average per thread, filled: at least 0.5 MB live
check "[[ \$(field '$tmp/r2' peak_live_kb) -gt 500 ]]" "rptest counts its peak of live bytes: $(tail -n 1 "$tmp/r2")"
# --trace-peaks: one PEAK line per run, before the RESULT line, with a loop
# count for each thread (at most the 2 x 50 loops a run makes), and the
# highest of the runs' peaks is the program's peak_live_kb.
$B/rptest --threads 2 --loops 50 --slots 200 --runs 3 --trace-peaks >"$tmp/r3" 2>&1
peaks_ok=$(awk -v want="$(field "$tmp/r3" peak_live_kb)" '
  /^PEAK / { n++; if ($2 != "run=" (n - 1) || $4 !~ /^loops=[0-9]+,[0-9]+$/) bad = 1
             split(substr($4, 7), l, ","); if (l[1] > 100 || l[2] > 100) bad = 1
             v = substr($3, 9) + 0; if (v > max) max = v }
  /^RESULT / { after = (n == 3) }
  END { print (n == 3 && after && !bad && max == want && want > 0) ? "yes" : "no" }' "$tmp/r3")
check "[[ $peaks_ok == yes ]] && grep -q 'check=ok' '$tmp/r3'" "rptest --trace-peaks: $(cat "$tmp/r3" | tr '\n' ' ')"
$B/rptest --threads 1 --loops 50 --slots 200 >"$tmp/r1" 2>&1
check "grep -q 'cross_rate=0 .*cross_blocks=0 .*check=ok' '$tmp/r1'" "rptest with 1 thread sends nothing: $(tail -n 1 "$tmp/r1")"
$B/rptest --threads 2 --loops 20 --slots 100 --idle-thread 1 >"$tmp/ri" 2>&1
check "grep -q 'check=ok' '$tmp/ri'" "rptest --idle-thread 1 (one more thread, waking every ms): $(tail -n 1 "$tmp/ri")"
RPTEST_IDLE_THREAD_MS=soon $B/rptest --threads 2 --loops 20 --slots 100 >"$tmp/ri" 2>&1
rc=$?
check "[[ $rc -ne 0 ]] && grep -q 'RPTEST_IDLE_THREAD_MS' '$tmp/ri'" "rptest refuses RPTEST_IDLE_THREAD_MS=soon (rc $rc): $(tail -n 1 "$tmp/ri")"
for d in even exp; do
  $B/rptest --threads 2 --loops 20 --slots 100 --dist $d >"$tmp/rd" 2>&1
  check "grep -q 'dist=$d .*check=ok' '$tmp/rd'" "rptest --dist $d"
done
# thread t makes 1.5 * 100 * scale * (t % 8 + 1) blocks per iteration: 900 for 2 threads at scale 2
$B/mstress --threads 2 --scale 2 --iters 2 >"$tmp/ms" 2>&1
check "[[ \$(field '$tmp/ms' blocks) -eq 1800 ]]" "mstress block count: $(tail -n 1 "$tmp/ms")"
a1=$($B/alloc_test --iters 20000 --slots 4096 --threads 1 | sed -n 's/.*iters=\([0-9]*\).*check=ok/\1/p')
check "[[ '$a1' == 20000 ]]" "alloc_test counts its operations: $a1"
$B/alloc_test --slots 100 --threads 4 >/dev/null 2>&1
check "[[ \$? -eq 2 ]]" "alloc_test with under 64 slots a thread must exit 2"
$B/cache_thrash --threads 2 --iterations 3 --repetitions 100 >"$tmp/ct" 2>&1
check "grep -q 'repetitions=100 .*check=ok' '$tmp/ct'" "cache_thrash: $(tail -n 1 "$tmp/ct")"
$B/cache_scratch --threads 2 --iters 10 --objsize 1 --repetitions 1000 >"$tmp/cs" 2>&1
check "grep -q 'repeat=500 .*check=ok' '$tmp/cs'" "cache_scratch --repetitions is split over the threads: $(tail -n 1 "$tmp/cs")"
$B/glibc_bench --threads 1 --min 1K --max 64K --dist uniform --touch page --blocks 32 --seconds 0.1 >"$tmp/gb" 2>&1
check "grep -q 'min=1024 max=65536 dist=uniform touch=page .*check=ok' '$tmp/gb'" "glibc_bench large variant: $(tail -n 1 "$tmp/gb")"
$B/glibc_bench --dist pareto >/dev/null 2>&1
check "[[ \$? -eq 2 ]]" "glibc_bench with an unknown --dist must exit 2"
# thread_pool holds threads x classes blocks at once and reads its RSS then
$B/thread_pool --threads 40 --classes 7 >"$tmp/tp" 2>&1
check "[[ \$(field '$tmp/tp' blocks) -eq 280 && \$(field '$tmp/tp' rss_kib) -gt 0 ]] && grep -q 'check=ok' '$tmp/tp'" "thread_pool: $(tail -n 1 "$tmp/tp")"
$B/thread_pool --classes 65 >/dev/null 2>&1
check "[[ \$? -eq 2 ]]" "thread_pool with more than 64 classes must exit 2"
# sh6bench: 25 slots a thread, so 25 repeats of 19,300 mallocs (sizes below
# 1000), and the original's overwritten fifth of the array left behind
$B/sh6bench --threads 2 --calls 50 >"$tmp/sh" 2>&1
check "[[ \$(field '$tmp/sh' mallocs) -eq 965000 && \$(field '$tmp/sh' leaked) -gt 0 ]] && grep -q 'check=ok' '$tmp/sh'" "sh6bench counts: $(tail -n 1 "$tmp/sh")"
$B/sh6bench --threads 4 --calls 10 >/dev/null 2>&1
check "[[ \$? -eq 2 ]]" "sh6bench with under 5 slots a thread must exit 2"
$B/larson --seconds 0 >/dev/null 2>&1
check "[[ \$? -eq 2 ]]" "larson --seconds 0 must exit 2"

# Under hpmalloc: every standard workload passes its own self-check.
hpm_lib=build/libhpmalloc.so
if [[ -r $hpm_lib ]]; then
  for p in larson xmalloc rptest mstress alloc_test cache_thrash cache_scratch glibc_bench malloc_stall realloc_chain glibc_simple malloc_large mleak thread_pool sh6bench; do
    timeout 60 env LD_PRELOAD=$hpm_lib $B/$p ${tiny[$p]} --seed 5 >"$tmp/h" 2>&1
    check "[[ \$? -eq 0 ]] && result_ok '$tmp/h' '$p'" "$p under hpmalloc: $(tail -n 1 "$tmp/h")"
  done
  timeout 60 env LD_PRELOAD=$hpm_lib $B/glibc_bench --threads 2 --min 1K --max 64K --dist uniform --touch page --blocks 64 --seconds 0.1 >"$tmp/h" 2>&1
  check "[[ \$? -eq 0 ]] && result_ok '$tmp/h' glibc_bench" "glibc_bench large under hpmalloc: $(tail -n 1 "$tmp/h")"
else
  bad "$hpm_lib is not built"
fi

# bench/scripts/pairs.sh: interleaved pairs, each pair's ratio, the median.
if [[ -r $hpm_lib ]]; then
  HPM_BENCH_WARM_MIB=0 bench/scripts/pairs.sh 3 ns_per_op "" "LD_PRELOAD=$hpm_lib" \
      $B/alloc_test --threads 1 --iters 20000 --slots 4096 >"$tmp/p.out" 2>"$tmp/p.err"
  check "[[ \$? -eq 0 && \$(grep -cE '^[1-3] [0-9.]+ [0-9.]+ [0-9]+\\.[0-9]{4}\$' '$tmp/p.out') -eq 3 ]]" \
        "pairs.sh prints 3 pairs with their ratio: $(cat "$tmp/p.out" "$tmp/p.err" | tail -n 3)"
  # the median ratio is the middle one of the three printed
  mid=$(awk '/^[1-3] / { print $4 }' "$tmp/p.out" | sort -g | sed -n 2p)
  check "grep -q '^median B/A $mid (range ' '$tmp/p.out'" "pairs.sh median: want $mid, got $(tail -n 1 "$tmp/p.out")"
  HPM_BENCH_WARM_MIB=0 bench/scripts/pairs.sh 1 no_such_metric "" "" $B/alloc_test --iters 1000 --slots 4096 >/dev/null 2>"$tmp/p.err"
  check "[[ \$? -eq 1 ]] && grep -q 'no no_such_metric=' '$tmp/p.err'" "pairs.sh with a metric the program does not print must fail"
  bench/scripts/pairs.sh 0 ns_per_op "" "" $B/alloc_test >/dev/null 2>&1
  check "[[ \$? -eq 2 ]]" "pairs.sh with 0 pairs must exit 2"
  # every other pair runs B first, and each ratio is still B/A
  : >"$tmp/order.log"
  HPM_BENCH_WARM_MIB=0 bench/scripts/pairs.sh 4 ns_per_op "SIDE=A" "SIDE=B" \
      bash -c 'echo $SIDE >>"$0"; exec "$1" --threads 1 --iters 20000 --slots 4096' "$tmp/order.log" $B/alloc_test >/dev/null 2>"$tmp/p.err"
  check "[[ \$? -eq 0 && \"\$(tr '\n' ' ' <'$tmp/order.log')\" == 'A B B A A B B A ' ]]" \
        "pairs.sh order: want A B B A A B B A, got $(tr '\n' ' ' <"$tmp/order.log") $(tail -n 2 "$tmp/p.err")"
fi

# bench/scripts/rss_by_mapping.py: a larson run stopped half a second in;
# RSS by kind of mapping, larson's never-joined thread stacks among them,
# with their depth, and the program's RESULT line after it resumed.
if [[ -r $hpm_lib ]] && command -v python3 >/dev/null; then
  timeout 60 python3 bench/scripts/rss_by_mapping.py "$hpm_lib" 0.5 $B/larson --threads 2 --seconds 1 \
      >"$tmp/r.out" 2>"$tmp/r.err"
  check "[[ \$? -eq 0 ]] && grep -qE '^total [1-9][0-9]* KB\$' '$tmp/r.out' && grep -qE '^  stack: [1-9][0-9]* KB in [1-9][0-9]* mappings' '$tmp/r.out'" \
        "rss_by_mapping.py: totals and larson's stacks: $(head -n 3 "$tmp/r.out" "$tmp/r.err" | tr '\n' ' ')"
  check "grep -qE '^  stack depth \(bytes from the top\): median [1-9][0-9]*, max [1-9][0-9]*' '$tmp/r.out' && result_ok '$tmp/r.out' larson" \
        "rss_by_mapping.py: stack depths and larson's RESULT line: $(tail -n 2 "$tmp/r.out")"
  # bench/scripts/rss_trace.sh: larson's RSS every 100 ms of a 1 s run,
  # one line of numbers in MB; a failing program makes it fail.
  HPM_BENCH_WARM_MIB=0 timeout 60 bench/scripts/rss_trace.sh "$hpm_lib" 100 $B/larson --threads 2 --seconds 1 \
      >"$tmp/t.out" 2>"$tmp/t.err"
  check "[[ \$? -eq 0 ]] && grep -qE '^([0-9]+\.[0-9] ){5,}\$' '$tmp/t.out' && awk '{ exit !(\$NF >= 1) }' '$tmp/t.out'" \
        "rss_trace.sh: larson's RSS over 1 s: $(head -c 300 "$tmp/t.out" "$tmp/t.err" | tr '\n' ' ')"
  timeout 60 bench/scripts/rss_trace.sh "$hpm_lib" 100 false >/dev/null 2>&1
  check "[[ \$? -ne 0 ]]" "rss_trace.sh must fail when its program fails"
  # --census (gdb): hpmalloc's pageheap and slabs in the stopped larson.
  # larson makes only slabs, so their pages add up to the pages in use in
  # the active hugepages (each slab lies in one hugepage), and the main
  # thread (its first blocks) and the lanes' threads own slabs: at least
  # two heaps, even at the instant a lane changes hands. The census stops
  # the program again until no thread holds the pageheap lock, so the
  # counts are not caught half updated.
  if command -v gdb >/dev/null; then
    timeout 120 python3 bench/scripts/rss_by_mapping.py --census "$hpm_lib" 0.5 $B/larson --threads 2 --seconds 1 \
        >"$tmp/c.out" 2>"$tmp/c.err"
    in_use=$(sed -nE 's/^active hugepages: ([0-9]+) pages in use.*/\1/p' "$tmp/c.out")
    slab_pages=$(awk '/^slabs by list/ {on = 1; next} /^slabs by owner/ {on = 0} on {s += $3} END {print s + 0}' "$tmp/c.out")
    owners=$(awk '/^slabs by owner/ {on = 1; next} on && $1 == "heap" {n++} END {print n + 0}' "$tmp/c.out")
    check "grep -q '^pageheap lock: free' '$tmp/c.out' && grep -qE '^hugepages: .*active [1-9]' '$tmp/c.out' && [[ -n '$in_use' && '$in_use' -gt 0 && '$in_use' == '$slab_pages' ]]" \
          "rss_by_mapping.py --census: slab pages ($slab_pages) must equal the pages in use ($in_use): $(sed -n '/^hugepages/,/^RESULT/p' "$tmp/c.out" "$tmp/c.err" | head -n 20 | tr '\n' ' ')"
    # the free runs, by length, hold every free page of the active hugepages
    free_pages=$(sed -nE 's/^active hugepages: [0-9]+ pages in use, ([0-9]+) free.*/\1/p' "$tmp/c.out")
    run_pages=$(sed -nE "s/^active hugepages' free runs by length.*runs, pages: //p" "$tmp/c.out" |
        tr ',' '\n' | awk 'NR % 2 == 0 {s += $1} END {print s + 0}')
    check "[[ -n '$free_pages' && '$free_pages' == '$run_pages' ]]" \
          "rss_by_mapping.py --census: the free runs' pages ($run_pages) must equal the free pages ($free_pages)"
    check "[[ $owners -ge 2 ]] && grep -q '^spans other than slabs: 0 pages' '$tmp/c.out' && result_ok '$tmp/c.out' larson" \
          "rss_by_mapping.py --census: at least 2 heaps own slabs ($owners), no other spans, larson's RESULT: $(tail -n 3 "$tmp/c.out")"
  fi
  # peak_split.py: a run's sampled peak, hpmalloc's arenas (THP-eligible:
  # the library advises them) apart from the rest. With THP in madvise
  # mode glibc's heap is not eligible, so its eligible part is 0; the
  # medium run's heap is most of hpmalloc's peak.
  if grep -q '\[madvise\]' /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null; then
    args=($B/glibc_bench --threads 1 --min 1K --max 64K --dist uniform --touch page --seconds 0.3)
    timeout 60 python3 bench/scripts/peak_split.py "$hpm_lib" "${args[@]}" >"$tmp/ps.out" 2>&1
    read -r tot elig other < <(sed -nE 's/^peak sampled RSS ([0-9]+) KiB: THP-eligible \(hpmalloc.s heap\) ([0-9]+) KiB, other ([0-9]+) KiB \(exit 0\)$/\1 \2 \3/p' "$tmp/ps.out")
    check "[[ -n '$tot' && '$elig' -gt 20000 && '$other' -gt 0 && \$(( $elig + $other )) -eq '$tot' ]]" \
          "peak_split.py under hpmalloc: the heap's part must be most of a 33 MB medium run: $(cat "$tmp/ps.out")"
    timeout 60 python3 bench/scripts/peak_split.py glibc "${args[@]}" >"$tmp/ps.out" 2>&1
    check "grep -qE '^peak sampled RSS [1-9][0-9]* KiB: THP-eligible \(hpmalloc.s heap\) 0 KiB, other [1-9][0-9]* KiB \(exit 0\)\$' '$tmp/ps.out'" \
          "peak_split.py under glibc: nothing THP-eligible: $(cat "$tmp/ps.out")"
  fi
fi

# hpm bench --alloc NAME=LIB.so[,VAR=VALUE]: a library given by path runs
# under its own name, and the report lists it with its setting (here
# hpmalloc under the name "mine" with a harmless variable).
if [[ -x build/hpm && -r $hpm_lib ]]; then
  build/hpm bench --tiny --alloc "glibc,mine=$hpm_lib,HPM_BENCH_PROBE=42" --baseline glibc --out "$tmp/res" larson \
      >"$tmp/hb.out" 2>"$tmp/hb.err"
  check "[[ \$? -eq 0 ]]" "hpm bench --alloc mine=LIB: $(tail -n 2 "$tmp/hb.err")"
  check "[[ \$(awk -F, '\$2==\"larson\" && \$3==\"mine\" && \$5==1' '$tmp/res/latest/runs.csv' | wc -l) -eq 1 ]]" \
        "runs.csv must have one ok larson row for 'mine'"
  check "grep -q '^| mine | measured | .*libhpmalloc.so | HPM_BENCH_PROBE=42 |' '$tmp/res/latest/REPORT.md'" \
        "REPORT.md must list 'mine' with its library and setting"
  build/hpm bench --tiny --alloc "glibc,gone=/nonexistent/lib.so" --out "$tmp/res" larson >/dev/null 2>"$tmp/hb.err"
  check "[[ \$? -eq 2 ]] && grep -q 'cannot read /nonexistent/lib.so' '$tmp/hb.err'" "--alloc with a missing library must exit 2"
  build/hpm bench --tiny --alloc "glibc,=x.so" --out "$tmp/res" larson >/dev/null 2>"$tmp/hb.err"
  check "[[ \$? -eq 2 ]]" "--alloc with an empty name must exit 2"
fi

# The real programs (bench/real/realprog.c) that are installed, at tiny
# sizes: their answers check out under hpmalloc, and the allocator is in
# the program alone (one stats line at exit: the program's, not the
# launcher's, redis-benchmark's or redis-cli's).
declare -A real_tiny=([lua]=8 [sqlite]=2000 [python]=2000 [perl]=2000 [redis]=2000)
for p in "${!real_tiny[@]}"; do
  if ! $B/realprog --program $p --available >/dev/null; then echo "skip: realprog $p: $($B/realprog --program $p --available)"; continue; fi
  timeout 60 env LD_PRELOAD=$PWD/$hpm_lib HPM_STATS=1 $B/realprog --program $p --size ${real_tiny[$p]} >"$tmp/r.out" 2>"$tmp/r.err"
  rc=$?
  check "[[ $rc -eq 0 ]] && result_ok '$tmp/r.out' realprog" "realprog $p under hpmalloc: rc=$rc, $(tail -n 1 "$tmp/r.err")"
  n=$(grep -c '^hpmalloc: stats for pid' "$tmp/r.err")
  check "[[ $n -eq 1 ]]" "realprog $p under hpmalloc: $n stats lines, expected the program's alone"
done
$B/realprog --program nope >/dev/null 2>&1
check "[[ $? -eq 2 ]]" "realprog --program nope must be a usage error"

# Under a peer allocator too, when installed.
je=$(ls /usr/lib/*-linux-gnu/libjemalloc.so.2 2>/dev/null | head -n 1)
if [[ -n "$je" ]]; then
  for p in glibc_thread larson xmalloc rptest alloc_test glibc_bench aging; do
    timeout 60 env LD_PRELOAD=$je $B/$p ${tiny[$p]} >"$tmp/j" 2>&1
    check "[[ $? -eq 0 ]] && result_ok '$tmp/j' '$p'" "$p under jemalloc: $(tail -n 1 "$tmp/j")"
  done
fi

# A broken allocator: every 50th small malloc of a thread returns its
# previous block again (two live blocks overlap); free does nothing.
if build_broken_alloc "$tmp"; then
  for p in glibc_thread larson xmalloc alloc_test glibc_bench aging glibc_simple sh6bench; do
    timeout 60 env LD_PRELOAD=$tmp/shim.so $B/$p ${tiny[$p]} >"$tmp/s.out" 2>"$tmp/s.err"
    rc=$?
    check "[[ $rc -eq 3 ]] && grep -q 'CHECK FAILED' '$tmp/s.err' && ! grep -q '^RESULT' '$tmp/s.out'" \
          "$p under a broken allocator: rc=$rc, $(tail -n 1 "$tmp/s.err")"
  done
  # (Not here: rptest's blocks come from calloc and memalign, which the shim
  # leaves to glibc; mstress and cache_thrash keep the originals' checks,
  # which look at a block's own contents and so cannot see the shim's
  # overlaps.)
  timeout 60 env LD_PRELOAD=$tmp/shim.so $B/malloc_stall --size 1000 --count 200 >"$tmp/s.out" 2>"$tmp/s.err"
  rc=$?
  check "[[ $rc -eq 3 ]] && grep -q 'CHECK FAILED' '$tmp/s.err' && ! grep -q '^RESULT' '$tmp/s.out'" \
        "malloc_stall under a broken allocator: rc=$rc, $(tail -n 1 "$tmp/s.err")"
  # Perl and SQLite take their memory from malloc (Lua only from realloc,
  # which the shim leaves alone): the broken blocks crash them, and
  # realprog reports it as a failed check, never a time.
  for p in perl sqlite; do
    $B/realprog --program $p --available >/dev/null || continue
    timeout 60 env LD_PRELOAD=$tmp/shim.so $B/realprog --program $p --size ${real_tiny[$p]} >"$tmp/s.out" 2>"$tmp/s.err"
    rc=$?
    check "[[ $rc -eq 3 ]] && grep -q 'CHECK FAILED' '$tmp/s.err' && ! grep -q '^RESULT' '$tmp/s.out'" \
          "realprog $p under a broken allocator: rc=$rc, $(tail -n 1 "$tmp/s.err")"
  done
  timeout 60 env LD_PRELOAD=$tmp/shim.so $B/memaccess --order rand --alloc nodes --ws 64K --visits 10K >"$tmp/s.out" 2>"$tmp/s.err"
  rc=$?
  check "[[ $rc -eq 3 ]] && grep -q 'CHECK FAILED' '$tmp/s.err'" "memaccess under a broken allocator: rc=$rc"
else
  bad "cannot compile the broken-allocator shim: $(cat "$tmp/cc.err")"
fi

finish
