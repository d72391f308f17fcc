#!/usr/bin/env bash
# gpu_checks_pace.sh BUNDLE OUT: pacing on the GPU (memplay replay --backend cuda --pace) against the
# time model: tests/gpu/gen_host_gaps.py's trace, whose recorded host work (30 ms a step) exceeds
# the GPU's, and a small PyTorch job recorded here (when PyTorch is installed and GPU_CHECKS_TORCH
# is not 0), each replayed under cuda and torch unpaced, paced by the recorded clock
# (--pace=clock) and by the recorded time between calls (--pace=gaps), beside the simulator's
# prediction on this GPU's calibrated profile with the recorded kernel durations (the GPU spins
# for those). tools/gpu_derive.py makes tables/pacing.csv of it. BUNDLE and OUT as for
# tools/gpu_checks.sh, which runs this as part of its step 5; OUT/gpu.db is the same store, and a
# calibration is made first when it holds none.
# Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail
. "$(dirname "$0")/gpu_step.sh" # bundle_env, step
bundle_env "usage: tools/gpu_checks_pace.sh BUNDLE OUT" "$@"
mp=("$M" --db "$O/gpu.db")
failed=0
calibrated() { sqlite3 "$O/gpu.db" "SELECT name FROM device_profiles WHERE source = 'calibrated' LIMIT 1" 2>/dev/null; }
profile=$(calibrated)
[ -n "$profile" ] || { step calibrate 150 "${mp[@]}" calibrate --json; profile=$(calibrated); }

# paced TRACE ALLOCATOR: the three replays on the GPU and the prediction.
paced() {
  local t=$1 a=$2
  for pace in clock gaps; do
    step "gpu_${t}_${a}_pace_$pace" 120 "${mp[@]}" replay "$t" --backend cuda --allocator "$a" --pace="$pace" --json
  done
  step "gpu_${t}_$a" 60 "${mp[@]}" replay "$t" --backend cuda --allocator "$a" --json
  [ -n "$profile" ] &&
    step "sim_${t}_$a" 30 "${mp[@]}" replay "$t" --allocator "$a" --device "$profile" --timing kernels=recorded --no-save --json
}
python3 tests/gpu/gen_host_gaps.py >"$O/host_gaps.jsonl" && "${mp[@]}" import "$O/host_gaps.jsonl" --name host_gaps >/dev/null &&
  for a in cuda torch; do paced host_gaps "$a"; done
if [ "${GPU_CHECKS_TORCH:-1}" != 0 ] && python3 -c 'import torch' 2>/dev/null; then
  j=torch_b8_fp32_pacing
  step "record_$j" 120 "${mp[@]}" record --name "$j" --json -- python3 tests/gpu/torch_train.py 8 fp32 "$O/$j" &&
    paced "$j" torch
fi
echo "failed=$failed"
exit "$failed"
