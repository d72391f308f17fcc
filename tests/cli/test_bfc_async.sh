# The bfc and async models from the command line: a generated trace and the sample replayed under
# each with options, environment variables and a capacity; option errors and their exit codes.
. "$TESTS_DIR/cli/lib.sh"

expect 0 gen --events 200000 --seed 3 --name g
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
# replay ARGS...: a replay of g as JSON, not stored; fails the test unless it exits 0.
replay() { expect 0 replay g --no-save --json "$@"; }
# The same where the answer is "no": an OOM predicted exits 3 (the report is printed all the same).
replay_oom() { expect 3 replay g --no-save --json "$@"; }
num() { local v; v=$(json_get "$1"); echo "${v:--1}"; }

# bfc: TensorFlow's defaults take the whole limit in one region; allow_growth grows regions
replay --allocator bfc --check
[ "$(num ooms)" = 0 ] || fail "bfc: OOMs on an unlimited device"
[ "$(num device_mallocs)" = 1 ] || fail "bfc: $(num device_mallocs) regions without allow_growth"
whole=$(num peak_reserved_bytes)
TF_FORCE_GPU_ALLOW_GROWTH=true replay --allocator bfc
[ "$(num device_mallocs)" -gt 1 ] || fail "bfc: TF_FORCE_GPU_ALLOW_GROWTH=true does not grow regions"
grown=$(num peak_reserved_bytes)
[ "$grown" -lt "$whole" ] || fail "bfc: growing reserves $grown, not less than the whole limit $whole"
replay --allocator bfc:allow_growth=true
[ "$(num peak_reserved_bytes)" = "$grown" ] || fail "bfc: allow_growth=true differs from the environment variable"
TF_FORCE_GPU_ALLOW_GROWTH=false replay --allocator bfc:allow_growth=true
[ "$(num device_mallocs)" = 1 ] || fail "bfc: TF_FORCE_GPU_ALLOW_GROWTH=false does not override the option"

# a limit below the workload's peak: OOMs, never more reserved than the limit
replay_oom --allocator bfc:memory_limit=4GiB,allow_growth=true,garbage_collection=true,fragmentation_fraction=0.1 --check
[ "$(num ooms)" -gt 0 ] || fail "bfc: no OOM under a 4 GiB limit"
[ "$(num peak_reserved_bytes)" -le 4294967296 ] || fail "bfc: reserved $(num peak_reserved_bytes) over the limit"
# a device smaller than the limit: the region is cut back, 0.9 at a time, to what the device gives
replay_oom --allocator bfc:memory_limit=16GiB --capacity 6GiB
res=$(num peak_reserved_bytes)
[ "$res" -le 6442450944 ] && [ "$res" -gt 5368709120 ] || fail "bfc: a 16 GiB limit on a 6 GiB device reserved $res"
[ "$(num ooms)" -gt 0 ] || fail "bfc: no OOM on a 6 GiB device"

# async: memory goes back at every synchronization unless the threshold keeps it
replay --allocator async --check
[ "$(num ooms)" = 0 ] || fail "async: OOMs on an unlimited device"
[ "$(num device_frees)" -gt 0 ] || fail "async: threshold 0 returned nothing at synchronizations"
replay --allocator async:release_threshold=max
[ "$(num device_frees)" = 0 ] || fail "async: release_threshold=max returned memory"
replay_oom --allocator async:reuse_allow_opportunistic=false,reuse_allow_internal_dependencies=true --capacity 6GiB
[ "$(num ooms)" -gt 0 ] || fail "async: no OOM on a 6 GiB device"
[ "$(num peak_reserved_bytes)" -le 6442450944 ] || fail "async: reserved more than the device"

# any trace under any allocator: the bundled JSON Lines sample
for a in bfc async; do
  expect 0 replay sample --allocator "$a" --capacity 24GB --no-save --json --check
  [ "$(num events)" -gt 0 ] || fail "$a: the sample did not replay"
done
expect 0 replay sample --allocator bfc --capacity 24GB --no-save
has "$T/out" "under bfc"

# option errors: unknown keys are usage errors (2) listing what is accepted; bad values fail (1)
expect 2 replay g --allocator bfc:allow_grow=true --no-save
has "$T/err" "unknown option 'allow_grow' for allocator 'bfc' (accepted: allow_growth, memory_limit, per_process_gpu_memory_fraction"
expect 2 replay g --allocator async:threshold=1 --no-save
has "$T/err" "(accepted: release_threshold, reuse_follow_event_dependencies"
expect 1 replay g --allocator bfc:memory_limit=lots --no-save
has "$T/err" "option 'memory_limit' wants a size"
expect 1 replay g --allocator async:release_threshold=-1 --no-save
has "$T/err" "option 'release_threshold' wants a size"
finish
