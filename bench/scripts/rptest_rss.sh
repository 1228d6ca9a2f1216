#!/bin/bash
# rptest_rss.sh: rptest's memory, interleaved across allocators. rptest's
# peak of live bytes depends on timing (a thread that falls behind holds
# the batches the other sent it), so its max RSS varies from run to run
# under one allocator; this script gives, per allocator, the medians over
# ROUNDS interleaved runs of max RSS, of the program's own peak of live
# bytes (peak_live_kb) and of their ratio (RSS per live byte).
#
#   bench/scripts/rptest_rss.sh [ROUNDS] NAME=LIB.so ...   (LIB "" = glibc)
# Example:
#   bench/scripts/rptest_rss.sh 9 hpmalloc=build/libhpmalloc.so \
#       jemalloc=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
#       mimalloc=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2 glibc=
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=9
if [[ $# -gt 0 && $1 =~ ^[0-9]+$ ]]; then rounds=$1; shift; fi
[[ $# -gt 0 ]] || { echo "usage: $0 [ROUNDS] NAME=LIB.so ..." >&2; exit 2; }
prog=build/bench/rptest
[[ -x $prog ]] || make -s "$prog"
[[ -x build/bench/warm_memory ]] || make -s build/bench/warm_memory
declare -A ns rss live ratio slack
for ((r = 0; r < rounds; r++)); do
  for spec in "$@"; do
    name=${spec%%=*} lib=${spec#*=}
    build/bench/warm_memory   # warm free memory first (bench/common/bench_warm.h)
    out=$( { /usr/bin/time -f "maxrss_kb=%M" timeout 120 env ${lib:+LD_PRELOAD=$lib} "$prog" --threads 2 --runs 10; } 2>&1 )
    grep -q 'check=ok' <<<"$out" || { echo "rptest under $name failed: $out" >&2; exit 1; }
    n=$(grep -o 'ns_per_op=[0-9.]*' <<<"$out" | cut -d= -f2)
    m=$(grep -o 'maxrss_kb=[0-9]*' <<<"$out" | cut -d= -f2)
    p=$(grep -o 'peak_live_kb=[0-9]*' <<<"$out" | cut -d= -f2)
    ns[$name]+="$n " rss[$name]+="$m " live[$name]+="$p "
    ratio[$name]+="$(awk -v m="$m" -v p="$p" 'BEGIN { printf "%.3f", m / p }') "
    slack[$name]+="$((m - p)) "
  done
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "# rptest --threads 2 --runs 10, medians of $rounds interleaved rounds"
echo "| allocator | ns_per_op | max RSS, MB | peak live, MB | RSS / live | RSS - live, MB |"
echo "|---|---|---|---|---|---|"
for spec in "$@"; do
  name=${spec%%=*}
  awk -v n="$name" -v t="$(med "${ns[$name]}")" -v m="$(med "${rss[$name]}")" -v p="$(med "${live[$name]}")" -v q="$(med "${ratio[$name]}")" -v k="$(med "${slack[$name]}")" \
    'BEGIN { printf "| %s | %.1f | %.1f | %.1f | %.2f | %.1f |\n", n, t, m / 1024, p / 1024, q, k / 1024 }'
done
