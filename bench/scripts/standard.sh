#!/usr/bin/env bash
# standard.sh: the standard allocator workloads (our versions of the programs
# allocator authors publish: larson, rptest, mstress, alloc-test, xmalloc-test,
# cache-thrash, cache-scratch, glibc bench-malloc-thread and its large variant,
# glibc bench-malloc-simple, malloc-large, mleak), and five real programs
# from Debian's packages (Lua, SQLite, Python, Perl, Redis: bench/real)
# over glibc, jemalloc, mimalloc 2.0.9 (Debian), snmalloc, mimalloc v3,
# TCMalloc (Temeraire) and hpmalloc, interleaved: round 1 runs every workload
# under every allocator, then round 2, ... (the allocator order is a new
# seeded shuffle for every workload of every round, so that no allocator
# always follows the same one). Prints, per workload, the median time (or the program's throughput
# as time: ns per operation) as a ratio to mimalloc v3 (lower is better), the
# geometric mean over the workloads (and over the synthetic ones alone), and
# the median max RSS per allocator.
#
# Usage: bench/scripts/standard.sh [ROUNDS]      (default 3; needs `make`)
# Environment:
#   SCALE=published|quick  published (default): the published parameters
#                          (5 s larson/xmalloc, 100M alloc-test operations);
#                          quick: about 1 s per run
#   HPM_LIB=PATH           the hpmalloc library (default build/libhpmalloc.so)
#   HPM_LIB_B=PATH         a second hpmalloc build, shown as hpmalloc-b
#   EXTRA_ALLOCS="NAME=LIB.so[,VAR=VALUE] ..."  more allocators
#   ALLOCS="glibc hpmalloc ..."  only these allocators
#   WORKLOADS="larson mstress ..."  only these workloads
#   HPM_PEERS=DIR          the peer libraries (default ../shared/peers from the
#                          repository root, or from its parent for a worktree);
#                          absent peers are skipped
#   OUT=DIR                keep the raw results there (default: a temp folder)
# Huge pages on this machine shorten page walks but do not extend TLB reach
# (the host backs the guest with 4 KiB pages); the figures are from a shared
# 2-core guest: use 3-5 rounds and read medians.
set -u
cd "$(dirname "$0")/../.."
root=$PWD
rounds=${1:-3}
scale=${SCALE:-published}
B=build/bench
L=/usr/lib/x86_64-linux-gnu
[[ -x $B/warm_memory ]] || { echo "standard.sh: $B/warm_memory is missing: run make first" >&2; exit 2; }

# name -> "LIB|VAR=VALUE" (LIB empty for glibc), in order (allocs.bash)
source bench/scripts/allocs.bash
bench_allocs "$root" "$L"
base=mimalloc-v3; [[ -n ${spec[$base]:-} && " ${order[*]} " == *" $base "* ]] || base=mimalloc

# workload | arguments (published) | arguments (quick) | metric (lower is better)
workloads=(
  "larson|larson --threads 2|larson --threads 2 --seconds 1|ns_per_op"
  "rptest|rptest --threads 2 --runs 10|rptest --threads 2 --runs 10|ns_per_op"
  "mstress|mstress --threads 2 --scale 50 --iters 25|mstress --threads 2 --scale 50 --iters 25|wall_ms"
  "alloc-test1|alloc_test --threads 1|alloc_test --threads 1 --iters 10000000|ns_per_op"
  "alloc-testN|alloc_test --threads 2|alloc_test --threads 2 --iters 5000000|ns_per_op"
  "xmalloc-test|xmalloc --threads 2 --size 64|xmalloc --threads 2 --size 64 --seconds 1|ns_per_free"
  "cache-thrashN|cache_thrash --threads 2|cache_thrash --threads 2 --repetitions 400000|wall_ms"
  "cache-scratchN|cache_scratch --threads 2 --iters 1000 --objsize 1 --repetitions 2000000|cache_scratch --threads 2 --iters 1000 --objsize 1 --repetitions 400000|wall_ms"
  "glibc-thread|glibc_bench --threads 2|glibc_bench --threads 2 --seconds 1|ns_per_iter"
  "glibc-large|glibc_bench --threads 2 --min 1K --max 64K --dist uniform --touch page|glibc_bench --threads 2 --min 1K --max 64K --dist uniform --touch page --seconds 1|ns_per_iter"
  "glibc-simple|glibc_simple|glibc_simple --iters 500000|wall_ms"
  "sh6benchN|sh6bench|sh6bench|wall_ms"
  "malloc-large|malloc_large|malloc_large --iters 2000|wall_ms"
  "mleak10|mleak --rounds 500|mleak --rounds 200|wall_ms"
  "mleak100|mleak --rounds 5000|mleak --rounds 1000|wall_ms"
  # real programs from Debian's packages (bench/real/realprog.c), left out when not installed
  "real-lua|realprog --program lua|realprog --program lua --quick|wall_ms"
  "real-sqlite|realprog --program sqlite|realprog --program sqlite --quick|wall_ms"
  "real-python|realprog --program python|realprog --program python --quick|wall_ms"
  "real-perl|realprog --program perl|realprog --program perl --quick|wall_ms"
  "real-redis|realprog --program redis|realprog --program redis --quick|ns_per_req"
)
if [[ -n ${WORKLOADS:-} ]]; then
  keep=(); for w in "${workloads[@]}"; do [[ " $WORKLOADS " == *" ${w%%|*} "* ]] && keep+=("$w"); done; workloads=("${keep[@]}")
