#!/usr/bin/env bash
# The report's plots (tools/hpm/bench/bench_plot.c, bench_style.c): in
# every plot of a small real run, each allocator has one colour, the same
# everywhere (hpmalloc the table's red), hpmalloc is the first column of
# every data file and plot command and is drawn highlighted (solid bars
# with a black border, thick lines), and gnuplot draws every figure
# without errors.
source "$(dirname "$0")/common.bash"
require_lib
require_tool gnuplot
t_tmpdir
allocs=glibc,hpmalloc
[[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ]] && allocs=glibc,jemalloc,hpmalloc
timeout 600 build/hpm bench --tiny --alloc "$allocs" --baseline glibc --out "$tmp/res" glibc-st memaccess-seq aging \
    >"$tmp/out" 2>"$tmp/err"; rc=$?
t_check "hpm bench --tiny exits 0 (rc=$rc)" test "$rc" -eq 0
run=$tmp/res/latest
gp=$run/plots.gp
t_check "plots.gp written" test -s "$gp"
t_check "gnuplot reported no error" test ! -s "$run/plots.log"
for p in pct_diff.png memaccess.png memory.png; do t_check "$p drawn" test -s "$run/$p"; done
python3 - "$run" <<'PY' >"$tmp/py.out" 2>&1
import re, sys, glob
run = sys.argv[1]
def check(c, what): print(("ok " if c else "FAIL ") + what)
gp = open(run + "/plots.gp").read()
plots = [l for l in gp.splitlines() if l.startswith("plot ")]
check(len(plots) >= 4, f"{len(plots)} plot commands")
seen = {}
for line in plots:
    m = re.match(r"plot '([^']+)'", line)
    cols = open(run + "/" + m.group(1)).readline().split()[1:]
    items = line[5:].split(", ''")
    check(len(items) == len(cols), f"{m.group(1)}: one plot item per column ({len(items)} vs {len(cols)})")
    check(cols[0] == "hpmalloc", f"{m.group(1)}: hpmalloc is the first column ({cols[0]})")
    for name, item in zip(cols, items):
        rgb = re.search(r"lc rgb '(#[0-9a-f]{6})'", item).group(1)
        seen.setdefault(name, set()).add(rgb)
        if name == "hpmalloc":
            check("fs solid 1.0" in item or "lw 3" in item, f"{m.group(1)}: hpmalloc highlighted")
check(all(len(v) == 1 for v in seen.values()), f"one colour per allocator across plots: {seen}")
check(seen.get("hpmalloc") == {"#d62728"}, "hpmalloc is red everywhere")
check(len({next(iter(v)) for v in seen.values()}) == len(seen), "no two allocators share a colour")
PY
cat "$tmp/py.out"
while read -r w rest; do [[ $w == ok ]] && t_ok "$rest" || t_bad "$rest"; done < <(grep -E '^(ok|FAIL) ' "$tmp/py.out")
t_check "the python checks ran" bash -c "! grep -q Traceback '$tmp/py.out' && grep -q '^ok ' '$tmp/py.out'"
t_done
