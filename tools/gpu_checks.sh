#!/usr/bin/env bash
# gpu_checks.sh BUNDLE OUT: the measurements docs/accuracy.md and docs/gpu.md report from a real
# GPU, in one run: the GPU test (tests/gpu/test_device.sh), a full calibration, replays on the
# GPU of the sample and of real traces predicted against measured, a small CUDA program recorded,
# the parts an earlier run left unmeasured (expandable segments, --capacity, --pace, the real pool
# on two streams, repeats), a small PyTorch job recorded three ways (memplay record, record
# with the caching allocator off, PyTorch's own snapshot) and under its two other allocators, and
# the simulated driver's addresses where segments are given back (tools/gpu_checks_addresses.sh).
# BUNDLE is what tools/gpu_bundle.sh made (with real traces, if any, under BUNDLE/traces);
# everything measured lands in OUT, with OUT/gpu.db the store.
# Run from the source tree's root. Each step has its own time limit; a failed step is reported
# and the others still run. GPU_CHECKS_TORCH=0 leaves out the PyTorch jobs (step 6), GPU_CHECKS_JAX=0
# the JAX job (step 7, tools/gpu_checks_jax.sh).
# Exit status: 0 when every step passed, 1 otherwise. tools/gpu-check.sh is the one command that
# builds, bundles and runs this.
set -uo pipefail
. "$(dirname "$0")/gpu_step.sh" # bundle_env, step
bundle_env "usage: tools/gpu_checks.sh BUNDLE OUT" "$@"
db="$O/gpu.db"
failed=0

mp=("$M" --db "$db")

{
  nvidia-smi
  nvidia-smi --query-gpu=name,memory.total,memory.used,driver_version,pcie.link.gen.current,pcie.link.width.current --format=csv
  uname -a
  python3 -c 'import torch; print("torch", torch.__version__, torch.version.cuda)'
  for f in tensorflow jax; do # record of TensorFlow or JAX needs them here
    python3 -c "import $f; print('$f', $f.__version__)" 2>/dev/null || echo "$f: not installed"
  done
} >"$O/machine.txt" 2>&1

# 1. The GPU test, as CI would run it on a machine with a GPU.
MEMPLAY="$M" MEMPLAY_SRC="$PWD" RECORDER="$B/bin/libmemplay_recorder.so" RECORD_TARGET="$B/bin/gpu_record_target" \
  step test_device 150 bash tests/gpu/test_device.sh

# 2. Calibration, the full run; the profile is stored under the device's name.
step calibrate 150 "${mp[@]}" calibrate --json
profile=$(sqlite3 "$db" "SELECT name FROM device_profiles WHERE source = 'calibrated' LIMIT 1" 2>/dev/null)

# 3. The sample, and real traces, replayed on the GPU under each kind of allocator.
"${mp[@]}" import traces/sample.jsonl --name sample >/dev/null
for a in cuda async torch bfc; do
  step "gpu_sample_$a" 60 "${mp[@]}" replay sample --backend cuda --allocator "$a" --json
