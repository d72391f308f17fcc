# Each trace's plan (event_plans: the engine's record of each allocation, numbered when the trace is
# written): a store of schema 5 upgraded and answering exactly as before, replays with the plan
# and without it the same, and a damaged plan a clear error naming the trace and the chunk.
. "$TESTS_DIR/cli/lib.sh"

# figures: the last replay's JSON result less its clock, keys sorted
figures() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); r.pop("elapsed_s"); print(json.dumps(r, sort_keys=True))' "$T/out"; }

schema=$("$MEMPLAY" --version | sed -E 's/.*schema version ([0-9]+).*/\1/')
# A store written by memplay of schema 5 (tests/data/store-v5.db.gz; store_v5_answers.sh says how).
gunzip -c "$MEMPLAY_SRC/tests/data/store-v5.db.gz" >"$T/v5.db"
[ "$(sqlite3 "$T/v5.db" 'PRAGMA user_version')" = 5 ] || fail "the schema-5 store is not of schema 5"
expect 0 --db "$T/v5.db" check-store || cat "$T/out" >&2
has "$T/out" "3 traces, 5 chunks, 44,088 events: no faults"
[ "$(sqlite3 "$T/v5.db" 'PRAGMA user_version')" = "$schema" ] || fail "not upgraded to schema $schema"
# every chunk of every trace numbered by the upgrade
[ "$(sqlite3 "$T/v5.db" "SELECT count(*) FROM event_chunks c JOIN event_plans p USING (trace_id, chunk)")" = 5 ] ||
  fail "the upgrade numbered: $(sqlite3 "$T/v5.db" "SELECT trace_id, chunk, records FROM event_plans")"
# replays answer as memplay of schema 5 did, with the plans and with them gone (the hash table)
for how in planned unplanned; do
  [ $how = unplanned ] && sqlite3 "$T/v5.db" "DELETE FROM event_plans"
  bash "$TESTS_DIR/cli/store_v5_answers.sh" "$MEMPLAY" "$T/v5.db" >"$T/v6.answers" 2>&1
  diff "$MEMPLAY_SRC/tests/data/store-v5.expected" "$T/v6.answers" >"$T/answers.diff" ||
    fail "the upgraded store's replays ($how) differ: $(head -c 1500 "$T/answers.diff")"
done
expect 0 --db "$T/v5.db" check-store # a trace without a plan is not a fault

# A new trace is numbered as it is written: a window of a real snapshot (preexisting allocations
# put before the others, so numbered again at the end), JSON Lines, a generated trace.
expect 0 import "$MEMPLAY_SRC/traces/sil_small_from_empty.pickle"
expect 0 import "$MEMPLAY_SRC/tests/data/snapshot_window.jsonl" --name window
expect 0 gen --events 40000 --seed 3 --name victim
[ "$(sqlite3 "$DB" "SELECT count(DISTINCT trace_id) FROM event_plans")" = 3 ] ||
  fail "plans of: $(sqlite3 "$DB" "SELECT DISTINCT trace_id FROM event_plans")"
expect 0 check-store
has "$T/out" "trace 'victim': 3 chunks, 40,000 events: ok"
expect 0 replay victim --no-save --json
figures >"$T/planned.json"
cp "$DB" "$T/good.db"

# a damaged plan: a byte changed fails its checksum; replay says which trace and chunk, exit 1
python3 "$TESTS_DIR/cli/plan_edit.py" "$DB" victim 1 flip
for a in torch ideal; do
  expect 1 replay victim --allocator $a --no-save
  has "$T/err" "trace 'victim'"
  has "$T/err" "chunk 1 has a damaged plan (event_plans): it fails its checksum"
done
expect 3 check-store
has "$T/out" "trace 'victim' chunk 1: its plan (event_plans) fails its checksum"
# a plan whose checksum holds but whose numbers are not the events': check-store finds it
cp "$T/good.db" "$DB"
python3 "$TESTS_DIR/cli/plan_edit.py" "$DB" victim 2 swap # two neighbours' numbers exchanged
expect 3 check-store
has "$T/out" "trace 'victim' chunk 2: its plan (event_plans) does not number the chunk's allocations as its events do"
# refused SQL MESSAGE: the good store changed by SQL (V names victim's rows); replaying victim is
# refused with MESSAGE, exit 1
V="trace_id = (SELECT id FROM traces WHERE name = 'victim')"
refused() {
  cp "$T/good.db" "$DB"
  sqlite3 "$DB" "$1"
  expect 1 replay victim --no-save
  has "$T/err" "$2"
}
# numbers past the records a chunk says it has (one byte a number, and a count whose numbers take
# another width), more records than the trace has events, a plan that is not bytes: refused
cp "$T/good.db" "$DB"
sqlite3 "$DB" "UPDATE event_plans SET records = 2 WHERE trace_id = (SELECT id FROM traces WHERE name = 'sil_small_from_empty')"
expect 1 replay sil_small_from_empty --no-save
has "$T/err" "trace 'sil_small_from_empty' in store"
has "$T/err" "has a damaged plan (event_plans): it numbers an event past the 2 records numbered"
refused "UPDATE event_plans SET records = 3 WHERE chunk = 0 AND $V" \
  "chunk 0 has a damaged plan (event_plans): it numbers an event past the 3 records numbered"
refused "UPDATE event_plans SET records = 99999999 WHERE chunk = 0 AND $V" \
  "chunk 0 has a damaged plan (event_plans): it claims 99999999 records, more than the trace's 16384 events up to its end"
refused "UPDATE event_plans SET data = 7 WHERE chunk = 1 AND $V" "chunk 1 has a damaged plan (event_plans)"
# a plan two bytes short, its checksum made again
cp "$T/good.db" "$DB"
python3 "$TESTS_DIR/cli/plan_edit.py" "$DB" victim 0 short
expect 1 replay victim --no-save
has "$T/err" "chunk 0 has a damaged plan (event_plans): it holds 32766 bytes, not the 32768 of its 16384 events' numbers"
expect 3 check-store
has "$T/out" "trace 'victim' chunk 0: its plan (event_plans) holds"
# a plan row missing: replayed without a plan from there, the same answer
cp "$T/good.db" "$DB"
sqlite3 "$DB" "DELETE FROM event_plans WHERE chunk = 1 AND $V"
expect 0 replay victim --no-save --json
figures >"$T/partly.json"
cmp -s "$T/planned.json" "$T/partly.json" || fail "a replay that leaves its plan half-way answers otherwise"
expect 3 check-store
has "$T/out" "trace 'victim' chunk 1: its plan (event_plans) is missing"
# removing a trace removes its plan
cp "$T/good.db" "$DB"
expect 0 rm victim
[ "$(sqlite3 "$DB" "SELECT count(*) FROM event_plans WHERE trace_id NOT IN (SELECT id FROM traces)")" = 0 ] ||
  fail "rm left the plan behind"
finish
