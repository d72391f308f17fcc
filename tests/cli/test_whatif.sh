# whatif and run: every bundled scenario on the sample trace, its table, its stored runs and
# the facts it computes; --json; result files; scripts found by name.
. "$TESTS_DIR/cli/lib.sh"
SCRIPTS="$MEMPLAY_SRC/scripts"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample

q() { sqlite3 "$DB" "$1"; }

# scenario NAME [ARGS...]: runs it on the sample, checks the table and the stored runs
scenario() {
  local name=$1
  shift
  local before
  before=$(q "SELECT count(*) FROM runs WHERE scenario = '$name'")
  if expect 0 whatif sample "$SCRIPTS/$name.lua" "$@"; then
    has "$T/out" "variant"
    has "$T/out" "peak allocated"
    has "$T/out" "peak reserved"
    has "$T/out" "step time"
    has "$T/out" "samples/s"
    has "$T/out" "assumptions:"
    has "$T/out" "stored"
    local after
    after=$(q "SELECT count(*) FROM runs WHERE scenario = '$name' AND kind = 'whatif'")
    [ "$after" -gt "$before" ] || fail "$name stored no runs"
    [ -s "$T/err" ] && fail "$name wrote to stderr: $(head -c 300 "$T/err")"
  fi
}

scenario batch_size --set new_batch=8
scenario max_batch --set capacity=40GiB --set allocator=cuda
scenario memory_growth
scenario pinned_staging
scenario mixed_precision
scenario checkpointing --set allocator=cuda
scenario grad_accumulation --set allocator=cuda --set k=4
scenario allocator_settings
scenario scale_fit --set size=1024 --set at=2048 --set unit=batch

# batch_size at 2x: activations at the peak rise, parameters (and optimizer state) do not
act() { q "SELECT json_extract(result, '\$.at_peak.by_category.$1') FROM runs WHERE scenario = 'batch_size' AND variant = '$2'"; }
a0=$(act activation 'batch 4 (recorded)')
a1=$(act activation 'batch 8')
p0=$(act parameter 'batch 4 (recorded)')
p1=$(act parameter 'batch 8')
o0=$(act optimizer_state 'batch 4 (recorded)')
o1=$(act optimizer_state 'batch 8')
[ -n "$a0" ] && [ -n "$a1" ] && [ "$a1" -gt "$a0" ] || fail "batch_size: activations at the peak did not rise ($a0 -> $a1)"
[ "$p0" = "$p1" ] || fail "batch_size: parameters changed ($p0 -> $p1)"
[ "$o0" = "$o1" ] || fail "batch_size: optimizer state changed ($o0 -> $o1)"
# twice the batch: close to twice the activations (the allocator's rounding aside)
awk -v a="$a0" -v b="$a1" 'BEGIN { r = b / a; exit !(r > 1.9 && r < 2.1) }' || fail "batch_size: activations x$(awk -v a="$a0" -v b="$a1" 'BEGIN{print b/a}') at 2x batch"

# max_batch: the answer fits, the batch after it does not
fit=$(q "SELECT ooms FROM runs WHERE scenario = 'max_batch' AND variant LIKE '%largest that fits%' ORDER BY id DESC LIMIT 1")
over=$(q "SELECT ooms FROM runs WHERE scenario = 'max_batch' AND variant LIKE '%does not fit%' ORDER BY id DESC LIMIT 1")
[ "$fit" = 0 ] || fail "max_batch: the answer has $fit OOMs"
[ -n "$over" ] && [ "$over" -gt 0 ] || fail "max_batch: the batch after the answer fits ($over)"

# memory_growth: growth off grabs nearly all memory; two processes without growth fail; with growth both run
g_off=$(q "SELECT peak_reserved FROM runs WHERE scenario = 'memory_growth' AND variant LIKE 'one process, growth off%' ORDER BY id DESC LIMIT 1")
g_on=$(q "SELECT peak_reserved FROM runs WHERE scenario = 'memory_growth' AND variant = 'one process, allow_growth' ORDER BY id DESC LIMIT 1")
two_off=$(q "SELECT ooms FROM runs WHERE scenario = 'memory_growth' AND variant = 'two processes, growth off' ORDER BY id DESC LIMIT 1")
two_on=$(q "SELECT ooms FROM runs WHERE scenario = 'memory_growth' AND variant = 'two processes, allow_growth' ORDER BY id DESC LIMIT 1")
[ "$g_off" -gt "$g_on" ] || fail "memory_growth: growth off reserves $g_off, growth on $g_on"
[ "$two_off" -gt 0 ] || fail "memory_growth: two processes without growth did not fail"
[ "$two_on" = 0 ] || fail "memory_growth: two processes with growth failed ($two_on)"

# pinned_staging: the staging buffers are pinned host memory
pin=$(q "SELECT json_extract(result, '\$.host_pinned_peak_bytes') FROM runs WHERE scenario = 'pinned_staging' AND variant LIKE '%staging%' ORDER BY id DESC LIMIT 1")
[ "$pin" -ge 4194304 ] || fail "pinned_staging: pinned host memory $pin"

# checkpointing and gradient accumulation lower the peak of the sample
for s in checkpointing grad_accumulation; do
  b=$(q "SELECT peak_allocated FROM runs WHERE scenario = '$s' ORDER BY id ASC LIMIT 1")
  l=$(q "SELECT peak_allocated FROM runs WHERE scenario = '$s' ORDER BY id DESC LIMIT 1")
  [ "$l" -lt "$b" ] || fail "$s: peak $b -> $l"
