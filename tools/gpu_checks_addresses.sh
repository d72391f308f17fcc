#!/usr/bin/env bash
# gpu_checks_addresses.sh BUNDLE OUT: the simulated driver's addresses (docs/accuracy.md, "The
# simulated driver's addresses") against the GPU's, where many segments are given back: shared
# snapshots replayed on the GPU under `torch` at capacities under their peaks, whose OOMs and
# retries free cached segments, and kk_ctx512_fullstep, whose recorded order the rule misses,
# each with --device-calls (the plan's calls and the GPU's, one per line: docs/gpu.md); and the
# same capacities under expandable segments and under `cuda`. Each snapshot is read from
# BUNDLE/traces, else MEMPLAY_TRACES/pytorch (default ../shared/traces beside the source tree); one
# found in neither is left out, and said so. BUNDLE and OUT as for tools/gpu_checks.sh, which runs
# this as its step 8 (OUT/gpu.db the same store: a snapshot already there is not imported again).
# Compare a call file's two sides with
#   diff <(awk '$1 == "plan" {$1 = ""; $6 = ""; print}' F) <(awk '$1 == "gpu" {$1 = ""; $6 = ""; print}' F)
# and tools/address_order.py counts the GPU's order once the files are kept in docs/measurements.
# Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail
. "$(dirname "$0")/gpu_step.sh" # bundle_env, step
bundle_env "usage: tools/gpu_checks_addresses.sh BUNDLE OUT" "$@"
traces=${MEMPLAY_TRACES:-$(dirname "$0")/../../shared/traces}
mp=("$M" --db "$O/gpu.db")
failed=0

have=" "
for t in kk_ctx128_fullstep wed_medium_256_training kk_ctx512_fullstep; do
  f="$B/traces/$t.pickle"
  [ -e "$f" ] || f="$traces/pytorch/$t.pickle"
  if [ ! -e "$f" ]; then
    echo "$t: not in $B/traces nor in $traces/pytorch: its replays are left out"
    continue
  fi
  step "import_$t" 60 "${mp[@]}" import "$f" --name "$t" --json && have+="$t "
done

# at TRACE CAPACITY [RUN [ALLOCATOR NAME]]: one replay on the GPU (under torch unless ALLOCATOR), its
# device calls kept.
at() {
  local t=$1 c=$2 a=${4:-torch} name="${1}_${5:-torch}_${2}${3:+_$3}" cap=()
  [[ $have == *" $t "* ]] || return 0
  [ "$c" = full ] || cap=(--capacity "$c")
  step "gpu_$name" 120 "${mp[@]}" replay "$t" --backend cuda --allocator "$a" "${cap[@]}" --no-fail --json \
    --device-calls "$O/calls_$name.txt"
}
at kk_ctx128_fullstep 52GiB    # retries give cached segments back, no OOM in the plan
at kk_ctx128_fullstep 44GiB    # and OOMs
at kk_ctx128_fullstep 44GiB r2 # the same again: does the driver repeat itself?
at wed_medium_256_training 8GiB
at kk_ctx512_fullstep full
at kk_ctx512_fullstep 48GiB
# the same pressure on the other ways to the device: mappings that grow and shrink, and one
# cudaMalloc per request (the driver's page packing)
for t in "kk_ctx128_fullstep 44GiB" "wed_medium_256_training 8GiB" "kk_ctx512_fullstep 48GiB"; do
  read -r tr cap <<<"$t"
  at "$tr" "$cap" "" torch:expandable_segments:True torch_expandable
  at "$tr" "$cap" "" cuda cuda
done
echo "failed=$failed"
exit "$failed"
