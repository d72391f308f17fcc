# B18: a t:map callback returning {} (an empty list of events) drops the event, as documented.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
cat >"$T/map.lua" <<'LUA'
local t = memplay.store():trace("s")
local allocs = t:count{kind = "alloc"}
local m = t:map(function(ev) if ev.kind == "kernel" then return {} end end)
print("kernels", m:count{kind = "kernel"}, "allocs", m:count{kind = "alloc"} == allocs)
print("none", t:map(function() return {} end):count())
LUA
expect 0 run "$T/map.lua" && { has "$T/out" "kernels	0	allocs	true"; has "$T/out" "none	0"; }
finish
