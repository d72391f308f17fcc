# A scenario's default budgets grow with its trace (lua_host_limits_for_trace): a script that needs
# more than the 512 MiB default runs against a trace large enough to allow it, and is stopped
# without a trace (`run`) or under an explicit --max-memory.
. "$TESTS_DIR/cli/lib.sh"

# 800,000 events: a default memory budget of 800,000 KiB (781.3 MiB) for a scenario about them,
# which holds their events in memory (68 MiB) as its trace
expect 0 gen --events 800000 --seed 1 --name big
cat >"$T/hold.lua" <<'LUA'
-- holds 600 MiB of strings, more than the default budget and less than the trace's
local keep, kib = {}, ('x'):rep(1024)
for i = 1, 600 do keep[i] = kib:rep(1024) end -- each a string of its own
memplay.variant('recorded', memplay.trace():replay{})
print('held ' .. #keep .. ' MiB')
LUA
if expect 0 whatif big "$T/hold.lua" --no-save; then has "$T/out" "held 600 MiB"; fi
if expect 1 run "$T/hold.lua"; then
  has "$T/err" "memory budget of 512.0 MiB exceeded"
  has "$T/err" "hold.lua:3:"
fi
if expect 1 whatif big "$T/hold.lua" --no-save --max-memory 512MiB; then
  has "$T/err" "memory budget of 512.0 MiB exceeded"
fi
# a comparison's scenario cells get the same budgets
cat >"$T/hold_scenario.lua" <<'LUA'
local S = memplay.scenario_context()
local keep, kib = {}, ('x'):rep(1024)
for i = 1, 600 do keep[i] = kib:rep(1024) end
S:record('held', S:replay(S.trace), {})
LUA
if expect 0 compare big --policy ideal --scenario "$T/hold_scenario.lua" --no-save --quiet; then
  has "$T/out" "0 failed"
fi
finish
