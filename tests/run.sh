#!/usr/bin/env bash
# Runs every test of the project and prints the closing line
# "N passed, N failed". Each test is a program in build/tests/{unit,sim}/
# or a script in tests/scripts/ (run in name order); each must end its
# output with its own "N passed, N failed" line. A test that exits non-zero
# without such a line, or times out, counts as one failure.
# Usage: tests/run.sh [PATTERN]   (only tests whose name contains PATTERN)
set -u
cd "$(dirname "$0")/.."
pat="${1:-}"
total_pass=0; total_fail=0; failed_names=()
log_dir=build/test-logs; mkdir -p "$log_dir"

run_one() {  # name, command...
    local name=$1; shift
    [[ -n "$pat" && "$name" != *"$pat"* ]] && return
    local log="$log_dir/$(echo "$name" | tr '/' '_').log"
    local t0=$SECONDS
    timeout "${HPM_TEST_TIMEOUT:-900}" "$@" >"$log" 2>&1
    local rc=$?
    local line; line=$(grep -E '^([A-Za-z-]+: )?[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    local p=0 f=0
    if [[ -n "$line" ]]; then
        p=$(sed -E 's/^([A-Za-z-]+: )?([0-9]+) passed.*/\2/' <<<"$line")
        f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
    fi
    if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi
    total_pass=$((total_pass + p)); total_fail=$((total_fail + f))
    printf '%-40s %5d passed %3d failed  rc=%d  %ds\n' "$name" "$p" "$f" "$rc" $((SECONDS - t0))
    if [[ $f -ne 0 ]]; then failed_names+=("$name"); tail -n 15 "$log" | sed 's/^/    | /'; fi
}

for t in build/tests/unit/* build/tests/sim/*; do
    [[ -x "$t" ]] && run_one "${t#build/tests/}" "$t"
done
for s in tests/scripts/*.sh; do
    [[ -f "$s" ]] && run_one "${s#tests/}" bash "$s"
done
[[ ${#failed_names[@]} -gt 0 ]] && echo "failed: ${failed_names[*]} (logs in $log_dir)"
echo "$total_pass passed, $total_fail failed"
[[ $total_fail -eq 0 ]]
