# TensorFlow's BFC out-of-memory dumps: `memplay import job.log` finds each dump, replay reproduces
# the OOM with the log's own figures, and the oom_fit scenario answers what would have fitted.
. "$TESTS_DIR/cli/lib.sh"
need_traces
B="$MEMPLAY_TRACES/bfc"
[ -f "$B/hilse_imageexp_fragmentation_oom_18833643.log" ] && [ -f "$B/hilse_imageexp_oom_18832370.log" ] ||
  { echo "skipped: no BFC dumps in MEMPLAY_TRACES"; exit 77; }
export MEMPLAY_SCRIPTS="$MEMPLAY_SRC/scripts"

expect 0 import "$B/hilse_imageexp_fragmentation_oom_18833643.log" --name frag
has "$T/out" "imported 'frag' (201 events, tf_bfc_dump)"
expect 0 info frag
has "$T/out" 'settings     {"memory_limit":40231108608}'
has "$T/out" "device       NVIDIA A100-PCIE-40GB"

# the replay: the state at the OOM, then the request fails with the log's figures
expect 3 replay frag --json --no-save
has "$T/out" '"ooms":1'
has "$T/out" '"state":"rebuilt","segments":1,"blocks":200'
has "$T/out" "ran out of memory trying to allocate 3.07GiB (rounded to 3300000000). InUse: 31785630720"
has "$T/out" "memory_limit_: 40231108608, available bytes: 0"
has "$T/out" "largest free chunk: 3255434240"
has "$T/out" '"peak_allocated_bytes":31785630720'

# what would have fitted
expect 0 whatif frag oom_fit --no-save
has "$T/out" "would have fitted with TF_GPU_ALLOCATOR=cuda_malloc_async; no fragmentation; memory_limit 40.54 GiB"
grep -q '^as recorded (bfc) .* OOM' "$T/out" || fail "oom_fit: the recorded row does not fail: $(cat "$T/out")"
expect 0 import "$B/hilse_imageexp_oom_18832370.log" --name full
expect 0 whatif full oom_fit --no-save
has "$T/out" "would have fitted with memory_limit 37.94 GiB"
grep -q '^no fragmentation .* OOM (1)' "$T/out" || fail "oom_fit: 488 MiB fitted without fragmentation"
# a trace that is not a dump
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
expect 1 whatif sample oom_fit --no-save
has "$T/err" "oom_fit answers for a state-only trace"

# a log with two dumps: one trace each; a log without any: a clear error, nothing stored
cat "$B/hilse_imageexp_oom_18832370.log" "$B/hilse_imageexp_fragmentation_oom_18833643.log" >"$T/two.log"
expect 0 import "$T/two.log" --name two
has "$T/out" "imported 'two' (293 events, tf_bfc_dump)"
has "$T/out" "imported 'two-oom2' (201 events, tf_bfc_dump)"
before=$(store_digest)
printf '2024-07-13 01:58:23.9: I tensorflow/core/x.cc:1] nothing ran out of memory\n' >"$T/none.log"
expect 1 import "$T/none.log"
has "$T/err" "the log holds no BFCAllocator dump"
# a chunk that does not follow the one before it: the line is named
sed '0,/InUse at 7f41b2000100 of size 1280/s//InUse at 7f41b2000180 of size 1280/' "$B/hilse_imageexp_fragmentation_oom_18833643.log" >"$T/bad.log"
expect 1 import "$T/bad.log"
has "$T/err" "line 48: the chunk at 7f41b2000180 does not follow the one at 7f41b2000000 of size 256"
[ "$(store_digest)" = "$before" ] || fail "a failed import changed the store"
finish
