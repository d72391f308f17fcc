# The store's files: the log (store.db-wal) and its index (-shm) stay beside the store, empty,
# when memplay exits; store.db alone is complete then, with other processes reading and writing
# it meanwhile, and after a memplay was killed.
. "$TESTS_DIR/cli/lib.sh"

# copy_alone NAME: store.db copied alone to $T/NAME/store.db (as a user copies "the store").
copy_alone() {
  rm -rf "${T:?}/$1"
  mkdir "$T/$1"
  cp "$DB" "$T/$1/store.db"
}

# q FILE SQL: one value read by SQLite's own shell.
q() { sqlite3 "$1" "$2"; }

expect 0 gen --events 3000 --seed 1 --name small
[ ! -s "$DB-wal" ] || fail "the log holds $(stat -c %s "$DB-wal") bytes after gen exited"
copy_alone a
[ "$(q "$T/a/store.db" 'PRAGMA integrity_check')" = ok ] || fail "store.db alone is damaged after gen"
[ "$(q "$T/a/store.db" "SELECT event_count FROM traces WHERE name = 'small'")" = 3000 ] ||
  fail "store.db alone lacks the trace gen stored"

# A run stored, then the store copied alone: the run is in it.
expect 0 replay small --allocator torch --quiet
[ ! -s "$DB-wal" ] || fail "the log holds $(stat -c %s "$DB-wal") bytes after replay exited"
copy_alone b
[ "$(q "$T/b/store.db" 'SELECT count(*) FROM runs')" = 1 ] || fail "store.db alone lacks the stored run"
expect 0 --db "$T/b/store.db" info small

# Another process holds a read transaction while two memplays store runs at once: they do not
# wait for it, it keeps its snapshot, and once it has gone store.db alone holds every run.
(
  echo "BEGIN; SELECT count(*) FROM runs;"
  sleep 1.5
  echo "SELECT count(*) FROM runs; COMMIT;"
) | sqlite3 "$DB" >"$T/reader" 2>&1 &
reader=$!
sleep 0.3
"$MEMPLAY" replay small --allocator ideal --quiet >"$T/r1" 2>&1 &
p1=$!
"$MEMPLAY" replay small --allocator bfc --quiet >"$T/r2" 2>&1 &
p2=$!
wait "$p1" || fail "a replay beside a reader and another replay failed: $(cat "$T/r1")"
wait "$p2" || fail "a replay beside a reader and another replay failed: $(cat "$T/r2")"
kill -0 "$reader" 2>/dev/null || fail "the reader had finished before the replays did (the check proves nothing)"
wait "$reader"
[ "$(tr '\n' ' ' <"$T/reader")" = "1 1 " ] || fail "the reader's snapshot changed: $(cat "$T/reader")"
[ ! -s "$DB-wal" ] || fail "the log holds $(stat -c %s "$DB-wal") bytes after every process exited"
copy_alone c
[ "$(q "$T/c/store.db" 'SELECT count(*) FROM runs')" = 3 ] || fail "store.db alone lacks runs stored beside a reader"

# A memplay killed while it writes (an import, part-way; the log it leaves may hold frames never
# committed): the store is whole, the next memplay opens it, and once that one has exited the log
# is empty again and store.db alone holds everything committed, and nothing of the import.
expect 0 --db "$T/gen.db" gen --events 200000 --seed 2 --name big
expect 0 --db "$T/gen.db" export big -o "$T/big.jsonl"
killed=0 runs=3
for delay in 0.05 0.1 0.15; do
  if import_killed "$delay" "$T/big.jsonl" --name big; then killed=$((killed + 1)); fi
  [ "$(q "$DB" 'PRAGMA integrity_check')" = ok ] || fail "store damaged after a kill at $delay s"
  expect 0 replay small --allocator ideal --quiet
  runs=$((runs + 1))
  [ ! -s "$DB-wal" ] || fail "the log holds $(stat -c %s "$DB-wal") bytes after the memplay that followed a kill"
  copy_alone d
  [ "$(q "$T/d/store.db" 'PRAGMA integrity_check')" = ok ] || fail "store.db alone is damaged after a kill at $delay s"
  [ "$(q "$T/d/store.db" 'SELECT count(*) FROM runs')" = "$runs" ] || fail "store.db alone lacks a run stored after a kill"
  [ "$(q "$T/d/store.db" 'SELECT count(*) FROM traces')" = "$(q "$DB" 'SELECT count(*) FROM traces')" ] ||
    fail "store.db alone and the store differ in traces after a kill at $delay s"
  if [ "$(q "$DB" "SELECT count(*) FROM traces WHERE name = 'big'")" = 1 ]; then expect 0 rm big; fi
done
[ "$killed" -gt 0 ] || echo "note: every import finished before it could be killed"
finish
