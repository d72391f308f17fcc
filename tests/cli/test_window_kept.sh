# A recorded window's start is rebuilt once and kept beside its trace (window_starts): at import,
# or by the first replay that finds none; a later replay takes it from there and answers the same,
# a read-only one too; a row of other rules, or one that does not decode, is rebuilt, never
# believed; changing what it was rebuilt from deletes it; check-store names a damaged one; a
# read-only store keeps none it rebuilds.
. "$TESTS_DIR/cli/lib.sh"
# two windows: NSEG segments of 20 MiB, each with a live block and free space, freed and taken again
python3 - "$T" <<'PY'
import pickle, sys
MiB = 1 << 20
def window(path, nseg):
    base = 0x7F0000000000
    segs, trace = [], []
    for k in range(nseg):
        a = base + k * 20 * MiB
        segs.append({"device": 0, "address": a, "total_size": 20 * MiB, "allocated_size": 2 * MiB,
                     "active_size": 2 * MiB, "requested_size": 2 * MiB, "stream": 0, "segment_type": "large",
                     "is_expandable": False, "frames": [],
                     "blocks": [{"address": a, "size": 2 * MiB, "requested_size": 2 * MiB, "state": "active_allocated",
                                 "frames": []},
                                {"address": a + 2 * MiB, "size": 18 * MiB, "requested_size": 0, "state": "inactive",
                                 "frames": []}]})
        trace += [{"action": "free_requested", "addr": a, "size": 2 * MiB, "stream": 0, "time_us": 3 * k + 1, "frames": []},
                  {"action": "free_completed", "addr": a, "size": 2 * MiB, "stream": 0, "time_us": 3 * k + 2, "frames": []},
                  {"action": "alloc", "addr": a, "size": 2 * MiB, "stream": 0, "time_us": 3 * k + 3, "frames": []}]
    pickle.dump({"segments": segs, "device_traces": [trace]}, open(path, "wb"), protocol=4)
window(sys.argv[1] + "/two.pickle", 2)
window(sys.argv[1] + "/three.pickle", 3)
PY
expect 0 import "$T/two.pickle" --name two
expect 0 import "$T/three.pickle" --name three
q() { sqlite3 "$DB" "$1"; }
two=$(q "SELECT id FROM traces WHERE name = 'two'")
three=$(q "SELECT id FROM traces WHERE name = 'three'")
# segments N: the last replay's output (--json) started from the rebuilt state with N segments
segments() {
  has "$T/out" "\"window_start\":{\"state\":\"rebuilt\",\"segments\":$1,"
}
same_answer() { # the replay's JSON but its time
  sed 's/"elapsed_s":[0-9.e+-]*//; s/"run_id":[0-9]*//' "$T/out"
}

# The import kept each window's start; a trace that is no window has none.
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id IN ($two, $three)")" = 2 ] || fail "the import kept no window start"
expect 0 import "$MEMPLAY_SRC/traces/sil_small_from_empty.pickle" --name whole
[ "$(q "SELECT count(*) FROM window_starts")" = 2 ] || fail "a trace that is no window has a kept start"
expect 0 replay two --json --no-save && segments 2
first=$(same_answer)
# The first replay that finds none rebuilds it, keeps it, and answers as from the import's.
q "DELETE FROM window_starts WHERE trace_id = $two"
expect 0 replay two --json --no-save && segments 2
[ "$(same_answer)" = "$first" ] || fail "the start the import kept answers otherwise than the one rebuilt"
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $two")" = 1 ] || fail "the rebuilt start was not kept"
rules=$(q "SELECT rules FROM window_starts WHERE trace_id = $two")
[ "${#rules}" = 32 ] || fail "the kept start's rules are '$rules', not a digest"
expect 0 replay two --json --no-save && segments 2
[ "$(same_answer)" = "$first" ] || fail "the replay from the kept start answers otherwise than the one that rebuilt it"

# The kept row is what a replay starts from: three's state planted under two's key is taken.
expect 0 replay three --json --no-save && segments 3
q "UPDATE window_starts SET (crc32, data) = (SELECT crc32, data FROM window_starts WHERE trace_id = $three)
   WHERE trace_id = $two"
