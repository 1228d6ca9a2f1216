#!/bin/bash
# rss_trace.sh: a program's RSS over time. Runs PROG ARGS (with
# LD_PRELOAD=LIB unless LIB is "glibc") after the warm-up
# (build/bench/warm_memory) and prints its VmRSS in MB every STEP_MS
# milliseconds until it exits, on one line. For programs whose max RSS
# depends on when memory comes back (larson's asleep main thread,
# docs/allocator.md, "The asleep drain").
#
#   bench/scripts/rss_trace.sh LIB STEP_MS PROG [ARGS...]
# Example:
#   bench/scripts/rss_trace.sh build/libhpmalloc.so 100 build/bench/larson --threads 2 --seconds 2
set -euo pipefail
cd "$(dirname "$0")/../.."
[[ $# -ge 3 && $2 =~ ^[1-9][0-9]*$ ]] || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
lib=$1 step_ms=$2
shift 2
[[ -x build/bench/warm_memory ]] || make -s build/bench/warm_memory
build/bench/warm_memory
if [[ $lib == glibc ]]; then "$@" >/dev/null & else env LD_PRELOAD="$lib" "$@" >/dev/null & fi
pid=$!
line=""
while kill -0 "$pid" 2>/dev/null; do
  r=$(awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$pid/status" 2>/dev/null || true)
  [[ -n $r ]] && line+="$r "
  sleep "$(awk -v m="$step_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
done
wait "$pid" || { echo "rss_trace.sh: $* failed" >&2; exit 1; }
echo "$line"
