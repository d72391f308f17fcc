# The users' own settings, verbatim: PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_HIP_ALLOC_CONF) taken by
# the torch model as PyTorch takes it, every setting read from the environment printed in the
# header and stored with the run; torch:backend:cudaMallocAsync runs the async model with a note.
. "$TESTS_DIR/cli/lib.sh"
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_HIP_ALLOC_CONF TF_FORCE_GPU_ALLOW_GROWTH TF_ENABLE_GPU_GARBAGE_COLLECTION

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
expect 0 replay sample --allocator 'torch:expandable_segments:True' --no-save --json
want=$(json_get peak_reserved_bytes)
expect 0 replay sample --allocator torch --no-save --json
plain=$(json_get peak_reserved_bytes)
[ "$want" != "$plain" ] || fail "expandable segments change nothing on the sample ($want)"

for var in PYTORCH_CUDA_ALLOC_CONF PYTORCH_HIP_ALLOC_CONF; do
  export "$var=expandable_segments:True"
  expect 0 replay sample --allocator torch --json
  [ "$(json_get peak_reserved_bytes)" = "$want" ] || fail "$var ignored: $(json_get peak_reserved_bytes), wanted $want"
  grep -q "\"environment\":{\"$var\":\"expandable_segments:True\"}" "$T/out" || fail "$var not in --json"
  id=$(json_get run_id)
  stored=$(sqlite3 "$DB" "SELECT json_extract(result, '\$.environment.$var') FROM runs WHERE id = $id")
  [ "$stored" = "expandable_segments:True" ] || fail "$var not stored with run $id: '$stored'"
  expect 0 replay sample --allocator torch --no-save
  has "$T/out" "environment         $var=expandable_segments:True"
  # options given in the SPEC come after the environment's, as a later setting would
  expect 0 replay sample --allocator 'torch:expandable_segments:False' --no-save --json
  [ "$(json_get peak_reserved_bytes)" = "$plain" ] || fail "$var: the SPEC's option did not win"
  # a bad setting in the environment names the variable
  export "$var=expandable_segments:maybe"
  expect 1 replay sample --allocator torch --no-save
  has "$T/err" "$var='expandable_segments:maybe' (from the environment)"
  unset "$var"
done

# TensorFlow's variable, read by the bfc model, is said too
TF_FORCE_GPU_ALLOW_GROWTH=true "$MEMPLAY" replay sample --allocator bfc --capacity 24GiB --no-save >"$T/out" 2>"$T/err" ||
  fail "bfc with TF_FORCE_GPU_ALLOW_GROWTH failed: $(cat "$T/err")"
has "$T/out" "environment         TF_FORCE_GPU_ALLOW_GROWTH=true"

# PyTorch's own spelling of cudaMallocAsync: the async model, with a note
expect 0 replay sample --allocator async --no-save --json
async=$(json_get peak_reserved_bytes)
expect 0 replay sample --allocator torch:backend:cudaMallocAsync --no-save --json
[ "$(json_get peak_reserved_bytes)" = "$async" ] || fail "backend:cudaMallocAsync is not the async model"
grep -q '"note":"backend:cudaMallocAsync is PyTorch' "$T/out" || fail "no note in --json"
expect 0 replay sample --allocator torch:backend:cudaMallocAsync --no-save
has "$T/out" "under async"
has "$T/out" "note                backend:cudaMallocAsync is PyTorch's switch to cudaMallocAsync"
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync "$MEMPLAY" replay sample --no-save >"$T/out" 2>"$T/err" ||
  fail "backend:cudaMallocAsync from the environment failed: $(cat "$T/err")"
has "$T/out" "under async"
has "$T/out" "environment         PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"
finish