fi

keep=()
for w in "${workloads[@]}"; do
  IFS='|' read -r name pub _ <<<"$w"
  if [[ $pub == realprog* ]] && ! $B/$pub --available >/dev/null; then echo "# $name left out: $($B/$pub --available)" >&2; continue; fi
  keep+=("$w")
done
workloads=("${keep[@]}")

out=${OUT:-$(mktemp -d /tmp/hpm-standard.XXXXXX)}
mkdir -p "$out"
raw=$out/raw.txt; : >"$raw"
n_a=${#order[@]}
echo "# standard workloads, $rounds interleaved rounds, scale $scale, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "# allocators: ${order[*]} (baseline $base)${peers:+; peers from $peers}" >&2
for ((r = 1; r <= rounds; r++)); do
  for w in "${workloads[@]}"; do
    IFS='|' read -r name pub quick metric <<<"$w"
    cmd=$pub; [[ $scale == quick ]] && cmd=$quick
    # A new seeded order for every workload of every round. A rotation kept
    # each allocator's predecessor fixed, and a run that follows a run of
    # the same kind of heap finds its memory warm in this VM: hpmalloc-b,
    # right after hpmalloc, won mstress whichever of two builds it held
    # (0.47 against 0.59 of mimalloc v3's time; swapped, 0.47 against 0.51).
    mapfile -t perm < <(awk -v n="$n_a" -v seed="$((r * 7919 + ${#name}))" 'BEGIN { srand(seed); for (i = 0; i < n; i++) p[i] = i;
      for (i = n - 1; i > 0; i--) { j = int(rand() * (i + 1)); t = p[i]; p[i] = p[j]; p[j] = t } for (i = 0; i < n; i++) print p[i] }')
    for ((k = 0; k < n_a; k++)); do
      a=${order[${perm[$k]}]}
      IFS='|' read -r lib var <<<"${spec[$a]}"
      log=$out/$name.$a.$r
      # warm free memory first (bench/common/bench_warm.h): 128 MiB, and as
      # much as the program touches for the two real rows that touch more
      # (Perl about 230 MB, Python about 360): past the warmed part a
      # huge-page fault here costs 6-9 ms, and whether a run met cold memory
      # depended on what ran before it (real-perl under hpmalloc: 0.03 or
      # 0.6-1.1 s of system time, same library, same faults)
      warm_mib=128; case $name in real-perl | real-python) warm_mib=512 ;; esac
      $B/warm_memory $warm_mib
      # the allocator goes into the program alone, not into timeout or time
      env -u LD_PRELOAD -u GLIBC_TUNABLES -u MALLOC_CONF timeout 300 /usr/bin/time -f "MAXRSS_KIB %M CPU_S %U %S" \
        -o "$log.time" env $var ${lib:+LD_PRELOAD=$lib} $B/$cmd >"$log.out" 2>"$log.err"
      rc=$?
      line=$(grep '^RESULT' "$log.out" | tail -n 1)
      v=$(grep -o " $metric=[0-9.]*" <<<"$line" | cut -d= -f2)
      rss=$(awk '/^MAXRSS_KIB/ {print $2}' "$log.time" 2>/dev/null)
      cpu=$(awk '/^MAXRSS_KIB/ {print $4, $5}' "$log.time" 2>/dev/null)
      [[ $rc -eq 0 && $line == *check=ok* && -n $v ]] || { v=nan; echo "FAILED: $name under $a (rc $rc): $(tail -n 1 "$log.err")" >&2; }
      echo "$name $a ${v} ${rss:-nan} ${cpu:-nan nan}" >>"$raw"
      echo "round $r/$rounds $name $a $metric=$v maxrss_kib=${rss:-?}" >&2
    done
  done
