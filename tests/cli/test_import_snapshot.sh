#!/usr/bin/env bash
# Imports the small snapshots in tests/data/snapshots (made by make_snapshots.py and
# tools/gen_snapshot): every pickle protocol, PyTorch's C++ pickler layout, a legacy dump,
# several devices, expandable segments, an OOM. The figures were taken from the files with
# Python's pickle module when this test was written.
. "$TESTS_DIR/cli/snapshot_lib.sh"
data="${MEMPLAY_SRC:?}/tests/data/snapshots"
db="$WORK/store.db"
base=$((0x7F0000000000))
MB=1048576

# The same snapshot in protocols 2 to 5: the same trace every time.
for p in 2 3 4 5; do
  "$MEMPLAY" import --db "$db" "$data/tiny_p$p.pickle" >/dev/null
done
rows() { # everything stored for trace $1, without ids that depend on the store
  local id
  id=$(q "$db" "SELECT id FROM traces WHERE name = '$1'")
  q "$db" "SELECT seq, ts, addr, size, stream, kind, mem, device, flags, stack_id IS NOT NULL FROM events WHERE trace_id = $id ORDER BY seq"
  q "$db" "SELECT seq, before_seq, ts, action, device, stream, addr, size, device_free FROM recorded WHERE trace_id = $id ORDER BY seq"
  q "$db" "SELECT device, address, total_size, stream, pool, expandable, allocated_size, requested_size, active_size FROM segments WHERE trace_id = $id ORDER BY address"
  q "$db" "SELECT segment_address, address, size, requested_size, state FROM blocks WHERE trace_id = $id ORDER BY address"
  q "$db" "SELECT seq, key, value FROM event_args WHERE trace_id = $id ORDER BY seq, key"
  q "$db" "SELECT name, severity, value FROM trace_stats WHERE trace_id = $id ORDER BY name"
  q "$db" "SELECT allocator_settings, json_remove(attrs, '\$.pickle_protocol') FROM traces WHERE id = $id"
}
ref=$(rows tiny_p4)
for p in 2 3 5; do check "protocol $p stores what protocol 4 does" "$(rows tiny_p$p)" "$ref"; done

id=$(q "$db" "SELECT id FROM traces WHERE name = 'tiny_p4'")
# Two blocks were live before the first entry: one freed before any alloc (its size from the
# free), one live in the final state and never allocated (its requested size); they come first,
# in address order, at the time of the first entry.
check "tiny: events" "$(q "$db" "SELECT count(*) FROM events WHERE trace_id = $id")" 9
# The window's entries are numbered from 2^31 (known as they come); the two blocks rebuilt at the
# end go before them. Readers (and the checks below) count from the trace's first_seq.
s0=$(q "$db" "SELECT first_seq FROM traces WHERE id = $id")
check "tiny: first seq" "$s0" $(((1 << 31) - 2))
check "tiny: live before the window" "$(q "$db" "SELECT seq - $s0, ts, addr, size, kind, flags FROM events WHERE trace_id = $id AND seq - $s0 < 2")" \
  "0|100000|$base|1000|1|64
1|100000|$((base + 1536))|$((3 * MB))|1|64"
check "tiny: the trace, in order" "$(q "$db" "SELECT kind, size FROM events WHERE trace_id = $id AND seq - $s0 >= 2 ORDER BY seq" | tr '\n' ' ')" \
  "2|1000 3|1000 1|700 1|4096 2|4096 3|4096 1|2048 "
check "tiny: time_us to ns" "$(q "$db" "SELECT first_ts, last_ts FROM traces WHERE id = $id")" "100000|140000"
check "tiny: segment_alloc between the same requests" "$(q "$db" "SELECT before_seq - $s0, ts, action, addr, size FROM recorded WHERE trace_id = $id")" \
  "5|120000|segment_alloc|$((base + 20 * MB))|$((2 * MB))"
check "tiny: final state" "$(q "$db" "SELECT count(*), sum(total_size), group_concat(pool) FROM segments WHERE trace_id = $id")" "2|$((22 * MB))|large,small"
check "tiny: blocks" "$(q "$db" "SELECT count(*), sum(state = 'active_allocated') FROM blocks WHERE trace_id = $id")" "6|3"
check "tiny: extra fields" "$(q "$db" "SELECT seq - $s0, key, value FROM event_args WHERE trace_id = $id ORDER BY seq")" \
  "5|compile_context|\"Torch-Compiled Region: 0/0\"
