# B08, B09: finalizers run outside every budget (Lua turns hooks off in __gc, and runs the last
# ones at close), so objects made in a late __gc leaked and an endless __gc ignored --timeout.
# setmetatable now refuses a __gc: a clean error at the line, quickly, nothing leaked.
. "$TESTS_DIR/cli/lib.sh"
cat >"$T/late.lua" <<'LUA'
keep = setmetatable({}, {__gc = function() made = setmetatable({}, {__gc = function() more = {1, 2, 3} end}) end})
LUA
cat >"$T/endless.lua" <<'LUA'
local ok = pcall(setmetatable, {}, {__gc = function() while true do end end})
print("refused", not ok)
setmetatable({}, {__gc = function() while true do end end})
LUA
cat >"$T/later.lua" <<'LUA'
local mt = {}
local x = setmetatable({}, mt)
mt.__gc = function() while true do end end -- a __gc added later is never called (Lua's rule)
print("ok")
LUA
expect 1 run "$T/late.lua" && has "$T/err" "late.lua:1: setmetatable: finalizers (__gc) are not available"
timeout 30 "$MEMPLAY" run --timeout 2 "$T/endless.lua" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "endless __gc: exit $rc"
has "$T/out" "refused	true"
has "$T/err" "endless.lua:3:"
timeout 30 "$MEMPLAY" run --timeout 2 "$T/later.lua" >"$T/out" 2>"$T/err"
[ $? = 0 ] || fail "a __gc set after setmetatable: $(cat "$T/err")"
finish
