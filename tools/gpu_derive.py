#!/usr/bin/env python3
"""gpu_derive.py: the tables of docs/accuracy.md ("Real GPU: predicted against measured") from one run
of tools/gpu_checks.sh.

    python3 tools/gpu_derive.py MEASUREMENTS OUT [MEMPLAY]

MEASUREMENTS is the folder the measurements are kept in (docs/measurements/GPU-DATE): the step
outputs are read from its raw/ (the same files as in OUT) and the tables written to its tables/,
with tables/commands.txt listing every memplay command and SQL query run. OUT is the folder
tools/gpu_checks.sh wrote (its gpu.db is read from a copy, never changed); MEMPLAY the memplay
binary (default build/memplay) used for the simulated replays and what-if scenarios the
comparisons need. A table whose steps the run did not make is left out.
"""
import csv
import json
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAW = TABLES = None  # MEASUREMENTS/raw and MEASUREMENTS/tables, set by main()
JOBS = [(b, p) for b in (8, 16) for p in ("fp32", "bf16")]
MiB = 1 << 20
log = []


def pct(value, ref):
    return None if not ref else (value - ref) / ref * 100.0


def fmt(v):
    if isinstance(v, float):
        return str(int(v)) if v == int(v) and abs(v) < 1e18 else "%.10g" % v
    return "" if v is None else v


def write_csv(name, header, rows):
    with open(os.path.join(TABLES, name), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for r in rows:
            w.writerow([fmt(x) for x in r])


def raw(name):
    with open(os.path.join(RAW, name)) as f:
        return json.load(f)


def has_raw(name):
    return os.path.exists(os.path.join(RAW, name))


def gpu_model(cal):
    """The GPU's model, from the calibrated profile's device name: "NVIDIA H100 80GB HBM3" -> "h100"."""
    m = re.search(r"\b([A-Z]\d{2,3})\b", cal["match"])
    return m.group(1).lower() if m else "gpu"


def shown(arg):
    """A command's argument as logged: a temporary file by its name alone."""
    return "TMP/" + os.path.basename(arg) if os.path.isabs(arg) else arg


class Memplay:
    def __init__(self, exe, db):
        self.exe, self.db = exe, db

    def json(self, *args):
        cmd = [self.exe, "--db", self.db] + list(args)
        log.append("memplay --db COPY_OF_gpu.db " + " ".join(shown(a) for a in args))
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stderr))
        return json.loads(p.stdout)

    def run(self, *args):
        cmd = [self.exe, "--db", self.db] + list(args)
        log.append("memplay --db COPY_OF_gpu.db " + " ".join(shown(a) for a in args))
        subprocess.run(cmd, check=True, capture_output=True)


def q(db, sql, *params):
    log.append("SQL: " + " ".join(sql.split()) + (" -- " + repr(params) if params else ""))
    return db.execute(sql, params).fetchall()


def backend_median(steps):
    """The backend's median step (docs/gpu.md): the first step left out when there are three or more."""
    s = steps[1:] if len(steps) >= 3 else steps
    return statistics.median(s) if s else None


# ---- a. calibration ---------------------------------------------------------------------------------

