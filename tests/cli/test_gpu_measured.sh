# The first real-GPU measurements (an H200, docs/accuracy.md, "Real GPU: predicted against
# measured"; the data in docs/measurements/h200-2026-11-26) stay reproducible without a GPU:
#  - the CUDA program recorded on that GPU (traces/recorded_cuda_program.jsonl) imports with
#    every call it made, and replays;
#  - the simulator still predicts what the GPU replays were compared with, and each prediction
#    stays within the error published against what the GPU measured: the sample trace's device
#    memory under cuda, async and torch, and its time on the calibrated H200 profile (made here
#    from the committed calibration); with the real traces at hand (MEMPLAY_TRACES), the same for
#    the kk, wed, niu and ntua replays;
#  - the H100's measurements of what the H200 did not measure (section 6);
#  - the second H200 run's (section 7): pacing that waits, and a JAX job recorded;
#  - the same PyTorch jobs recorded on an H200 and an H100 (section 8): the H200's kernels scaled
#    to the H100 by the model, against the H100's own;
#  - those jobs recorded without PyTorch's cache, replayed on an H100 under `cuda` (section 9);
#  - the second H100 run of 2026-11-27 (section 11), whose own plan had the later rules;
#  - the device calls of snapshots at capacities under their peaks on an H200 (section 12);
#  - PyTorch's own snapshots under max_split_size_mb and roundup_power2_divisions (section 13).
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null || {
  echo "skipped: the sqlite3 shell is needed (tools/deps.sh installs it)"
  exit 77
}
M="$MEMPLAY_SRC/docs/measurements/h200-2026-11-26/raw"

# jx FILE PATH: a value from a JSON file, by SQLite's JSON path.
jx() { sqlite3 :memory: "SELECT json_extract(readfile('$1'), '$2')"; }
# stored NAME FILE: FILE imported as NAME unless the store has NAME already.
stored() { sqlite3 "$DB" "SELECT 1 FROM traces WHERE name = '$1'" | grep -q 1 || expect 0 import "$2" --name "$1"; }
# within A B MAX: |A - B| / B * 100 <= MAX (B the reference).
within() { awk -v a="$1" -v b="$2" -v m="$3" 'BEGIN { e = (a - b) / b * 100; if (e < 0) e = -e; exit !(e <= m) }'; }
# err A B: (A - B) / B * 100, for messages.
err() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.4f%%", (a - b) / b * 100 }'; }

# 1. The recorded CUDA program (tests/gpu/record_target.c, run with exit status 0).
expect 0 import "$MEMPLAY_SRC/traces/recorded_cuda_program.jsonl" --name rec
has "$T/out" "12 events"
tid=$(sqlite3 "$DB" "SELECT id FROM traces WHERE name = 'rec'")
[ "$(sqlite3 "$DB" "SELECT source_format || '|' || device_name || '|' || allocator FROM traces WHERE id = $tid")" = \
  "recorded|NVIDIA H200|cuda" ] || fail "rec: header not kept"
n() { sqlite3 "$DB" "SELECT count(*) FROM events_named WHERE trace_id = $tid AND $1"; }
[ "$(n "kind = 'alloc' AND size = 4194304")" = 1 ] || fail "rec: the 4 MiB cudaMalloc is missing"
[ "$(n "kind = 'alloc' AND size = 3145728")" = 1 ] || fail "rec: the 3 MiB cudaMalloc is missing"
[ "$(n "kind = 'free'")" = 2 ] || fail "rec: two cudaFrees expected"
[ "$(n "kind = 'host_alloc' AND mem = 'pinned' AND size = 1048576")" = 1 ] || fail "rec: cudaMallocHost missing"
[ "$(n "kind = 'memcpy' AND dir = 'h2d' AND mem = 'pageable' AND size = 4194304")" = 1 ] || fail "rec: pageable copy"
[ "$(n "kind = 'memcpy' AND dir = 'h2d' AND mem = 'pinned' AND size = 1048576 AND stream = 14")" = 1 ] ||
  fail "rec: pinned asynchronous copy on stream 14"
