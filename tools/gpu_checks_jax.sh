#!/usr/bin/env bash
# gpu_checks_jax.sh BUNDLE OUT: a small JAX job (tests/gpu/jax_train.py) recorded by `memplay record`
# under XLA's three allocator settings: its default (the BFC allocator preallocates 75% of the GPU),
# preallocation off (the BFC allocator takes regions as it grows), and the platform allocator (one
# device allocation per buffer: the program's own requests). The platform recording is replayed
# under the `bfc` model, whose regions are then compared with those the growing BFC allocator
# took (tools/gpu_derive.py, jax_bfc.csv). BUNDLE and OUT as for tools/gpu_checks.sh, which runs
# this as its last step when JAX is installed; OUT/gpu.db is the same store.
# Exit status: 0 when every step passed, 1 otherwise (2 when JAX sees no GPU: nothing was run).
set -uo pipefail
. "$(dirname "$0")/gpu_step.sh" # bundle_env, step
bundle_env "usage: tools/gpu_checks_jax.sh BUNDLE OUT" "$@"
mp=("$M" --db "$O/gpu.db")
failed=0
python3 -c 'import jax; print("jax", jax.__version__, jax.devices())' >"$O/jax_machine.txt" 2>&1
grep -q "Cuda\|cuda\|gpu" "$O/jax_machine.txt" || { echo "JAX sees no GPU: $(tail -n 1 "$O/jax_machine.txt")"; exit 2; }

batch=1024
for how in default growth platform; do
  env=()
  [ "$how" = growth ] && env=(XLA_PYTHON_CLIENT_PREALLOCATE=false)
  [ "$how" = platform ] && env=(XLA_PYTHON_CLIENT_ALLOCATOR=platform)
  step "record_jax_$how" 180 env "${env[@]}" "${mp[@]}" record --name "jax_$how" --json -- \
    python3 tests/gpu/jax_train.py "$batch" "$O/jax_$how"
  step "export_jax_$how" 30 "${mp[@]}" export "jax_$how" --format jsonl -o "$O/jax_$how.jsonl"
done
# The program's own requests (the platform recording) under the `bfc` model, as the growing BFC
# allocator and as the preallocating one (its limit: what JAX reported as bytes_limit).
step sim_jax_platform_bfc_growth 30 "${mp[@]}" replay jax_platform --allocator bfc:allow_growth=true --no-save --json \
  --device-calls "$O/calls_jax_platform_bfc_growth.txt"
limit=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["memory_stats"].get("bytes_limit", ""))' \
  "$O/jax_default.json" 2>/dev/null)
[ -n "$limit" ] && step sim_jax_platform_bfc_limit 30 "${mp[@]}" replay jax_platform --allocator "bfc:memory_limit=${limit}B" \
  --no-save --json --device-calls "$O/calls_jax_platform_bfc_limit.txt"
step gpu_jax_platform_bfc 60 "${mp[@]}" replay jax_platform --backend cuda --allocator bfc:allow_growth=true --json
echo "failed=$failed"
exit "$failed"
