#!/usr/bin/env bash
# Imports every real PyTorch snapshot and checks what was stored against figures taken from the
# files independently of memplay (the traces' README, and Python's pickle module when this test
# was written): trace entries, requests, rebuilt live blocks, recorded actions, final state.
. "$TESTS_DIR/cli/snapshot_lib.sh"
need_traces
dir="$MEMPLAY_TRACES/pytorch"

db="$WORK/store.db"
# file | trace entries | events (requests + live before the window + empty_cache) | live before: from the final
# state, freed before any alloc | recorded actions | final segments | final blocks | distinct call
# stacks of the requests | sum of the alloc sizes
expected="
bcrafton_warm_window|6486|6933|225|222|0|96|550|142|11680970248
kk_ctx128_fullstep|19342|18883|324|0|783|1010|1525|178|94268409402
kk_ctx512_fullstep|19936|18884|326|0|1379|820|1703|177|227894608074
maph_single_stream|4496|4879|396|0|13|82|415|96|45069018970
sil_forward_fp32_128|2043|2180|137|0|0|29|164|105|1105961984
sil_small_from_empty|97|88|0|0|9|9|20|42|8091861260
wed_medium_128_inference|3840|4063|223|0|0|98|230|88|2851305568
wed_medium_128_training|19136|19800|226|438|0|377|918|170|34448091337
wed_medium_256_training|19430|20094|226|438|0|495|1023|172|45687989993
"
for line in $expected; do
  IFS='|' read -r name entries events from_final freed recorded segs blocks stacks allocsum <<<"$line"
  out=$("$MEMPLAY" import --db "$db" --json "$dir/$name.pickle" 2>&1) || { fail "import $name: $out"; continue; }
  id=$(q "$db" "SELECT id FROM traces WHERE name = '$name'")
  check "$name: import says" "$out" \
    "{\"file\":\"$dir/$name.pickle\",\"format\":\"pytorch_snapshot\",\"traces\":[{\"name\":\"$name\",\"id\":$id,\"events\":$events}]}"
  check "$name: one trace" "$(q "$db" "SELECT count(*) FROM traces WHERE name LIKE '$name%'")" 1
  check "$name: trace row" "$(q "$db" "SELECT source_format, framework, allocator, device_index, event_count FROM traces WHERE id = $id")" \
    "pytorch_snapshot|pytorch|torch|0|$events"
  check "$name: trace entries" "$(q "$db" "SELECT json_extract(attrs, '\$.trace_entries') FROM traces WHERE id = $id")" "$entries"
  check "$name: events" "$(q "$db" "SELECT count(*) FROM events WHERE trace_id = $id")" "$events"
  check "$name: live before the window" "$(q "$db" "SELECT count(*) FROM events WHERE trace_id = $id AND flags = 64")" \
    "$((from_final + freed))"
  check "$name: live blocks come first" "$(q "$db" "SELECT coalesce(max(e.seq) + 1 - t.first_seq, 0) FROM events e JOIN traces t ON t.id = e.trace_id WHERE e.trace_id = $id AND e.flags = 64")" \
    "$((from_final + freed))"
  check "$name: recorded actions" "$(q "$db" "SELECT count(*) FROM recorded WHERE trace_id = $id")" "$recorded"
  check "$name: final segments" "$(q "$db" "SELECT count(*) FROM segments WHERE trace_id = $id")" "$segs"
  check "$name: final blocks" "$(q "$db" "SELECT count(*) FROM blocks WHERE trace_id = $id")" "$blocks"
  check "$name: call stacks" "$(q "$db" "SELECT count(DISTINCT stack_id) FROM events WHERE trace_id = $id AND flags = 0")" "$stacks"
  check "$name: allocated bytes" "$(q "$db" "SELECT sum(size) FROM events WHERE trace_id = $id AND kind = 1 AND flags = 0")" "$allocsum"
  check "$name: every request has a call stack" "$(q "$db" "SELECT count(*) FROM events WHERE trace_id = $id AND flags = 0 AND stack_id IS NULL")" 0
  if [ "$((from_final + freed))" -gt 0 ]; then
    check "$name: note" "$(q "$db" "SELECT value FROM trace_stats WHERE trace_id = $id AND name = 'preexisting_blocks'")" "$((from_final + freed))"
  fi
