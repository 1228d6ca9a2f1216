#!/usr/bin/env bash
# lock_rates.sh: how often hpmalloc's mutexes are taken under the standard
# workloads (quick parameters, two threads), per million operations of the
# program. It counts every pthread_mutex_lock of the process with a uprobe
# (perf probe on libc, the first argument read from %rdi), finds where
# libhpmalloc was loaded from perf's mmap events, and sorts each mutex
# address into the allocator's locks by their symbols (nm -S): the
# pageheap lock, the per-class abandoned-slab locks, the thread-heap list,
# metadata and release locks; anything else is the program's own. The
# central medium caches use spinlocks (transfer.c), counted here by a
# probe on their lock function. This is the measurement behind the lock
# table in docs/allocator.md ("Locks a malloc or free can take").
#
# Usage (as root; needs perf and a build with symbols, i.e. `make`):
#   bench/scripts/lock_rates.sh [LIB]      (default build/libhpmalloc.so)
#   WORKLOADS="larson xmalloc" bench/scripts/lock_rates.sh
# On a 2-core machine the rates say how often a lock is taken, not how
# contended it would be: multiply by the thread count for a server.
set -u
cd "$(dirname "$0")/../.."
lib=$(realpath "${1:-build/libhpmalloc.so}")
libc=/lib/x86_64-linux-gnu/libc.so.6
B=build/bench
[[ -r $lib && -x $B/larson ]] || { echo "lock_rates.sh: run make first" >&2; exit 2; }
command -v perf >/dev/null || { echo "lock_rates.sh: needs perf" >&2; exit 2; }
tmp=$(mktemp -d)
unprobe() { perf probe -q -d 'probe_libc:pthread_mutex_lock' 2>/dev/null; perf probe -q -d 'probe_libhpmalloc:*' 2>/dev/null; }
trap 'unprobe; rm -rf "$tmp"' EXIT
unprobe
perf probe -q -x "$libc" 'pthread_mutex_lock mtx=%di:x64' || { echo "lock_rates.sh: perf probe failed (root? uprobes?)" >&2; exit 2; }
have_central=0
perf probe -q -x "$lib" central_lock 2>/dev/null && have_central=1

# name|command|the RESULT key that counts operations
all=(
  "larson|$B/larson --threads 2 --seconds 1|ops"
  "rptest|$B/rptest --threads 2 --runs 10|memops"
  "mstress|$B/mstress --threads 2 --scale 50 --iters 25|blocks"
  "alloc-testN|$B/alloc_test --threads 2 --iters 5000000|iters"
  "xmalloc-test|$B/xmalloc --threads 2 --size 64 --seconds 1|frees"
  "glibc-thread|$B/glibc_bench --threads 2 --seconds 1|iters"
  "glibc-large|$B/glibc_bench --threads 2 --min 1K --max 64K --dist uniform --touch page --seconds 1|iters"
)
sym() { nm -S "$lib" | awk -v n="$1" '$4 == n { print $1, $2 }'; }
read -r ph_off ph_len < <(sym _hpm_ph)
read -r ab_off ab_len < <(sym abandoned_lock)
read -r hl_off _ < <(sym heaps_lock)
read -r ml_off _ < <(sym meta_lock)
read -r rl_off _ < <(sym release_lock)

printf '| workload | operations | pageheap | abandoned (per class) | heaps | metadata | release | central medium | program |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for w in "${all[@]}"; do
  IFS='|' read -r name cmd key <<<"$w"
  [[ -n ${WORKLOADS:-} && " $WORKLOADS " != *" $name "* ]] && continue
  events=probe_libc:pthread_mutex_lock
  [[ $have_central == 1 ]] && events="$events,probe_libhpmalloc:central_lock"
  perf record -q -e "$events" -o "$tmp/p.data" env LD_PRELOAD="$lib" $cmd >"$tmp/out" 2>/dev/null
  ops=$(grep -o "\b$key=[0-9]*" "$tmp/out" | tail -1 | cut -d= -f2)
  [[ -n $ops && $ops -gt 0 ]] || { echo "lock_rates.sh: $name printed no $key=" >&2; continue; }
  perf script -i "$tmp/p.data" --show-mmap-events -F event,trace 2>/dev/null >"$tmp/s" || true
  python3 - "$tmp/s" "$name" "$ops" "$lib" "$ph_off" "$ph_len" "$ab_off" "$ab_len" "$hl_off" "$ml_off" "$rl_off" <<'PY'
import os, re, sys
path, name, ops, lib = sys.argv[1], sys.argv[2], int(sys.argv[3]), os.path.basename(os.path.realpath(sys.argv[4]))
ph, phl, ab, abl, hl, ml, rl = (int(x, 16) for x in sys.argv[5:12])
base, counts = None, dict.fromkeys(["ph", "ab", "hl", "ml", "rl", "central", "prog"], 0)
for line in open(path, errors="replace"):
    m = re.search(r"MMAP2?.*\[(0x[0-9a-f]+)\((0x[0-9a-f]+)\) @ (0x[0-9a-f]+|0) .*" + re.escape(lib.split(".so")[0]), line)
    if m and base is None:
        base = int(m.group(1), 16) - int(m.group(3), 16)
        continue
    if "central_lock" in line: counts["central"] += 1; continue
    m = re.search(r"mtx=(0x[0-9a-f]+)", line)
    if not m: continue
    a = int(m.group(1), 16) - (base or 0)
    if base is None: counts["prog"] += 1
    elif ph <= a < ph + phl: counts["ph"] += 1
    elif ab <= a < ab + abl: counts["ab"] += 1
    elif a == hl: counts["hl"] += 1
    elif a == ml: counts["ml"] += 1
    elif a == rl: counts["rl"] += 1
    else: counts["prog"] += 1
per = lambda k: f"{counts[k]} ({counts[k] * 1e6 / ops:.0f}/M)"
print(f"| {name} | {ops} | " + " | ".join(per(k) for k in ["ph", "ab", "hl", "ml", "rl", "central", "prog"]) + " |")
PY
done
echo
echo "counts in the whole run (per million operations); the pageheap lock column is the only global lock a malloc or free can take"
