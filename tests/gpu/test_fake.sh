#!/usr/bin/env bash
# memplay built against the pretend GPU of tests/fake_cuda.c: the GPU commands end to end, as a
# user runs them, without a GPU: replay --backend cuda (output, stored run, refusal, --scale fit,
# a failing CUDA call), calibrate (the stored profile), and record's handling of what recorded
# processes leave (traces, errors, --output, names, exit status).
set -uo pipefail
M="$MEMPLAY_FAKEGPU"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
export MEMPLAY_DB="$T/memplay.db"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
run() { # run STATUS ARGS...
  local want=$1
  shift
  "$M" "$@" >"$T/out" 2>"$T/err"
  local rc=$?
  [ "$rc" = "$want" ] || fail "memplay $* exited $rc, wanted $want: $(head -c 600 "$T/err")"
}
has() { grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks '$2': $(head -c 600 "$1")"; }
q() { sqlite3 "$MEMPLAY_DB" "$1"; }

run 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample

# The sample needs 18.4 GiB: a 16 GiB pretend GPU refuses it, and nothing is stored.
FAKE_CUDA_MEMORY=$((16 << 30)) run 1 replay sample --backend cuda --allocator cuda
has "$T/err" "not replaying 'sample' on the GPU: the replay needs"
has "$T/err" "--scale fit"
[ "$(q "SELECT count(*) FROM runs")" = 0 ] || fail "a refused replay stored a run"

# With room, it runs: the table, and the run stored with the measurements.
FAKE_CUDA_MEMORY=$((32 << 30)) run 0 replay sample --backend cuda --allocator cuda
has "$T/out" "replay of 'sample' under cuda on Fake GPU 0 (GPU 0)"
has "$T/out" "device memory in use"
has "$T/out" "at the trace's peak (event 3370)"
has "$T/out" "1408 kernels"
has "$T/out" "stored as run 1"
[ "$(q "SELECT backend || ' ' || kind FROM runs WHERE id = 1")" = "cuda backend" ] || fail "run kind"
peak=$(q "SELECT json_extract(result, '\$.measured.device_peak_bytes') FROM runs WHERE id = 1")
pred=$(q "SELECT json_extract(result, '\$.predicted.device_peak_bytes') FROM runs WHERE id = 1")
[ "$peak" -gt 0 ] && [ "$peak" -ge "$pred" ] || fail "measured $peak, predicted $pred"
[ "$(q "SELECT json_array_length(json_extract(result, '\$.measured.step_s')) FROM runs WHERE id = 1")" -ge 1 ] ||
  fail "no step times stored"

# --scale fit on the small GPU, as JSON; the real pool with the async model's options.
FAKE_CUDA_MEMORY=$((16 << 30)) run 0 replay sample --backend cuda --allocator async:release_threshold=max --scale fit --json --no-save
has "$T/out" '"scale_fitted":true'
has "$T/out" '"backend":"cuda"'
has "$T/out" '"error_pct":{'
has "$T/out" '"paced":false'
# --device-calls on the GPU: the plan's calls and the GPU's, the same calls of the same sizes here.
FAKE_CUDA_MEMORY=$((32 << 30)) run 0 replay sample --backend cuda --allocator torch --no-save --device-calls "$T/calls.txt"
grep -q '^plan 0 1 malloc ' "$T/calls.txt" || fail "device calls: no plan lines"
grep -q '^gpu 0 1 malloc ' "$T/calls.txt" || fail "device calls: no GPU lines"
[ "$(awk '$1 == "plan" { print $4, $5 }' "$T/calls.txt")" = "$(awk '$1 == "gpu" { print $4, $5 }' "$T/calls.txt")" ] ||
  fail "device calls: the plan's and the GPU's calls differ"
# A paced run says so in what it stores.
FAKE_CUDA_MEMORY=$((32 << 30)) run 0 replay sample --backend cuda --allocator cuda --pace --json --no-save
has "$T/out" '"paced":true,"pace":"clock"'
# Pacing by the recorded host time between calls (--pace=gaps) on a trace with 30 ms of host work a
# step: every gap is waited for, however late the replay runs (--pace=clock waits only for events
# not yet due), so it takes at least the recorded host work, and no less than the clock's pacing.
python3 "$MEMPLAY_SRC/tests/gpu/gen_host_gaps.py" >"$T/host_gaps.jsonl" && run 0 import "$T/host_gaps.jsonl" --name host_gaps
FAKE_CUDA_MEMORY=$((32 << 30)) run 0 replay host_gaps --backend cuda --allocator torch --pace=clock --json --no-save
clock=$(sqlite3 :memory: "SELECT json_extract(readfile('$T/out'), '\$.measured.wall_s')")
FAKE_CUDA_MEMORY=$((32 << 30)) run 0 replay host_gaps --backend cuda --allocator torch --pace=gaps --json --no-save
has "$T/out" '"paced":true,"pace":"gaps"'
gaps=$(sqlite3 :memory: "SELECT json_extract(readfile('$T/out'), '\$.measured.wall_s') || ' ' || json_extract(readfile('$T/out'), '\$.measured.pace_wait_s')")
awk -v g="$gaps" -v c="$clock" 'BEGIN { split(g, x, " "); exit !(x[2] >= 0.24 && x[1] >= 0.24 && x[1] >= c * 0.98) }' ||
  fail "--pace=gaps: wall and wait $gaps s, --pace=clock $clock s"
FAKE_CUDA_MEMORY=$((32 << 30)) run 0 replay host_gaps --backend cuda --allocator torch --pace=gaps --no-save
has "$T/out" "(--pace=gaps: "

# A CUDA call that fails names itself and the event.
FAKE_CUDA_MEMORY=$((32 << 30)) FAKE_CUDA_FAIL=cuLaunchKernel:10 run 1 replay sample --backend cuda --allocator cuda --no-save
has "$T/err" "cuLaunchKernel of the spin kernel"
grep -Eq "event [0-9]+: cuLaunchKernel" "$T/err" || fail "the failure does not name the event: $(cat "$T/err")"

# calibrate stores a profile named after the device, or --name.
run 0 calibrate --quick
has "$T/out" "stored as device profile 'Fake-GPU-0'"
run 0 calibrate --quick --name mine --json
has "$T/out" '"name":"mine"'
has "$T/out" '"h2d_pinned_bw":'
run 2 calibrate --name "has space"
[ "$(q "SELECT group_concat(name || ':' || source, ',') FROM (SELECT * FROM device_profiles ORDER BY name)")" = "Fake-GPU-0:calibrated,mine:calibrated" ] ||
  fail "profiles: $(q "SELECT name, source FROM device_profiles")"

# record: what each process leaves in MEMPLAY_RECORD_DIR is imported; the exit status is the program's.
cat >"$T/prog.sh" <<'EOF'
#!/bin/sh
# stands in for a CUDA program whose recorder wrote a trace (and a second process whose did not)
[ -n "$CUDA_INJECTION64_PATH" ] || exit 99
printf '%s\n' '{"memplay":1,"source_format":"recorded","allocator":"cuda"}' \
  '{"kind":"alloc","ts":0,"addr":"0x7f0000000000","size":4194304,"flags":["device_api"]}' \
  '{"kind":"free","ts":100,"addr":"0x7f0000000000"}' >"$MEMPLAY_RECORD_DIR/$$.jsonl"
echo "cannot record: cuptiSubscribe failed" >"$MEMPLAY_RECORD_DIR/77.error"
exit "${1:-0}"
EOF
chmod +x "$T/prog.sh"
run 5 record --recorder "$RECORDER" --name job --output "$T/job.jsonl" -- "$T/prog.sh" 5
has "$T/out" "recorded 'job'"
has "$T/out" "exited with status 5"
has "$T/err" "process 77: cannot record: cuptiSubscribe failed"
[ -s "$T/job.jsonl" ] || fail "--output not written"
[ "$(q "SELECT event_count || ' ' || source_format || ' ' || source_file FROM traces WHERE name = 'job'")" = "2 recorded $T/job.jsonl" ] ||
  fail "recorded trace: $(q "SELECT * FROM traces WHERE name = 'job'")"
run 1 record --recorder "$RECORDER" --name job -- "$T/prog.sh"
has "$T/err" "a trace named 'job' already exists"
run 0 record --recorder "$RECORDER" --json -- "$T/prog.sh"
has "$T/out" '"exit_status":0'
has "$T/out" '"name":"prog.sh"'
# A program that leaves nothing: its status if it failed, else 1.
run 3 record --recorder "$RECORDER" -- sh -c 'exit 3'
has "$T/err" "left no trace"
run 1 record --recorder "$RECORDER" -- true
has "$T/err" "left no trace"
run 1 record --recorder "$RECORDER" -- /nonexistent/program
has "$T/err" "cannot run '/nonexistent/program'"
run 1 record --recorder "$T/nope.so" -- true
has "$T/err" "cannot use the recorder"
# A recorder that cannot be loaded is reported with the loader's reason, and nothing is run.
run 1 record --recorder "$UNLOADABLE_RECORDER" -- touch "$T/ran"
has "$T/err" "cannot be loaded: $UNLOADABLE_RECORDER: undefined symbol: memplay_test_symbol_nothing_defines"
[ ! -e "$T/ran" ] || fail "the program ran with a recorder that cannot be loaded"
echo "not a library" >"$T/text.so"
run 1 record --recorder "$T/text.so" -- touch "$T/ran"
has "$T/err" "the recorder '$T/text.so' cannot be loaded: "
[ ! -e "$T/ran" ] || fail "the program ran with a recorder that is not a library"
FAKE_CUDA_NO_DRIVER=1 run 1 record --recorder "$RECORDER" -- true
has "$T/err" "no NVIDIA driver"

[ "$failures" = 0 ] || exit 1
echo "ok: the GPU commands on a pretend GPU"
