#!/usr/bin/env bash
# gpu_checks_addresses.sh BUNDLE OUT: the simulated driver's addresses (docs/accuracy.md, "The
# simulated driver's addresses") against the GPU's, where many segments are given back: shared
# snapshots replayed on the GPU under `torch` at capacities under their peaks, whose OOMs and
# retries free cached segments, and kk_ctx512_fullstep, whose recorded order the rule misses,
# each with --device-calls (the plan's calls and the GPU's, one per line: docs/gpu.md); and the
# same capacities under expandable segments and under `cuda`. The
# snapshots are read from MEMPLAY_TRACES/pytorch (default ../shared/traces beside the source
# tree). BUNDLE and OUT as for tools/gpu_checks.sh; OUT/gpu.db is a store of its own here.
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

for t in kk_ctx128_fullstep wed_medium_256_training kk_ctx512_fullstep; do
  step "import_$t" 60 "${mp[@]}" import "$traces/pytorch/$t.pickle" --json || exit 1
done

# at TRACE CAPACITY [RUN [ALLOCATOR NAME]]: one replay on the GPU (under torch unless ALLOCATOR), its
# device calls kept.
at() {
  local t=$1 c=$2 a=${4:-torch} name="${1}_${5:-torch}_${2}${3:+_$3}" cap=()
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
  set -- $t
  at "$1" "$2" "" torch:expandable_segments:True torch_expandable
  at "$1" "$2" "" cuda cuda
done
echo "failed=$failed"
exit "$failed"
