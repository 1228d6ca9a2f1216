#!/usr/bin/env bash
# stat_states.sh: `hpm stat` against processes in known states.
#  - build/tests/progs/stat_states puts one 2 MiB region in each state on
#    purpose (huge, split by MADV_NOHUGEPAGE, CoW-shared after fork, mixed
#    after one write, exclusive after writing every page, not present after
#    MADV_DONTNEED, partly present); hpm stat --json --detail must report
#    each region's state and page counts;
#  - total coverage must agree with smaps_rollup within 1 point;
#  - a bad PID, a non-number and a process that exits midway give a clear
#    message and a non-zero exit;
#  - hot/cold: a process that keeps touching its memory has WPD above one
#    that sleeps;
#  - `hpm stat -- CMD` reports on a command it starts.
set -u
cd "$(dirname "$0")/../.."
HPM=build/hpm
PROG=build/tests/progs/stat_states
pass=0; fail=0
ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
check() { if eval "$1"; then ok; else bad "$2"; fi; }
if [[ ! -x $HPM || ! -x $PROG ]]; then echo "build first: make tests"; echo "0 passed, 1 failed"; exit 1; fi
tmp=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$tmp"; }
trap cleanup EXIT

# ---- region states ----
$PROG >"$tmp/addrs" & sp=$!; pids+=($sp)
for i in $(seq 100); do grep -q READY "$tmp/addrs" 2>/dev/null && break; sleep 0.1; done
check "grep -q READY $tmp/addrs" "stat_states did not get ready"
$HPM stat --json --detail --rounds 0 $sp >"$tmp/states.json" 2>"$tmp/err"; rc=$?
check "[[ $rc -eq 0 ]]" "hpm stat exited $rc: $(cat $tmp/err)"
python3 - "$tmp/addrs" "$tmp/states.json" "$(id -u)" <<'PY' >"$tmp/py.out" 2>&1
import json, sys
addrs = {}
for line in open(sys.argv[1]):
    w = line.split()
    if len(w) == 2 and w[1].startswith("0x"): addrs[w[0]] = int(w[1], 16)
rep = json.load(open(sys.argv[2]))
root = sys.argv[3] == "0"
regions = {}
for m in rep["mappings"]:
    for g in m.get("regions", []): regions[int(g["addr"], 16)] = g
def check(cond, what):
    print(("ok " if cond else "FAIL ") + what)
def reg(name):
    return regions.get(addrs[name], {"state": "missing", "present": -1, "exclusive": -1, "shared": -1, "pmd": -1, "thp_pages": -1})
g = reg("huge");    check(g["state"] == "huge" and g["pmd"] == 1 and g["exclusive"] == 512, "huge: %s" % g)
g = reg("split");   check(g["state"] == "split" and g["pmd"] == 0 and g["present"] == 512, "split: %s" % g)
g = reg("hshared"); check(g["state"] == "huge_shared" and g["shared"] == 512, "huge CoW-shared: %s" % g)
g = reg("mixed");   check(g["state"] == "mixed" and g["exclusive"] == 1 and g["shared"] == 511, "mixed: %s" % g)
g = reg("excl");    check(g["state"] == "split" and g["exclusive"] == 512 and g["shared"] == 0, "exclusive after write: %s" % g)
g = reg("shared");  check(g["state"] == "cow_shared" and g["shared"] == 512, "CoW-shared 4K: %s" % g)
g = reg("absent");  check(g["state"] == "absent" and g["present"] == 0, "absent: %s" % g)
g = reg("partial"); check(g["state"] == "partial" and g["present"] == 256, "partial: %s" % g)
if root:
    check(reg("huge")["thp_pages"] == 512, "root: kpageflags marks the huge page's 512 frames THP")
    check(reg("shared")["thp_pages"] == 0, "root: 4 KiB region has no THP frames")
s = rep["regions"]["states"]
check(s["huge"] >= 1 and s["huge_shared"] >= 1 and s["mixed"] >= 1 and s["cow_shared"] >= 1, "summary counts states: %s" % s)
check(abs(rep["coverage"]["pct"] - rep["coverage"]["rollup_pct"]) <= 1.0, "coverage %.2f vs rollup %.2f" % (rep["coverage"]["pct"], rep["coverage"]["rollup_pct"]))
PY
while read -r word rest; do
    if [[ $word == ok ]]; then ok; else bad "$rest"; fi
done < <(grep -E '^(ok|FAIL) ' "$tmp/py.out")
check "! grep -q Traceback $tmp/py.out" "python check crashed: $(tail -3 $tmp/py.out)"

# coverage against smaps_rollup read by us, at the same moment
rollup=$(awk '/^Anonymous:/{a=$2} /^AnonHugePages:/{h=$2} END{printf "%.3f", a ? 100*h/a : 0}' /proc/$sp/smaps_rollup)
ours=$($HPM stat --json --rounds 0 $sp | python3 -c 'import json,sys; print(json.load(sys.stdin)["coverage"]["pct"])')
check "python3 -c 'import sys; sys.exit(abs($rollup - $ours) > 1.0)'" "coverage $ours vs smaps_rollup $rollup"
# the text report has the map line with the states
$HPM stat --rounds 0 $sp >"$tmp/text" 2>&1
check "grep -q 'huge-page coverage' $tmp/text && grep -qE '^ +[Hhscmpe.?]+$' $tmp/text" "text report lacks coverage or map"
kill $sp