[ "$(n "kind = 'memcpy' AND dir = 'd2h' AND mem = 'pageable' AND size = 1048576")" = 1 ] || fail "rec: device-to-host copy"
[ "$(n "kind = 'memset' AND size = 3145728")" = 1 ] || fail "rec: memset"
[ "$(n "kind = 'sync'")" = 2 ] || fail "rec: two synchronizations expected"
# the first cudaMalloc carried the CUDA context's creation: 111.78 ms on the H200
[ "$(sqlite3 "$DB" "SELECT api_dur FROM events_named WHERE trace_id = $tid AND seq = 0")" = 111777553 ] ||
  fail "rec: the first call's recorded duration changed"
expect 0 replay rec --allocator cuda --no-save --json
[ "$(json_get peak_allocated_bytes)" = 7340032 ] || fail "rec: peak allocated $(json_get peak_allocated_bytes), wanted 7 MiB"
[ "$(json_get peak_reserved_bytes)" = 8388608 ] ||
  fail "rec: device memory $(json_get peak_reserved_bytes), wanted 8 MiB (4 MiB + 3 MiB in 2 MiB pages)"

# 2. The calibrated H200 profile, from the committed calibration: every figure it measured.
sets=()
while read -r kv; do sets+=(--set "$kv"); done < <(sqlite3 :memory: \
  "SELECT key || '=' || value FROM json_each(readfile('$M/calibrate.out'), '\$.params') WHERE type IN ('integer', 'real')")
[ "${#sets[@]}" -ge 56 ] || fail "calibrate.out: only ${#sets[@]} arguments for the profile"
expect 0 devices h200-calibrated --from H200 "${sets[@]}"
expect 0 devices h200-calibrated --json
[ "$(jx "$T/out" '$.h2d_pinned_bw')" = 55455776300.0 ] && [ "$(jx "$T/out" '$.launch_queue')" = 1088 ] ||
  fail "the calibrated figures did not reach the profile: $(head -c 300 "$T/out")"

# 3. The sample: device memory predicted against the GPU's, per allocator (max error in %; a
#    third field: the prediction since the model changed after the run, docs/accuracy.md: the
#    `async` model's frees join the free memory beside them at once, and the simulated driver
#    hands out addresses downwards, as the GPU's did).
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
for row in "cuda 0.011" "async 0 19864223744" "torch 0"; do
  set -- $row
  g="$M/gpu_sample_$1.out"
  expect 0 replay sample --allocator "$1" --no-save --json
  pred=$(json_get peak_reserved_bytes)
  want=${3:-$(jx "$g" '$.predicted.device_peak_bytes')}
  meas=$(jx "$g" '$.measured.device_peak_bytes')
  [ "$pred" = "$want" ] || fail "sample, $1: predicts $pred bytes, wanted $want"
  within "$meas" "$pred" "$2" || fail "sample, $1: measured $meas is $(err "$meas" "$pred") from the prediction $pred (published: within $2%)"
done

# 4. The sample's time on the calibrated profile against the GPU's wall time (cuda: -0.63%).
# The GPU spins for each kernel's recorded time: kernels are not scaled to the H200.
expect 0 replay sample --allocator cuda --device h200-calibrated --timing kernels=recorded --no-save --json
total=$(jx "$T/out" '$.time.total_s')
wall=$(jx "$M/gpu_sample_cuda.out" '$.measured.wall_s')
[ "$total" = 0.869391867 ] || fail "sample on h200-calibrated: predicted $total s, was 0.869391867 s"
within "$total" "$wall" 0.63 || fail "sample on h200-calibrated: $total s is $(err "$total" "$wall") from the measured $wall s"
expect 0 replay sample --allocator torch --device h200-calibrated --timing kernels=recorded --no-save --json
within "$(jx "$T/out" '$.time.total_s')" "$(jx "$M/gpu_sample_torch.out" '$.measured.wall_s')" 0.28 ||
  fail "sample under torch on h200-calibrated: $(jx "$T/out" '$.time.total_s') s against the measured"

