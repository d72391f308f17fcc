#!/usr/bin/env bash
# test_replay_device.sh: `memplay replay --device`: capacity from the profile, --capacity wins, step times.
set -u
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db="$tmp/store.db"
mp() { "$MEMPLAY" --db "$db" "$@"; }

mp gen --events 20000 --seed 3 --batch 8 --name g >/dev/null || fail "gen failed"

# --device: capacity and the models' total memory from the profile; time predicted
mp replay g --device A100-80GB --no-save --json >"$tmp/out" || fail "replay --device failed"
grep -q '"device":"A100-80GB"' "$tmp/out" || fail "no device in the result"
grep -q '"capacity_bytes":84813021184' "$tmp/out" || fail "capacity not the profile's less its context: $(head -c 400 "$tmp/out")"
grep -q '"card_bytes":85100068864,"context_bytes":287047680' "$tmp/out" || fail "no card and context bytes: $(head -c 400 "$tmp/out")"
grep -q '"step_time_s":[0-9]' "$tmp/out" || fail "no step_time_s"
grep -q '"samples_per_s":[0-9]' "$tmp/out" || fail "no samples_per_s"
grep -q '"time":{' "$tmp/out" || fail "no time section"
grep -q '"device_chosen_by":"option"' "$tmp/out" || fail "device not marked as chosen by option"
grep -q '"breakdown_s":{"host":' "$tmp/out" || fail "no breakdown"
grep -q '"critical_path":\[{' "$tmp/out" || fail "no critical path"
# the existing keys are still there
for k in trace allocator capacity_bytes events peak_allocated_bytes peak_reserved_bytes fragmentation ooms elapsed_s; do
  grep -q "\"$k\":" "$tmp/out" || fail "result lost the key $k"
done

# --capacity wins over the profile
mp replay g --device A100-80GB --capacity 1GiB --no-save --json >"$tmp/out"
[ $? = 3 ] || fail "replay --capacity 1GiB (does not fit) did not exit 3"
grep -q '"capacity_bytes":1073741824' "$tmp/out" || fail "--capacity did not win"

# a smaller card: its capacity can make the replay run out of memory
mp replay g --device T4 --capacity 100MiB --no-save --json >"$tmp/out"
[ $? = 3 ] || fail "replay on a small capacity did not exit 3"
grep -q '"ooms":0,' "$tmp/out" && fail "no OOM at 100 MiB"

# no --device: the trace's recorded device (gen records H100) is used for time, capacity stays unlimited
mp replay g --no-save --json >"$tmp/out" || fail "replay without --device failed"
grep -q '"device_chosen_by":"recorded"' "$tmp/out" || fail "recorded device not used"
grep -q '"device":"H100"' "$tmp/out" || fail "not the H100 profile"
grep -q '"capacity_bytes":null' "$tmp/out" || fail "capacity changed without --device"
mp replay g --no-save >"$tmp/out" || fail "human replay failed"
grep -q "time on H100 (builtin profile, chosen for the trace's recorded device 'H100')" "$tmp/out" ||
  fail "the human output does not say which device: $(cat "$tmp/out")"
grep -q "samples/s (batch size 8)" "$tmp/out" || fail "no throughput line"

# --timing
mp replay g --device H100 --timing copies=recorded,device_waits=drop,kernel_scale=0.5 --no-save --json >"$tmp/out" ||
  fail "--timing failed"
grep -q '"copies":"recorded","device_waits":"drop"' "$tmp/out" || fail "--timing not applied"
grep -q '"kernel_scale":0.5' "$tmp/out" || fail "kernel_scale not applied"

# the run is stored with its step time and device
mp replay g --device L4 --no-fail --json >"$tmp/out" || fail "stored replay failed" # g does not fit 24 GB
[ "$(sqlite3 "$db" "SELECT device, step_time_s > 0, samples_per_s > 0 FROM runs ORDER BY id DESC LIMIT 1")" = "L4|1|1" ] ||
  fail "run not stored with device and step time"

