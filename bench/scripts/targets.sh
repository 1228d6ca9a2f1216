#!/usr/bin/env bash
# The allocator issue's targets, measured in one interleaved run
# (A B C A B C ...) and reported as medians and median ratios:
#   throughput  larson and xmalloc at 1 and 2 threads (ns per op, lower is better)
#   TLB reach   random walk over 1 GiB of malloc'd 64-byte nodes (ns per node)
#   memory      aging: RSS after malloc_trim(0) + 1.5 s, and THP coverage
#   footprint   python3 -c pass: VmRSS
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
B=build/bench
cases=(
  "larson-1t|larson --threads 1|ns_per_op|glibc jemalloc mimalloc hpmalloc"
  "larson-2t|larson --threads 2|ns_per_op|glibc jemalloc mimalloc hpmalloc"
  "xmalloc-1t|xmalloc --threads 1|ns_per_block|glibc jemalloc mimalloc hpmalloc"
  "xmalloc-2t|xmalloc --threads 2|ns_per_block|glibc jemalloc mimalloc hpmalloc"
  "tlb-1g|memaccess --order rand --alloc nodes --ws 1G --visits 4M|nodes_ns_gmean|glibc glibc-thp jemalloc-thp mimalloc-large hpmalloc"
  "aging-rss|aging|rss_kib|glibc jemalloc-thp mimalloc-large hpmalloc hpmalloc-sub"
  "aging-thp|aging|thp_pct|jemalloc-thp mimalloc-large hpmalloc hpmalloc-sub"
)
out=$(mktemp)
for ((r = 1; r <= reps; r++)); do
  for c in "${cases[@]}"; do
    IFS='|' read -r name cmd metric allocs <<<"$c"
    [[ $name == aging-thp ]] && continue   # measured with aging-rss
    for a in $allocs; do
      line=$(env ${env[$a]} LD_PRELOAD=${lib[$a]} $B/$cmd 2>/dev/null | grep '^RESULT' | tail -n 1)
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
