"""heap_census_gdb.py: hpmalloc's pageheap and slabs in a stopped process, read by gdb.

Run inside gdb attached to a program preloaded with a libhpmalloc.so
that has its symbols (`make` builds it with -g):
  gdb -q -batch -iex "set libthread-db-search-path /nonexistent" \
      -p PID -x bench/scripts/heap_census_gdb.py
(rss_by_mapping.py --census does this for a run it stops). Prints the
hugepages by state, the pages in use and free inside the active ones
(and each one's pages in use, longest free run, set and home; the free
runs by length), the other spans
by kind (medium, large) and state (live, or free in a span cache), then the
small-object slabs by size, by heap list and by owner: how many, their
pages, their capacity and the bytes of their blocks in use. A slab that is
current for its class ("CURRENT") has its free blocks in its owner's hand,
so its count of live blocks is not kept (internal.h, hpm_slab_used): only
its capacity is shown. Reads memory only; calls nothing in the process.
The first line says whether a thread held the pageheap lock at the stop:
then a span may be half placed or half freed and the page counts need not
agree (rss_by_mapping.py --census stops the program again until it is free).
"""
import collections
import struct

import gdb

PAGE_SHIFT, PAGES_PER_HP, GIB_SHIFT = 12, 512, 30
HP_STATES = {0: "unused", 1: "released", 2: "cached", 3: "active"}
LISTS = ["none", "CURRENT", "AVAIL", "FULL", "ABANDONED", "EMPTY", "ABANDONED_FULL"]
KINDS = {2: "medium", 3: "large"}
SETS = {0: "s", 1: "o", 2: "y"}     # the filler set: slabs, other spans, hybrid
SPAN_SLAB, LIST_CURRENT, LIST_FULL, LIST_EMPTY = 1, 1, 3, 5
FULL_THRESHOLD = 65535   # hpm_list_threshold(LIST_FULL)


def map_entries(l1, hp_addr):
    """The page map's 512 entries for the hugepage at hp_addr (as
    hpm_span_of_l1 finds them), read in one piece: span addresses or 0."""
    chunk = int(l1[hp_addr >> GIB_SHIFT])
    if chunk == 0:
        return [0] * PAGES_PER_HP
    chunk_pages = 1 << (GIB_SHIFT - PAGE_SHIFT)
    first = chunk + ((hp_addr >> PAGE_SHIFT) & (chunk_pages - 1)) * 8
    raw = gdb.selected_inferior().read_memory(first, PAGES_PER_HP * 8)
    return list(struct.unpack("<%dQ" % PAGES_PER_HP, bytes(raw)))


def slab_used_blocks(s, lst):
    """Live blocks of a slab not in a hand (hpm_slab_used); None if unknown."""
    if lst == LIST_CURRENT:
        return None
    if lst == LIST_EMPTY:
        return 0
    return int(s["credit"]) + (FULL_THRESHOLD if lst == LIST_FULL else 1)


def heaps_live_and_hands():
    """The sum of every heap's used_bytes (live bytes, as hpm_stats counts
    them), and the free blocks in the heaps' hands (each hand a list linked
    through the blocks' first words): their count and bytes."""
    inferior = gdb.selected_inferior()
    classes = int(gdb.parse_and_eval("sizeof(_hpm_classes) / sizeof(_hpm_classes[0])"))
    block_bytes = [int(gdb.parse_and_eval("_hpm_class_block_bytes[%d]" % c)) for c in range(classes)]
    live = blocks = free_bytes = 0
    h = gdb.parse_and_eval("heaps_all")
    while int(h) != 0:
        live += int(h["used_bytes"])
        for c in range(classes):
            p = int(h["hand"][c])
            while p != 0:
                blocks += 1
                free_bytes += block_bytes[c]
                p = struct.unpack("<Q", bytes(inferior.read_memory(p, 8)))[0]
        h = h["next_all"]
    return live, free_bytes, blocks


