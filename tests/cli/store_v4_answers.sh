#!/usr/bin/env bash
# store_v4_answers.sh MEMPLAY DB: the times a store's replays predict, for the migration test of
# schema 4 (test_store_chunks.sh): each trace replayed on its recorded device, where the time model
# fits copy speeds from the trace's own copies, its step time, end and copy fit. The figures, not
# the wording or the timings. tests/data/store-v4.expected holds what memplay of schema 4 answered
# for tests/data/store-v4.db.gz (written by that version: traces/sample.jsonl as sample, then
# gen --events 20000 --seed 7 as gen20k).
# The replays hand out addresses upwards, as memplay of that schema did (--address-order up): the
# answers are the migration's to keep, not a later model's.
M=$1 DB=$2
for t in sample gen20k; do
  for a in ideal torch; do
    echo "== replay $t --allocator $a"
    "$M" --db "$DB" --json replay "$t" --allocator "$a" --address-order up --no-save | python3 -c 'import json, sys
r = json.load(sys.stdin)
t = r["time"]
print("step_time_s", r.get("step_time_s"), "total_s", t.get("total_s"), "end_ns", t.get("end_ns"))
for key in ("copy_fit", "copies"):
    for c in t.get(key, []):
        print(key, json.dumps(c, sort_keys=True))'
  done
done