def calibration(mp_fresh):
    cal = raw("calibrate.out")["params"]
    c = cal["calibration"]
    h200 = mp_fresh.json("devices", "H200", "--json")
    h100 = mp_fresh.json("devices", "H100", "--json")
    fields = [
        ("total_memory", "B", "cudaGetDeviceProperties totalGlobalMem"),
        ("mem_bw", "B/s", "2 x d2d_bw"),
        ("h2d_pinned_bw", "B/s", "line through 9 copy sizes 4 KiB-256 MiB"),
        ("d2h_pinned_bw", "B/s", "line through 9 copy sizes"),
        ("h2d_pageable_bw", "B/s", "line through 9 copy sizes"),
        ("d2h_pageable_bw", "B/s", "line through 9 copy sizes"),
        ("d2d_bw", "B/s", "line through 9 copy sizes"),
        ("p2p_bw", "B/s", "not measured: set to h2d_pinned_bw"),
        ("host_copy_bw", "B/s", "host-to-host cudaMemcpy"),
        ("copy_engines", "count", "opposite-direction copies at once: speed-up %.3f (device reports %d)"
         % (c["bidir_speedup"], c["copy_engines_reported"])),
        ("copy_latency", "ns", "h2d pinned line's latency less sync_latency"),
        ("staging_buffer", "B", "not measured: 4 MiB"),
        ("launch_overhead", "ns", "host time of one empty-kernel launch"),
        ("launch_latency", "ns", "one kernel to completion (%.3f us) less launch and sync" % c["single_launch_us"]),
        ("launch_queue", "count", "launches before the first that waited (%d tried)" % c["launch_queue_tried"]),
        ("sync_latency", "ns", "synchronization of an idle stream"),
        ("malloc_base", "ns", "line through cudaMalloc of 512 B-4 GiB"),
        ("malloc_per_gib", "ns/GiB", "same line"),
        ("free_base", "ns", "line through cudaFree of 512 B-4 GiB"),
        ("free_per_gib", "ns/GiB", "same line"),
        ("map_base", "ns", "line through cuMemCreate+cuMemMap+cuMemSetAccess of 2 MiB-1 GiB"),
        ("map_per_gib", "ns/GiB", "same line"),
        ("unmap_base", "ns", "line through cuMemUnmap+cuMemRelease of 2 MiB-1 GiB"),
        ("unmap_per_gib", "ns/GiB", "same line"),
        ("pin_base", "ns", "line through cudaMallocHost of 4 KiB-256 MiB"),
        ("pin_per_gib", "ns/GiB", "same line"),
        ("unpin_base", "ns", "line through cudaFreeHost of 4 KiB-256 MiB"),
        ("unpin_per_gib", "ns/GiB", "same line"),
    ]
    rows = []
    for k, unit, src in fields:
        v = cal[k]
        rows.append([k, unit, v, h200[k], pct(v, h200[k]), h100[k], pct(v, h100[k]), src])
    write_csv("calibration.csv",
              ["field", "unit", "calibrated_" + gpu_model(cal), "builtin_h200", "calibrated_vs_builtin_h200_pct", "builtin_h100",
               "calibrated_vs_builtin_h100_pct", "computed_from"], rows)

    # every measured point, and the line through them recomputed (ordinary least squares)
    def ols(xs, ys):
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        return my - b * mx, b

    pts, fits = [], []
    for kind, v in c["copies"].items():
        for p in v["points"]:
            pts.append(["copy_" + kind, p["size"], p["us"], "", p["trials"]])
        a, b = ols([p["size"] for p in v["points"]], [p["us"] for p in v["points"]])
        small = v["points"][0]
        fits.append(["copy_" + kind, a, 1e-3 / b, "GB/s", v["latency_us"], v["gbps"], small["us"]])
    for key, label in (("malloc", "cudaMalloc/cudaFree"), ("map", "map/unmap"), ("malloc_host", "cudaMallocHost/cudaFreeHost")):
        for p in c[key]:
            pts.append([key, p["size"], p["alloc_us"], p["free_us"], p["trials"]])
        xs = [p["size"] / 2 ** 30 for p in c[key]]
        for f, name in (("alloc_us", "alloc"), ("free_us", "free")):
            a, b = ols(xs, [p[f] for p in c[key]])
            fits.append(["%s_%s" % (key, name), a, b, "us/GiB", "", "", c[key][0][f]])
    write_csv("calibration_points.csv", ["kind", "size_B", "us (copy, alloc)", "free_us", "trials"], pts)
    write_csv("calibration_lines.csv",
              ["kind", "intercept_us", "slope", "slope_unit", "stored_latency_us", "stored_gbps", "smallest_point_us"], fits)
    return cal, h200


# ---- b. GPU replays ---------------------------------------------------------------------------------

def gpu_replays(db):
    """Every GPU replay; returns the first of each (trace, allocator), and all of them in order."""
    rows = []
    runs, every = {}, []
    for rid, trace, alloc, res in q(db, "SELECT id, trace_name, allocator, result FROM runs WHERE backend = 'cuda' ORDER BY id"):
        r = json.loads(res)
        fmt_ = q(db, "SELECT source_format FROM traces WHERE name = ?", trace)[0][0]
        p, m, rec = r["predicted"], r["measured"], r["recorded"]
        rm, mm = backend_median(rec["step_s"]), backend_median(m["step_s"])
        e = r["error_pct"]
        # the stored errors are the backend's: check that the table computes the same
        if "device_peak" in e:
            assert abs(pct(m["device_peak_bytes"], p["device_peak_bytes"]) - e["device_peak"]) < 1e-6
        assert abs(pct(m["wall_s"], rec["wall_s"]) - e["wall_vs_recorded"]) < 1e-4
        if "step_vs_recorded" in e:
            assert abs(pct(mm, rm) - e["step_vs_recorded"]) < 1e-4
        kernels = m["kernels"]
        rows.append([rid, trace, fmt_, alloc, r["scale"], r["scale_fitted"],
                     p["device_peak_bytes"], m["device_peak_bytes"], pct(m["device_peak_bytes"], p["device_peak_bytes"]),
                     p["device_peak_event"], m["device_peak_event"],
                     p["at_trace_peak_bytes"], m["at_trace_peak_bytes"], pct(m["at_trace_peak_bytes"], p["at_trace_peak_bytes"]),
                     r["peak_reserved_bytes"], r["device_mallocs"], r["device_frees"],
                     rec["wall_s"], m["wall_s"], pct(m["wall_s"], rec["wall_s"]),
                     len(m["step_s"]), rm, mm, pct(mm, rm) if len(m["step_s"]) > 1 else None,
                     kernels, m["copies"], m["memsets"], m["syncs"], m["host_allocs"],
                     r.get("capacity_bytes"), m.get("paced", ""), p["ooms"], r["ooms"]])
        runs.setdefault((trace, alloc), r)
        every.append((trace, alloc, r))
    write_csv("gpu_replays.csv",
              ["run_id", "trace", "format", "allocator", "scale", "scale_fitted",
               "predicted_device_peak_B", "measured_device_peak_B", "device_peak_error_pct",
               "predicted_peak_event", "measured_peak_event",
               "predicted_at_trace_peak_B", "measured_at_trace_peak_B", "at_trace_peak_error_pct",
               "model_on_gpu_peak_reserved_B", "driver_allocs", "driver_frees",
               "recorded_wall_s", "measured_wall_s", "wall_error_pct",
               "steps", "recorded_median_step_s", "measured_median_step_s", "median_step_error_pct",
               "kernels", "copies", "memsets", "syncs", "host_allocs",
               "capacity_B", "paced", "predicted_ooms", "ooms_on_gpu"], rows)
    return runs, every