6|user_metadata|\"step 1\""
check "tiny: settings" "$(q "$db" "SELECT json_extract(allocator_settings, '\$.PYTORCH_CUDA_ALLOC_CONF'), json_extract(allocator_settings, '\$.max_split_size'), json_extract(allocator_settings, '\$.roundup_power2_divisions.\"32768\"'), json_extract(allocator_settings, '\$.garbage_collection_threshold') FROM traces WHERE id = $id")" \
  "max_split_size_mb:128|$((128 * MB))|0|0.0"
check "tiny: attrs" "$(q "$db" "SELECT json_extract(attrs, '\$.pickle_protocol'), json_extract(attrs, '\$.has_time_us'), json_extract(attrs, '\$.window'), json_extract(attrs, '\$.trace_entries'), json_extract(attrs, '\$.external_annotations[1].stage') FROM traces WHERE id = $id")" \
  "4|1|1|8|END"
check "tiny: call stacks, innermost frame first" "$(q "$db" "SELECT n.value FROM events e JOIN callsites c ON c.id = e.stack_id JOIN frames f ON f.id = c.frame_id JOIN strings n ON n.id = f.name_id WHERE e.trace_id = $id AND e.seq - $s0 = 4")" \
  "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"
check "tiny: stack depth" "$(q "$db" "SELECT c.depth FROM events e JOIN callsites c ON c.id = e.stack_id WHERE e.trace_id = $id AND e.seq - $s0 = 4")" 2

# PyTorch's C++ pickler: protocol 2, BINPUT, one MARK for a whole list; two devices.
out=$("$MEMPLAY" import --db "$db" "$data/cpp_layout.pickle")
check "cpp: two traces" "$out" "imported 'cpp_layout-dev0' (22 events, pytorch_snapshot) into $db
imported 'cpp_layout-dev1' (40 events, pytorch_snapshot) into $db"
for d in "0|12|12|24" "1|23|23|46"; do
  IFS='|' read -r dev rec segs blocks <<<"$d"
  id=$(q "$db" "SELECT id FROM traces WHERE name = 'cpp_layout-dev$dev'")
  check "cpp dev$dev: device" "$(q "$db" "SELECT device_index FROM traces WHERE id = $id")" "$dev"
  check "cpp dev$dev: recorded" "$(q "$db" "SELECT count(*) FROM recorded WHERE trace_id = $id")" "$rec"
  check "cpp dev$dev: segments" "$(q "$db" "SELECT count(*), count(DISTINCT device) FROM segments WHERE trace_id = $id")" "$segs|1"
  check "cpp dev$dev: blocks" "$(q "$db" "SELECT count(*) FROM blocks WHERE trace_id = $id")" "$blocks"
  check "cpp dev$dev: events on the device" "$(q "$db" "SELECT count(*) FROM events WHERE trace_id = $id AND device = $dev AND mem = 1")" \
    "$(q "$db" "SELECT event_count FROM traces WHERE id = $id")"
done

# A legacy dump (PyTorch 2.0): blocks with a history and no address, no time_us, no settings.
"$MEMPLAY" import --db "$db" "$data/legacy.pickle" >/dev/null
id=$(q "$db" "SELECT id FROM traces WHERE name = 'legacy'")
lb=$((0x7E0000000000))
check "legacy: block addresses from the segment's" "$(q "$db" "SELECT address - segment_address, size, requested_size, state FROM blocks WHERE trace_id = $id ORDER BY address" | tr '\n' ' ')" \
  "0|512|0|inactive 512|1024|1000|active_allocated 1536|2095616|0|inactive 0|512|300|active_allocated 512|512|512|active_allocated 1024|2096128|0|inactive "
