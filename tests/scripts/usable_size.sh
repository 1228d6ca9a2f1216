#!/usr/bin/env bash
# usable_size.sh: malloc_usable_size of an invalid pointer stops the
# program as free does (issue 13 item 9). For each mode of
# tests/progs/usable.c (wild, interior and freed pointers) under
# LD_PRELOAD=$HPM_LIB, checks: death by SIGABRT (status 134), exactly one
# stderr line starting "hpmalloc:", naming malloc_usable_size and the
# pointer. Mode "ok" (live pointers and NULL) exits 0 with nothing on
# stderr. Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
bin=$(require_prog usable) || t_abort "cannot build build/tests/progs/usable"
ulimit -c 0
t_tmpdir

for mode in $("$bin" list); do
    LD_PRELOAD=$HPM_LIB_ABS "$bin" "$mode" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    nlines=$(grep -c '' "$tmp/err")
    if [[ $mode == ok ]]; then
        t_check "ok: valid calls exit 0 (rc=$rc)" test "$rc" -eq 0
        t_check "ok: nothing on stderr ($(head -c 200 "$tmp/err"))" test "$nlines" -eq 0
        continue
    fi
    line=$(head -n 1 "$tmp/err")
    ptr=$(sed -n 's/^ptr=//p' "$tmp/out")
    echo "$mode: rc=$rc stderr: $line"
    t_check "$mode: killed by SIGABRT (rc=$rc, want 134; $(tail -n 1 "$tmp/out"))" test "$rc" -eq 134
    t_check "$mode: exactly one stderr line (got $nlines)" test "$nlines" -eq 1
    t_check "$mode: line starts with 'hpmalloc:'" grep -q '^hpmalloc:' <<<"$line"
    t_check "$mode: line names malloc_usable_size" grep -q 'malloc_usable_size' <<<"$line"
    found=0
    for tok in $(grep -oiE '0x[0-9a-f]+' <<<"$line"); do [[ -n $ptr ]] && (( tok == ptr )) && found=1; done
    t_check "$mode: line names the pointer $ptr" test "$found" -eq 1
done
t_done