def async_rules(path, merge_at_once):
    """The async model's rules (sim/alloc_async.c) on a one-stream trace, re-implemented: sizes
    rounded to 512 B; best fit by (size, address) among free blocks; else a new piece of the
    smallest multiple of 32 MiB, which no block spans; at a synchronization, frees become free to
    every stream and empty pieces are released. A freed block waits ('pending') until the next
    synchronization; with merge_at_once it merges with every free neighbour at once (the model
    since 2026-11-27), without it only with pending neighbours (the model before). Returns the peak
    of the pieces' bytes."""
    G = 32 * MiB
    blocks, pieces, live = {}, {}, {}  # blocks: address -> [size, piece, state U/P/R]
    top = reserved = peak = 0

    def coalesce(a):
        keys = sorted(k for k in blocks if blocks[k][1] == blocks[a][1])
        i = keys.index(a)

        def ok(x, y):
            sx, sy = blocks[x][2], blocks[y][2]
            return "U" not in (sx, sy) and (merge_at_once or sx == sy)
        if i + 1 < len(keys) and a + blocks[a][0] == keys[i + 1] and ok(a, keys[i + 1]):
            n = keys[i + 1]
            blocks[a][0] += blocks.pop(n)[0]
        if i > 0 and keys[i - 1] + blocks[keys[i - 1]][0] == a and ok(keys[i - 1], a):
            v = blocks[keys[i - 1]]
            v[0] += blocks.pop(a)[0]

    with open(path) as f:
        events = [json.loads(x) for x in f][1:]
    for e in events:
        k = e.get("kind")
        if k == "alloc":
            rs = (e["size"] + 511) // 512 * 512
            fits = [(v[0], a) for a, v in blocks.items() if v[2] != "U" and v[0] >= rs]
            if not fits:
                need = (rs + G - 1) // G * G
                pieces[top] = need
                blocks[top] = [need, top, "R"]
                fits = [(need, top)]
                top += need
                reserved += need
                peak = max(peak, reserved)
            _, a = min(fits)
            v = blocks[a]
            if v[0] > rs:
                blocks[a + rs] = [v[0] - rs, v[1], v[2]]
            blocks[a] = [rs, v[1], "U"]
            live[e["addr"]] = a
        elif k == "free":
            a = live.pop(e["addr"])
            blocks[a][2] = "P"
            coalesce(a)
        elif k == "sync":
            for v in blocks.values():
                if v[2] == "P":
                    v[2] = "R"
            for a in sorted(blocks):
                if a in blocks and blocks[a][2] == "R":
                    coalesce(a)
            for a, size in list(pieces.items()):
                if a in blocks and blocks[a][0] == size and blocks[a][2] == "R":
                    del blocks[a], pieces[a]
                    reserved -= size
    return peak


def async_model(mp, runs):
    """The async model against the real pool on the sample, and the model with every free made
    reusable at once (a synchronization after every free)."""
    src = os.path.join(ROOT, "traces", "sample.jsonl")
    tmp = tempfile.mkdtemp()
    sf = os.path.join(tmp, "sample_sync_after_free.jsonl")
    with open(src) as f, open(sf, "w") as o:
        for line in f:
            o.write(line)
            e = json.loads(line)
            if e.get("kind") == "free":
                o.write(json.dumps({"kind": "sync", "ts": e["ts"], "stream": 0}) + "\n")
    log.append("traces/sample.jsonl with {\"kind\":\"sync\",\"stream\":0} written after every free -> sample_sync_after_free.jsonl")
    mp.run("import", sf, "--name", "sample_sync_after_free")
    base = mp.json("replay", "sample", "--allocator", "async", "--no-save", "--json")
    synced = mp.json("replay", "sample_sync_after_free", "--allocator", "async", "--no-save", "--json")
    shutil.rmtree(tmp)
    gpu = runs[("sample", "async")]
    meas_peak, meas_final = gpu["measured"]["device_peak_bytes"], gpu["final_reserved_bytes"]
    rows = [["async model (as shipped)", base["peak_reserved_bytes"], base["peak_reserved_bytes"] / MiB,
             base["final_reserved_bytes"] / MiB, meas_peak / MiB, pct(meas_peak, base["peak_reserved_bytes"]),
             meas_final / MiB],
            ["async model, a sync after every free", synced["peak_reserved_bytes"], synced["peak_reserved_bytes"] / MiB,
             synced["final_reserved_bytes"] / MiB, meas_peak / MiB, pct(meas_peak, synced["peak_reserved_bytes"]),
             meas_final / MiB]]
    for label, merge in (("the model's rules before 2026-11-27 re-implemented (gpu_derive.py async_rules): a free merging only with frees", False),
                         ("the same rules, a freed block merging with free neighbours at once (the model since)", True)):
        peak = async_rules(src, merge)
        rows.append([label, peak, peak / MiB, "", meas_peak / MiB, pct(meas_peak, peak), meas_final / MiB])
    write_csv("async_sample.csv",
              ["prediction", "peak_reserved_B", "peak_reserved_MiB", "final_reserved_MiB", "measured_pool_peak_MiB",
               "error_pct (measured-predicted)/predicted", "measured_final_reserved_MiB"], rows)


