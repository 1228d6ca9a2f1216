#!/usr/bin/env bash
# pairs.sh: two allocators, or two settings of one, compared on one
# benchmark program in interleaved pairs (A B, B A, A B, ...), each run
# right after the warm-up (build/bench/warm_memory, docs/bench.md). The
# order alternates because the run that comes second can gain from it:
# rptest with the same library on both sides gave a median B/A of 0.84
# and 0.95 (11 pairs each) when A always ran first (session 26). Prints each
# pair's values of METRIC (a key of the program's RESULT line) and their
# ratio B/A, then the median ratio with its range and each side's median.
# For a time (ns_per_op, wall_ms, ...) a ratio under 1 means B is faster;
# for a rate (mops) over 1. A run that fails its self-check stops the
# script (exit 1). This is how docs/allocator.md's "N pairs" figures are
# made.
#
# Usage: bench/scripts/pairs.sh N METRIC "A_ENV" "B_ENV" PROGRAM [ARG...]
#   A_ENV, B_ENV: environment assignments for each side ("" = glibc), e.g.
#     bench/scripts/pairs.sh 15 ns_per_op \
#       "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2" \
#       "LD_PRELOAD=build/libhpmalloc.so" build/bench/alloc_test --threads 1 --iters 10M
#     bench/scripts/pairs.sh 11 ns_per_op "LD_PRELOAD=build/libhpmalloc.so" \
#       "LD_PRELOAD=build/libhpmalloc.so HPM_PAGES=off" build/bench/rptest --threads 2 --runs 10
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '15,21p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[[ $# -ge 5 && $1 =~ ^[1-9][0-9]*$ ]] || usage
n=$1 metric=$2 a_env=$3 b_env=$4
shift 4
[[ -x build/bench/warm_memory ]] || make -s build/bench/warm_memory
one() {  # ENV PROGRAM ARGS...: the metric of one run
  local env_list=$1 out value
  shift
  build/bench/warm_memory
  out=$(env $env_list "$@" 2>&1) || { echo "run failed ($env_list): $(tail -n 2 <<<"$out")" >&2; exit 1; }
  # the loader only warns when a preloaded library is missing (a fresh
  # machine before tools/install-deps.sh bench): the run would be glibc's
  ! grep -q 'cannot be preloaded' <<<"$out" || { echo "preload failed ($env_list): $(grep -m1 'cannot be preloaded' <<<"$out")" >&2; exit 1; }
  grep -q ' check=ok' <<<"$out" || { echo "no check=ok ($env_list): $(tail -n 1 <<<"$out")" >&2; exit 1; }
  value=$(grep '^RESULT ' <<<"$out" | tail -n 1 | tr ' ' '\n' | sed -n "s/^$metric=//p")
  [[ $value =~ ^[0-9.]+$ ]] || { echo "no $metric= in: $(grep '^RESULT ' <<<"$out" | tail -n 1)" >&2; exit 1; }
  echo "$value"
}
echo "# $n pairs, A: ${a_env:-glibc}, B: ${b_env:-glibc}; $metric of: $*"
echo "# pair A B B/A"
rows=()
for ((i = 1; i <= n; i++)); do
  if ((i % 2)); then a=$(one "$a_env" "$@"); b=$(one "$b_env" "$@")
  else b=$(one "$b_env" "$@"); a=$(one "$a_env" "$@"); fi   # every other pair B first: see the header
  rows+=("$i $a $b $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.4f", (a > 0 ? b / a : 0) }')")
  echo "${rows[-1]}"
done
col() { printf '%s\n' "${rows[@]}" | cut -d' ' -f"$1" | sort -g; }   # column k, sorted
mid() { sed -n "$(( (n + 1) / 2 ))p"; }
printf 'median B/A %s (range %s..%s); median A %s, median B %s\n' "$(col 4 | mid)" "$(col 4 | head -n 1)" \
  "$(col 4 | tail -n 1)" "$(col 2 | mid)" "$(col 3 | mid)"
