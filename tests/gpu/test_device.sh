#!/usr/bin/env bash
# The real-GPU parts on a real GPU: calibrate, replay with --backend cuda under every kind of
# allocator, the refusal and --scale fit, and record a small CUDA program. Skipped (77) on a
# machine without a GPU or driver.
set -euo pipefail
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
db="$T/memplay.db"
fail() { echo "FAIL: $*"; exit 1; }
q() { sqlite3 "$db" "$1"; }

# 1. calibrate (quick): a GPU is here, or the test is skipped.
if ! "$MEMPLAY" --db "$db" calibrate --quick --json >"$T/cal.json" 2>"$T/err"; then
  if grep -Eq "no NVIDIA driver|no CUDA-capable GPU|older than the CUDA" "$T/err"; then
    echo "skip: $(cat "$T/err")"
    exit 77
  fi
  cat "$T/err"
  fail "calibrate failed"
fi
command -v sqlite3 >/dev/null || fail "the sqlite3 shell is needed (tools/deps.sh installs it)"
[ "$(q "SELECT count(*) FROM device_profiles WHERE source = 'calibrated'")" = 1 ] || fail "no calibrated profile stored"
for k in h2d_pinned_bw h2d_pageable_bw d2h_pinned_bw d2h_pageable_bw d2d_bw host_copy_bw; do
  ok=$(q "SELECT json_extract(params, '\$.$k') > 1e8 FROM device_profiles")
  [ "$ok" = 1 ] || fail "calibrated $k is not positive"
done
[ "$(q "SELECT json_extract(params, '\$.launch_overhead') > 0 AND json_extract(params, '\$.copy_engines') >= 1
        AND json_extract(params, '\$.launch_queue') > 16 AND json_extract(params, '\$.malloc_base') > 0 FROM device_profiles")" = 1 ] ||
  fail "launch overhead, launch queue, cudaMalloc cost or copy engines missing"
echo "ok: calibrate"

# 2. replay the sample trace on the GPU: cudaMalloc, the real pool, and a model (fitted to the GPU).
"$MEMPLAY" --db "$db" import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample >/dev/null
for alloc in cuda async; do
  "$MEMPLAY" --db "$db" replay sample --backend cuda --allocator $alloc --scale fit --json >"$T/r.json" ||
    fail "replay --backend cuda --allocator $alloc"
  id=$(q "SELECT max(id) FROM runs WHERE backend = 'cuda'")
  peak=$(q "SELECT json_extract(result, '\$.measured.device_peak_bytes') FROM runs WHERE id = $id")
  pred=$(q "SELECT json_extract(result, '\$.predicted.device_peak_bytes') FROM runs WHERE id = $id")
  kernels=$(q "SELECT json_extract(result, '\$.measured.kernels') FROM runs WHERE id = $id")
  [ "$peak" -gt 0 ] || fail "$alloc: no device memory measured"
  [ "$kernels" = 1408 ] || fail "$alloc: $kernels kernels performed, the trace has 1408"
  if [ $alloc = cuda ]; then # one cudaMalloc per request: the prediction is the driver's own pages
    err=$(q "SELECT abs($peak - $pred) * 100 / $pred")
    [ "$err" -le 10 ] || fail "cuda: measured peak $peak is $err% from the predicted $pred"
  fi
  echo "ok: replay --backend cuda --allocator $alloc (peak $peak bytes, predicted $pred)"
done
"$MEMPLAY" --db "$db" replay sample --backend cuda --allocator ideal 2>"$T/err" && fail "ideal should be refused"
grep -q "takes no memory from the device" "$T/err" || fail "ideal: $(cat "$T/err")"

# 3. a trace larger than any GPU is refused before touching it, and fits when scaled.
{
  echo '{"memplay":1,"name":"huge"}'
  echo '{"kind":"alloc","ts":0,"addr":1,"size":"64TiB"}'
  echo '{"kind":"kernel","ts":10,"dur":1000}'
  echo '{"kind":"free","ts":20,"addr":1}'
} >"$T/huge.jsonl"
"$MEMPLAY" --db "$db" import "$T/huge.jsonl" >/dev/null
"$MEMPLAY" --db "$db" replay huge --backend cuda --allocator cuda 2>"$T/err" && fail "a 64 TiB trace was not refused"
grep -q "not replaying 'huge' on the GPU" "$T/err" || fail "refusal: $(cat "$T/err")"
"$MEMPLAY" --db "$db" replay huge --backend cuda --allocator cuda --scale fit --json >"$T/r.json" || fail "--scale fit"
grep -q '"scale_fitted":true' "$T/r.json" || fail "--scale fit did not scale"
echo "ok: refusal and --scale fit"

# 4. record a small CUDA program; its exit status comes back through memplay.
set +e
"$MEMPLAY" --db "$db" record --name target --output "$T/target.jsonl" -- "$RECORD_TARGET" 3 >"$T/out" 2>"$T/err"
rc=$?
set -e
[ $rc = 3 ] || { cat "$T/out" "$T/err"; fail "record: exit status $rc, the program's was 3"; }
[ -s "$T/target.jsonl" ] || fail "record: --output file missing"
tid=$(q "SELECT id FROM traces WHERE name = 'target'")
[ -n "$tid" ] || fail "record: no trace 'target'"
n() { q "SELECT count(*) FROM events_named WHERE trace_id = $tid AND $1"; }
[ "$(n "kind = 'alloc' AND size = 4194304")" = 1 ] || fail "record: the 4 MiB cudaMalloc is missing"
[ "$(n "kind = 'alloc' AND size = 3145728")" = 1 ] || fail "record: the 3 MiB cudaMalloc is missing"
[ "$(n "kind = 'free'")" -ge 2 ] || fail "record: frees missing"
[ "$(n "kind = 'host_alloc' AND mem = 'pinned' AND size = 1048576")" = 1 ] || fail "record: cudaMallocHost missing"
[ "$(n "kind = 'memcpy' AND dir = 'h2d' AND mem = 'pageable' AND size = 4194304")" = 1 ] || fail "record: pageable copy"
[ "$(n "kind = 'memcpy' AND dir = 'h2d' AND mem = 'pinned' AND size = 1048576 AND flags & 8")" = 1 ] ||
  fail "record: pinned asynchronous copy"
[ "$(n "kind = 'memcpy' AND dir = 'd2h' AND size = 1048576")" = 1 ] || fail "record: device-to-host copy"
[ "$(n "kind = 'memset' AND size = 3145728")" = 1 ] || fail "record: memset"
[ "$(n "kind = 'sync'")" -ge 2 ] || fail "record: synchronizations"
first_free=$(q "SELECT min(seq) FROM events WHERE trace_id = $tid AND kind = 4")
last_alloc=$(q "SELECT max(seq) FROM events WHERE trace_id = $tid AND kind = 1")
[ "$last_alloc" -lt "$first_free" ] || fail "record: events are not in issue order"
"$MEMPLAY" --db "$db" replay target --allocator cuda >/dev/null || fail "the recorded trace does not replay"
echo "ok: record"
