#!/usr/bin/env bash
# scaling.sh: the throughput workloads of the standard table at several
# thread counts (default 1 4 8 16), under every allocator found,
# interleaved: round 1 runs every workload at every thread count under
# every allocator (a new seeded allocator order for each cell), then
# round 2, ... Prints, per workload, the median aggregate throughput
# (million operations per second, higher is better) at each thread count,
# its speedup over one thread, and each allocator's ratio to mimalloc
# 2.0.9 at the largest count. Written for a borrowed many-core machine
# (issue 11, item 7): it needs nothing but bash, awk and the binaries, and
# it stops starting new cells after DEADLINE_S seconds so that a run with
# a hard time limit still ends with its tables.
#
# Usage: bench/scripts/scaling.sh [ROUNDS]        (default 2; needs `make`)
# Environment:
#   THREADS="1 4 8 16"     the thread counts
#   SECS=0.5               seconds per timed run (larson, xmalloc, glibc-bench)
#   DEADLINE_S=0           stop starting cells after this many seconds (0: never)
#   B=build/bench          the benchmark programs
#   HPM_LIB=PATH           the hpmalloc library (default build/libhpmalloc.so)
#   DEB_LIBS=DIR           where libjemalloc.so.2 and libmimalloc.so.2 are
#                          (default /usr/lib/x86_64-linux-gnu)
#   HPM_PEERS=DIR          snmalloc, mimalloc v3, TCMalloc (default ../shared/peers)
#   TIME=PATH              GNU time for max RSS (default /usr/bin/time; absent: no RSS)
#   EXTRA_ALLOCS="NAME=LIB.so[,VAR=VALUE] ..."  more allocators (another
#                          build, or the same one with an option: NAME=LIB,HPM_PAGES=off)
#   ALLOCS="glibc ..."     only these allocators
#   WORKLOADS="larson ..." only these workloads
#   OUT=DIR                keep the raw results there (default: a temp folder)
# xmalloc-test runs T allocating and T freeing threads (2T in all); the
# other workloads run T threads.
set -u
cd "$(dirname "$0")/../.."
root=$PWD
rounds=${1:-2}
threads=${THREADS:-1 4 8 16}
secs=${SECS:-0.5}
deadline=${DEADLINE_S:-0}
B=${B:-build/bench}
L=${DEB_LIBS:-/usr/lib/x86_64-linux-gnu}
tm=${TIME:-/usr/bin/time}
[[ -x $tm ]] || tm=""
[[ -x $B/larson ]] || { echo "scaling.sh: $B/larson is missing: run make first" >&2; exit 2; }
source bench/scripts/allocs.bash   # spec[NAME]="LIB|VAR=VALUE" and order
bench_allocs "$root" "$L"
base=mimalloc; [[ " ${order[*]} " == *" $base "* ]] || base=${order[0]}

# workload | arguments (T: the thread count) | how to read Mops/s from RESULT
#   | MiB to warm per thread (bench/common/bench_warm.h; at least 128 in all):
#   glibc-large holds about 33 MiB per thread, and in a VM whose host takes
#   back free memory a run that meets cold memory measures the host's page
#   faults (16 threads here: 0.5 to 12 Mops/s under hpmalloc after a 128 MiB
#   warm-up, 15.8 to 16.7 after 1 GiB)
workloads=(
  "larson|larson --threads T --seconds $secs|mops|0"
  "rptest|rptest --threads T --runs 10|mops|16"
  "xmalloc-test|xmalloc --threads T --size 64 --seconds $secs|mfrees_per_s|16"
  "alloc-test|alloc_test --threads T --iters 4000000|threads*iters/wall_ms|0"
  "mstress|mstress --threads T --scale 50 --iters 25|blocks/wall_ms|16"
  "glibc-thread|glibc_bench --threads T --seconds $secs|mops|0"
  "glibc-large|glibc_bench --threads T --min 1K --max 64K --dist uniform --touch page --seconds $secs|mops|48"
)
if [[ -n ${WORKLOADS:-} ]]; then
  keep=(); for w in "${workloads[@]}"; do [[ " $WORKLOADS " == *" ${w%%|*} "* ]] && keep+=("$w"); done; workloads=("${keep[@]}")
fi

# The aggregate Mops/s of one RESULT line, by the workload's rule.
mops_of() {
  awk -v rule="$2" '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] } }
    END {
      if (rule ~ /^threads\*iters\/wall_ms$/) v = f["threads"] * f["iters"] / f["wall_ms"] / 1000
      else if (rule ~ /^blocks\/wall_ms$/) v = f["blocks"] / f["wall_ms"] / 1000
      else v = f[rule]
      printf "%.4f\n", v
    }' <<<"$1"
}

