#!/usr/bin/env python3
"""Random traces with extreme fields, through every command, under the sanitizer build.

    tools/hostile-sweep.py [--memplay PATH] [--cases N] [--seed S] [--keep DIR]

Writes N JSON Lines traces (default 100) of 5 to 300 events: allocations and frees that pair up,
kernels, copies, memsets, syncs, markers, host allocations, API calls and cache releases, whose
times, durations and sizes are drawn half of the time from round values and half from the edges
of what memplay takes (0, 2^52, 2^56, 2^61, 2^62 either way, a clock counted from 1970). Each
trace that imports is then replayed under every model with and without the time model, on the
recorded device, another one and with recorded copy times, shown at its peak and at 1 ms, told
about (`info`), drawn (SVG, HTML), exported (Perfetto, CSV, JSON Lines), compared under three
policies and put through one bundled what-if scenario. A finding is a signal, an exit status
other than 0, 1, 2 or 3, or a sanitizer report; its trace is copied into DIR (default
./hostile-sweep-findings). Prints one line per finding and a summary; exits 1 when anything was
found. Run it on the ASan/UBSan build (build-asan, the default): the release build does not
report undefined behaviour. Results of each run go to docs/security.md.
"""
import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EDGES = [-1, 0, 1, 1000, 1 << 40, 4400000000000000, 1 << 52, (1 << 56) - 1, 1 << 56, (1 << 61) - 1, 1 << 61,
         -(1 << 61), -(1 << 61) - 1, 1 << 62, -(1 << 62), 1795000000000000000]
ROUND = [0, 1, 1000, 50000, 1 << 20, 1 << 30]
KINDS = ["alloc", "free", "kernel", "memcpy", "memset", "sync", "marker", "api", "host_alloc", "host_free",
         "empty_cache"]


def trace(rng, n):
    """A trace of n events, its allocations paired with frees, as JSON Lines."""
    mild = rng.random() < 0.5

    def pick(values):
        if mild and rng.random() >= 0.1:
            return rng.choice(ROUND)
        return rng.choice(values)

    live, host, lines = [], [], [{"memplay": 1, "name": "t", "device_name": "H100"}]
    for i in range(n):
        kind = rng.choice(KINDS)
        if kind == "free" and not live:
            kind = "alloc"
        if kind == "host_free" and not host:
            kind = "host_alloc"
        ts = pick(EDGES)
        ev = {"kind": kind, "ts": i * 1000 + ts if mild else ts, "stream": rng.choice([0, 1, 7, -1]),
              "size": rng.choice([512, 1 << 20, 1 << 40])}
        for field in ("dur", "dev_ts", "api_dur"):
            if rng.random() < 0.5:
                ev[field] = pick([v for v in EDGES if v >= 0])
        if kind == "alloc":
            ev["addr"] = 1 + max(live, default=0)
            live.append(ev["addr"])
        elif kind == "free":
            ev["addr"] = live.pop(rng.randrange(len(live)))
        elif kind == "host_alloc":
            ev["addr"] = 1000 + i
            ev["mem"] = rng.choice(["pinned", "pageable"])
            host.append(ev["addr"])
        elif kind == "host_free":
            ev["addr"] = host.pop(rng.randrange(len(host)))
        elif kind == "memcpy":
            ev["dir"] = rng.choice(["h2d", "d2h", "d2d", "h2h", "p2p"])
            ev["mem"] = rng.choice(["pinned", "pageable"])
        elif kind == "marker":
            ev["flags"] = rng.choice([["step_begin"], ["step_end"], ["step_begin", "step_end"]])
        lines.append(ev)
    return "".join(json.dumps(line) + "\n" for line in lines)


def commands(work, scripts, rng):
    """The commands each imported trace goes through."""
    out = [["replay", "t", "--no-save", "--json", "--device", "H100"],
           ["replay", "t", "--no-save", "--device", "A100-80GB"],
           ["replay", "t", "--no-save", "--device", "L4", "--timing", "copies=recorded,kernel_scale=3"],
           ["replay", "t", "--no-save", "--allocator", "torch", "--no-time", "--at", "peak"],
           ["replay", "t", "--no-save", "--allocator", "bfc", "--no-time", "--at", "1ms"],
           ["info", "t", "--json"],
           ["plot", "t", "-o", os.path.join(work, "p.svg")],
           ["plot", "t", "-o", os.path.join(work, "p.html"), "--at", "peak"],
           ["export", "t", "--format", "perfetto", "-o", os.path.join(work, "e.json")],
           ["export", "t", "--format", "csv", "-o", os.path.join(work, "e.csv")],
           ["export", "t", "--format", "jsonl", "-o", os.path.join(work, "e.jsonl")],
           ["compare", "t", "--policy", "torch", "--policy", "async", "--policy", "cuda"]]
    for spec in ("ideal", "cuda", "async", "torch:expandable_segments:True"):
        out.append(["replay", "t", "--no-save", "--allocator", spec])
    if scripts:
        out.append(["whatif", "t", os.path.join(SRC, "scripts", rng.choice(scripts)), "--no-save"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memplay", default=os.path.join(SRC, "build-asan", "memplay"))
    ap.add_argument("--cases", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default="hostile-sweep-findings")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    scripts = sorted(f for f in os.listdir(os.path.join(SRC, "scripts")) if f.endswith(".lua"))
    env = dict(os.environ, MEMPLAY_SCRIPTS=os.path.join(SRC, "scripts"))
    imported = runs = 0
    findings = []
    statuses = {}
    with tempfile.TemporaryDirectory(prefix="memplay-sweep.") as work:
        for case in range(a.cases):
            path, db = os.path.join(work, "t.jsonl"), os.path.join(work, "s%d.db" % case)
            with open(path, "w") as f:
                f.write(trace(rng, rng.choice([5, 40, 300])))
            r = subprocess.run([a.memplay, "--db", db, "import", path], capture_output=True, text=True, env=env)
            problems = []
            if r.returncode not in (0, 1) or "runtime error" in r.stderr or "Sanitizer" in r.stderr:
                problems.append(("import", r))
            elif r.returncode == 0:
                imported += 1
                for cmd in commands(work, scripts, rng):
                    r = subprocess.run([a.memplay, "--db", db] + cmd, capture_output=True, text=True, env=env,
                                       timeout=600)
                    runs += 1
                    statuses[r.returncode] = statuses.get(r.returncode, 0) + 1
                    if r.returncode not in (0, 1, 2, 3) or "runtime error" in r.stderr or "Sanitizer" in r.stderr:
                        problems.append((" ".join(cmd[:2] + cmd[2:5]), r))
            for what, r in problems:
                os.makedirs(a.keep, exist_ok=True)
                kept = os.path.join(a.keep, "case%d-seed%d.jsonl" % (case, a.seed))
                shutil.copy(path, kept)
                last = (r.stderr.strip().splitlines() or [""])[-1][:300]
                findings.append(what)
                print("finding: case %d (%s): %s: exit %d: %s" % (case, kept, what, r.returncode, last))
            for name in os.listdir(work):
                if name.startswith("s%d.db" % case):
                    os.remove(os.path.join(work, name))
    print("cases %d (seed %d), imported %d, commands run %d, exit statuses %s, findings %d"
          % (a.cases, a.seed, imported, runs, dict(sorted(statuses.items())), len(findings)))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