# a trace whose device matches no profile: no time prediction, said so
cat >"$tmp/t.jsonl" <<'JSONL'
{"memplay":1,"name":"odd","device_name":"Mystery Accelerator","batch_size":2}
{"kind":"marker","ts":0,"flags":["step_begin"]}
{"kind":"kernel","ts":100,"dur":5000,"stream":1,"api_dur":10}
{"kind":"sync","ts":200,"stream":1,"dur":5000}
{"kind":"marker","ts":6000,"flags":["step_end"]}
JSONL
mp import "$tmp/t.jsonl" >/dev/null || fail "import failed"
mp replay odd --no-save >"$tmp/out" || fail "replay of odd failed"
grep -q "time: no prediction (the trace's device 'Mystery Accelerator' matches no profile" "$tmp/out" ||
  fail "no 'no prediction' line: $(cat "$tmp/out")"
mp replay odd --no-save --json >"$tmp/out" || fail "replay --json of odd failed"
grep -q '"step_time_s"' "$tmp/out" && fail "step_time_s without a device"
# with a device: kernel 5 us after its launch latency, the sync wakes after it
mp replay odd --device H100 --no-save --json >"$tmp/out" || fail "replay odd --device failed"
grep -q '"samples_per_s":' "$tmp/out" || fail "no samples_per_s for odd"

# a batch size for a trace that does not record one
mp replay odd --device H100 --timing batch=64 --no-save --json >"$tmp/out" || fail "--timing batch failed"
sps=$(sed -n 's/.*"samples_per_s":\([0-9.e+]*\).*/\1/p' "$tmp/out")
st=$(sed -n 's/.*"step_time_s":\([0-9.e+-]*\).*/\1/p' "$tmp/out")
awk -v a="$sps" -v s="$st" 'BEGIN { exit !(a > 0 && (a * s > 63.9 && a * s < 64.1)) }' || fail "samples_per_s $sps is not 64 / $st"

# recorded cudaMalloc calls: replaced by the replayed allocator's calls when the trace records
# its allocations, kept when it does not
cat >"$tmp/a.jsonl" <<'JSONL'
{"memplay":1,"name":"calls_only","device_name":"H100"}
{"kind":"marker","ts":0,"flags":["step_begin"]}
{"kind":"api","ts":100,"api_dur":50000,"name":"cudaMalloc"}
{"kind":"marker","ts":60000,"flags":["step_end"]}
JSONL
cat >"$tmp/b.jsonl" <<'JSONL'
{"memplay":1,"name":"with_allocs","device_name":"H100"}
{"kind":"marker","ts":0,"flags":["step_begin"]}
{"kind":"alloc","ts":50,"addr":1,"size":4096}
{"kind":"api","ts":100,"api_dur":50000,"name":"cudaMalloc"}
{"kind":"marker","ts":60000,"flags":["step_end"]}
JSONL
mp import "$tmp/a.jsonl" >/dev/null && mp import "$tmp/b.jsonl" >/dev/null || fail "import of the call traces failed"
mp replay calls_only --allocator ideal --no-save --json >"$tmp/out" || fail "replay calls_only failed"
grep -q '"predicted_s":6e-05' "$tmp/out" || fail "recorded cudaMalloc time not kept: $(grep -o '"steps":[^]]*' "$tmp/out")"
mp replay with_allocs --allocator ideal --no-save --json >"$tmp/out" || fail "replay with_allocs failed"
grep -q '"predicted_s":1e-05' "$tmp/out" || fail "recorded cudaMalloc time not replaced: $(grep -o '"steps":[^]]*' "$tmp/out")"

# errors
expect() {
  local code=$1 msg=$2
  shift 2
  mp "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$code" ] || fail "'$*' exited $rc, not $code: $(cat "$tmp/err")"
  grep -q -- "$msg" "$tmp/err" || fail "'$*' said: $(cat "$tmp/err")"
}
expect 1 "no device profile 'Z80'" replay g --device Z80 --no-save
expect 2 "time option 'copies' does not take 'maybe'" replay g --device H100 --timing copies=maybe
expect 2 "unknown time option 'speed'" replay g --device H100 --timing speed=1
expect 2 "--timing needs a device profile" replay odd --timing copies=model
exit 0
