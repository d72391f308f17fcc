# The store's chunks of events: stores of schemas 3 and 4 migrated and answering as before, a
# damaged chunk a clear error (never a crash), and check-store's verdicts.
. "$TESTS_DIR/cli/lib.sh"

# A store written by memplay of schema 3 (tests/data/store-v3.db.gz; store_v3_answers.sh says how).
gunzip -c "$MEMPLAY_SRC/tests/data/store-v3.db.gz" >"$T/v3.db"
[ "$(sqlite3 "$T/v3.db" 'PRAGMA user_version')" = 3 ] || fail "the schema-3 store is not of schema 3"
# read-only (compare --no-save, shards): refused with how to upgrade it, and left as it was
v3sum=$(md5sum <"$T/v3.db")
schema=$("$MEMPLAY" --version | sed -E 's/.*schema version ([0-9]+).*/\1/')
expect 1 --db "$T/v3.db" compare 'gen*' --policy torch --no-save && has "$T/err" "needs upgrading from schema version 3 to $schema"
has "$T/err" "memplay check-store"
[ "$(md5sum <"$T/v3.db")" = "$v3sum" ] || fail "a read-only open changed the store"
# check-store upgrades it (one transaction) and finds it whole
expect 0 --db "$T/v3.db" check-store || cat "$T/out" >&2
has "$T/out" "3 traces, 5 chunks, 23,521 events: no faults"
[ "$(sqlite3 "$T/v3.db" 'PRAGMA user_version')" = "$schema" ] || fail "not upgraded to schema $schema"
[ "$(sqlite3 "$T/v3.db" "SELECT count(*) FROM sqlite_schema WHERE name = 'events_v3'")" = 0 ] || fail "schema 3's table is left"
# replay, validate, export and SQL answer exactly as memplay of schema 3 did on the same store
bash "$TESTS_DIR/cli/store_v3_answers.sh" "$MEMPLAY" "$T/v3.db" >"$T/v4.answers" 2>&1
diff "$MEMPLAY_SRC/tests/data/store-v3.expected" "$T/v4.answers" >"$T/answers.diff" ||
  fail "the upgraded store answers otherwise: $(head -c 1500 "$T/answers.diff")"

# A store written by memplay of schema 4 (tests/data/store-v4.db.gz; store_v4_answers.sh says how):
# the upgrade keeps the copy fit's sums of each trace, and replays on the recorded device predict
# the same times, to the nanosecond, from the kept sums and, with them gone, from the copies.
gunzip -c "$MEMPLAY_SRC/tests/data/store-v4.db.gz" >"$T/v4.db"
[ "$(sqlite3 "$T/v4.db" 'PRAGMA user_version')" = 4 ] || fail "the schema-4 store is not of schema 4"
expect 0 --db "$T/v4.db" check-store || cat "$T/out" >&2
has "$T/out" "2 traces, 3 chunks, 24,000 events: no faults"
[ "$(sqlite3 "$T/v4.db" 'PRAGMA user_version')" = "$schema" ] || fail "not upgraded to schema $schema"
[ "$(sqlite3 "$T/v4.db" "SELECT count(*), sum(timed_copies) FROM traces WHERE timed_copies IS NOT NULL")" = "2|38" ] ||
  fail "the upgrade kept no copy sums: $(sqlite3 "$T/v4.db" "SELECT name, timed_copies FROM traces")"
[ "$(sqlite3 "$T/v4.db" "SELECT count(*), sum(n) FROM copy_sums")" = "2|38" ] || fail "copy_sums: $(sqlite3 "$T/v4.db" "SELECT * FROM copy_sums")"
for how in kept pass; do
  [ $how = pass ] && sqlite3 "$T/v4.db" "UPDATE traces SET timed_copies = NULL"
  bash "$TESTS_DIR/cli/store_v4_answers.sh" "$MEMPLAY" "$T/v4.db" >"$T/v5.answers" 2>&1
  diff "$MEMPLAY_SRC/tests/data/store-v4.expected" "$T/v5.answers" >"$T/answers.diff" ||
    fail "the upgraded store's times ($how sums) differ: $(head -c 1500 "$T/answers.diff")"
done
# a damaged chunk does not stop the upgrade: that trace keeps no sums (its replay says what is
# damaged), the others theirs
gunzip -c "$MEMPLAY_SRC/tests/data/store-v4.db.gz" >"$T/v4bad.db"
python3 - "$T/v4bad.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
data, = db.execute("SELECT data FROM event_chunks WHERE trace_id = 2 AND chunk = 1").fetchone()
b = bytearray(data)
b[len(b) // 2] ^= 0x10
db.execute("UPDATE event_chunks SET data = ? WHERE trace_id = 2 AND chunk = 1", (bytes(b),))
db.commit()
PY
expect 3 --db "$T/v4bad.db" check-store
has "$T/out" "trace 'gen20k' in store"
[ "$(sqlite3 "$T/v4bad.db" "PRAGMA user_version; SELECT name || '=' || coalesce(timed_copies, 'none') FROM traces ORDER BY id")" = "$schema
sample=6
gen20k=none" ] || fail "the damaged store's upgrade: $(sqlite3 "$T/v4bad.db" "SELECT name, timed_copies FROM traces")"
expect 1 --db "$T/v4bad.db" replay gen20k --no-save && has "$T/err" "chunk 1 fails its checksum"
# a kept sum changed: check-store names the trace and the class
expect 0 --db "$T/v4.db" gen --events 3000 --seed 2 --name fresh
sqlite3 "$T/v4.db" "UPDATE copy_sums SET sy = sy + 1 WHERE trace_id = (SELECT id FROM traces WHERE name = 'fresh')"
expect 3 --db "$T/v4.db" check-store
has "$T/out" "trace 'fresh': its copy sums (copy_sums, class h2d_pinned below 1 MiB) differ from its copies'"

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
has "$T/out" "events: 1 fault found"
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
