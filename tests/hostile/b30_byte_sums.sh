# B30: bytes summed over a trace's allocations. 33,000 allocations of 2^48 bytes (each within the
# importers' bound) live at once sum past 2^63: the import's category notes, `info`, every
# model's counters on a device without a capacity, and a script's summary and count overflowed
# (undefined behaviour, which the sanitizer build stopped on; negative totals in others). A
# simulated device now holds at most 1 PiB, the largest capacity one may give, so what a model
# holds stays far below 2^63; sums over a trace's events stop at 2^63 - 1 (8 EiB).
. "$TESTS_DIR/cli/lib.sh"
python3 - "$T/huge.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    print(json.dumps({"memplay": 1, "name": "huge"}), file=f)
    for i in range(33000):
        print(json.dumps({"kind": "alloc", "ts": i, "addr": i + 1, "size": 1 << 48}), file=f)
PY
expect 0 import "$T/huge.jsonl"
expect 0 info huge && { has "$T/out" "peak live    at least 1.00 PiB at event 3 (then more than a simulated device holds: 1.00 PiB)";
  has "$T/out" "unknown                33,000  at least 8.00 EiB"; }
expect 0 info huge --json && [ "$(json_get peak_live_at_least)" = true ] || fail "info --json: the peak is not marked as at least"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
expect 0 info sample && ! grep -q "at least" "$T/out" || fail "info of the sample marks a figure as at least"
expect 0 info sample --json && ! grep -q peak_live_at_least "$T/out" || fail "info --json of the sample marks its peak"
for a in ideal torch bfc async cuda torch:expandable_segments:True; do
  expect 3 replay huge --no-save --allocator "$a" && has "$T/out" "(capacity unlimited: a simulated device holds at most 1 PiB)"
done
expect 0 replay huge --no-save --allocator torch --no-fail && has "$T/out" "peak allocated      1.00 PiB"
cat >"$T/sums.lua" <<'LUA'
local t = memplay.store():trace("huge")
local s = t:summary()
print("summary", s.alloc_bytes, s.live_peak_bytes)
print("count", t:count{kind = "alloc"})
LUA
expect 0 run "$T/sums.lua" && { has "$T/out" "summary	9223372036854775807	9223372036854775807"; has "$T/out" "count	33000	9223372036854775807"; }
finish
