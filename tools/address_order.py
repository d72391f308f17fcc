#!/usr/bin/env python3
"""Which way real drivers handed out segment addresses, against the simulated device's two rules.

    tools/address_order.py [--memplay BUILD/memplay] [--traces DIR]

For every sequence of real segment addresses at hand it prints how many pairs of segments each rule
puts in the driver's order (docs/accuracy.md, "The simulated driver's addresses"):
  - the GPU's own device calls of a replay (docs/measurements/*/capacity/*.txt, raw/calls_*.txt.gz:
    the "gpu" rows);
  - the cudaMallocs of 2 MiB or more of PyTorch jobs recorded with `memplay record`
    (docs/measurements/*/raw/torch_*.jsonl.gz, h200_jobs/);
  - the segment_alloc and segment_free actions of PyTorch snapshots (DIR/pytorch/*.pickle, DIR
    defaulting to $MEMPLAY_TRACES), read by `memplay import` into a scratch store, never unpickled
    here.
"down" is sim/device_sim.c's SIM_VA_DOWN: a request takes the lowest free range that holds it, else a
new slab (the request rounded up to 32 MiB) below all others; a free gives its range back. "up"
hands addresses out upwards, never again. "votes" is what `--address-order auto` decides from the
recorded segments (sim_va_votes_order): up, down, or - (they do not tell).
"""
import argparse
import glob
import gzip
import json
import os
import sqlite3
import subprocess
import sys
import tempfile

MiB = 1 << 20
SLAB = 32 * MiB
PAGE = 2 * MiB
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def rule_down(seq):
    """Addresses the down rule gives each allocation of seq [(is_alloc, size, real_addr)]."""
    ranges, live, low, out = [], {}, 0, []  # ranges: [addr, size] in address order
    for is_alloc, size, real in seq:
        if is_alloc:
            need = (size + PAGE - 1) // PAGE * PAGE
            hit = next((r for r in ranges if r[1] >= need), None)
            if hit:
                addr = hit[0]
                hit[0] += need
                hit[1] -= need
                if not hit[1]:
                    ranges.remove(hit)
            else:
                slab = (need + SLAB - 1) // SLAB * SLAB
                low -= slab
                addr = low
                if slab > need:
                    give(ranges, low + need, slab - need)
            live[real] = (addr, need)
            out.append((addr, real))
        elif real in live:
            give(ranges, *live.pop(real))
    return out


def give(ranges, addr, size):
    ranges.append([addr, size])
    ranges.sort()
    merged = []
    for r in ranges:
        if merged and merged[-1][0] + merged[-1][1] == r[0]:
            merged[-1][1] += r[1]
        else:
            merged.append(r)
    ranges[:] = merged


def rule_up(seq):
    out, top = [], 0
    for is_alloc, size, real in seq:
        if is_alloc:
            out.append((top, real))
            top += (size + PAGE - 1) // PAGE * PAGE
    return out


def same_order(pairs):
    """The share of pairs of allocations the rule orders as the driver did, in %."""
    n, same, total = len(pairs), 0, 0
    for i in range(n):
        for j in range(i + 1, n):
            total += 1
            same += (pairs[i][0] < pairs[j][0]) == (pairs[i][1] < pairs[j][1])
    return 100.0 * same / total if total else float("nan")


def votes(seq):
    lo = hi = None
    up = down = 0
    for is_alloc, _, addr in seq:
        if lo is not None and is_alloc:
            up += addr > hi
            down += addr < lo
        lo = addr if lo is None else min(lo, addr)
        hi = addr if hi is None else max(hi, addr)
    if up + down < 3:
        return "-"
    return "down" if down >= 2 * up else "up" if up >= 2 * down else "-"


def from_calls(path):
    opener = gzip.open if path.endswith(".gz") else open
    seq = []
    with opener(path, "rt") as f:
        for line in f:
            w = line.split()
            if len(w) > 7 and w[0] == "gpu" and w[7] == "ok" and w[3] in ("malloc", "free") and int(w[4]) >= PAGE:
                seq.append((w[3] == "malloc", int(w[4]), int(w[5], 16)))
    return seq


def from_recording(path):
    seq, sizes = [], {}
    with gzip.open(path, "rt") as f:
        for line in f:
            e = json.loads(line)
            if e.get("kind") == "alloc" and e.get("size", 0) >= PAGE and e.get("mem", "device") == "device":
                sizes[e["addr"]] = e["size"]
                seq.append((True, e["size"], e["addr"]))
            elif e.get("kind") == "free" and e.get("addr") in sizes:
                seq.append((False, sizes.pop(e["addr"]), e["addr"]))
    return seq


def from_snapshots(memplay, traces):
    tmp = tempfile.mkdtemp()
    db = os.path.join(tmp, "store.db")
    out = []
    for path in sorted(glob.glob(os.path.join(traces, "pytorch", "*.pickle"))):
        name = os.path.basename(path).split(".")[0]
        subprocess.run([memplay, "--db", db, "import", path, "--name", name], check=True, stdout=subprocess.DEVNULL)
        con = sqlite3.connect(db)
        rows = con.execute("SELECT r.action = 'segment_alloc', r.size, r.addr FROM recorded r JOIN traces t "
                           "ON t.id = r.trace_id WHERE t.name = ? AND r.action IN ('segment_alloc', 'segment_free') "
                           "ORDER BY r.seq", (name,)).fetchall()
        con.close()
        if any(a for a, _, _ in rows):
            out.append((name, [(bool(a), s, addr) for a, s, addr in rows]))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memplay", default=os.path.join(ROOT, "build", "memplay"))
    ap.add_argument("--traces", default=os.environ.get("MEMPLAY_TRACES"))
    a = ap.parse_args()
    m = os.path.join(ROOT, "docs", "measurements")
    sources = [(os.path.relpath(p, ROOT), from_calls(p))
               for p in sorted(glob.glob(os.path.join(m, "*", "capacity", "*.txt")) +
                               glob.glob(os.path.join(m, "*", "raw", "calls_*.txt.gz")))]
    sources += [(os.path.relpath(p, ROOT), from_recording(p))
                for p in sorted(glob.glob(os.path.join(m, "*", "raw", "torch_*.jsonl.gz")) +
                                glob.glob(os.path.join(m, "*", "h200_jobs", "torch_*.jsonl.gz")))]
    if a.traces and os.path.isdir(a.traces):
        sources += from_snapshots(a.memplay, a.traces)
    else:
        print("(no snapshots: --traces DIR or MEMPLAY_TRACES)", file=sys.stderr)
    print("| source | segments | frees | same order, down | same order, up | votes |")
    print("|---|---:|---:|---:|---:|---|")
    for name, seq in sources:
        allocs = sum(1 for s in seq if s[0])
        if allocs < 2:
            continue
        print("| %s | %d | %d | %.1f%% | %.1f%% | %s |" % (name, allocs, len(seq) - allocs, same_order(rule_down(seq)),
                                                          same_order(rule_up(seq)), votes(seq)))


if __name__ == "__main__":
    main()
