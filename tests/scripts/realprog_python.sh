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
t_done