done

# with a device: step time and throughput, the capacity from the device
if expect 0 whatif sample batch_size --no-save --device A100-80GB; then
  has "$T/out" "fits on A100-80GB"
  grep -q "batch 8 .* ms " "$T/out" || fail "batch_size on a device: no step time: $(cat "$T/out")"
fi
if expect 0 whatif sample batch_size --json --no-save --device A100-80GB; then
  has "$T/out" '"step_time_s":'
  has "$T/out" '"samples_per_s":'
  has "$T/out" '"device":"A100-80GB"'
fi

# a trace that records no allocations (a profile of kernels and copies): every scenario still
# runs; gradient accumulation repeats the step's kernels from its first one
grep -v '"kind":"alloc"\|"kind":"free"' "$MEMPLAY_SRC/traces/sample.jsonl" | sed 's/"name":"sample"/"name":"kernels"/' > "$T/kernels.jsonl"
expect 0 import "$T/kernels.jsonl" --name kernels
for s in batch_size max_batch memory_growth pinned_staging mixed_precision checkpointing grad_accumulation allocator_settings; do
  expect 0 whatif kernels $s --no-save --device A100-80GB && has "$T/out" "variant"
done
if expect 0 whatif kernels grad_accumulation --no-save --device A100-80GB --set k=4; then
  has "$T/out" "forward taken to begin at the step's first kernel"
  b=$(grep '^as recorded' "$T/out" | grep -o '[0-9.]* ms' | head -1 | cut -d' ' -f1)
  a=$(grep '^4 micro-batches' "$T/out" | grep -o '[0-9.]* ms' | head -1 | cut -d' ' -f1)
  awk -v a="$a" -v b="$b" 'BEGIN { exit !(a > b) }' || fail "grad_accumulation without allocations: step time $b -> $a ms"
fi

# --json: one object, the first variant the unchanged trace, the last the answer
if expect 0 whatif sample batch_size --json --no-save --set new_batch=2; then
  has "$T/out" '{"scenario":"batch_size"'
  has "$T/out" '"variants":[{"name":"batch 4 (recorded)","trace":"sample"'
  has "$T/out" '"peak_allocated_bytes":'
  has "$T/out" '"assumptions":['
  grep -q '"name":"batch 2"' "$T/out" || fail "--json lacks the answer variant"
  [ "$(wc -l <"$T/out")" = 1 ] || fail "--json printed more than one line"
  has "$T/err" "batch size: 4 -> 2" # the table goes to stderr
fi

# a bundled scenario by name; --out for result files
if expect 0 whatif sample batch_size --no-save; then has "$T/out" "batch 8"; fi
cat >"$T/files.lua" <<'EOF'
local t = memplay.trace()
local r = t:replay{}
memplay.variant('recorded', r)
memplay.write_csv('peaks.csv', {{name = 'recorded', peak = r.peak_allocated_bytes}})
memplay.write_json('peaks.json', {peak = r.peak_allocated_bytes})
EOF
if expect 0 whatif sample "$T/files.lua" --out "$T/results"; then
  [ -f "$T/results/peaks.csv" ] || fail "--out: no peaks.csv"
  has "$T/results/peaks.csv" "name,peak"
  has "$T/results/peaks.json" '"peak":'
fi
expect 1 whatif sample "$T/files.lua" && true
has "$T/err" "--out DIR"

# run: arguments, the store, no trace
cat >"$T/args.lua" <<'EOF'
local a, b = ...
print('args', a, b, #arg)
print('traces', #memplay.store():traces())
EOF
if expect 0 run "$T/args.lua" one two; then
  has "$T/out" "args	one	two	2"
  has "$T/out" "traces	"
fi
# --no-save keeps traces a script saves and stores no runs
cat >"$T/save.lua" <<'EOF'
local t = memplay.trace()
memplay.variant('recorded', t:replay{})
t:scale{category = 'activation', factor = 2}:save('sample-double')
EOF
runs=$(q "SELECT count(*) FROM runs")
expect 0 whatif sample "$T/save.lua" --no-save
[ "$(q "SELECT count(*) FROM runs")" = "$runs" ] || fail "--no-save stored runs"
[ "$(q "SELECT count(*) FROM traces WHERE name = 'sample-double'")" = 1 ] || fail "the saved trace is missing"
if expect 0 replay sample-double --allocator ideal; then has "$T/out" "peak allocated"; fi

# Scenarios that go step by step read each step's allocations, not every allocation once per
# step, and walk them in seq order through memplay.order: on 200,000 generated events (267
# steps) checkpointing takes 10-15 M Lua instructions and mixed_precision 15-20 M, where sorting
# {seq, delta} pairs with a Lua comparator took 20-30 M and reading every allocation per step
# 100-200 M (a 1 M-event trace then spent the default budget of 2,000 M). A budget, not a time:
# the count does not depend on the machine.
expect 0 --db "$T/steps.db" gen --events 200000 --seed 1 --name steps
for name in checkpointing mixed_precision; do
  expect 0 --db "$T/steps.db" whatif steps "$name" --no-save --max-instructions 25000000 ||
    fail "$name spent more than 25 M instructions on 200,000 events"
done

finish
