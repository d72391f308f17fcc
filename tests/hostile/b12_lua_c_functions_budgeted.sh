# B12: C functions that can run long are held to the budgets: table.move charges every element
# (to math.maxinteger it spends the instruction budget), a backtracking pattern is refused up
# front, and anything else stuck in C past --timeout ends the run (exit 1) just after its deadline.
. "$TESTS_DIR/cli/lib.sh"
cat >"$T/move.lua" <<'LUA'
local t = table.move({1, 2, 3}, 1, 3, 2)
print("moved", t[1], t[2], t[3], t[4])
table.move({}, 1, math.maxinteger - 1, 1)
LUA
cat >"$T/find.lua" <<'LUA'
print("find", ("key=value"):match("^(%w+)=(.*)$"), ("a-b [c]"):gsub("[%-%[%]]", ""))
local s = ("a"):rep(30000)
string.find(s, ("a*"):rep(12) .. "b")
LUA
cat >"$T/quad.lua" <<'LUA'
local s = ("a"):rep(3000000)
print(s:find("a*b"))
LUA
start=$(date +%s)
timeout 60 "$MEMPLAY" run --max-instructions 20000000 "$T/move.lua" >"$T/out" 2>"$T/err"
[ $? = 1 ] || fail "table.move to maxinteger: not stopped"
has "$T/out" "moved	1	1	2	3"
has "$T/err" "move.lua:3: script stopped: instruction budget"
expect 1 run "$T/find.lua" && { has "$T/out" "find	key	ab c	3"; has "$T/err" "find.lua:3:"; has "$T/err" "backtracking"; }
timeout 60 "$MEMPLAY" run --timeout 1 "$T/quad.lua" >"$T/out" 2>"$T/err"
[ $? = 1 ] || fail "a long pattern search: not stopped"
has "$T/err" "time budget of 1 s spent"
[ $(($(date +%s) - start)) -lt 30 ] || fail "the budgets took $(($(date +%s) - start)) s to act"
finish