# 5. The real traces replayed on the GPU, when they are at hand (max error in %; a fourth field:
#    the prediction since the model changed after the run: the simulated device's small requests
#    fill the holes freed in their pages, docs/accuracy.md).
if [ -n "${MEMPLAY_TRACES:-}" ] && [ -d "$MEMPLAY_TRACES" ]; then
  for row in "pytorch/kk_ctx128_fullstep.pickle torch 0" "pytorch/kk_ctx128_fullstep.pickle cuda 0 55354327040" \
    "pytorch/wed_medium_256_training.pickle torch 0" "pytorch/wed_medium_256_training.pickle cuda 0 9118416896" \
    "pytorch/niu_ctx150_fwdbwd_fp32.pickle torch 0" "pytorch/niu_ctx150_fwdbwd_fp32.pickle cuda 0.40 1061158912" \
    "nsys/ntua_a100_gemm_fo_memusage.sqlite torch 0" "nsys/ntua_a100_gemm_fo_memusage.sqlite cuda 0"; do
    set -- $row
    f="$MEMPLAY_TRACES/$1"
    name=$(basename "$1")
    name=${name%%.*}
    [ -f "$f" ] || continue
    stored "$name" "$f" || continue
    g="$M/gpu_${name}_$2.out"
    # the GPU starts a window from its live blocks (it cannot hold the recorded cached segments)
    expect 0 replay "$name" --allocator "$2" --no-save --json --live-start
    pred=$(json_get peak_reserved_bytes)
    want=${4:-$(jx "$g" '$.predicted.device_peak_bytes')}
    meas=$(jx "$g" '$.measured.device_peak_bytes')
    [ "$pred" = "$want" ] || fail "$name, $2: predicts $pred bytes, wanted $want"
    within "$meas" "$pred" "$3" || fail "$name, $2: measured $meas is $(err "$meas" "$pred") from the prediction (published: within $3%)"
  done
else
  echo "the real traces are not at hand (MEMPLAY_TRACES): their replays not checked"
fi

# 6. The H100's measurements (docs/measurements/h100-2026-11-26) of what the H200 did not measure:
#    its recording of the CUDA program, expandable segments, --capacity and the real pool on two
#    streams, each predicted as the GPU run was and within the published error (OOMs: at most
#    the published excess).
H="$MEMPLAY_SRC/docs/measurements/h100-2026-11-26/raw"
expect 0 import "$H/record_target.jsonl" --name rec_h100
has "$T/out" "12 events"
[ "$(sqlite3 "$DB" "SELECT device_name FROM traces WHERE name = 'rec_h100'")" = "NVIDIA H100 80GB HBM3" ] ||
  fail "rec_h100: the device is not kept"
# gpu_check NAME MAXERR ALLOCATOR [OPTIONS...]: the prediction is the GPU run's, the measurement within MAXERR%.
# With NOW set (NOW=BYTES gpu_check ...), the prediction is NOW instead: the model changed after the run
# (NOW_OOMS too, for the OOMs).
gpu_check() {
  local g="$H/gpu_$1.out" e=$2
  shift 2
  expect 0 replay "$@" --no-fail --no-save --json
  local pred want meas
  pred=$(json_get peak_reserved_bytes)
  want=${NOW:-$(jx "$g" '$.predicted.device_peak_bytes')}
  meas=$(jx "$g" '$.measured.device_peak_bytes')
  [ "$pred" = "$want" ] || fail "$(basename "$g"): predicts $pred bytes, the GPU run was compared with $want"
  within "$meas" "$pred" "$e" || fail "$(basename "$g"): measured $meas is $(err "$meas" "$pred") from $pred (published: within $e%)"
  [ "$(json_get ooms)" = "${NOW_OOMS:-$(jx "$g" '$.predicted.ooms')}" ] || fail "$(basename "$g"): $(json_get ooms) OOMs predicted"
}
gpu_check sample_torch_expandable 0 sample --allocator torch:expandable_segments:True
gpu_check sample_cuda_capacity 0 sample --allocator cuda --capacity 12GiB
NOW=17179869184 NOW_OOMS=89 gpu_check sample_torch_capacity 0 sample --allocator torch --capacity 16GiB
[ "$(jx "$H/gpu_sample_cuda_capacity.out" '$.ooms')" -le 844 ] && [ "$(jx "$H/gpu_sample_torch_capacity.out" '$.ooms')" -le 89 ] ||
  fail "the OOMs on the GPU at a capacity are not the published ones"
