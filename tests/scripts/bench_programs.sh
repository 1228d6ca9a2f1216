#!/usr/bin/env bash
# bench_programs.sh: each benchmark program of bench/ runs once at a tiny
# size and must pass its own self-check and print a well-formed RESULT
# line; --help works and bad arguments exit 2; results are deterministic
# where they must be (kmeans checksum across thread counts, Richards'
# standard counts). Then every program that stamps its blocks runs under a
# deliberately broken allocator (an LD_PRELOAD shim that hands out the same
# block twice) and must fail with exit 3 and "CHECK FAILED", never report a
# time. Ends with "N passed, N failed". Takes a few seconds.
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
  [larson]="--threads 2 --slots 100 --rounds 1000 --generations 2"
  [xmalloc]="--threads 1 --blocks 10K"
  [cache_scratch]="--threads 2 --iters 200 --repeat 10"
  [aging]="--peak 4M --rounds 2 --sleep-ms 100"
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

# Under a peer allocator too, when installed.
je=$(ls /usr/lib/*-linux-gnu/libjemalloc.so.2 2>/dev/null | head -n 1)
if [[ -n "$je" ]]; then
  for p in glibc_thread larson xmalloc aging; do
    LD_PRELOAD=$je timeout 60 $B/$p ${tiny[$p]} >"$tmp/j" 2>&1
    check "[[ $? -eq 0 ]] && result_ok '$tmp/j' '$p'" "$p under jemalloc: $(tail -n 1 "$tmp/j")"
  done
fi

# A broken allocator: every 50th small malloc of a thread returns its
# previous block again (two live blocks overlap); free does nothing.
if build_broken_alloc "$tmp"; then
  for p in glibc_thread larson xmalloc aging; do
    LD_PRELOAD=$tmp/shim.so timeout 60 $B/$p ${tiny[$p]} >"$tmp/s.out" 2>"$tmp/s.err"
    rc=$?
    check "[[ $rc -eq 3 ]] && grep -q 'CHECK FAILED' '$tmp/s.err' && ! grep -q '^RESULT' '$tmp/s.out'" \
          "$p under a broken allocator: rc=$rc, $(tail -n 1 "$tmp/s.err")"
  done
  LD_PRELOAD=$tmp/shim.so timeout 60 $B/memaccess --order rand --alloc nodes --ws 64K --visits 10K >"$tmp/s.out" 2>"$tmp/s.err"
  rc=$?
  check "[[ $rc -eq 3 ]] && grep -q 'CHECK FAILED' '$tmp/s.err'" "memaccess under a broken allocator: rc=$rc"
else
  bad "cannot compile the broken-allocator shim: $(cat "$tmp/cc.err")"
fi

finish