expect 0 replay two --json --no-save && segments 3
# ...but not under other rules: rebuilt, and kept again under this build's.
q "UPDATE window_starts SET rules = 'another build' WHERE trace_id = $two"
expect 0 replay two --json --no-save && segments 2
[ "$(same_answer)" = "$first" ] || fail "a start kept under other rules was believed"
[ "$(q "SELECT rules FROM window_starts WHERE trace_id = $two")" = "$rules" ] || fail "the rebuilt start was not kept again"

# A row that does not decode: check-store names it; a replay rebuilds it.
q "UPDATE window_starts SET data = x'0102030405', crc32 = 7 WHERE trace_id = $two"
expect 3 check-store
has "$T/out" "trace 'two': its kept window start (window_starts) fails its checksum"
q "UPDATE window_starts SET crc32 = (SELECT crc32 FROM window_starts WHERE trace_id = $three), data = x'0102'
   WHERE trace_id = $two"
expect 0 replay two --json --no-save && segments 2
[ "$(same_answer)" = "$first" ] || fail "a damaged kept start was believed"
expect 0 check-store
# A row with a good checksum that holds what no rebuild makes (two segments over each other, as a
# hand could write it) is not restored either.
python3 - "$DB" "$two" "$rules" <<'PY'
import sqlite3, struct, sys, zlib
db, tid, rules = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def item(flags, addr, size):
    return struct.pack("<II6Q", flags, 0, addr, size, 0, 0, 0, 0)
A, MiB = 0x7F0000000000, 1 << 20
data = struct.pack("<iI", 0, 2) + item(1 | 1 << 8, A, 20 * MiB) + item(1 | 1 << 8, A + MiB, 20 * MiB)
c = sqlite3.connect(db)
c.execute("UPDATE window_starts SET rules = ?, crc32 = ?, data = ? WHERE trace_id = ?", (rules, zlib.crc32(data), data, tid))
c.commit()
PY
expect 3 check-store
has "$T/out" "does not hold a state the rebuild makes: two segments overlap"
expect 0 replay two --json --no-save && segments 2
[ "$(same_answer)" = "$first" ] || fail "a kept start of overlapping segments was believed"
expect 0 check-store

# Changing what it was rebuilt from, by hand, deletes it.
for edit in "UPDATE segments SET stream = stream WHERE trace_id = $two" \
  "UPDATE blocks SET size = size WHERE trace_id = $two" \
  "UPDATE event_chunks SET crc32 = crc32 WHERE trace_id = $two" \
  "UPDATE traces SET allocator_settings = allocator_settings WHERE id = $two" \
  "DELETE FROM blocks WHERE trace_id = $two AND state = 'inactive'"; do
  expect 0 replay two --no-save
  [ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $two")" = 1 ] || fail "no start kept before: $edit"
  q "$edit"
  [ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $two")" = 0 ] || fail "still kept after: $edit"
done
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $three")" = 1 ] || fail "another trace's start went too"
expect 0 replay two --no-save
q "INSERT INTO recorded(trace_id, seq, before_seq, action, addr, size) VALUES ($two, 0, 0, 'segment_alloc', 1, 2097152)"
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $two")" = 0 ] || fail "still kept after a recorded action added"
q "DELETE FROM recorded WHERE trace_id = $two"
expect 0 replay two --json --no-save && segments 2
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $two")" = 1 ] || fail "the start rebuilt after the edits was not kept"

# A read-only store (a comparison that saves nothing opens it so) rebuilds it and keeps nothing.
q "DELETE FROM window_starts"
expect 0 compare two --policy torch --no-save --json
has "$T/out" '"state": "rebuilt"'
has "$T/out" "as validate rebuilds it: 2 segments holding 2 live blocks"
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $two")" = 0 ] || fail "a read-only store kept a start"
# ...and takes one that is kept: three's state planted under two's key.
expect 0 replay three --no-save
q "INSERT INTO window_starts SELECT $two, rules, agrees, crc32, data FROM window_starts WHERE trace_id = $three"
expect 0 compare two --policy torch --no-save --json
has "$T/out" "as validate rebuilds it: 3 segments holding 3 live blocks"

# rm takes it with its trace.
expect 0 replay two --no-save
expect 0 rm two
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $two")" = 0 ] || fail "rm left a window start of no trace"
[ "$(q "SELECT count(*) FROM window_starts WHERE trace_id = $three")" = 1 ] || fail "rm took another trace's start"
expect 0 check-store
finish
