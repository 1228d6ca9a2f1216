#!/usr/bin/env bash
# death.sh: invalid frees and reallocs must stop the program. For each mode
# of tests/progs/death.c run under LD_PRELOAD=$HPM_LIB (default
# build/libhpmalloc.so), checks that:
#   - it dies by SIGABRT (exit status 134);
#   - stderr is exactly one line, starting with "hpmalloc:";
#   - the line names the function (free or realloc) and the pointer passed
#     (the 0x... value death printed, compared as a number);
#   - the line says what is wrong (a word matching the mode's pattern).
# Mode "ok" must exit 0 with nothing on stderr. Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
bin=$(require_prog death) || t_abort "cannot build build/tests/progs/death"
ulimit -c 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

wild='invalid|wild|unknown|not (a|an) |not allocated|not owned|outside|foreign'
interior='interior|inside|not the start|not a block start|middle|offset'
double='double|already free|freed|not allocated'
declare -A why=(
    [free-wild-global]=$wild [free-wild-stack]=$wild [free-wild-mmap]=$wild [free-wild-arena]=$wild
    [free-interior-small]=$interior [free-interior-large]=$interior
    [double-free-small]=$double [double-free-large]=$double
    [realloc-wild]=$wild [realloc-interior]=$interior [realloc-double-free]=$double
)

# Does the line hold a 0x... token equal (as a number) to the pointer?
names_pointer() {
    local line=$1 want=$2 tok
    for tok in $(grep -oiE '0x[0-9a-f]+' <<<"$line"); do
        (( tok == want )) && return 0
    done
    return 1
}

run_mode() {
    local mode=$1 rc
    LD_PRELOAD=$HPM_LIB_ABS "$bin" "$mode" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    local nlines; nlines=$(grep -c '' "$tmp/err")
    if [[ $mode == ok ]]; then
        t_check "ok: valid calls exit 0 (rc=$rc)" test "$rc" -eq 0
        t_check "ok: nothing on stderr ($(head -c 200 "$tmp/err"))" test "$nlines" -eq 0
        return
    fi
    local line; line=$(head -n 1 "$tmp/err")
    local ptr; ptr=$(sed -n 's/^ptr=//p' "$tmp/out")
    local fn=free; [[ $mode == realloc-* ]] && fn=realloc
    echo "$mode: rc=$rc stderr: $line"
    t_check "$mode: killed by SIGABRT (rc=$rc, want 134)" test "$rc" -eq 134
    t_check "$mode: exactly one stderr line (got $nlines)" test "$nlines" -eq 1
    t_check "$mode: line starts with 'hpmalloc:'" grep -q '^hpmalloc:' <<<"$line"
    t_check "$mode: line names $fn" grep -qE "(^|[^a-z_])$fn([^a-z_]|$)" <<<"$line"
    if [[ -n $ptr ]]; then
        t_check "$mode: line names the pointer $ptr" names_pointer "$line" "$ptr"
    else
        t_bad "$mode: death printed no pointer (stdout: $(head -c 200 "$tmp/out"))"
    fi
    t_check "$mode: line says what is wrong (/${why[$mode]}/)" grep -qiE "${why[$mode]}" <<<"$line"
}

for mode in $("$bin" list); do run_mode "$mode"; done
t_done
