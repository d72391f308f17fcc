# B31: events a script writes, and the transforms that move them. A script could set an event's
# ts, durations, stream, step or device to any integer (a device of 70000 was cut to 16 bits,
# silently), and a merge or a repeated block then moved times past 64 bits (undefined behaviour,
# which the sanitizer build stopped on). Events from scripts are now held to the ranges an
# importer holds a trace's to; a merge or a repeat that would move a time past 2^62 ns fails
# with the transform's name; scaled sizes are held to 2^48 bytes, as a trace's are.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
cat >"$T/fields.lua" <<'LUA'
local t = memplay.store():trace("s")
local function try(name, f)
  local ok, err = pcall(function() return f():replay{device = false}.peak_allocated_bytes end)
  print(name, ok, err)
end
try("ts", function() return t:map(function(ev) ev.ts = math.maxinteger end) end)
try("dur", function() return t:map(function(ev) ev.dur = -5 end) end)
try("dev_ts", function() return t:map(function(ev) ev.dev_ts = math.mininteger end) end)
try("size", function() return t:map(function(ev) if ev.kind == "alloc" then ev.size = 1 << 49 end end) end)
try("device", function() return t:map(function(ev) ev.device = 70000 end) end)
try("step", function() return t:map(function(ev) ev.step = 1 << 40 end) end)
try("stream", function() return t:map(function(ev) ev.stream = math.maxinteger end) end)
local n = t:summary().events
local late = t:map(function(ev) ev.ts = (1 << 62) - 100 * (n - ev.seq) end) -- the last at 2^62 - 100 ns
try("late", function() return late end)
try("merge", function() return late:merge(t, {offset_s = 1}) end)
try("merge_back", function() return t:merge(late) end)
try("repeat", function() return late:repeat_block{from = 0, to = 20, times = 3} end)
try("scale_time", function() return t:scale_time{factor = 2, fixed_ns = 5e18} end)
try("align", function() return t:scale{factor = 2, align = 1 << 62} end)
print("max_size", t:scale{factor = 1e9}:summary().max_size)
LUA
expect 0 run "$T/fields.lua"
has "$T/out" "ts	false	$T/fields.lua:3: replay of 's' under torch: $T/fields.lua:3: event field 'ts' is out of range (9223372036854775807; memplay takes at most 2^62 either way)"
has "$T/out" "event field 'dur' is out of range (-5; -1, unknown, or a duration up to 2^62 ns)"
has "$T/out" "event field 'dev_ts' is out of range (-9223372036854775808; memplay takes at most 2^62 either way)"
has "$T/out" "event field 'size' is out of range (562949953421312; memplay takes at most 2^48 bytes)"
has "$T/out" "event field 'device' is out of range (70000; -1, the host, or a device up to 1023)"
has "$T/out" "event field 'step' is out of range (1099511627776; -1, none, or a step up to 2^31 - 1)"
has "$T/out" "event field 'stream' is out of range (9223372036854775807; memplay takes at most 2^62 either way)"
has "$T/out" "late	true	"
has "$T/out" "merge	false	$T/fields.lua:3: replay of 's' under torch: merge: an event of the second trace (at 0 ns) would fall past 2^62 ns on the merged time line"
has "$T/out" "merge_back	true	"
has "$T/out" "repeat	false	$T/fields.lua:3: replay of 's' under torch: repeat: an event at "
has "$T/out" "scale_time: the fixed part must be from 0 to 2^62 ns"
has "$T/out" "scale: align 4611686018427387904 is larger than a trace's sizes (2^48 bytes)"
has "$T/out" "max_size	281474976710656"
finish