def main():
    span_ptr = gdb.lookup_type("hpm_span_t").pointer()
    ph = gdb.parse_and_eval("_hpm_ph")
    l1 = gdb.parse_and_eval("_hpm_l1")
    top = int(ph["top_hp"])
    print("pageheap lock: %s" % ("held" if int(ph["lock"]["__data"]["__lock"]) else "free"))
    states, used_active, free_active = collections.Counter(), 0, 0
    by_list = collections.defaultdict(lambda: [0, 0, 0, 0])    # slabs, pages, capacity bytes, used bytes
    by_owner = collections.defaultdict(lambda: [0, 0])         # slabs, pages
    other_pages = 0
    others = collections.defaultdict(lambda: [0, 0])           # (kind, cached) -> spans, pages
    cached_sizes = collections.Counter()                       # pages of a cached medium span -> spans
    slab_sizes = collections.Counter()   # slab pages -> slabs
    holes = collections.Counter()        # length of a run of free pages in an active hugepage (64: 64 or more) -> runs
    hole_pages = collections.Counter()   # the same -> free pages in those runs
    fill = []                            # "pages in use/longest free run, set, home" of each active hugepage
    homes = {}                           # a home heap's address -> its number in the census (h1, h2, ...)
    for i in range(top):
        hp = ph["hps"][i]
        state = int(hp["state"])
        states[HP_STATES.get(state, str(state))] += 1
        if state != 3:
            continue
        used_active += int(hp["used_pages"])
        home = int(hp["home"])
        if home and home not in homes:
            homes[home] = len(homes) + 1
        fill.append("%d/%d%s%s" % (int(hp["used_pages"]), int(hp["longest_free_pages"]),
                                   SETS.get(int(hp["set"]), "?"), "h%d" % homes[home] if home else ""))
        free_active += PAGES_PER_HP - int(hp["used_pages"])
        base, page = int(hp["addr"]), 0
        entries = map_entries(l1, base)
        run = 0
        for e in entries + [1]:
            if e == 0:
                run += 1
            elif run:
                holes[min(run, 64)] += 1
                hole_pages[min(run, 64)] += run
                run = 0
        while page < PAGES_PER_HP:
            addr = base + (page << PAGE_SHIFT)
            if entries[page] == 0:
                page += 1
                continue
            s = gdb.Value(entries[page]).cast(span_ptr).dereference()
            start, n = int(s["start"]), max(int(s["n_pages"]), 1)
            if start != addr:   # a span that began in an earlier hugepage, or a page after its start
                page += 1
                continue
            if int(s["kind"]) != SPAN_SLAB:
                other_pages += n
                o = others[(KINDS.get(int(s["kind"]), str(int(s["kind"]))), "cached" if int(s["cached"]) else "live")]
                o[0] += 1
                o[1] += n
                if int(s["cached"]):
                    cached_sizes[n] += 1
                page += n
                continue
            lst = int(s["list"])
            slab_sizes[n] += 1
            block = int(s["block_bytes"])
            row = by_list[LISTS[lst] if lst < len(LISTS) else str(lst)]
            row[0] += 1
            row[1] += n
            row[2] += int(s["capacity"]) * block
            used = slab_used_blocks(s, lst)
            row[3] += (used or 0) * block
            owner = int(s["owner"])
            o = by_owner["abandoned" if owner == 0 else "heap %#x" % owner]
            o[0] += 1
            o[1] += n
            page += n
    print("hugepages: " + ", ".join("%s %d" % kv for kv in sorted(states.items())))
    print("active hugepages: %d pages in use, %d free (%.1f MiB)" % (used_active, free_active, free_active / 256))
    print("active hugepages, pages in use/longest free run, then the set (s slabs, o other spans, y hybrid) and the home (h1, h2, ...: a thread heap's own): " + " ".join(fill))
    print("active hugepages' free runs by length (64: 64 or more): runs, pages: " +
          ", ".join("%d: %d, %d" % (n, c, hole_pages[n]) for n, c in sorted(holes.items())))
    print("spans other than slabs: %d pages" % other_pages)
    for (kind, state), (n, pages) in sorted(others.items()):
        print("  %s %s: %d spans, %d pages" % (kind, state, n, pages))
    if cached_sizes:
        print("  cached medium spans by pages: " + ", ".join("%d of %d" % (c, n) for n, c in sorted(cached_sizes.items())))
    print("slabs by size: " + ", ".join("%d of %d pages" % (c, n) for n, c in sorted(slab_sizes.items())))
    print("slabs by list: list, slabs, pages, capacity KiB, in use KiB (CURRENT: not kept)")
    for name, (n, pages, cap, used) in sorted(by_list.items()):
        print("  %-15s %5d %6d %8d %8s" % (name, n, pages, cap >> 10, "-" if name == "CURRENT" else used >> 10))
    live, hand_bytes, hand_blocks = heaps_live_and_hands()
    print("live bytes (sum of the heaps' used_bytes): %d KiB; free blocks in hands: %d, %d KiB" % (live >> 10, hand_blocks, hand_bytes >> 10))
    print("slabs by owner: owner, slabs, pages")
    for name, (n, pages) in sorted(by_owner.items(), key=lambda kv: -kv[1][1]):
        print("  %-20s %5d %6d" % (name, n, pages))


main()
