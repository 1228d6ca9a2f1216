#!/usr/bin/env bash
# preload_cost.sh: what preloading a library costs a tiny program: the
# wall time of one run of PROG (default /bin/true) and its max RSS, for
# each library given, interleaved (A B A B ...), ROUNDS rounds of RUNS runs,
# medians. "none" stands for no preload.
# Usage: bench/scripts/preload_cost.sh [-r ROUNDS] [-n RUNS] [-p PROG] LIB...
#   e.g. make B=/tmp/nocxx CXX=/nonexistent lib   # the C-only library
#        bench/scripts/preload_cost.sh none /tmp/nocxx/libhpmalloc.so build/libhpmalloc.so
set -u
rounds=15 runs=40 prog=/bin/true
while getopts "r:n:p:" o; do case $o in r) rounds=$OPTARG;; n) runs=$OPTARG;; p) prog=$OPTARG;; *) exit 2;; esac; done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || { echo "usage: $0 [-r ROUNDS] [-n RUNS] [-p PROG] LIB..." >&2; exit 2; }
python3 - "$rounds" "$runs" "$prog" "$@" <<'PY'
import os, resource, statistics, subprocess, sys, time
rounds, runs, prog, libs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
def env_for(lib):
    e = dict(os.environ); e.pop("LD_PRELOAD", None)
    if lib != "none": e["LD_PRELOAD"] = os.path.abspath(lib)
    return e
times = {l: [] for l in libs}
for _ in range(rounds):
    for l in libs:
        e = env_for(l); t = time.perf_counter()
        for _ in range(runs): subprocess.run([prog], env=e)
        times[l].append((time.perf_counter() - t) / runs * 1e3)
for l in libs:
    rss = []
    for _ in range(5):
        out = subprocess.run(["/usr/bin/time", "-f", "%M", prog], env=env_for(l), capture_output=True, text=True)
        rss.append(int(out.stderr.strip().splitlines()[-1]))
    print(f"{l}: {statistics.median(times[l]):.2f} ms per run (median of {rounds} rounds of {runs}), "
          f"max RSS {statistics.median(rss)} KiB")
PY
