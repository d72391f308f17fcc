# The store's chunks of events: a store of schema 3 migrated and answering as before, a damaged
# chunk a clear error (never a crash), and check-store's verdicts.
. "$TESTS_DIR/cli/lib.sh"

# A store written by memplay of schema 3 (tests/data/store-v3.db.gz; store_v3_answers.sh says how).
gunzip -c "$MEMPLAY_SRC/tests/data/store-v3.db.gz" >"$T/v3.db"
[ "$(sqlite3 "$T/v3.db" 'PRAGMA user_version')" = 3 ] || fail "the schema-3 store is not of schema 3"
# read-only (compare --no-save, shards): refused with how to upgrade it, and left as it was
v3sum=$(md5sum <"$T/v3.db")
expect 1 --db "$T/v3.db" compare 'gen*' --policy torch --no-save && has "$T/err" "needs upgrading from schema version 3 to 4"
has "$T/err" "memplay check-store"
[ "$(md5sum <"$T/v3.db")" = "$v3sum" ] || fail "a read-only open changed the store"
# check-store upgrades it (one transaction) and finds it whole
expect 0 --db "$T/v3.db" check-store || cat "$T/out" >&2
has "$T/out" "3 traces, 5 chunks, 23,521 events: no faults"
[ "$(sqlite3 "$T/v3.db" 'PRAGMA user_version')" = 4 ] || fail "not upgraded to schema 4"
[ "$(sqlite3 "$T/v3.db" "SELECT count(*) FROM sqlite_schema WHERE name = 'events_v3'")" = 0 ] || fail "schema 3's table is left"
# replay, validate, export and SQL answer exactly as memplay of schema 3 did on the same store
bash "$TESTS_DIR/cli/store_v3_answers.sh" "$MEMPLAY" "$T/v3.db" >"$T/v4.answers" 2>&1
diff "$MEMPLAY_SRC/tests/data/store-v3.expected" "$T/v4.answers" >"$T/answers.diff" ||
  fail "the upgraded store answers otherwise: $(head -c 1500 "$T/answers.diff")"

# A damaged chunk: a clear error naming the trace and the chunk, exit 1, no crash.
expect 0 gen --events 40000 --seed 3 --name victim
expect 0 check-store
has "$T/out" "trace 'victim': 3 chunks, 40,000 events: ok"
cp "$DB" "$T/good.db"
python3 - "$DB" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
data, = db.execute("SELECT data FROM event_chunks WHERE chunk = 1").fetchone()
b = bytearray(data)
b[len(b) // 2] ^= 0x10
db.execute("UPDATE event_chunks SET data = ? WHERE chunk = 1", (bytes(b),))
db.commit()
PY
for cmd in "replay victim --no-save" "info victim" "export victim -o $T/x.jsonl" "replay victim --allocator ideal --no-save"; do
  # shellcheck disable=SC2086
  expect 1 $cmd
  has "$T/err" "trace 'victim'"
  has "$T/err" "chunk 1 fails its checksum"
done
expect 3 check-store
has "$T/out" "fault: trace 'victim' in store"
has "$T/out" "1 fault found"
expect 3 check-store "$DB" victim
expect 3 --json check-store
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["fault_count"] == 1 and "chunk 1" in r["faults"][0], r' "$T/out" ||
  fail "check-store --json: $(head -c 300 "$T/out")"
# a chunk whose count is wrong (its bytes intact) does not decode
cp "$T/good.db" "$DB"
sqlite3 "$DB" "UPDATE event_chunks SET n = n - 1 WHERE chunk = 2"
expect 1 replay victim --no-save
has "$T/err" "chunk 2 does not decode to its"
expect 3 check-store
# a chunk whose data is not bytes (a number): the reader's blob handle cannot open it; named, exit 1
cp "$T/good.db" "$DB"
sqlite3 "$DB" "UPDATE event_chunks SET data = 5 WHERE chunk = 1"
for cmd in "replay victim --no-save" "replay victim --allocator ideal --no-save"; do
  # shellcheck disable=SC2086
  expect 1 $cmd
  has "$T/err" "trace 'victim'"
  has "$T/err" "chunk 1 has no packed data"
done
expect 3 check-store
# its text form changed by hand: what SQL reads no longer matches
cp "$T/good.db" "$DB"
sqlite3 "$DB" "UPDATE event_rows SET rows = '[]' WHERE chunk = 0"
expect 3 check-store
has "$T/out" "differ from the packed ones"
# bad arguments
cp "$T/good.db" "$DB"
expect 1 check-store nosuch && has "$T/err" "no trace 'nosuch'"
# plain SQL over the view, with the documented columns
[ "$(sqlite3 "$DB" "SELECT count(*), sum(kind = 1) > 0, min(seq), max(seq) FROM events WHERE trace_id = 1")" = "40000|1|0|39999" ] ||
  fail "the events view: $(sqlite3 "$DB" "SELECT count(*), min(seq), max(seq) FROM events WHERE trace_id = 1")"
finish
