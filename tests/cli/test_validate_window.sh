# `memplay validate` on a small recorded window written out by hand (tests/data/snapshot_window.jsonl):
# blocks live before the window (one whose unsplit remainder shows where a later allocation
# lands), a release-and-retry after a failed cudaMalloc, an empty_cache() that the cache could
# have served the next request from, a recorded OOM and a trailing empty_cache; then the same
# window with one allocation moved, which must diverge there.
. "$TESTS_DIR/cli/lib.sh"

W="$MEMPLAY_SRC/tests/data/snapshot_window.jsonl"
expect 0 import "$W"
expect 0 validate window --json
for k in allocs address_matches segment_events segment_matches final_state_match first_divergence \
  replayed_peak_allocated_bytes replayed_peak_reserved_bytes peak_allocated_is_lower_bound run_id; do
  grep -q "\"$k\":" "$T/out" || fail "validate --json lacks '$k'"
done
[ "$(json_get allocs)" = 5 ] || fail "allocs: $(json_get allocs)"
[ "$(json_get address_matches)" = 5 ] || fail "address_matches: $(json_get address_matches)"
[ "$(json_get segment_events)" = 8 ] || fail "segment_events: $(json_get segment_events)"
[ "$(json_get segment_matches)" = 8 ] || fail "segment_matches: $(json_get segment_matches)"
[ "$(json_get oom_matches)" = 1 ] || fail "oom_matches: $(json_get oom_matches)"
[ "$(json_get empty_cache_calls)" = 2 ] || fail "empty_cache_calls: $(json_get empty_cache_calls)"
[ "$(json_get final_state_match)" = true ] || fail "final_state_match: $(json_get final_state_match)"
[ "$(json_get first_divergence)" = null ] || fail "first_divergence: $(json_get first_divergence)"
[ "$(json_get peak_allocated_is_lower_bound)" = false ] || fail "the remainder was seen: not a lower bound"
[ "$(json_get replayed_peak_reserved_bytes)" = "$(json_get recorded_peak_reserved_bytes)" ] || fail "reserved peaks differ"
[ "$(json_get replayed_peak_requested_bytes)" = 46138344 ] || fail "requested peak: $(json_get replayed_peak_requested_bytes)"
# stored as a run of kind validate
run=$(json_get run_id)
[ "$(sqlite3 "$DB" "SELECT kind FROM runs WHERE id = $run")" = validate ] || fail "run $run is not a validate run"
sqlite3 "$DB" "SELECT result FROM runs WHERE id = $run" | grep -q '"segment_matches":8' || fail "the run lacks the result"
expect 0 validate window
has "$T/out" "agrees with the recording"
has "$T/out" "5 of 5 at the recorded address (100.00%)"

# The same window with the 30 MiB allocation recorded 2 MiB into its new segment: no allocator
# state explains it, so the replay diverges there (event 8), and says what was around it.
sed -E 's/"kind":"(alloc|free_requested|free_completed)","addr":805306368/"kind":"\1","addr":807403520/' "$W" \
  >"$T/moved.jsonl"
grep -q '"kind":"alloc","addr":807403520' "$T/moved.jsonl" || fail "the moved window was not written"
expect 0 import "$T/moved.jsonl" --name moved
expect 1 validate moved --json
[ "$(json_get address_matches)" = 4 ] || fail "address_matches: $(json_get address_matches)"
grep -q '"first_divergence":{"event":8,"kind":"address","expected":"placed at 0x30200000","simulated":"placed at 0x30000000"' \
  "$T/out" || fail "first divergence: $(grep -o '"first_divergence":{[^}]*' "$T/out")"
grep -q '"free_blocks_near":\[{' "$T/out" || fail "no free blocks around the divergence"
expect 1 validate moved
has "$T/out" "first divergence at event 8 (address)"
has "$T/out" "free blocks of that stream and pool nearest its size"

# Traces that are not recorded snapshots, or not of a modelled allocator, are refused.
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
expect 1 validate sample
has "$T/err" "error: cannot validate 'sample': it holds no recorded allocator state"
sed 's/"allocator":"torch"/"allocator":"bfc"/' "$W" >"$T/bfc.jsonl"
expect 0 import "$T/bfc.jsonl" --name tf
expect 1 validate tf
has "$T/err" "it was recorded by 'bfc'"
expect 1 validate nosuch
expect 2 validate
expect 2 validate a b

# Expandable segments with the driver's reservation bases, on both devices of a snapshot: a
# small-pool segment reserved 3 GiB above the large pool's (inside what 1 1/8 of an assumed
# 80 GiB card would cover) takes the recorded base, not one of validate's own.
expect 0 import "$MEMPLAY_SRC/tests/data/snapshots/expandable_bases.pickle" --name eb
for d in 0 1; do
  expect 0 validate "eb-dev$d" --json --no-save && has "$T/out" '"agree":true'
  [ "$(json_get segment_matches)" = 2 ] || fail "eb-dev$d: segment_matches $(json_get segment_matches)"
done
finish
