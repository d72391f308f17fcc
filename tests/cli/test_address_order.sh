# Which way the simulated driver hands out addresses (replay --address-order, docs/allocators.md "The
# simulated device"): the torch model's choice between equal free blocks follows it, a trace's
# recorded segments decide it when they tell, else it is down, and the option wins.
. "$TESTS_DIR/cli/lib.sh"

MiB=1048576
# two 20 MiB segments, both freed, one taken again (the lower address of the two), then empty_cache
# gives back the other: which one the model kept shows which way the addresses went. SEGMENTS: the
# recorded segment_alloc lines' addresses, in order.
trace() {
  local name=$1 ts=0
  shift
  echo "{\"memplay\":1,\"name\":\"$name\",\"allocator\":\"torch\"}"
  for a in "$@"; do
    ts=$((ts + 1))
    echo "{\"kind\":\"segment_alloc\",\"ts\":$ts,\"addr\":$a,\"size\":$((20 * MiB))}"
  done
  echo "{\"kind\":\"alloc\",\"ts\":100,\"addr\":1,\"size\":$((20 * MiB))}"
  echo "{\"kind\":\"alloc\",\"ts\":101,\"addr\":2,\"size\":$((20 * MiB))}"
  echo "{\"kind\":\"free\",\"ts\":102,\"addr\":1}"
  echo "{\"kind\":\"free\",\"ts\":103,\"addr\":2}"
  echo "{\"kind\":\"alloc\",\"ts\":104,\"addr\":3,\"size\":$((20 * MiB))}"
  echo "{\"kind\":\"empty_cache\",\"ts\":105}"
}
G=$((1 << 30))
trace plain >"$T/plain.jsonl"
trace rec_up $((20 * G)) $((21 * G)) $((22 * G)) $((23 * G)) >"$T/up.jsonl"
trace rec_down $((23 * G)) $((22 * G)) $((21 * G)) $((20 * G)) >"$T/down.jsonl"
trace rec_two $((20 * G)) $((21 * G)) >"$T/two.jsonl"
for f in plain up down two; do expect 0 import "$T/$f.jsonl"; done

# kept NAME ORDER SOURCE [OPTIONS]: the replay's order and why, and which segment it kept: the
# segment given back by empty_cache is the other one (first or second).
kept() {
  local name=$1 order=$2 source=$3 given_back=$4
  shift 4
  expect 0 replay "$name" --allocator torch --no-save --json --device-calls "$T/calls" "$@"
  [ "$(json_get address_order)/$(json_get address_order_source)" = "$order/$source" ] ||
    fail "$name $*: addresses $(json_get address_order) from $(json_get address_order_source), wanted $order from $source"
  local first second freed
  first=$(awk '$1 == "sim" && $4 == "malloc" { print $6 }' "$T/calls" | sed -n 1p)
  second=$(awk '$1 == "sim" && $4 == "malloc" { print $6 }' "$T/calls" | sed -n 2p)
  freed=$(awk '$1 == "sim" && $4 == "free" { print $6 }' "$T/calls")
  if [ "$order" = down ]; then
    [ "$((second))" -lt "$((first))" ] || fail "$name $*: down, yet the second segment $second is above the first $first"
  else
    [ "$((second))" -gt "$((first))" ] || fail "$name $*: up, yet the second segment $second is below the first $first"
  fi
  if [ "$given_back" = first ]; then want=$first; else want=$second; fi
  [ "$freed" = "$want" ] || fail "$name $*: empty_cache gave back $freed, wanted the $given_back segment ($want)"
}
# down: the second segment is the lower, so the request takes it and the first is given back
kept plain down default first
kept rec_down down recorded first
kept rec_two down default first # two segments do not tell
kept rec_up up recorded second
kept rec_up down option first --address-order down
kept plain up option second --address-order up
kept rec_up up recorded second --address-order auto

# the text report says which, and why
expect 0 replay rec_up --allocator torch --no-save
has "$T/out" "addresses           up (the way the trace's recorded segments went)"
expect 0 replay plain --allocator torch --no-save
has "$T/out" "addresses           down (as the Linux driver hands them out)"

# Lua: the option, and the result's fields
cat >"$T/order.lua" <<'EOF'
local s = memplay.store()
local r = s:trace("plain"):replay{allocator = "torch", address_order = "up"}
assert(r.address_order == "up" and r.address_order_source == "option", r.address_order)
r = s:trace("rec_up"):replay{allocator = "torch"}
assert(r.address_order == "up" and r.address_order_source == "recorded", r.address_order_source)
r = s:trace("plain"):cache():replay{allocator = "torch"}
assert(r.address_order == "down" and r.address_order_source == "default", r.address_order_source)
print("ok")
EOF
expect 0 run "$T/order.lua"
has "$T/out" "ok"
# a derived trace goes its source's way: in memory through its source's row, saved through the
# order t:save() writes into its attrs (it has no recorded segments of its own), and so does a
# trace derived from a saved one, and a saved trace exported and imported again
cat >"$T/derived.lua" <<'EOF'
local s = memplay.store()
local r = s:trace("rec_up"):scale{factor = 1}:replay{allocator = "torch"}
assert(r.address_order == "up" and r.address_order_source == "recorded", r.address_order_source)
local d = s:trace("rec_up"):scale{factor = 1}:save("rec_up_saved")
r = d:replay{allocator = "torch"}
assert(r.address_order == "up" and r.address_order_source == "derived", r.address_order_source)
local d2 = d:scale{factor = 1}:save("rec_up_saved_again")
r = d2:replay{allocator = "torch"}
assert(r.address_order == "up" and r.address_order_source == "derived", r.address_order_source)
r = s:trace("plain"):scale{factor = 1}:save("plain_saved"):replay{allocator = "torch"}
assert(r.address_order == "down" and r.address_order_source == "default", r.address_order_source)
r = s:trace("rec_down"):scale{factor = 1}:save("rec_down_saved"):replay{allocator = "torch"}
assert(r.address_order == "down" and r.address_order_source == "derived", r.address_order_source)
print("ok")
EOF
expect 0 run "$T/derived.lua"
has "$T/out" "ok"
kept rec_up_saved up derived second
kept rec_up_saved down option first --address-order down
expect 0 replay rec_up_saved --allocator torch --no-save
has "$T/out" "addresses           up (the way its source trace's recorded segments went)"
expect 0 export rec_up_saved_again -o "$T/again.jsonl"
expect 0 --db "$T/other.db" import "$T/again.jsonl"
expect 0 --db "$T/other.db" replay rec_up_saved_again --allocator torch --no-save
has "$T/out" "addresses           up (the way its source trace's recorded segments went)"

cat >"$T/bad.lua" <<'EOF'
memplay.store():trace("plain"):replay{allocator = "torch", address_order = "left"}
EOF
expect 1 run "$T/bad.lua"
has "$T/err" "'address_order' must be 'auto', 'up' or 'down'"

# a bad value on the command line is a usage error
expect 2 replay plain --address-order left --no-save
has "$T/err" "--address-order wants auto, up or down, not 'left'"
finish
