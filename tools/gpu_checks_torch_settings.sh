#!/usr/bin/env bash
# gpu_checks_torch_settings.sh BUNDLE OUT: the `torch` model's rules for PyTorch's non-default
# allocator settings against PyTorch itself: tests/gpu/torch_train.py run under
# PYTORCH_CUDA_ALLOC_CONF settings that change its decisions (max_split_size_mb: oversize blocks
# neither split nor taken by smaller requests; roundup_power2_divisions: sizes rounded to
# divisions of their power of two; both at once), each with PyTorch's own memory snapshot, which
# records the settings; the snapshot imported and `memplay validate`d (every decision, and the
# final state, against the model under the recorded settings), then replayed on the GPU. BUNDLE
# and OUT as for tools/gpu_checks.sh; OUT/gpu.db the store. Needs PyTorch with CUDA.
# Exit status: 0 when every step passed, 1 otherwise, 2 when PyTorch is not at hand.
set -uo pipefail
. "$(dirname "$0")/gpu_step.sh" # bundle_env, step
bundle_env "usage: tools/gpu_checks_torch_settings.sh BUNDLE OUT" "$@"
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null || {
  echo "gpu_checks_torch_settings.sh: PyTorch with a CUDA device is not at hand here; nothing was run"
  exit 2
}
mp=("$M" --db "$O/gpu.db")
failed=0

# job NAME BATCH SETTINGS: the job under PYTORCH_CUDA_ALLOC_CONF=SETTINGS, its snapshot validated.
job() {
  local name=$1 batch=$2 conf=$3
  PYTORCH_CUDA_ALLOC_CONF=$conf step "record_$name" 180 python3 tests/gpu/torch_train.py "$batch" fp32 "$O/$name" --snapshot ||
    return
  step "import_$name" 60 "${mp[@]}" import "$O/$name.pickle" --name "$name" --json || return
  step "validate_$name" 60 "${mp[@]}" validate "$name" --json
  step "gpu_${name}_torch" 60 "${mp[@]}" replay "$name" --backend cuda --allocator torch --json
}
job torch_b8_fp32_split24 8 max_split_size_mb:24
job torch_b8_fp32_roundup4 8 roundup_power2_divisions:4
job torch_b16_fp32_split24_roundup 16 'max_split_size_mb:24,roundup_power2_divisions:[32:4,256:8,>:2]'
echo "failed=$failed"
exit "$failed"
