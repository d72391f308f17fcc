# Importing as a CI job does, every run: the same file again names the trace that holds it (no
# NAME-2 copies); another file under a taken name fails naming --name and --replace; several files
# in one call, one transaction each, a line each, exit 1 when any failed with the others kept; a
# store in memory warns that nothing is kept; info labels the recording and the import times and
# says "not recorded" for what a format never records.
. "$TESTS_DIR/cli/lib.sh"
S="$MEMPLAY_SRC/traces/sample.jsonl"

expect 0 import "$S"
has "$T/out" "imported 'sample' (4,000 events"
expect 0 import "$S"
has "$T/out" "is in $DB already, as trace 'sample' (the same content): not imported again"
expect 0 import "$S" --json
grep -q '"status":"already_imported","existing_trace":"sample"' "$T/out" || fail "--json: $(cat "$T/out")"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM traces")" = 1 ] || fail "a second copy was stored"
sqlite3 "$DB" "SELECT name FROM traces" | grep -q 'sample-2' && fail "sample-2 stored"
# under the same --name: the same answer; under another name: a copy, as asked
expect 0 import "$S" --name sample
has "$T/out" "as trace 'sample'"
expect 0 import "$S" --name sample_copy
has "$T/out" "imported 'sample_copy'"

# another file whose name is taken fails, naming the way out; the store is unchanged
mkdir "$T/other"
sed 's/"seed":7/"seed":8/' "$S" >"$T/other/sample.jsonl"
before=$(store_digest)
expect 1 import "$T/other/sample.jsonl"
has "$T/err" "a trace named 'sample' already exists"
has "$T/err" "--name NAME"
has "$T/err" "--replace"
[ "$(store_digest)" = "$before" ] || fail "a failed import changed the store"
expect 0 import "$T/other/sample.jsonl" --replace
has "$T/err" "replacing trace 'sample'"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM traces WHERE name = 'sample'")" = 1 ] || fail "--replace left two"
[ "$(sqlite3 "$DB" "SELECT json_extract(attrs, '\$.seed') FROM traces WHERE name = 'sample'")" = 8 ] ||
  fail "--replace kept the old trace"

# several files: one line each; a bad one fails alone
printf 'not a trace\n' >"$T/bad.jsonl"
expect 1 import "$MEMPLAY_SRC/traces/recorded_cuda_program.jsonl" "$T/bad.jsonl" "$T/missing.jsonl"
has "$T/out" "imported 'recorded_cuda_program'"
has "$T/err" "bad.jsonl"
has "$T/err" "missing.jsonl"
has "$T/err" "2 of 3 files failed to import (the others are kept)"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM traces WHERE name = 'recorded_cuda_program'")" = 1 ] ||
  fail "the good file of several was not kept"
expect 0 import "$MEMPLAY_SRC/traces/recorded_cuda_program.jsonl" "$S" --json
grep -q '"files":\[' "$T/out" || fail "several files' --json: $(cat "$T/out")"
grep -q '"failed":0' "$T/out" || fail "several files' --json: $(cat "$T/out")"
expect 2 import "$S" "$S" --name x
has "$T/err" "--name names one trace"

# a store that does not outlive the process
expect 0 --db :memory: import "$S"
has "$T/err" "lives in memory: nothing imported will be kept"

# info: the recording time from the file, the import time from the store, labelled
expect 0 info sample_copy
has "$T/out" "recorded     2026-11-21T09:30:19Z (the time the file gives)"
grep -q "^imported     20[0-9-]*T[0-9:]*Z (into this store)" "$T/out" || fail "no import time: $(head -5 "$T/out")"
expect 0 info sample_copy --json
[ "$(json_get imported_at)" = 2026-11-21T09:30:19Z ] || fail "imported_at: $(json_get imported_at)"
[ -n "$(json_get stored_at)" ] || fail "no stored_at"
if [ -n "${MEMPLAY_TRACES:-}" ] && [ -f "$MEMPLAY_TRACES/kineto/hta_memory_timeline.raw.gz" ]; then
  expect 0 import "$MEMPLAY_TRACES/kineto/hta_memory_timeline.raw.gz" --name tl
  expect 0 info tl
  has "$T/out" "recorded     not recorded (the file gives no time)"
  has "$T/out" "devices      not recorded (a memory_timeline file names none)"
  has "$T/out" "streams      not recorded (a memory_timeline file names none)"
  grep -q "^devices      0$" "$T/out" && fail "devices 0 for a format without devices"
  expect 0 info tl --json
  grep -q '"devices":null,"streams":null' "$T/out" || fail "info --json devices/streams"
fi
finish
