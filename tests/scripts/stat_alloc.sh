#!/usr/bin/env bash
# stat_alloc.sh: `hpm stat` reads the counters an hpmalloc process
# publishes (src/publish.c) without stopping it.
#  - a process on libhpmalloc: hpmalloc counters present, with its own pid,
#    its page mode, and bytes mapped / in use covering what it allocated;
#  - its forked child publishes its own copy (its pid, its own larger
#    numbers), parent and child have different stats pages (a mapping,
#    not a descriptor);
#  - a process not on hpmalloc: "hpmalloc": null and the text says so.
set -u
cd "$(dirname "$0")/../.."
HPM=build/hpm; PROG=build/tests/progs/stat_alloc_prog; LIB=build/libhpmalloc.so
pass=0; fail=0
check() { if eval "$1"; then pass=$((pass + 1)); else fail=$((fail + 1)); echo "FAIL: $2"; fi; }
for f in $HPM $PROG $LIB; do [[ -e $f ]] || { echo "missing $f: make tests"; echo "0 passed, 1 failed"; exit 1; }; done
tmp=$(mktemp -d); pp=
cleanup() { [[ -n $pp ]] && kill $pp 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

LD_PRELOAD=$LIB $PROG 64 >"$tmp/out" 2>"$tmp/err" &
pp=$!
for i in $(seq 100); do grep -q READY "$tmp/out" 2>/dev/null && break; sleep 0.1; done
check "grep -q READY $tmp/out" "helper not ready: $(cat $tmp/err)"
child=$(awk '/^child/{print $2}' "$tmp/out")
sleep 1   # let the counters settle
$HPM stat --json --rounds 0 $pp >"$tmp/p.json" 2>"$tmp/p.err"
$HPM stat --json --rounds 0 $child >"$tmp/c.json" 2>"$tmp/c.err"
python3 - "$tmp/p.json" "$tmp/c.json" "$pp" "$child" <<'PY' >"$tmp/py.out" 2>&1
import json, sys
p = json.load(open(sys.argv[1])); c = json.load(open(sys.argv[2]))
pp, cp = int(sys.argv[3]), int(sys.argv[4])
def check(cond, what): print(("ok " if cond else "FAIL ") + what)
pa, ca = p["hpmalloc"], c["hpmalloc"]
check(pa is not None, "parent publishes counters")
check(ca is not None, "child publishes counters")
if pa and ca:
    MiB = 1 << 20
    check(pa["pid"] == pp, "parent counters carry its pid (%d vs %d)" % (pa["pid"], pp))
    check(ca["pid"] == cp, "child counters carry its own pid (%d vs %d)" % (ca["pid"], cp))
    check(pa["page_mode"] in ("thp", "hugetlb", "1g", "off"), "page mode %r" % pa["page_mode"])
    check(pa["bytes_mapped"] >= 64 * MiB, "parent bytes_mapped %d >= 64 MiB" % pa["bytes_mapped"])
    check(ca["bytes_mapped"] >= pa["bytes_mapped"] + 60 * MiB, "child mapped more after fork: %d vs %d" % (ca["bytes_mapped"], pa["bytes_mapped"]))
    check(pa["bytes_in_use"] >= 60 * MiB, "parent bytes_in_use %d covers its 64 MiB (live counters)" % pa["bytes_in_use"])
    check(pa["hp_backed"] >= 30, "parent hugepages backed %d for 64 MiB" % pa["hp_backed"])
    check(ca["bytes_in_use"] >= 120 * MiB, "child bytes_in_use %d covers 128 MiB" % ca["bytes_in_use"])
PY
cat "$tmp/py.out"
while read -r w rest; do check "[[ $w == ok ]]" "$rest"; done < <(grep -E '^(ok|FAIL) ' "$tmp/py.out")
check "! grep -q Traceback $tmp/py.out" "python failed"
# area_line PID: the /proc/PID/maps line of the stats page hpm stat read.
area_line() {
    local at; at=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["hpmalloc"]["source"].split(" at 0x")[1])' "$2")
    grep "^$at-" "/proc/$1/maps"
}
pl=$(area_line $pp "$tmp/p.json"); cl=$(area_line $child "$tmp/c.json")
echo "parent area: $pl"; echo "child area:  $cl"
check "[[ -n \"$pl\" && -n \"$cl\" ]]" "the stats area is a mapping of parent and child"
check "[[ \"$(awk '{print $5}' <<<"$pl")\" != \"$(awk '{print $5}' <<<"$cl")\" ]]" "parent and child areas are different memory (inodes differ)"
for p in $pp $child; do
    check "! ls -l /proc/$p/fd | grep -q hpmalloc" "no stats descriptor in $p"
done
kill $pp; pp=

# not an hpmalloc process
sleep 5 & sp=$!
$HPM stat --json --rounds 0 $sp >"$tmp/s.json"
check "python3 -c 'import json,sys; sys.exit(json.load(open(\"$tmp/s.json\"))[\"hpmalloc\"] is not None)'" "plain process has hpmalloc: null"
$HPM stat --rounds 0 $sp | grep -q 'not running on hpmalloc'; check "[[ $? -eq 0 ]]" "text says not running on hpmalloc"
kill $sp
echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
