# Errors a user sees never show raw SQL or SQLite's own wording (--verbose shows them); they say
# what was being done, on which trace or file, and what to do.
. "$TESTS_DIR/cli/lib.sh"

raw_sql() { grep -qiE "INSERT INTO|SELECT |no such table|prepare statement|\(in: |SQL logic" "$1"; }

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl"
sqlite3 "$DB" "DROP TABLE run_timeline"
expect 1 replay sample
raw_sql "$T/err" && fail "raw SQL in: $(cat "$T/err")"
has "$T/err" "the replay of 'sample' finished but cannot be stored in '$DB'"
has "$T/err" "--no-save"
has "$T/err" "--verbose"
expect 1 replay sample --verbose
has "$T/err" "no such table: run_timeline"
expect 0 replay sample --no-save

sqlite3 "$DB" "DROP VIEW events_named; DROP TABLE events"
expect 1 import "$MEMPLAY_SRC/traces/recorded_cuda_program.jsonl"
raw_sql "$T/err" && fail "raw SQL in: $(cat "$T/err")"
has "$T/err" "recorded_cuda_program.jsonl"
has "$T/err" "changed by hand, or damaged"
expect 1 --verbose import "$MEMPLAY_SRC/traces/recorded_cuda_program.jsonl"
has "$T/err" "no such table: events"

# a store file that is not a store
echo "plain text" >"$T/text.db"
expect 1 --db "$T/text.db" info sample
raw_sql "$T/err" && fail "raw SQL in: $(cat "$T/err")"
grep -q "file is not a database" "$T/err" && fail "SQLite's words: $(cat "$T/err")"
has "$T/err" "not a memplay store"
finish
