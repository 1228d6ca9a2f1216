#!/usr/bin/env python3
"""rss_by_mapping.py: where a running program's RSS lies, by mapping.

Starts PROG ARGS (with LD_PRELOAD=LIB unless LIB is "glibc"), stops it
with SIGSTOP after SECONDS, sums Rss from /proc/PID/smaps by kind of
mapping, and resumes it. Kinds: "stack" (an 8 MiB read-write mapping
right behind a no-access guard, as glibc makes thread stacks), "anon 2M+"
(anonymous mappings of 2 MiB or more: hpmalloc's arenas, jemalloc's
chunks), "anon" (smaller ones), and each file by name. For the stacks it
also reads each one's deepest non-zero word (/proc/PID/mem), so the depth
a thread's calls reached is known (the kernel zero-fills untouched pages).
Needs root or ptrace rights over the child.

Usage: rss_by_mapping.py LIB SECONDS PROG [ARGS...]
Example (docs/bench.md, larson's RSS):
  bench/scripts/rss_by_mapping.py build/libhpmalloc.so 4.5 build/bench/larson --threads 2 --seconds 5
"""
import collections
import os
import signal
import subprocess
import sys
import time

STACK_BYTES = 8 << 20


def mappings(pid):
    """(start, end, perms, name, rss_kb) for each mapping."""
    out, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            parts = line.split()
            if "-" in parts[0] and ":" not in parts[0]:
                start, end = (int(x, 16) for x in parts[0].split("-"))
                cur = [start, end, parts[1], parts[5] if len(parts) > 5 else "", 0]
                out.append(cur)
            elif parts[0] == "Rss:":
                cur[4] = int(parts[1])
    return out


def kind_of(m, prev):
    start, end, perms, name, _ = m
    if name:
        return os.path.basename(name) if not name.startswith("[") else name
    if end - start == STACK_BYTES and prev and prev[1] == start and prev[2] == "---p":
        return "stack"
    return "anon 2M+" if end - start >= 2 << 20 else "anon"


def stack_depth(pid, start, end):
    """Bytes from the top of a stack mapping to its deepest non-zero word."""
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for page in range(start, end, 4096):
            try:
                mem.seek(page)
                data = mem.read(4096)
            except OSError:
                continue
            for off in range(0, len(data), 8):
                if data[off:off + 8] != bytes(8):
                    return end - (page + off)
    return 0


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    lib, seconds, prog = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    env = dict(os.environ)
    if lib != "glibc":
        env["LD_PRELOAD"] = os.path.abspath(lib)
    child = subprocess.Popen(prog, env=env, stdout=subprocess.PIPE, text=True)
    time.sleep(seconds)
    os.kill(child.pid, signal.SIGSTOP)
    try:
        maps = mappings(child.pid)
        rss, count, depths, prev = collections.Counter(), collections.Counter(), [], None
        for m in maps:
            k = kind_of(m, prev)
            rss[k] += m[4]
            count[k] += 1
            if k == "stack" and m[4]:
                depths.append(stack_depth(child.pid, m[0], m[1]))
            prev = m
    finally:
        os.kill(child.pid, signal.SIGCONT)
    out = child.communicate()[0]
    print(f"total {sum(rss.values())} KB")
    for k, v in rss.most_common(10):
        print(f"  {k}: {v} KB in {count[k]} mappings ({v / count[k]:.1f} KB each)")
    if depths:
        depths.sort()
        print(f"  stack depth (bytes from the top): median {depths[len(depths) // 2]}, max {depths[-1]}, "
              f"{len(depths)} stacks")
    for line in out.splitlines():
        if line.startswith("RESULT"):
            print(line)


if __name__ == "__main__":
    main()