done
[ -n "$profile" ] && step "sim_sample_time" 30 "${mp[@]}" replay sample --allocator cuda --device "$profile" --timing kernels=recorded --json
for f in "$B"/traces/*; do
  [ -e "$f" ] || continue
  n=$(basename "$f")
  n=${n%%.*}
  "${mp[@]}" import "$f" --name "$n" >"$O/import_$n.out" 2>&1 || { failed=1; continue; }
  for a in torch cuda; do
    step "gpu_${n}_$a" 60 "${mp[@]}" replay "$n" --backend cuda --allocator "$a" --scale fit --json
  done
done

# 4. A small CUDA program, recorded; the trace is kept.
step record_target 60 "${mp[@]}" record --name record_target --output "$O/record_target.jsonl" --json -- "$B/bin/gpu_record_target" 0
[ -e "$O/record_target.jsonl" ] && step import_record_target 30 "${mp[@]}" import "$O/record_target.jsonl" --name record_target_file

# 5. What an earlier run left unmeasured: expandable segments mapped through the backend, a
#    capacity the device primitive enforces (OOMs and torch's retry), pacing to recorded times,
#    the real pool with two streams with and without a release threshold, and the same replays
#    repeated (how much measured times vary from run to run).
ex=torch:expandable_segments:True
step gpu_sample_torch_expandable 60 "${mp[@]}" replay sample --backend cuda --allocator "$ex" --json
[ -e "$B/traces/kk_ctx128_fullstep.pickle" ] &&
  step gpu_kk_ctx128_fullstep_torch_expandable 60 "${mp[@]}" replay kk_ctx128_fullstep --backend cuda --allocator "$ex" --scale fit --json
#    (with every device call of the plan and of the GPU, which say where the two part)
step gpu_sample_cuda_capacity 60 "${mp[@]}" replay sample --backend cuda --allocator cuda --capacity 12GiB --no-fail --json \
  --device-calls "$O/calls_sample_cuda_capacity.txt"
step gpu_sample_torch_capacity 60 "${mp[@]}" replay sample --backend cuda --allocator torch --capacity 16GiB --no-fail --json \
  --device-calls "$O/calls_sample_torch_capacity.txt"
step gpu_sample_cuda_pace 60 "${mp[@]}" replay sample --backend cuda --allocator cuda --pace --json
#    Pacing that waits, by the recorded clock and by the recorded time between calls, against the
#    time model (tools/gpu_checks_pace.sh).
tools/gpu_checks_pace.sh "$B" "$O" || failed=1
python3 tests/gpu/gen_two_streams.py >"$O/two_streams.jsonl" &&
  "${mp[@]}" import "$O/two_streams.jsonl" --name two_streams >/dev/null && for a in async async:release_threshold=max cuda; do
  step "gpu_two_streams_${a//[:=]/_}" 60 "${mp[@]}" replay two_streams --backend cuda --allocator "$a" --json
done
for r in 2 3; do
  step "gpu_sample_cuda_r$r" 60 "${mp[@]}" replay sample --backend cuda --allocator cuda --json
  [ -e "$B/traces/kk_ctx128_fullstep.pickle" ] &&
    step "gpu_kk_ctx128_fullstep_torch_r$r" 60 "${mp[@]}" replay kk_ctx128_fullstep --backend cuda --allocator torch --scale fit --json
done

# 6. A small PyTorch job at two batch sizes, fp32 and bf16: recorded with PyTorch's snapshot at
#    the same time (the recorded cudaMallocs and the snapshot's segments are the same calls),
#    and recorded again with the caching allocator off (one cudaMalloc per tensor).
#    First, batch 8 in fp32 with PyTorch's expandable segments (the recorder sees cuMemMap) and
#    with its cudaMallocAsync backend (stream-ordered allocations).
if [ "${GPU_CHECKS_TORCH:-1}" != 0 ]; then
  step record_torch_b8_fp32_expandable 120 env PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
    "${mp[@]}" record --name torch_b8_fp32_expandable --json -- python3 tests/gpu/torch_train.py 8 fp32 "$O/torch_b8_fp32_expandable"
  step record_torch_b8_fp32_mallocasync 120 env PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync \
    "${mp[@]}" record --name torch_b8_fp32_mallocasync --json -- python3 tests/gpu/torch_train.py 8 fp32 "$O/torch_b8_fp32_mallocasync"
  for n in torch_b8_fp32_expandable torch_b8_fp32_mallocasync; do
    step "sim_$n" 30 "${mp[@]}" replay "$n" --no-save --json
  done
fi
[ "${GPU_CHECKS_TORCH:-1}" = 0 ] || for b in 8 16; do
  for p in fp32 bf16; do
    j="torch_b${b}_$p"
    step "record_$j" 120 "${mp[@]}" record --name "$j" --json -- python3 tests/gpu/torch_train.py "$b" "$p" "$O/$j" --snapshot
    step "record_${j}_nocache" 120 env PYTORCH_NO_CUDA_MEMORY_CACHING=1 \
      "${mp[@]}" record --name "${j}_nocache" --json -- python3 tests/gpu/torch_train.py "$b" "$p" "$O/${j}_nocache"
    if [ -e "$O/$j.pickle" ]; then
      "${mp[@]}" import "$O/$j.pickle" --name "${j}_snapshot" >"$O/import_${j}_snapshot.out" 2>&1 || failed=1
      step "validate_$j" 60 "${mp[@]}" validate "${j}_snapshot" --json
      step "gpu_${j}_snapshot_torch" 60 "${mp[@]}" replay "${j}_snapshot" --backend cuda --allocator torch --json
    fi
  done
done
#    Then the job under non-default allocator settings, its snapshots validated
#    (tools/gpu_checks_torch_settings.sh; exit status 2 when PyTorch cannot reach the GPU).
if [ "${GPU_CHECKS_TORCH:-1}" != 0 ]; then
  tools/gpu_checks_torch_settings.sh "$B" "$O"
  [ $? = 1 ] && failed=1
fi
# 7. A small JAX job recorded under XLA's three allocator settings (tools/gpu_checks_jax.sh), where
#    JAX is installed and sees the GPU (exit status 2 when it does not: not a failure).
if [ "${GPU_CHECKS_JAX:-1}" != 0 ] && python3 -c 'import jax' 2>/dev/null; then
  tools/gpu_checks_jax.sh "$B" "$O"
  [ $? = 1 ] && failed=1
fi
# 8. The simulated driver's addresses where segments are given back: the shared snapshots at
#    capacities under their peaks, with every device call (tools/gpu_checks_addresses.sh).
tools/gpu_checks_addresses.sh "$B" "$O" || failed=1
sqlite3 "$db" "PRAGMA wal_checkpoint(TRUNCATE)" >/dev/null 2>&1
echo "failed=$failed"
exit "$failed"
