# The torch model's options in PYTORCH_CUDA_ALLOC_CONF syntax: good ones replay, bad ones are
# clear errors (unknown keys are usage errors, exit 2; bad values fail the replay, exit 1).
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
expect 0 replay sample --allocator torch --no-save --json
base=$(json_get peak_reserved_bytes)
expect 0 replay sample --allocator 'torch:expandable_segments:True,max_split_size_mb:128' --no-save --json
grep -q '"allocator":"torch:expandable_segments:True,max_split_size_mb:128"' "$T/out" || fail "spec not reported"
expect 0 replay sample --allocator 'torch:roundup_power2_divisions:[256:1,512:2,1024:4,>:8]' --no-save --check
expect 0 replay sample --allocator 'torch:garbage_collection_threshold:0.6,per_process_memory_fraction:0.9' --no-save --check
expect 0 replay sample --allocator 'torch:expandable_segments:True' --no-save --check
expect 3 replay sample --allocator torch --capacity 4GiB --no-save --json
[ "$(json_get ooms)" != 0 ] || fail "no OOM in 4 GiB (peak reserved $base)"
grep -q 'CUDA out of memory. Tried to allocate' "$T/out" || fail "OOM not in PyTorch's words"
grep -q 'is reserved by PyTorch but unallocated' "$T/out" || fail "OOM lacks the unallocated figure"

expect 2 replay sample --allocator 'torch:max_split_size:128' --no-save
has "$T/err" "unknown option 'max_split_size' for allocator 'torch'"
bad() {
  expect 1 replay sample --allocator "$1" --no-save && has "$T/err" "$2"
}
bad 'torch:max_split_size_mb:10' "option 'max_split_size_mb' is too small: it must be at least 20"
bad 'torch:garbage_collection_threshold:1.5' "must lie in (0, 1)"
bad 'torch:roundup_power2_divisions:3' "power of 2"
bad 'torch:roundup_power2_divisions:[256:1,x:2]' "interval 'x'"
bad 'torch:expandable_segments:maybe' "wants true or false"
bad 'torch:per_process_memory_fraction:2' "must lie in [0, 1]"
expect 0 help allocators
has "$T/out" "max_split_size_mb"
has "$T/out" "roundup_power2_divisions"
finish