def niu_cuda_timeline(db, mp):
    """The cuda model's device memory against the GPU's, event by event (timeline windows), on niu."""
    mp.run("replay", "niu_ctx150_fwdbwd_fp32", "--allocator", "cuda")
    sim_id = q(db, "SELECT max(id) FROM runs")[0][0]
    gpu_id = q(db, "SELECT id FROM runs WHERE backend = 'cuda' AND allocator = 'cuda' AND trace_name = 'niu_ctx150_fwdbwd_fp32'")[0][0]
    a = dict((s, (al, re)) for s, al, re in q(db, "SELECT seq, allocated, reserved FROM run_timeline WHERE run_id = ?", gpu_id))
    b = dict((s, re) for s, re in q(db, "SELECT seq, reserved FROM run_timeline WHERE run_id = ?", sim_id))
    rows = [[s, a[s][0], a[s][1], b[s], (b[s] - a[s][1]) / MiB] for s in sorted(set(a) & set(b))]
    write_csv("niu_cuda_timeline.csv",
              ["event", "allocated_B", "gpu_measured_B", "cuda_model_B", "model_minus_gpu_MiB"], rows)


# ---- c. time on the calibrated profile ---------------------------------------------------------------

def sample_time(mp, runs, profile):
    rows = []
    for alloc in ("cuda", "async", "torch", "bfc"):
        m = runs[("sample", alloc)]["measured"]["step_s"]
        wall = runs[("sample", alloc)]["measured"]["wall_s"]
        variants = [("malloc_syncs=true (default)" if alloc != "async" else "default", [])]
        if alloc in ("cuda", "torch"):
            variants.append(("malloc_syncs=false", ["--timing", "malloc_syncs=false"]))
        for label, extra in variants:
            t = mp.json("replay", "sample", "--allocator", alloc, "--device", profile, "--no-save", "--json", *extra)["time"]
            st = t["steps"]
            pro = t["total_s"] - sum(s["predicted_s"] for s in st)
            parts = [("before step 0", pro, m[0])]
            parts += [("step %d" % s["step"], s["predicted_s"], m[1 + i]) for i, s in enumerate(st) if s["complete"]]
            parts.append(("after the last step marker", st[-1]["predicted_s"], m[-1]))
            comp = [s["predicted_s"] for s in st if s["complete"]]
            parts.append(("mean of the 5 complete steps", sum(comp) / len(comp), sum(m[1:6]) / 5))
            parts.append(("whole trace", t["total_s"], wall))
            for name, pred, meas in parts:
                rows.append([alloc, label, name, pred, meas, pct(pred, meas)])
    write_csv("time_sample.csv",
              ["allocator", "time model", "part", "predicted_s (calibrated %s)" % profile, "measured_s (GPU)",
               "error_pct (predicted-measured)/measured"], rows)


# ---- d. the PyTorch job ------------------------------------------------------------------------------

