# H: a store with objects memplay did not make (a trigger that never ends, a view, a table) is
# refused when opened: exit 1, a message naming the store and the object, the file unchanged.
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null || { echo "skipped: sqlite3 is not installed"; exit 77; }
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
cp "$DB" "$T/clean.db"
n=0
bad() { # SQL NAME
  n=$((n + 1))
  cp "$T/clean.db" "$T/h$n.db"
  sqlite3 "$T/h$n.db" "$1"
  local sum
  sum=$(md5sum <"$T/h$n.db")
  for cmd in "list" "info s" "replay s --allocator ideal" "import $MEMPLAY_SRC/traces/sample.jsonl --name t"; do
    # shellcheck disable=SC2086
    timeout 30 "$MEMPLAY" --db "$T/h$n.db" $cmd >"$T/out" 2>"$T/err"
    rc=$?
    [ "$rc" = 1 ] || fail "$2 ($cmd): exit $rc"
    has "$T/err" "h$n.db"
    has "$T/err" "$2"
  done
  [ "$(md5sum <"$T/h$n.db")" = "$sum" ] || fail "$2: the store changed"
}
bad "CREATE TRIGGER forever AFTER INSERT ON event_chunks BEGIN
  WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r; END;" "trigger 'forever'"
bad "CREATE VIEW spy AS SELECT * FROM traces;" "view 'spy'"
bad "CREATE TABLE extra(x);" "table 'extra'"
bad "DROP VIEW events_named; CREATE VIEW events_named AS SELECT 1;" "view 'events_named'"
finish
