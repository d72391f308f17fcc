#!/usr/bin/env bash
# gpu_record_jobs.sh BUNDLE OUT: the GPU calibrated, and the small PyTorch job of tests/gpu/torch_train.py
# recorded at batch 8 and 16 in fp32 and bf16, and tests/gpu/membound.py's memory-bound kernels of
# every length (as membound), each recording exported as OUT/JOB.jsonl: what
# tools/gpu_cross_device.py compares with the same jobs recorded on another GPU (the time model's
# kernels scaled from one card to the other, against the other card's own kernel times). BUNDLE
# and OUT as for tools/gpu_checks.sh. Exit status: 0 when every step passed, 1 otherwise.
set -uo pipefail
. "$(dirname "$0")/gpu_step.sh" # bundle_env, step
bundle_env "usage: tools/gpu_record_jobs.sh BUNDLE OUT" "$@"
mp=("$M" --db "$O/gpu.db")
failed=0
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
} >"$O/machine.txt" 2>&1
step calibrate 150 "${mp[@]}" calibrate --json
for b in 8 16; do
  for p in fp32 bf16; do
    j="torch_b${b}_$p"
    step "record_$j" 120 "${mp[@]}" record --name "$j" --json -- python3 tests/gpu/torch_train.py "$b" "$p" "$O/$j" &&
      step "export_$j" 30 "${mp[@]}" export "$j" --format jsonl -o "$O/$j.jsonl"
  done
done
step record_membound 120 "${mp[@]}" record --name membound --json -- python3 tests/gpu/membound.py &&
  step export_membound 30 "${mp[@]}" export membound --format jsonl -o "$O/membound.jsonl"
echo "failed=$failed"
exit "$failed"