def pytorch(db, mp, runs):
    # validate
    rows = []
    for b, p in JOBS:
        v = raw("validate_torch_b%d_%s.out" % (b, p))
        rows.append(["torch_b%d_%s" % (b, p), v["agree"], v["events"], v["allocs"], v["address_matches"], v["frees"],
                     v["segment_events"], v["segment_matches"], v["extra_segment_events"], v["final_segments"],
                     v["final_segments_matched"], v["final_blocks"], v["final_blocks_matched"], v["first_divergence"],
                     v["replayed_peak_allocated_bytes"], v["replayed_peak_reserved_bytes"], v["recorded_peak_reserved_bytes"]])
    write_csv("pytorch_validate.csv",
              ["job", "agree", "events", "allocs", "address_matches", "frees", "segment_events", "segment_matches",
               "extra_segment_events", "final_segments", "final_segments_matched", "final_blocks", "final_blocks_matched",
               "first_divergence", "replayed_peak_allocated_B", "replayed_peak_reserved_B", "recorded_peak_reserved_B"], rows)

    # the snapshot's segments against the cudaMallocs memplay record saw in the same process
    seg_rows, seg_json = [], []
    for b, p in JOBS:
        j = "torch_b%d_%s" % (b, p)
        rid, attrs = q(db, "SELECT id, attrs FROM traces WHERE name = ?", j)[0]
        sid = q(db, "SELECT id FROM traces WHERE name = ?", j + "_snapshot")[0][0]
        origin = json.loads(attrs)["origin_ns"]
        rec = q(db, "SELECT seq, ts, addr, size, api_dur FROM events_named WHERE trace_id = ? AND kind = 'alloc' ORDER BY seq", rid)
        seg = q(db, "SELECT addr, size, ts FROM recorded WHERE trace_id = ? AND action = 'segment_alloc' ORDER BY seq", sid)
        segset = {(a, s) for a, s, _ in seg}
        matched = [r for r in rec if (r[2], r[3]) in segset]
        extra = [r for r in rec if (r[2], r[3]) not in segset]
        segts = {(a, s): t for a, s, t in seg}
        after_return = sorted(segts[(r[2], r[3])] - (origin + r[1] + r[4]) for r in matched)
        frees = q(db, "SELECT count(*) FROM events_named WHERE trace_id = ? AND kind = 'free'", rid)[0][0]
        torch = raw(j + ".json")
        d = {"job": j, "recorded_cudamallocs": len(rec), "recorded_bytes": sum(r[3] for r in rec), "recorded_cudafrees": frees,
             "snapshot_segments": len(seg), "snapshot_bytes": sum(s[1] for s in seg),
             "torch_num_device_alloc": torch["num_device_alloc"], "torch_max_reserved": torch["max_reserved"],
             "same_address_and_size": len(matched), "same_order": [(r[2], r[3]) for r in matched] == [(a, s) for a, s, _ in seg],
             "snapshot_only": len(seg) - len(matched),
             "recorded_only": [{"event": r[0], "size": r[3], "ts_s": r[1] / 1e9} for r in extra],
             "snapshot_ts_after_cudamalloc_return_us": {"min": after_return[0] / 1e3, "median": statistics.median(after_return) / 1e3,
                                                        "max": after_return[-1] / 1e3}}
        seg_json.append(d)
        seg_rows.append([j, len(rec), frees, len(seg), torch["num_device_alloc"], len(matched), d["same_order"],
                         len(seg) - len(matched), len(extra), sum(r[3] for r in extra),
                         " ".join(str(r[3]) for r in extra), d["snapshot_ts_after_cudamalloc_return_us"]["median"]])
    with open(os.path.join(TABLES, "pytorch_segments.json"), "w") as f:
        json.dump(seg_json, f, indent=1)
        f.write("\n")
    write_csv("pytorch_segments.csv",
              ["job", "recorded_cudamallocs", "recorded_cudafrees", "snapshot_segments", "torch_num_device_alloc",
               "same_address_and_size", "same_order", "snapshot_only", "recorded_only", "recorded_only_B",
               "recorded_only_sizes_B", "snapshot_ts_minus_cudamalloc_return_median_us"], seg_rows)

    # PyTorch's own peaks against memplay's replays of the snapshot
    rows = []
    for b, p in JOBS:
        j = "torch_b%d_%s" % (b, p)
        t = raw(j + ".json")
        v = raw("validate_%s.out" % j)
        s = mp.json("replay", j + "_snapshot", "--allocator", "torch", "--no-save", "--json")
        g = runs[(j + "_snapshot", "torch")]
        rows.append([j, t["max_allocated"], t["max_reserved"], t["num_device_alloc"],
                     v["replayed_peak_allocated_bytes"], v["replayed_peak_reserved_bytes"],
                     s["peak_allocated_bytes"], s["peak_reserved_bytes"], s["device_mallocs"],
                     pct(s["peak_allocated_bytes"], t["max_allocated"]), pct(s["peak_reserved_bytes"], t["max_reserved"]),
                     g["predicted"]["device_peak_bytes"], g["measured"]["device_peak_bytes"], g["peak_reserved_bytes"],
                     g["device_mallocs"], pct(g["measured"]["device_peak_bytes"], t["max_reserved"])])
    write_csv("pytorch_peaks.csv",
              ["job", "torch_max_allocated_B", "torch_max_reserved_B", "torch_num_device_alloc",
               "validate_peak_allocated_B", "validate_peak_reserved_B",
               "replay_torch_peak_allocated_B", "replay_torch_peak_reserved_B", "replay_torch_cudamallocs",
               "replay_vs_torch_allocated_pct", "replay_vs_torch_reserved_pct",
               "gpu_plan_device_peak_B", "gpu_measured_device_peak_B", "gpu_model_reserved_B", "gpu_cudamallocs",
               "gpu_measured_vs_torch_reserved_pct"], rows)

    # the what-if: each recording without the caching allocator, replayed under the torch model
    tmp = tempfile.mkdtemp()
    rows = []
    for b, p in JOBS:
        j = "torch_b%d_%s" % (b, p)
        t = raw(j + ".json")
        nc = mp.json("replay", j + "_nocache", "--allocator", "torch", "--no-save", "--json")
        allocs = q(db, "SELECT count(*) FROM events_named e JOIN traces t ON t.id = e.trace_id WHERE t.name = ? AND kind = 'alloc'", j + "_nocache")[0][0]
        # the allocations PyTorch's allocator never made: made and never freed, of the sizes the
        # cudaMallocs outside the caching allocator have in the caching run (pytorch_segments.csv)
        path = os.path.join(tmp, j + "_nocache.jsonl")
        mp.run("export", j + "_nocache", "--format", "jsonl", "-o", path)
        lines = [json.loads(x) for x in open(path)]
        live = {}
        for i, e in enumerate(lines):
            if e.get("kind") == "alloc":
                live[e["addr"]] = i
            elif e.get("kind") == "free":
                live.pop(e["addr"], None)
        outside = {r["size"] for d in seg_json if d["job"] == j for r in d["recorded_only"]}
        drop = {i for i in live.values() if lines[i]["size"] in outside}
        stripped = os.path.join(tmp, j + "_nocache_torch_only.jsonl")
        with open(stripped, "w") as f:
            for i, e in enumerate(lines):
                if i not in drop:
                    f.write(json.dumps(e) + "\n")
        log.append("%s_nocache exported, the %d never-freed allocations of sizes %s dropped -> %s_nocache_torch_only"
                   % (j, len(drop), sorted(outside), j))
        mp.run("import", stripped, "--name", j + "_nocache_torch_only")
        st = mp.json("replay", j + "_nocache_torch_only", "--allocator", "torch", "--no-save", "--json")
        rows.append([j, allocs, nc["peak_allocated_bytes"], nc["peak_reserved_bytes"], nc["device_mallocs"],
                     t["max_allocated"], t["max_reserved"], t["num_device_alloc"],
                     pct(nc["peak_allocated_bytes"], t["max_allocated"]), pct(nc["peak_reserved_bytes"], t["max_reserved"]),
                     len(drop), sum(lines[i]["size"] for i in drop),
                     st["peak_allocated_bytes"], st["peak_reserved_bytes"], st["device_mallocs"],
                     pct(st["peak_allocated_bytes"], t["max_allocated"]), pct(st["peak_reserved_bytes"], t["max_reserved"])])
    shutil.rmtree(tmp)
    write_csv("nocache_to_torch.csv",
              ["job", "nocache_allocs", "predicted_peak_allocated_B", "predicted_peak_reserved_B", "predicted_cudamallocs",
               "measured_max_allocated_B", "measured_max_reserved_B", "measured_cudamallocs",
               "allocated_error_pct", "reserved_error_pct",
               "outside_torch_allocs_dropped", "outside_torch_B",
               "without_them_peak_allocated_B", "without_them_peak_reserved_B", "without_them_cudamallocs",
               "without_them_allocated_error_pct", "without_them_reserved_error_pct"], rows)

    # the scenarios against the real runs at the other batch size and precision
    real = {(b, p): raw("torch_b%d_%s.json" % (b, p)) for b, p in JOBS}
    cases = [((8, "fp32"), (16, "fp32"), "batch_size", ["--set", "batch=8", "--set", "new_batch=16"]),
             ((16, "fp32"), (8, "fp32"), "batch_size", ["--set", "batch=16", "--set", "new_batch=8"]),
             ((8, "bf16"), (16, "bf16"), "batch_size", ["--set", "batch=8", "--set", "new_batch=16"]),
             ((16, "bf16"), (8, "bf16"), "batch_size", ["--set", "batch=16", "--set", "new_batch=8"]),
             ((8, "fp32"), (8, "bf16"), "mixed_precision", ["--set", "precision=bf16"]),
             ((16, "fp32"), (16, "bf16"), "mixed_precision", ["--set", "precision=bf16"])]
    rows = []
    for src, dst, scen, sets in cases:
        w = mp.json("whatif", "torch_b%d_%s_snapshot" % src, scen, "--no-save", "--json", *sets)
        rs, rd = real[src], real[dst]
        for v in w["variants"][1:]:
            rows.append(["b%d %s" % src, "b%d %s" % dst, scen, " ".join(sets).replace("--set ", ""), v["name"],
                         rs["max_allocated"], rd["max_allocated"], pct(rd["max_allocated"], rs["max_allocated"]),
                         v["peak_allocated_bytes"], pct(v["peak_allocated_bytes"], rd["max_allocated"]),
                         rs["max_reserved"], rd["max_reserved"], pct(rd["max_reserved"], rs["max_reserved"]),
                         v["peak_reserved_bytes"], pct(v["peak_reserved_bytes"], rd["max_reserved"]),
                         w["variants"][0]["peak_allocated_bytes"], w["variants"][0]["peak_reserved_bytes"]])
    write_csv("scenarios.csv",
              ["from", "to", "scenario", "parameters", "variant",
               "real_from_max_allocated_B", "real_to_max_allocated_B", "real_change_allocated_pct",
               "predicted_allocated_B", "allocated_error_pct",
               "real_from_max_reserved_B", "real_to_max_reserved_B", "real_change_reserved_pct",
               "predicted_reserved_B", "reserved_error_pct",
               "replayed_from_allocated_B", "replayed_from_reserved_B"], rows)


