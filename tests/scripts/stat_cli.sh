#!/usr/bin/env bash
# hpm's command line and hpm stat's outputs.
#  - conventions: options and operands in any order (hpm stat PID --json and
#    hpm stat --json PID), --opt=value, "--", --help (exit 0, stdout) and
#    --version on hpm and every subcommand, exit 2 on usage errors, 1 on
#    runtime errors;
#  - hpm stat and HPM_STATS agree on every counter of a process that waits
#    without allocating (tests/progs/stat_agree.c);
#  - --prometheus parses with Debian's prometheus_client parser: HELP and
#    TYPE on every family, the values equal the JSON ones, region states
#    add up; --textfile DIR writes a file that parses, atomically (a reader
#    running beside --watch never sees a partial file), and leaves no
#    temporary file.
source "$(dirname "$0")/common.bash"
require_lib
t_tmpdir
HPM=build/hpm
PY=/usr/bin/python3
$PY -c 'import prometheus_client' 2>/dev/null || t_abort "python3-prometheus-client is not installed (tools/install-deps.sh test)"
prog=$(require_prog stat_agree) || t_abort "cannot build build/tests/progs/stat_agree"

# rc_is WANT CMD...: CMD exits with WANT.
rc_is() { local want=$1; shift; "$@" >/dev/null 2>&1; local rc=$?; [[ $rc -eq $want ]] || { echo "  rc $rc: $*"; return 1; }; }
for c in "" run stat bench sim; do
    t_check "hpm $c --version prints the version" bash -c "$HPM $c --version | grep -q '^hpm .*[0-9]\.[0-9]'"
    t_check "hpm $c --help exits 0 with usage on stdout" bash -c "$HPM $c --help | grep -qi usage"
done
t_check "hpm with no command: exit 2" rc_is 2 $HPM
t_check "hpm --bogus: exit 2" rc_is 2 $HPM --bogus
t_check "hpm nosuch: exit 2" rc_is 2 $HPM nosuch
t_check "hpm stat --bogus 1: exit 2" rc_is 2 $HPM stat --bogus 1
t_check "hpm stat 1 --rounds: missing value, exit 2" rc_is 2 $HPM stat 1 --rounds
t_check "hpm stat --rounds=x 1: bad value, exit 2" rc_is 2 $HPM stat --rounds=x 1
t_check "hpm stat 1 2: two PIDs, exit 2" rc_is 2 $HPM stat 1 2
t_check "hpm stat (no PID): exit 2" rc_is 2 $HPM stat
t_check "hpm stat --json --prometheus 1: exit 2" rc_is 2 $HPM stat --json --prometheus 1
t_check "hpm stat of a missing process: exit 1" rc_is 1 $HPM stat 1073741000
# strtod takes "nan" and every range check passed it (--watch nan looped
# forever); a count with a fraction was cut to a whole one
for bad in "--watch nan" "--count nan" "--interval nan" "--sample nan" "--count 1.5" "--rounds 2.5" "--top 1.5"; do
    t_check "hpm stat $bad 1: exit 2" rc_is 2 timeout 20 $HPM stat $bad --rounds 0 1
done
t_check "hpm bench --reps nan: exit 2" rc_is 2 $HPM bench --reps nan --list
t_check "hpm run (no program): exit 2" rc_is 2 $HPM run
t_check "hpm run -e NOEQUALS true: exit 2" rc_is 2 $HPM run -e NOEQUALS true
t_check "hpm run of a missing program: exit 127" rc_is 127 $HPM run /nonexistent/prog
t_check "hpm run passes options after PROG to it" bash -c "$HPM run echo --stats | grep -qx -- --stats"
t_check "hpm run -- PROG" bash -c "$HPM run -e HPM_X=7 -- sh -c 'echo \$HPM_X' | grep -qx 7"
t_check "hpm bench --reps 0: exit 2" rc_is 2 $HPM bench --reps 0
t_check "hpm bench nosuchsuite: exit 2" rc_is 2 $HPM bench nosuchsuite
t_check "hpm bench --list (any order with a suite)" bash -c "$HPM bench micro --list | grep -q glibc-st"
t_check "hpm stat --rounds 0 -- CMD runs CMD" bash -c "$HPM stat --rounds 0 --json -- sh -c 'sleep 0.3' | grep -q '\"pid\"'"

mkfifo "$tmp/in"
HPM_STATS=1 LD_PRELOAD=$HPM_LIB_ABS "$prog" <"$tmp/in" >"$tmp/prog.out" 2>"$tmp/prog.err" &
pid=$!
exec 7>"$tmp/in"
for _ in $(seq 100); do grep -q READY "$tmp/prog.out" && break; sleep 0.1; done
t_check "the waiting program is ready" grep -q READY "$tmp/prog.out"
$HPM stat $pid --json --rounds 0 >"$tmp/a.json" 2>"$tmp/a.err"; rc1=$?
$HPM stat --json --rounds=0 $pid >"$tmp/b.json" 2>>"$tmp/a.err"; rc2=$?
$HPM stat --prometheus --rounds 1 --interval 0.2 $pid >"$tmp/p.prom" 2>>"$tmp/a.err"; rc3=$?
t_check "hpm stat PID --json, --json PID, --prometheus PID exit 0 ($rc1 $rc2 $rc3)" test $((rc1 + rc2 + rc3)) -eq 0
(for _ in $(seq 400); do [[ -f $tmp/tf/hpm_stat_$pid.prom ]] && cat "$tmp/tf/hpm_stat_$pid.prom" >>"$tmp/reads"; echo "@@" >>"$tmp/reads"; sleep 0.005; done) &
reader=$!
mkdir -p "$tmp/tf"
$HPM stat --textfile "$tmp/tf" --rounds 0 --watch 0.2 --count 8 $pid 2>>"$tmp/a.err"; rc4=$?
wait $reader
t_check "--textfile with --watch exits 0 ($rc4)" test "$rc4" -eq 0
exec 7>&-
wait $pid
cat "$tmp/a.err"
$PY - "$tmp" "$pid" <<'PY' >"$tmp/py.out" 2>&1
import json, re, sys, os
from prometheus_client.parser import text_string_to_metric_families
tmp, pid = sys.argv[1], int(sys.argv[2])
def check(cond, what): print(("ok " if cond else "FAIL ") + what)
a, b = (json.load(open(f"{tmp}/{n}.json"))["hpmalloc"] for n in "ab")
check(a is not None and b is not None, "both argument orders read the counters")
# HPM_STATS lines at exit: "hpmalloc:   NAME   VALUE (extra)"
text = open(f"{tmp}/prog.err").read()
def field(label, group=1):
    m = re.search(r"hpmalloc:\s+" + label, text)
    return int(m.group(group)) if m else None
