# An import interrupted at any moment leaves the store exactly as it was; generation is deterministic.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
digest=$(store_digest)

# A large trace, imported and killed part-way through, several times.
expect 0 --db "$T/big.db" gen --events 400000 --seed 5 --name big
expect 0 --db "$T/big.db" export big -o "$T/big.jsonl"
interrupted=0
for delay in 0.05 0.1 0.2 0.3; do
  if import_killed "$delay" "$T/big.jsonl" --name big; then interrupted=$((interrupted + 1)); fi
  [ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "store damaged after kill at $delay s"
  if [ "$(sqlite3 "$DB" "SELECT count(*) FROM traces WHERE name = 'big'")" = 1 ]; then
    # it finished before the kill: it must then be complete, and is removed for the next round
    [ "$(sqlite3 "$DB" "SELECT event_count FROM traces WHERE name = 'big'")" = 400000 ] || fail "partial trace"
    expect 0 rm big
  fi
  [ "$(store_digest)" = "$digest" ] || fail "store changed after a kill at $delay s"
  expect 0 check-store || fail "check-store after a kill at $delay s: $(cat "$T/out")"
  digest=$(store_digest) # (check-store's own connection may have checkpointed the WAL)
done
[ "$interrupted" -gt 0 ] || echo "note: every import finished before it could be interrupted"

# The first import into a new store writes the file under a rollback journal, not the log
# (docs/trace-store.md): killed part-way, it leaves the new store empty and whole. Until a command
# that writes rolls the journal back, a read-only one says what to do; then the store is in WAL mode.
new_killed=0
for delay in 0.1 0.2 0.3; do
  rm -f "$T/new.db" "$T/new.db-journal" "$T/new.db-wal" "$T/new.db-shm"
  import_killed "$delay" "$T/big.jsonl" --name big --db "$T/new.db" || continue
  new_killed=$((new_killed + 1))
  if [ -f "$T/new.db-journal" ]; then
    # A read-only command: the message; or (nothing written yet) no trace; or, when the kill came
    # after the commit, during the switch to the log (whose journal, just created, is not yet hot),
    # the whole trace.
    mp --db "$T/new.db" compare big --policy torch --no-save
    grep -q "was interrupted, and what it left must be undone" "$T/err" || grep -q "no trace matches 'big'" "$T/err" ||
      { [ "$rc" = 0 ] && [ "$(sqlite3 "$T/new.db" "SELECT event_count FROM traces WHERE name = 'big'")" = 400000 ]; } ||
      fail "a read-only command on a killed new store's import (kill at $delay s) exited $rc: stderr [$(cat "$T/err")], stdout [$(head -c 300 "$T/out")], journal $(stat -c %s "$T/new.db-journal" 2>/dev/null || echo gone) bytes, store $(stat -c %s "$T/new.db") bytes"
  fi
  expect 0 --db "$T/new.db" check-store || fail "check-store after a kill of a new store's import at $delay s"
  # killed before its commit: nothing; after it (while it closed): the whole trace
  grep -q "0 traces" "$T/out" || grep -q "400,000 events: ok" "$T/out" ||
    fail "a killed import into a new store left part of a trace: $(cat "$T/out")"
  [ ! -e "$T/new.db-journal" ] || fail "the journal is still there after check-store"
  [ "$(sqlite3 "$T/new.db" 'PRAGMA journal_mode')" = wal ] || fail "the new store is not in WAL mode after check-store"
  [ "$(sqlite3 "$T/new.db" 'PRAGMA integrity_check')" = ok ] || fail "new store damaged after a kill at $delay s"
done
[ "$new_killed" -gt 0 ] || echo "note: every import into a new store finished before it could be interrupted"

# Killed sooner, while the new store's schema was being written, the import leaves an empty file
# and its journal (which SQLite does not roll back beside an empty file): a read-only command says
# so, not that an empty file needs upgrading; an empty file alone is said to be empty.
rm -f "$T/new.db" "$T/new.db-journal" "$T/new.db-wal" "$T/new.db-shm"
: >"$T/new.db"
head -c 512 /dev/urandom >"$T/new.db-journal"
expect 1 --db "$T/new.db" compare big --policy torch --no-save
has "$T/err" "was interrupted, and what it left must be undone"
expect 0 --db "$T/new.db" check-store
has "$T/out" "0 traces"
[ ! -e "$T/new.db-journal" ] || fail "the journal beside an empty new store is still there after check-store"
rm -f "$T/new.db" "$T/new.db-wal" "$T/new.db-shm"
: >"$T/new.db"
expect 1 --db "$T/new.db" compare big --policy torch --no-save
has "$T/err" "it is empty (import a trace into it first)"

# Killed after its commit, while the switch to the log had only created its journal: the trace is
# whole and a read-only command reads it; check-store removes the journal and the store is in WAL
# mode.
rm -f "$T/new.db" "$T/new.db-journal" "$T/new.db-wal" "$T/new.db-shm"
expect 0 --db "$T/new.db" import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
[ "$(sqlite3 "$T/new.db" 'PRAGMA journal_mode = DELETE')" = delete ] || fail "cannot put the store back in rollback mode"
: >"$T/new.db-journal"
expect 0 --db "$T/new.db" compare sample --policy torch --no-save
has "$T/out" "sample"
expect 0 --db "$T/new.db" check-store
has "$T/out" "4,000 events: ok"
[ ! -e "$T/new.db-journal" ] || fail "the empty journal beside a whole store is still there after check-store"
[ "$(sqlite3 "$T/new.db" 'PRAGMA journal_mode')" = wal ] || fail "the store is not in WAL mode after check-store"

# Another command on a new store waits for its first import, then sees it whole.
rm -f "$T/new.db" "$T/new.db-journal" "$T/new.db-wal" "$T/new.db-shm"
"$MEMPLAY" import "$T/big.jsonl" --name big --db "$T/new.db" >/dev/null 2>"$T/imp.err" &
imp=$!
sleep 0.1
"$MEMPLAY" list --db "$T/new.db" >"$T/list" 2>&1 || fail "list beside a new store's import failed: $(cat "$T/list")"
wait "$imp" || fail "the import beside list failed: $(cat "$T/imp.err")"
grep -q "no traces" "$T/list" || grep -q "400,000" "$T/list" || fail "list saw a part of the import: $(cat "$T/list")"
[ "$(sqlite3 "$T/new.db" 'PRAGMA journal_mode')" = wal ] || fail "a new store is not in WAL mode after its first import"

# A new store whose first file fails: the next file is its first import, and the store ends in WAL mode.
rm -f "$T/new.db" "$T/new.db-journal" "$T/new.db-wal" "$T/new.db-shm"
printf '{"memplay":1,"name":"bad"}\n{"kind":"alloc","ts":"x"}\n' >"$T/bad.jsonl"
expect 1 --db "$T/new.db" import "$T/bad.jsonl" "$MEMPLAY_SRC/traces/sample.jsonl"
has "$T/err" "1 of 2 files failed"
[ "$(sqlite3 "$T/new.db" 'SELECT group_concat(name) FROM traces')" = sample ] || fail "the new store lacks the good file"
[ "$(sqlite3 "$T/new.db" 'PRAGMA journal_mode')" = wal ] || fail "a new store whose first file failed is not in WAL mode"
[ ! -e "$T/new.db-journal" ] || fail "a journal is left beside the new store"

# The same seed gives the same trace; another seed another one.
expect 0 gen --events 3000 --seed 9 --name s9a
expect 0 gen --events 3000 --seed 9 --name s9b
expect 0 gen --events 3000 --seed 10 --name s10
q="SELECT seq, ts, kind, size, dur, stream, category, step FROM events_named WHERE trace_id = (SELECT id FROM traces WHERE name = '%s') ORDER BY seq"
[ "$(sqlite3 "$DB" "$(printf "$q" s9a)" | md5sum)" = "$(sqlite3 "$DB" "$(printf "$q" s9b)" | md5sum)" ] || fail "same seed, different trace"
[ "$(sqlite3 "$DB" "$(printf "$q" s9a)" | md5sum)" != "$(sqlite3 "$DB" "$(printf "$q" s10)" | md5sum)" ] || fail "seed ignored"
[ "$(sqlite3 "$DB" "SELECT event_count FROM traces WHERE name = 's9a'")" = 3000 ] || fail "gen length"
expect 2 gen && has "$T/err" "--events N is required"
expect 2 gen --events 0
expect 2 gen --events 10 --seed x
expect 1 gen --events 10 --name s9a && has "$T/err" "already exists"

# The benchmark runs and reports every stage (its speed is recorded in docs, not tested).
expect 0 bench --events 20000 --json
for s in "generate in memory" "replay in memory: ideal" "replay in memory: cuda" "import: jsonl" "store read of the events" "replay from store: cuda"; do
  has "$T/out" "\"stage\":\"$s\""
done
finish
