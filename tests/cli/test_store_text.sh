# The events' text form (event_rows, what SQL reads through the events view): a store of schema 6
# upgraded to the shorter form answering every SQL query of events exactly as before, chunks
# damaged in either form upgraded as well as they can be, and a new import's edge values (times
# and addresses at the ends of 64 bits) read back as they were recorded.
#
# tests/data/store-v6.db.gz was written by memplay of schema 6: tests/data/text_edges.jsonl,
# traces/sample.jsonl, traces/recorded_cuda_program.jsonl as recorded, traces/sil_small_from_empty.pickle,
# tests/data/snapshots/wide_ints.pickle as wide, tests/data/snapshots/other_device.pickle as
# other_device, then gen --events 20000 --seed 5 as gen20k, imported in that order.
. "$TESTS_DIR/cli/lib.sh"

schema=$("$MEMPLAY" --version | sed -E 's/.*schema version ([0-9]+).*/\1/')
# every column of every event, in order, and the named view over it
events() { sqlite3 "$1" "SELECT * FROM events ORDER BY id; SELECT * FROM events_named ORDER BY trace_id, seq"; }
text_bytes() { sqlite3 "$1" "SELECT sum(length(rows)) FROM event_rows"; }

gunzip -c "$MEMPLAY_SRC/tests/data/store-v6.db.gz" >"$T/v6.db"
[ "$(sqlite3 "$T/v6.db" 'PRAGMA user_version')" = 6 ] || fail "the schema-6 store is not of schema 6"
cp "$T/v6.db" "$T/v6.orig"
events "$T/v6.db" >"$T/before"
[ "$(wc -l <"$T/before")" = 48246 ] || fail "the schema-6 store answers $(wc -l <"$T/before") rows, not 2 x 24,123"
before_bytes=$(text_bytes "$T/v6.db")

# check-store upgrades it (one transaction) and finds both forms agreeing
expect 0 --db "$T/v6.db" check-store || cat "$T/out" >&2
has "$T/out" "7 traces, 10 chunks, 24,123 events: no faults"
[ "$(sqlite3 "$T/v6.db" 'PRAGMA user_version')" = "$schema" ] || fail "not upgraded to schema $schema"
events "$T/v6.db" >"$T/after"
cmp -s "$T/before" "$T/after" || fail "the upgraded store's events answer otherwise: $(diff "$T/before" "$T/after" | head -c 1500)"
after_bytes=$(text_bytes "$T/v6.db")
[ $((after_bytes * 100 / before_bytes)) -le 90 ] || fail "the text form did not shrink: $before_bytes -> $after_bytes bytes"
# times count from the chunk's first, addresses from below its lowest (the snapshot's real ones)
[ "$(sqlite3 "$T/v6.db" "SELECT ts0 > 0 AND addr0 > 0 FROM event_rows r JOIN traces t ON t.id = r.trace_id WHERE t.name = 'sil_small_from_empty'")" = 1 ] ||
  fail "the snapshot's text counts from 0: $(sqlite3 "$T/v6.db" "SELECT trace_id, ts0, addr0 FROM event_rows")"

