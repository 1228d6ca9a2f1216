# common.bash: helpers sourced by the test scripts in tests/scripts/ (this
# file is not a test: run.sh runs only *.sh). It moves to the repository
# root, finds the library under test (HPM_LIB, default build/libhpmalloc.so)
# and counts checks. A script whose library is missing fails; it never
# skips silently. Each script ends with t_done, which prints
# "N passed, N failed" and returns non-zero when a check failed.
set -u
HPM_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$HPM_ROOT" || exit 1
HPM_LIB=${HPM_LIB:-build/libhpmalloc.so}
t_pass=0
t_fail=0

t_ok() { t_pass=$((t_pass + 1)); echo "ok: $*"; }
t_bad() { t_fail=$((t_fail + 1)); echo "FAIL: $*"; }
# t_check DESCRIPTION COMMAND...: one check, passed when COMMAND succeeds.
t_check() {
    local what=$1; shift
    if "$@"; then t_ok "$what"; else t_bad "$what"; fi
}
t_done() {
    echo "$t_pass passed, $t_fail failed"
    [[ $t_fail -eq 0 ]]
}
# Stops the script as one failure (a missing library or tool).
t_abort() {
    t_bad "$*"
    t_done
    exit 1
}

# Sets HPM_LIB_ABS to the library's absolute path, or stops with a failure.
# When the library is hpmalloc (not a peer used while developing the tests),
# also checks that it really preloads: a program that allocates (death ok),
# run with HPM_STATS=1, prints the allocator's "hpmalloc:" lines at exit,
# and ld.so does not complain.
require_lib() {
    [[ -f $HPM_LIB ]] || t_abort "library $HPM_LIB not found (build it with make, or set HPM_LIB)"
    HPM_LIB_ABS=$(realpath "$HPM_LIB")
    local err probe
    probe=$(require_prog death) || t_abort "cannot build build/tests/progs/death"
    err=$(HPM_STATS=1 LD_PRELOAD=$HPM_LIB_ABS "$probe" ok 2>&1 >/dev/null)
    if grep -q 'cannot be preloaded' <<<"$err"; then
        t_abort "ld.so cannot preload $HPM_LIB_ABS: $err"
    fi
    if is_hpmalloc; then
        grep -q '^hpmalloc:' <<<"$err" ||
            t_abort "HPM_STATS=1 LD_PRELOAD=$HPM_LIB_ABS $probe ok printed no 'hpmalloc:' stats line"
    fi
    return 0
}

is_hpmalloc() { [[ $(basename "$HPM_LIB") == libhpmalloc* ]]; }

# require_prog NAME: prints the path of build/tests/progs/NAME, building it
# when missing; returns 1 when it cannot. Use: bin=$(require_prog x) || t_abort ...
require_prog() {
    local bin=build/tests/progs/$1
    [[ -x $bin ]] || make -s "$bin" >&2 || return 1
    echo "$bin"
}

require_tool() {
    command -v "$1" >/dev/null 2>&1 || t_abort "$1 is not installed (tools/install-deps.sh test installs it)"
}

# check_stats_seen FILE WHAT: a check that FILE (a stderr capture of a run
# with HPM_STATS=1) holds the allocator's exit stats, i.e. the program
# really ran on hpmalloc. Skipped (not counted) for a peer library.
check_stats_seen() {
    is_hpmalloc || return 0
    if grep -q '^hpmalloc:' "$1" && ! grep -q 'cannot be preloaded' "$1"; then
        t_ok "$2 ran on hpmalloc (HPM_STATS lines on stderr)"
    else
        t_bad "$2 shows no hpmalloc stats on stderr: $(head -c 300 "$1")"
    fi
}

# t_tmpdir: makes $tmp, removed at exit.
t_tmpdir() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/hpmtest.XXXXXX")
    trap 'rm -rf "$tmp"' EXIT
}

# compare_runs LABEL CMD...: runs CMD without a preload (the reference) and
# on hpmalloc with HPM_STATS=1; checks that both exit 0, that the output is
# not empty and is the same byte for byte, and that the run really used
# hpmalloc. Needs $tmp (t_tmpdir).
compare_runs() {
    local label=$1; shift
    local rc_ref rc_hpm t0=$SECONDS
    env -u LD_PRELOAD "$@" >"$tmp/ref.out" 2>"$tmp/ref.err"
    rc_ref=$?
    local t1=$SECONDS
    HPM_STATS=1 LD_PRELOAD=$HPM_LIB_ABS "$@" >"$tmp/hpm.out" 2>"$tmp/hpm.err"
    rc_hpm=$?
    echo "$label: reference $((t1 - t0)) s, hpmalloc $((SECONDS - t1)) s; output: $(head -c 200 "$tmp/hpm.out")"
    t_check "$label: reference run exits 0 (rc=$rc_ref)" test "$rc_ref" -eq 0
    t_check "$label: exits 0 on $HPM_LIB (rc=$rc_hpm)" test "$rc_hpm" -eq 0
    t_check "$label: output is not empty" test -s "$tmp/ref.out"
    if cmp -s "$tmp/ref.out" "$tmp/hpm.out"; then
        t_ok "$label: output identical to the reference"
    else
        t_bad "$label: output differs from the reference"
        diff "$tmp/ref.out" "$tmp/hpm.out" | head -n 10
    fi
    [[ $rc_hpm -eq 0 ]] || grep -v -E '^hpmalloc:( {2}| stats for pid)' "$tmp/hpm.err" | head -n 10
    check_stats_seen "$tmp/hpm.err" "$label"
}

# run_env BIN ENV... -- ARGS...: runs BIN with the environment settings
# ENV, stdout to $tmp/out and stderr to $tmp/err (the caller's $tmp), and
# leaves ARGS in run_args for messages. Returns BIN's exit status.
run_env() {
    local bin=$1; shift
    local envs=()
    while [[ $1 != -- ]]; do envs+=("$1"); shift; done
    shift
    run_args="$*"
    env "${envs[@]}" "$bin" "$@" >"$tmp/out" 2>"$tmp/err"
}

# run_counted BIN LABEL ENV... -- ARGS...: runs BIN (a test program that
# prints "N passed, N failed") via run_env, shows its output, and counts one
# check: exit 0 and "0 failed". Needs $tmp.
run_counted() {
    local bin=$1 label=$2; shift 2
    local t0=$SECONDS rc
    run_env "$bin" "$@"
    rc=$?
    cat "$tmp/out"; head -n 20 "$tmp/err"
    if [[ $rc -eq 0 ]] && grep -q '^[0-9]* passed, 0 failed$' "$tmp/out"; then
        t_ok "$(basename "$bin") $run_args on $label ($((SECONDS - t0)) s)"
    else
        t_bad "$(basename "$bin") $run_args on $label: rc=$rc $(tail -n 1 "$tmp/out")"
    fi
}