done

# Figures from the traces' README.
# kk_ctx512 opens with torch.cuda.empty_cache(): 790 segment_free, one empty_cache event of the
# bytes they released, after the 326 blocks live before the window and before the first request.
id=$(q "$db" "SELECT id FROM traces WHERE name = 'kk_ctx512_fullstep'")
check "kk_ctx512: empty_cache" "$(q "$db" "SELECT e.seq - t.first_seq, e.size, (SELECT count(*) FROM recorded r WHERE r.trace_id = t.id AND r.action = 'segment_free' AND r.before_seq <= e.seq) FROM events e JOIN traces t ON t.id = e.trace_id WHERE e.trace_id = $id AND e.kind = 13")" \
  "326|47057993728|790"
id=$(q "$db" "SELECT id FROM traces WHERE name = 'kk_ctx128_fullstep'")
check "kk_ctx128: segment_alloc" "$(q "$db" "SELECT count(*) FROM recorded WHERE trace_id = $id AND action = 'segment_alloc'")" 783
check "kk_ctx128: first alloc" "$(q "$db" "SELECT addr, size, ts FROM events WHERE trace_id = $id AND flags = 0 ORDER BY seq LIMIT 1")" \
  "139833534054400|5242880|1748730219596673000"
check "kk_ctx128: a window" "$(q "$db" "SELECT json_extract(attrs, '\$.window'), json_extract(attrs, '\$.segments_at_start') FROM traces WHERE id = $id")" "1|227"
check "kk_ctx128: settings" "$(q "$db" "SELECT json_extract(allocator_settings, '\$.max_split_size'), json_extract(allocator_settings, '\$.expandable_segments'), json_extract(allocator_settings, '\$.roundup_power2_divisions.\"1024\"') FROM traces WHERE id = $id")" "-1|0|0"
id=$(q "$db" "SELECT id FROM traces WHERE name = 'kk_ctx512_fullstep'")
check "kk_ctx512: opens with 790 segment_free" \
  "$(q "$db" "SELECT count(*) FROM recorded WHERE trace_id = $id AND action = 'segment_free' AND before_seq = (SELECT first_seq FROM traces WHERE id = $id) + 326 AND seq < 790")" 790
check "kk_ctx512: no other segment_free" "$(q "$db" "SELECT count(*) FROM recorded WHERE trace_id = $id AND action = 'segment_free'")" 790
check "kk_ctx512: then segment_alloc" "$(q "$db" "SELECT count(*) FROM recorded WHERE trace_id = $id AND action = 'segment_alloc'")" 589
id=$(q "$db" "SELECT id FROM traces WHERE name = 'sil_small_from_empty'")
check "sil_small: from empty" "$(q "$db" "SELECT json_extract(attrs, '\$.window'), json_extract(attrs, '\$.segments_at_start') FROM traces WHERE id = $id")" "0|0"
id=$(q "$db" "SELECT id FROM traces WHERE name = 'maph_single_stream'")
check "maph: segment_alloc" "$(q "$db" "SELECT count(*) FROM recorded WHERE trace_id = $id AND action = 'segment_alloc'")" 13
check "maph: no time_us" "$(q "$db" "SELECT count(*) FROM events WHERE trace_id = $id AND ts != 0")" 0
check "maph: no settings, four device lists" "$(q "$db" "SELECT allocator_settings IS NULL, json_extract(attrs, '\$.has_time_us'), json_extract(attrs, '\$.devices_in_file') FROM traces WHERE id = $id")" "1|0|4"
check "maph: note" "$(q "$db" "SELECT value FROM trace_stats WHERE trace_id = $id AND name = 'entries_without_time'")" 4496
id=$(q "$db" "SELECT id FROM traces WHERE name = 'bcrafton_warm_window'")
check "bcrafton: default compile_context and user_metadata are not kept" "$(q "$db" "SELECT count(*) FROM event_args WHERE trace_id = $id")" 0
check "bcrafton: annotations kept" "$(q "$db" "SELECT json_array_length(attrs, '\$.external_annotations') FROM traces WHERE id = $id")" 2
finish