# ---- e. repeats, and PyTorch's two other allocators -------------------------------------------------

def repeats(every):
    """The same replay made more than once in the run: how much the measurements vary."""
    groups = {}
    for trace, alloc, r in every:
        key = (trace, alloc, r.get("capacity_bytes"), r["measured"].get("paced", False))
        groups.setdefault(key, []).append(r)
    rows = []
    for (trace, alloc, cap, paced), rs in groups.items():
        if len(rs) < 2 or cap or paced:
            continue
        walls = [r["measured"]["wall_s"] for r in rs]
        steps = [backend_median(r["measured"]["step_s"]) for r in rs]
        peaks = [r["measured"]["device_peak_bytes"] for r in rs]
        for n, r in enumerate(rs, 1):
            rows.append([trace, alloc, n, peaks[n - 1], walls[n - 1], steps[n - 1], "", ""])
        rows.append([trace, alloc, "spread", max(peaks) - min(peaks), max(walls) - min(walls), max(steps) - min(steps),
                     pct(max(walls), min(walls)), pct(max(steps), min(steps))])
    if rows:
        write_csv("repeats.csv", ["trace", "allocator", "run", "measured_device_peak_B", "measured_wall_s",
                                  "measured_median_step_s", "wall_max_vs_min_pct", "step_max_vs_min_pct"], rows)


