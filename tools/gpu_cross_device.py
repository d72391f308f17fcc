#!/usr/bin/env python3
"""gpu_cross_device.py: the time model's kernels scaled from one GPU to another, against the other
GPU's own kernel times, for the same jobs recorded on both.

    python3 tools/gpu_cross_device.py A_DIR B_DIR A_PROFILE B_PROFILE OUT.csv [MEMPLAY]

A_DIR and B_DIR hold the same jobs recorded on GPU A and on GPU B, as tools/gpu_record_jobs.sh
exports them (JOB.jsonl, or JOB.jsonl.gz: torch_b8_fp32, ...); A_PROFILE and B_PROFILE are the
device profiles of the two GPUs (`memplay devices`: H200, H100). For each job
recorded on both, each recording is imported into a scratch store and replayed twice: A's on
B's profile (the model scales each kernel by the rate that bounds it, docs/timemodel.md,
"Another device"), and B's on A's, which groups B's own kernels by the same bounds. The rows:
per job and bound, the kernels, A's recorded time, the prediction for B, B's recorded time, and
the errors of the prediction and of not scaling at all. A second table, OUT less .csv plus
_by_duration.csv, pairs the two recordings' kernels in order (the same job launches the same
kernels) and gives B's time over A's by kind (matrix math by name, as the model tells it, or
not) and by A's duration. MEMPLAY defaults to build/memplay.
"""
import csv
import gzip
import json
import os
import subprocess
import sys
import tempfile

JOBS = ["torch_b%d_%s" % (b, p) for b in (8, 16) for p in ("fp32", "bf16")] + ["membound"]
MATRIX = ("gemm", "conv", "cudnn", "mma", "cutlass", "winograd", "fmha", "flash", "attention", "triton_mm", "triton_tem")
BUCKETS = ((5e3, "under 5 us"), (20e3, "5-20 us"), (100e3, "20-100 us"), (1e6, "100 us-1 ms"), (float("inf"), "1 ms and more"))


def kernels(path):
    with (gzip.open(path, "rt") if path.endswith(".gz") else open(path)) as f:
        return [e for e in map(json.loads, f) if e.get("kind") == "kernel"]


def by_duration(job, a_path, b_path):
    """B's kernel time over A's, the two recordings' kernels paired in order where their names agree."""
    groups = {}
    for x, y in zip(kernels(a_path), kernels(b_path)):
        if x.get("name") != y.get("name"):
            continue
        kind = "matrix math" if any(w in x["name"].lower() for w in MATRIX) else "other"
        bucket = next(label for limit, label in BUCKETS if x.get("dur", 0) < limit)
        g = groups.setdefault((kind, bucket), [0, 0, 0])
        g[0] += 1
        g[1] += x.get("dur", 0)
        g[2] += y.get("dur", 0)
    return [[job, kind, bucket, n, "%.6f" % (a / 1e9), "%.6f" % (b / 1e9), "%.3f" % (b / a) if a else ""]
            for (kind, bucket), (n, a, b) in sorted(groups.items(), key=lambda kv: (kv[0][0], [l for _, l in BUCKETS].index(kv[0][1])))]


def pct(v, ref):
    return "" if not ref else "%.2f" % ((v - ref) / ref * 100)


def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    a_dir, b_dir, prof_a, prof_b, out = sys.argv[1:6]
    exe = sys.argv[6] if len(sys.argv) > 6 else "build/memplay"
    tmp = tempfile.mkdtemp()
    db = os.path.join(tmp, "x.db")

    def mp(*args):
        p = subprocess.run([exe, "--db", db] + list(args), capture_output=True, text=True)
        if p.returncode:
            sys.exit("failed: memplay %s\n%s" % (" ".join(args), p.stderr))
        return p.stdout

    def device_of(name):
        return json.loads(mp("info", name, "--json"))["device_name"]

    rows, paired = [], []
    def recording(d, job):
        for ext in (".jsonl", ".jsonl.gz"):
            if os.path.exists(os.path.join(d, job + ext)):
                return os.path.join(d, job + ext)
        return None

    for job in JOBS:
        a_path, b_path = recording(a_dir, job), recording(b_dir, job)
        if not a_path or not b_path:
            continue
        mp("import", a_path, "--name", job + "_a")
        mp("import", b_path, "--name", job + "_b")
        dev_a, dev_b = device_of(job + "_a"), device_of(job + "_b")
        pred = json.loads(mp("replay", job + "_a", "--device", prof_b, "--no-save", "--json"))["time"]["device_scaling"]
        own = json.loads(mp("replay", job + "_b", "--device", prof_a, "--no-save", "--json"))["time"]["device_scaling"]
        mine = {x["bound"]: x for x in own["bounds"]}
        tot = [0, 0, 0, 0, 0]
        for x in pred["bounds"]:
            y = mine.get(x["bound"], {"kernels": 0, "recorded_s": 0.0})
            rows.append([job, dev_a, dev_b, x["bound"], "%.4g" % x["ratio"], x["kernels"], y["kernels"], "%.6f" % x["recorded_s"],
                         "%.6f" % x["predicted_s"], "%.6f" % y["recorded_s"], pct(x["predicted_s"], y["recorded_s"]),
                         pct(x["recorded_s"], y["recorded_s"])])
            for i, v in enumerate((x["kernels"], y["kernels"], x["recorded_s"], x["predicted_s"], y["recorded_s"])):
                tot[i] += v
        rows.append([job, dev_a, dev_b, "all kernels", "", tot[0], tot[1], "%.6f" % tot[2], "%.6f" % tot[3], "%.6f" % tot[4],
                     pct(tot[3], tot[4]), pct(tot[2], tot[4])])
        paired += by_duration(job, a_path, b_path)
    with open(out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["job", "recorded_on", "predicted_for", "bound", "ratio", "kernels", "kernels_on_target",
                    "recorded_s", "predicted_s", "target_recorded_s", "predicted_vs_target_pct", "unscaled_vs_target_pct"])
        w.writerows(rows)
    with open(out[:-4] + "_by_duration.csv" if out.endswith(".csv") else out + "_by_duration.csv", "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["job", "kernels", "duration_on_A", "pairs", "A_s", "B_s", "B_over_A"])
        w.writerows(paired)


main()
