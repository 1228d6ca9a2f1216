#!/usr/bin/env bash
# stat_gone.sh: `hpm stat` on processes that have no memory to report, or
# stop having it midway (session 51's review).
#  - a kernel thread (kthreadd, pid 2, or another child of it): exit 1,
#    nothing on stdout, one line on stderr that says "kernel thread" and
#    does not claim the process exited; the same with --json;
#  - a process that exits during the hot/cold rounds (sleep 1.3, 5 rounds
#    of 0.4 s): the report of what was measured is printed (coverage,
#    regions), hot/cold marked incomplete with the intervals done (0..4 of
#    5), in text and JSON ("exited": true, "hot" null or "complete": false),
#    exit 1 with a line saying the report is incomplete; `-- CMD` likewise
#    prints it (exit: CMD's status);
#  - a process that lives through the rounds: "exited": false, "complete":
#    true, every interval.
source "$(dirname "$0")/common.bash"
t_tmpdir
HPM=build/hpm
[[ -x $HPM ]] || t_abort "build first: make"

# ---- a kernel thread ----
kt=
if [[ $(cat /proc/2/comm 2>/dev/null) == kthreadd ]]; then kt=2
else kt=$(awk '$4 == 2 { print $1; exit }' /proc/[0-9]*/stat 2>/dev/null); fi
if [[ -n $kt ]]; then
    for form in "" "--json"; do
        $HPM stat $form --rounds 1 --interval 0.1 $kt >"$tmp/kt.out" 2>"$tmp/kt.err"; rc=$?
        t_check "kernel thread $kt $form: exit 1 (rc=$rc)" test $rc -eq 1
        t_check "kernel thread $kt $form: nothing on stdout" test ! -s "$tmp/kt.out"
        t_check "kernel thread $kt $form: one line on stderr ($(wc -l <"$tmp/kt.err"))" test "$(wc -l <"$tmp/kt.err")" -eq 1
        t_check "kernel thread $kt $form: it says kernel thread: $(cat "$tmp/kt.err")" grep -q 'is a kernel thread' "$tmp/kt.err"
        t_check "kernel thread $kt $form: it does not claim it exited" bash -c "! grep -q 'exited' '$tmp/kt.err'"
    done
else
    echo "# no kernel thread visible here (pid namespace?): kernel thread checks skipped"
fi

# ---- exits during hot/cold ----
# execd PID: waits until the shell's child has become sleep (before the
# exec, a round finds none of the mappings it started with).
execd() { for _ in $(seq 100); do [[ $(cat /proc/$1/comm 2>/dev/null) == sleep ]] && return; sleep 0.01; done; }
# json_is FILE EXPR: the Python expression EXPR holds for the JSON report r in FILE.
json_is() { python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); sys.exit(not eval(sys.argv[2]))' "$1" "$2"; }
incomplete='(r["exited"] and r["coverage"]["anon_bytes"] > 0 and r["regions"]["total"] > 0 and
  (r["hot"] is None or (not r["hot"]["complete"] and r["hot"]["intervals_wanted"] == 5 and r["hot"]["intervals"] < 5)))'

sleep 1.3 & sp=$!; execd $sp
$HPM stat --rounds 5 --interval 0.4 $sp >"$tmp/t.out" 2>"$tmp/t.err"; rc=$?
t_check "exits during hot/cold, text: exit 1 (rc=$rc)" test $rc -eq 1
t_check "exits during hot/cold, text: the coverage is reported" grep -q '^huge-page coverage:' "$tmp/t.out"
t_check "exits during hot/cold, text: the region states are reported" grep -q '^2 MiB regions of anonymous memory' "$tmp/t.out"
t_check "exits during hot/cold, text: hot/cold marked incomplete: $(grep INCOMPLETE "$tmp/t.out")" \
    grep -Eq '^hot/cold: INCOMPLETE, the process exited after [0-4] of 5 intervals' "$tmp/t.out"
t_check "exits during hot/cold, text: stderr says the report is incomplete: $(cat "$tmp/t.err")" \
    grep -q "process $sp exited while hot/cold was measured.*incomplete" "$tmp/t.err"
wait $sp 2>/dev/null

sleep 1.3 & sp=$!; execd $sp
$HPM stat --json --rounds 5 --interval 0.4 $sp >"$tmp/j.json" 2>"$tmp/j.err"; rc=$?
t_check "exits during hot/cold, JSON: exit 1 (rc=$rc)" test $rc -eq 1
t_check "exits during hot/cold, JSON: exited, coverage and regions, hot incomplete: $(head -c 400 "$tmp/j.json")" \
    json_is "$tmp/j.json" "$incomplete"
wait $sp 2>/dev/null

$HPM stat --json --rounds 5 --interval 0.4 -- sleep 1.3 >"$tmp/c.json" 2>"$tmp/c.err"; rc=$?
t_check "-- CMD exits during hot/cold: exit 0, CMD's status (rc=$rc)" test $rc -eq 0
t_check "-- CMD exits during hot/cold: its report, hot incomplete: $(head -c 300 "$tmp/c.json") $(cat "$tmp/c.err")" \
    json_is "$tmp/c.json" "$incomplete"
t_check "-- CMD exits during hot/cold: stderr says incomplete" grep -q "while hot/cold was measured.*incomplete" "$tmp/c.err"

# ---- lives through the rounds ----
sleep 5 & sp=$!; execd $sp
$HPM stat --json --rounds 2 --interval 0.2 $sp >"$tmp/l.json" 2>"$tmp/l.err"; rc=$?
t_check "a live process: exit 0 (rc=$rc $(cat "$tmp/l.err"))" test $rc -eq 0
t_check "a live process: not exited, hot/cold complete over 2 intervals" \
    json_is "$tmp/l.json" 'not r["exited"] and r["hot"]["complete"] and r["hot"]["intervals"] == 2 and r["hot"]["intervals_wanted"] == 2'
kill $sp 2>/dev/null

t_done
