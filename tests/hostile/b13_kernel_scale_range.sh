# B13: kernel_scale = 1e20 made the time model predict a faster step (a wrapped product). Factors
# are range-checked (kernel_scale in (0, 1000]: a usage error naming it) and scaled durations are
# computed in doubles held below 2^62 ns, so a larger factor never predicts a shorter time.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
for f in 1e20 1001 inf nan -1 0; do
  expect 2 replay s --timing "kernel_scale=$f" && has "$T/err" "kernel_scale"
done
step() { expect 0 replay s --timing "kernel_scale=$1" --json && json_get step_time_s; }
a=$(step 1) b=$(step 1000)
awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > 100 * a) }' || fail "kernel_scale=1000 gives $b s, 1 gives $a s"
cat >"$T/t.lua" <<'LUA'
local t = memplay.store():trace("s")
local base = t:replay{}.step_time_s
local big = t:scale_time{kind = "kernel", factor = 1e9}:replay{}.step_time_s
print("slower", big > base, big < 1e12)
LUA
expect 0 run "$T/t.lua" && has "$T/out" "slower	true	true"
finish