def pacing(every):
    """Each paced replay beside the same replay unpaced: the recorded time, the wait, and where the run
    made one (sim_TRACE_ALLOC.out), the simulator's prediction of the whole trace, which keeps the
    recorded host time between calls as --pace=gaps does."""
    rows = []
    for trace, alloc, r in every:
        m, rec = r["measured"], r["recorded"]
        mode = m.get("pace", "clock") if m.get("paced") else "none"
        if r.get("capacity_bytes") or mode == "none" and not any(
                t == trace and a == alloc and x["measured"].get("paced") for t, a, x in every):
            continue
        sim = "sim_%s_%s.out" % (trace, alloc.split(":")[0])
        pred = raw(sim)["time"]["total_s"] if mode != "none" and has_raw(sim) else None
        rows.append([trace, alloc, mode, rec["wall_s"], m["wall_s"], m.get("pace_wait_s"), pct(m["wall_s"], rec["wall_s"]),
                     backend_median(rec["step_s"]), backend_median(m["step_s"]), pred, pct(pred, m["wall_s"]) if pred else None])
    if rows:
        write_csv("pacing.csv", ["trace", "allocator", "pace", "recorded_wall_s", "measured_wall_s", "pace_wait_s",
                                 "measured_vs_recorded_pct", "recorded_median_step_s", "measured_median_step_s",
                                 "predicted_wall_s", "predicted_vs_measured_pct"], rows)