python3 "$MEMPLAY_SRC/tests/gpu/gen_two_streams.py" >"$T/two_streams.jsonl" || fail "gen_two_streams.py failed"
expect 0 import "$T/two_streams.jsonl" --name two_streams
NOW=1241513984 gpu_check two_streams_async 21.46 two_streams --allocator async
NOW=1140850688 gpu_check two_streams_async_release_threshold_max 2.76 two_streams --allocator async:release_threshold=max
gpu_check two_streams_cuda 0.41 two_streams --allocator cuda
# 7. The second H200 run (docs/measurements/h200-2026-11-26b): a trace whose recorded host work
#    exceeds the GPU's, paced (the prediction on that run's calibrated profile within the
#    published error of the measured wall time, the device memory exact; from a third call, paced
#    by the recorded time between calls, within 1.6% and 3%), and the JAX job recorded
#    under XLA's platform allocator: its maps alone under the `bfc` model take the regions the
#    growing BFC allocator took, from 64 MiB up, and three more small ones.
G="$MEMPLAY_SRC/docs/measurements/h200-2026-11-26b/raw"
sets=()
while read -r kv; do sets+=(--set "$kv"); done < <(sqlite3 :memory: \
  "SELECT key || '=' || value FROM json_each(readfile('$G/calibrate.out'), '\$.params') WHERE type IN ('integer', 'real')")
expect 0 devices h200b-calibrated --from H200 "${sets[@]}"
python3 "$MEMPLAY_SRC/tests/gpu/gen_host_gaps.py" >"$T/host_gaps.jsonl" || fail "gen_host_gaps.py failed"
expect 0 import "$T/host_gaps.jsonl" --name host_gaps
for row in "cuda 14.77" "torch 7.37"; do
  set -- $row
  g="$G/gpu_host_gaps_$1_pace.out"
  [ "$(jx "$g" '$.measured.paced')" = 1 ] && awk -v w="$(jx "$g" '$.measured.pace_wait_s')" 'BEGIN { exit !(w > 0.1) }' ||
    fail "host_gaps, $1: the GPU run did not wait for the recorded times"
  expect 0 replay host_gaps --allocator "$1" --device h200b-calibrated --timing kernels=recorded --no-save --json
  total=$(jx "$T/out" '$.time.total_s')
  [ "$total" = "$(jx "$G/sim_host_gaps_$1.out" '$.time.total_s')" ] || fail "host_gaps, $1: predicts $total s, the run predicted otherwise"
  within "$total" "$(jx "$g" '$.measured.wall_s')" "$2" || fail "host_gaps, $1: $total s is $(err "$total" "$(jx "$g" '$.measured.wall_s')") from the paced GPU run"
  [ "$(json_get peak_reserved_bytes)" = "$(jx "$g" '$.measured.device_peak_bytes')" ] || fail "host_gaps, $1: device memory differs"
done
#    The third call (pacing/): --pace=gaps against the model on that call's calibration.
P="$MEMPLAY_SRC/docs/measurements/h200-2026-11-26b/pacing/raw"
sets=()
while read -r kv; do sets+=(--set "$kv"); done < <(sqlite3 :memory: \
  "SELECT key || '=' || value FROM json_each(readfile('$P/calibrate.out'), '\$.params') WHERE type IN ('integer', 'real')")
