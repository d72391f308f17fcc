# Errors a user sees never show raw SQL or SQLite's own wording (--verbose shows them); they say
# what was being done, on which trace or file, and what to do.
. "$TESTS_DIR/cli/lib.sh"

raw_sql() { grep -qiE "INSERT INTO|SELECT |no such table|prepare statement|\(in: |SQL logic" "$1"; }

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl"
cp "$DB" "$T/clean.db"
# a store damaged by hand is refused when opened, before anything is read or written: the message
# names the store and what is missing, and says what to do
sqlite3 "$DB" "DROP TABLE run_timeline"
expect 1 replay sample
raw_sql "$T/err" && fail "raw SQL in: $(cat "$T/err")"
has "$T/err" "cannot open store '$DB'"
has "$T/err" "changed by hand, or damaged"
has "$T/err" "table 'run_timeline' is missing"
has "$T/err" "import the traces into a new store with --db"
expect 1 replay sample --no-save

# a store that fails while it is being written: the replay is done, storing it fails, and the
# message says what was being done and what to do (SQLite's own words with --verbose only)
cp "$T/clean.db" "$DB"
chmod 0444 "$DB"
if [ "$(id -u)" != 0 ]; then
  expect 1 replay sample
  raw_sql "$T/err" && fail "raw SQL in: $(cat "$T/err")"
  has "$T/err" "--no-save"
fi
chmod 0644 "$DB"

sqlite3 "$DB" "DROP VIEW events_named; DROP VIEW events; DROP TABLE event_chunks"
expect 1 import "$MEMPLAY_SRC/traces/recorded_cuda_program.jsonl"
raw_sql "$T/err" && fail "raw SQL in: $(cat "$T/err")"
has "$T/err" "changed by hand, or damaged"
has "$T/err" "table 'event_chunks' is missing"

# a store file that is not a store
echo "plain text" >"$T/text.db"
expect 1 --db "$T/text.db" info sample
raw_sql "$T/err" && fail "raw SQL in: $(cat "$T/err")"
grep -q "file is not a database" "$T/err" && fail "SQLite's words: $(cat "$T/err")"
has "$T/err" "not a memplay store"
finish
