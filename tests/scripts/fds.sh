#!/usr/bin/env bash
# The allocator owns no file descriptor (issue 13, item 10): a program
# on hpmalloc holds exactly the descriptors it was given, when main starts
# and after allocating, forking (the post-fork handlers) and trimming,
# under several options (with CCoW on, only at start: its thread opens
# pagemap for each scan after a fork); so does a program it execs; and CPython's
# subprocess (the case of its test_pass_fds_redirected) sees the same
# descriptors in its child as without hpmalloc. hpm stat still finds the
# counters of a program that closed every descriptor above 2.
source "$(dirname "$0")/common.bash"
require_lib
t_tmpdir
prog=$(require_prog fd_list) || t_abort "cannot build build/tests/progs/fd_list"
close_others() {   # the descriptors above 2 that this shell holds, as redirections
    local fd out=()
    for fd in /proc/$$/fd/*; do fd=${fd##*/}; [[ $fd -gt 2 ]] && out+=("$fd>&-"); done
    echo "${out[*]}"
}
closes=$(close_others)
# given ENV...: runs fd_list with only 0, 1, 2 and 5 open; prints its output.
given() { eval "env $* LD_PRELOAD=$HPM_LIB_ABS $prog exec $prog $closes 5</dev/null"; }
for opts in "" "HPM_CCOW=all" "HPM_CCOW=adaptive" "HPM_SUBRELEASE=1" "HPM_STATS=1" "HPM_PAGES=hugetlb"; do
    out=$(given "$opts" 2>"$tmp/err"); rc=$?
    echo "${opts:-defaults}: $(tr '\n' ' ' <<<"$out")"
    t_check "${opts:-defaults}: exits 0 (rc=$rc)" test "$rc" -eq 0
    if [[ $opts == HPM_CCOW=* ]]; then
        # CCoW's thread opens /proc/self/pagemap for each scan after a fork
        # (and closes it): a descriptor may be seen mid-scan, so only the
        # start of each program is exact here
        t_check "${opts}: descriptors 0 1 2 5 at start and in the exec'd program's start" \
            test "$(grep '^start' <<<"$out" | tr '\n' '|')" = "start: 0 1 2 5|start: 0 1 2 5|"
    else
        t_check "${opts:-defaults}: descriptors 0 1 2 5 at start, after the work, and in the exec'd program" \
            test "$(tr '\n' '|' <<<"$out")" = "start: 0 1 2 5|after: 0 1 2 5|start: 0 1 2 5|after: 0 1 2 5|"
    fi
done

py=/usr/bin/python3
code='import os, subprocess, sys
child = "import os; print(sorted(int(x) for x in os.listdir(\"/proc/self/fd\")))"
r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, close_fds=True)
print("parent", sorted(int(x) for x in os.listdir("/proc/self/fd")), "child", r.stdout.strip())'
ref=$(eval "env -u LD_PRELOAD $py -c '$code' $closes" 2>&1)
got=$(eval "env LD_PRELOAD=$HPM_LIB_ABS $py -c '$code' $closes" 2>&1)
echo "python without hpmalloc: $ref"; echo "python on hpmalloc:      $got"
t_check "python subprocess: the same descriptors with and without hpmalloc" test -n "$ref" -a "$ref" = "$got"

# a program that closes every descriptor above 2 (as daemons do) still
# publishes its counters
# (it says when its blocks are allocated: a fixed wait lost the race on a
# busy machine, where python's start took longer)
LD_PRELOAD=$HPM_LIB_ABS $py -c 'import os, sys, time; os.closerange(3, 1 << 16); b = [bytearray(1 << 20) for _ in range(8)]; open(sys.argv[1], "w").close(); time.sleep(60)' "$tmp/ready" &
bg=$!
i=0; while [[ ! -e $tmp/ready ]] && ((i++ < 400)); do sleep 0.05; done
build/hpm stat --json --rounds 0 $bg >"$tmp/s.json" 2>"$tmp/s.err" || cat "$tmp/s.err"
kill $bg 2>/dev/null; wait $bg 2>/dev/null
t_check "hpm stat reads the counters of a program that closed its descriptors" \
    python3 -c 'import json, sys; a = json.load(open(sys.argv[1]))["hpmalloc"]; sys.exit(not (a and a["pid"] == int(sys.argv[2])))' \
    "$tmp/s.json" "$bg"
t_done
