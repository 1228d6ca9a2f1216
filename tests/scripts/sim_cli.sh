#!/usr/bin/env bash
# sim_cli.sh: `hpm sim` from the command line: bad options and malformed
# trace lines are rejected (with the line number) and a non-zero status;
# --record writes a trace whose replay prints the same table; the same seed
# gives the same table; --csv writes a well-formed time series for both
# policies; --plot writes real PNG files. Small memories keep it quick.
source "$(dirname "$0")/common.bash"
HPM=build/hpm
[[ -x $HPM ]] || make -s "$HPM" >&2 || t_abort "cannot build $HPM"
tmp=$(mktemp -d /tmp/hpm_sim_cli.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# the table without its timing rows, which vary run to run
table() { grep -vE '^(wall time|operations per second)' "$1" | grep -v '^hpm sim: '; }

# 1. option errors
"$HPM" sim --policy bogus >/dev/null 2>"$tmp/e1"; rc=$?
t_check "bad --policy exits 2" test $rc -eq 2
t_check "bad --policy is explained" grep -q "linux, illuminator, paper, both or all" "$tmp/e1"
# "nan" passed the 0..100 check (and its cast to an integer was undefined);
# strtoull reads " -1" as 2^64-1
for bad in "--patch-order sideways" "--kernel-pct 101" "--kernel-pct 1.5x" "--cache-fill maybe" "--dcache-pct 300" \
           "--kernel-pct nan" "--ops +5"; do
    "$HPM" sim $bad >/dev/null 2>&1; rc=$?
    t_check "'$bad' rejected with 2" test $rc -eq 2
done
"$HPM" sim --seed " -1" >/dev/null 2>&1; rc=$?
t_check "'--seed \" -1\"' rejected with 2" test $rc -eq 2
"$HPM" sim --mem 6 >/dev/null 2>"$tmp/e2"; rc=$?
t_check "--mem 6 rejected" test $rc -eq 2
"$HPM" sim --ops 12x >/dev/null 2>"$tmp/e3"; rc=$?
t_check "--ops 12x rejected" test $rc -eq 2
"$HPM" sim --nope >/dev/null 2>&1; rc=$?
t_check "unknown option rejected" test $rc -eq 2
"$HPM" sim --help >"$tmp/help"; rc=$?
t_check "--help exits 0 and describes --record" bash -c "[[ $rc -eq 0 ]] && grep -q -- --record '$tmp/help'"

# 2. malformed traces: the line number is named
printf 'a 1 0 M\n# fine\n\nf 1\na 2 3 X\n' >"$tmp/bad1.trace"
"$HPM" sim trace "$tmp/bad1.trace" --mem 8 >/dev/null 2>"$tmp/b1"; rc=$?
t_check "bad type: non-zero exit" test $rc -ne 0
t_check "bad type: line 5 named" grep -q "bad1.trace:5: bad type 'X'" "$tmp/b1"
printf 'a 1 0 M\nf\n' >"$tmp/bad2.trace"
"$HPM" sim "$tmp/bad2.trace" --mem 8 >/dev/null 2>"$tmp/b2"; rc=$?
t_check "missing field: line 2 named" bash -c "[[ $rc -ne 0 ]] && grep -q 'bad2.trace:2:' '$tmp/b2'"
printf 'a 1 12 U\n' >"$tmp/bad3.trace"
"$HPM" sim "$tmp/bad3.trace" --mem 8 >/dev/null 2>"$tmp/b3"; rc=$?
t_check "order 12: line 1 named" bash -c "[[ $rc -ne 0 ]] && grep -q 'bad3.trace:1: bad order' '$tmp/b3'"
t_check "no table printed for a bad trace" bash -c "! grep -q 'hybrid' '$tmp/b3'"
"$HPM" sim "$tmp" --mem 8 --policy linux >"$tmp/dir.out" 2>"$tmp/dir.err"; rc=$?
t_check "a directory as the trace: exit 1, said, no table ($rc)" bash -c "[[ $rc -eq 1 ]] && grep -q 'cannot read: Is a directory' '$tmp/dir.err' && ! grep -q hybrid '$tmp/dir.out'"
# a long `t N`: the sampler stepped to the next sample one interval at a
# time (10^15 steps; near 2^64 it wrapped and never ended), and the clock
# wrapped to 0
printf 't 1000000000000000\na 1 0 M\nf 1\n' >"$tmp/longt.trace"
timeout 60 "$HPM" sim "$tmp/longt.trace" --mem 8 --policy linux --sample 1 >"$tmp/lt" 2>&1; rc=$?
t_check "t 10^15 with --sample 1 ends ($rc)" bash -c "[[ $rc -eq 0 ]] && grep -qE '^operations \(simulated time\) +1000000000000002$' '$tmp/lt'"
printf 't 18446744073709551615\na 1 0 M\nr 1\nt 5\na 2 0 M\n' >"$tmp/maxt.trace"
timeout 60 "$HPM" sim "$tmp/maxt.trace" --mem 8 --policy linux --csv "$tmp/maxt.csv" >"$tmp/mt" 2>&1; rc=$?
t_check "t 2^64-1 ends, the clock stops at 2^64-1 ($rc)" bash -c "[[ $rc -eq 0 ]] && tail -1 '$tmp/maxt.csv' | grep -q '^linux,18446744073709551615,'"
t_check "t 2^64-1: the RCU free is counted, no kernel memory left" bash -c "grep -qE '^RCU-deferred frees +1$' '$tmp/mt' && grep -qE '^kernel memory, end \(MiB\) +0.0$' '$tmp/mt'"

# 3. record and replay, both workloads, one policy each
for wl in server fragmenter; do
    "$HPM" sim $wl --mem 64 --ops 200k --rounds 2 --policy linux --seed 3 --record "$tmp/$wl.trace" >"$tmp/$wl.run" 2>&1
    t_check "$wl: run with --record succeeds" test $? -eq 0
    t_check "$wl: trace has a header and ops" bash -c "head -1 '$tmp/$wl.trace' | grep -q 'mem_mib=64' && [[ \$(wc -l <'$tmp/$wl.trace') -gt 1000 ]]"
    "$HPM" sim trace "$tmp/$wl.trace" --policy linux >"$tmp/$wl.replay" 2>&1
    t_check "$wl: replay succeeds (mem from the header)" test $? -eq 0
    t_check "$wl: replay prints the same table" diff <(table "$tmp/$wl.run") <(table "$tmp/$wl.replay")
done
"$HPM" sim server --mem 64 --ops 200k --policy linux --seed 3 >"$tmp/again" 2>&1
t_check "same seed, same table" diff <(table "$tmp/server.run") <(table "$tmp/again")
"$HPM" sim server --mem 64 --ops 200k --policy linux --seed 4 >"$tmp/other" 2>&1
t_check "another seed, another run" bash -c "! diff -q <(grep -v wall '$tmp/server.run') <(grep -v wall '$tmp/other') >/dev/null"

# 4. --csv and --plot, both policies
"$HPM" sim fragmenter --mem 64 --rounds 3 --csv "$tmp/out.csv" --plot "$tmp/plots" >"$tmp/both" 2>&1
t_check "fragmenter with --csv --plot succeeds" test $? -eq 0
t_check "table has both policies" grep -q "linux *illuminator" "$tmp/both"
t_check "csv header" bash -c "head -1 '$tmp/out.csv' | grep -q '^policy,t_ops,hybrid_blocks,hybrid_pct'"
t_check "csv has rows for both policies" bash -c "grep -q '^linux,' '$tmp/out.csv' && grep -q '^illuminator,' '$tmp/out.csv'"
t_check "csv rows have 16 fields" bash -c "awk -F, 'NR>1 && NF!=16 {bad=1} END {exit bad}' '$tmp/out.csv'"
t_check "csv times increase per policy" bash -c "awk -F, 'NR>1 { if (\$1==p && \$2<=t) bad=1; p=\$1; t=\$2 } END {exit bad}' '$tmp/out.csv'"
for png in hybrid hugepage free; do
    f="$tmp/plots/$png.png"
    t_check "$png.png is a real PNG" bash -c "[[ -s '$f' ]] && [[ \$(head -c 8 '$f' | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]]"
    t_check "$png.png is not tiny" bash -c "[[ \$(stat -c %s '$f') -gt 5000 ]]"
done
t_check "plot data per policy" bash -c "[[ -s '$tmp/plots/sim_linux.dat' && -s '$tmp/plots/sim_illuminator.dat' ]]"

# 5. all three policies: three columns, ratios to linux, the three block counts
"$HPM" sim fragmenter --mem 64 --rounds 3 --policy all >"$tmp/all" 2>&1
t_check "--policy all runs" test $? -eq 0
t_check "three policies and two ratios" grep -qE "linux +illuminator +illuminator-paper +patch/linux +paper/linux" "$tmp/all"
for def in "hybrid (kernel + movable pages)" "page_owner mixed (type != label)" "kernel-polluted (any kernel page)"; do
    t_check "rows for '$def'" bash -c "[[ \$(grep -cF '$def' '$tmp/all') -eq 3 ]]"
done
"$HPM" sim fragmenter --mem 64 --rounds 3 --policy illuminator --patch-order mixed >"$tmp/mixed" 2>&1
t_check "--patch-order mixed runs" test $? -eq 0

# 6. --bench reports a positive rate and a clean check
"$HPM" sim --bench --mem 64 >"$tmp/bench" 2>&1
t_check "--bench runs" bash -c "[[ \$? -eq 0 ]] && grep -qE '^linux +20000000' '$tmp/bench'"
t_done