# ---- as non-root: what the kernel lets us see, and what is missing ----
if [[ $(id -u) -eq 0 ]] && command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups test -x $PROG 2>/dev/null; then
    nobody="setpriv --reuid=65534 --regid=65534 --clear-groups"
    $nobody $PROG >"$tmp/addrs2" & np=$!; pids+=($np)
    for i in $(seq 100); do grep -q READY "$tmp/addrs2" 2>/dev/null && break; sleep 0.1; done
    $nobody $HPM stat --json --detail --rounds 1 --interval 0.1 $np >"$tmp/nr.json" 2>"$tmp/nr.err"; rc=$?
    check "[[ $rc -eq 0 ]]" "non-root hpm stat of own process: rc=$rc $(cat $tmp/nr.err)"
    python3 - "$tmp/addrs2" "$tmp/nr.json" <<'PY' >"$tmp/py2.out" 2>&1
import json, sys
addrs = {l.split()[0]: int(l.split()[1], 16) for l in open(sys.argv[1]) if len(l.split()) == 2 and l.split()[1].startswith("0x")}
rep = json.load(open(sys.argv[2]))
regions = {int(g["addr"], 16): g for m in rep["mappings"] for g in m.get("regions", [])}
def check(c, what): print(("ok " if c else "FAIL ") + what)
check(not rep["root"] and not rep["kpageflags"], "runs without root, no kpageflags")
check(regions[addrs["huge"]]["state"] == "huge" and regions[addrs["mixed"]]["state"] == "mixed", "states still visible without root")
check(regions[addrs["huge"]]["thp_pages"] == 0, "THP frame counts not claimed without root")
check(any("root" in m for m in rep["missing"]), "says what is missing and why: %s" % rep["missing"])
check(rep["hot"] is not None, "hot/cold works on an own-uid process")
PY
    while read -r word rest; do if [[ $word == ok ]]; then ok; else bad "$rest"; fi; done < <(grep -E '^(ok|FAIL) ' "$tmp/py2.out")
    check "! grep -q Traceback $tmp/py2.out" "python (non-root) crashed: $(tail -3 $tmp/py2.out)"
    kill $np
    # another user's process: a clear refusal
    sleep 5 & rp=$!
    $nobody $HPM stat --rounds 0 $rp >"$tmp/o" 2>&1; rc=$?
    check "[[ $rc -eq 1 ]] && grep -q 'needs root' $tmp/o" "non-root on a root process: rc=$rc $(cat $tmp/o)"
    kill $rp
else
    echo "# non-root checks skipped (not root, or build/ not readable by nobody)"
fi

# ---- errors ----
$HPM stat 999999999 >"$tmp/o" 2>&1; rc=$?
check "[[ $rc -ne 0 ]] && grep -q 'not a process id\|no process' $tmp/o" "huge bad pid: rc=$rc $(cat $tmp/o)"
$HPM stat 4000000 >"$tmp/o" 2>&1; rc=$?
check "[[ $rc -eq 1 ]] && grep -q 'no process with pid 4000000' $tmp/o" "missing pid: rc=$rc $(cat $tmp/o)"
$HPM stat abc >"$tmp/o" 2>&1; rc=$?
check "[[ $rc -eq 2 ]] && grep -q 'not a process id' $tmp/o" "non-numeric pid: rc=$rc"
$HPM stat --interval -1 1 >"$tmp/o" 2>&1; rc=$?
check "[[ $rc -eq 2 ]]" "negative interval accepted"
sleep 0.6 & sh=$!
$HPM stat --rounds 5 --interval 0.3 $sh >"$tmp/o" 2>&1; rc=$?
check "[[ $rc -eq 1 ]] && grep -q 'exited while' $tmp/o" "process exiting midway: rc=$rc $(cat $tmp/o)"

# --watch: one report per refresh, then a clear end when the process exits
sleep 1.2 & wp=$!
$HPM stat --json --watch 0.2 --count 2 --rounds 0 $wp >"$tmp/w" 2>&1; rc=$?
check "[[ $rc -eq 0 && \$(grep -c '^{' $tmp/w) -eq 2 ]]" "--watch --count 2 gives 2 JSON reports (rc=$rc)"
$HPM stat --watch 0.3 --rounds 0 $wp >/dev/null 2>"$tmp/o"; rc=$?
check "[[ $rc -eq 1 ]] && grep -q 'exited while' $tmp/o" "--watch ends with a message when the process exits: rc=$rc $(cat $tmp/o)"

# ---- hot/cold: a busy process vs a sleeping one ----
python3 -c 'import time
b = bytearray(64 << 20)
t = time.time() + 30
while time.time() < t:
    for i in range(0, len(b), 4096): b[i] = 1' & busy=$!; pids+=($busy)
python3 -c 'import time
b = bytearray(64 << 20)
time.sleep(30)' & idle=$!; pids+=($idle)
sleep 1.5
wb=$($HPM stat --json --rounds 3 --interval 0.3 $busy | python3 -c 'import json,sys; print(json.load(sys.stdin)["hot"]["wpd"])')
wi=$($HPM stat --json --rounds 3 --interval 0.3 $idle | python3 -c 'import json,sys; print(json.load(sys.stdin)["hot"]["wpd"])')
check "python3 -c 'import sys; sys.exit(not ($wb > $wi + 0.5 and $wi < 0.5))'" "WPD busy $wb should exceed idle $wi"
kill $busy $idle 2>/dev/null

# ---- hpm stat -- CMD ----
$HPM stat --json --rounds 1 --interval 0.2 -- python3 -c 'import time; b = bytearray(32 << 20); time.sleep(1.5)' >"$tmp/cmd.json" 2>"$tmp/cmd.err"; rc=$?
check "[[ $rc -eq 0 ]] && python3 -c 'import json,sys; r=json.load(open(\"$tmp/cmd.json\")); sys.exit(r[\"coverage\"][\"anon_bytes\"] < (30<<20))'" "stat -- CMD: rc=$rc $(cat $tmp/cmd.err)"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
