# B27: a store's traces row with numbers no import writes (a store made elsewhere or edited by hand):
# an event_count of 2^63-1, a first_ts of -2^63 or a first_seq of 2^63-1 overflowed the sums the
# readers make of them (undefined behaviour, which the sanitizer build stops on). A trace whose row
# is out of range is now refused by name, with the column (exit 1); and copy sums edited past
# what n copies can sum are fitted again from the trace's copies, as any sums it cannot use.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
cp "$DB" "$T/good.db"
for edit in "event_count = 9223372036854775807" "event_count = -1" "first_ts = -9223372036854775808" \
  "last_ts = 9223372036854775807" "first_seq = 9223372036854775807" "device_memory = -5" "batch_size = -1"; do
  cp "$T/good.db" "$DB"
  rm -f "$DB-wal" "$DB-shm"
  sqlite3 "$DB" "UPDATE traces SET $edit WHERE name = 's'"
  col=${edit%% =*}
  for cmd in "replay s --no-save --device H100" "info s" "export s -o $T/e.jsonl" "list" \
    "compare s --policy torch --no-save"; do
    # shellcheck disable=SC2086
    expect 1 $cmd && has "$T/err" "trace 's' in store '$DB' is damaged: its row in traces holds $col = ${edit#*= }, out of range"
  done
done
cp "$T/good.db" "$DB"
rm -f "$DB-wal" "$DB-shm"
expect 0 replay s --no-save --device H100 --json && cp "$T/out" "$T/good.json"
sqlite3 "$DB" "UPDATE copy_sums SET sy = 9223372036854775807, syy = 1e300"
expect 0 replay s --no-save --device H100 --json
python3 - "$T/good.json" "$T/out" <<'PY' || fail "edited copy sums changed the prediction"
import json, sys
a, b = ((j["time"]["total_s"], j["time"]["copy_fit"]) for j in (json.load(open(f)) for f in sys.argv[1:]))
sys.exit(a != b)
PY
expect 3 check-store
finish
