#!/usr/bin/env bash
# ccow_compare.sh: HPM_CCOW=off against HPM_CCOW=history, interleaved, for
# the default decision of docs/ccow.md ("The default mode"): the micro
# benchmark (1 GiB table, Zipf alpha 0.9 / 1.0 / 1.1, fork every 2 s) and
# Redis in the YCSB-like setting (1 GiB: 524,288 records of 10 x 100 random
# bytes, BGSAVE every 20 s for 80 s, Zipf 1.0 unscrambled and scrambled),
# then, with FULL=1, one round of the 4 GiB Redis run (2,097,152 records,
# BGSAVE every 30 s for 120 s). Prints one RESULT line per run; every dump
# is read back by redis-check-rdb (dumps_bad must be 0).
#
# Usage: bench/scripts/ccow_compare.sh [ROUNDS]   (default 3; needs `make`
#        and Debian's redis-server; about 12 minutes a round, FULL=1 adds
#        about 15)
# Run it on an otherwise idle machine: the pre-copy thread competes with
# the server, the child and the client for the cores.
set -u
cd "$(dirname "$0")/../.."
rounds=${1:-3}
lib=$(realpath build/libhpmalloc.so)
B=build/bench
[[ -x $B/ccow_zipf && -x $B/redis_zipf && -r $lib ]] || { echo "ccow_compare: run make first" >&2; exit 2; }
echo "# ccow_compare $(date -u +%FT%TZ) rounds=$rounds load $(cut -d' ' -f1-3 /proc/loadavg)"
for rep in $(seq "$rounds"); do
  for a in 0.9 1.0 1.1; do for m in off history; do
    r=$(HPM_CCOW=$m timeout 120 env LD_PRELOAD="$lib" $B/ccow_zipf --size 1G --alpha $a --period-ms 2000 \
        --duration-s 6 --thp keep 2>&1 | grep RESULT)
    echo "micro round=$rep alpha=$a mode=$m $r"
  done; done
done
if [[ -x /usr/bin/redis-server ]]; then
  for rep in $(seq "$rounds"); do for sc in "" --scrambled; do for m in off history; do
    HPM_CCOW=$m timeout 600 env LD_PRELOAD="$lib" $B/redis_zipf --server /usr/bin/redis-server --keys 524288 \
      --duration-s 80 --bgsave-every-s 20 $sc --name "redis-$m-${sc:-unscrambled}-$rep" 2>&1 | grep RESULT
  done; done; done
  if [[ ${FULL:-0} == 1 ]]; then for m in off history; do
    HPM_CCOW=$m timeout 900 env LD_PRELOAD="$lib" $B/redis_zipf --server /usr/bin/redis-server --keys 2097152 \
      --duration-s 120 --bgsave-every-s 30 --name "redis-full-$m" 2>&1 | grep RESULT
  done; fi
else
  echo "# no /usr/bin/redis-server: Redis part skipped"
fi