# Damaged chunks of schema 6: a text that is not JSON is made again from its packed form; a packed
# chunk that fails its checksum keeps what its text said. Either way SQL answers as before, and
# check-store then reports only the damaged packed chunk (its checksum changed).
cp "$T/v6.orig" "$T/bad.db"
sqlite3 "$T/bad.db" "UPDATE event_rows SET rows = 'not json [' WHERE trace_id = 7 AND chunk = 0"
sqlite3 "$T/bad.db" "UPDATE event_chunks SET crc32 = (crc32 + 1) % 4294967296 WHERE trace_id = 7 AND chunk = 1"
expect 3 --db "$T/bad.db" check-store
has "$T/out" "trace 'gen20k' in store"
has "$T/out" "its chunk 1 fails its checksum"
[ "$(sqlite3 "$T/bad.db" 'PRAGMA user_version')" = "$schema" ] || fail "the damaged store was not upgraded"
events "$T/bad.db" >"$T/after.bad"
cmp -s "$T/before" "$T/after.bad" || fail "the damaged store's events answer otherwise: $(diff "$T/before" "$T/after.bad" | head -c 1500)"
# texts memplay never wrote (hostile stores: other JSON, numbers out of range, too many events, the
# wrong count) are each made again from the packed form
many=$(python3 -c 'print("[" + ",".join(["[1,2,0]"] * 16385) + "]")')
sqlite3 "$T/v6.orig" "SELECT * FROM events WHERE trace_id = 7 ORDER BY id" >"$T/before.7"
for bad in '[[1,2,3],[4,"x",6]]' '[[1,2,3.5]]' '[[1,2,99999999999999999999]]' '[[[1,2,3]]]' '[{"a":1}]' '[[1,2,3]' \
  '[[1,2,70000]]' '[[1,2]]' '[[1,2,0,0,0,0,0,-5]]' '[[1,2,0,0,0,0,0,0,0,0,0,0,0]]' '[[1,2,0]]' '[]' "$many"; do
  cp "$T/v6.orig" "$T/bad3.db"
  sqlite3 "$T/bad3.db" "UPDATE event_rows SET rows = '$bad' WHERE trace_id = 7 AND chunk = 0"
  expect 0 --db "$T/bad3.db" check-store
  sqlite3 "$T/bad3.db" "SELECT * FROM events WHERE trace_id = 7 ORDER BY id" >"$T/after.bad3"
  cmp -s "$T/before.7" "$T/after.bad3" || fail "the text '${bad:0:40}' was not made again: $(diff "$T/before.7" "$T/after.bad3" | head -c 300)"
done
# a text that is not JSON beside a damaged packed chunk stays as it was (nothing to make it from)
cp "$T/v6.orig" "$T/bad2.db"
sqlite3 "$T/bad2.db" "UPDATE event_rows SET rows = 'not json [' WHERE trace_id = 7 AND chunk = 1"
sqlite3 "$T/bad2.db" "UPDATE event_chunks SET crc32 = (crc32 + 1) % 4294967296 WHERE trace_id = 7 AND chunk = 1"
expect 3 --db "$T/bad2.db" check-store
[ "$(sqlite3 "$T/bad2.db" "SELECT rows FROM event_rows WHERE trace_id = 7 AND chunk = 1")" = "not json [" ] ||
  fail "the unreadable text was changed"
[ "$(sqlite3 "$T/bad2.db" "SELECT count(*), min(r.ts0 + (j.value ->> 0)) FROM event_rows r, json_each(r.rows) j WHERE trace_id = 7 AND chunk = 0")" = "16384|0" ] ||
  fail "the other chunk's events are lost"

# New imports read back as schema 6 stored them: the edge trace (times at -2^62 and 2^62,
# addresses with the top bit set, the host, a second device, a dev_ts equal to its ts) and the
# sample (call sites, steps, categories), imported in the same order so that ids agree.
expect 0 import "$MEMPLAY_SRC/tests/data/text_edges.jsonl"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl"
named() { sqlite3 "$1" "SELECT t.name, e.seq, e.ts, e.kind, e.dur, e.dev_ts, e.api_dur, e.device, e.stream, e.addr, e.size,
  e.mem, e.dir, e.category, e.cat_source, e.stack_id, e.step, e.name, e.flags FROM events_named e
  JOIN traces t ON t.id = e.trace_id WHERE t.name IN ('text_edges', 'sample') ORDER BY t.id, e.seq"; }
named "$T/v6.orig" >"$T/edges.v6"
named "$DB" >"$T/edges.new"
[ "$(wc -l <"$T/edges.new")" = 4010 ] || fail "the two traces have $(wc -l <"$T/edges.new") events"
cmp -s "$T/edges.v6" "$T/edges.new" || fail "the edge trace reads otherwise: $(diff "$T/edges.v6" "$T/edges.new")"
expect 0 check-store
finish