s0=$(q "$db" "SELECT first_seq FROM traces WHERE id = $id")
check "legacy: live before the window" "$(q "$db" "SELECT seq - $s0, addr, size, flags FROM events WHERE trace_id = $id AND flags = 64")" "0|$((lb + 4 * MB + 512))|512|64"
check "legacy: no time" "$(q "$db" "SELECT count(*) FROM events WHERE trace_id = $id AND ts = 0")" 6
check "legacy: no settings" "$(q "$db" "SELECT allocator_settings IS NULL, json_extract(attrs, '\$.has_time_us') FROM traces WHERE id = $id")" "1|0"
check "legacy: stack from the history" "$(q "$db" "SELECT count(*) FROM blocks WHERE trace_id = $id AND stack_id IS NOT NULL")" 2
check "legacy: note" "$(q "$db" "SELECT severity, value FROM trace_stats WHERE trace_id = $id AND name = 'entries_without_time'")" "info|6"

# Several devices, expandable segments, an OOM, a snapshot entry, an action memplay does not know.
err=$("$MEMPLAY" import --db "$db" --name exp "$data/expandable.pickle" 2>&1 >/dev/null)
check_has "expandable: warns about the unknown action" "$err" "1 trace entries with actions memplay does not know were skipped (user_defined)"
check_has "expandable: warns about device 2" "$err" "1 final segment of device 2, which has no trace entries, is not imported"
check "expandable: one trace per device with entries" "$(q "$db" "SELECT name, device_index, event_count FROM traces WHERE name LIKE 'exp-%' ORDER BY name" | tr '\n' ' ')" \
  "exp-dev0|0|5 exp-dev1|1|3 "
id=$(q "$db" "SELECT id FROM traces WHERE name = 'exp-dev0'")
b0=$((0x7D0000000000))
s0=$(q "$db" "SELECT first_seq FROM traces WHERE id = $id")
check "expandable: recorded actions" "$(q "$db" "SELECT before_seq - $s0, action, addr, size, coalesce(device_free, -1), stream FROM recorded WHERE trace_id = $id ORDER BY seq" | tr '\n' ' ')" \
  "0|segment_map|$b0|$((20 * MB))|-1|94000000000000 3|oom|0|$((64 * MB))|$((10 * MB))|94000000000000 4|segment_unmap|$((b0 + 16 * MB))|$((4 * MB))|-1|94000000000000 4|snapshot|0|$((16 * MB))|-1|94000000000000 "
# the unmap that nothing follows is an empty_cache() at the end, of the 4 MiB it released
check "expandable: empty_cache" "$(q "$db" "SELECT seq - $s0, size FROM events WHERE trace_id = $id AND kind = 13")" "4|$((4 * MB))"
check "expandable: streams" "$(q "$db" "SELECT DISTINCT stream FROM events WHERE trace_id = $id")" 94000000000000
check "expandable: expandable segment" "$(q "$db" "SELECT expandable, stream, pool FROM segments WHERE trace_id = $id")" "1|94000000000000|large"
check "expandable: settings" "$(q "$db" "SELECT json_extract(allocator_settings, '\$.expandable_segments'), json_extract(allocator_settings, '\$.roundup_power2_divisions') FROM traces WHERE id = $id")" "1|[1,2,4]"
check "expandable: notes" "$(q "$db" "SELECT name, severity, value, detail FROM trace_stats WHERE trace_id = $id AND name NOT LIKE 'categories%' ORDER BY name" | tr '\n' ' ')" \
  "segments_of_other_devices|data_loss|1|segments of devices without trace entries: 2 unknown_actions|warning|1|user_defined "
id=$(q "$db" "SELECT id FROM traces WHERE name = 'exp-dev1'")
s0=$(q "$db" "SELECT first_seq FROM traces WHERE id = $id")
check "expandable dev1: pending free at the start" "$(q "$db" "SELECT seq - $s0, kind, size, flags FROM events WHERE trace_id = $id ORDER BY seq" | tr '\n' ' ')" \
  "0|1|512|64 1|2|512|0 2|1|4000|0 "
check "expandable dev1: states" "$(q "$db" "SELECT group_concat(state) FROM (SELECT state FROM blocks WHERE trace_id = $id ORDER BY address)")" \
  "active_pending_free,inactive,active_allocated,inactive"
check "expandable dev1: private pool noted" "$(q "$db" "SELECT value FROM trace_stats WHERE trace_id = $id AND name = 'private_pool_segments'")" 1

