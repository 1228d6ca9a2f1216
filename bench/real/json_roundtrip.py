# json_roundtrip.py: a Python run for bench/real/realprog.c: a dict of N
# entries (lists, strings, small dicts) dumped to one JSON string, parsed
# back, compared with the original and sorted. Objects of 512 bytes or
# less come from Python's own pymalloc; the dict tables, lists and long
# strings come from malloc, as in any CPython program.
# Usage: python3 json_roundtrip.py N
# Prints: "ok <N> <sum of the first list items>", or "mismatch".
import json
import sys

n = int(sys.argv[1])
d = {}
for i in range(n):
    d["k%d" % i] = [i, str(i) * 3, {"x": i}]
s = json.dumps(d)
e = json.loads(s)
keys = sorted(e, key=lambda k: e[k][1])
if e != d or len(keys) != n:
    print("mismatch")
else:
    print("ok", len(e), sum(v[0] for v in e.values()))
