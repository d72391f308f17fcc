#!/usr/bin/env bash
# store_v5_answers.sh MEMPLAY DB: what a store's replays answer, for the migration test of schema 5
# (test_store_plans.sh): each trace under three models, and under torch on a device too small for
# its peak (allocations dropped by OOMs keep their addresses until freed). Every figure of the JSON
# result but its clock, keys sorted. tests/data/store-v5.expected holds what memplay of schema 5
# answered for tests/data/store-v5.db.gz (written by that version: traces/sample.jsonl as sample,
# traces/sil_small_from_empty.pickle, then gen --events 40000 --seed 7 as gen40k).
# The replays hand out addresses upwards, as memplay of that schema did (--address-order up): the
# answers are the migration's to keep, not a later model's.
M=$1 DB=$2
for t in sample sil_small_from_empty gen40k; do
  for a in ideal torch bfc "torch --capacity 64MiB"; do
    echo "== replay $t --allocator $a"
    # shellcheck disable=SC2086
    "$M" --db "$DB" --json replay "$t" --allocator $a --address-order up --no-save | python3 -c 'import json, sys
r = json.load(sys.stdin)
r.pop("elapsed_s", None)
r.pop("address_order", None)  # reported since
r.pop("address_order_source", None)
r.pop("time", None)
print(json.dumps(r, sort_keys=True))'
  done
done
