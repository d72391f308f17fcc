#!/usr/bin/env bash
# The bfc and async models from the command line: a generated trace and the bundled sample replayed
# under each, with options, environment variables and a device capacity; option errors.
set -euo pipefail
: "${MEMPLAY:?}" "${MEMPLAY_SRC:?}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db="$tmp/t.db"
fail=0
field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p" | head -n 1; }
check() { # check DESCRIPTION TEST...
  local what=$1
  shift
  if "$@"; then echo "ok   $what"; else echo "FAIL $what"; fail=1; fi
}
replay() { "$MEMPLAY" --db "$db" replay "$@" --no-save --json; }

"$MEMPLAY" --db "$db" gen --events 200000 --seed 3 --name g >/dev/null
"$MEMPLAY" --db "$db" import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample >/dev/null

# bfc: TensorFlow's defaults take the whole limit in one region; allow_growth takes regions as needed
out=$(replay g --allocator bfc --check)
check "bfc: no OOM on an unlimited device" [ "$(field ooms <<<"$out")" = 0 ]
check "bfc: one region without allow_growth" [ "$(field device_mallocs <<<"$out")" = 1 ]
whole=$(field peak_reserved_bytes <<<"$out")
out=$(TF_FORCE_GPU_ALLOW_GROWTH=true replay g --allocator bfc)
check "bfc: TF_FORCE_GPU_ALLOW_GROWTH=true grows regions" [ "$(field device_mallocs <<<"$out")" -gt 1 ]
check "bfc: growing reserves less than the whole limit" [ "$(field peak_reserved_bytes <<<"$out")" -lt "$whole" ]
grown=$(field peak_reserved_bytes <<<"$out")
out=$(replay g --allocator bfc:allow_growth=true)
check "bfc: allow_growth=true as the environment variable" [ "$(field peak_reserved_bytes <<<"$out")" = "$grown" ]
out=$(TF_FORCE_GPU_ALLOW_GROWTH=false replay g --allocator bfc:allow_growth=true)
check "bfc: TF_FORCE_GPU_ALLOW_GROWTH=false overrides the option" [ "$(field device_mallocs <<<"$out")" = 1 ]

# a limit below the workload's peak: OOMs, and never more reserved than the limit
out=$(replay g --allocator bfc:memory_limit=4GiB,allow_growth=true,garbage_collection=true,fragmentation_fraction=0.1 --check)
check "bfc: OOMs under a 4 GiB limit" [ "$(field ooms <<<"$out")" -gt 0 ]
check "bfc: reserved stays within the limit" [ "$(field peak_reserved_bytes <<<"$out")" -le 4294967296 ]
# a device smaller than the limit: the region is cut back (0.9 at a time) to what the device gives
out=$(replay g --allocator bfc:memory_limit=16GiB --capacity 6GiB)
res=$(field peak_reserved_bytes <<<"$out")
check "bfc: a 16 GiB limit on a 6 GiB device reserves at most 6 GiB" [ "$res" -le 6442450944 ]
check "bfc: ... and more than 5 GiB" [ "$res" -gt 5368709120 ]
check "bfc: ... with OOMs" [ "$(field ooms <<<"$out")" -gt 0 ]

# async: memory goes back at every synchronization unless the threshold keeps it
out=$(replay g --allocator async --check)
check "async: no OOM on an unlimited device" [ "$(field ooms <<<"$out")" = 0 ]
check "async: threshold 0 returns memory at synchronizations" [ "$(field device_frees <<<"$out")" -gt 0 ]
out=$(replay g --allocator async:release_threshold=max)
check "async: release_threshold=max keeps it" [ "$(field device_frees <<<"$out")" = 0 ]
out=$(replay g --allocator async:reuse_allow_opportunistic=false,reuse_allow_internal_dependencies=true --capacity 6GiB)
check "async: OOMs on a 6 GiB device" [ "$(field ooms <<<"$out")" -gt 0 ]
check "async: reserved within the device" [ "$(field peak_reserved_bytes <<<"$out")" -le 6442450944 ]

# any trace under any allocator: the bundled JSON Lines sample
for a in bfc async; do
  out=$(replay sample --allocator "$a" --capacity 24GB --check)
  check "$a: the sample replays" [ "$(field events <<<"$out")" -gt 0 ]
done
"$MEMPLAY" --db "$db" replay sample --allocator bfc --capacity 24GB --no-save >"$tmp/human" 2>&1
check "bfc: human output names the model" grep -q "under bfc" "$tmp/human"

# option errors: unknown keys are usage errors (2) listing what is accepted; bad values fail (1)
set +e
"$MEMPLAY" --db "$db" replay g --allocator bfc:allow_grow=true --no-save >/dev/null 2>"$tmp/err"
rc=$?
set -e
check "bfc: unknown option exits 2" [ "$rc" = 2 ]
check "bfc: ... and lists the accepted options" grep -q "accepted: allow_growth, memory_limit, per_process_gpu_memory_fraction" "$tmp/err"
set +e
"$MEMPLAY" --db "$db" replay g --allocator async:threshold=1 --no-save >/dev/null 2>"$tmp/err"
rc=$?
set -e
check "async: unknown option exits 2" [ "$rc" = 2 ]
check "async: ... and lists the accepted options" grep -q "accepted: release_threshold, reuse_follow_event_dependencies" "$tmp/err"
set +e
"$MEMPLAY" --db "$db" replay g --allocator bfc:memory_limit=lots --no-save >/dev/null 2>"$tmp/err"
rc=$?
set -e
check "bfc: a bad value exits 1" [ "$rc" = 1 ]
check "bfc: ... saying what it wants" grep -q "option 'memory_limit' wants a size" "$tmp/err"
set +e
"$MEMPLAY" --db "$db" replay g --allocator async:release_threshold=-1 --no-save >/dev/null 2>"$tmp/err"
rc=$?
set -e
check "async: a bad value exits 1" [ "$rc" = 1 ]
exit $fail
