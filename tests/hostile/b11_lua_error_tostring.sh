# B11: an error object whose __tostring itself errors (or loops) is a clean error, not an abort.
. "$TESTS_DIR/cli/lib.sh"
cat >"$T/e1.lua" <<'LUA'
error(setmetatable({}, {__tostring = function() error("inner") end}))
LUA
cat >"$T/e2.lua" <<'LUA'
error(setmetatable({}, {__tostring = function() while true do end end}))
LUA
cat >"$T/e3.lua" <<'LUA'
error(setmetatable({}, {__tostring = function() return "a readable failure" end}))
LUA
expect 1 run "$T/e1.lua" && has "$T/err" "__tostring failed"
timeout 60 "$MEMPLAY" run --timeout 2 "$T/e2.lua" >"$T/out" 2>"$T/err"
[ $? = 1 ] || fail "a looping __tostring: exit $?"
expect 1 run "$T/e3.lua" && has "$T/err" "a readable failure"
finish
