# B29: times the time model adds and subtracts, far apart. Three events at -2^62 and 2^62 ns
# (each within the importers' bound) put 2^63 ns between the first event and the last:
# undefined behaviour (the sanitizer build stopped) and a nonsensical time in others. So did
# 2,200 kernels of 2^62 ns, and 2,200 kernels of 51 days each on as many streams, whose busy
# time summed past 2^63 ns. The model now follows recorded times within +-2^61 ns and
# durations within 2^56 ns, keeps its predictions in range, and otherwise stops: the replay
# fails (exit 1) naming the event and why; --no-time (device = false in a script) replays the
# memory alone. The same trace's first and last times, 2^63 ns apart, overflowed where `info`,
# `plot`, `export --format perfetto` and a script's summary take their difference: it is held
# to 2^63 - 1 there. And a trace whose first kernel ran on stream -1 crashed the time model (its
# stream cache took the key of stream -1 on device 0 for a hit before any look-up).
. "$TESTS_DIR/cli/lib.sh"
python3 - "$T" <<'PY'
import json, sys
d = sys.argv[1]
def write(name, events):
    with open(f"{d}/{name}.jsonl", "w") as f:
        print(json.dumps({"memplay": 1, "name": name, "device_name": "H100"}), file=f)
        for e in events:
            print(json.dumps(e), file=f)
write("far", [{"kind": "alloc", "ts": -(1 << 62), "addr": 1, "size": 1024},
              {"kind": "kernel", "ts": 1 << 62, "dur": (1 << 62) - 1, "name": "k"},
              {"kind": "free", "ts": 1 << 62, "addr": 1}])
write("long", [{"kind": "kernel", "ts": i, "dur": (1 << 62) - 1, "name": "k"} for i in range(2200)]
              + [{"kind": "alloc", "ts": 3000, "addr": 1, "size": 512}])
write("wide", [{"kind": "kernel", "ts": i, "dur": 4400000000000000, "stream": 100 + i, "name": "k"}
               for i in range(2200)] + [{"kind": "alloc", "ts": 3000, "addr": 1, "size": 512}])
write("minus", [{"kind": "kernel", "ts": 0, "dur": 1000, "stream": -1, "name": "k"},
                {"kind": "alloc", "ts": 5, "addr": 1, "size": 512}])
PY
for t in far long wide minus; do expect 0 import "$T/$t.jsonl"; done
expect 0 replay minus --no-save && has "$T/out" "predicted           8.000 us in total"
expect 1 replay far --no-save && has "$T/err" \
  "the time model stopped at event 0: its ts of -4611686018427387904 ns lies outside +-2^61 ns (73 years)"
has "$T/err" "replay or compare with --no-time"
expect 0 replay far --no-save --no-time && has "$T/out" "peak allocated      1.00 KiB"
expect 2 replay far --no-save --no-time --device H100 && has "$T/err" "--no-time predicts no time: it takes no --device"
expect 0 info far && has "$T/out" "far"
expect 0 info far --json && has "$T/out" '"duration_ns":9223372036854775807'
for o in far.svg far.html; do expect 0 plot far -o "$T/$o"; done
expect 0 export far --format perfetto -o "$T/far.json"
expect 1 compare far --policy torch --policy bfc --no-save && has "$T/out" "the time model stopped at event 0"
expect 0 compare far --policy torch --policy bfc --no-save --no-time && has "$T/out" "0 failed"
expect 2 compare far --policy torch@H100 --no-time && has "$T/err" "policy 'torch@H100' names a device profile: --no-time predicts no time"
expect 1 replay long --no-save && has "$T/err" "stopped at event 0: its dur of 4611686018427387903 ns lies outside"
expect 1 replay wide --no-save && has "$T/err" "stopped at event 2096: the time it sums (busy or blocked) passes 2^63 ns"
expect 1 replay wide --no-save --device A100-80GB && has "$T/err" "the time it sums (busy or blocked) passes 2^63 ns"
cat >"$T/far.lua" <<'LUA'
local t = memplay.store():trace("far")
local ok, err = pcall(function() return t:replay{} end)
print("timed", ok, err)
print("memory", t:replay{device = false}.peak_allocated_bytes)
print("duration", t:summary().duration_s)
LUA
expect 0 run "$T/far.lua" && { has "$T/out" "timed	false"; has "$T/out" "the time model stopped at event 0"; has "$T/out" "memory	1024"; has "$T/out" "duration	9223372036.8548"; }
finish
