#!/usr/bin/env bash
# store_v3_answers.sh MEMPLAY DB: what a store answers, for the migration test (test_store_chunks.sh):
# the peaks and device calls of replays, validate's verdicts, a digest of each trace exported, and
# SQL over the events table or view (the figures, not the wording or the timings, so that a
# change of a report's layout elsewhere does not touch it). tests/data/store-v3.expected holds
# what memplay of schema 3 answered for
# tests/data/store-v3.db.gz (written by that version: sil_small_from_empty, bcrafton_warm_window,
# gen --events 16500 --seed 5).
# The replays hand out addresses upwards, as memplay of that schema did (--address-order up): the
# answers are the migration's to keep, not a later model's.
M=$1 DB=$2
figures() {
  python3 -c 'import json, sys
r = json.load(sys.stdin)
keys = ("events", "allocs", "frees", "peak_allocated_bytes", "peak_reserved_bytes", "peak_requested_bytes",
        "peak_allocated_event", "final_allocated_bytes", "final_reserved_bytes", "device_mallocs", "device_frees", "ooms")
print(" ".join("%s=%s" % (k, r.get(k)) for k in keys))
print("by_category", json.dumps(r.get("at_peak", {}).get("by_category"), sort_keys=True))'
}
for t in sil_small bcrafton_window gen16k; do
  echo "== replay $t"
  "$M" --db "$DB" --json replay "$t" --address-order up --no-save | figures
  echo "== replay $t --allocator ideal"
  "$M" --db "$DB" --json replay "$t" --allocator ideal --address-order up --no-save | figures
  echo "== export $t"
  "$M" --db "$DB" export "$t" -o - | md5sum | cut -d' ' -f1
done
for t in sil_small bcrafton_window; do
  echo "== validate $t"
  "$M" --db "$DB" validate "$t" --no-save | grep -E '^validate|allocations|segment events|final state|peak'
done
echo "== SQL"
sqlite3 "$DB" "SELECT trace_id, count(*), min(seq), max(seq), total(ts), total(dur), total(size), total(info),
  count(dur), count(addr), count(size), count(stream), count(stack_id), count(name_id), count(step), count(dev_ts),
  count(api_dur), total(addr % 1000003), total(stack_id), total(kind), total(category), total(device) FROM events
  GROUP BY trace_id ORDER BY trace_id"
sqlite3 "$DB" "SELECT trace_id, kind, count(*), sum(size) FROM events_named GROUP BY trace_id, kind ORDER BY trace_id, kind"
sqlite3 "$DB" "SELECT seq, ts, addr, size, kind, flags FROM events WHERE trace_id = 2 AND seq BETWEEN 2147483190 AND 2147483210 ORDER BY seq"