expect 0 devices h200c-calibrated --from H200 "${sets[@]}"
for row in "cuda 1.62 11.63" "torch 2.98 4.99"; do
  set -- $row
  expect 0 replay host_gaps --allocator "$1" --device h200c-calibrated --timing kernels=recorded --no-save --json
  total=$(jx "$T/out" '$.time.total_s')
  [ "$total" = "$(jx "$P/sim_host_gaps_$1.out" '$.time.total_s')" ] || fail "host_gaps, $1: predicts $total s on the third call's profile"
  g="$P/gpu_host_gaps_$1_pace_gaps.out"
  [ "$(jx "$g" '$.measured.pace')" = gaps ] || fail "host_gaps, $1: the gap-paced run is not marked so"
  within "$total" "$(jx "$g" '$.measured.wall_s')" "$2" || fail "host_gaps, $1: $total s is $(err "$total" "$(jx "$g" '$.measured.wall_s')") from --pace=gaps"
  within "$total" "$(jx "$P/gpu_host_gaps_$1_pace_clock.out" '$.measured.wall_s')" "$3" ||
    fail "host_gaps, $1: the clock-paced run is further from the model than published"
done
python3 - "$G/jax_platform.jsonl.gz" "$T/jax_maps.jsonl" <<'PY' || fail "cannot read the JAX recording"
import gzip, json, sys
own, out = set(), open(sys.argv[2], "w")
for line in gzip.open(sys.argv[1], "rt"):
    e = json.loads(line)
    if e.get("kind") == "alloc":
        if (e.get("args") or {}).get("api") != "cuMemMap":
            continue
        own.add(e["addr"])
    elif e.get("kind") == "free" and e.get("addr") not in own:
        continue
    out.write(line)
PY
expect 0 import "$T/jax_maps.jsonl" --name jax_maps
expect 0 replay jax_maps --allocator bfc:allow_growth=true --no-save --json --device-calls "$T/calls.txt"
[ "$(json_get allocs)" = "$(jx "$G/jax_growth.json" '$.memory_stats.num_allocs')" ] || fail "jax: $(json_get allocs) allocations, JAX made another number"
regions=$(awk '!/^#/ && $4 == "malloc" && $8 == "ok" { printf "%s%d", n++ ? " " : "", $5 / 1048576 }' "$T/calls.txt")
[ "$regions" = "2 4 8 16 64 64 128 256 512 1024 2048" ] || fail "jax: the model's regions are $regions MiB"
recorded=$(gzip -dc "$G/jax_growth.jsonl.gz" | grep -o '"size":[0-9]*,[^}]*"api":"cuMemMap"' | grep -o '^"size":[0-9]*' |
  cut -d: -f2 | awk '{ printf "%s%d", n++ ? " " : "", $1 / 1048576 }')
[ "$recorded" = "2 64 64 128 256 512 1024 2048" ] || fail "jax: the growing BFC's recorded regions read as $recorded MiB"
[ "${regions#2 4 8 16 }" = "${recorded#2 }" ] || fail "jax: from 64 MiB up the regions differ: $regions against $recorded"
# 8. docs/measurements/h100-2026-11-26b: each job's H200 recording on the built-in H100 profile;
#    its kernels' predicted time stays the published one, within the published error of the
#    H100's own recording (the sum of its kernels' durations, read with plain SQL).
X="$MEMPLAY_SRC/docs/measurements/h100-2026-11-26b"
for row in "torch_b8_fp32 2.57" "torch_b8_bf16 19.49" "membound 1.35"; do
  set -- $row
  expect 0 import "$X/h200_jobs/$1.jsonl.gz" --name "$1_h200"
  expect 0 import "$X/raw/$1.jsonl.gz" --name "$1_h100"
  expect 0 replay "$1_h200" --device H100 --no-save --json
  pred=$(sqlite3 :memory: "SELECT sum(json_extract(value, '\$.predicted_s')) FROM json_each(json_extract(readfile('$T/out'), '\$.time.device_scaling.bounds'))")
  h100=$(sqlite3 "$DB" "SELECT sum(dur) / 1e9 FROM events_named WHERE trace_id = (SELECT id FROM traces WHERE name = '$1_h100') AND kind = 'kernel'")
  want=$(awk -F, -v j="$1" '$1 == j && $4 == "all kernels" { print $9 }' "$X/tables/cross_device.csv")
  awk -v a="$pred" -v b="$want" 'BEGIN { d = a - b; exit !(d < 1e-6 && d > -1e-6) }' || fail "$1: predicts $pred s of kernels on the H100, published $want"
  within "$pred" "$h100" "$2" || fail "$1: $pred s of kernels predicted is $(err "$pred" "$h100") from the H100's $h100 s"