def jax_bfc(mp):
    """The JAX job under XLA's three allocator settings (tools/gpu_checks_jax.sh): the device
    allocations each recording holds against what JAX's allocator reported (memory_stats); then the
    platform recording's maps alone (XLA's requests; its few cudaMallocs are other libraries') under
    the `bfc` model, its regions against those the growing BFC allocator took."""
    import gzip
    if not has_raw("jax_growth.jsonl.gz"):
        return
    rows, tmp = [], tempfile.mkdtemp()
    for how in ("default", "growth", "platform"):
        st = raw("jax_%s.json" % how)["memory_stats"]
        maps, mallocs, own, kept = [], 0, set(), []
        with gzip.open(os.path.join(RAW, "jax_%s.jsonl.gz" % how), "rt") as f:
            for line in f:
                e = json.loads(line)
                k = e.get("kind")
                if k == "alloc" and (e.get("args") or {}).get("api") == "cuMemMap":
                    maps.append(e["size"])
                    own.add(e["addr"])
                elif k == "alloc":
                    mallocs += 1
                    continue
                elif k == "free" and e.get("addr") not in own:
                    continue
                kept.append(e)
        sizes = " ".join(str(x // MiB) for x in maps) if len(maps) < 20 else "%d maps, %d of them 2 MiB" % (
            len(maps), sum(x == 2 * MiB for x in maps))
        rows.append(["recorded: " + how, len(maps), sum(maps), mallocs, sizes, st.get("num_allocs"),
                     st.get("peak_bytes_in_use"), st.get("pool_bytes"), pct(sum(maps), st["pool_bytes"]) if st else None])
        if how == "platform":
            path = os.path.join(tmp, "jax_platform_maps.jsonl")
            with open(path, "w") as f:
                f.writelines(json.dumps(e) + "\n" for e in kept)
            log.append("jax_platform's %d cudaMallocs (other libraries') and their frees dropped -> jax_platform_maps" % mallocs)
            mp.run("import", path, "--name", "jax_platform_maps")
    growth, default = raw("jax_growth.json")["memory_stats"], raw("jax_default.json")["memory_stats"]
    for spec, ref in (("bfc:allow_growth=true", growth), ("bfc:memory_limit=%dB" % default["bytes_limit"], default)):
        calls = os.path.join(tmp, "calls.txt")
        r = mp.json("replay", "jax_platform_maps", "--allocator", spec, "--no-save", "--json", "--device-calls", calls)
        regions = [int(c[4]) for c in (ln.split() for ln in open(calls) if not ln.startswith("#"))
                   if c[3] == "malloc" and c[7] == "ok"]
        rows.append(["model: " + spec, len(regions), r["peak_reserved_bytes"], "", " ".join(str(x // MiB) for x in regions),
                     r["allocs"], r["peak_allocated_bytes"], ref["pool_bytes"], pct(r["peak_reserved_bytes"], ref["pool_bytes"])])
    shutil.rmtree(tmp)
    write_csv("jax_bfc.csv", ["what", "regions_or_maps", "bytes", "cudaMallocs", "MiB_each", "allocations",
                              "peak_in_use_B", "jax_pool_bytes", "bytes_vs_jax_pool_pct"], rows)


# job -> (the calls the framework's own allocator makes, the model that stands for it)
OTHER_ALLOCATORS = {"torch_b8_fp32_expandable": ("cuMemMap", "cuda"),
                    "torch_b8_fp32_mallocasync": ("cudaMallocAsync", "async:release_threshold=max")}


def pytorch_allocators(db, mp):
    """PyTorch under expandable segments and under its cudaMallocAsync backend, recorded: the
    framework's own calls (maps, stream-ordered allocations) apart from the libraries' cudaMallocs,
    against what PyTorch measured in the same process."""
    tmp = tempfile.mkdtemp()
    rows = []
    for job, (api, model) in OTHER_ALLOCATORS.items():
        if not has_raw(job + ".json") or not q(db, "SELECT 1 FROM traces WHERE name = ?", job):
            continue
        t = raw(job + ".json")
        path = os.path.join(tmp, job + ".jsonl")
        mp.run("export", job, "--format", "jsonl", "-o", path)
        lines = [json.loads(x) for x in open(path)]
        own, out, outside, nown = set(), [], [], 0
        for e in lines:
            k = e.get("kind")
            if k == "alloc" and api not in (e.get("args") or {}).get("api", ""):
                outside.append(e["size"])
                continue
            if k == "alloc":
                own.add(e["addr"])
                nown += 1
            if k == "free" and e["addr"] not in own:
                continue
            out.append(e)
        own_path = os.path.join(tmp, job + "_own.jsonl")
        with open(own_path, "w") as f:
            f.writelines(json.dumps(e) + "\n" for e in out)
        log.append("%s exported, its %d allocations by other calls than %s dropped -> %s_own" % (job, len(outside), api, job))
        mp.run("import", own_path, "--name", job + "_own")
        whole = mp.json("replay", job, "--allocator", "cuda", "--no-save", "--json")
        r = mp.json("replay", job + "_own", "--allocator", model, "--no-save", "--json")
        rows.append([job, api, nown, len(outside), sum(outside), whole["peak_requested_bytes"],
                     r["peak_requested_bytes"], model, r["peak_reserved_bytes"], t["max_allocated"], t["max_reserved"],
                     pct(r["peak_requested_bytes"], t["max_allocated"]), pct(r["peak_requested_bytes"], t["max_reserved"]),
                     pct(r["peak_reserved_bytes"], t["max_reserved"])])
    shutil.rmtree(tmp)
    if rows:
        write_csv("pytorch_allocators.csv",
                  ["job", "framework_calls", "framework_allocs", "other_allocs", "other_B", "recording_peak_live_B",
                   "framework_peak_live_B", "model", "model_peak_reserved_B", "torch_max_allocated_B",
                   "torch_max_reserved_B", "framework_live_vs_torch_allocated_pct",
                   "framework_live_vs_torch_reserved_pct", "model_reserved_vs_torch_reserved_pct"], rows)


def main():
    global RAW, TABLES
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    RAW, TABLES = os.path.join(sys.argv[1], "raw"), os.path.join(sys.argv[1], "tables")
    out = sys.argv[2]
    exe = os.path.abspath(sys.argv[3] if len(sys.argv) > 3 else "build/memplay")
    os.makedirs(TABLES, exist_ok=True)
    tmp = tempfile.mkdtemp()
    db_path = os.path.join(tmp, "gpu.db")
    shutil.copy(os.path.join(out, "gpu.db"), db_path)
    db = sqlite3.connect(db_path)
    mp = Memplay(exe, db_path)
    mp_fresh = Memplay(exe, os.path.join(tmp, "builtin.db"))
    calibration(mp_fresh)
    runs, every = gpu_replays(db)
    if ("sample", "async") in runs:
        async_model(mp, runs)
    if ("niu_ctx150_fwdbwd_fp32", "cuda") in runs:
        niu_cuda_timeline(db, mp)
    if ("sample", "cuda") in runs:
        sample_time(mp, runs, raw("calibrate.out")["name"])
    if all(has_raw("torch_b%d_%s.json" % j) for j in JOBS):
        pytorch(db, mp, runs)
    repeats(every)
    pacing(every)
    jax_bfc(mp)
    pytorch_allocators(db, mp)
    db.close()
    shutil.rmtree(tmp)
    with open(os.path.join(TABLES, "commands.txt"), "w") as f:
        f.write("# every memplay command and SQL query gpu_derive.py ran, in order (COPY_OF_gpu.db: a copy of OUT/gpu.db)\n")
        f.write("\n".join(log) + "\n")


if __name__ == "__main__":
    main()
