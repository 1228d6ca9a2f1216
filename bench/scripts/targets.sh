#!/usr/bin/env bash
# The allocator issue's targets, measured in one interleaved run
# (A B C, C B A, A B C ...) and reported as medians and median ratios:
#   throughput  larson and xmalloc at 1 and 2 threads (ns per op, lower is better)
#   TLB reach   random walk over 1 GiB of malloc'd 64-byte nodes (ns per node)
#   memory      aging: RSS after malloc_trim(0) + 1.5 s, and THP coverage
#   footprint   python3 -c pass: VmRSS
#   standard    mstress (ms) and glibc bench-malloc-thread with 1..64 KiB blocks
# The peers of ../shared/peers (snmalloc, mimalloc v3, TCMalloc Temeraire)
# join the throughput rows when that folder exists (HPM_PEERS overrides it);
# without it the script measures the Debian allocators only.
# bench/scripts/standard.sh gives the full table of standard workloads.
# Usage: bench/scripts/targets.sh [REPS] (default 5). Needs `make` first.
set -u
cd "$(dirname "$0")/../.."
reps=${1:-5}
L=/usr/lib/x86_64-linux-gnu
declare -A lib env
lib[glibc]=""; env[glibc]=""
lib[glibc-thp]=""; env[glibc-thp]="GLIBC_TUNABLES=glibc.malloc.hugetlb=1"
lib[jemalloc]=$L/libjemalloc.so.2; env[jemalloc]=""
lib[jemalloc-thp]=$L/libjemalloc.so.2; env[jemalloc-thp]="MALLOC_CONF=thp:always,metadata_thp:always"
lib[mimalloc]=$L/libmimalloc.so.2; env[mimalloc]=""
lib[mimalloc-large]=$L/libmimalloc.so.2; env[mimalloc-large]="MIMALLOC_LARGE_OS_PAGES=1"
lib[hpmalloc]=$PWD/build/libhpmalloc.so; env[hpmalloc]=""
lib[hpmalloc-sub]=$PWD/build/libhpmalloc.so; env[hpmalloc-sub]="HPM_SUBRELEASE=1"
peers=${HPM_PEERS:-}
for d in "$PWD/../shared/peers" "$PWD/../../shared/peers"; do [[ -z $peers && -d $d ]] && peers=$d; done
P=""   # the peers found, added to the throughput rows
if [[ -n $peers ]]; then
  [[ -r $peers/libsnmalloc.so ]] && { lib[snmalloc]=$peers/libsnmalloc.so; env[snmalloc]=""; P="$P snmalloc"; }
  [[ -r $peers/libmimalloc-v3.so ]] && { lib[mimalloc-v3]=$peers/libmimalloc-v3.so; env[mimalloc-v3]=""; P="$P mimalloc-v3"; }
  [[ -r $peers/libtcmalloc-temeraire.so ]] && {
    lib[tcmalloc-temeraire]=$peers/libtcmalloc-temeraire.so; env[tcmalloc-temeraire]="GLIBC_TUNABLES=glibc.pthread.rseq=0"
    P="$P tcmalloc-temeraire"; }
fi
B=build/bench
T="glibc jemalloc mimalloc$P hpmalloc"
cases=(
  "larson-1t|larson --threads 1 --seconds 2|ns_per_op|$T"
  "larson-2t|larson --threads 2 --seconds 2|ns_per_op|$T"
  "xmalloc-1t|xmalloc --threads 1 --seconds 2|ns_per_free|$T"
  "xmalloc-2t|xmalloc --threads 2 --seconds 2|ns_per_free|$T"
  "mstress|mstress --threads 2|wall_ms|$T"
  "glibc-large|glibc_bench --threads 2 --min 1K --max 64K --dist uniform --touch page --seconds 1|ns_per_iter|$T"
  "tlb-1g|memaccess --order rand --alloc nodes --ws 1G --visits 4M|nodes_ns_gmean|glibc glibc-thp jemalloc-thp mimalloc-large hpmalloc"
  "aging-rss|aging|rss_kib|glibc jemalloc-thp mimalloc-large hpmalloc hpmalloc-sub"
  "aging-thp|aging|thp_pct|jemalloc-thp mimalloc-large hpmalloc hpmalloc-sub"
)
out=$(mktemp)
for ((r = 1; r <= reps; r++)); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name cmd metric allocs <<<"$c"
    [[ $name == aging-thp ]] && continue   # measured with aging-rss
    # the allocators in reverse order every other repetition: a run can gain
    # from its place in the sequence (bench/scripts/pairs.sh, rptest)
    ((r % 2)) || allocs=$(tr ' ' '\n' <<<"$allocs" | tac | tr '\n' ' ')
    for a in $allocs; do
      $B/warm_memory   # warm free memory first (bench/common/bench_warm.h)
      line=$(env -u GLIBC_TUNABLES ${env[$a]} LD_PRELOAD=${lib[$a]} $B/$cmd 2>/dev/null | grep '^RESULT' | tail -n 1)
      v=$(grep -o " $metric=[0-9.]*" <<<"$line" | cut -d= -f2)
      echo "$name $a ${v:-nan}" >> "$out"
      if [[ $name == aging-rss ]]; then
        t=$(grep -o " thp_pct=[0-9.]*" <<<"$line" | cut -d= -f2); echo "aging-thp $a ${t:-nan}" >> "$out"
      fi
      echo "rep $r/$reps $name $a $metric=${v:-FAILED}" >&2
    done
  done
  for a in glibc hpmalloc; do
    v=$(env LD_PRELOAD=${lib[$a]} /usr/bin/python3 -c "print(open('/proc/self/status').read().split('VmRSS:')[1].split()[0])")
    echo "python-pass-rss-kib $a $v" >> "$out"
  done
done
echo "median over $reps interleaved repetitions (ratio = hpmalloc / other; < 1 means hpmalloc is lower)"
awk '{ k=$1" "$2; v[k]=v[k]" "$3; n[$1]=1 } END { for (k in v) print k, v[k] }' "$out" | while read -r name a vals; do
  med=$(tr ' ' '\n' <<<"$vals" | grep -v '^$' | sort -g | awk '{x[NR]=$1} END {print (NR%2)? x[(NR+1)/2] : (x[NR/2]+x[NR/2+1])/2}')
  echo "$name $a $med"
done | sort > "$out.med"
while read -r name a med; do
  h=$(awk -v n="$name" '$1==n && $2=="hpmalloc" {print $3}' "$out.med")
  ratio=$(awk -v h="$h" -v m="$med" 'BEGIN { if (m > 0) printf "%.3f", h / m; else print "-" }')
  printf '%-20s %-15s %12s   hpmalloc/this %s\n' "$name" "$a" "$med" "$ratio"
done < "$out.med"
rm -f "$out" "$out.med"
