# Bad scripts fail cleanly: a clear error naming the file and line, exit 1, the store untouched.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
digest=$(store_digest)

# bad NAME EXPECTED-LINE EXPECTED-MESSAGE [OPTIONS...] < script: whatif fails with FILE:LINE and the message
n=0
bad() {
  n=$((n + 1))
  local name=$1 line=$2 msg=$3
  shift 3
  local f="$T/$name.lua"
  cat >"$f"
  if expect 1 whatif sample "$f" "$@"; then
    [ -n "$line" ] && has "$T/err" "$name.lua:$line:"
    has "$T/err" "$msg"
  fi
  [ -s "$T/out" ] && grep -q "stored" "$T/out" && fail "$name: printed that it stored runs"
  [ "$(store_digest)" = "$digest" ] || fail "store changed after $name"
}

bad syntax 3 "unexpected symbol near '='" <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
local x = = 2
EOF

bad runtime 3 "attempt to index a nil value" <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
local v = t.nothing.field
EOF

bad loop 4 "instruction budget" --max-instructions 1000000 <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
local n = 0
while true do n = n + 1 end
EOF
has "$T/err" "--max-instructions"

bad swallowed "" "instruction budget" --max-instructions 1000000 <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
for i = 1, 1000 do pcall(function() while true do end end) end
EOF

bad timeout 3 "time budget" --timeout 0.3 --max-instructions 100000000000 <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
while true do end
EOF

bad memory 5 "memory budget of 16.0 MiB exceeded" --max-memory 16MiB <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
local keep = {}
for i = 1, 1e9 do
  keep[i] = ('x'):rep(100) .. i
end
EOF
has "$T/err" "--max-memory"

bad callback 2 "memory budget" --max-memory 16MiB <<'EOF'
local keep = {}
memplay.trace():map(function(ev) keep[#keep + 1] = ('y'):rep(10000) end):replay{}
EOF

bad wrong_args 1 "bad argument #1 to 'scale'" <<'EOF'
memplay.trace():scale(42)
EOF

bad wrong_option 2 "unknown option 'factr'" <<'EOF'
local t = memplay.trace()
t:scale{category = 'activation', factr = 2}
EOF

bad wrong_value 1 "unknown value 'activations'" <<'EOF'
memplay.trace():scale{category = 'activations', factor = 2}
EOF

bad wrong_allocator 1 "unknown allocator 'torchy'" <<'EOF'
memplay.trace():replay{allocator = 'torchy'}
EOF

bad undefined_global 2 "undefined global 'trace'" <<'EOF'
local x = 1
local r = trace:replay{}
EOF

bad forbidden 1 "undefined global 'io'" <<'EOF'
io.open('/etc/passwd')
EOF

bad no_variants "" "recorded no variants" <<'EOF'
local r = memplay.trace():replay{}
EOF

bad derived_first 2 "first variant must replay the unchanged trace" <<'EOF'
local t = memplay.trace()
memplay.variant('scaled', t:scale{factor = 2}:replay{})
EOF

bad late_error 4 "boom" <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
t:scale{category = 'activation', factor = 2}:save('never-kept')
error('boom')
EOF

bad set_type 1 "--set new_batch=many: an integer is expected" --set new_batch=many <<'EOF'
local b = memplay.param('new_batch', 8)
EOF

bad set_bool 1 "--set fast=maybe: true or false is expected" --set fast=maybe <<'EOF'
local b = memplay.param('fast', false)
EOF

bad set_unknown "" "'bacth' is not a parameter" --set bacth=4 <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
EOF

# the bundled scenarios check their own parameters
if expect 1 whatif sample batch_size --set new_batch=lots; then
  has "$T/err" "batch_size.lua:"
  has "$T/err" "--set new_batch=lots: an integer is expected"
fi
if expect 1 whatif sample max_batch --set capacity=huge; then
  has "$T/err" "max_batch.lua:"
  has "$T/err" "--set capacity=huge: a size"
fi
if expect 1 whatif sample batch_size --set allocator=torchy; then
  has "$T/err" "batch_size.lua:"
  has "$T/err" "--set allocator=torchy: unknown allocator"
fi
if expect 1 whatif sample mixed_precision --set precision=fp8; then has "$T/err" "precision: bf16 or fp16"; fi
if expect 1 whatif sample scale_fit; then has "$T/err" "--set size=N"; fi
[ "$(store_digest)" = "$digest" ] || fail "store changed after a bad parameter"

# a precompiled chunk is refused
printf '\033Lua\124\000\031\223\r\n\032\n' >"$T/binary.lua"
if expect 1 whatif sample "$T/binary.lua"; then has "$T/err" "precompiled (binary) chunks are not accepted"; fi

# usage errors: exit 2
expect 2 whatif sample
expect 2 whatif sample x.lua --set novalue
has "$T/err" "--set wants KEY=VALUE"
expect 2 whatif sample x.lua --max-memory tiny
expect 2 run
# missing things: exit 1
if expect 1 whatif nosuchtrace batch_size; then has "$T/err" "no trace 'nosuchtrace'"; fi
if expect 1 whatif sample batch_size --device NoSuchGPU; then has "$T/err" "no device profile 'NoSuchGPU'"; fi
if expect 1 whatif sample "$T/nosuchscript.lua"; then has "$T/err" "cannot open script"; fi
[ "$(store_digest)" = "$digest" ] || fail "store changed after usage errors"

finish
