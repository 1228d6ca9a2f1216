#!/usr/bin/env bash
# rounds.sh: several allocators (or settings) on one benchmark program, in
# rotating interleaved rounds (A B C, B C A, C A B, ...), each run right
# after the warm-up (build/bench/warm_memory, docs/bench.md); prints each
# side's runs of METRIC (a key of the program's RESULT line), its median,
# and its median max RSS (from /usr/bin/time). pairs.sh compares two sides
# as ratios; this is for three or more at once, and for max RSS beside the
# time. A run that fails its self-check (no check=ok) stops the script
# (exit 1). WARM=MIB sets the warm-up (default 128 MiB): a run that touches
# more memory than that pays this VM's slow first touch of 2 MiB pages
# (docs/allocator.md, "Each heap's own hugepages on a list of its own").
#
# Usage: bench/scripts/rounds.sh ROUNDS METRIC NAME=ENV... -- PROGRAM [ARG...]
#   NAME=ENV: a side's name and its environment assignments ("name=" = glibc), e.g.
#     WARM=1024 bench/scripts/rounds.sh 5 ns_per_iter \
#       "hpm=LD_PRELOAD=build/libhpmalloc.so" \
#       "mi=LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2" \
#       -- build/bench/glibc_bench --threads 8 --min 1K --max 64K --dist uniform --touch page --seconds 1
set -uo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '13,18p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 4 && $1 =~ ^[1-9][0-9]*$ ]] || usage
rounds=$1 metric=$2
shift 2
names=() envs=()
while [[ $# -gt 0 && $1 != -- ]]; do
  [[ $1 == *=* ]] || usage
  names+=("${1%%=*}") envs+=("${1#*=}")
  shift
done
[[ $# -ge 2 && ${#names[@]} -ge 1 ]] || usage
shift
[[ -x build/bench/warm_memory ]] || make -s build/bench/warm_memory
[[ -x /usr/bin/time ]] || { echo "rounds.sh: /usr/bin/time is missing (apt-get install time)" >&2; exit 2; }
n=${#names[@]}
declare -a vals rss
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < n; k++)); do
    i=$(((k + r) % n))
    build/bench/warm_memory "${WARM:-128}"
    out=$(/usr/bin/time -f "MAXRSS_KB %M" env ${envs[$i]} "$@" 2>&1) || { echo "run failed (${names[$i]}): $(tail -n 2 <<<"$out")" >&2; exit 1; }
    ! grep -q 'cannot be preloaded' <<<"$out" || { echo "preload failed (${names[$i]})" >&2; exit 1; }
    grep -q ' check=ok' <<<"$out" || { echo "no check=ok (${names[$i]}): $(grep '^RESULT' <<<"$out" | tail -n 1)" >&2; exit 1; }
    v=$(grep '^RESULT ' <<<"$out" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$metric=//p")
    [[ $v =~ ^[0-9.]+$ ]] || { echo "no $metric= in: $(grep '^RESULT ' <<<"$out" | tail -n 1)" >&2; exit 1; }
    vals[i]+="$v " rss[i]+="$(sed -n 's/^MAXRSS_KB //p' <<<"$out") "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR] = $1} END {print a[int((NR + 1) / 2)]}'; }
for ((i = 0; i < n; i++)); do
  printf '%s: %s median %s (runs: %s) max RSS median %.1f MB\n' "${names[$i]}" "$metric" \
    "$(median <<<"${vals[i]}")" "${vals[i]% }" "$(awk -v k="$(median <<<"${rss[i]}")" 'BEGIN {print k / 1024}')"
done
