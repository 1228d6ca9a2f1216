#!/usr/bin/env python3
"""peak_split.py: a program's peak RSS split into hpmalloc's heap and the rest.

Starts PROG ARGS (with LD_PRELOAD=LIB unless LIB is "glibc"), reads
/proc/PID/smaps every 5 ms while it runs, and prints the largest total
RSS it saw, with the part in THP-eligible mappings at that moment. Under
hpmalloc with THP (the default, HPM_PAGES=thp) those are the heap's
arenas, which it advises MADV_HUGEPAGE, so the split is the heap against
everything else (binary, libraries, stacks, a program's own mmaps such
as CPython's pymalloc arenas). Under an allocator that advises nothing
the eligible part is 0 and the total can be set against hpmalloc's
"other" part. The sampled peak is a lower bound of max RSS.

Usage: peak_split.py LIB PROG [ARGS...]
Example (docs/allocator.md, "Medium sizes"):
  bench/scripts/peak_split.py build/libhpmalloc.so /usr/bin/python3 bench/real/json_roundtrip.py 100000
"""
import os
import subprocess
import sys
import time


def sample(pid):
    """(total RSS KiB, RSS KiB of THP-eligible mappings)."""
    total = eligible = 0
    rss = 0
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if parts[0] == "Rss:":
                rss = int(parts[1])
                total += rss
            elif parts[0] == "THPeligible:" and parts[1] == "1":
                eligible += rss
    return total, eligible


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    lib, prog = sys.argv[1], sys.argv[2:]
    env = dict(os.environ)
    if lib != "glibc":
        env["LD_PRELOAD"] = os.path.abspath(lib)
    child = subprocess.Popen(prog, env=env, stdout=subprocess.DEVNULL)
    best = (0, 0)
    while child.poll() is None:
        try:
            s = sample(child.pid)
            if s[0] > best[0]:
                best = s
        except (OSError, ValueError, IndexError):
            pass   # the process ended between poll and read
        time.sleep(0.005)
    print("peak sampled RSS %d KiB: THP-eligible (hpmalloc's heap) %d KiB, other %d KiB (exit %d)"
          % (best[0], best[1], best[0] - best[1], child.returncode))


if __name__ == "__main__":
    main()