done
# 9. docs/measurements/h100-2026-11-27/nocache: the PyTorch jobs recorded with the caching
#    allocator off (one cudaMalloc per tensor, many under 2 MiB), replayed on the GPU under `cuda`:
#    the prediction is the GPU run's plan, the measured device memory within the published error.
N="$MEMPLAY_SRC/docs/measurements/h100-2026-11-27/nocache"
for row in "torch_b8_fp32_nocache 0" "torch_b8_bf16_nocache 0.17" "torch_b16_fp32_nocache 0" "torch_b16_bf16_nocache 0.14"; do
  set -- $row
  expect 0 import "$N/$1.jsonl.gz" --name "$1"
  expect 0 replay "$1" --allocator cuda --no-save --json
  pred=$(json_get peak_reserved_bytes)
  want=$(jx "$N/gpu_$1.out" '$.predicted.device_peak_bytes')
  meas=$(jx "$N/gpu_$1.out" '$.measured.device_peak_bytes')
  [ "$pred" = "$want" ] || fail "$1: predicts $pred bytes, the GPU run was compared with $want"
  within "$meas" "$pred" "$2" || fail "$1: measured $meas is $(err "$meas" "$pred") from $pred (published: within $2%)"
done
# 10. The simulated driver's addresses, downwards as the Linux driver hands them out (the default
#    for a trace whose recorded segments do not say otherwise, docs/allocators.md): the torch
#    replay at 16 GiB makes the H100's device calls, the same sizes and outcomes in the same order,
#    605 of them (docs/measurements/h100-2026-11-26/capacity), so its OOMs and device memory are
#    the GPU's; upwards it does not. The sample under async predicts the real pool's peak to the
#    byte (all four runs measured 19,864,223,744 B).
C="$MEMPLAY_SRC/docs/measurements/h100-2026-11-26/capacity"
expect 3 replay sample --allocator torch --capacity 16GiB --no-save --json --device-calls "$T/calls"
[ "$(json_get address_order)/$(json_get address_order_source)" = down/default ] ||
  fail "the sample's addresses: $(json_get address_order), from $(json_get address_order_source)"
[ "$(json_get ooms)" = 89 ] || fail "torch at 16 GiB, addresses down: $(json_get ooms) OOMs, the GPU's 89"
# and each OOM at the GPU's event, of the GPU's size
ooms() { sqlite3 :memory: "SELECT group_concat(json_extract(value, '\$.event') || ':' || json_extract(value, '\$.size_bytes'), ' ') FROM json_each(readfile('$1'), '\$.oom_list')"; }
[ "$(ooms "$T/out")" = "$(ooms "$H/gpu_sample_torch_capacity.out")" ] ||
  fail "torch at 16 GiB, addresses down: OOMs at $(ooms "$T/out" | cut -c1-80), the GPU's at $(ooms "$H/gpu_sample_torch_capacity.out" | cut -c1-80)"
[ "$(json_get peak_reserved_bytes)" = "$(jx "$H/gpu_sample_torch_capacity.out" '$.measured.device_peak_bytes')" ] ||
  fail "torch at 16 GiB, addresses down: $(json_get peak_reserved_bytes) bytes, not the GPU's"