out=${OUT:-$(mktemp -d /tmp/hpm-scaling.XXXXXX)}
mkdir -p "$out"
raw=$out/raw.txt; : >"$raw"
n_a=${#order[@]}
start=$SECONDS
echo "# scaling: $rounds rounds, threads $threads, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "# allocators: ${order[*]} (ratios to $base)" >&2
stop=0
for ((r = 1; r <= rounds && !stop; r++)); do
  for w in "${workloads[@]}"; do
    IFS='|' read -r name cmd rule warm_per_t <<<"$w"
    for t in $threads; do
      if ((deadline > 0 && SECONDS - start >= deadline)); then
        echo "# deadline of ${deadline} s reached in round $r: stopping" >&2; stop=1; break 2
      fi
      warm_mib=$((warm_per_t * t)); ((warm_mib < 128)) && warm_mib=128
      mapfile -t perm < <(awk -v n="$n_a" -v seed="$((r * 7919 + t * 31 + ${#name}))" 'BEGIN { srand(seed); for (i = 0; i < n; i++) p[i] = i;
        for (i = n - 1; i > 0; i--) { j = int(rand() * (i + 1)); x = p[i]; p[i] = p[j]; p[j] = x } for (i = 0; i < n; i++) print p[i] }')
      for ((k = 0; k < n_a; k++)); do
        a=${order[${perm[$k]}]}
        IFS='|' read -r lib var <<<"${spec[$a]}"
        log=$out/$name.$t.$a.$r
        [[ -x $B/warm_memory ]] && HPM_BENCH_WARM_MIB=$warm_mib $B/warm_memory
        env -u LD_PRELOAD -u GLIBC_TUNABLES -u MALLOC_CONF timeout 120 ${tm:+$tm -f "MAXRSS_KIB %M" -o "$log.time"} \
          env $var ${lib:+LD_PRELOAD=$lib} $B/${cmd//T/$t} >"$log.out" 2>"$log.err"
        rc=$?
        line=$(grep '^RESULT' "$log.out" | tail -n 1)
        v=nan
        [[ $rc -eq 0 && $line == *check=ok* ]] && v=$(mops_of "$line" "$rule")
        [[ $v == nan ]] && echo "FAILED: $name at $t threads under $a (rc $rc): $(tail -n 1 "$log.err")" >&2
        rss=nan; [[ -n $tm ]] && rss=$(awk '/^MAXRSS_KIB/ {print $2}' "$log.time" 2>/dev/null)
        echo "$name $t $a $v ${rss:-nan}" >>"$raw"
      done
    done
    echo "# round $r: $name done at $((SECONDS - start)) s" >&2
  done
done

awk -v order="${order[*]}" -v base="$base" -v threads="$threads" '
function median(s,   n, a, i, j, x, m) {
  n = split(s, a, " "); m = 0
  for (i = 1; i <= n; i++) if (a[i] != "nan") b[++m] = a[i] + 0
  if (m == 0) return "nan"
  for (i = 2; i <= m; i++) { x = b[i]; for (j = i - 1; j >= 1 && b[j] > x; j--) b[j + 1] = b[j]; b[j + 1] = x }
  return (m % 2) ? b[(m + 1) / 2] : (b[m / 2] + b[m / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2 SUBSEP $3; v[k] = v[k] " " $4; rs[k] = rs[k] " " $5; n[k]++; if (!($1 in seen)) { seen[$1] = 1; wl[++nw] = $1 } }
END {
  na = split(order, al, " "); nt = split(threads, th, " "); top = th[nt]
  for (w = 1; w <= nw; w++) {
    printf "### %s: median Mops/s (speedup over 1 thread)\n\n| allocator |", wl[w]
    for (i = 1; i <= nt; i++) printf " %s T |", th[i]
    printf " rounds | ratio to %s at %d T | max RSS MB at %d T |\n|---|", base, top, top
    for (i = 1; i <= nt + 3; i++) printf "---|"; printf "\n"
    bt = median(v[wl[w], top, base])
    for (a = 1; a <= na; a++) {
      printf "| %s |", al[a]; one = median(v[wl[w], th[1], al[a]])
      for (i = 1; i <= nt; i++) {
        m = median(v[wl[w], th[i], al[a]])
        if (m == "nan") printf " - |"
        else if (i > 1 && one != "nan" && one > 0) printf " %.1f (%.1fx) |", m, m / one
        else printf " %.1f |", m
      }
      m = median(v[wl[w], top, al[a]]); r = median(rs[wl[w], top, al[a]])
      printf " %d | %s | %s |\n", n[wl[w], top, al[a]], (m == "nan" || bt == "nan" || bt <= 0) ? "-" : sprintf("%.2f", m / bt),
        (r == "nan") ? "-" : sprintf("%.1f", r / 1024)
    }
    printf "\n"
  }
}' "$raw"
echo "raw results: $raw (workload threads allocator Mops/s max_rss_kib)"
