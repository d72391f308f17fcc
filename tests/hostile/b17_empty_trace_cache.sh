# B17: t:cache() of a trace with no events (its array is empty) was read as something else (a
# use after free); every bundled what-if scenario on a 0-event trace ends with a verdict or a
# clean error, never a signal.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
cat >"$T/cache.lua" <<'LUA'
local t = memplay.store():trace("s"):map(function() return false end)
local c = t:cache()
print("cached", c:count(), c:cache():count())
local r = c:scale{factor = 2}:replay{allocator = "torch"}
print("peak", r.peak_allocated_bytes)
t:save("empty")
LUA
expect 0 run "$T/cache.lua" && { has "$T/out" "cached	0"; has "$T/out" "peak	0"; }
for f in "$MEMPLAY_SRC"/scripts/*.lua; do
  MEMPLAY_SCRIPTS="$MEMPLAY_SRC/scripts" timeout 60 "$MEMPLAY" whatif empty "$f" --no-save >"$T/out" 2>"$T/err"
  rc=$?
  case $rc in 0 | 1 | 2 | 3) ;; *) fail "$(basename "$f") on a 0-event trace: exit $rc: $(head -c 300 "$T/err")" ;; esac
done
finish