done

# The tables: medians, ratios to the baseline, geometric means.
awk -v order="${order[*]}" -v base="$base" -v rounds="$rounds" -v scale="$scale" '
function median(s,   n, a, i, j, t) {
  n = split(s, a, " "); m = 0
  for (i = 1; i <= n; i++) if (a[i] != "nan") b[++m] = a[i] + 0
  if (m == 0) return "nan"
  for (i = 2; i <= m; i++) { t = b[i]; for (j = i - 1; j >= 1 && b[j] > t; j--) b[j + 1] = b[j]; b[j + 1] = t }
  return (m % 2) ? b[(m + 1) / 2] : (b[m / 2] + b[m / 2 + 1]) / 2
}
{ k = $1 SUBSEP $2; t[k] = t[k] " " $3; r[k] = r[k] " " $4; us[k] = us[k] " " $5; sy[k] = sy[k] " " $6; if (!($1 in seen)) { seen[$1] = 1; wl[++nw] = $1 } }
END {
  na = split(order, al, " ")
  printf "median ratio to %s (time, or throughput as time; lower is better), %d rounds, scale %s\n\n", base, rounds, scale
  printf "| workload |"; for (i = 1; i <= na; i++) printf " %s |", al[i]; printf "\n|---|"; for (i = 1; i <= na; i++) printf "---|"; printf "\n"
  for (w = 1; w <= nw; w++) {
    bm = median(t[wl[w], base]); printf "| %s |", wl[w]
    for (i = 1; i <= na; i++) {
      m = median(t[wl[w], al[i]])
      if (m == "nan" || bm == "nan" || bm <= 0) printf " - |"
      else { x = m / bm; printf " %.2f |", x; lg[i] += log(x); ng[i]++; if (wl[w] !~ /^real-/) { ls[i] += log(x); ns[i]++ } }
    }
    printf "\n"
  }
  printf "| **geometric mean** |"; for (i = 1; i <= na; i++) printf (ng[i] ? " **%.2f** |" : " - |"), (ng[i] ? exp(lg[i] / ng[i]) : 0); printf "\n"
  # the synthetic workloads alone, comparable with tables made before the real programs came
  for (i = 1; i <= na; i++) if (ns[i] < ng[i] && ns[i] > 0) real = 1
  if (real) { printf "| geometric mean without real-* |"; for (i = 1; i <= na; i++) printf (ns[i] ? " %.2f |" : " - |"), (ns[i] ? exp(ls[i] / ns[i]) : 0); printf "\n" }
  printf "\n"
  printf "median max RSS, MB\n\n| workload |"; for (i = 1; i <= na; i++) printf " %s |", al[i]; printf "\n|---|"; for (i = 1; i <= na; i++) printf "---|"; printf "\n"
  for (w = 1; w <= nw; w++) {
    printf "| %s |", wl[w]
    for (i = 1; i <= na; i++) { m = median(r[wl[w], al[i]]); if (m == "nan") printf " - |"; else { printf " %.1f |", m / 1024; lr[i] += log(m / 1024); nr[i]++ } }
    printf "\n"
  }
  printf "| **geometric mean** |"; for (i = 1; i <= na; i++) printf (nr[i] ? " **%.1f** |" : " - |"), (nr[i] ? exp(lr[i] / nr[i]) : 0); printf "\n\n"
  printf "median raw values (metric as printed by the program)\n\n| workload |"; for (i = 1; i <= na; i++) printf " %s |", al[i]; printf "\n|---|"; for (i = 1; i <= na; i++) printf "---|"; printf "\n"
  for (w = 1; w <= nw; w++) { printf "| %s |", wl[w]; for (i = 1; i <= na; i++) { m = median(t[wl[w], al[i]]); printf (m == "nan" ? " - |" : " %.4g |"), m }; printf "\n" }
  printf "\nmedian CPU seconds, user / system (system time is mostly page faults: docs/bench.md)\n\n| workload |"; for (i = 1; i <= na; i++) printf " %s |", al[i]; printf "\n|---|"; for (i = 1; i <= na; i++) printf "---|"; printf "\n"
  for (w = 1; w <= nw; w++) {
    printf "| %s |", wl[w]
    for (i = 1; i <= na; i++) { u = median(us[wl[w], al[i]]); y = median(sy[wl[w], al[i]]); printf ((u == "nan" || y == "nan") ? " - |" : " %.2f / %.2f |"), u, y }
    printf "\n"
  }
}' "$raw"
echo
echo "raw results: $raw"