# Entry fields and actions memplay does not know: dropped, and noted by name (an empty one too).
err=$("$MEMPLAY" import --db "$db" "$data/odd_names.pickle" 2>&1 >/dev/null)
check_has "odd names: warning" "$err" "2 trace entries with actions memplay does not know were skipped ('', user_defined)"
id=$(q "$db" "SELECT id FROM traces WHERE name = 'odd_names'")
check "odd names: notes" "$(q "$db" "SELECT name, severity, value, detail FROM trace_stats WHERE trace_id = $id AND name != 'preexisting_blocks' AND name NOT LIKE 'categories%' ORDER BY name" | tr '\n' ' ')" \
  "dropped_entry_fields|data_loss|2|'', stream_priority unknown_actions|warning|2|'', user_defined "
check "odd names: the rest as in tiny" "$(q "$db" "SELECT event_count FROM traces WHERE id = $id")" 9

# Integers wider than 64 bits in metadata: a frame's line of 2**64 - 1 (PyTorch's unknown line) is
# stored as 0, unknown; an int of 81 bits in a field memplay does not read is dropped as usual.
"$MEMPLAY" import --db "$db" "$data/wide_ints.pickle" >/dev/null || fail "wide ints: refused"
id=$(q "$db" "SELECT id FROM traces WHERE name = 'wide_ints'")
check "wide ints: events as in tiny" "$(q "$db" "SELECT event_count FROM traces WHERE id = $id")" 9
check "wide ints: unknown line" "$(q "$db" "SELECT f.line FROM frames f JOIN strings n ON n.id = f.name_id WHERE n.value = 'malloc'")" 0

# Entries only for device 1, segments on devices 0 and 1: written for device 0 at first (the
# lowest device with segments), then moved, events and recorded actions alike.
err=$("$MEMPLAY" import --db "$db" "$data/other_device.pickle" 2>&1 >/dev/null)
check_has "other device: device 0's segment dropped" "$err" "1 final segment of device 0, which has no trace entries, is not imported"
id=$(q "$db" "SELECT id FROM traces WHERE name = 'other_device'")
s0=$(q "$db" "SELECT first_seq FROM traces WHERE id = $id")
check "other device: trace" "$(q "$db" "SELECT device_index, event_count FROM traces WHERE id = $id")" "1|4"
check "other device: events on device 1" "$(q "$db" "SELECT seq - $s0, kind, device, flags, size FROM events WHERE trace_id = $id ORDER BY seq" | tr '\n' ' ')" \
  "0|1|1|64|512 1|1|1|64|300 2|2|1|0|512 3|1|1|0|4000 "
check "other device: recorded on device 1" "$(q "$db" "SELECT before_seq - $s0, action, device FROM recorded WHERE trace_id = $id")" "3|segment_alloc|1"

# Two devices' lists filled turn about (a pickle may append to a list it made earlier): each
# entry still lands in its own device's trace, in order.
"$MEMPLAY" import --db "$db" "$data/interleaved.pickle" >/dev/null
check "interleaved: traces" "$(q "$db" "SELECT name, device_index, event_count FROM traces WHERE name LIKE 'interleaved-%' ORDER BY name" | tr '\n' ' ')" \
  "interleaved-dev0|0|4 interleaved-dev1|1|2 "
id=$(q "$db" "SELECT id FROM traces WHERE name = 'interleaved-dev0'")
check "interleaved: dev0 in order" "$(q "$db" "SELECT kind, size, ts FROM events WHERE trace_id = $id ORDER BY seq" | tr '\n' ' ')" \
  "1|512|10000 2|512|12000 3|512|14000 1|256|15000 "

# Found by content, whatever the file is called; --format forces it.
cp "$data/tiny_p4.pickle" "$WORK/dump.bin"
check "detected by content" "$("$MEMPLAY" import --db "$db" --json "$WORK/dump.bin" --name by_content | sed 's/.*"format":"\([^"]*\)".*/\1/')" "pytorch_snapshot"
check "forced" "$("$MEMPLAY" import --db "$db" --format pytorch_snapshot --name forced "$data/tiny_p2.pickle")" \
  "imported 'forced' (9 events, pytorch_snapshot) into $db"
finish