want = {"bytes_in_use": field(r"bytes in use\s+(\d+)"), "bytes_mapped": field(r"bytes mapped \(arena\)\s+(\d+)"),
        "bytes_metadata": field(r"bytes metadata\s+(\d+)"), "hp_backed": field(r"hugepages backed\s+(\d+)"),
        "hp_in_use": field(r"hugepages backed\s+\d+ \(in use (\d+)"),
        "hp_cached": field(r"hugepages backed\s+\d+ \(in use \d+, cached (\d+)"),
        "hp_released": field(r"hugepages released\s+(\d+)"), "hp_hybrid": field(r"hybrid hugepages\s+(\d+)"),
        "hp_hugetlb": field(r"hugetlb hugepages\s+(\d+)"),
        "hp_fallback": field(r"hugetlb hugepages\s+\d+ \(fallbacks to THP (\d+)"),
        "pages_subreleased": field(r"pages subreleased\s+(\d+)"), "large_allocs": field(r"large allocations\s+(\d+)"),
        "ccow_forks": field(r"ccow .*forks (\d+)"), "ccow_regions_precopied": field(r"ccow .*regions pre-copied (\d+)"),
        "ccow_bytes_precopied": field(r"ccow .*bytes (\d+)"), "ccow_faults_avoided": field(r"ccow .*faults avoided ~(\d+)")}
for k, v in want.items():
    check(v is not None and a is not None and a.get(k) == v, f"{k}: hpm stat {a.get(k) if a else None} == HPM_STATS {v}")
check(a and a["bytes_metadata"] > 0, "bytes_metadata is not 0")
fams = {f.name: f for f in text_string_to_metric_families(open(f"{tmp}/p.prom").read())}
raw = open(f"{tmp}/p.prom").read()
names = set(re.findall(r"^# TYPE (\S+)", raw, re.M))
check(names == set(re.findall(r"^# HELP (\S+)", raw, re.M)) and len(names) >= 20, f"HELP and TYPE for all {len(names)} families")
def value(name, **labels):
    for f in fams.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()): return s.value
check(all(s.labels.get("pid") == str(pid) for f in fams.values() for s in f.samples), "every sample has pid label")
for k in ("bytes_in_use", "bytes_mapped", "bytes_metadata"):
    check(value("hpmalloc_" + k) == a[k], f"prometheus hpmalloc_{k} {value('hpmalloc_' + k)} == JSON {a[k]}")
check(value("hpmalloc_hugepages_released_total") == a["hp_released"], "counter hpmalloc_hugepages_released_total")
check(fams.get("hpmalloc_hugepages_released") is not None and fams["hpmalloc_hugepages_released"].type == "counter",
      "released is a counter family")
states = [s for s in fams["hpm_regions"].samples]
check(len(states) == 8 and sum(s.value for s in states) == value("hpm_regions_scanned"), "region states add up to the regions scanned")
cov = value("hpm_thp_coverage_ratio")
check(cov is not None and 0 <= cov <= 1, f"coverage ratio {cov} in [0, 1]")
check(value("hpm_wpd") is not None and len(fams["hpm_hot_bytes"].samples) == 5, "hot/cold families with --rounds 1")
tf = f"{tmp}/tf/hpm_stat_{pid}.prom"
check(os.path.exists(tf), "the textfile exists")
check(os.listdir(f"{tmp}/tf") == [f"hpm_stat_{pid}.prom"], f"no temporary file left: {os.listdir(tmp + '/tf')}")
tfams = {f.name for f in text_string_to_metric_families(open(tf).read())}
check("hpmalloc_bytes_in_use" in tfams and "hpm_regions" in tfams, "the textfile parses, with hpmalloc and region families")
reads = [r for r in open(f"{tmp}/reads").read().split("@@\n") if r.strip()]
whole = all(r.endswith("\n") and r.count("# TYPE hpm_stat_cpu_seconds") == 1 for r in reads)
check(len(reads) > 0 and whole, f"{len(reads)} reads during --watch, each a whole file")
PY
cat "$tmp/py.out"
while read -r w rest; do [[ $w == ok ]] && t_ok "$rest" || t_bad "$rest"; done < <(grep -E '^(ok|FAIL) ' "$tmp/py.out")
t_check "the python checks ran" bash -c "! grep -q Traceback '$tmp/py.out' && grep -q '^ok ' '$tmp/py.out'"
t_done