awk '$1 == "gpu" { print $4, $5, $8 }' "$C/torch_capacity_16GiB.txt" >"$T/gpu_calls"
awk '$1 == "sim" { print $4, $5, $8 }' "$T/calls" >"$T/sim_calls"
[ "$(wc -l <"$T/gpu_calls")" = 605 ] || fail "the GPU's log of device calls is not the published one"
cmp -s "$T/gpu_calls" "$T/sim_calls" || fail "torch at 16 GiB, addresses down: the device calls differ from the GPU's: $(diff "$T/gpu_calls" "$T/sim_calls" | head -4)"
expect 3 replay sample --allocator torch --capacity 16GiB --address-order up --no-save --json --device-calls "$T/calls"
[ "$(json_get ooms)" = 87 ] || fail "torch at 16 GiB, addresses up: $(json_get ooms) OOMs, published 87"
awk '$1 == "sim" { print $4, $5, $8 }' "$T/calls" >"$T/sim_calls"
! cmp -s "$T/gpu_calls" "$T/sim_calls" || fail "addresses up gave the GPU's calls too: the check above proves nothing"
expect 0 replay sample --allocator async --no-save --json
[ "$(json_get peak_reserved_bytes)" = 19864223744 ] || fail "async, addresses down: $(json_get peak_reserved_bytes) bytes, the real pool's 19864223744"
expect 2 replay sample --address-order sideways --no-save
has "$T/err" "--address-order wants auto, up or down"
# 11. docs/measurements/h100-2026-11-27b: a GPU run whose own plan had the rules sections 3, 5, 6
#    and 10 hold with NOW (the async model's joining frees, the filled holes, the addresses
#    downwards): the simulator predicts what that run predicted, and what it measured stays within
#    the published error.
H="$MEMPLAY_SRC/docs/measurements/h100-2026-11-27b/raw"
gpu_check sample_cuda 0.011 sample --allocator cuda
gpu_check sample_async 0 sample --allocator async
gpu_check sample_torch 0 sample --allocator torch
gpu_check sample_torch_expandable 0 sample --allocator torch:expandable_segments:True
gpu_check sample_cuda_capacity 0 sample --allocator cuda --capacity 12GiB
gpu_check sample_torch_capacity 0 sample --allocator torch --capacity 16GiB
[ "$(jx "$H/gpu_sample_torch_capacity.out" '$.ooms')" = 89 ] || fail "the second H100 run: torch at 16 GiB made other than 89 OOMs on the GPU"
gpu_check two_streams_async 10.65 two_streams --allocator async
gpu_check two_streams_async_release_threshold_max 5.70 two_streams --allocator async:release_threshold=max
gpu_check two_streams_cuda 0.41 two_streams --allocator cuda
# 12. docs/measurements/h200-2026-11-28c: shared snapshots at capacities under their peaks
#    (retries give cached segments back, OOMs) under `torch`, expandable segments and `cuda`, and
#    kk_ctx512_fullstep on the whole card, on an H200: with the traces at hand, the simulator's
#    device calls are the GPU's, the same calls, sizes and outcomes in the same order, and its
#    device memory and OOMs the GPU's.
A="$MEMPLAY_SRC/docs/measurements/h200-2026-11-28c/raw"
if [ -n "${MEMPLAY_TRACES:-}" ] && [ -d "$MEMPLAY_TRACES/pytorch" ]; then
  for row in "kk_ctx128_fullstep 52GiB" "kk_ctx128_fullstep 44GiB" "wed_medium_256_training 8GiB" \
    "kk_ctx512_fullstep full" "kk_ctx512_fullstep 48GiB" \
    "kk_ctx128_fullstep 44GiB torch_expandable torch:expandable_segments:True" \
    "wed_medium_256_training 8GiB torch_expandable torch:expandable_segments:True" \
    "kk_ctx512_fullstep 48GiB torch_expandable torch:expandable_segments:True" \
    "kk_ctx128_fullstep 44GiB cuda cuda" "wed_medium_256_training 8GiB cuda cuda" "kk_ctx512_fullstep 48GiB cuda cuda"; do
    set -- $row
    f="$MEMPLAY_TRACES/pytorch/$1.pickle"
    [ -f "$f" ] || continue
    stored "$1" "$f" || continue
    name="$1_${3:-torch}_$2"
    g="$A/gpu_$name.out"
    cap=()
    [ "$2" = full ] || cap=(--capacity "$2")
    expect 0 replay "$1" --allocator "${4:-torch}" "${cap[@]}" --live-start --no-fail --no-save --json --device-calls "$T/calls"
    [ "$(json_get peak_reserved_bytes)" = "$(jx "$g" '$.measured.device_peak_bytes')" ] ||
      fail "$name: $(json_get peak_reserved_bytes) bytes, the GPU measured $(jx "$g" '$.measured.device_peak_bytes')"
    [ "$(json_get ooms)" = "$(jx "$g" '$.ooms')" ] || fail "$name: $(json_get ooms) OOMs, the GPU's $(jx "$g" '$.ooms')"
    # (an expandable segment's reservation is sized by the card's memory, not the capacity)
    gzip -dc "$A/calls_$name.txt.gz" | awk '$1 == "gpu" && $4 != "reserve" { print $4, $5, $8 }' >"$T/gpu_calls"
    awk '$1 == "sim" && $4 != "reserve" { print $4, $5, $8 }' "$T/calls" >"$T/sim_calls"
    [ -s "$T/gpu_calls" ] && cmp -s "$T/gpu_calls" "$T/sim_calls" ||
      fail "$name: the device calls differ from the GPU's: $(diff "$T/gpu_calls" "$T/sim_calls" | head -4)"
  done
