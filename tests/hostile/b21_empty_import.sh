# B21: one rule for "empty" in every importer: a file that yields a trace with no events is an
# error (exit 1, the store untouched), documented in docs/formats.md.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
digest=$(store_digest)
printf '{"memplay":1}\n' >"$T/header.jsonl"
printf '{"traceEvents":[]}' >"$T/kineto.json"
printf '' >"$T/nothing.jsonl"
for f in header.jsonl kineto.json nothing.jsonl; do
  expect 1 import "$T/$f" && has "$T/err" "$f"
  [ "$(store_digest)" = "$digest" ] || fail "store changed by $f"
done
has "$T/err" "empty"
expect 1 import "$T/header.jsonl" && has "$T/err" "no events"
finish
