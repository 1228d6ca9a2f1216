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
Needs root or ptrace rights over the child. With --census (hpmalloc
only, needs gdb) it also prints the pageheap's hugepages and the slabs by
list and owner while the program is stopped (heap_census_gdb.py).

Usage: rss_by_mapping.py [--census] LIB SECONDS PROG [ARGS...]
Example (docs/bench.md, larson's RSS):
  bench/scripts/rss_by_mapping.py build/libhpmalloc.so 4.5 build/bench/larson --threads 2 --seconds 5
"""
import collections
import os
import signal
import struct
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


def lowest_present_page(pid, start, end):
    """The lowest page of [start, end) that is in memory or swap
    (/proc/PID/pagemap: bit 63 present, bit 62 swapped), or None."""
    n = (end - start) // 4096
    with open(f"/proc/{pid}/pagemap", "rb") as pm:
        pm.seek(start // 4096 * 8)
        entries = struct.unpack(f"<{n}Q", pm.read(n * 8))
    for i, e in enumerate(entries):
        if e >> 62:
            return start + i * 4096
    return None


def stack_depth(pid, start, end):
    """Bytes from the top of a stack mapping to its deepest non-zero word.
    Only pages from the lowest one in memory up are read (pagemap):
    reading 8 MiB of zeros per thread took minutes for 800 threads."""
    first = lowest_present_page(pid, start, end)
    if first is None:
        return 0
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for page in range(first, end, 4096):
            try:
                mem.seek(page)
                data = mem.read(4096)
            except OSError:
                continue
            for off in range(0, len(data), 8):
                if data[off:off + 8] != bytes(8):
                    return end - (page + off)
    return 0


def census(pid):
    """hpmalloc's pageheap and slabs, read by gdb from the stopped process.
    A stop that finds the pageheap lock held (a span half placed or half
    freed) is tried again: the program runs 10 ms and stops again, up to
    10 times."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "heap_census_gdb.py")
    # no thread library debugging, debuginfod or auto-loaded scripts: with
    # them gdb spent 25 s on a larson with 160 threads, without them 0.3 s
    quiet = ["-iex", "set debuginfod enabled off", "-iex", "set libthread-db-search-path /nonexistent",
             "-iex", "set auto-load off"]
    keep = ("pageheap lock", "hugepages", "active", "spans", "slabs", "  ", "Traceback", "Python", "gdb.")
    for _ in range(10):
        run = subprocess.run(["gdb", "-q", "-batch", *quiet, "-p", str(pid), "-x", script],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        lines = [line for line in run.stdout.splitlines() if line.startswith(keep)]
        if "pageheap lock: held" not in lines:
            return lines
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.01)
        os.kill(pid, signal.SIGSTOP)
    return lines


def main():
    args = sys.argv[1:]
    want_census = bool(args) and args[0] == "--census"
    if want_census:
        args = args[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    lib, seconds, prog = args[0], float(args[1]), args[2:]
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
        heap_lines = census(child.pid) if want_census else []
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
    for line in heap_lines:
        print(line)
    for line in out.splitlines():
        if line.startswith("RESULT"):
            print(line)


if __name__ == "__main__":
    main()
