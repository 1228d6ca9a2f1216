#!/usr/bin/env bash
# realprog_python.sh: python3 on a workload of dicts, lists and strings
# (about 200k dict entries, 100k strings sorted and joined, nested
# containers, a growing string), printing counts and a SHA-256 of the
# results. Run without and with LD_PRELOAD=$HPM_LIB: the outputs must be
# identical. Run twice: with Python's default allocator (pymalloc takes
# small objects from its own arenas) and with PYTHONMALLOC=malloc (every
# object through malloc). Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
py=/usr/bin/python3; [[ -x $py ]] || py=$(command -v python3) || t_abort "python3 is not installed"
t_tmpdir
cat >"$tmp/work.py" <<'PY'
import hashlib, random
r = random.Random(12345)
h = hashlib.sha256()
d = {}
for i in range(200000):
    d["key%d-%d" % (i, r.randrange(1 << 30))] = [r.random() for _ in range(r.randrange(1, 8))]
for k in list(d)[::2]:
    del d[k]
for k in sorted(d):
    h.update(k.encode()); h.update(repr(d[k]).encode())
strings = ["".join(chr(97 + r.randrange(26)) for _ in range(r.randrange(1, 64))) for _ in range(100000)]
strings.sort()
h.update("|".join(strings).encode())
lists = [[j * i for j in range(i % 50)] for i in range(50000)]
h.update(repr(sum(map(sum, lists))).encode())
nested = {i: {"a": str(i), "b": [i] * (i % 9), "c": (i, str(i) * 3)} for i in range(50000)}
h.update(repr([nested[i] for i in range(0, 50000, 7)]).encode())
s = ""
for i in range(50000):
    s += str(i)
h.update(s.encode())
big = [bytes(range(256)) * (1 + i % 64) for i in range(2000)]
h.update(b"".join(big))
print(len(d), len(strings), len(s), h.hexdigest())
PY
compare_runs "python3 (pymalloc)" "$py" "$tmp/work.py"
compare_runs "python3 (PYTHONMALLOC=malloc)" env PYTHONMALLOC=malloc "$py" "$tmp/work.py"

# A small program stays small (issue 11 item 6): the max RSS of an empty
# script, as the interpreter reports it, median of 5, with and without
# hpmalloc, for Debian's python and the one on PATH when it differs, is at
# most 1 MiB over glibc's. It caught the medium size tier taking whole
# batches (+8.5 MiB for pyenv's 3.11.7), then the per-class medium caches
# holding one written span of each class used once (+1.2 MiB); it read
# +0.85..1.05 MiB for pyenv's python until slabs and spans shared the
# hugepages of the small start (session 18), +0.73..0.8 MiB since, and
# +0.25..0.45 MiB for Debian's.
rss_kib() { "$@" -c 'import resource; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)'; }
median5() { printf '%s\n' "$@" | sort -n | sed -n 3p; }
pys=("$py")
other=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)   # past pyenv's shim
[[ -n $other && -x $other && $(realpath "$other") != $(realpath "$py") ]] && pys+=("$other")
lib=$(realpath "$HPM_LIB")
for p in "${pys[@]}"; do
  g=(); h=()
  for i in 1 2 3 4 5; do
    g+=("$(rss_kib "$p")")
    h+=("$(rss_kib env LD_PRELOAD="$lib" "$p")")
  done
  gm=$(median5 "${g[@]}"); hm=$(median5 "${h[@]}")
  if [[ $gm =~ ^[0-9]+$ && $hm =~ ^[0-9]+$ ]] && (( hm <= gm + 1024 )); then
    t_ok "$p -c pass: max RSS $hm KiB with hpmalloc, $gm KiB without (+$((hm - gm)) KiB)"
  else
    t_bad "$p -c pass: max RSS $hm KiB with hpmalloc, $gm KiB without (bound +1024 KiB)"
  fi
done
t_done
