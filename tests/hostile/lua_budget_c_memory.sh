# Lua's memory budget bounds the C memory memplay holds for a script too: events kept by
# t:cache() count with the Lua heap, so caching past --max-memory is a memory error.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
cat >"$T/cache.lua" <<'LUA'
local t = memplay.store():trace("s")
local keep = {}
for i = 1, 40 do keep[i] = t:scale{factor = i}:cache() end
print("kept", #keep)
LUA
expect 1 run --max-memory 4MiB "$T/cache.lua" && { has "$T/err" "cache.lua:3:"; has "$T/err" "memory budget of 4.0 MiB"; }
expect 0 run --max-memory 64MiB "$T/cache.lua" && has "$T/out" "kept	40"
finish