fi
# 13. docs/measurements/h200-2026-11-28e: PyTorch itself under max_split_size_mb and
#    roundup_power2_divisions (its snapshots, recorded on an H200): validate agrees with every
#    decision under the settings each recorded, and the peaks are PyTorch's own; under PyTorch's
#    defaults the two jobs with a split limit take other segments (the settings are read).
E="$MEMPLAY_SRC/docs/measurements/h200-2026-11-28e/raw"
for row in "torch_b8_fp32_split24 81 60" "torch_b8_fp32_roundup4 61 60" "torch_b16_fp32_split24_roundup 92 46"; do
  set -- $row
  expect 0 import "$E/$1.pickle.gz" --name "$1"
  expect 0 validate "$1" --no-save --json
  [ "$(json_get agree)" = true ] && [ "$(json_get address_matches)" = 1437 ] && [ "$(json_get final_state_match)" = true ] ||
    fail "$1: validate disagrees with PyTorch: $(head -c 300 "$T/out")"
  [ "$(json_get segment_matches)" = "$2" ] && [ "$(jx "$E/$1.json" '$.num_device_alloc')" = "$2" ] ||
    fail "$1: $(json_get segment_matches) segments matched, PyTorch made $2"
  [ "$(json_get replayed_peak_reserved_bytes)" = "$(jx "$E/$1.json" '$.max_reserved')" ] ||
    fail "$1: peak reserved $(json_get replayed_peak_reserved_bytes), PyTorch's $(jx "$E/$1.json" '$.max_reserved')"
  [ "$(json_get replayed_peak_allocated_bytes)" = "$(jx "$E/$1.json" '$.max_allocated')" ] ||
    fail "$1: peak allocated $(json_get replayed_peak_allocated_bytes), PyTorch's $(jx "$E/$1.json" '$.max_allocated')"
  expect 0 replay "$1" --allocator torch:expandable_segments:False --no-save --json
  [ "$(json_get device_mallocs)" = "$3" ] || fail "$1 under PyTorch's defaults: $(json_get device_mallocs) segments, wanted $3"
done
finish
